"""Shared harness for orcd's end-to-end tests.

Each tests/e2e/test_*.py is one standalone program (ctest runs it once per
engine, with ORCD_BIN and ORCD_ENGINE set). It builds a document root in a
temporary directory, starts a real orcd on 127.0.0.1, talks to it over raw
sockets (and curl where a real client matters), and checks at the end that
orcd holds as many fds as before the tests and exits 0 on SIGTERM.

Only loopback addresses are ever used.
"""

import calendar
import email.utils
import grp
import os
import pwd
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import traceback

ENGINE = os.environ.get("ORCD_ENGINE", "epoll")
BIN = os.environ.get("ORCD_BIN", "orcd")
SOURCE_DIR = os.environ.get(
    "ORCD_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
# Where orcd under test runs: a host:port given from outside (the QEMU
# harness points the suite at a guest) or a local process we start.
REMOTE = os.environ.get("ORCD_REMOTE")

SANITIZER_MARKS = (b"ERROR: AddressSanitizer", b"runtime error:",
                   b"ERROR: LeakSanitizer")


class TestFailure(AssertionError):
    pass


class Skip(Exception):
    """Raised by a case that cannot run here (missing tool, running as
    root, ...): reported as "ok - NAME # SKIP why"."""


def check(cond, msg):
    if not cond:
        raise TestFailure(msg)


def eq(got, want, what=""):
    if got != want:
        raise TestFailure("%s: got %r, want %r" % (what, got, want))


def wait_until(pred, timeout=10.0, what="condition"):
    """Poll pred() until true; never sleep blindly for readiness."""
    deadline = time.monotonic() + timeout
    delay = 0.005
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > deadline:
            raise TestFailure("timed out waiting for " + what)
        time.sleep(delay)
        delay = min(delay * 2, 0.1)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def make_site(root):
    """The fixture document root every test can rely on."""
    files = {
        "index.html": b"<!doctype html><title>orcd</title><p>hello</p>\n",
        "hello.txt": b"hello, world\n",
        "style.css": b"body { color: black; }\n",
        "data.bin": bytes(range(256)) * 4,  # 1 KiB
        "empty.txt": b"",
        "dir/index.html": b"<p>dir index</p>\n",
        "dir/page.html": b"<p>page</p>\n",
        "noindex/file.txt": b"file in a dir without index\n",
        ".hidden": b"secret\n",
        "dir/.git/config": b"[core]\n",
        "with space.txt": b"space\n",
        "UPPER.HTML": b"<p>upper</p>\n",
    }
    for name, data in files.items():
        path = os.path.join(root, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)
    big = os.path.join(root, "big.bin")
    with open(big, "wb") as f:
        block = bytes((i * 7) & 0xFF for i in range(65536))
        for _ in range(64):  # 4 MiB: larger than any per-connection buffer
            f.write(block)
    os.symlink("hello.txt", os.path.join(root, "link-inside.txt"))
    os.symlink("/etc/passwd", os.path.join(root, "link-outside"))
    os.symlink("../outside.txt", os.path.join(root, "link-up.txt"))
    with open(os.path.join(os.path.dirname(root), "outside.txt"), "wb") as f:
        f.write(b"outside the root\n")
    return root


class Response:
    def __init__(self, status, reason, version, headers, body):
        self.status = status
        self.reason = reason
        self.version = version
        self.headers = headers  # list of (lower-name, value)
        self.body = body

    def header(self, name, default=None):
        name = name.lower()
        for k, v in self.headers:
            if k == name:
                return v
        return default

    def header_all(self, name):
        return [v for k, v in self.headers if k == name.lower()]

    def __repr__(self):
        return "<Response %d %s %d bytes>" % (self.status, self.reason,
                                             len(self.body))


class Conn:
    """A raw HTTP/1.x client connection that reads responses precisely."""

    def __init__(self, addr, timeout=10.0, rcvbuf=None):
        if rcvbuf is None:
            self.sock = socket.create_connection(addr, timeout=timeout)
        else:
            # A small receive buffer must be set before connect() so the
            # window stays small: the server then really blocks on us.
            self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
            self.sock.settimeout(timeout)
            self.sock.connect(addr)
        # A bytearray grows in place: appending to bytes copies the whole
        # buffer each time, quadratic for a 64 MiB body in small segments.
        self.buf = bytearray()

    def send(self, data):
        if isinstance(data, str):
            data = data.encode()
        self.sock.sendall(data)

    def _fill(self):
        chunk = self.sock.recv(65536)
        if not chunk:
            return False
        self.buf += chunk
        return True

    def read_head(self):
        """The next response's head, its body left unread; None when the
        server closed before sending a byte of it."""
        while b"\r\n\r\n" not in self.buf:
            if not self._fill():
                if not self.buf:
                    return None
                raise TestFailure("connection closed inside a response head: %r"
                                  % bytes(self.buf[:200]))
        end = self.buf.index(b"\r\n\r\n")
        head = bytes(self.buf[:end])
        del self.buf[:end + 4]
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ", 2)
        check(len(parts) >= 2 and parts[0].startswith("HTTP/1."),
              "bad status line %r" % lines[0])
        headers = []
        for line in lines[1:]:
            k, _, v = line.partition(":")
            headers.append((k.strip().lower(), v.strip()))
        return Response(int(parts[1]), parts[2] if len(parts) > 2 else "",
                        parts[0], headers, b"")

    def read_response(self, head_request=False):
        r = self.read_head()
        if r is None:
            return None
        cl = r.header("content-length")
        if head_request or r.status in (204, 304) or 100 <= r.status < 200:
            return r
        check(cl is not None, "response without Content-Length: %r" % r)
        n = int(cl)
        while len(self.buf) < n:
            if not self._fill():
                raise TestFailure("connection closed after %d of %d body bytes"
                                  % (len(self.buf), n))
        r.body = bytes(self.buf[:n])
        del self.buf[:n]
        return r

    def read_exact(self, n):
        """Exactly n bytes (from the buffer first); raises TestFailure
        when the peer closes before."""
        while len(self.buf) < n:
            if not self._fill():
                raise TestFailure("connection closed after %d of %d bytes"
                                  % (len(self.buf), n))
        data = bytes(self.buf[:n])
        del self.buf[:n]
        return data

    def read_some(self, n):
        """Up to n bytes: what is buffered, else one recv. b"" on EOF."""
        if not self.buf:
            self._fill()
        data = bytes(self.buf[:n])
        del self.buf[:n]
        return data

    def closed_by_peer(self, timeout=5.0):
        """True when the server closes the connection (EOF or reset)
        within timeout; bytes that arrive meanwhile land in self.buf."""
        saved = self.sock.gettimeout()
        self.sock.settimeout(timeout)
        try:
            while True:
                chunk = self.sock.recv(65536)
                if not chunk:
                    return True
                self.buf += chunk
        except ConnectionResetError:
            return True
        except socket.timeout:
            return False
        finally:
            self.sock.settimeout(saved)

    def closed_now(self):
        """The server has closed this (idle) connection: EOF or a reset
        waits, seen without blocking and without taking a byte."""
        if not select.select([self.sock], [], [], 0)[0]:
            return False
        try:
            return self.sock.recv(1, socket.MSG_PEEK |
                                  socket.MSG_DONTWAIT) == b""
        except ConnectionResetError:
            return True
        except BlockingIOError:
            return False

    def close(self):
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class Metrics(dict):
    """orcd's metrics page as {series: value}, a series named as the page
    prints it, labels included: 'orcd_stat_cache_total{result="hit"}'."""

    def __missing__(self, series):
        raise TestFailure("no %s in the metrics page" % series)

    def total(self, name):
        """A metric summed over its labels."""
        return sum(v for k, v in self.items()
                   if k == name or k.startswith(name + "{"))


def read_metrics(port, timeout=10.0):
    """The metrics page orcd serves on its metrics_listen port (the
    forwarded port when orcd runs in the QEMU guest). Returns once orcd
    has closed the page's connection: callers count orcd's fds next."""
    with Conn(("127.0.0.1", port), timeout=timeout) as c:
        c.send(b"GET /metrics HTTP/1.1\r\nHost: m\r\n"
               b"Connection: close\r\n\r\n")
        r = c.read_response()
        check(r is not None and r.status == 200,
              "metrics page on port %d: %r" % (port, r))
        check(c.closed_by_peer(timeout),
              "metrics page on port %d: connection left open" % port)
    out = Metrics()
    for line in r.body.decode().splitlines():
        if line and not line.startswith("#"):
            series, _, value = line.rpartition(" ")
            # Counters are integers; process_cpu_seconds_total is not.
            out[series] = float(value) if "." in value else int(value)
    return out


def tcp_rows():
    """The columns of each row of /proc/net/tcp and tcp6 (this network
    namespace's TCP sockets)."""
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                next(f)
                for line in f:
                    yield line.split()
        except OSError:
            pass


def http_date(t):
    """IMF-fixdate for a POSIX time."""
    return email.utils.formatdate(t, usegmt=True)


def parse_http_date(s):
    """POSIX time from an IMF-fixdate; TestFailure when malformed."""
    try:
        return calendar.timegm(
            time.strptime(s, "%a, %d %b %Y %H:%M:%S GMT"))
    except (TypeError, ValueError):
        raise TestFailure("not an IMF-fixdate: %r" % (s,))


def build_request(method, path, headers=None, version="1.1", host=True):
    lines = ["%s %s HTTP/%s" % (method, path, version)]
    hdrs = list((headers or {}).items()) if isinstance(headers, dict) \
        else list(headers or [])
    if host and version == "1.1" and not any(k.lower() == "host"
                                              for k, _ in hdrs):
        lines.append("Host: test")
    for k, v in hdrs:
        lines.append("%s: %s" % (k, v))
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def unprivileged_conf():
    """Config lines that have orcd run unprivileged: as root, `user
    nobody` (root reads any file and searches any directory); otherwise
    orcd already is."""
    if Orcd.forwarded:
        # The guest's initramfs has no such accounts.
        raise Skip("orcd runs in the guest, as root, alone")
    if os.geteuid() != 0:
        return ""
    try:
        pwd.getpwnam("nobody")
        grp.getgrnam("nogroup")
    except KeyError as e:
        raise Skip("running as root, no nobody/nogroup: %s" % e)
    return "user nobody;\ngroup nogroup;\n"


def run_orcd(args, timeout=20):
    """orcd run once with args (--check-config, --version...) where the
    suite's orcd runs (orcdguest: in the guest, whose kernel decides what
    an engine probe finds): (exit status, stdout, stderr)."""
    p = subprocess.run([BIN] + [str(a) for a in args],
                       stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=timeout)
    return (p.returncode, p.stdout.decode("utf-8", "replace"),
            p.stderr.decode("utf-8", "replace"))


def _unshare_mounts():
    """In the child before orcd starts: a mount namespace of its own,
    whose mounts propagate nowhere."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    CLONE_NEWNS, MS_REC, MS_PRIVATE = 0x20000, 0x4000, 0x40000
    if libc.unshare(CLONE_NEWNS) != 0:
        raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWNS)")
    if libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None) != 0:
        raise OSError(ctypes.get_errno(), "mount --make-rprivate /")


class Orcd:
    """A running orcd (or a remote one when ORCD_REMOTE is set)."""

    def __init__(self, engine=None, conf="", args=(), site=True,
                 metrics=False):
        self.engine = engine or ENGINE
        # metrics=True: the metrics page on a port of its own, read by
        # metrics().
        self.metrics_port = free_port() if metrics else None
        self.tmp = tempfile.mkdtemp(prefix="orcd-e2e-")
        self.root = os.path.join(self.tmp, "root")
        os.makedirs(self.root)
        if site:
            make_site(self.root)
        self.port = free_port()
        self.addr = ("127.0.0.1", self.port)
        self.conf_path = os.path.join(self.tmp, "orcd.conf")
        self.log_path = os.path.join(self.tmp, "stderr.log")
        self.stdout_path = os.path.join(self.tmp, "stdout.log")
        self.access_log = os.path.join(self.tmp, "access.log")
        self.write_conf(conf)
        self.args = list(args)
        self.proc = None
        self.finished = False  # exit checked (finish())
        self.fd_baseline = None
        # Run in the child before orcd starts (a lower RLIMIT_NOFILE); a
        # local orcd only.
        self.preexec = None
        # Test knobs added to orcd's environment at start (ORCD_URING_ and
        # ORCD_TEST_ ones reach orcd in the guest too: orcdguest).
        self.env = {}

    def write_conf(self, extra=""):
        with open(self.conf_path, "w") as f:
            f.write("listen 127.0.0.1:%d;\n" % self.port)
            f.write("root %s;\n" % self.root)
            f.write("engine %s;\n" % self.engine)
            f.write("threads 1;\n")
            f.write("access_log %s;\n" % self.access_log)
            if self.metrics_port is not None:
                f.write("metrics on;\nmetrics_listen 127.0.0.1:%d;\n"
                        % self.metrics_port)
            f.write(extra)

    def launch(self):
        """Run orcd, not waiting for it to answer (start() does)."""
        cmd = [BIN, "-c", self.conf_path] + self.args
        self.stderr = open(self.log_path, "wb")
        self.stdout = open(self.stdout_path, "wb")
        self.proc = subprocess.Popen(cmd, stdout=self.stdout,
                                     stderr=self.stderr,
                                     preexec_fn=self.preexec,
                                     env=dict(os.environ, **self.env))
        return self

    def start(self):
        self.launch()
        wait_until(self._answers, 15, "orcd to answer on %s:%d" % self.addr)
        self._take_fd_baseline()
        return self

    def _take_fd_baseline(self):
        """Once orcd answers: wait until all of it serves and the probe's
        connection is gone, then count its fds."""
        # One worker answering is not all of them: orcd logs "serving"
        # (and tells systemd READY=1) once every worker's loop runs, and
        # only then are all their rings, loops and eventfds open.
        wait_until(lambda: "serving " in self.stderr_text(), 15,
                   "orcd to log that all workers serve")
        # orcd closes lingering: its FIN comes first, the fd goes only
        # when the probe's own close arrives. Count after that.
        wait_until(lambda: not self.client_sockets(), 15,
                   "orcd to close the probe's connection")
        self.fd_baseline = self.fd_count()

    def fd_links(self):
        """{fd name: link} of orcd's fds; ones closing meanwhile left out."""
        out = {}
        for name in os.listdir("/proc/%d/fd" % self.proc.pid):
            try:
                out[name] = os.readlink("/proc/%d/fd/%s" % (self.proc.pid,
                                                             name))
            except OSError:
                pass
        return out

    def client_sockets(self):
        """orcd's socket fds that are not TCP listeners: connections,
        including one whose TCP side already ended (a FIN answered in
        FIN_WAIT2 leaves a timewait entry without an inode, while the fd
        stays until orcd's lingering close reads the end)."""
        inodes = set(link[8:-1] for link in self.fd_links().values()
                     if link.startswith("socket:["))
        for cols in self.tcp_rows():
            if cols[3] == "0A":  # TCP_LISTEN
                inodes.discard(cols[9])
        return sorted(inodes)

    def tcp_rows(self):
        """tcp_rows() of the machine orcd runs on."""
        return tcp_rows()

    def socket_of(self, conn):
        """orcd's end of a client connection, as the inode of the socket
        whose peer is conn's local address; None if orcd holds none."""
        port = conn.sock.getsockname()[1]
        held = set(self.fd_links().values())
        for cols in self.tcp_rows():
            if int(cols[2].rsplit(":", 1)[1], 16) == port and \
                    "socket:[%s]" % cols[9] in held:
                return cols[9]
        return None

    def holds_socket(self, inode):
        """Whether any of orcd's fds is the socket with this inode."""
        return "socket:[%s]" % inode in self.fd_links().values()

    def _answers(self):
        if self.proc.poll() is not None:
            raise TestFailure("orcd exited with %d at start-up: %s"
                              % (self.proc.returncode, self.stderr_text()))
        try:
            with Conn(self.addr, timeout=2) as c:
                # Connection: close, and wait for orcd's close: the probe's
                # fd must be gone before the fd baseline is taken.
                c.send(build_request("HEAD", "/", {"Connection": "close"}))
                r = c.read_response(head_request=True)
                return r is not None and c.closed_by_peer(2)
        except OSError:
            return False

    def path(self, name):
        return os.path.join(self.root, name)

    def write_file(self, name, data, mtime=None):
        """Create or replace (truncate + write) a file under the root;
        mtime (POSIX seconds) pins Last-Modified to a known past time."""
        path = self.path(name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)
        if mtime is not None:
            os.utime(path, (mtime, mtime))
        return path

    def exchange(self, data, head_request=False, close_timeout=5.0):
        """Send raw bytes on a fresh connection, read one response, and
        report whether the server then closed: (response, closed)."""
        with self.conn() as c:
            c.send(data)
            r = c.read_response(head_request=head_request)
            return r, c.closed_by_peer(close_timeout)

    def stdout_text(self):
        with open(self.stdout_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def stderr_text(self):
        with open(self.log_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    # The address orcd sees for our connections (a guest sees QEMU's
    # user-mode gateway instead).
    client_addr = "127.0.0.1"
    # The site is on a filesystem shared with another machine (see
    # orcdguest), where inode numbers do not follow renames.
    shared_fs = False
    # Connections reach orcd through a forwarder (see orcdguest).
    forwarded = False
    # How many connects may be outstanding before they are accepted
    # (None: the kernel's backlog, ample on loopback).
    connect_burst = None

    def rename(self, src, dst):
        """Rename on the machine orcd runs on."""
        os.rename(src, dst)

    def symlink(self, target, path):
        """Make a symlink on the machine orcd runs on."""
        os.symlink(target, path)

    def adapt_conf(self, text):
        """A config a test wrote, as orcd must read it where it runs."""
        return text

    def fd_count(self):
        return len(os.listdir("/proc/%d/fd" % self.proc.pid))

    def proc_text(self, name):
        """/proc/PID/NAME of the running orcd, wherever it runs."""
        with open("/proc/%d/%s" % (self.proc.pid, name)) as f:
            return f.read()

    def cpu_seconds(self):
        """utime + stime of the whole orcd process from /proc, in seconds
        (USER_HZ is 100 on every Linux architecture orcd builds for)."""
        fields = self.proc_text("stat").rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / 100.0

    # Mounts for one orcd (a test's bind mounts) go in a mount namespace
    # of its own: every orcd's stat cache empties itself at any change of
    # its mount table, so a mount in the machine's namespace would reach
    # the orcds of tests running beside this one.
    own_mounts = False

    def private_mounts(self):
        """Before start(): orcd runs in a mount namespace of its own
        (private propagation), where mount() and umount() act."""
        if os.geteuid() != 0:
            raise Skip("needs root for a mount namespace")
        if self.preexec is not None:
            raise TestFailure("private_mounts() with another preexec")
        self.preexec = _unshare_mounts
        self.own_mounts = True

    def _in_mounts(self, argv):
        if self.own_mounts:
            argv = ["nsenter", "-t", str(self.proc.pid), "-m"] + argv
        return subprocess.run(argv, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT)

    def mount(self, *args):
        """mount ARGS where orcd sees it (a Skip if mounting fails)."""
        p = self._in_mounts(["mount"] + list(args))
        if p.returncode:
            raise Skip("mount %s: %s" % (" ".join(args),
                                         p.stdout.decode().strip()))

    def umount(self, path):
        # Lazy: a failing run may leave orcd holding a FIFO open.
        self._in_mounts(["umount", "-l", path])

    def release_kept_files(self):
        """The stat cache keeps hot large files open (they go by
        sendfile) until a change reaches them. A change of the root's
        own attributes reaches everything beneath it: make one, and send
        a request that makes orcd read it, so that what is counted after
        is only what nothing may hold."""
        st = os.stat(self.root)
        os.utime(self.root, ns=(st.st_atime_ns, st.st_mtime_ns))
        try:
            self.get("/orcd-release-kept-files")
        except (OSError, TestFailure):
            pass  # a test may have left orcd unable to answer: count anyway

    def assert_fds_back(self):
        """Connections close asynchronously on the server: poll."""
        self.release_kept_files()
        try:
            wait_until(lambda: self.fd_count() == self.fd_baseline, 10,
                       "orcd's fd count to return to %d" % self.fd_baseline)
        except TestFailure as e:
            raise TestFailure("%s (now %d: %s)" % (e, self.fd_count(),
                                                  self.fd_names()))

    def ring_fdinfo(self):
        """/proc/PID/fdinfo of orcd's io_uring fds, one text."""
        out = []
        for name, link in self.fd_links().items():
            if link == "anon_inode:[io_uring]":
                try:
                    out.append(self.proc_text("fdinfo/" + name))
                except OSError:
                    pass
        return "".join(out)

    def fd_names(self):
        """What orcd's fds are, for a failure message."""
        try:
            links = self.fd_links()
        except OSError as e:
            return str(e)
        return ", ".join("%s -> %s" % (n, links[n])
                         for n in sorted(links, key=int))

    def conn(self, timeout=10.0, rcvbuf=None):
        return Conn(self.addr, timeout, rcvbuf)

    def metrics(self):
        """orcd's counters and gauges now (a Metrics)."""
        check(self.metrics_port is not None, "orcd has no metrics=True")
        try:
            return read_metrics(self.metrics_port)
        except TestFailure as e:
            raise TestFailure("%s; orcd's log ends:\n%s"
                              % (e, self.stderr_text()[-2000:]))

    def idle_metrics(self, timeout=15.0):
        """orcd's metrics once it is idle, for a baseline: no connection
        open, no chain in flight, and the same slots in use in two reads
        0.1 s apart (on the io_uring engines a connection's slot comes
        back when its close completes, a moment after the count of open
        connections dropped: the start-up probe's, the last case's)."""
        def quiet(m):
            return (m["orcd_connections_open"] == 0 and
                    m["orcd_chains_in_flight"] == 0)
        deadline = time.monotonic() + timeout
        prev = self.metrics()
        while True:
            time.sleep(0.1)
            m = self.metrics()
            if quiet(prev) and quiet(m) and \
                    prev["orcd_slots_in_use"] == m["orcd_slots_in_use"]:
                return m
            if time.monotonic() > deadline:
                raise TestFailure(
                    "orcd not idle within %gs: connections %d, chains %d, "
                    "slots %d" % (timeout, m["orcd_connections_open"],
                                  m["orcd_chains_in_flight"],
                                  m["orcd_slots_in_use"]))
            prev = m

    def get(self, path, headers=None, method="GET", version="1.1"):
        with self.conn() as c:
            hdrs = dict(headers or {})
            hdrs.setdefault("Connection", "close")
            c.send(build_request(method, path, hdrs, version))
            return c.read_response(head_request=(method == "HEAD"))

    def raw(self, data, head_request=False):
        with self.conn() as c:
            c.send(data)
            return c.read_response(head_request=head_request)

    def signal(self, sig):
        self.proc.send_signal(sig)

    def stop(self, expect_rc=0):
        """SIGTERM, then check the exit as finish() does. An orcd that
        has already gone is checked all the same: a crash is no stop."""
        if self.proc is None or self.finished:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        self.finish(30, expect_rc)

    def finish(self, timeout=30, expect_rc=0):
        """Wait for orcd to exit (asked to already, or of its own
        accord), then check its exit status and that no sanitizer
        reported anything. Once: a later stop() does nothing."""
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise TestFailure("orcd still running %d s after it was asked "
                              "to stop" % timeout)
        self.finished = True
        self.stderr.close()
        if getattr(self, "stdout", None) is not None:
            self.stdout.close()
        text = self.stderr_text().encode()
        for mark in SANITIZER_MARKS:
            check(mark not in text, "sanitizer report:\n" + self.stderr_text())
        eq(rc, expect_rc, "orcd exit status (stderr: %s)" % self.stderr_text())

    def cleanup(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        for f in (getattr(self, "stdout", None), getattr(self, "stderr",
                                                         None)):
            if f is not None:
                f.close()
        shutil.rmtree(self.tmp, ignore_errors=True)


def check_not_accepting(srv, what, wait=1.0):
    """orcd was told to stop and still drains (the caller holds work in
    flight that outlasts `wait`): a client that connects now must never
    be accepted. Its listeners stay open until orcd exits, so the
    kernel's backlog takes the connection, and nothing may come back to
    it while orcd runs: no byte, and no close either (a stopping worker
    that still accepted would close the connection at once). Through
    QEMU's forwarder, which accepts for the guest and may have taken in
    the whole of what held the drain, only no byte."""
    try:
        s = socket.create_connection(srv.addr, timeout=wait)
    except OSError:
        s = None  # refused: no listener left, so nothing accepted
    got = None
    if s is not None:
        with s:
            try:
                s.sendall(build_request("GET", "/hello.txt"))
                s.settimeout(wait)
                got = s.recv(1)
                got = "the answer %r..." % got if got else "a close"
            except socket.timeout:
                got = None
            except ConnectionResetError:
                got = "a reset"
    if srv.forwarded:
        check(got is None or got in ("a close", "a reset"),
              "%s: a new client got %s while orcd drained" % (what, got))
        return
    check(srv.proc.poll() is None,
          "%s: orcd exited within %.1fs: the drain did not outlast the "
          "check" % (what, wait))
    check(got is None, "%s: a client that connected while orcd drained "
          "got %s within %.1fs: it was accepted" % (what, got, wait))


_cases = []


def case(fn=None, engines=None):
    """Register a case: `@case`, or `@case(engines=("direct", ...))`
    for one that tests what only those engines have (slots, chains, a
    ring). On another engine it does not run and is no skip: the runner
    says so in a TAP comment, `# CASE: not for ENGINE`."""
    def register(f):
        f.engines = tuple(engines) if engines else None
        _cases.append(f)
        return f
    return register(fn) if fn is not None else register


def _applies(fn):
    engines = getattr(fn, "engines", None)
    if engines and ENGINE not in engines:
        print("# %s: not for %s (%s only)" % (fn.__name__, ENGINE,
                                               ", ".join(engines)))
        return False
    return True


def run(server_factory=None):
    """Run every @case against one orcd, check fds, stop; print results.

    A case takes the Orcd instance. Exit status: 0 when all passed.
    """
    srv = (server_factory or Orcd)()
    failed = passed = skipped = 0
    try:
        srv.start()
        for fn in _cases:
            name = fn.__name__
            if not _applies(fn):
                continue
            try:
                fn(srv)
                passed += 1
                print("ok - %s [%s]" % (name, srv.engine))
            except Skip as e:
                skipped += 1
                print("ok - %s [%s] # SKIP %s" % (name, srv.engine, e))
            except Exception as e:  # a broken case must not hide the rest
                failed += 1
                print("not ok - %s [%s]: %s" % (name, srv.engine, e))
                if not isinstance(e, TestFailure):
                    traceback.print_exc(file=sys.stdout)
            if srv.proc.poll() is not None:
                print("not ok - orcd died during %s: %s"
                      % (name, srv.stderr_text()))
                failed += 1
                break
        try:
            srv.assert_fds_back()
            srv.stop()
            passed += 1
            print("ok - fds back to baseline and clean exit")
        except TestFailure as e:
            failed += 1
            print("not ok - teardown: %s" % e)
    except TestFailure as e:
        failed += 1
        print("not ok - start-up: %s" % e)
    finally:
        srv.cleanup()
    print("%d passed, %d skipped, %d failed" % (passed, skipped, failed))
    return 1 if failed else 0


class Server:
    """An Orcd (the guest's, under daemon-tests) that is always cleaned
    up: `with Server(**kw) as srv:` in serverless test programs."""

    def __init__(self, **kw):
        self.srv = Orcd(**kw)

    def __enter__(self):
        return self.srv

    def __exit__(self, *exc):
        self.srv.cleanup()


def run_serverless():
    """Run every @case with no shared server: each case starts (and
    cleans up) the orcd processes it needs. Same output as run()."""
    failed = passed = skipped = 0
    for fn in _cases:
        name = fn.__name__
        if not _applies(fn):
            continue
        try:
            fn()
            passed += 1
            print("ok - %s [%s]" % (name, ENGINE))
        except Skip as e:
            skipped += 1
            print("ok - %s [%s] # SKIP %s" % (name, ENGINE, e))
        except Exception as e:
            failed += 1
            print("not ok - %s [%s]: %s" % (name, ENGINE, e))
            if not isinstance(e, TestFailure):
                traceback.print_exc(file=sys.stdout)
        sys.stdout.flush()
    print("%d passed, %d skipped, %d failed" % (passed, skipped, failed))
    return 1 if failed else 0


# tests/qemu/daemon-tests points the suite at orcd in the QEMU guest.
if os.environ.get("ORCD_GUEST_AGENT"):
    import orcdguest
    orcdguest.install(sys.modules[__name__])
