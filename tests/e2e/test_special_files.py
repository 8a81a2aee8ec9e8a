#!/usr/bin/env python3
"""FIFOs and device nodes under the root never hold a request: the plan
refuses what is not a regular file (404), and a FIFO that takes a
regular file's place after the plan (a bind mount, which raises no
inotify event, keeps the stat cache's facts "regular") ends the chain
within send_timeout with a 404: the timer cancels the chain's step in
flight (a read polling a FIFO that has a writer, or an open punted to
io-wq), not only a send that never starts. Each case starts its own
orcd; the mount case needs root."""

import os
import socket
import stat
import subprocess
import sys
import time
import urllib.request

import orcdtest
from orcdtest import build_request, check, eq

HELLO = b"hello, world\n"
Server = orcdtest.Server


def get(srv, path, method="GET", timeout=15.0):
    with srv.conn(timeout=timeout) as c:
        c.send(build_request(method, path, {"Connection": "close"}))
        try:
            return c.read_response(head_request=method == "HEAD")
        except socket.timeout:
            raise orcdtest.TestFailure(
                "%s %s: no answer within %ds" % (method, path, timeout))


def gauges(port):
    """The metrics page's in-use gauges: chains and slots."""
    text = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port,
                                  timeout=5).read().decode()
    vals = dict(ln.rsplit(" ", 1) for ln in text.splitlines()
                if ln and not ln.startswith("#"))
    return (int(vals.get("orcd_chains_in_flight", 0)),
            int(vals.get("orcd_slots_in_use", 0)))


@orcdtest.case
def fifo_and_device_node_answer_404():
    with Server() as srv:
        srv.start()
        os.mkfifo(srv.path("pipe"))
        names = ["pipe"]
        if os.geteuid() == 0:
            try:
                os.mknod(srv.path("zero"), 0o644 | stat.S_IFCHR,
                         os.makedev(1, 5))
                names.append("zero")
            except OSError:
                pass  # no CAP_MKNOD here (a container): the FIFO stays
        for name in names:
            for method in ("GET", "HEAD"):
                eq(get(srv, "/" + name, method).status, 404,
                   "%s /%s" % (method, name))
        eq(get(srv, "/hello.txt").body, HELLO, "served after them")
        srv.assert_fds_back()
        srv.stop()


def bind_mount(src, dst):
    p = subprocess.run(["mount", "--bind", src, dst],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if p.returncode:
        raise orcdtest.Skip("mount --bind: %s"
                            % p.stderr.decode().strip())


def umount(path):
    subprocess.run(["umount", path], stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)


@orcdtest.case
def fifo_swapped_in_after_the_plan_ends_within_send_timeout():
    if os.geteuid() != 0:
        raise orcdtest.Skip("needs root for mount --bind")
    mport = orcdtest.free_port()
    with Server(conf="send_timeout 1s;\nmetrics on;\n"
                "metrics_listen 127.0.0.1:%d;\n" % mport) as srv:
        srv.start()
        idle = gauges(mport)
        fifo = os.path.join(srv.tmp, "fifo")
        os.mkfifo(fifo)
        mounted = []
        writer = None
        try:
            for name in ("lone.txt", "fed.txt"):
                srv.write_file(name, b"x" * 1000)
                # HEAD: the stat cache holds "regular, 1000 bytes" and
                # no body (a GET would keep the bytes and need no chain).
                eq(get(srv, "/" + name, "HEAD").status, 200, "HEAD " + name)
                bind_mount(fifo, srv.path(name))
                mounted.append(srv.path(name))
            # No writer: an open issued inline does not block (io_uring
            # tries it O_NONBLOCK) and the read sees EOF; one punted to
            # io-wq (as here, seen on 6.18) waits for a writer until the
            # timer cancels it. Either way: answered again from fresh
            # facts.
            eq(get(srv, "/lone.txt").status, 404, "FIFO without a writer")
            # A writer that never writes: the read waits for data until
            # the send timer cancels it.
            writer = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)
            t0 = time.monotonic()
            r = get(srv, "/fed.txt")
            eq(r.status, 404, "FIFO with a silent writer")
            check(b"x" * 1000 not in r.body, "stale bytes sent")
            eq(get(srv, "/hello.txt").body, HELLO, "served after it (%.1fs)"
               % (time.monotonic() - t0))
        finally:
            if writer is not None:
                os.close(writer)
            for m in mounted:
                umount(m)
        # Chains ended and their slots came back (the close completed).
        orcdtest.wait_until(lambda: gauges(mport) == idle, 10,
                            "chains and slots back to %r" % (idle,))
        srv.assert_fds_back()
        srv.stop()


if __name__ == "__main__":
    sys.exit(orcdtest.run_serverless())
