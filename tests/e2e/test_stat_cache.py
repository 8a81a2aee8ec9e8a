#!/usr/bin/env python3
"""The io_uring engines' stat cache, seen from outside: a change drops
only what it names (a file written over and over leaves the others
hits), a missing file is cached until it is created, the cache stays
within `stat_cache` entries by evicting, its watches are the kernel's,
and a HEAD of a known file opens nothing. Freshness itself is
test_freshness's."""

import ctypes
import os
import struct
import sys

import orcdtest
from orcdtest import build_request, check, eq, wait_until

ENTRIES = 64
IN_OPEN = 0x20


class Server(orcdtest.Orcd):
    def __init__(self):
        super().__init__(conf="stat_cache %d;\n" % ENTRIES, metrics=True)


def result(m, which):
    return m['orcd_stat_cache_total{result="%s"}' % which]


def needs_cache(srv):
    if srv.shared_fs:
        raise orcdtest.Skip("no stat cache on a 9p root")


def get_on(c, path, method="GET"):
    c.send(build_request(method, path))
    r = c.read_response(head_request=method == "HEAD")
    check(r is not None, "connection closed before the answer to " + path)
    return r


@orcdtest.case
def a_file_written_over_and_over_leaves_the_others_hits(srv):
    # Before: any event emptied the whole cache, so a log written under
    # the root made every lookup a miss.
    needs_cache(srv)
    srv.write_file("w/a.txt", b"a\n")
    srv.write_file("w/b.txt", b"b\n")
    log = srv.path("w/log.txt")
    with srv.conn() as c:
        for p in ("/w/a.txt", "/w/b.txt", "/w/"):
            get_on(c, p)
        before = srv.metrics()
        for i in range(30):
            with open(log, "a") as f:
                f.write("line %d\n" % i)
            eq(get_on(c, "/w/a.txt").body, b"a\n", "a.txt")
            eq(get_on(c, "/w/b.txt").body, b"b\n", "b.txt")
        after = srv.metrics()
        eq(result(after, "hit") - result(before, "hit"), 60,
           "hits while another file was written")
        eq(result(after, "miss") - result(before, "miss"), 0, "misses")
        # The written file itself, asked for between writes: true each
        # time, and the others still hits.
        want = b""
        for i in range(20):
            line = ("more %d\n" % i).encode()
            with open(log, "ab") as f:
                f.write(line)
            want = open(log, "rb").read()
            eq(get_on(c, "/w/log.txt").body, want, "log.txt round %d" % i)
            eq(get_on(c, "/w/a.txt").body, b"a\n", "a.txt")
        last = srv.metrics()
        eq(result(last, "hit") - result(after, "hit") >= 20, True,
           "a.txt stayed a hit while log.txt was written and served")
        eq(result(last, "flush"), result(before, "flush"), "flushes")


@orcdtest.case
def a_missing_file_is_cached_until_created(srv):
    needs_cache(srv)
    with srv.conn() as c:
        before = srv.metrics()
        for _ in range(3):
            eq(get_on(c, "/m/nope.txt").status, 404, "missing")
            eq(get_on(c, "/m2/sub/nope.txt").status, 404,
               "under a missing directory")
        after = srv.metrics()
        eq(result(after, "hit") - result(before, "hit"), 4,
           "404s answered from the cache")
        srv.write_file("m/nope.txt", b"here now\n")
        r = get_on(c, "/m/nope.txt")
        eq((r.status, r.body), (200, b"here now\n"), "created")
        srv.write_file("m2/sub/nope.txt", b"deeper\n")
        r = get_on(c, "/m2/sub/nope.txt")
        eq((r.status, r.body), (200, b"deeper\n"),
           "created with its directories")
        os.unlink(srv.path("m/nope.txt"))
        eq(get_on(c, "/m/nope.txt").status, 404, "removed again")


def kernel_watches(srv):
    """inotify watches orcd holds, by /proc/PID/fdinfo."""
    n = 0
    base = "/proc/%d/fdinfo" % srv.proc.pid
    for fd in os.listdir(base):
        try:
            with open(os.path.join(base, fd)) as f:
                n += sum(1 for line in f if line.startswith("inotify wd:"))
        except OSError:
            pass
    return n


@orcdtest.case
def more_paths_than_entries_evict(srv):
    # Before: the first `stat_cache` paths stayed forever and every other
    # path was looked up on each request.
    needs_cache(srv)
    n = 3 * ENTRIES
    for i in range(n):
        srv.write_file("many/%d.txt" % i, b"%d\n" % i)
    with srv.conn() as c:
        for i in range(n):
            eq(get_on(c, "/many/%d.txt" % i).body, b"%d\n" % i, "file %d" % i)
        m = srv.metrics()
        check(m["orcd_stat_cache_entries"] <= ENTRIES,
              "%d entries held, more than %d"
              % (m["orcd_stat_cache_entries"], ENTRIES))
        check(m["orcd_stat_cache_evictions_total"] >= n - ENTRIES,
              "evictions: %d" % m["orcd_stat_cache_evictions_total"])
        # Watches: one per directory on the way and per file, as the
        # kernel counts them (nothing left behind by evicted entries).
        check(m["orcd_stat_cache_watches"] <=
              m["orcd_stat_cache_entries"], "more watches than entries")
        eq(kernel_watches(srv), m["orcd_stat_cache_watches"],
           "watches orcd holds vs its gauge")
        print("# %d entries, %d watches for %d files in one directory"
              % (m["orcd_stat_cache_entries"], m["orcd_stat_cache_watches"],
                 n))
        # The latest paths are entered, and hot ones stay.
        hits = result(m, "hit")
        for _ in range(3):
            for i in range(n - 10, n):
                get_on(c, "/many/%d.txt" % i)
        eq(result(srv.metrics(), "hit") - hits, 30, "recent paths are hits")


@orcdtest.case
def head_of_a_known_file_opens_nothing(srv):
    # Before: every HEAD opened the file (openat2, fstat, close) to find
    # out whether it may be read, cache or not.
    needs_cache(srv)
    p = srv.write_file("h/head.txt", b"head me\n")
    libc = ctypes.CDLL(None, use_errno=True)
    ifd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
    check(ifd >= 0, "inotify_init1")
    try:
        with srv.conn() as c:
            for _ in range(2):
                eq(get_on(c, "/h/head.txt", "HEAD").status, 200, "warm-up")
            check(libc.inotify_add_watch(ifd, p.encode(), IN_OPEN) >= 0,
                  "inotify_add_watch")
            before = srv.metrics()
            for _ in range(5):
                r = get_on(c, "/h/head.txt", "HEAD")
                eq((r.status, r.header("content-length")), (200, "8"),
                   "HEAD")
            after = srv.metrics()
        opens = 0
        try:
            while True:
                data = os.read(ifd, 4096)
                off = 0
                while off < len(data):
                    _, mask, _, ln = struct.unpack_from("iIII", data, off)
                    opens += bool(mask & IN_OPEN)
                    off += 16 + ln
        except BlockingIOError:
            pass
        eq(opens, 0, "opens of the file by 5 HEADs")
        eq(result(after, "hit") - result(before, "hit"), 5, "HEAD hits")
    finally:
        os.close(ifd)
    # Still refused where GET would be (a directory is a redirect, a
    # missing file a 404), and a change is seen.
    srv.write_file("h/head.txt", b"longer now\n")
    with srv.conn() as c:
        r = get_on(c, "/h/head.txt", "HEAD")
        eq(r.header("content-length"), "11", "HEAD after a change")


def watched_inodes(srv):
    """The inodes orcd's inotify watches are on (hex, as fdinfo says)."""
    out = set()
    base = "/proc/%d/fdinfo" % srv.proc.pid
    for fd in os.listdir(base):
        try:
            with open(os.path.join(base, fd)) as f:
                for line in f:
                    if line.startswith("inotify wd:"):
                        out.update(w[4:] for w in line.split()
                                   if w.startswith("ino:"))
        except OSError:
            pass
    return out


@orcdtest.case
def symlinks_out_of_the_root_leave_no_watch_outside(srv):
    # A request through a symlink that leaves the root is a 404, and the
    # cache's watches stay inside the root: once they were taken by a
    # path through the link, pinning inodes (and the user's watch quota)
    # wherever it pointed.
    needs_cache(srv)
    if srv.forwarded:
        raise orcdtest.Skip("orcd runs elsewhere: its fdinfo is not ours")
    outside = os.path.join(srv.tmp, "outside")
    os.makedirs(os.path.join(outside, "d"), exist_ok=True)
    with open(os.path.join(outside, "d", "x.txt"), "w") as f:
        f.write("outside\n")
    os.symlink(outside, srv.path("out-abs"))
    os.symlink("../outside", srv.path("out-rel"))
    srv.write_file("real/d/in.txt", b"inside\n")
    os.symlink("real", srv.path("in-rel"))
    for _ in range(2):
        for path in ("/out-abs/d/x.txt", "/out-rel/d/x.txt"):
            eq(srv.get(path).status, 404, path)
        eq(srv.get("/in-rel/d/in.txt").body, b"inside\n",
           "through a symlink inside the root")
    banned = {"%x" % os.stat(p).st_ino
              for p in (outside, os.path.join(outside, "d"),
                        os.path.join(outside, "d", "x.txt"))}
    # A path through a link is not cached (stat_cache.c); the same file
    # by its own path is, so its watch shows that watches are read.
    for _ in range(2):
        eq(srv.get("/real/d/in.txt").body, b"inside\n", "by its own path")
    watched = watched_inodes(srv)
    eq(watched & banned, set(), "watches outside the root")
    inside = {"%x" % os.stat(srv.path(p)).st_ino
              for p in ("real/d", "real/d/in.txt")}
    check(watched & inside, "no watch on real/d or its file; watched: %s"
          % sorted(watched))
    srv.write_file("real/d/in.txt", b"changed\n")
    eq(srv.get("/in-rel/d/in.txt").body, b"changed\n",
       "a change seen through the symlink")


@orcdtest.case
def an_idle_worker_lets_go_of_a_replaced_file(srv):
    # A large file sent twice stays open (and mapped) for sendfile. When
    # it is replaced, the worker must let it go even if no request comes:
    # it held the deleted file, and its disk space, until its next
    # request, which on a quiet SO_REUSEPORT worker may be never.
    needs_cache(srv)
    srv.release_kept_files()
    wait_until(lambda: srv.fd_count() == srv.fd_baseline, 10,
               "fds back to the baseline first")
    data = os.urandom(3 << 20)
    srv.write_file("replaced.bin", data)
    for _ in range(2):
        eq(srv.get("/replaced.bin").body, data, "the file")
    check(srv.fd_count() > srv.fd_baseline, "the large file was not kept "
          "open (%d fds)" % srv.fd_count())
    tmp = srv.path("replaced.bin.new")
    with open(tmp, "wb") as f:
        f.write(b"new\n")
    os.rename(tmp, srv.path("replaced.bin"))
    # No request from here on.
    wait_until(lambda: srv.fd_count() == srv.fd_baseline, 5,
               "the replaced file to be let go without a request")


if __name__ == "__main__":
    sys.exit(orcdtest.run(Server))
