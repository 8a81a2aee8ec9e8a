#!/usr/bin/env python3
"""Range requests (RFC 9110 section 14): single byte ranges, 416, If-Range,
unknown units, multiple ranges (answered with a plain 200, as orcd(8)
says, or 416 when none overlaps the file),
and exact bytes far into a large file."""

import os
import sys

import orcdtest
from orcdtest import build_request, check, eq, http_date

DATA = bytes(range(256)) * 4  # data.bin in the fixture site
SIZE = len(DATA)
MTIME = 1600000000


def rng(srv, spec, path="/data.bin", extra=None, method="GET"):
    hdrs = {"Range": spec}
    hdrs.update(extra or {})
    # Follow with a plain request: a body longer than Content-Length
    # would corrupt it.
    with srv.conn() as c:
        c.send(build_request(method, path, hdrs)
               + build_request("GET", "/hello.txt", {"Connection": "close"}))
        r = c.read_response(head_request=(method == "HEAD"))
        nxt = c.read_response()
        check(nxt is not None and nxt.body == b"hello, world\n",
              "response after the ranged one is corrupt: %r" % nxt)
    return r


def partial(r, first, last, total, data, what):
    eq(r.status, 206, what + ": status")
    eq(r.header("content-range"), "bytes %d-%d/%d" % (first, last, total),
       what + ": Content-Range")
    eq(r.header("content-length"), str(last - first + 1),
       what + ": Content-Length")
    check(r.body == data[first:last + 1], what + ": wrong bytes")


def full(r, data, what):
    eq(r.status, 200, what + ": status")
    check(r.header("content-range") is None,
          what + ": Content-Range on a 200")
    check(r.body == data, what + ": body is not the whole file")


@orcdtest.case
def first_last(srv):
    partial(rng(srv, "bytes=0-9"), 0, 9, SIZE, DATA, "0-9")
    partial(rng(srv, "bytes=100-100"), 100, 100, SIZE, DATA, "100-100")
    partial(rng(srv, "bytes=0-1023"), 0, 1023, SIZE, DATA, "0-1023")


@orcdtest.case
def open_ended(srv):
    partial(rng(srv, "bytes=10-"), 10, SIZE - 1, SIZE, DATA, "10-")
    partial(rng(srv, "bytes=1023-"), 1023, 1023, SIZE, DATA, "1023-")


@orcdtest.case
def suffix(srv):
    partial(rng(srv, "bytes=-5"), SIZE - 5, SIZE - 1, SIZE, DATA, "-5")
    partial(rng(srv, "bytes=-1"), SIZE - 1, SIZE - 1, SIZE, DATA, "-1")
    # A suffix longer than the file selects all of it.
    partial(rng(srv, "bytes=-5000"), 0, SIZE - 1, SIZE, DATA, "-5000")


@orcdtest.case
def last_beyond_end_clamped(srv):
    partial(rng(srv, "bytes=1000-5000"), 1000, SIZE - 1, SIZE, DATA,
            "1000-5000")
    partial(rng(srv, "bytes=0-99999999999999"), 0, SIZE - 1, SIZE, DATA,
            "0-huge")


@orcdtest.case
def head_with_range(srv):
    r = rng(srv, "bytes=0-9", method="HEAD")
    eq(r.status, 206, "HEAD range status")
    eq(r.header("content-range"), "bytes 0-9/%d" % SIZE, "Content-Range")
    eq(r.header("content-length"), "10", "Content-Length")


@orcdtest.case
def unsatisfiable_416(srv):
    for spec in ("bytes=1024-", "bytes=1024-2000", "bytes=5000-6000",
                 "bytes=-0"):
        r = rng(srv, spec)
        eq(r.status, 416, spec)
        eq(r.header("content-range"), "bytes */%d" % SIZE,
           spec + ": Content-Range")


@orcdtest.case
def empty_file_416(srv):
    r = rng(srv, "bytes=0-0", path="/empty.txt")
    eq(r.status, 416, "0-0 of an empty file")
    eq(r.header("content-range"), "bytes */0", "Content-Range")
    # A suffix of more than nothing is satisfiable even here (RFC 9110
    # 14.1.1); no 206 can carry zero bytes, so the Range is ignored.
    r = rng(srv, "bytes=-5", path="/empty.txt")
    eq(r.status, 200, "-5 of an empty file")
    eq(r.header("content-length"), "0", "Content-Length")
    eq(r.header("content-range"), None, "Content-Range")


@orcdtest.case
def range_keeps_connection(srv):
    with srv.conn() as c:
        for spec, first, last in (("bytes=0-9", 0, 9), ("bytes=-3", 1021,
                                  1023), ("bytes=2000-", None, None),
                                  ("bytes=5-5", 5, 5)):
            c.send(build_request("GET", "/data.bin", {"Range": spec}))
            r = c.read_response()
            check(r is not None, "closed before the answer to " + spec)
            if first is None:
                eq(r.status, 416, spec)
            else:
                partial(r, first, last, SIZE, DATA, spec)


@orcdtest.case
def if_range_current_etag_206(srv):
    etag = srv.get("/data.bin").header("etag")
    partial(rng(srv, "bytes=0-9", extra={"If-Range": etag}), 0, 9, SIZE,
            DATA, "If-Range current ETag")


@orcdtest.case
def if_range_old_etag_200(srv):
    srv.write_file("ir.bin", DATA, mtime=MTIME)
    old = srv.get("/ir.bin").header("etag")
    new_data = DATA[::-1]
    srv.write_file("ir.bin", new_data, mtime=MTIME + 60)
    check(srv.get("/ir.bin").header("etag") != old, "ETag did not change")
    full(rng(srv, "bytes=0-9", "/ir.bin", {"If-Range": old}), new_data,
         "If-Range old ETag")
    full(rng(srv, "bytes=0-9", "/ir.bin", {"If-Range": '"made-up"'}),
         new_data, "If-Range made-up ETag")


@orcdtest.case
def if_range_weak_etag_200(srv):
    # RFC 9110 13.1.5: If-Range uses the strong comparison.
    etag = srv.get("/data.bin").header("etag")
    full(rng(srv, "bytes=0-9", extra={"If-Range": "W/" + etag}), DATA,
         "If-Range weak ETag")


@orcdtest.case
def if_range_date(srv):
    srv.write_file("ird.bin", DATA, mtime=MTIME)
    partial(rng(srv, "bytes=0-9", "/ird.bin",
                {"If-Range": http_date(MTIME)}), 0, 9, SIZE, DATA,
            "If-Range == Last-Modified")
    # Any other date (earlier or later) is not an exact match.
    full(rng(srv, "bytes=0-9", "/ird.bin",
             {"If-Range": http_date(MTIME - 10)}), DATA, "If-Range earlier")
    full(rng(srv, "bytes=0-9", "/ird.bin",
             {"If-Range": http_date(MTIME + 10)}), DATA, "If-Range later")


@orcdtest.case
def unknown_unit_200(srv):
    for spec in ("items=0-1", "bytes 0-9", "Bytes=0-9x", "bytes=abc",
                 "bytes=9-5", "bytes=", "bytes=--5", "bytes=0-9;x"):
        full(rng(srv, spec), DATA, "Range: %s" % spec)


@orcdtest.case
def multiple_ranges_200(srv):
    # orcd answers several ranges with the whole representation, a 200
    # (orcd(8); RFC 9110 14.2 allows ignoring Range), never a 206: not
    # even a multipart one, which orcd does not make.
    for spec in ("bytes=0-1,5-6", "bytes=0-9, 20-29", "bytes=-5,0-1"):
        full(rng(srv, spec), DATA, spec)
    # ...but when none of them overlaps the file, 416 as for one (RFC
    # 9110 15.5.17; nginx too): a 200 hid that the client is wrong.
    size = len(DATA)
    for spec in ("bytes=%d-,%d-" % (size, size + 100),
                 "bytes=%d-%d, -0" % (size + 1, size + 5)):
        r = rng(srv, spec)
        eq((r.status, r.header("content-range")), (416, "bytes */%d" % size),
           spec)


@orcdtest.case
def range_not_applied_to_errors_or_304(srv):
    etag = srv.get("/data.bin").header("etag")
    r = rng(srv, "bytes=0-9", extra={"If-None-Match": etag})
    eq(r.status, 304, "INM match + Range")
    r = rng(srv, "bytes=0-9", path="/missing.bin")
    eq(r.status, 404, "Range on a missing file")


@orcdtest.case
def big_file_far_offsets(srv):
    with open(srv.path("big.bin"), "rb") as f:
        big = f.read()
    n = len(big)
    check(n > 2 * 1024 * 1024, "big.bin too small")
    for first, last in ((1048577, 1048577 + 99), (2000003, 2500000),
                        (n - 70000, n - 1)):
        partial(rng(srv, "bytes=%d-%d" % (first, last), "/big.bin"), first,
                last, n, big, "big %d-%d" % (first, last))
    partial(rng(srv, "bytes=3145729-", "/big.bin"), 3145729, n - 1, n, big,
            "big 3145729-")
    partial(rng(srv, "bytes=-1048579", "/big.bin"), n - 1048579, n - 1, n,
            big, "big suffix 1 MiB + 3")


@orcdtest.case
def range_larger_than_buffer_unaligned(srv):
    # A range crossing several per-connection buffers at odd offsets.
    with open(srv.path("big.bin"), "rb") as f:
        big = f.read()
    first, last = 65535 * 3 + 1, 65536 * 9 + 12345
    partial(rng(srv, "bytes=%d-%d" % (first, last), "/big.bin"), first, last,
            len(big), big, "unaligned multi-buffer range")
    check(os.path.getsize(srv.path("big.bin")) == len(big), "fixture")


@orcdtest.case
def offsets_beyond_4gib(srv):
    # A sparse 5 GiB file with marks across the 4 GiB boundary and near
    # the end: 64-bit sizes in the head and 64-bit sendfile offsets.
    size = 5 << 30
    b32 = 1 << 32
    mark_a = bytes(range(1, 201))
    mark_b = b"the end of a 5 GiB file\n"
    p = srv.path("sparse5g.bin")
    with open(p, "wb") as f:
        f.truncate(size)
        f.seek(b32 - 100)
        f.write(mark_a)
        f.seek(size - len(mark_b))
        f.write(mark_b)
    r = rng(srv, "bytes=%d-%d" % (b32 - 100, b32 + 99), "/sparse5g.bin")
    eq(r.status, 206, "range across 4 GiB")
    eq(r.header("content-range"), "bytes %d-%d/%d" % (b32 - 100, b32 + 99,
                                                       size), "Content-Range")
    eq(r.body, mark_a, "bytes across 4 GiB")
    r = rng(srv, "bytes=-%d" % len(mark_b), "/sparse5g.bin")
    eq((r.status, r.body), (206, mark_b), "suffix of a 5 GiB file")
    r = rng(srv, "bytes=%d-" % (size - 10), "/sparse5g.bin")
    eq(r.body, mark_b[-10:], "open range near 5 GiB")
    with srv.conn() as c:
        c.send(build_request("HEAD", "/sparse5g.bin", {"Connection":
                                                       "close"}))
        h = c.read_response(head_request=True)
    eq(h.header("content-length"), str(size), "Content-Length of 5 GiB")
    os.unlink(p)


if __name__ == "__main__":
    sys.exit(orcdtest.run())
