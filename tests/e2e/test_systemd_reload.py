#!/usr/bin/env python3
"""Reload (SIGHUP, systemctl reload) of the listen addresses: an added
address serves, a removed one stops once the previous workers drained,
one that stays never refuses a connection, a download running through
the swap completes, an address that cannot be bound fails the reload and
leaves everything as it was, counters do not go backwards, and no fd
leaks across generations. Each case starts its own orcd."""

import os
import re
import signal
import socket
import subprocess
import sys
import threading

import orcdtest
from orcdtest import build_request, check, eq, wait_until

HELLO = b"hello, world\n"


def set_listen(srv, ports, extra=""):
    tmp = srv.conf_path + ".tmp"
    with open(tmp, "w") as f:
        for p in ports:
            f.write("listen 127.0.0.1:%d;\n" % p)
        f.write("root %s;\nengine %s;\nthreads 2;\naccess_log %s;\n%s"
                % (srv.root, srv.engine, srv.access_log, extra))
    os.rename(tmp, srv.conf_path)


def get(port, path="/hello.txt"):
    with orcdtest.Conn(("127.0.0.1", port), timeout=5) as c:
        c.send(build_request("GET", path, {"Connection": "close"}))
        return c.read_response()


def answers(port):
    try:
        r = get(port)
        return r is not None and r.body == HELLO
    except OSError:
        return False


def refused(port):
    """Nothing listens on port any more (a connection that reached a
    backlog just before its socket closed is reset instead)."""
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
        return False
    except (ConnectionRefusedError, ConnectionResetError):
        return True


def reloads(srv, n_before):
    """SIGHUP; wait until the reload is logged (done or failed)."""
    srv.signal(signal.SIGHUP)
    wait_until(lambda: len(re.findall(r"configuration reloaded|reload failed",
                                      srv.stderr_text())) > n_before,
               10, "the reload to finish")


def n_reloads(srv):
    return len(re.findall(r"configuration reloaded|reload failed",
                          srv.stderr_text()))


def fd_table(srv):
    out = {}
    for fd in os.listdir("/proc/%d/fd" % srv.proc.pid):
        try:
            out[int(fd)] = os.readlink("/proc/%d/fd/%s" % (srv.proc.pid,
                                                           fd))
        except OSError:
            pass
    return out


def fds_back(srv):
    """assert_fds_back, saying which fds differ when they do not."""
    try:
        srv.assert_fds_back()
    except orcdtest.TestFailure as e:
        now = fd_table(srv)
        diff = {fd: t for fd, t in now.items()
                if srv.fd_table.get(fd) != t}
        raise orcdtest.TestFailure("%s; differing: %r" % (e, diff))


class Server:
    def __init__(self, extra=""):
        self.srv = orcdtest.Orcd()
        set_listen(self.srv, [self.srv.port], extra)

    def __enter__(self):
        self.srv.start()
        self.srv.fd_table = fd_table(self.srv)
        return self.srv

    def __exit__(self, *exc):
        self.srv.cleanup()


@orcdtest.case
def add_then_remove_an_address():
    with Server() as srv:
        a, b = srv.port, orcdtest.free_port()
        check(refused(b), "port %d answers before the reload" % b)
        # Something hammers address a through the first reload, which
        # keeps it: every request is answered (the retiring workers even
        # serve connections they accepted before any request came). It
        # stops before a is removed: connections still in a removed
        # socket's backlog are reset, as with nginx, and a freed port
        # may soon be another test's.
        stop, errors, count = threading.Event(), [], [0]

        def hammer():
            while not stop.is_set():
                try:
                    r = get(a)
                    if r is None or r.body != HELLO:
                        errors.append(repr(r))
                    count[0] += 1
                except (OSError, orcdtest.TestFailure) as e:
                    errors.append(repr(e))
        t = threading.Thread(target=hammer)
        t.start()
        try:
            wait_until(lambda: count[0] >= 20, 10, "the hammer to run")
            set_listen(srv, [a, b])
            reloads(srv, n_reloads(srv))
            check("new workers serve the new listen addresses"
                  in srv.stderr_text(), srv.stderr_text())
            wait_until(lambda: answers(b), 10, "the added address")
            wait_until(lambda: "previous listen addresses finished"
                       in srv.stderr_text(), 15,
                       "the first old workers to finish")
            n = count[0]
            wait_until(lambda: count[0] >= n + 20, 10,
                       "requests on a after the swap")
            stop.set()
            t.join(30)
            set_listen(srv, [b])
            reloads(srv, n_reloads(srv))
            wait_until(lambda: refused(a), 15,
                       "the removed address to refuse connections")
            eq(get(b).body, HELLO, "the address that stayed")
            stop.set()
        finally:
            stop.set()
            t.join(30)
        # A timeout here would be a connection stranded in a shared
        # socket's queue (io_uring accepts wait exclusively; see
        # wait_turns() in server.c).
        check(not errors, "requests lost while their address stayed: %r"
              % errors[:5])
        srv.addr = ("127.0.0.1", b)
        srv.port = b
        wait_until(lambda: "previous listen addresses finished"
                   in srv.stderr_text(), 15, "the old workers to finish")
        fds_back(srv)
        srv.stop()


@orcdtest.case
def reload_logged_after_the_old_workers_stopped_accepting():
    # A client that has seen the reload logged must not have its next
    # connection taken by a retiring worker, which closes it once its
    # first response is out: the client's second request would go
    # unanswered (the soak's "closed unanswered" on epoll). Each swap's
    # log has every old worker's line before "configuration reloaded".
    stopped = "retired by a reload; accepts no more connections"
    with Server() as srv:
        a = srv.port
        for i in range(6):
            ports = [a] if i % 2 else [a, orcdtest.free_port()]
            set_listen(srv, ports)
            before = len(srv.stderr_text())
            reloads(srv, n_reloads(srv))
            text = srv.stderr_text()[before:]
            check("configuration reloaded" in text,
                  "swap %d not reloaded: %s" % (i, text))
            done = text.index("configuration reloaded")
            eq(text.count(stopped, 0, done), 2,
               "old workers' lines before the reload's (swap %d): %s"
               % (i, text))
            with orcdtest.Conn(("127.0.0.1", a), timeout=5) as c:
                for k in range(2):
                    c.send(build_request("GET", "/hello.txt"))
                    r = c.read_response()
                    check(r is not None and r.body == HELLO,
                          "request %d after swap %d: %r" % (k, i, r))
            wait_until(lambda: srv.stderr_text().count(
                "previous listen addresses finished") == i + 1, 15,
                "the old workers of swap %d to finish" % i)
        fds_back(srv)
        srv.stop()


@orcdtest.case
def download_survives_the_swap():
    with Server() as srv:
        with open(srv.path("big.bin"), "rb") as f:
            big = f.read()
        c = srv.conn(rcvbuf=16384)
        c.send(build_request("GET", "/big.bin", {"Connection": "close"}))
        r = c.read_response(head_request=True)
        eq(r.status, 200, "status")
        got = c.read_exact(65536)
        b = orcdtest.free_port()
        set_listen(srv, [b])
        reloads(srv, n_reloads(srv))
        wait_until(lambda: answers(b), 10, "the new address")
        got += c.read_exact(len(big) - len(got))
        check(got == big, "the download differs after the swap")
        check(c.closed_by_peer(), "connection not closed at the end")
        c.close()
        wait_until(lambda: refused(srv.port), 15, "the old address to go")
        srv.addr = ("127.0.0.1", b)
        srv.port = b
        srv.stop()


@orcdtest.case
def unbindable_address_fails_the_reload():
    with Server() as srv:
        # A socket without SO_REUSEPORT holds the port: orcd cannot bind it.
        holder = socket.socket()
        holder.bind(("127.0.0.1", 0))
        holder.listen(1)
        taken = holder.getsockname()[1]
        try:
            set_listen(srv, [srv.port, taken])
            before = srv.stderr_text()
            reloads(srv, n_reloads(srv))
            text = srv.stderr_text()[len(before):]
            check(re.search(r"<3>orcd: reload failed.*127\.0\.0\.1:%d" % taken,
                            text), "no error naming the address: %s" % text)
            eq(get(srv.port).body, HELLO, "the running address")
            # The rest of that config was not applied either.
            check("configuration reloaded" not in text, text)
        finally:
            holder.close()
        fds_back(srv)
        srv.stop()


@orcdtest.case
def counters_carry_over():
    mport = orcdtest.free_port()
    extra = "metrics on;\nmetrics_listen 127.0.0.1:%d;\n" % mport
    with Server(extra) as srv:

        def requests():
            return orcdtest.read_metrics(mport).total("orcd_requests_total")

        for _ in range(5):
            eq(get(srv.port).status, 200, "request")
        before = requests()
        check(before >= 5, "requests before: %d" % before)
        b = orcdtest.free_port()
        set_listen(srv, [b], extra)
        reloads(srv, n_reloads(srv))
        wait_until(lambda: "previous listen addresses finished"
                   in srv.stderr_text(), 15, "the old workers to finish")
        eq(get(b).status, 200, "request on the new address")
        # Counted once the response is out, a moment after the client
        # has it.
        wait_until(lambda: requests() >= before + 1, 5,
                   "requests to go on from %d" % before)
        srv.addr = ("127.0.0.1", b)
        srv.port = b
        srv.stop()


@orcdtest.case
def second_orcd_on_the_same_port_fails():
    # SO_REUSEPORT (one socket per worker) must not let a second orcd
    # share the port and silently take part of its connections.
    with Server() as srv:
        other = orcdtest.Orcd()
        try:
            set_listen(other, [srv.port])
            p = subprocess.run([orcdtest.BIN, "-c", other.conf_path],
                               stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, timeout=20)
            eq(p.returncode, 1, "exit status of the second orcd")
            check(b"Address already in use" in p.stderr,
                  "stderr: %r" % p.stderr)
        finally:
            other.cleanup()
        # And a reload cannot add an address another orcd serves.
        third = orcdtest.Orcd()
        try:
            third.start()
            set_listen(srv, [srv.port, third.port])
            before = srv.stderr_text()
            reloads(srv, n_reloads(srv))
            check("Address already in use" in srv.stderr_text()[len(before):],
                  srv.stderr_text())
            third.stop()
        finally:
            third.cleanup()
        eq(get(srv.port).body, HELLO, "the first orcd still serves")
        srv.stop()


if __name__ == "__main__":
    sys.exit(orcdtest.run_serverless())
