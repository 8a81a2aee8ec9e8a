#!/usr/bin/env python3
"""A bounded soak: one orcd (2 workers) under mixed load for
ORCD_SOAK_SECONDS (default 60) while its files churn and it reloads every
few seconds; then it must be back where it started.

Load (threads of this program, each its own connections):
  keep-alive clients   GET, HEAD, If-None-Match and Range on one connection
                       at a time, a new one every ~40 requests;
  close clients        one request per connection, Connection: close;
  a pipeliner          2-8 requests in one write, answers checked in order;
  a resetter           SO_LINGER 0 closes mid-request, right after the
                       request, and mid-body;
  a slow reader        4 KiB receive buffer, takes 64 KiB-2 MiB files in
                       small reads with pauses.
Churn (one writer thread; ~25 changes a second): whole new versions by
atomic rename, renames of one served name over another, deletes and
re-creation, truncation and appends in place while clients read, in-place
rewrites (also with the times put back) of files nobody is reading, and
mtime-only changes. Reloads: SIGHUP every 3 s through a cycle of configs
(stat_cache 8192 / 24, buffer_size 64k / 16k, idle_timeout, and an extra
listen address added and removed, which swaps the workers).

What every response must be (the versions model)
------------------------------------------------
Every version of a file has a token; its bytes are a header naming the
token and bytes derived from the token, so any body says which version it
claims to be. The writer records for each served path the states it has
had: (token or absent, length range, inode, mtime), each with the time
before the system call that made it visible and the time after the one
that ended it. A response is checked against the states that overlap the
interval from just before its request was written to just after its last
byte was read (the server answered somewhere in there):
  - a 200 body has exactly Content-Length bytes, equal to the first
    Content-Length bytes of one overlapping version, whose length was that
    (a range of lengths while an append ran); its ETag is that state's
    (inode, size, and mtime unless the state was mid-append);
  - a 206 body is those bytes of such a version, its total one of its
    lengths; a 416 needs an overlapping state no longer than the start;
  - a HEAD's Content-Length and ETag are an overlapping state's;
  - a 304 needs an overlapping state with the ETag that was sent, and an
    If-None-Match 200 needs one without it;
  - a 404 needs an overlapping absent state;
  - a response cut short (the server closed inside the body) needs a
    change of that path inside the interval, and what did arrive must be
    a prefix of an overlapping version;
  - a server close with no answer at all is allowed only on a reused
    keep-alive connection (RFC 9112 9.3.1: the client retries), and only
    when it was opened before a worker swap ended (the reload was logged:
    the old workers had stopped accepting) and the swap began before the
    close, or when it had been idle for idle_timeout.
The io_uring engines have one documented window (daemon/INTERNALS.md,
"Metadata freshness"): between the plan and the chain's open, a file
replaced by rename with a version at least as long is sent as that
version's first Content-Length bytes under the previous state's length
and ETag. It is allowed, and counted, only there: on direct, for a body
that is a prefix of an overlapping version made by rename, with an
overlapping state whose length and ETag the response carries.
In-place rewrites that are not a truncation or an append would let any
server send a torn mix of two versions (a read racing a write); the
writer does them only on a path no client has in flight, and the test's
clients skip a path while it is being rewritten (the per-path fence).
Truncations and rewrites in place also skip an inode that a rename
brought from another served name (a client may be reading it there).

Two effects of the kernel, not of orcd, are allowed while a truncation
in place overlaps a response, and counted apart:
  - "zeroed by a truncation": bytes past the new end may arrive as
    zeros. sendfile (epoll, and direct's kept files) queues references
    to page-cache pages, not copies; a truncation zeroes the rest of the
    folio that holds the new end, in place, and ext4's large folios make
    that up to hundreds of KiB of bytes already queued for the client
    (measured: 192 KiB of zeros in a 2 MiB body truncated by 640 KiB
    after sendfile had queued it all). The response is complete, with
    the old length and ETag; bytes before the new end must be exact, and
    every byte after it zero or the version's. The cold chain (read into
    a buffer, then send) copies and shows none of it.
  - "torn stat during a truncation": the ETag pairs the new size with the
    old mtime; a truncation sets the size before the times and fstat
    takes no lock, so a lookup racing it sees one without the other
    (its event drops that entry at the next request). A client that got
    such an ETag may send it back in If-None-Match while the server
    still holds those facts: that 304 is counted here too.

At the end, with the clients gone and one more reload (which empties the
stat caches, so kept files are closed): orcd's fds equal the count after
start-up, no connection, slot or chain is in use (metrics page), EBUSY is
0, RSS at the end of the load exceeds RSS after the warm-up by at most
RSS_BOUND (see there),
every error-log line matches an explained pattern, every SIGHUP logged
one "configuration reloaded", and SIGTERM ends orcd with 0 and no
sanitizer report. The numbers are printed as "# " lines.
"""

import functools
import os
import random
import re
import signal
import socket
import struct
import sys
import threading
import time
import traceback

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "e2e"))
import orcdtest  # noqa: E402
from orcdtest import TestFailure, build_request, wait_until  # noqa: E402

SECONDS = float(os.environ.get("ORCD_SOAK_SECONDS", "60"))
SEED = int(os.environ.get("ORCD_SOAK_SEED", str(int(time.time()))))
RELOAD_EVERY = 3.0
IDLE_TIMEOUT = 5.0  # the shortest idle_timeout the configs set
IDLE_SLACK = 0.05   # orcd's timer wheel rounds deadlines to 8 ms slots
WARMUP = min(15.0, SECONDS / 4)
MIB = 1 << 20
# RSS is sampled every 0.25 s. Its median over the last 5 s of load may
# exceed its median over the 5 s after the warm-up by this much. Both are
# taken under the same load with the stat caches full, so what may still
# grow is bounded: kept copies of small files (24 paths, <= 64 KiB, one
# per worker: 3 MiB), pages of kept large files that sends from their
# mapping touched (RssFile; 10 such paths of <= 2 MiB, where the kernel
# cannot install a slot as an fd: 20 MiB at worst, measured 0 here, where
# they go by sendfile), pooled buffers (64 + 64 per worker, of 16 or 64 KiB
# as buffer_size alternates; filled in the warm-up by ~10 clients), and
# allocator slack. A leak of 1 KiB per request over ~40,000 requests is
# 40 MiB, of one 16 KiB buffer per 1,000 requests 10 MiB: caught.
RSS_BOUND = 16 * MIB

HDR = b"orcd-soak token=%010d\n"
HDR_LEN = len(HDR % 0)
HDR_RE = re.compile(rb"^orcd-soak token=(\d{10})\n")

# Served paths; their size class picks the path a body goes by: <= 4 KiB
# copied behind the head, <= 64 KiB kept and sent beside it (sendmsg),
# larger mapped and sent by sendfile (or sends from the mapping), and
# more than buffer_size needs several read/send pairs on the cold chain.
SIZES = {"s": (64, 4096), "m": (4097, 65536), "l": (65537, 700 * 1024),
         "b": (1 * MIB, 2 * MIB)}
PATHS = (["soak/s%d.txt" % i for i in range(6)] +
         ["soak/m%d.bin" % i for i in range(6)] +
         ["soak/l%d.bin" % i for i in range(6)] +
         ["soak/deep/x%d.bin" % i for i in range(4)] +
         ["soak/b%d.bin" % i for i in range(2)])
STATIC = ["hello.txt", "data.bin", "index.html"]

# Error-log lines the run can produce and why; anything else fails.
EXPLAINED = [
    ("start-up", re.compile(r"^<\d>orcd: (engine \S+:|serving |using )")),
    ("reload", re.compile(r"^<5>orcd: configuration reloaded$")),
    ("listen swap", re.compile(
        r"^<5>orcd: reload: new workers serve the new listen addresses; "
        r"the previous ones drain$")),
    ("listen swap", re.compile(
        r"^<6>orcd: workers of the previous listen addresses finished$")),
    ("listen swap", re.compile(
        r"^<6>orcd: worker \d+: retired by a reload; accepts no more "
        r"connections$")),
    ("stop", re.compile(r"^<5>orcd: (stopping: draining in-flight "
                        r"responses|stopped)$")),
]


def size_class(path):
    name = path.rsplit("/", 1)[1]
    return "b" if name[0] == "b" else ("l" if name[0] == "x" else name[0])


@functools.lru_cache(maxsize=32)
def content(token, n):
    """The bytes of version `token`, which may grow to n bytes."""
    return (HDR % token) + random.Random(token).randbytes(n - HDR_LEN)


def parse_etag(e):
    m = re.match(r'^"([0-9a-f]+)-([0-9a-f]+)-([0-9a-f]+)"$', e or "")
    return tuple(int(x, 16) for x in m.groups()) if m else None


class State:
    """One state of a served path: absent (token None) or a version's
    first lo..hi bytes (lo < hi only while an append runs)."""
    __slots__ = ("token", "full", "lo", "hi", "ino", "mtime", "t0", "t1",
                 "renamed", "moved")

    def __init__(self, t0, token=None, full=0, lo=0, hi=0, ino=0,
                 mtime=None, renamed=False):
        self.token, self.full, self.lo, self.hi = token, full, lo, hi
        self.ino, self.mtime, self.t0, self.t1 = ino, mtime, t0, None
        self.renamed = renamed
        # Its inode came from another served name, where a client may
        # still be reading it: in-place changes that alter bytes (which
        # that name's states would not show) skip it.
        self.moved = False

    def again(self, lo, hi):
        """The same version and inode at other lengths, its mtime to be
        read after the change (None until then)."""
        s = State(0, self.token, self.full, lo, hi, self.ino, None,
                  self.renamed)
        s.moved = self.moved
        return s

    def etag_fits(self, tag, size=None):
        p = parse_etag(tag)
        if p is None or self.token is None:
            return False
        ns, sz, ino = p
        if size is not None and sz != size:
            return False
        return (ino == self.ino and self.lo <= sz <= self.hi and
                (self.mtime is None or ns == self.mtime))

    def __repr__(self):
        if self.token is None:
            return "<absent %.3f..%s>" % (self.t0, self.t1)
        return "<v%d %d..%d ino %d mtime %s %.3f..%s>" % (
            self.token, self.lo, self.hi, self.ino,
            "%x" % self.mtime if self.mtime else "?", self.t0,
            "%.3f" % self.t1 if self.t1 else "now")


class World:
    """The writer's record of every path's states, and the fences."""

    def __init__(self, root, rename):
        self.root, self.rename = root, rename
        self.lock = threading.Lock()
        self.hist = {p: [] for p in PATHS}
        self.inflight = {p: 0 for p in PATHS}
        self.fenced = set()
        self.next_token = 1
        self.counts = {}

    def count(self, what, n=1):
        with self.lock:
            self.counts[what] = self.counts.get(what, 0) + n

    def current(self, path):
        h = self.hist[path]
        return h[-1] if h else None

    def change(self, news, syscall):
        """Make each path of `news` take its new state by syscall(): the
        new states are recorded open before it (a client may see them as
        soon as it starts), the old ones closed after it returns. A new
        state whose mtime is None until syscall() returned is judged by
        inode and size only in between."""
        with self.lock:
            olds = []
            for path, new in news:
                h = self.hist[path]
                olds.append(h[-1] if h else None)
                new.t0 = time.monotonic()
                h.append(new)
        try:
            return syscall()
        finally:
            t1 = time.monotonic()
            with self.lock:
                for old in olds:
                    if old is not None:
                        old.t1 = t1

    def overlapping(self, path, ta, tb):
        with self.lock:
            out = []
            for s in reversed(self.hist[path]):
                if s.t1 is not None and s.t1 < ta:
                    break
                if s.t0 <= tb:
                    out.append(s)
            return out

    def acquire(self, paths):
        with self.lock:
            if any(p in self.fenced for p in paths):
                return False
            for p in paths:
                self.inflight[p] += 1
            return True

    def release(self, paths):
        with self.lock:
            for p in paths:
                self.inflight[p] -= 1

    def fence(self, path):
        with self.lock:
            if self.inflight[path]:
                return False
            self.fenced.add(path)
            return True

    def unfence(self, path):
        with self.lock:
            self.fenced.discard(path)

    def token(self):
        with self.lock:
            t = self.next_token
            self.next_token += 1
            return t


class Writer:
    """Changes files under the root, recording each state."""

    OPS = (("replace", 34), ("rename", 8), ("delete", 8), ("truncate", 10),
           ("append", 10), ("rewrite", 14), ("touch", 6), ("create", 10))

    def __init__(self, world, rng):
        self.w, self.rng = world, rng
        self.ops = [op for op, n in self.OPS for _ in range(n)]

    def fs(self, path):
        return os.path.join(self.w.root, path)

    def new_version(self, path):
        lo, hi = SIZES[size_class(path) if self.rng.random() < 0.8
                       else self.rng.choice("sml")]
        if size_class(path) == "b":
            lo, hi = SIZES["b"]
        n = self.rng.randint(lo, hi)
        return self.w.token(), n, n + self.rng.choice((0, 0, 1000, 70000))

    def put_new(self, path, how):
        """A whole new version by write-temp-and-rename."""
        tok, n, full = self.new_version(path)
        tmp = os.path.join(os.path.dirname(self.fs(path)),
                           ".tmp-%d" % tok)
        with open(tmp, "wb") as f:
            f.write(content(tok, full)[:n])
        st = os.stat(tmp)
        self.w.change([(path, State(0, tok, full, n, n, st.st_ino,
                                    st.st_mtime_ns, True))],
                      lambda: self.w.rename(tmp, self.fs(path)))
        self.w.count("versions")
        self.w.count(how)

    def in_place(self, path, new, syscall):
        """A change of path's own inode: its mtime is known after."""
        new.mtime = None
        self.w.change([(path, new)], syscall)
        st = os.stat(self.fs(path))
        with self.w.lock:
            new.mtime = st.st_mtime_ns

    def step(self):
        path = self.rng.choice(PATHS)
        cur = self.w.current(path)
        op = self.rng.choice(self.ops)
        if cur is None or cur.token is None:
            self.put_new(path, "create")
            return
        if op in ("replace", "create") or (
                cur.moved and op in ("truncate", "rewrite")):
            self.put_new(path, "replace")
        elif op == "rename":
            # Another served name of the same directory moves over this
            # one: it is absent afterwards, this one has its version.
            d = os.path.dirname(path)
            others = [p for p in PATHS if p != path and
                      os.path.dirname(p) == d and
                      (self.w.current(p) or State(0)).token is not None]
            if not others:
                return
            src = self.rng.choice(others)
            s = self.w.current(src)
            moved = State(0, s.token, s.full, s.lo, s.hi, s.ino, s.mtime,
                          True)
            moved.moved = True
            self.w.change([(path, moved), (src, State(0))],
                          lambda: self.w.rename(self.fs(src), self.fs(path)))
            self.w.count("rename")
        elif op == "delete":
            self.w.change([(path, State(0))],
                          lambda: os.unlink(self.fs(path)))
            self.w.count("delete")
        elif op == "truncate":
            # In place, unfenced: a reader gets the old length or the new
            # one (a short read makes orcd re-plan or close), and bytes
            # past the new end that sendfile had queued may turn to zeros
            # (the module docstring says why).
            if cur.hi <= HDR_LEN + 16:
                return
            n = self.rng.randint(HDR_LEN + 8, cur.hi - 1)
            self.in_place(path, cur.again(n, n),
                          lambda: os.truncate(self.fs(path), n))
            self.w.count("truncate")
        elif op == "append":
            # In place, unfenced: the next bytes of the same version, so
            # every length between is a prefix of it (the kernel makes
            # the bytes readable before it moves the size past them).
            if cur.hi >= cur.full:
                return
            n = self.rng.randint(cur.hi + 1, cur.full)

            def append():
                with open(self.fs(path), "ab") as f:
                    f.write(content(cur.token, cur.full)[cur.hi:n])
            self.w.change([(path, cur.again(cur.hi, n))], append)
            self.in_place(path, cur.again(n, n), lambda: None)
            self.w.count("append")
        elif op == "rewrite":
            # In place, a new version over the old bytes: only while no
            # client has the path in flight (fenced), since a read racing
            # the write may mix both on any server.
            if not self.w.fence(path):
                self.w.count("rewrite skipped (in flight)")
                return
            try:
                tok, n, full = self.new_version(path)
                old = os.stat(self.fs(path))
                restore = self.rng.random() < 0.3
                if restore:
                    n = full = old.st_size  # same size, times put back

                def rewrite():
                    with open(self.fs(path), "r+b") as f:
                        f.write(content(tok, full)[:n])
                        f.truncate(n)
                    if restore:
                        os.utime(self.fs(path), ns=(old.st_atime_ns,
                                                    old.st_mtime_ns))
                self.in_place(path, State(0, tok, full, n, n, cur.ino),
                              rewrite)
                self.w.count("versions")
                self.w.count("rewrite in place" +
                             (" (times restored)" if restore else ""))
            finally:
                self.w.unfence(path)
        elif op == "touch":
            ns = time.time_ns() - self.rng.randint(1, 10**12)
            self.in_place(path, cur.again(cur.lo, cur.hi),
                          lambda: os.utime(self.fs(path), ns=(ns, ns)))
            self.w.count("touch")


class Soak(orcdtest.Orcd):
    # What each reload changes, in turn (listen2: a second address,
    # whose coming and going swaps the workers).
    VARIANTS = [
        {},
        {"stat_cache": "24"},
        {"buffer_size": "16k"},
        {"listen2": True, "idle_timeout": "7s"},
        {"stat_cache": "24", "buffer_size": "16k"},
        {},
    ]

    def __init__(self):
        self.port2 = orcdtest.free_port()
        self.variant = 0
        # [SIGHUP sent, reload logged] of each reload that swaps workers
        self.swaps = []
        super().__init__(metrics=True)
        self.set_variant(0)

    def conf_text(self, variant):
        d = {"root": self.root, "engine": self.engine, "threads": "2",
             "access_log": self.access_log, "metrics": "on",
             "metrics_listen": "127.0.0.1:%d" % self.metrics_port,
             "idle_timeout": "5s", "send_timeout": "20s"}
        d.update(variant)
        text = "listen 127.0.0.1:%d;\n" % self.port
        if d.pop("listen2", False):
            text += "listen 127.0.0.1:%d;\n" % self.port2
        return text + "".join("%s %s;\n" % kv for kv in d.items())

    def set_variant(self, i):
        i %= len(self.VARIANTS)
        if "listen2" in self.VARIANTS[i] or \
                "listen2" in self.VARIANTS[self.variant]:
            self.swaps.append([time.monotonic(), None])
        self.variant = i
        tmp = self.conf_path + ".tmp"
        with open(tmp, "w") as f:
            f.write(self.adapt_conf(
                self.conf_text(self.VARIANTS[self.variant])))
        os.rename(tmp, self.conf_path)

    def rss(self):
        out = {}
        for line in self.proc_text("status").splitlines():
            k, _, v = line.partition(":")
            if k in ("VmRSS", "RssAnon", "RssFile"):
                out[k] = int(v.split()[0]) * 1024
        return out

    def reloads_logged(self):
        return len(re.findall(r"configuration reloaded|reload failed",
                              self.stderr_text()))


class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.n = {}

    def add(self, what, k=1):
        with self.lock:
            self.n[what] = self.n.get(what, 0) + k


class Cut(Exception):
    """The server closed inside a response (after `got` body bytes)."""

    def __init__(self, resp, got):
        self.resp, self.got = resp, got


class NoAnswer(Exception):
    """The server closed without sending a byte of the response."""


def read_resp(c, head_request):
    """Like Conn.read_response, but reports a cut body as Cut and a close
    before any byte as NoAnswer."""
    try:
        r = c.read_head()
    except ConnectionResetError:
        if c.buf:
            raise TestFailure("reset inside a response head: %r"
                              % bytes(c.buf[:200]))
        r = None
    if r is None:
        raise NoAnswer()
    if r.status == 304:
        return r
    cl = r.header("content-length")
    if cl is None:
        raise TestFailure("response without Content-Length: %r" % r)
    if head_request:
        return r
    n = int(cl)
    try:
        while len(c.buf) < n:
            if not c._fill():
                break
    except ConnectionResetError:
        pass
    if len(c.buf) < n:
        got = bytes(c.buf)
        c.buf.clear()
        raise Cut(r, got)
    r.body = bytes(c.buf[:n])
    del c.buf[:n]
    return r


class Req:
    """One request of the soak, and how to judge its answer."""

    def __init__(self, path, kind, etag=None, rng=None):
        self.path, self.kind, self.etag, self.range = path, kind, etag, None
        hdrs = {}
        if kind == "cond":
            hdrs["If-None-Match"] = etag
        elif kind == "range":
            a = rng.choice((0, rng.randint(0, 200), rng.randint(0, 5000),
                            rng.randint(0, 200000)))
            b = a + rng.choice((0, 9, 1000, 30000, 100000))
            self.range = (a, b)
            hdrs["Range"] = "bytes=%d-%d" % (a, b)
        self.method = "HEAD" if kind == "head" else "GET"
        self.hdrs = hdrs

    def bytes(self, close=False):
        h = dict(self.hdrs)
        if close:
            h["Connection"] = "close"
        return build_request(self.method, "/" + self.path, h)


class Judge:
    """Checks answers against the versions model (module docstring)."""

    def __init__(self, world, stats, engine):
        self.w, self.s, self.engine = world, stats, engine
        self.etags = {}  # path -> an ETag seen, for If-None-Match
        self.lock = threading.Lock()
        self.failures = []

    def fail(self, msg):
        with self.lock:
            self.failures.append(msg)
            if len(self.failures) <= 5:
                print("# FAILURE: " + msg)
                sys.stdout.flush()

    def some_etag(self, path):
        with self.lock:
            return self.etags.get(path)

    def remember(self, path, tag):
        if tag:
            with self.lock:
                self.etags[path] = tag

    def tag_ok(self, s, states, tag, size):
        """Whether tag is state s's ETag for a body of `size`: "exact";
        "torn" when it pairs s's inode and size with the mtime of another
        state of that inode in the interval (a truncation moves the size
        and then the times, and fstat takes no lock: a lookup racing it
        may see one without the other, until its event drops it)."""
        if any(x.token == s.token and x.ino == s.ino and
               x.etag_fits(tag, size) for x in states):
            return "exact"
        p = parse_etag(tag)
        mine = [x for x in states if x.ino == s.ino and x.token == s.token]
        truncated = any(x.hi < y.lo for x in mine for y in mine)
        if p is None or p[2] != s.ino or p[1] != size or not truncated:
            return None
        if size in {x.lo for x in mine if x.lo == x.hi} and \
                any(x.mtime in (p[0], None) for x in mine):
            return "torn"
        return None

    def same(self, s, states, lo, body):
        """Whether body is version s's bytes from offset lo: "exact", or
        "zeroed" when the bytes past a truncation of s that overlaps are
        each the version's or zero (the module docstring says why), else
        None."""
        want = content(s.token, s.full)[lo:lo + len(body)]
        if want == body:
            return "exact"
        cuts = [t.hi for t in states if t.token == s.token and t.hi < s.lo]
        if not cuts or len(want) != len(body):
            return None
        end = max(min(cuts) - lo, 0)
        if want[:end] != body[:end]:
            return None
        for o in range(end, len(body), 4096):
            w, b = want[o:o + 4096], body[o:o + 4096]
            if w != b and b.count(0) != len(b) and \
                    any(x and x != y for x, y in zip(b, w)):
                return None
        return "zeroed"

    def cands(self, q, ta, tb):
        return self.w.overlapping(q.path, ta, tb)

    def window(self, states, r, body, lo, size):
        """The io_uring plan/open window: the bytes of a version at least
        as long, made by rename, under another state's length and ETag."""
        if self.engine == "epoll":
            return False
        tag = r.header("etag")
        m = HDR_RE.match(body) if lo == 0 else None
        for new in states:
            if new.token is None or not new.renamed:
                continue
            if m and int(m.group(1)) != new.token:
                continue
            if lo + len(body) > new.hi:
                continue
            if content(new.token, new.full)[lo:lo + len(body)] != body:
                continue
            for old in states:
                if old is not new and old.etag_fits(tag, size):
                    return True
        return False

    def check(self, q, r, ta, tb):
        states = self.cands(q, ta, tb)
        where = "%s %s (%s) at %.3f..%.3f" % (q.kind, q.path, q.range or "",
                                              ta, tb)
        what = self.judge(q, r, states)
        if what is None:
            self.fail("%s: %r, states %r; %s" % (where, r, states,
                                                 self.explain(q, r)))
        else:
            self.s.add(what)

    def explain(self, q, r):
        """What the wrong answer was: which version, from when."""
        m = HDR_RE.match(r.body)
        out = "ETag %s" % r.header("etag")
        if not m:
            return out + ", body not from offset 0 of a version"
        tok = int(m.group(1))
        with self.w.lock:
            where = ["%s %r" % (p, st) for p, h in self.w.hist.items()
                     for st in h if st.token == tok]
        out += ", body claims v%d, which was: %s" % (tok, "; ".join(where))
        for st in self.cands(q, 0, 1e18):
            if st.token != tok:
                continue
            want = content(tok, st.full)[:len(r.body)]
            diff = next((i for i in range(min(len(want), len(r.body)))
                         if want[i] != r.body[i]), None)
            out += "; vs %r: etag fits %s, first byte differing %s" \
                % (st, st.etag_fits(r.header("etag"), len(r.body)), diff)
            if diff is not None:
                bad = r.body[diff:]
                out += " (%d bytes from there, %d of them zero, %r...)" % (
                    len(bad), bad.count(0), bad[:24])
        return out

    @staticmethod
    def note(how, torn):
        return ("" if how == "exact" else " zeroed by a truncation") + (
            "" if torn == "exact" else ", torn stat during a truncation")

    def judge(self, q, r, states):
        """The category of a valid answer, else None."""
        live = [s for s in states if s.token is not None]
        if r.status == 404:
            return "404 (absent)" if len(live) < len(states) else None
        if r.status == 503:
            # The file changed under the plan and both replans.
            return "503 (changed under every try)" if len(states) > 1 \
                else None
        if r.status not in (200, 206, 304, 416):
            return None
        tag = r.header("etag")
        if r.status == 304:
            if q.kind != "cond":
                return None
            if any(s.etag_fits(q.etag) for s in live):
                return "304"
            # The client's tag came from a torn stat (a 200 judged so
            # below), and the server still held those facts: its event
            # had not yet dropped them.
            p = parse_etag(q.etag)
            if p and any(self.tag_ok(s, states, q.etag, p[1]) == "torn"
                         for s in live):
                return "304, torn stat during a truncation"
            return None
        if q.kind == "head":
            n = int(r.header("content-length"))
            hows = {self.tag_ok(s, states, tag, n) for s in live}
            if r.status != 200 or hows == {None}:
                return None
            return "HEAD 200" if "exact" in hows else \
                "HEAD 200, torn stat during a truncation"
        if r.status == 416:
            a = q.range[0] if q.range else -1
            return "416" if any(s.lo <= a for s in live) else None
        if r.status == 206:
            m = re.match(r"^bytes (\d+)-(\d+)/(\d+)$",
                         r.header("content-range") or "")
            if not q.range or not m:
                return None
            a, b, total = map(int, m.groups())
            if a != q.range[0] or len(r.body) != b - a + 1:
                return None
            for s in live:
                torn = self.tag_ok(s, states, tag, total)
                how = torn and self.same(s, states, a, r.body)
                if how:
                    return "206" + self.note(how, torn)
            return "206 (plan/open window)" if self.window(
                states, r, r.body, a, total) else None
        # 200
        m = HDR_RE.match(r.body)
        n = len(r.body)
        if m:
            tok = int(m.group(1))
            for s in live:
                torn = s.token == tok and self.tag_ok(s, states, tag, n)
                how = torn and self.same(s, states, 0, r.body)
                if not how:
                    continue
                if q.kind == "cond" and all(
                        x.mtime is not None and x.etag_fits(q.etag)
                        for x in states):
                    return None  # should have been a 304
                return "200" + self.note(how, torn)
        return "200 (plan/open window)" if self.window(
            states, r, r.body, 0, n) else None

    def check_cut(self, q, cut, ta, tb):
        """The server ended the connection inside the body: only when the
        path changed during the request, and only with true bytes."""
        states = self.cands(q, ta, tb)
        got = cut.got
        lo = 0
        if cut.resp.status == 206:
            m = re.match(r"^bytes (\d+)-", cut.resp.header("content-range"))
            lo = int(m.group(1)) if m else 0
        ok = len(states) > 1 and any(
            self.same(s, states, lo, got)
            for s in states if s.token is not None)
        if ok:
            self.s.add("cut by a change")
        else:
            self.fail("%s %s: closed after %d of %s body bytes, states %r"
                      % (q.kind, q.path, len(got),
                         cut.resp.header("content-length"), states))


class Load:
    def __init__(self, srv, world, judge, stats, stop):
        self.srv, self.w, self.j, self.s, self.stop = (srv, world, judge,
                                                       stats, stop)

    def pick(self, rng, k=1):
        while True:
            paths = [rng.choice(PATHS) for _ in range(k)]
            if self.w.acquire(paths):
                return paths
            self.s.add("fenced path skipped")

    def request(self, rng, path):
        kinds = ["get"] * 6 + ["head", "range", "range"]
        tag = self.j.some_etag(path)
        if tag and rng.random() < 0.2:
            return Req(path, "cond", tag)
        return Req(path, rng.choice(kinds), rng=rng)

    def one(self, c, q, ta, reused):
        """Read and judge q's answer on c. False: the connection ended."""
        try:
            r = read_resp(c, q.method == "HEAD")
        except NoAnswer:
            self.unanswered(c, reused, "%s %s" % (q.kind, q.path))
            return False
        except Cut as cut:
            self.j.check_cut(q, cut, ta, time.monotonic())
            return False
        tb = time.monotonic()
        if q.kind == "static":
            with open(self.srv.path(q.path), "rb") as f:
                if r.status != 200 or r.body != f.read():
                    self.j.fail("static %s: %r" % (q.path, r))
                else:
                    self.s.add("200 (static)")
        else:
            self.j.check(q, r, ta, tb)
        self.s.add("requests")
        self.s.add("bytes", len(r.body))
        if r.status == 200:
            self.j.remember(q.path, r.header("etag"))
        # The server's idle timer starts once its answer went out, which is
        # after the request was written (ta) but may be well before this
        # busy thread read the answer (tb): count idleness from ta.
        c.t_last = ta
        conn_hdr = (r.header("connection") or "").lower()
        return "close" not in conn_hdr

    def unanswered(self, c, reused, what):
        """The server closed c before answering: fine for a keep-alive
        connection that a worker swap or the idle timeout may end."""
        now = time.monotonic()
        t_open = getattr(c, "t_open", now)
        if reused and any(t0 <= now and t_open <= (t1 or now)
                          for t0, t1 in self.srv.swaps):
            self.s.add("keep-alive closed unanswered (worker swap)")
        elif reused and now - c.t_last >= IDLE_TIMEOUT - IDLE_SLACK:
            self.s.add("keep-alive closed unanswered (idle)")
        else:
            last = max([t1 or now for _, t1 in self.srv.swaps] or [None],
                       key=lambda t: t or 0)
            self.j.fail("%s: closed unanswered (%s connection; %.2fs after "
                        "its last request, opened %.2fs ago, last swap %s)"
                        % (what, "reused" if reused else "new",
                           now - c.t_last, now - t_open,
                           "none" if last is None else
                           "ended %.2fs ago" % (now - last)))

    def persistent(self, args):
        """Keep-alive connections: `turns` writes of kmin..kmax requests
        each (more than one: pipelined), every answer read in order."""
        seed, label, kmin, kmax, turns = args
        rng = random.Random(seed)
        while not self.stop.is_set():
            t_open = time.monotonic()
            c = self.srv.conn(timeout=30)
            c.t_open = c.t_last = t_open
            self.s.add("connections (%s)" % label)
            try:
                for turn in range(rng.randint(1, turns)):
                    if self.stop.is_set():
                        break
                    paths = self.pick(rng, rng.randint(kmin, kmax))
                    try:
                        qs = [Req(rng.choice(STATIC), "static")
                              if rng.random() < 0.05 else
                              self.request(rng, p) for p in paths]
                        ta = time.monotonic()
                        if not self.send(c, b"".join(q.bytes() for q in qs),
                                         turn > 0):
                            break
                        if kmax > 1:
                            self.s.add("pipelined bursts")
                        if not all(self.one(c, q, ta, turn > 0 or k > 0)
                                   for k, q in enumerate(qs)):
                            break
                    finally:
                        self.w.release(paths)
            finally:
                c.close()

    def send(self, c, data, reused):
        """Write a request; False when a reused connection turned out
        closed by the server (it may close an idle one: RFC 9112 9.3)."""
        try:
            c.send(data)
            return True
        except (BrokenPipeError, ConnectionResetError) as e:
            self.unanswered(c, reused, "sending: %r" % e)
            return False

    def closer(self, seed):
        rng = random.Random(seed)
        while not self.stop.is_set():
            [p] = self.pick(rng)
            try:
                q = self.request(rng, p)
                with self.srv.conn(timeout=30) as c:
                    self.s.add("connections (close)")
                    ta = time.monotonic()
                    c.send(q.bytes(close=True))
                    self.one(c, q, ta, False)
                    if not c.closed_by_peer(10):
                        self.j.fail("Connection: close not closed")
                    elif c.buf:
                        self.j.fail("%s %s: bytes after a closing answer: %r"
                                    % (q.kind, q.path, bytes(c.buf[:100])))
            finally:
                self.w.release([p])

    def resetter(self, seed):
        rng = random.Random(seed)
        while not self.stop.is_set():
            mode = rng.choice(("mid-request", "after request", "mid-body"))
            [p] = self.pick(rng)
            try:
                c = self.srv.conn(timeout=30)
                c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                  struct.pack("ii", 1, 0))
                data = build_request("GET", "/" + p)
                if mode == "mid-request":
                    c.send(data[:rng.randint(1, len(data) - 3)])
                else:
                    c.send(data)
                if mode == "mid-body":
                    try:
                        c.read_some(rng.randint(1, 20000))
                    except OSError:
                        pass
                c.close()
                self.s.add("resets (%s)" % mode)
            finally:
                self.w.release([p])

    def slow(self, seed):
        rng = random.Random(seed)
        big = [p for p in PATHS if size_class(p) in "bl"]
        while not self.stop.is_set():
            p = rng.choice(big)
            if not self.w.acquire([p]):
                continue
            try:
                q = Req(p, "get")
                c = self.srv.conn(timeout=30, rcvbuf=4096)
                with c:
                    ta = time.monotonic()
                    c.send(q.bytes(close=True))
                    # Slow: at most 8 KiB per 5 ms (~1.6 MB/s; the 4 KiB
                    # buffer makes it less).
                    real = c._fill

                    def fill():
                        time.sleep(0.005)
                        chunk = c.sock.recv(8192)
                        if not chunk:
                            return False
                        c.buf += chunk
                        return True
                    c._fill = fill
                    try:
                        self.one(c, q, ta, False)
                        self.s.add("slow downloads")
                    finally:
                        c._fill = real
            finally:
                self.w.release([p])


def run_thread(fn, arg, errors, name):
    def body():
        try:
            fn(arg)
        except Exception as e:  # any crash of a client is a failure
            errors.append("%s: %r\n%s" % (name, e, traceback.format_exc()))
    t = threading.Thread(target=body, name=name, daemon=True)
    t.start()
    return t


def classify_log(text):
    cats, unexplained = {}, []
    for line in text.splitlines():
        if not line.strip():
            continue
        for cat, rx in EXPLAINED:
            if rx.search(line):
                cats[cat] = cats.get(cat, 0) + 1
                break
        else:
            unexplained.append(line)
    return cats, unexplained


def soak():
    rng = random.Random(SEED)
    print("# soak: engine %s, %.0f s of load, seed %d (ORCD_SOAK_SEED)"
          % (orcdtest.ENGINE, SECONDS, SEED))
    with _Holder(Soak()) as srv:
        world = World(srv.root, srv.rename)
        writer = Writer(world, random.Random(rng.random()))
        for p in PATHS:
            os.makedirs(os.path.dirname(srv.path(p)), exist_ok=True)
            writer.put_new(p, "create")
        srv.start()
        base = srv.idle_metrics()
        stats = Stats()
        judge = Judge(world, stats, srv.engine)
        stop = threading.Event()
        errors = []
        load = Load(srv, world, judge, stats, stop)
        threads = []
        for i in range(3):
            threads.append(run_thread(
                load.persistent, (rng.random(), "keep-alive", 1, 1, 80),
                errors, "keepalive%d" % i))
        for i in range(2):
            threads.append(run_thread(load.closer, rng.random(), errors,
                                      "close%d" % i))
        threads.append(run_thread(
            load.persistent, (rng.random(), "pipelined", 2, 8, 20), errors,
            "pipeliner"))
        threads.append(run_thread(load.resetter, rng.random(), errors,
                                  "resetter"))
        threads.append(run_thread(load.slow, rng.random(), errors, "slow"))

        rss_samples = []
        t_start = time.monotonic()
        next_reload = t_start + RELOAD_EVERY
        next_write = t_start
        reloads = 0
        warm_fds = None
        while time.monotonic() - t_start < SECONDS and not errors:
            now = time.monotonic()
            if srv.proc.poll() is not None:
                raise TestFailure("orcd died: %s" % srv.stderr_text()[-2000:])
            if now >= next_write:
                writer.step()
                next_write = now + 0.04
            if now >= next_reload:
                n = srv.reloads_logged()
                srv.set_variant(srv.variant + 1)
                srv.signal(signal.SIGHUP)
                reloads += 1
                wait_until(lambda: srv.reloads_logged() > n, 30,
                           "reload %d to be logged" % reloads)
                if srv.swaps and srv.swaps[-1][1] is None:
                    srv.swaps[-1][1] = time.monotonic()
                next_reload = time.monotonic() + RELOAD_EVERY
            if not rss_samples or now - rss_samples[-1][0] >= 0.25:
                rss_samples.append((now, srv.rss()))
            if warm_fds is None and now - t_start >= WARMUP:
                warm_fds = srv.fd_count()
            time.sleep(0.01)
        stop.set()
        for t in threads:
            t.join(60)
            if t.is_alive():
                errors.append("%s did not stop within 60 s" % t.name)
        t_end = time.monotonic()
        if warm_fds is None:
            warm_fds = srv.fd_count()

        def median_rss(t0, t1, key="VmRSS"):
            v = sorted(x[key] for t, x in rss_samples if t0 <= t <= t1)
            return v[len(v) // 2] if v else rss_samples[-1][1][key]
        w0 = t_start + WARMUP
        warm_rss = {k: median_rss(w0, w0 + 5, k) for k in ("VmRSS",
                                                            "RssAnon")}
        load_end_rss = {k: median_rss(t_end - 5, t_end, k)
                        for k in ("VmRSS", "RssAnon")}

        # Settle: one more reload (back to the first config) empties every
        # worker's stat cache, closing the files it kept open.
        n = srv.reloads_logged()
        srv.set_variant(0)
        srv.signal(signal.SIGHUP)
        reloads += 1
        wait_until(lambda: srv.reloads_logged() > n, 30, "the last reload")

        def idle():
            m = srv.metrics()
            return (m["orcd_connections_open"] == 0 and
                    m["orcd_chains_in_flight"] == 0 and
                    m["orcd_slots_in_use"] == base["orcd_slots_in_use"])
        # The metrics page's own connection holds an fd in orcd until
        # orcd closes it: count fds after the last look at the page.
        for cond in (idle, lambda: srv.fd_count() == srv.fd_baseline):
            try:
                wait_until(cond, 30, "orcd to settle")
            except TestFailure:
                pass  # the verdicts below say what did not
            if cond is idle:
                m = srv.metrics()
        fds_end = srv.fd_count()
        fd_names = srv.fd_names()
        end_rss = srv.rss()
        text = srv.stderr_text()
        cats, unexplained = classify_log(text)
        n_reloaded = len(re.findall(r"configuration reloaded", text))

        # ---- the numbers ----
        peak = max(s["VmRSS"] for _, s in rss_samples)
        print("# requests by kind:")
        for k in sorted(stats.n):
            print("#   %-40s %d" % (k, stats.n[k]))
        print("# churn:")
        for k in sorted(world.counts):
            print("#   %-40s %d" % (k, world.counts[k]))
        print("# reloads: %d SIGHUP, %d \"configuration reloaded\""
              % (reloads, n_reloaded))
        print("# fds: %d after start-up, %d after warm-up (kept files "
              "included), %d at the end" % (srv.fd_baseline, warm_fds,
                                            fds_end))
        print("# slots in use: %d at start, %d at the end (peak %d); "
              "connections open %d, chains in flight %d, EBUSY %d"
              % (base["orcd_slots_in_use"], m["orcd_slots_in_use"],
                 m["orcd_slots_peak"], m["orcd_connections_open"],
                 m["orcd_chains_in_flight"], m["orcd_ebusy_total"]))
        print("# orcd counters: %s" % ", ".join(
            "%s=%d" % (k[5:], v) for k, v in sorted(m.items())
            if k.startswith("orcd_") and ("total" in k) and v))
        print("# RSS (MiB): %.1f after start, %.1f after warm-up, %.1f at "
              "the end of load (medians of 5 s), peak %.1f, %.1f settled "
              "(caches emptied); anon %.1f -> %.1f -> %.1f; bound: end of "
              "load - warm-up <= %.0f"
              % (rss_samples[0][1]["VmRSS"] / MIB, warm_rss["VmRSS"] / MIB,
                 load_end_rss["VmRSS"] / MIB, peak / MIB,
                 end_rss["VmRSS"] / MIB, warm_rss["RssAnon"] / MIB,
                 load_end_rss["RssAnon"] / MIB, end_rss["RssAnon"] / MIB,
                 RSS_BOUND / MIB))
        print("# error log: %s; unexplained %d" % (
            ", ".join("%s %d" % kv for kv in sorted(cats.items())),
            len(unexplained)))

        # ---- the verdicts ----
        results = []

        def verdict(ok, name, why=""):
            results.append(ok)
            print("%s - %s [%s]%s" % ("ok" if ok else "not ok", name,
                                       srv.engine, "" if ok else ": " + why))
        verdict(not errors, "clients ran without errors",
                "; ".join(errors)[:4000])
        verdict(not judge.failures, "every answer was one state of its file",
                "%d bad, first: %s" % (len(judge.failures),
                                       "\n".join(judge.failures[:5])))
        verdict(stats.n.get("requests", 0) > 0, "requests were answered")
        verdict(fds_end == srv.fd_baseline,
                "fds back to the count after start-up",
                "%d, want %d: %s" % (fds_end, srv.fd_baseline, fd_names))
        verdict(m["orcd_slots_in_use"] == base[
            "orcd_slots_in_use"] and m["orcd_connections_open"] == 0 and
            m["orcd_chains_in_flight"] == 0, "no slot, connection or chain "
            "left in use", "slots %d (start %d), connections %d, chains %d"
            % (m["orcd_slots_in_use"], base["orcd_slots_in_use"],
               m["orcd_connections_open"], m["orcd_chains_in_flight"]))
        verdict(m["orcd_ebusy_total"] == 0, "EBUSY 0")
        if "libasan" in srv.proc_text("maps"):
            print("ok - RSS [%s] # SKIP ASan's quarantine keeps freed memory"
                  % srv.engine)
        else:
            grown = load_end_rss["VmRSS"] - warm_rss["VmRSS"]
            verdict(grown <= RSS_BOUND, "RSS flat after the warm-up",
                    "grew %.1f MiB > %.0f MiB" % (grown / MIB,
                                                   RSS_BOUND / MIB))
        verdict(not unexplained, "every error-log line explained",
                "\n".join(unexplained[:20]))
        verdict(n_reloaded == reloads, "every SIGHUP reloaded",
                "%d of %d" % (n_reloaded, reloads))
        try:
            srv.stop()
            verdict(True, "SIGTERM: exit 0, no sanitizer report")
        except TestFailure as e:
            verdict(False, "SIGTERM: exit 0, no sanitizer report", str(e))
        return results


class _Holder:
    """Cleans up the Orcd whatever happens."""

    def __init__(self, srv):
        self.srv = srv

    def __enter__(self):
        return self.srv

    def __exit__(self, *exc):
        self.srv.cleanup()


def main():
    try:
        results = soak()
    except TestFailure as e:
        print("not ok - soak [%s]: %s" % (orcdtest.ENGINE, e))
        results = [False]
    passed = sum(1 for r in results if r)
    failed = len(results) - passed
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
