#!/usr/bin/env python3
"""The signals a service manager and logrotate send: SIGUSR1 reopens the
access log (rename it, signal, and new lines go to a new file of the old
name, none lost or split between the two), and SIGTERM with many
responses in flight loses none of them and exits 0. Each case starts its
own orcd."""

import os
import signal
import sys
import threading
import time

import orcdtest
from orcdtest import build_request, check, eq, wait_until

HELLO = b"hello, world\n"


def lines(path):
    try:
        with open(path, "rb") as f:
            return f.read().decode("utf-8", "replace").splitlines()
    except FileNotFoundError:
        return []


@orcdtest.case
def sigusr1_reopens_the_access_log():
    srv = orcdtest.Orcd()
    try:
        srv.start()
        for i in range(3):
            eq(srv.get("/hello.txt?before=%d" % i).status, 200, "before")
        wait_until(lambda: sum("before=" in ln
                               for ln in lines(srv.access_log)) == 3, 5,
                   "three lines before the rename")
        rotated = srv.access_log + ".1"
        os.rename(srv.access_log, rotated)
        # Until the signal orcd still writes to the renamed file.
        eq(srv.get("/hello.txt?renamed=1").status, 200, "after rename")
        wait_until(lambda: any("renamed=1" in ln for ln in lines(rotated)),
                   5, "the line written after the rename, before SIGUSR1")
        srv.signal(signal.SIGUSR1)
        wait_until(lambda: os.path.exists(srv.access_log), 5,
                   "a new access log of the old name")
        for i in range(3):
            eq(srv.get("/hello.txt?after=%d" % i).status, 200, "after")
        wait_until(lambda: sum("after=" in ln
                               for ln in lines(srv.access_log)) == 3, 5,
                   "three lines in the new file")
        old, new = lines(rotated), lines(srv.access_log)
        eq(sum("after=" in ln for ln in old), 0, "new lines in the old file")
        eq(sum("before=" in ln or "renamed=" in ln for ln in new), 0,
           "old lines in the new file")
        eq(len(old), 4 + 1, "old file: the start-up probe, 3 before, 1 "
           "renamed (%r)" % old)
        check(srv.proc.poll() is None, "orcd died on SIGUSR1")
        # A second rotation works the same way.
        os.rename(srv.access_log, srv.access_log + ".2")
        srv.signal(signal.SIGUSR1)
        wait_until(lambda: os.path.exists(srv.access_log), 5,
                   "the access log reopened a second time")
        eq(srv.get("/hello.txt?third=1").status, 200, "third file")
        wait_until(lambda: any("third=1" in ln
                               for ln in lines(srv.access_log)), 5,
                   "a line in the third file")
        srv.assert_fds_back()
        srv.stop()
    finally:
        srv.cleanup()


@orcdtest.case
def sigusr1_with_stdout_log_is_harmless():
    srv = orcdtest.Orcd()
    try:
        srv.write_conf()
        with open(srv.conf_path, "a") as f:
            f.write("access_log -;\n")
        srv.start()
        srv.signal(signal.SIGUSR1)
        eq(srv.get("/hello.txt").body, HELLO, "served after SIGUSR1")
        check("reopening the access log" not in srv.stderr_text(),
              srv.stderr_text())
        srv.stop()
    finally:
        srv.cleanup()


N_SLOW = 6
N_PIPELINED = 4


def read_body(c, n):
    """n body bytes (what c has buffered first); fewer when the peer
    closes. A bytearray: 32 MiB by bytes += would be quadratic."""
    got = bytearray(c.buf[:n])
    c.buf = c.buf[len(got):]
    while len(got) < n:
        chunk = c.sock.recv(min(1 << 20, n - len(got)))
        if not chunk:
            break
        got += chunk
    return bytes(got)


def stalled_reader(srv, big, results, i, started, go):
    """A download that stalls after its first bytes (the client stops
    reading, so orcd is blocked on it) and resumes only after SIGTERM:
    in flight when the signal lands."""
    try:
        c = srv.conn(timeout=30, rcvbuf=16384)
        c.send(build_request("GET", "/huge.bin", {"Connection": "close"}))
        r = c.read_response(head_request=True)
        first = c.read_exact(32768)
        started.release()
        go.wait(30)
        got = first + read_body(c, len(big) - len(first))
        results[i] = (r.status, got == big)
        c.close()
    except Exception as e:  # reported by the main thread
        results[i] = ("error", repr(e))
        started.release()


@orcdtest.case
def sigterm_loses_no_response_in_flight():
    srv = orcdtest.Orcd()
    try:
        srv.start()
        # Larger than the socket buffers between orcd and a stalled client
        # (tcp_wmem's 4 MiB maximum plus a 16 KiB receive buffer), so the
        # responses are really in flight in orcd, not in the kernel.
        big = bytes((i * 13) & 0xFF for i in range(65536)) * 192  # 12 MiB
        srv.write_file("huge.bin", big)
        results = [None] * N_SLOW
        started = threading.Semaphore(0)
        go = threading.Event()
        threads = [threading.Thread(target=stalled_reader,
                                    args=(srv, big, results, i, started,
                                          go))
                   for i in range(N_SLOW)]
        for t in threads:
            t.start()
        for _ in range(N_SLOW):
            check(started.acquire(timeout=20), "downloads did not start")
        # Pipelined requests: the one being answered when SIGTERM lands
        # completes; orcd then closes, as on any keep-alive connection
        # at stop, and requests it has not started are not answered
        # (the close tells the client to retry them, RFC 9112 9.3.2).
        # Every response that starts is whole.
        pipe = srv.conn(rcvbuf=65536)
        req = b"".join(build_request("GET", "/huge.bin")
                       for _ in range(N_PIPELINED))
        pipe.send(req)
        first = pipe.read_response(head_request=True)
        eq(first.status, 200, "first pipelined response")
        srv.signal(signal.SIGTERM)
        t_term = time.monotonic()

        wait_until(lambda: "stopping" in srv.stderr_text(), 10,
                   "orcd to log that it is stopping")
        alive = srv.proc.poll() is None
        go.set()
        check(alive, "orcd exited (%s) with responses in flight: %s"
              % (srv.proc.returncode, srv.stderr_text()))
        body = read_body(pipe, len(big))
        check(len(body) == len(big), "pipelined response cut at %d of %d "
              "bytes, %.1fs after SIGTERM: %s" % (
                  len(body), len(big), time.monotonic() - t_term,
                  srv.stderr_text()))
        check(body == big, "the pipelined response in flight differs")
        answered = 1
        while True:
            r = pipe.read_response(head_request=True)
            if r is None:
                break
            body = read_body(pipe, len(big))
            eq((r.status, body == big), (200, True),
               "pipelined response %d" % (answered + 1))
            answered += 1
        check(pipe.closed_by_peer(), "pipelined connection left open")
        pipe.close()
        for t in threads:
            t.join(60)
        bad = [(i, r) for i, r in enumerate(results) if r != (200, True)]
        check(not bad, "downloads cut by SIGTERM: %r%s (stderr: %s)"
              % (bad, " (the 10s drain bound expired: a slow host?)"
                 if "still busy" in srv.stderr_text() else "",
                 srv.stderr_text()))
        eq(srv.proc.wait(30), 0, "exit status after draining")
    finally:
        if "go" in locals():
            go.set()
        srv.cleanup()


if __name__ == "__main__":
    sys.exit(orcdtest.run_serverless())
