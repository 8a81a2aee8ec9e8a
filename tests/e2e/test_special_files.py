#!/usr/bin/env python3
"""FIFOs and device nodes under the root never hold a request: the plan
refuses what is not a regular file (404). A FIFO that takes a regular
file's place after the plan (a bind mount raises no inotify event; with
ORCD_TEST_IGNORE_MOUNTS the stat cache's facts stay "regular", as they
would for a change racing the plan) is opened by the chain: that open
never waits for a writer (RESOLVE_CACHED: not even when the name left
the dentry cache), and a read that waits for data ends at send_timeout (the timer cancels the chain's step in flight,
not the send queued behind it); either way a 404, and chains and slots
come back. Without the stat cache (`stat_cache 0`: epoll's plan opens
the file for reading) an open refused for what the path is decides
nothing: a socket (ENXIO) is 404, a directory orcd may search but not
read (0711, EACCES) is still redirected and its index served. Each case
starts its own orcd; the mount cases need root."""

import os
import socket
import stat
import subprocess
import sys

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


# With and without the stat cache: without it epoll's plan opens the
# file for reading before it knows its kind.
CACHE_CONFS = (("stat cache", ""), ("stat_cache 0", "stat_cache 0;\n"))


def gauges(srv):
    """The metrics page's in-use gauges: chains and slots."""
    m = srv.metrics()
    return m["orcd_chains_in_flight"], m["orcd_slots_in_use"]


@orcdtest.case
def fifo_and_device_node_answer_404():
    for what, conf in CACHE_CONFS:
        with Server(conf=conf) as srv:
            srv.start()
            os.mkfifo(srv.path("pipe"))
            names = ["pipe"]
            if os.geteuid() == 0:
                try:
                    os.mknod(srv.path("zero"), 0o644 | stat.S_IFCHR,
                             os.makedev(1, 5))
                    names.append("zero")
                except OSError:
                    pass  # no CAP_MKNOD here (a container): the FIFO
            for name in names:
                for method in ("GET", "HEAD"):
                    eq(get(srv, "/" + name, method).status, 404,
                       "%s /%s, %s" % (method, name, what))
            eq(get(srv, "/hello.txt").body, HELLO, "served after them")
            srv.assert_fds_back()
            srv.stop()


@orcdtest.case
def socket_file_answers_404():
    for what, conf in CACHE_CONFS:
        with Server(conf=conf) as srv:
            srv.start()
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                s.bind(srv.path("sock"))
                for method in ("GET", "HEAD"):
                    eq(get(srv, "/sock", method).status, 404,
                       "%s /sock (a socket), %s" % (method, what))
                eq(get(srv, "/sock/").status, 404, "/sock/, " + what)
            finally:
                s.close()
            eq(get(srv, "/hello.txt").body, HELLO, "served after it")
            srv.assert_fds_back()
            srv.stop()


@orcdtest.case
def search_only_directory_serves_its_index():
    # nginx: `GET /priv` 301, `GET /priv/` its index. A 0711 directory
    # (0111 when orcd runs as its owner) refuses an open for reading
    # with EACCES, which without the stat cache was answered 403.
    user = orcdtest.unprivileged_conf()
    for what, conf in CACHE_CONFS:
        with Server(conf=user + conf) as srv:
            for d in (srv.tmp, srv.root):
                os.chmod(d, 0o755)  # nobody must reach the root
            srv.write_file("priv/index.html", b"<p>private index</p>\n")
            os.chmod(srv.path("priv/index.html"), 0o644)
            os.chmod(srv.path("priv"), 0o711 if user else 0o111)
            try:
                srv.start()
                r = get(srv, "/priv?q=1")
                eq(r.status, 301, "GET /priv (0711), " + what)
                eq(r.header("location"), "/priv/?q=1", "Location, " + what)
                for method in ("GET", "HEAD"):
                    r = get(srv, "/priv/", method)
                    eq(r.status, 200,
                       "%s /priv/ (0711), %s" % (method, what))
                eq(get(srv, "/priv/").body, b"<p>private index</p>\n",
                   "index of /priv/, " + what)
                eq(get(srv, "/priv/index.html").status, 200,
                   "/priv/index.html, " + what)
                eq(get(srv, "/priv/nope.html").status, 404,
                   "/priv/nope.html, " + what)
                srv.assert_fds_back()
                srv.stop()
            finally:
                os.chmod(srv.path("priv"), 0o755)  # for the cleanup


def bind_mount(src, dst):
    p = subprocess.run(["mount", "--bind", src, dst],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if p.returncode:
        raise orcdtest.Skip("mount --bind: %s"
                            % p.stderr.decode().strip())


def umount(path):
    # Lazy: a failing run may leave orcd holding the FIFO open.
    subprocess.run(["umount", "-l", path], stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)


def swapped_fifo(srv, name, stack):
    """name: a regular file whose facts (not bytes) the stat cache holds,
    with a FIFO bind-mounted over it: a mount raises no inotify event,
    and orcd runs with ORCD_TEST_IGNORE_MOUNTS (its cache would otherwise
    empty itself at a mount, test_freshness), so the next GET plans from
    "regular, 1000 bytes" and opens the FIFO in its chain."""
    srv.write_file(name, b"x" * 1000)
    # HEAD: facts cached, no body kept (a GET would keep the bytes, and
    # the next GET would need no chain).
    eq(get(srv, "/" + name, "HEAD").status, 200, "HEAD " + name)
    fifo = os.path.join(srv.tmp, name + ".fifo")
    os.mkfifo(fifo)
    bind_mount(fifo, srv.path(name))
    stack.append(lambda: umount(srv.path(name)))
    return fifo


def settled(srv, idle):
    """Chains ended and their slots came back (the close completed)."""
    orcdtest.wait_until(lambda: gauges(srv) == idle, 10,
                        "chains and slots back to %r" % (idle,))
    srv.assert_fds_back()


def drop_dentries():
    """Evict unused dentries (all of the machine's: costs others a few
    lookups), so the next walk to a name leaves the dentry cache."""
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("2\n")
    except OSError as e:
        raise orcdtest.Skip("cannot drop the dentry cache: %s" % e)


@orcdtest.case
def fifo_swapped_in_open_does_not_wait():
    # A directory bind-mounted over one whose file's facts are cached,
    # with a FIFO of the same name, its dentry evicted: the chain's open
    # walks outside the dentry cache, which io_uring runs in io-wq,
    # blocking (it waited in wait_for_partner for a writer). With
    # RESOLVE_CACHED it is -EAGAIN, a fresh lookup sees the FIFO: a 404
    # at once. send_timeout 1h: the timer is no help within 15 s.
    if os.geteuid() != 0:
        raise orcdtest.Skip("needs root for mount --bind")
    with Server(conf="send_timeout 1h;\n", metrics=True) as srv:
        srv.env["ORCD_TEST_IGNORE_MOUNTS"] = "1"
        srv.start()
        idle = gauges(srv)
        srv.write_file("dir/cold.txt", b"x" * 1000)
        eq(get(srv, "/dir/cold.txt", "HEAD").status, 200, "HEAD")
        other = os.path.join(srv.tmp, "other")
        os.mkdir(other)
        os.mkfifo(os.path.join(other, "cold.txt"))
        bind_mount(other, srv.path("dir"))
        try:
            drop_dentries()
            eq(get(srv, "/dir/cold.txt").status, 404, "FIFO, cold dentry")
            eq(get(srv, "/hello.txt").body, HELLO, "served after it")
        finally:
            umount(srv.path("dir"))
        settled(srv, idle)
        srv.stop()


@orcdtest.case
def fifo_swapped_in_read_ends_within_send_timeout():
    # The open succeeds (io_uring's inline try is O_NONBLOCK), and the
    # read polls the FIFO: it is not ready until a writer came and went
    # or wrote. The send timer cancels that read (the send behind it is
    # not issued yet: cancelling the send found nothing, for ever).
    if os.geteuid() != 0:
        raise orcdtest.Skip("needs root for mount --bind")
    with Server(conf="send_timeout 1s;\n", metrics=True) as srv:
        srv.env["ORCD_TEST_IGNORE_MOUNTS"] = "1"
        srv.start()
        idle = gauges(srv)
        undo = []
        try:
            swapped_fifo(srv, "lone.txt", undo)
            eq(get(srv, "/lone.txt").status, 404, "FIFO without a writer")
            fifo = swapped_fifo(srv, "fed.txt", undo)
            writer = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)
            undo.insert(0, lambda: os.close(writer))
            r = get(srv, "/fed.txt")
            eq(r.status, 404, "FIFO with a silent writer")
            check(b"x" * 1000 not in r.body, "stale bytes sent")
            eq(get(srv, "/hello.txt").body, HELLO, "served after it")
        finally:
            for u in undo:
                u()
        settled(srv, idle)
        srv.stop()


if __name__ == "__main__":
    sys.exit(orcdtest.run_serverless())
