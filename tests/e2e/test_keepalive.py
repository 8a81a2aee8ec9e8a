#!/usr/bin/env python3
"""Persistent connections (RFC 9112 section 9): defaults per version,
Connection: close / keep-alive, pipelining in order, idle and header
timeouts."""

import re
import socket
import sys
import time

import orcdtest
from orcdtest import build_request, check, eq

# Apart, so that a timeout tells which timer ended it: a head's deadline
# is header_timeout after its first byte, idle_timeout the wait for it.
IDLE = 1.0    # idle_timeout in the config below
HEADER = 3.0  # header_timeout
SEND = 1.0    # send_timeout
SLACK = 3.0   # scheduling slack on a loaded CI machine


def files(srv):
    out = {}
    for name in ("hello.txt", "style.css", "index.html", "data.bin",
                 "dir/page.html", "dir/index.html", "big.bin"):
        with open(srv.path(name), "rb") as f:
            out["/" + name] = f.read()
    return out


def conn_header(r):
    return [t.strip().lower()
            for t in (r.header("connection") or "").split(",") if t.strip()]


@orcdtest.case
def http11_persistent_by_default(srv):
    want = files(srv)
    with srv.conn() as c:
        for path in ("/hello.txt", "/style.css", "/data.bin", "/missing",
                     "/hello.txt"):
            c.send(build_request("GET", path))
            r = c.read_response()
            check(r is not None, "connection closed before %s" % path)
            check("close" not in conn_header(r),
                  "%s: Connection: close on a 1.1 request" % path)
            if path in want:
                eq(r.status, 200, path)
                eq(r.body, want[path], "body of " + path)
            else:
                eq(r.status, 404, path)
        check(not c.closed_by_peer(0.2 * IDLE),
              "connection closed right after the last response")


@orcdtest.case
def connection_close_honoured(srv):
    with srv.conn() as c:
        # The request after the close must not be answered.
        c.send(build_request("GET", "/hello.txt", {"Connection": "close"})
               + build_request("GET", "/style.css"))
        r = c.read_response()
        eq(r.status, 200, "status")
        eq(r.body, b"hello, world\n", "body")
        check("close" in conn_header(r), "response lacks Connection: close")
        check(c.closed_by_peer(), "server did not close after "
              "Connection: close")
        eq(c.buf, b"", "bytes after the closing response")


@orcdtest.case
def connection_close_token_case_and_list(srv):
    for value in ("CLOSE", "Close", "TE, close", "keep-alive, close"):
        with srv.conn() as c:
            c.send(build_request("GET", "/hello.txt",
                                 {"Connection": value}))
            r = c.read_response()
            eq(r.status, 200, value)
            check(c.closed_by_peer(), "Connection: %s not honoured" % value)


@orcdtest.case
def http10_closes_by_default(srv):
    with srv.conn() as c:
        c.send(b"GET /hello.txt HTTP/1.0\r\n\r\n"
               b"GET /style.css HTTP/1.0\r\n\r\n")
        r = c.read_response()
        eq(r.status, 200, "status")
        eq(r.body, b"hello, world\n", "body")
        check("keep-alive" not in conn_header(r),
              "1.0 response without keep-alive request says keep-alive")
        check(c.closed_by_peer(), "HTTP/1.0 connection left open")
        eq(c.buf, b"", "bytes after the 1.0 response")


@orcdtest.case
def http10_keep_alive(srv):
    with srv.conn() as c:
        for path, body in (("/hello.txt", b"hello, world\n"),
                           ("/style.css", b"body { color: black; }\n"),
                           ("/hello.txt", b"hello, world\n")):
            c.send(("GET %s HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"
                    % path).encode())
            r = c.read_response()
            check(r is not None, "1.0 keep-alive closed before " + path)
            eq(r.status, 200, path)
            eq(r.body, body, path)
            check("keep-alive" in conn_header(r),
                  "1.0 keep-alive response lacks Connection: keep-alive "
                  "(got %r)" % r.header("connection"))
        check(not c.closed_by_peer(0.2 * IDLE),
              "1.0 keep-alive connection closed")
        # Keep-alive ends with a request without it.
        c.send(b"GET /hello.txt HTTP/1.0\r\n\r\n")
        eq(c.read_response().status, 200, "last 1.0 request")
        check(c.closed_by_peer(), "1.0 without keep-alive left open")


@orcdtest.case
def pipelined_in_order(srv):
    want = files(srv)
    reqs = [("GET", "/hello.txt"), ("GET", "/style.css"),
            ("HEAD", "/index.html"), ("GET", "/missing.txt"),
            ("GET", "/data.bin"), ("GET", "/dir/page.html"),
            ("HEAD", "/data.bin"), ("GET", "/dir/"),
            ("GET", "/index.html"), ("GET", "/hello.txt")]
    data = b"".join(build_request(m, p) for m, p in reqs)
    with srv.conn() as c:
        c.send(data)
        for i, (m, p) in enumerate(reqs):
            r = c.read_response(head_request=(m == "HEAD"))
            check(r is not None, "closed before response %d (%s %s)"
                  % (i, m, p))
            key = "/dir/index.html" if p == "/dir/" else p
            if key in want:
                eq(r.status, 200, "%d: %s %s" % (i, m, p))
                eq(r.header("content-length"), str(len(want[key])),
                   "%d: Content-Length of %s" % (i, p))
                eq(r.body, b"" if m == "HEAD" else want[key],
                   "%d: body of %s %s" % (i, m, p))
            else:
                eq(r.status, 404, "%d: %s %s" % (i, m, p))
        check(not c.closed_by_peer(0.2 * IDLE), "closed after the pipeline")


@orcdtest.case
def pipelined_behind_big_body(srv):
    # The second request is already buffered while the 4 MiB body is
    # still being sent: it must wait its turn.
    want = files(srv)
    with srv.conn() as c:
        c.send(build_request("GET", "/big.bin")
               + build_request("GET", "/hello.txt")
               + build_request("GET", "/big.bin", {"Range": "bytes=1-3"})
               + build_request("GET", "/style.css", {"Connection": "close"}))
        r = c.read_response()
        eq(r.status, 200, "big.bin")
        check(r.body == want["/big.bin"], "big.bin body differs")
        eq(c.read_response().body, want["/hello.txt"], "hello after big")
        r = c.read_response()
        eq((r.status, r.body), (206, want["/big.bin"][1:4]), "range")
        eq(c.read_response().body, want["/style.css"], "last")
        check(c.closed_by_peer(), "not closed after Connection: close")


def pipeline_during_response(srv, c, n, shut=False):
    """On keep-alive connection c: GET /big.bin, and while its body is
    held up by c's small receive buffer, n more requests (a header pads
    them past a provided buffer's 4 KiB in all). Every response comes,
    whole and in order. On the io_uring engines with a multishot recv
    (Linux 6.14+) the requests arrive while the core is not reading:
    they wait in the connection's stash, which pauses the recv once a
    buffer's worth piled up. shut: the client's FIN follows its last
    request."""
    want = files(srv)
    data = want["/data.bin"]
    c.send(build_request("GET", "/hello.txt"))
    eq(c.read_response().body, want["/hello.txt"], "first request")
    c.send(build_request("GET", "/big.bin"))
    time.sleep(0.3)  # its body fills the socket buffers and stalls
    # Each asks for other bytes of data.bin: the order is checked.
    reqs = b"".join(
        build_request("GET", "/data.bin",
                      {"Range": "bytes=%d-%d" % (i, i + 9), "X-Pad": "p" * 100})
        for i in range(n))
    check(len(reqs) > 4096, "pipeline of %d bytes" % len(reqs))
    for i in range(0, len(reqs), 700):
        c.send(reqs[i:i + 700])
        time.sleep(0.003)
    if shut:
        c.sock.shutdown(orcdtest.socket.SHUT_WR)
    r = c.read_response()
    eq(r.status, 200, "big.bin")
    check(r.body == want["/big.bin"], "big.bin body differs")
    for i in range(n):
        r = c.read_response()
        check(r is not None, "closed before pipelined response %d" % i)
        eq((r.status, r.body), (206, data[i:i + 10]),
           "pipelined response %d" % i)


@orcdtest.case
def pipelined_during_a_response(srv):
    with srv.conn(rcvbuf=8192) as c:
        pipeline_during_response(srv, c, 40)
        c.send(build_request("GET", "/style.css", {"Connection": "close"}))
        eq(c.read_response().status, 200, "after the pipeline")
        check(c.closed_by_peer(), "not closed after Connection: close")


@orcdtest.case
def pipelined_then_half_closed_during_a_response(srv):
    # The client's FIN comes behind its requests while the server is
    # busy: every request is answered, then the connection closes.
    with srv.conn(rcvbuf=8192) as c:
        pipeline_during_response(srv, c, 40, shut=True)
        check(c.closed_by_peer(), "not closed after the client's FIN")


@orcdtest.case
def pipelining_while_busy_is_held_back(srv):
    # A client that pipelines without end while its response is stalled
    # is held back by TCP: orcd stops reading (it does not pile up what
    # the client sends), so the client's send stalls too. Loopback's
    # socket buffers take in a few MiB.
    if srv.forwarded:
        raise orcdtest.Skip("QEMU's forwarder takes in what either side "
                            "sends")
    # The client takes a little of the response between its sends, so
    # that the response never stalls for send_timeout: what ends the
    # sends must be the hold, not a close.
    total = 32 << 20
    with srv.conn(rcvbuf=8192) as c:
        c.send(build_request("GET", "/hello.txt"))
        eq(c.read_response().status, 200, "first request")
        c.send(build_request("GET", "/big.bin"))
        time.sleep(0.3)
        chunk = build_request("GET", "/hello.txt") * 2000
        c.sock.settimeout(0.5)
        sent = taken = 0
        held = False
        try:
            while sent < total:
                try:
                    taken += len(c.sock.recv(
                        4096, orcdtest.socket.MSG_DONTWAIT))
                except BlockingIOError:
                    pass
                sent += c.sock.send(chunk)
        except orcdtest.socket.timeout:
            held = True  # no byte taken in 0.5 s, the connection open
        except ConnectionError as e:
            raise orcdtest.TestFailure(
                "orcd ended the connection (%r) after %d MiB pipelined and "
                "%d KiB of the response taken, instead of holding the "
                "client back" % (e, sent >> 20, taken >> 10))
        check(held, "orcd took in all %d MiB pipelined behind a stalled "
              "response" % (total >> 20))


@orcdtest.case
def pipelined_byte_by_byte(srv):
    # Requests split at every byte still parse (no assumption that a
    # head arrives in one read).
    data = build_request("GET", "/hello.txt") + build_request(
        "GET", "/style.css", {"Connection": "close"})
    with srv.conn() as c:
        c.sock.setsockopt(orcdtest.socket.IPPROTO_TCP,
                          orcdtest.socket.TCP_NODELAY, 1)
        for i in range(len(data)):
            c.send(data[i:i + 1])
        eq(c.read_response().body, b"hello, world\n", "first")
        eq(c.read_response().body, b"body { color: black; }\n", "second")


def answered(c):
    """One request answered on c: when its connection began to idle."""
    c.send(build_request("GET", "/hello.txt"))
    eq(c.read_response().status, 200, "status")
    return time.monotonic()


@orcdtest.case
def idle_timeout_closes(srv):
    with srv.conn() as c:
        t0 = answered(c)
        check(c.closed_by_peer(IDLE + SLACK),
              "idle connection still open %.1fs after the response"
              % (IDLE + SLACK))
        took = time.monotonic() - t0
        check(took >= IDLE * 0.5, "idle connection closed after %.2fs, "
              "idle_timeout is %.1fs" % (took, IDLE))


@orcdtest.case
def stray_empty_lines_leave_the_connection_idle(srv):
    # RFC 9112 2.2: empty lines before a request line are ignored. A
    # CRLF some clients send after a request (in its packet, or later)
    # begins no request: the connection closes silently at idle_timeout,
    # not with a 408 at header_timeout (here the longer one).
    for after in (b"\r\n", b"\r\n\n"):
        for apart in (False, True):
            with srv.conn() as c:
                req = build_request("GET", "/hello.txt")
                c.send(req if apart else req + after)
                eq(c.read_response().status, 200, "status")
                if apart:
                    c.send(after)
                t0 = time.monotonic()
                check(c.closed_by_peer(HEADER + SLACK),
                      "still open %.1fs after the response"
                      % (HEADER + SLACK))
                took = time.monotonic() - t0
                what = "%r %s" % (after, "apart" if apart else "behind it")
                eq(c.buf, b"", "bytes after the response (%s)" % what)
                # Closed well before header_timeout (the CRLF and the
                # FIN cross QEMU's forwarder in the guest).
                check(took < HEADER - 0.5,
                      "closed after %.1fs (%s): idle_timeout is %.0fs, "
                      "header_timeout %.0fs" % (took, what, IDLE, HEADER))


@orcdtest.case
def stray_empty_lines_do_not_keep_the_connection(srv):
    # A CRLF every 0.4 s after a response pushed idle_timeout back each
    # time, and a flood of them kept a core busy: neither timeout fired.
    # They keep the idle deadline they found, and more than 64 bytes of
    # them before a request are answered 400.
    with srv.conn() as c:
        t0 = answered(c)
        closed = False
        while not closed and time.monotonic() - t0 < IDLE + SLACK + 3:
            try:
                c.sock.sendall(b"\r\n")
            except OSError:
                break
            closed = c.closed_by_peer(0.4)
        took = time.monotonic() - t0
        check(took < IDLE + SLACK, "a CRLF every 0.4 s kept the "
              "connection open %.1fs (idle_timeout %.0fs)" % (took, IDLE))
        eq(c.buf, b"", "bytes after the response")
    # A CRLF behind a request counts its idle time from the answer, not
    # from before the request (which closed it 0.25 s after the answer).
    with srv.conn() as c:
        time.sleep(IDLE * 0.75)
        c.send(build_request("GET", "/hello.txt") + b"\r\n")
        eq(c.read_response().status, 200, "status")
        t0 = time.monotonic()
        check(c.closed_by_peer(IDLE + SLACK), "still open after the CRLF")
        took = time.monotonic() - t0
        check(took >= IDLE * 0.5, "closed %.2fs after the answer, "
              "idle_timeout is %.1fs" % (took, IDLE))
    # Pieces that each end inside an empty line (a CR) add up too.
    pieces = [b"\r\n" * 31 + b"\r"] + [b"\n" + b"\r\n" * 30 + b"\r"] * 4
    for flood in ([b"\r\n" * 33], [b"\n" * 65], pieces):
        with srv.conn() as c:
            c.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            for piece in flood:
                c.send(piece)
                time.sleep(0.05)
            r = c.read_response()
            check(r is not None and r.status == 400,
                  "%d bytes of empty lines: %r"
                  % (len(b"".join(flood)), r))
            check(c.closed_by_peer(), "open after the 400")
    # 64 bytes of them are still ignored.
    r = srv.raw(b"\r\n" * 32 + b"GET /hello.txt HTTP/1.1\r\nHost: t\r\n"
                b"Connection: close\r\n\r\n")
    eq(r.status, 200, "after 64 bytes of empty lines")


@orcdtest.case
def idle_timeout_on_silent_new_connection(srv):
    with srv.conn() as c:
        check(c.closed_by_peer(max(IDLE, HEADER) + SLACK),
              "a connection that never sends stays open")


@orcdtest.case
def header_timeout_partial_head(srv):
    # A head that stops short gets a 408 (RFC 9110 15.5.9) and a close,
    # at header_timeout: not at idle_timeout, which is shorter here.
    with srv.conn() as c:
        t0 = time.monotonic()
        c.send(b"GET /hello.txt HTTP/1.1\r\nHost: t\r\n")
        try:
            r = c.read_response()
        except orcdtest.socket.timeout:
            raise orcdtest.TestFailure("no 408 and no close")
        took = time.monotonic() - t0
        check(r is not None, "partial head closed without a 408 after "
              "%.1fs" % took)
        eq((r.status, r.header("connection")), (408, "close"),
           "response to an incomplete head")
        check(c.closed_by_peer(), "408 without close")
        check(took >= HEADER - 0.5, "partial head cut after %.1fs: "
              "header_timeout is %.0fs (idle_timeout %.0fs)"
              % (took, HEADER, IDLE))
        check(took <= HEADER + SLACK, "partial head held %.1fs" % took)


@orcdtest.case
def header_timeout_bounds_a_trickled_head(srv):
    # Slowloris: one byte every 200 ms. The header timeout bounds the
    # whole head, so orcd must close even though bytes keep coming.
    data = b"GET /hello.txt HTTP/1.1\r\nHost: t\r\n" + b"X-Slow: " \
        + b"a" * 200
    with srv.conn() as c:
        t0 = time.monotonic()
        for i in range(len(data)):
            try:
                c.send(data[i:i + 1])
            except (BrokenPipeError, ConnectionResetError):
                break
            if c.closed_by_peer(0.2):
                break
            if time.monotonic() - t0 > HEADER + SLACK:
                raise orcdtest.TestFailure(
                    "a head trickled for %.1fs is still being read"
                    % (time.monotonic() - t0))
        took = time.monotonic() - t0
        check(took <= HEADER + SLACK, "trickled head held %.1fs" % took)
        check(took >= HEADER - 0.5, "trickled head cut after %.1fs: "
              "header_timeout is %.0fs" % (took, HEADER))
        # Whatever was answered must be a 408 or nothing.
        if c.buf:
            check(c.buf.startswith(b"HTTP/1.1 408") or
                  c.buf.startswith(b"HTTP/1.0 408"),
                  "trickled head answered %r" % c.buf[:40])


@orcdtest.case
def activity_keeps_connection_alive(srv):
    # Requests spaced below idle_timeout keep one connection open for
    # longer than idle_timeout in total.
    with srv.conn() as c:
        t0 = time.monotonic()
        n = 0
        while time.monotonic() - t0 < IDLE * 1.5:
            c.send(build_request("GET", "/hello.txt"))
            r = c.read_response()
            check(r is not None, "closed after %d requests, %.2fs"
                  % (n, time.monotonic() - t0))
            n += 1
            c.closed_by_peer(IDLE * 0.3)  # wait, but below the timeout
            check(c.buf == b"", "unexpected bytes %r" % c.buf[:40])


def table_sockets(srv):
    """TCP sockets in orcd's io_uring file tables (6.1's fdinfo lists each
    entry by its dentry name), or None when a table's lock was busy and
    fdinfo listed no entries."""
    info = srv.ring_fdinfo()
    if not re.search(r"^\s*\d+: ", info, re.M):
        return None
    return len(re.findall(r"^\s*\d+: TCP(v6)?$", info, re.M))


def listed_sockets(srv):
    """table_sockets() once the tables could be listed."""
    seen = []

    def listed():
        n = table_sockets(srv)
        if n is not None:
            seen.append(n)
        return n is not None

    orcdtest.wait_until(listed, 10, "orcd's file tables to be listed")
    return seen[-1]


@orcdtest.case(engines=("specific",))
def specific_keeps_keepalive_sockets_in_the_ring(_):
    # specific: a connection that comes back for another request goes
    # into the ring's file table, so its recvs and sends skip a real fd's
    # lookup and reference count; one that closes after its response
    # never pays for it; a closed one leaves the table.
    # An orcd of its own, whose idle_timeout outlasts the looks at its
    # tables between requests (in the guest, each is a round trip
    # through QEMU's forwarder, and this file's 1 s could close the
    # connection meanwhile).
    with orcdtest.Server(conf="idle_timeout 60s;\n") as srv:
        srv.start()
        base = listed_sockets(srv)
        eq(srv.get("/hello.txt").status, 200, "Connection: close request")
        eq(listed_sockets(srv), base,
           "sockets in the table after a closed connection")
        with srv.conn() as c:
            for i in range(3):
                c.send(build_request("GET", "/hello.txt"))
                r = c.read_response()
                eq(r.status, 200, "request %d" % i)
                orcdtest.wait_until(
                    lambda: table_sockets(srv) == base + 1, 10,
                    "the keep-alive socket in the table")
        orcdtest.wait_until(lambda: table_sockets(srv) == base, 10,
                            "the closed connection's socket out of the "
                            "table")
        srv.stop()


def sparse(srv, name, size):
    with open(srv.path(name), "wb") as f:
        f.truncate(size)


@orcdtest.case
def send_timeout_closes_stalled_reader(srv):
    # A client that never reads: once nothing moves for send_timeout,
    # orcd gives up (64 MiB cannot hide in socket buffers).
    if srv.forwarded:
        # QEMU's forwarder keeps reading from orcd and buffers all a
        # stalled host reader leaves (64 MiB and more), so orcd never sees
        # a stall. The engines share their send-timeout code with the host
        # runs of direct and epoll, which test it.
        raise orcdtest.Skip("QEMU's user-mode forwarder absorbs the stall")
    sparse(srv, "stall.bin", 64 << 20)
    with srv.conn(rcvbuf=4096) as c:
        c.send(build_request("GET", "/stall.bin"))
        # The head proves orcd holds the connection; then stop reading.
        r = c.read_response(head_request=True)
        eq(r.status, 200, "status")
        n = int(r.header("content-length"))
        t0 = time.monotonic()
        # Sockets are fds for epoll and specific, so the drop shows in
        # /proc/PID/fd; direct descriptors do not.
        if srv.engine in ("epoll", "specific"):
            # orcd's end of this connection, found by the client's port:
            # other sockets (earlier cases' lingering closes, a late
            # accept) may come and go meanwhile.
            ours = srv.socket_of(c)
            check(ours is not None, "orcd holds the stalled connection")
            orcdtest.wait_until(lambda: not srv.holds_socket(ours),
                                SEND + SLACK + 2,
                                "orcd to drop the stalled connection")
            took = time.monotonic() - t0
            check(took >= SEND * 0.5, "stalled reader dropped after %.2fs, "
                  "send_timeout is %.1fs" % (took, SEND))
        else:
            # Direct descriptors are not in /proc/PID/fd: let the timeout
            # (with some slack) pass, then the body must come up short.
            time.sleep(2 * SEND)
        try:
            c.read_exact(n)
            raise orcdtest.TestFailure("stalled reader got the whole body")
        except (orcdtest.TestFailure, ConnectionResetError) as e:
            if "whole body" in str(e):
                raise


@orcdtest.case
def send_timeout_counts_from_last_progress(srv):
    # A slow but steady reader is served for longer than send_timeout
    # (and longer than idle_timeout): both count from the last progress.
    sparse(srv, "steady.bin", 256 << 20)
    # A small receive window keeps what the kernels buffer small, so an
    # early close by orcd shows up as an early EOF here.
    with srv.conn(rcvbuf=16384) as c:
        c.send(build_request("GET", "/steady.bin"))
        r = c.read_response(head_request=True)
        eq(r.status, 200, "status")
        t0 = time.monotonic()
        got = 0
        while time.monotonic() - t0 < 2.5 * max(SEND, IDLE):
            chunk = c.read_some(1 << 20)
            check(chunk, "closed after %d bytes, %.2fs, while the client "
                  "kept reading" % (got, time.monotonic() - t0))
            got += len(chunk)
            # ~20 MB/s: throttled so the download outlasts the timeouts,
            # yet fast enough that orcd's socket buffer keeps draining.
            time.sleep(len(chunk) / 20e6)
        if srv.engine in ("epoll", "specific"):
            check(srv.fd_count() > srv.fd_baseline,
                  "orcd dropped the steady reader after %.1fs"
                  % (time.monotonic() - t0))


if __name__ == "__main__":
    sys.exit(orcdtest.run(lambda: orcdtest.Orcd(
        conf="idle_timeout %gs;\nheader_timeout %gs;\nsend_timeout %gs;\n"
        % (IDLE, HEADER, SEND))))
