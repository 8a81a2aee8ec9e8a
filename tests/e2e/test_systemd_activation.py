#!/usr/bin/env python3
"""Socket activation: orcd started by systemd-socket-activate (from the
systemd package) on 127.0.0.1 serves on the passed socket and binds
nothing itself; a passed socket named "metrics" serves the metrics page
instead of metrics_listen. Each case starts its own orcd."""

import os
import shutil
import subprocess
import sys

import orcdtest
from orcdtest import BIN, build_request, check, eq, wait_until
from systemdtest import listening_fds

HELLO = b"hello, world\n"


class Activated:
    """orcd under systemd-socket-activate -l 127.0.0.1:PORT..., with a
    config whose own listen/metrics_listen are other (free) ports."""

    def __init__(self, names, conf=""):
        if not shutil.which("systemd-socket-activate"):
            raise orcdtest.Skip("systemd-socket-activate not installed")
        self.srv = orcdtest.Orcd()
        self.conf_port = self.srv.port  # in the file; must stay unbound
        self.ports = [orcdtest.free_port() for _ in names]
        self.srv.port = self.ports[0]
        self.srv.addr = ("127.0.0.1", self.ports[0])
        with open(self.srv.conf_path, "a") as f:
            f.write(conf)
        cmd = ["systemd-socket-activate"]
        for p in self.ports:
            cmd += ["-l", "127.0.0.1:%d" % p]
        cmd += ["--fdname=" + ":".join(names), BIN, "-c",
                self.srv.conf_path]
        self.srv.stderr = open(self.srv.log_path, "wb")
        # systemd-socket-activate execs orcd in its own process on the
        # first connection: the PID stays the same.
        self.srv.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL,
                                         stderr=self.srv.stderr)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.srv.cleanup()

    def wait_serving(self):
        # Not _answers(): that closes its probe and the first connection
        # is what makes systemd-socket-activate exec orcd.
        r = wait_until(lambda: self.try_get("/hello.txt"), 15,
                       "orcd to answer on the passed socket")
        eq(r.body, HELLO, "body over the passed socket")
        wait_until(lambda: os.readlink("/proc/%d/exe" % self.srv.proc.pid)
                   == os.path.realpath(BIN), 5, "the exec of orcd")

    def try_get(self, path, port=None):
        if self.srv.proc.poll() is not None:
            raise orcdtest.TestFailure("exited with %d: %s" % (
                self.srv.proc.returncode, self.srv.stderr_text()))
        try:
            with orcdtest.Conn(("127.0.0.1", port or self.ports[0]),
                               timeout=5) as c:
                c.send(build_request("GET", path, {"Connection": "close"}))
                return c.read_response()
        except (OSError, orcdtest.TestFailure):
            return None


def refused(port):
    try:
        orcdtest.Conn(("127.0.0.1", port), timeout=2).close()
        return False
    except ConnectionRefusedError:
        return True


@orcdtest.case
def serves_on_passed_socket_and_binds_nothing():
    with Activated(["http"]) as a:
        a.wait_serving()
        fds = listening_fds(a.srv.proc.pid)
        eq(fds, {3: a.ports[0]}, "orcd's listening sockets (fd: port)")
        check(refused(a.conf_port), "the config's listen port %d answers"
              % a.conf_port)
        text = a.srv.stderr_text()
        check("fd 3 (http) serves HTTP" in text,
              "no log line naming the passed fd: %s" % text)
        for _ in range(5):
            eq(a.try_get("/hello.txt").body, HELLO, "repeated request")
        a.srv.stop()


@orcdtest.case
def unnamed_sockets_serve_http():
    # Without --fdname, libsystemd names every fd "unknown": HTTP.
    with Activated(["unknown", "unknown"]) as a:
        a.wait_serving()
        eq(a.try_get("/hello.txt", a.ports[1]).body, HELLO,
           "second passed socket")
        eq(sorted(listening_fds(a.srv.proc.pid).values()), sorted(a.ports),
           "listening ports")
        a.srv.stop()


@orcdtest.case
def socket_named_metrics_serves_metrics():
    metrics_port = orcdtest.free_port()
    conf = ("metrics on;\nmetrics_listen 127.0.0.1:%d;\n" % metrics_port)
    with Activated(["http", "metrics"], conf) as a:
        a.wait_serving()
        r = wait_until(lambda: a.try_get("/metrics", a.ports[1]), 10,
                       "the metrics page on the passed socket")
        eq(r.status, 200, "metrics status")
        check(b"orcd_requests_total" in r.body, "not the metrics page: %r"
              % r.body[:200])
        eq(a.try_get("/metrics").status, 404,
           "metrics path on the HTTP socket")
        eq(listening_fds(a.srv.proc.pid), {3: a.ports[0], 4: a.ports[1]},
           "orcd's listening sockets")
        check(refused(metrics_port), "metrics_listen was bound too")
        a.srv.stop()


@orcdtest.case
def metrics_socket_closed_when_metrics_off():
    with Activated(["http", "metrics"]) as a:
        a.wait_serving()
        eq(listening_fds(a.srv.proc.pid), {3: a.ports[0]},
           "orcd's listening sockets")
        text = a.srv.stderr_text()
        check("metrics is off" in text,
              "no warning about the unused metrics socket")
        # systemd still listens there: the warning says what that means.
        check("scrapes there wait unanswered: set metrics on, or stop and "
              "disable the unit" in text, "the warning gives no way out: %s"
              % text)
        a.srv.stop()


if __name__ == "__main__":
    sys.exit(orcdtest.run_serverless())
