#!/usr/bin/env python3
"""Freshness: a change to a file completed before a request arrives is
visible to that request (rewrite in place, rename, growth, shrink, delete,
create), on new and on kept-alive connections; and a file that changes
while it is being sent never yields a body that disagrees with its
Content-Length."""

import os
import signal
import socket
import sys
import threading

import orcdtest
from orcdtest import build_request, check, eq

OLD = 1600000000  # pinned past mtime: the next write surely changes it


def pattern(n, seed):
    block = bytes(((i * 31 + seed) & 0xFF) for i in range(4096))
    return (block * (n // 4096 + 1))[:n]


def get_on(c, path):
    c.send(build_request("GET", path))
    r = c.read_response()
    check(r is not None, "connection closed before the answer to " + path)
    return r


def both(srv, c, path):
    """The same GET on the kept-alive connection and on a new one."""
    a = get_on(c, path)
    b = srv.get(path)
    eq((a.status, a.body, a.header("etag")),
       (b.status, b.body, b.header("etag")),
       "kept-alive vs new connection for " + path)
    return a


@orcdtest.case
def same_size_rewrite_in_place(srv):
    p = srv.write_file("f/inplace.txt", b"A" * 100, mtime=OLD)
    with srv.conn() as c:
        r1 = both(srv, c, "/f/inplace.txt")
        eq(r1.body, b"A" * 100, "before")
        ino = os.stat(p).st_ino
        with open(p, "r+b") as f:  # no truncate: same inode, same size
            f.write(b"B" * 100)
        eq(os.stat(p).st_ino, ino, "rewrite kept the inode")
        r2 = both(srv, c, "/f/inplace.txt")
        eq(r2.body, b"B" * 100, "after a same-size rewrite")
        check(r2.header("etag") != r1.header("etag"),
              "ETag unchanged after a same-size rewrite")
        check(r2.header("last-modified") != r1.header("last-modified"),
              "Last-Modified unchanged after a rewrite")
        # The old validator must no longer produce a 304.
        c.send(build_request("GET", "/f/inplace.txt",
                             {"If-None-Match": r1.header("etag")}))
        r3 = c.read_response()
        eq((r3.status, r3.body), (200, b"B" * 100), "INM with the old ETag")


@orcdtest.case
def rewrite_with_times_restored(srv):
    # Inode, size and times all as before: nothing in the file's facts
    # tells the versions apart, so a body kept in memory (the io_uring
    # engines keep small hot files) must go because of the change itself.
    p = srv.write_file("f/restored.txt", b"A" * 100, mtime=OLD)
    with srv.conn() as c:
        for _ in range(3):
            eq(get_on(c, "/f/restored.txt").body, b"A" * 100, "before")
        with open(p, "r+b") as f:
            f.write(b"B" * 100)
        os.utime(p, (OLD, OLD))
        eq(get_on(c, "/f/restored.txt").body, b"B" * 100,
           "after a rewrite with the times put back")
        eq(srv.get("/f/restored.txt").body, b"B" * 100,
           "on a new connection")


@orcdtest.case
def atomic_replace_by_rename(srv):
    p = srv.write_file("f/renamed.txt", b"old content\n", mtime=OLD)
    with srv.conn() as c:
        r1 = both(srv, c, "/f/renamed.txt")
        eq(r1.body, b"old content\n", "before")
        tmp = srv.write_file("f/.renamed.tmp", b"new content!\n", mtime=OLD)
        srv.rename(tmp, p)
        r2 = both(srv, c, "/f/renamed.txt")
        eq(r2.body, b"new content!\n", "after rename")
        check(r2.header("etag") != r1.header("etag"),
              "ETag unchanged after an atomic replace")
        # Same size, same pinned mtime: only the inode differs.
        tmp = srv.write_file("f/.renamed.tmp", b"NEW CONTENT!\n", mtime=OLD)
        srv.rename(tmp, p)
        r3 = both(srv, c, "/f/renamed.txt")
        eq(r3.body, b"NEW CONTENT!\n", "after a same-size, same-mtime rename")
        check(r3.header("etag") != r2.header("etag"),
              "ETag unchanged after a rename with equal size and mtime")


@orcdtest.case
def growth(srv):
    p = srv.write_file("f/grow.txt", b"12345", mtime=OLD)
    with srv.conn() as c:
        eq(both(srv, c, "/f/grow.txt").body, b"12345", "before")
        with open(p, "ab") as f:
            f.write(b"67890" * 1000)
        r = both(srv, c, "/f/grow.txt")
        eq(r.header("content-length"), str(5 + 5000), "Content-Length")
        eq(r.body, b"12345" + b"67890" * 1000, "after growth")


@orcdtest.case
def shrink(srv):
    p = srv.write_file("f/shrink.txt", b"x" * 100000, mtime=OLD)
    with srv.conn() as c:
        eq(len(both(srv, c, "/f/shrink.txt").body), 100000, "before")
        os.truncate(p, 10)
        r = both(srv, c, "/f/shrink.txt")
        eq(r.header("content-length"), "10", "Content-Length")
        eq(r.body, b"x" * 10, "after shrink")
        os.truncate(p, 0)
        r = both(srv, c, "/f/shrink.txt")
        eq((r.status, r.body), (200, b""), "after truncation to 0")


@orcdtest.case
def delete_then_create(srv):
    p = srv.write_file("f/gone.txt", b"here\n")
    with srv.conn() as c:
        eq(both(srv, c, "/f/gone.txt").status, 200, "before delete")
        os.unlink(p)
        eq(both(srv, c, "/f/gone.txt").status, 404, "after delete")
        srv.write_file("f/gone.txt", b"back\n")
        r = both(srv, c, "/f/gone.txt")
        eq((r.status, r.body), (200, b"back\n"), "after create")
        eq(both(srv, c, "/f/new-file.txt").status, 404, "never existed")
        srv.write_file("f/new-file.txt", b"fresh\n")
        eq(both(srv, c, "/f/new-file.txt").body, b"fresh\n", "created")


@orcdtest.case
def directory_changes(srv):
    with srv.conn() as c:
        eq(both(srv, c, "/f2/").status, 404, "before mkdir")
        srv.write_file("f2/index.html", b"<p>new dir</p>\n")
        eq(both(srv, c, "/f2/").body, b"<p>new dir</p>\n", "new index")
        os.unlink(srv.path("f2/index.html"))
        check(both(srv, c, "/f2/").status in (403, 404), "index removed")


@orcdtest.case
def times_only_change(srv):
    """touch -d: no byte changes, only the mtime (an inotify IN_ATTRIB)."""
    p = srv.write_file("f/touched.txt", b"same bytes\n", mtime=OLD)
    with srv.conn() as c:
        r1 = both(srv, c, "/f/touched.txt")
        os.utime(p, (OLD + 86400, OLD + 86400))
        r2 = both(srv, c, "/f/touched.txt")
        check(r2.header("last-modified") != r1.header("last-modified"),
              "Last-Modified unchanged after the mtime changed")
        check(r2.header("etag") != r1.header("etag"),
              "ETag unchanged after the mtime changed")


@orcdtest.case
def write_through_another_name(srv):
    """The file is changed through a hard link in a directory nobody asks
    for: no event in the served path's directory, only on the file."""
    p = srv.write_file("f/linked.txt", b"one\n", mtime=OLD)
    other = srv.path("unserved/alias.txt")
    os.makedirs(os.path.dirname(other), exist_ok=True)
    os.link(p, other)
    with srv.conn() as c:
        eq(both(srv, c, "/f/linked.txt").body, b"one\n", "before")
        with open(other, "ab") as f:
            f.write(b"two\n")
        r = both(srv, c, "/f/linked.txt")
        eq(r.header("content-length"), "8", "Content-Length")
        eq(r.body, b"one\ntwo\n", "after a write through the other name")


@orcdtest.case
def parent_directory_moves(srv):
    srv.write_file("d1/inner/x.txt", b"x in d1\n")
    with srv.conn() as c:
        eq(both(srv, c, "/d1/inner/x.txt").status, 200, "before")
        srv.rename(srv.path("d1/inner"), srv.path("d1/moved"))
        eq(both(srv, c, "/d1/inner/x.txt").status, 404, "old path")
        eq(both(srv, c, "/d1/moved/x.txt").body, b"x in d1\n", "new path")
        srv.write_file("d1/inner/x.txt", b"another x\n")
        eq(both(srv, c, "/d1/inner/x.txt").body, b"another x\n",
           "a new directory under the old name")


@orcdtest.case
def symlinked_directory_repointed(srv):
    if srv.shared_fs:
        # Measured: on the guest's 9p share (cache=none) a symlink renamed
        # over another, even inside the guest, is still followed to the
        # old target afterwards, by orcd's engines and by epoll's plain
        # openat2 alike: the guest kernel's 9p, not orcd. The host runs
        # (direct, epoll) test the switch.
        raise orcdtest.Skip("9p keeps following the replaced symlink")
    srv.write_file("v1/page.txt", b"version 1\n")
    srv.write_file("v2/page.txt", b"version 2\n")
    srv.symlink("v1", srv.path("current"))
    with srv.conn() as c:
        eq(both(srv, c, "/current/page.txt").body, b"version 1\n", "v1")
        # The usual deployment switch: a new link renamed over the old.
        srv.symlink("v2", srv.path(".current.new"))
        srv.rename(srv.path(".current.new"), srv.path("current"))
        eq(both(srv, c, "/current/page.txt").body, b"version 2\n", "v2")


@orcdtest.case
def many_changes_in_a_row(srv):
    p = srv.path("f/churn.bin")
    with srv.conn() as c:
        for i in range(40):
            data = pattern(1 + (i * 7919) % 200000, i)
            if i % 3 == 0:
                tmp = srv.write_file("f/.churn.tmp", data)
                os.rename(tmp, p)
            else:
                srv.write_file("f/churn.bin", data)
            r = get_on(c, "/f/churn.bin")
            eq(r.status, 200, "round %d" % i)
            check(r.body == data, "round %d: stale or mixed body" % i)


@orcdtest.case
def many_connections_after_a_change(srv):
    # Requests that arrive together are planned after one read of the
    # change events (epoll: once per turn, or per 32 recvs; io_uring:
    # when the ring's poll on the inotify fd fired), never before it.
    conns = [srv.conn() for _ in range(64)]
    try:
        for i in range(6):
            body = b"round %d of many\n" % i
            srv.write_file("f/many.txt", body)
            for c in conns:
                c.send(build_request("GET", "/f/many.txt"))
            for n, c in enumerate(conns):
                r = c.read_response()
                check(r is not None, "round %d: no answer on %d" % (i, n))
                eq(r.body, body, "round %d, connection %d" % (i, n))
    finally:
        for c in conns:
            c.close()


@orcdtest.case
def change_after_a_reload(srv):
    # A reload empties the stat cache and starts a new inotify instance
    # on the same fd number; the io_uring engines' poll on that fd must
    # follow it. Each round's directory is made after the reload, so only
    # the new instance watches it and its file: a poll left on the old
    # one would hear nothing and the second GET would be stale.
    n = srv.stderr_text().count("configuration reloaded")
    srv.signal(signal.SIGHUP)
    orcdtest.wait_until(
        lambda: srv.stderr_text().count("configuration reloaded") > n, 10,
        "the reload to be logged")
    with srv.conn() as c:
        for i in range(10):
            name = "f/after-reload-%d/page.txt" % i
            srv.write_file(name, b"one %d\n" % i, mtime=OLD)
            eq(get_on(c, "/" + name).body, b"one %d\n" % i, "round %d" % i)
            srv.write_file(name, b"two %d\n" % i)
            eq(get_on(c, "/" + name).body, b"two %d\n" % i,
               "round %d: after the change" % i)


@orcdtest.case
def clean_stop_after_change_events(srv):
    # The io_uring engines' poll on the inotify fd posts a CQE per change
    # and stays armed: a worker that stops must still account for every
    # SQE it submitted (or it waits out its bound and keeps memory).
    del srv  # a server of its own, to stop it here
    with orcdtest.Server() as s2:
        s2.start()
        with s2.conn() as c:
            for i in range(8):
                s2.write_file("f/stop.txt", b"change %d\n" % i)
                eq(get_on(c, "/f/stop.txt").body, b"change %d\n" % i,
                   "round %d" % i)
        s2.stop()
        check("still in flight" not in s2.stderr_text(),
              "operations left in flight at exit: " + s2.stderr_text()[-400:])


def slow_download(srv, path, size):
    """A GET whose receiver stalls after the head: returns the
    connection and the response head with the body still unread."""
    c = srv.conn(rcvbuf=16384)
    c.send(build_request("GET", path))
    r = c.read_response(head_request=True)  # body left in the socket
    eq(r.status, 200, "download status")
    eq(r.header("content-length"), str(size), "download Content-Length")
    # Take a little of the body so the transfer is in mid-flight.
    got = c.read_exact(65536)
    return c, got


def drain_body(c, want, got, what):
    """Read the rest of a body of len(want) bytes. Returns True when it
    was complete; False when orcd closed early. Never a hang, never more
    bytes than Content-Length, never bytes that were not in the file."""
    n = len(want)
    closed = False
    got = bytearray(got)  # grows in place: bytes += is quadratic
    while len(got) < n:
        try:
            chunk = c.read_some(n - len(got))
        except ConnectionResetError:
            chunk = b""
        except socket.timeout:
            raise orcdtest.TestFailure(
                "%s: stalled at %d of %d bytes: orcd neither finished nor "
                "closed" % (what, len(got), n))
        if not chunk:
            closed = True
            break
        got += chunk
    check(len(got) <= n, "%s: more bytes than Content-Length" % what)
    if got != want[:len(got)]:
        raise orcdtest.TestFailure(
            "%s: bytes received differ from the file at offset %d"
            % (what, next(i for i in range(len(got)) if got[i] != want[i])))
    if closed:
        return False
    return True


def still_serving(srv):
    r = srv.get("/hello.txt")
    eq((r.status, r.body), (200, b"hello, world\n"), "orcd after the change")


@orcdtest.case
def truncate_during_download(srv):
    size = 16 << 20
    data = pattern(size, 1)
    p = srv.write_file("f/trunc.bin", data)
    c, got = slow_download(srv, "/f/trunc.bin", size)
    with c:
        os.truncate(p, 0)
        complete = drain_body(c, data, got, "truncated to 0")
        if complete:
            # If the whole body came, nothing may follow it, and the
            # connection must still parse a next request correctly.
            c.send(build_request("GET", "/hello.txt",
                                 {"Connection": "close"}))
            eq(c.read_response().body, b"hello, world\n", "next request")
        else:
            check(c.closed_by_peer(1), "closed")
    still_serving(srv)
    r = srv.get("/f/trunc.bin")
    eq((r.status, r.body), (200, b""), "the truncated file")


@orcdtest.case
def large_file_served_from_memory_stays_true(srv):
    # A large file served a few times may be sent from a mapping of it
    # (the io_uring engines): a rewrite with inode and times put back must
    # be seen, and a truncate in mid-download must end that download
    # without a wrong byte, and without taking orcd down.
    size = 4 << 20
    a, b = pattern(size, 3), pattern(size, 4)
    p = srv.write_file("f/mapped.bin", a, mtime=OLD)
    with srv.conn() as c:
        for i in range(3):
            r = get_on(c, "/f/mapped.bin")
            check(r.body == a, "before, round %d" % i)
        with open(p, "r+b") as f:
            f.write(b)
        os.utime(p, (OLD, OLD))
        r = get_on(c, "/f/mapped.bin")
        check(r.body == b, "after a rewrite with the times put back")
        check(get_on(c, "/f/mapped.bin").body == b, "again")
    c, got = slow_download(srv, "/f/mapped.bin", size)
    with c:
        os.truncate(p, 0)
        if not drain_body(c, b, got, "mapped, truncated to 0"):
            check(c.closed_by_peer(1), "closed")
    still_serving(srv)
    eq(srv.get("/f/mapped.bin").body, b"", "the truncated file")


@orcdtest.case
def shrink_during_download(srv):
    size = 16 << 20
    data = pattern(size, 2)
    p = srv.write_file("f/shrink.bin", data)
    c, got = slow_download(srv, "/f/shrink.bin", size)
    with c:
        os.truncate(p, 8 << 20)
        complete = drain_body(c, data, got, "shrunk to 8 MiB")
        if complete:
            c.send(build_request("GET", "/hello.txt",
                                 {"Connection": "close"}))
            eq(c.read_response().body, b"hello, world\n", "next request")
    still_serving(srv)
    eq(len(srv.get("/f/shrink.bin").body), 8 << 20, "the shrunk file")


@orcdtest.case
def growth_during_download(srv):
    size = 8 << 20
    data = pattern(size, 3)
    p = srv.write_file("f/growing.bin", data)
    c, got = slow_download(srv, "/f/growing.bin", size)
    with c:
        with open(p, "ab") as f:
            f.write(b"\xee" * (4 << 20))
        # Pipeline the next request now: any byte beyond Content-Length
        # would be read as its status line.
        c.send(build_request("GET", "/hello.txt", {"Connection": "close"}))
        complete = drain_body(c, data, got, "grown by 4 MiB")
        if complete:
            r = c.read_response()
            check(r is not None and r.body == b"hello, world\n",
                  "response after the grown body is corrupt: %r" % r)
    still_serving(srv)


@orcdtest.case
def replace_during_download(srv):
    size = 8 << 20
    data = pattern(size, 4)
    p = srv.write_file("f/swap.bin", data)
    c, got = slow_download(srv, "/f/swap.bin", size)
    with c:
        tmp = srv.write_file("f/.swap.tmp", pattern(size // 2, 5))
        os.rename(tmp, p)
        # A response started on the old file finishes with the old file
        # (or stops); it never mixes in bytes of the new one.
        drain_body(c, data, got, "replaced by rename")
    still_serving(srv)
    eq(srv.get("/f/swap.bin").body, pattern(size // 2, 5), "the new file")


@orcdtest.case
def file_appended_to_while_requested(srv):
    # A log being written: every request gets a whole answer, its body
    # the file's first Content-Length bytes. (epoll with the stat cache
    # once took each growth for another file, asked for the answer twice
    # more, then closed without a byte: 227 of 300 requests.)
    p = srv.write_file("f/appended.log", b"start\n")
    stop = threading.Event()

    def writer():
        with open(p, "ab", buffering=0) as f:
            while not stop.is_set() and f.tell() < (4 << 20):
                f.write(b"x" * 16)

    t = threading.Thread(target=writer)
    t.start()
    try:
        for i in range(100):
            r = srv.get("/f/appended.log")
            check(r is not None, "request %d: closed without an answer" % i)
            eq(r.status, 200, "request %d" % i)
            n = int(r.header("content-length"))
            eq(len(r.body), n, "request %d: body against Content-Length" % i)
            check(r.body == (b"start\n" + b"x" * n)[:n],
                  "request %d: not the file's first %d bytes" % (i, n))
    finally:
        stop.set()
        t.join()
    still_serving(srv)


if __name__ == "__main__":
    sys.exit(orcdtest.run())
