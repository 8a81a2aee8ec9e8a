#!/usr/bin/env python3
"""FIFOs and device nodes under the root never hold a request: the plan
refuses what is not a regular file (404). A FIFO that takes a regular
file's place after the plan (a bind mount raises no inotify event; with
ORCD_TEST_IGNORE_MOUNTS the stat cache's facts stay "regular", as they
would for a change racing the plan) is opened by the chain: that open
never waits for a writer (RESOLVE_CACHED: not even when the name left
the dentry cache), and a read that waits for data ends at send_timeout (the timer cancels the chain's step in flight,
not the send queued behind it); either way a 404, and chains and slots
come back. A mount over a cached directory is served at once (the
cache watches the mount table). Without the stat cache (`stat_cache 0`:
epoll's plan opens the file for reading) only a regular file is opened:
a FIFO's blocked writer is not let go (a device's driver is not run), a
socket is 404, a directory orcd may search but not read (0711) is still
redirected and its index served. Each case
starts its own orcd; the mount cases need root, and make their mounts
in orcd's own mount namespace (others' caches would empty at them)."""

import os
import signal
import socket
import stat
import sys
import threading

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


def gauges(srv, m=None):
    """The metrics page's in-use gauges: chains and slots."""
    m = srv.metrics() if m is None else m
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
            # A writer waits in its open for a reader: orcd must not be
            # one (the open of a device would run its driver likewise).
            writer = threading.Thread(
                target=lambda: os.close(os.open(srv.path("pipe"),
                                                os.O_WRONLY)))
            writer.start()
            try:
                for name in names:
                    for method in ("GET", "HEAD"):
                        eq(get(srv, "/" + name, method).status, 404,
                           "%s /%s, %s" % (method, name, what))
                writer.join(0.5)
                check(writer.is_alive(), "the FIFO's writer was let go: "
                      "orcd opened it for reading, " + what)
            finally:
                os.close(os.open(srv.path("pipe"),
                                 os.O_RDONLY | os.O_NONBLOCK))
                writer.join()
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


def swapped_fifo(srv, name, stack):
    """name: a regular file whose facts (not bytes) the stat cache holds,
    with a FIFO bind-mounted over it: a mount raises no inotify event,
    and orcd runs with ORCD_TEST_IGNORE_MOUNTS (its cache would otherwise
    empty itself at a mount: mount_over_a_cached_directory), so the next
    GET plans from
    "regular, 1000 bytes" and opens the FIFO in its chain."""
    srv.write_file(name, b"x" * 1000)
    # HEAD: facts cached, no body kept (a GET would keep the bytes, and
    # the next GET would need no chain).
    eq(get(srv, "/" + name, "HEAD").status, 200, "HEAD " + name)
    fifo = os.path.join(srv.tmp, name + ".fifo")
    os.mkfifo(fifo)
    srv.mount("--bind", fifo, srv.path(name))
    stack.append(lambda: srv.umount(srv.path(name)))
    return fifo


def start_mounting(srv):
    """Start srv in a mount namespace of its own, for a case that mounts
    over what it serves (a Skip where orcd runs in the guest)."""
    if srv.shared_fs:
        raise orcdtest.Skip("orcd runs in the guest: a mount here is not "
                            "in its namespace")
    srv.private_mounts()
    srv.start()


def cache_counts(srv):
    """Stat cache hits and flushes so far."""
    m = srv.metrics()
    return tuple(m['orcd_stat_cache_total{result="%s"}' % r]
                 for r in ("hit", "flush"))


def from_cached_facts(srv, before, what):
    """The requests since `before` (cache_counts) were planned from the
    cached facts, as the FIFO cases need: the chain, not the plan, met
    the FIFO. (Where the cache is off, 9p in the guest, the plan does.)"""
    if srv.shared_fs:
        return
    hits, flushes = cache_counts(srv)
    check(hits > before[0], "%s: planned without the cached facts" % what)
    eq(flushes, before[1], "%s: cache flushes" % what)


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
        srv.private_mounts()
        srv.start()
        idle = gauges(srv, srv.idle_metrics())
        srv.write_file("dir/cold.txt", b"x" * 1000)
        eq(get(srv, "/dir/cold.txt", "HEAD").status, 200, "HEAD")
        other = os.path.join(srv.tmp, "other")
        os.mkdir(other)
        os.mkfifo(os.path.join(other, "cold.txt"))
        srv.mount("--bind", other, srv.path("dir"))
        try:
            drop_dentries()
            before = cache_counts(srv)
            eq(get(srv, "/dir/cold.txt").status, 404, "FIFO, cold dentry")
            from_cached_facts(srv, before, "FIFO, cold dentry")
            eq(get(srv, "/hello.txt").body, HELLO, "served after it")
        finally:
            srv.umount(srv.path("dir"))
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
        srv.private_mounts()
        srv.start()
        idle = gauges(srv, srv.idle_metrics())
        undo = []
        try:
            swapped_fifo(srv, "lone.txt", undo)
            before = cache_counts(srv)
            eq(get(srv, "/lone.txt").status, 404, "FIFO without a writer")
            from_cached_facts(srv, before, "FIFO without a writer")
            fifo = swapped_fifo(srv, "fed.txt", undo)
            writer = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)
            undo.insert(0, lambda: os.close(writer))
            before = cache_counts(srv)
            r = get(srv, "/fed.txt")
            eq(r.status, 404, "FIFO with a silent writer")
            from_cached_facts(srv, before, "FIFO with a silent writer")
            check(b"x" * 1000 not in r.body, "stale bytes sent")
            eq(get(srv, "/hello.txt").body, HELLO, "served after it")
        finally:
            for u in undo:
                u()
        settled(srv, idle)
        srv.stop()


def pattern(n, seed):
    block = bytes(((i * 31 + seed) & 0xFF) for i in range(4096))
    return (block * (n // 4096 + 1))[:n]


@orcdtest.case
def mount_over_a_cached_directory():
    # A mount raises no inotify event; a release switched by a bind
    # mount (or an image mounted under the root) must still be served
    # at once, kept bodies and cached 404s included, and the old files
    # again once it is unmounted. (Before: the old small body, for good.)
    with Server() as srv:
        start_mounting(srv)
        small, big = b"old release\n", pattern(300000, 1)
        srv.write_file("rel/cur/index.txt", small)
        srv.write_file("rel/cur/big.bin", big)
        new_small, new_big = b"the new release, longer\n", pattern(200000, 2)
        other = os.path.join(srv.tmp, "release2")
        os.makedirs(other)
        for name, data in (("index.txt", new_small), ("big.bin", new_big),
                           ("only-new.txt", b"new file\n")):
            with open(os.path.join(other, name), "wb") as f:
                f.write(data)
        paths = ("/rel/cur/index.txt", "/rel/cur/big.bin",
                 "/rel/cur/only-new.txt")

        def answers():
            return [get(srv, p) for p in paths]

        for _ in range(3):  # facts, then kept bodies, then hits
            eq([r.status for r in answers()], [200, 200, 404],
               "before the mount")
        srv.mount("--bind", other, srv.path("rel/cur"))
        try:
            a, b, n = answers()
            eq(a.body, new_small, "small file after the mount")
            check(b.body == new_big, "large file after the mount: old or "
                  "mixed body (%d bytes)" % len(b.body))
            eq((n.status, n.body), (200, b"new file\n"),
               "a 404 cached before the mount")
        finally:
            srv.umount(srv.path("rel/cur"))
        # Nothing under a mount point is cached (lookups through one are
        # plain): these guard the answers, not the cache.
        a, b, n = answers()
        eq(a.body, small, "small file after the unmount")
        check(b.body == big, "large file after the unmount")
        eq(n.status, 404, "only in the unmounted release")
        srv.assert_fds_back()
        srv.stop()


@orcdtest.case
def a_mount_drops_only_what_it_covers():
    # Only a mount under the root can leave facts stale (lookups never
    # cross a mount point), and only those beneath it: one anywhere else
    # (a container starting on the same machine) drops nothing, one under
    # the root drops what it covers and keeps the rest.
    with Server(metrics=True) as srv:
        start_mounting(srv)
        for _ in range(2):
            eq(get(srv, "/hello.txt").body, HELLO, "before")
            eq(get(srv, "/dir/page.html").body, b"<p>page</p>\n", "before")
        elsewhere = os.path.join(srv.tmp, "elsewhere")
        other = os.path.join(srv.tmp, "other")
        os.makedirs(elsewhere)
        os.makedirs(other)
        with open(os.path.join(other, "page.html"), "wb") as f:
            f.write(b"<p>mounted page</p>\n")

        def counts():
            m = srv.metrics()
            return (m['orcd_stat_cache_total{result="hit"}'],
                    m['orcd_stat_cache_total{result="flush"}'],
                    m["orcd_stat_cache_invalidated_total"])

        before = counts()
        srv.mount("--bind", other, elsewhere)
        try:
            eq(get(srv, "/hello.txt").body, HELLO, "after a mount elsewhere")
            hits, flushes, dropped = counts()
            eq((flushes, dropped), before[1:], "flushes and entries dropped "
               "after a mount elsewhere")
            check(hits > before[0], "no hit after a mount elsewhere")
            srv.mount("--bind", other, srv.path("dir"))
            try:
                eq(get(srv, "/dir/page.html").body,
                   b"<p>mounted page</p>\n", "under the mount")
                mid = counts()
                eq(get(srv, "/hello.txt").body, HELLO, "beside the mount")
                hits, flushes, dropped = counts()
                eq(flushes, before[1], "flushes after a mount under the root")
                check(dropped > before[2], "nothing dropped for a mount "
                      "over a cached directory")
                check(hits > mid[0], "the file beside the mount was no hit")
            finally:
                srv.umount(srv.path("dir"))
            eq(get(srv, "/dir/page.html").body, b"<p>page</p>\n",
               "after the unmount")
        finally:
            srv.umount(elsewhere)
        srv.assert_fds_back()
        srv.stop()


@orcdtest.case
def a_release_switched_by_unmount_then_mount():
    # Unmount the old release, a request in between (a 404 from the bare
    # directory, cached), mount the new one: the kernel often gives the
    # new mount the old one's ID, so a table that reads the same before
    # and after hides the switch. What is cached beneath a mount point is
    # dropped whatever the table looked like before.
    with Server(metrics=True) as srv:
        start_mounting(srv)
        v1, v2 = (os.path.join(srv.tmp, v) for v in ("v1", "v2"))
        for d, text in ((v1, b"v1\n"), (v2, b"v2\n")):
            os.makedirs(d)
            with open(os.path.join(d, "index.html"), "wb") as f:
                f.write(text)
        os.makedirs(srv.path("current"))
        srv.mount("--bind", v1, srv.path("current"))
        try:
            eq(get(srv, "/current/index.html").body, b"v1\n", "v1")
            # A reload empties the cache with v1 mounted: the unmount
            # and the mount below then come while it holds nothing.
            n = srv.stderr_text().count("configuration reloaded")
            srv.signal(signal.SIGHUP)
            orcdtest.wait_until(
                lambda: srv.stderr_text().count("configuration reloaded")
                > n, 10, "the reload")
        finally:
            srv.umount(srv.path("current"))
        eq(get(srv, "/current/index.html").status, 404, "between")
        srv.mount("--bind", v2, srv.path("current"))
        try:
            for _ in range(2):
                eq(get(srv, "/current/index.html").body, b"v2\n", "v2")
        finally:
            srv.umount(srv.path("current"))
        srv.assert_fds_back()
        srv.stop()


@orcdtest.case
def an_unmount_leaves_no_stale_answers():
    # Requests while a mount covers a directory must leave nothing that
    # watches the mounted tree: after the unmount, a 404 cached for the
    # directory it uncovers goes when the file is created there. (A
    # watch taken through the mount stayed on the mounted tree, and the
    # 404 stayed for good.)
    with Server(metrics=True) as srv:
        start_mounting(srv)
        mounted = os.path.join(srv.tmp, "mounted")
        os.makedirs(os.path.join(mounted, "sub"))
        srv.write_file("site/sub/keep.txt", b"under\n")
        srv.mount("--bind", mounted, srv.path("site"))
        try:
            for _ in range(2):
                eq(get(srv, "/site/x.html").status, 404, "while mounted")
                eq(get(srv, "/site/sub/x.html").status, 404,
                   "while mounted, deeper")
        finally:
            srv.umount(srv.path("site"))
        for _ in range(2):
            eq(get(srv, "/site/new.html").status, 404, "after the unmount")
            eq(get(srv, "/site/sub/new.html").status, 404,
               "after the unmount, deeper")
        srv.write_file("site/new.html", b"new\n")
        srv.write_file("site/sub/new.html", b"new below\n")
        eq(get(srv, "/site/new.html").body, b"new\n", "created after")
        eq(get(srv, "/site/sub/new.html").body, b"new below\n",
           "created after, deeper")
        srv.assert_fds_back()
        srv.stop()


if __name__ == "__main__":
    sys.exit(orcdtest.run_serverless())
