#!/usr/bin/env python3
"""sd_notify: a NOTIFY_SOCKET listener (an AF_UNIX datagram socket the
test binds) records what orcd tells the service manager across start,
a good reload, a bad reload and stop: READY=1, STATUS=, WATCHDOG=1
(WATCHDOG_USEC with WATCHDOG_PID), RELOADING=1 with MONOTONIC_USEC, then
READY=1 again, and STOPPING=1, in that order. Each case starts its own
orcd."""

import ctypes
import os
import re
import signal
import subprocess
import sys
import time

import orcdtest
from orcdtest import BIN, check, eq, wait_until
from systemdtest import NotifyListener

HELLO = b"hello, world\n"
WATCHDOG_USEC = 4000000  # orcd looks every 2s; idle loops turn every 1s


class Notified:
    """An orcd with NOTIFY_SOCKET (and optionally the watchdog) set."""

    def __init__(self, watchdog_pid="self"):
        self.srv = orcdtest.Orcd()
        self.notify = NotifyListener(os.path.join(self.srv.tmp, "notify"))
        self.watchdog_pid = watchdog_pid

    def __enter__(self):
        env = dict(os.environ, NOTIFY_SOCKET=self.notify.path)
        cmd = [BIN, "-c", self.srv.conf_path]
        if self.watchdog_pid is not None:
            env["WATCHDOG_USEC"] = str(WATCHDOG_USEC)
            if self.watchdog_pid == "self":
                # WATCHDOG_PID must be orcd's own PID: exec keeps the
                # shell's.
                cmd = ["/bin/sh", "-c", 'WATCHDOG_PID=$$ exec "$0" "$@"'] \
                    + cmd
            else:
                env["WATCHDOG_PID"] = str(self.watchdog_pid)
        self.srv.stderr = open(self.srv.log_path, "wb")
        self.srv.proc = subprocess.Popen(cmd, env=env,
                                         stdout=subprocess.DEVNULL,
                                         stderr=self.srv.stderr)
        wait_until(self.srv._answers, 15, "orcd to answer")
        return self

    def __exit__(self, *exc):
        self.notify.close()
        self.srv.cleanup()

    def msgs(self):
        return [m for _, m in self.notify.messages]

    def wait(self, pred, what, start=0, timeout=10):
        return self.notify.wait_for(pred, timeout, what, start)

    def set_conf(self, extra, root=None):
        tmp = self.srv.conf_path + ".tmp"
        with open(tmp, "w") as f:
            f.write("listen 127.0.0.1:%d;\nroot %s;\nengine %s;\n"
                    "threads 1;\n%s" % (self.srv.port,
                                        root or self.srv.root,
                                        self.srv.engine, extra))
        os.rename(tmp, self.srv.conf_path)


def is_ready(m):
    return m.get("READY") == "1"


def reload_and_wait(n, start):
    """SIGHUP; the index of RELOADING=1 and of the READY=1 after it."""
    before = time.monotonic()
    n.srv.signal(signal.SIGHUP)
    i = n.wait(lambda m: m.get("RELOADING") == "1", "RELOADING=1", start)
    m = n.msgs()[i]
    check("MONOTONIC_USEC" in m, "RELOADING=1 without MONOTONIC_USEC: %r"
          % m)
    usec = int(m["MONOTONIC_USEC"])
    # CLOCK_MONOTONIC, as Python's time.monotonic() on Linux.
    check(before * 1e6 - 1e5 <= usec <= time.monotonic() * 1e6 + 1e5,
          "MONOTONIC_USEC %d not between %d and %d" % (
              usec, before * 1e6, time.monotonic() * 1e6))
    j = n.wait(is_ready, "READY=1 after RELOADING=1", i + 1)
    return i, j


@orcdtest.case
def start_reload_stop_sequence():
    with Notified() as n:
        ready = n.wait(is_ready, "READY=1")
        n.wait(lambda m: "STATUS" in m, "STATUS=", ready)
        n.wait(lambda m: m.get("WATCHDOG") == "1", "WATCHDOG=1", ready)
        first_wd = next(i for i, m in enumerate(n.msgs())
                        if m.get("WATCHDOG") == "1")
        check(first_wd > ready, "WATCHDOG=1 before READY=1: %r" % n.msgs())

        # A good reload: a new root, served after READY=1.
        second = os.path.join(n.srv.tmp, "second")
        os.makedirs(second)
        with open(os.path.join(second, "hello.txt"), "wb") as f:
            f.write(b"second root\n")
        n.set_conf("", root=second)
        i, j = reload_and_wait(n, len(n.msgs()))
        eq(n.srv.get("/hello.txt").body, b"second root\n",
           "served after READY=1 of the reload")

        # A bad reload: reported, READY=1 anyway, the old config stays.
        n.set_conf("bogus_directive 1;\n", root=second)
        i, j = reload_and_wait(n, j + 1)
        check(re.search(r"<3>orcd: reload failed.*bogus_directive",
                        n.srv.stderr_text()),
              "no error line for the bad reload: %s" % n.srv.stderr_text())
        eq(n.srv.get("/hello.txt").body, b"second root\n",
           "served after a bad reload")

        # Requests show in STATUS= within a second or two.
        k = n.wait(lambda m: re.search(r"[1-9]\d* requests",
                                       m.get("STATUS", "")),
                   "STATUS= counting requests", j + 1, timeout=5)
        check(n.msgs()[k]["STATUS"].startswith(
            "engine %s" % n.srv.engine), "STATUS= names another engine: %r"
            % n.msgs()[k])

        n.srv.signal(signal.SIGTERM)
        s = n.wait(lambda m: m.get("STOPPING") == "1", "STOPPING=1", j + 1)
        n.srv.finish(30)
        n.notify.poll(0.1)
        check(not any(is_ready(m) for m in n.msgs()[s:]),
              "READY=1 after STOPPING=1: %r" % n.msgs()[s:])


@orcdtest.case
def watchdog_pings_at_half_the_interval():
    with Notified() as n:
        ready = n.wait(is_ready, "READY=1")
        start = time.monotonic()
        pings = []
        while len(pings) < 4:
            k = n.wait(lambda m: m.get("WATCHDOG") == "1",
                       "WATCHDOG=1 number %d" % (len(pings) + 1),
                       pings[-1] + 1 if pings else ready,
                       timeout=WATCHDOG_USEC / 1e6)
            pings.append(k)
        times = [n.notify.messages[k][0] for k in pings]
        gaps = [b - a for a, b in zip(times, times[1:])]
        half = WATCHDOG_USEC / 2e6
        check(all(half * 0.7 < g < half * 1.5 for g in gaps),
              "WATCHDOG=1 gaps %r, want about %.1fs" % (gaps, half))
        check(time.monotonic() - start < 4 * half * 1.5 + 1,
              "pings too slow")
        n.srv.stop()


@orcdtest.case
def no_watchdog_for_another_pid():
    # WATCHDOG_PID names another process: the watchdog is not ours.
    with Notified(watchdog_pid=1) as n:
        n.wait(is_ready, "READY=1")
        n.notify.poll(WATCHDOG_USEC / 1e6)
        check(not any("WATCHDOG" in m for m in n.msgs()),
              "WATCHDOG=1 sent for another PID's watchdog")
        n.srv.stop()


@orcdtest.case
def without_notify_socket_nothing_changes():
    os.environ.pop("NOTIFY_SOCKET", None)
    os.environ.pop("WATCHDOG_USEC", None)
    srv = orcdtest.Orcd()
    try:
        srv.start()
        eq(srv.get("/hello.txt").body, HELLO, "served")
        srv.signal(signal.SIGHUP)
        wait_until(lambda: "configuration reloaded" in srv.stderr_text(),
                   10, "the reload")
        eq(srv.get("/hello.txt").body, HELLO, "served after reload")
        srv.stop()
    finally:
        srv.cleanup()


# ---- a hung worker: stop one thread with ptrace, not the process ----

PTRACE_SEIZE, PTRACE_INTERRUPT, PTRACE_DETACH = 0x4206, 0x4207, 17


def worker_tids(pid):
    """Threads of orcd other than the main one and io_uring's io-wq."""
    out = []
    for tid in os.listdir("/proc/%d/task" % pid):
        with open("/proc/%d/task/%s/comm" % (pid, tid)) as f:
            comm = f.read().strip()
        if int(tid) != pid and not comm.startswith("iou-"):
            out.append(int(tid))
    return out


@orcdtest.case
def hung_worker_stops_the_pings():
    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError as e:
        raise orcdtest.Skip("no libc for ptrace: %s" % e)
    libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p,
                            ctypes.c_void_p]
    with Notified() as n:
        ready = n.wait(is_ready, "READY=1")
        n.wait(lambda m: m.get("WATCHDOG") == "1", "a first WATCHDOG=1",
               ready)
        tids = worker_tids(n.srv.proc.pid)
        eq(len(tids), 1, "worker threads (threads 1)")
        tid = tids[0]
        # PTRACE_SEIZE + PTRACE_INTERRUPT stop this one thread only; the
        # main thread goes on running (and would go on pinging).
        if libc.ptrace(PTRACE_SEIZE, tid, None, None) != 0:
            raise orcdtest.Skip("ptrace not permitted here: %s"
                                % os.strerror(ctypes.get_errno()))
        try:
            check(libc.ptrace(PTRACE_INTERRUPT, tid, None, None) == 0,
                  "PTRACE_INTERRUPT: %s" % os.strerror(ctypes.get_errno()))
            os.waitpid(tid, 0x40000000)  # __WALL: a traced thread
            stopped = len(n.msgs())
            wait_until(lambda: "has not turned" in n.srv.stderr_text(), 10,
                       "the watchdog warning about the hung worker")
            # Then no ping for a whole interval: systemd would kill us.
            n.notify.poll(WATCHDOG_USEC / 1e6)
            late = [m for m in n.msgs()[stopped:]
                    if m.get("WATCHDOG") == "1"]
            check(len(late) <= 1, "WATCHDOG=1 while the worker is stopped "
                  "(one may have been due before it stopped): %r" % late)
            check(any("STATUS" in m for m in n.msgs()[stopped:]),
                  "the main thread itself stopped")
        finally:
            libc.ptrace(PTRACE_DETACH, tid, None, None)
        resumed = len(n.msgs())
        n.wait(lambda m: m.get("WATCHDOG") == "1",
               "WATCHDOG=1 once the worker runs again", resumed,
               timeout=2 * WATCHDOG_USEC / 1e6)
        eq(n.srv.get("/hello.txt").body, HELLO, "served after the stop")
        n.srv.stop()


if __name__ == "__main__":
    sys.exit(orcdtest.run_serverless())
