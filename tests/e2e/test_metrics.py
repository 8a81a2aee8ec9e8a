#!/usr/bin/env python3
"""The metrics page (Prometheus text) on its own listener: answers GET and
HEAD of its path, 404/405/501 otherwise, and never lets one slow client hold
the main thread, which also handles signals and the systemd watchdog."""

import os
import re
import socket
import sys
import threading
import time

import orcdtest
from orcdtest import check, eq, wait_until

SLACK = 3.0  # scheduling slack on a loaded CI machine


class Server(orcdtest.Orcd):
    def __init__(self):
        super().__init__(metrics=True)

    def metrics_conn(self):
        return orcdtest.Conn(("127.0.0.1", self.metrics_port), timeout=5)


def ask(srv, request, head=False):
    with srv.metrics_conn() as c:
        c.send(request)
        r = c.read_response(head_request=head)
        check(c.closed_by_peer(), "metrics connection left open")
        # Nothing after the response: a HEAD's body or a GET's surplus
        # would be here.
        eq(bytes(c.buf[:80]), b"", "bytes after the response")
        return r


def by_class(m):
    """orcd_requests_total per status class, "2xx" to "5xx"."""
    return {k: m['orcd_requests_total{class="%s"}' % k]
            for k in ("2xx", "3xx", "4xx", "5xx")}


@orcdtest.case
def counters_at_the_path(srv):
    r = ask(srv, b"GET /metrics HTTP/1.1\r\nHost: m\r\n\r\n")
    eq(r.status, 200, "status")
    check(r.header("content-type", "").startswith("text/plain"),
          "content type %r" % r.header("content-type"))
    check(("orcd_info{engine=\"%s\"} 1" % srv.engine).encode() in r.body,
          "engine not named")
    r = ask(srv, b"HEAD /metrics HTTP/1.1\r\nHost: m\r\n\r\n", head=True)
    eq((r.status, r.body), (200, b""), "HEAD")


@orcdtest.case
def requests_counted_by_their_status_class(srv):
    # Each response counts once, in its own class. The page has its own
    # listener and counts nothing: reading it twice changes no class.
    before = by_class(srv.metrics())
    eq(by_class(srv.metrics()), before, "classes after reading the page")
    sent = [("GET /hello.txt HTTP/1.1\r\nHost: t\r\n", 200),
            ("GET /dir HTTP/1.1\r\nHost: t\r\n", 301),
            ("GET /nope.txt HTTP/1.1\r\nHost: t\r\n", 404),
            ("GET /hello.txt HTTP/1.1\r\nBad header\r\n", 400),
            ("GET /hello.txt HTTP/2.0\r\nHost: t\r\n", 505)]
    for head, status in sent:
        r, closed = srv.exchange((head + "Connection: close\r\n\r\n")
                                 .encode())
        check(r is not None, "%r: no response" % head)
        eq(r.status, status, head)
        check(closed, "%r: connection left open" % head)
    want = dict(before)
    for _, status in sent:
        want["%dxx" % (status // 100)] += 1
    # A response counts when its worker has seen it sent, which may come
    # just after the client has read it: wait for the total, then judge
    # each class.
    orcdtest.wait_until(
        lambda: sum(by_class(srv.metrics()).values()) >=
        sum(want.values()), 10, "the %d responses to be counted"
        % len(sent))
    eq(by_class(srv.metrics()), want, "requests by class (before: %r)"
       % before)


@orcdtest.case
def bytes_sent_are_the_bytes_clients_got(srv):
    # orcd_bytes_sent_total grows by every byte of each response, heads
    # included, whatever the path: kept and cold bodies, a range, a 404,
    # a large file.
    key = "orcd_bytes_sent_total"
    before = srv.metrics()[key]
    got = 0
    for path, extra in (("/hello.txt", ""), ("/hello.txt", ""),
                        ("/nope.txt", ""), ("/big.bin", ""),
                        ("/data.bin", "Range: bytes=3-12\r\n")):
        with srv.conn() as c:
            c.send(("GET %s HTTP/1.1\r\nHost: t\r\n%sConnection: close"
                    "\r\n\r\n" % (path, extra)).encode())
            check(c.closed_by_peer(10), "%s: not closed" % path)
            check(c.buf.startswith(b"HTTP/1.1 "), "%s: %r" % (path,
                                                            c.buf[:40]))
            got += len(c.buf)
    orcdtest.wait_until(lambda: srv.metrics()[key] - before >= got, 10,
                        "%d bytes to be counted" % got)
    eq(srv.metrics()[key] - before, got, key + " grew by")


@orcdtest.case
def other_paths_and_methods(srv):
    eq(ask(srv, b"GET /nope HTTP/1.1\r\nHost: m\r\n\r\n").status, 404,
       "other path")
    eq(ask(srv, b"POST /metrics HTTP/1.1\r\nHost: m\r\n"
               b"Content-Length: 0\r\n\r\n").status, 405, "POST")
    eq(ask(srv, b"BREW /metrics HTTP/1.1\r\nHost: m\r\n\r\n").status, 501,
       "a method orcd does not know")
    eq(ask(srv, b"GET /metrics HTTP/1.1\r\nHost: m\r\nBad header\r\n\r\n")
       .status, 400, "malformed head")


def kernel_at_least(major, minor):
    rel = os.uname().release.split(".")
    return (int(rel[0]), int(re.match(r"\d+", rel[1]).group())) >= \
        (major, minor)


@orcdtest.case
def hot_large_file_goes_by_sendfile(srv):
    # The stat cache keeps a large file once it was sent (mapped, and
    # open): later bodies go by sendfile where the socket is a real fd
    # (epoll, specific; direct on 6.8+, which can install a slot as an
    # fd), else by sends from the mapping. Either way every byte is the
    # file's.
    if getattr(srv, "shared_fs", False):
        raise orcdtest.Skip("no stat cache on a 9p root")
    size = 3 << 20
    data = bytes((i * 7 + (i >> 12)) & 0xFF for i in range(size))
    srv.write_file("big-hot.bin", data)
    before = srv.metrics()["orcd_sendfile_bodies_total"]
    with srv.conn() as c:
        for i in range(3):
            c.send(orcdtest.build_request("GET", "/big-hot.bin"))
            r = c.read_response()
            eq(r.status, 200, "round %d" % i)
            check(r.body == data, "round %d: body differs" % i)
        c.send(orcdtest.build_request("GET", "/big-hot.bin",
                                      {"Range": "bytes=1000000-1999999"}))
        r = c.read_response()
        eq(r.status, 206, "range")
        check(r.body == data[1000000:2000000], "range body differs")
    sent = srv.metrics()["orcd_sendfile_bodies_total"] - before
    if srv.engine != "direct" or kernel_at_least(6, 8):
        # The first GET was a chain; the other two and the range were not.
        eq(sent, 3, "bodies sent by sendfile")
    else:
        eq(sent, 0, "bodies sent by sendfile without FIXED_FD_INSTALL")


@orcdtest.case
def sendfile_socket_fd_lives_with_its_connection(srv):
    # sendfile(2) needs the socket as a real fd: on epoll and specific it
    # is one; on direct (6.8+) the slot is installed as one at the first
    # large body and kept for the connection's next ones, then closed
    # with it. Wherever orcd holds it, the socket is O_NONBLOCK from its
    # accept (a full socket must answer EAGAIN, not block the worker)
    # and close-on-exec.
    if getattr(srv, "shared_fs", False):
        raise orcdtest.Skip("no stat cache on a 9p root")
    data = bytes((i * 11 + (i >> 10)) & 0xFF for i in range(2 << 20))
    srv.write_file("big-fd.bin", data)
    installs = srv.engine != "direct" or kernel_at_least(6, 8)
    before = srv.metrics()["orcd_sendfile_bodies_total"]
    with srv.conn() as c:
        seen = set()
        for i in range(4):
            c.send(orcdtest.build_request("GET", "/big-fd.bin"))
            r = c.read_response()
            eq(r.status, 200, "round %d" % i)
            check(r.body == data, "round %d: body differs" % i)
            if i == 0:
                continue  # a chain; the file is kept from here on
            inode = srv.socket_of(c)
            if not installs:
                eq(inode, None, "direct without FIXED_FD_INSTALL holds "
                   "the socket as an fd")
                continue
            check(inode is not None,
                  "round %d: orcd holds no fd for the connection "
                  "between its large bodies" % i)
            fds = sorted(fd for fd, link in srv.fd_links().items()
                         if link == "socket:[%s]" % inode)
            eq(len(fds), 1, "round %d: fds for the socket" % i)
            seen.update(fds)
            flags = int(re.search(r"^flags:\s*([0-7]+)",
                                  srv.proc_text("fdinfo/" + fds[0]),
                                  re.M).group(1), 8)
            check(flags & os.O_NONBLOCK, "socket fd %s is blocking "
                  "(flags %o)" % (fds[0], flags))
            check(flags & os.O_CLOEXEC, "socket fd %s is not "
                  "close-on-exec (flags %o)" % (fds[0], flags))
        if installs:
            eq(len(seen), 1, "one fd for the connection's bodies, got %s"
               % sorted(seen))
    eq(srv.metrics()["orcd_sendfile_bodies_total"] - before,
       3 if installs else 0, "bodies sent by sendfile")
    if installs:
        orcdtest.wait_until(lambda: not srv.holds_socket(inode), 10,
                            "orcd to close the connection's socket fd")


@orcdtest.case
def files_read_in_pieces_are_kept_too(srv):
    # A file a little smaller than 64 KiB does not fit one read beside
    # its head in the 64 KiB buffer, and is not large enough to be
    # mapped: it was never kept, so every request for it was a whole
    # open-read-send-close chain. Its bytes are kept now.
    if getattr(srv, "shared_fs", False):
        raise orcdtest.Skip("no stat cache on a 9p root")
    data = bytes((i * 13) & 0xFF for i in range(65535))
    srv.write_file("almost-64k.bin", data)
    before = srv.metrics()["orcd_body_cache_hits_total"]
    with srv.conn() as c:
        for i in range(5):
            c.send(orcdtest.build_request("GET", "/almost-64k.bin"))
            r = c.read_response()
            eq((r.status, r.body == data), (200, True), "request %d" % i)
    hits = srv.metrics()["orcd_body_cache_hits_total"] - before
    check(hits >= 3, "%d of 5 requests served from kept bytes" % hits)


@orcdtest.case
def kept_bodies_beyond_the_open_ones_go_by_sends(srv):
    # Only the first 256 large files a worker keeps stay open; the others
    # are sent from their mapping, the head and the first piece in one
    # SENDMSG (sendmsg on epoll). A slow reader makes those sends short
    # in the head and in the body; every byte must still be the file's.
    if getattr(srv, "shared_fs", False):
        raise orcdtest.Skip("no stat cache on a 9p root")
    names = ["many-hot/%d.bin" % i for i in range(260)]
    for i, name in enumerate(names[:-1]):
        srv.write_file(name, bytes([i & 0xFF]) * (70 << 10))
    # Larger than any socket buffer: its sends are short.
    want = bytes((i * 13 + (i >> 16)) & 0xFF for i in range(8 << 20))
    srv.write_file(names[-1], want)
    with srv.conn() as c:
        for name in names:
            for _ in range(2):
                c.send(orcdtest.build_request("GET", "/" + name))
                r = c.read_response()
                eq(r.status, 200, name)
    before = srv.metrics()["orcd_sendfile_bodies_total"]
    last = names[-1]
    for rng in (None, "bytes=100-"):
        with srv.conn(rcvbuf=4096) as c:
            hdrs = {"Range": rng} if rng else None
            c.send(orcdtest.build_request("GET", "/" + last, hdrs))
            r = c.read_response()
            eq(r.status, 206 if rng else 200, "status")
            check(r.body == (want[100:] if rng else want),
                  "body of a kept file sent from its mapping differs")
    eq(srv.metrics()["orcd_sendfile_bodies_total"] - before, 0,
       "a file beyond the first 256 went by sendfile")


def trickle(c, head, out, limit):
    """Send head a byte every 0.2 s until orcd closes or limit passes;
    out["cut"] = seconds until orcd closed the connection (or None)."""
    t0 = time.monotonic()
    out["cut"] = None
    for i in range(len(head)):
        if time.monotonic() - t0 > limit:
            return
        try:
            c.send(head[i:i + 1])
        except (BrokenPipeError, ConnectionResetError):
            out["cut"] = time.monotonic() - t0
            return
        if c.closed_by_peer(0.2):
            out["cut"] = time.monotonic() - t0
            return


@orcdtest.case
def slow_client_does_not_hold_the_page(srv):
    # One byte every 0.2 s, a head that never ends: the page must answer
    # another client meanwhile (the thread that serves it also handles
    # signals and the watchdog), and cut the trickler off at about 1 s.
    out = {}
    head = b"GET /metrics HTTP/1.1\r\nHost: m\r\nX-Slow: " + b"a" * 100
    with srv.metrics_conn() as slow:
        t = threading.Thread(target=trickle,
                             args=(slow, head, out, 1.0 + 2 * SLACK))
        t.start()
        try:
            time.sleep(0.3)
            t1 = time.monotonic()
            r = ask(srv, b"GET /metrics HTTP/1.1\r\nHost: m\r\n\r\n")
            took = time.monotonic() - t1
        finally:
            t.join()
    eq(r.status, 200, "second client's status")
    check(took < 2.0, "a second client waited %.1fs behind a slow one"
          % took)
    check(out["cut"] is not None, "a trickled head is still read after "
          "%.0fs" % (1.0 + 2 * SLACK))
    check(out["cut"] < 1.0 + SLACK, "trickler cut off after %.1fs"
          % out["cut"])


@orcdtest.case
def process_cpu_seconds_match_proc(srv):
    # Benchmarks read the process's CPU time from the page where /proc is
    # out of reach (a server in a QEMU guest): it must be what /proc says.
    deadline = time.monotonic() + 10
    while srv.cpu_seconds() < 0.05:
        check(time.monotonic() < deadline, "orcd used no CPU for 10s of "
              "requests")
        for _ in range(50):
            srv.get("/hello.txt")
    # /proc truncates utime and stime to clock ticks, each on its own.
    tick = 0.01
    before = srv.cpu_seconds()
    body = ask(srv, b"GET /metrics HTTP/1.1\r\nHost: m\r\n\r\n").body
    after = srv.cpu_seconds()
    m = re.search(rb"^process_cpu_seconds_total ([0-9.]+)$", body, re.M)
    check(m is not None, "no process_cpu_seconds_total in the page")
    got = float(m.group(1))
    check(before <= got <= after + 2 * tick,
          "process_cpu_seconds_total %.3f, /proc said %.3f before and %.3f "
          "after" % (got, before, after))


def main_thread_cpu_seconds(srv):
    """utime + stime of orcd's main thread, which runs the page, the
    signals and the watchdog."""
    pid = srv.proc.pid
    with open("/proc/%d/task/%d/stat" % (pid, pid)) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / 100.0


@orcdtest.case
def out_of_descriptors_the_page_pauses_instead_of_spinning(srv):
    # With no descriptor left, accept fails and the client stays queued,
    # so the listener stays readable: polling it again at once spun the
    # main thread at 100% of a CPU, silently. It must pause, say so once,
    # and answer the client when descriptors are back.
    import resource
    if srv.forwarded:
        raise orcdtest.Skip("orcd runs elsewhere: its limit is not ours")
    pid = srv.proc.pid
    keep = resource.prlimit(pid, resource.RLIMIT_NOFILE)
    # fds 0-2 are always held (by /dev/null at worst): no new fd fits.
    resource.prlimit(pid, resource.RLIMIT_NOFILE, (3, keep[1]))
    try:
        c = srv.metrics_conn()
        c.send(b"GET /metrics HTTP/1.1\r\nHost: m\r\n\r\n")
        time.sleep(0.3)
        before = main_thread_cpu_seconds(srv)
        time.sleep(2.0)
        used = main_thread_cpu_seconds(srv) - before
    finally:
        resource.prlimit(pid, resource.RLIMIT_NOFILE, keep)
    with c:
        r = c.read_response()
    eq(r.status, 200, "the queued client's answer once fds are back")
    check(used < 0.5, "the main thread used %.2fs of CPU in 2s beside a "
          "client it could not accept" % used)
    said = srv.stderr_text().count("metrics: accept: Too many open files; "
                                   "pausing")
    eq(said, 1, "times the failing accept was logged")


@orcdtest.case
def clients_that_connect_and_go_are_said_once_a_second(srv):
    # Each connection closed unanswered wrote a line: a loop of connect
    # and close wrote megabytes a second into the error log. At most one
    # line a second now, which says how many were not said.
    if srv.forwarded:
        raise orcdtest.Skip("QEMU's forwarder takes about 3 connections "
                            "a second")
    said = lambda: srv.stderr_text().count("metrics: closed unanswered")
    before = said()
    t0 = time.monotonic()
    for _ in range(300):
        socket.create_connection(("127.0.0.1", srv.metrics_port)).close()
    took = time.monotonic() - t0
    wait_until(lambda: "metrics: closed unanswered" in
               srv.stderr_text()[-4000:], 5, "the first to be said")
    time.sleep(1.2)
    socket.create_connection(("127.0.0.1", srv.metrics_port)).close()
    wait_until(lambda: re.search(r"\(and \d+ more closed unanswered",
                                 srv.stderr_text()), 5,
               "a line that counts those not said")
    check(said() - before <= took + 3, "%d lines for 301 connections in "
          "%.1fs" % (said() - before, took + 1.2))


if __name__ == "__main__":
    sys.exit(orcdtest.run(Server))
