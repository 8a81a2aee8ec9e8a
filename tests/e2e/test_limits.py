#!/usr/bin/env python3
"""The configured limits take effect: max_request_line (414),
max_header_bytes and max_headers (431), and a small buffer_size still
serves large files and ranges exactly."""

import sys

import orcdtest
from orcdtest import build_request, check, eq

CONF = ("max_request_line 256;\nmax_header_bytes 1k;\nmax_headers 5;\n"
        "buffer_size 4k;\n")


def status_and_closed(srv, data):
    r, closed = srv.exchange(data)
    check(r is not None, "no response")
    return r.status, closed


@orcdtest.case
def request_line_limit(srv):
    # "GET " + path + " HTTP/1.1" is 13 bytes plus the path.
    ok = "/" + "a" * (256 - 13 - 1)
    eq(len("GET %s HTTP/1.1" % ok), 256, "fixture")
    eq(status_and_closed(srv, build_request("GET", ok,
                                            {"Connection": "close"}))[0],
       404, "request line of exactly max_request_line")
    eq(status_and_closed(srv, build_request("GET", ok + "a")),
       (414, True), "one byte over max_request_line")
    eq(status_and_closed(srv, build_request("GET", "/" + "a" * 2000)),
       (414, True), "far over max_request_line")


@orcdtest.case
def header_count_limit(srv):
    # Host counts as one of the five.
    four = [("X-%d" % i, "v") for i in range(4)]
    eq(srv.get("/hello.txt", dict(four[:3])).status, 200,
       "Host + Connection + 3 fields")
    eq(status_and_closed(srv, build_request("GET", "/hello.txt",
                                            four + [("X-5", "v")])),
       (431, True), "6 fields with max_headers 5")


@orcdtest.case
def header_bytes_limit(srv):
    eq(srv.get("/hello.txt", {"X-Pad": "p" * 600}).status, 200,
       "head under 1 KiB")
    eq(status_and_closed(srv, build_request("GET", "/hello.txt",
                                            {"X-Pad": "p" * 1100})),
       (431, True), "head over max_header_bytes")
    # Spread over several fields: the whole head counts.
    eq(status_and_closed(srv, build_request(
        "GET", "/hello.txt", [("X-%d" % i, "p" * 300) for i in range(4)])),
       (431, True), "four 300-byte fields")


@orcdtest.case
def small_buffer_serves_big_file(srv):
    with open(srv.path("big.bin"), "rb") as f:
        big = f.read()
    r = srv.get("/big.bin")
    check(r.status == 200 and r.body == big, "big.bin with buffer_size 4k")
    r = srv.get("/big.bin", {"Range": "bytes=4095-1052673"})
    eq(r.status, 206, "range with buffer_size 4k")
    check(r.body == big[4095:1052674], "range bytes with buffer_size 4k")


@orcdtest.case
def small_buffer_pipelining(srv):
    # More pipelined requests than fit in a 4 KiB buffer at once.
    reqs = b"".join(build_request("GET", "/hello.txt", {"X-Pad": "p" * 100})
                    for _ in range(60))
    with srv.conn() as c:
        c.send(reqs)
        for i in range(60):
            r = c.read_response()
            check(r is not None and r.body == b"hello, world\n",
                  "pipelined response %d: %r" % (i, r))


if __name__ == "__main__":
    sys.exit(orcdtest.run(lambda: orcdtest.Orcd(conf=CONF)))
