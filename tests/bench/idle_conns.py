#!/usr/bin/env python3
"""Hold N idle keep-alive connections to a server, for tests/bench/run.

    idle_conns.py HOST PORT PATH N

Opens N connections, sends one keep-alive GET of PATH on each and reads the
whole response, then prints "ready N" and keeps every connection open and
silent until its standard input closes. Exits 1 (with a reason on standard
error) if a connection fails or a response is not 200.
"""
import errno
import resource
import selectors
import socket
import sys
import time

BATCH = 256  # connections being set up at once


class Conn:
    def __init__(self, sock):
        self.sock = sock
        self.buf = b""
        self.sent = False
        self.done = False


def response_complete(buf):
    head_end = buf.find(b"\r\n\r\n")
    if head_end < 0:
        return None
    head = buf[:head_end].decode("latin-1")
    status = head.split("\r\n", 1)[0]
    length = 0
    for line in head.split("\r\n")[1:]:
        name, _, value = line.partition(":")
        if name.strip().lower() == "content-length":
            length = int(value.strip())
    if len(buf) < head_end + 4 + length:
        return None
    return status


def main():
    host, port, path, n = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = n + 64
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(want, hard) if hard != resource.RLIM_INFINITY else want, hard))
    req = ("GET %s HTTP/1.1\r\nHost: %s:%d\r\n\r\n" % (path, host, port)).encode()
    sel = selectors.DefaultSelector()
    conns = []
    started = 0
    ready = 0
    pending = 0
    deadline = time.monotonic() + 60
    while ready < n:
        while started < n and pending < BATCH:
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setblocking(False)
            err = s.connect_ex((host, port))
            if err not in (0, errno.EINPROGRESS):
                sys.exit("idle_conns: connect %d: %s" % (started, errno.errorcode.get(err, err)))
            c = Conn(s)
            conns.append(c)
            sel.register(s, selectors.EVENT_WRITE, c)
            started += 1
            pending += 1
        if time.monotonic() > deadline:
            sys.exit("idle_conns: only %d of %d connections ready after 60 s" % (ready, n))
        for key, ev in sel.select(timeout=1.0):
            c = key.data
            if not c.sent:
                err = c.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                if err:
                    sys.exit("idle_conns: connect: %s" % errno.errorcode.get(err, err))
                c.sock.send(req)
                c.sent = True
                sel.modify(c.sock, selectors.EVENT_READ, c)
                continue
            data = c.sock.recv(1 << 16)
            if not data:
                sys.exit("idle_conns: server closed a connection before answering")
            c.buf += data
            status = response_complete(c.buf)
            if status is None:
                continue
            if " 200 " not in status + " ":
                sys.exit("idle_conns: got %r" % status)
            sel.unregister(c.sock)
            c.buf = b""
            c.done = True
            ready += 1
            pending -= 1
    print("ready %d" % ready, flush=True)
    sys.stdin.read()
    for c in conns:
        c.sock.close()


if __name__ == "__main__":
    main()
