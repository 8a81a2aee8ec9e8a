"""orcd in a QEMU guest, driven from the host.

Builds (when stale) the patched kernel and orcd, packs an initramfs with
orcd, its shared libraries (found by ldd), mime.types, the shipped config,
the sample site and the control agent, boots it with user-mode networking
that forwards 127.0.0.1 ports on the host to the guest, and talks to it:
HTTP on the forwarded port, counters from /metrics, shell commands through
the agent. Used by demo.sh (the main job), tests/qemu/daemon-tests and the
benchmarks.

Only 127.0.0.1 is ever used on the host side.
"""

import atexit
import os
import re
import socket
import subprocess
import sys
import time
import weakref

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))
import orcdtest  # noqa: E402 - the e2e harness's metrics reader
CACHE = os.environ.get("ORCD_CACHE", os.path.expanduser("~/.cache/orcd"))

GUEST_HTTP = 8080
GUEST_METRICS = 9180
GUEST_AGENT = 7000
# Where the HTTP forward listens on the host: 127.0.0.1 unless the
# environment opts in to 0.0.0.0 (a container); boot.sh checks it again.
HOSTFWD_ADDR = os.environ.get("ORCD_HOSTFWD_ADDR") or "127.0.0.1"
if HOSTFWD_ADDR not in ("127.0.0.1", "0.0.0.0"):
    raise SystemExit("ORCD_HOSTFWD_ADDR must be 127.0.0.1 or 0.0.0.0, not %r"
                     % HOSTFWD_ADDR)
SPLAT = re.compile(r"(BUG:|WARNING:|Oops|KASAN|possible circular locking|"
                   r"INFO: task .* blocked|Kernel panic|general protection)")


def say(msg):
    print("guest: " + msg, file=sys.stderr, flush=True)


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, text=True, **kw)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def build_kernel(unpatched=False, debug=False):
    """bzImage path from kernel/build.sh (cheap when up to date).

    debug: the patched kernel with kernel/config/debug.config (KASAN,
    lockdep, KFENCE, DEBUG_ATOMIC_SLEEP)."""
    if os.environ.get("ORCD_KERNEL_PATCHED") and not unpatched:
        return os.environ["ORCD_KERNEL_PATCHED"]
    args = [os.path.join(ROOT, "kernel", "build.sh")]
    if unpatched:
        args.append("--unpatched")
    if debug:
        args.append("--debug")
    out = run(args, stdout=subprocess.PIPE).stdout.strip().splitlines()
    return out[-1]


def build_orcd(build_dir=None):
    build_dir = build_dir or os.path.join(ROOT, "build-release")
    run(["cmake", "-S", ROOT, "-B", build_dir, "-DCMAKE_BUILD_TYPE=Release"],
        stdout=subprocess.DEVNULL)
    run(["cmake", "--build", build_dir, "-j", str(os.cpu_count() or 2),
         "--target", "orcd"], stdout=subprocess.DEVNULL)
    return os.path.join(build_dir, "orcd")


def build_site():
    out = os.path.join(CACHE, "site")
    run([os.path.join(ROOT, "tests", "site", "build.sh"), out],
        stdout=subprocess.DEVNULL)
    return out


def build_initramfs(orcd_bin, extra_bins=(), extra_adds=(), out=None):
    """The daemon guest image; rebuilt every time (a few seconds)."""
    out = out or os.path.join(CACHE, "qemu", "daemon-initramfs.cpio")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    d = os.path.join(HERE, "daemon")
    args = [os.path.join(HERE, "mkinitramfs.sh"), out,
            "--bin", orcd_bin + ":/usr/sbin/orcd",
            "--add", os.path.join(d, "run") + ":/orcd/daemon/run",
            "--add", os.path.join(d, "agent") + ":/orcd/daemon/agent",
            "--add", os.path.join(d, "orcd.conf") + ":/etc/orcd/orcd.conf",
            "--add", os.path.join(d, "orcd-chain.conf") +
            ":/etc/orcd/orcd-chain.conf",
            "--add", "/etc/mime.types:/etc/mime.types",
            "--add", build_site() + ":/srv/site"]
    for b in extra_bins:
        args += ["--bin", b]
    for a in extra_adds:
        args += ["--add", a]
    run(args, stdout=subprocess.DEVNULL)
    return out


# Guests whose boot.sh may still run: stopped when Python exits normally or
# after an uncaught exception, even by a caller without a finally.
_running = weakref.WeakSet()


@atexit.register
def _kill_all():
    for g in list(_running):
        g.kill()


class Guest:
    def __init__(self, kernel, initrd, engine=None, share=None, timeout=1800,
                 mem=1024, http_port=None, log=None, same_ports=(),
                 chain=False):
        self.kernel = kernel
        self.initrd = initrd
        self.engine = engine
        self.chain = chain  # orcd with stat_cache 0 (orcd-chain.conf)
        self.share = share
        self.timeout = timeout
        self.mem = mem
        self.http_port = http_port or free_port()
        self.metrics_port = free_port()
        self.agent_port = free_port()
        self.log = log or os.path.join(CACHE, "qemu", "daemon-console.log")
        # Ports forwarded to the same number in the guest (the e2e suite).
        self.same_ports = list(same_ports)
        self.proc = None
        self.orcd_pid = None

    @property
    def base_url(self):
        return "http://127.0.0.1:%d" % self.http_port

    def boot(self, ready_timeout=300):
        append = "orcd.run=/orcd/daemon/run"
        if self.engine:
            append += " orcd.engine=" + self.engine
        if self.chain:
            append += " orcd.chain=1"
        if self.share:
            append += " orcd.share=" + self.share
        cmd = [os.path.join(HERE, "boot.sh"), "--kernel", self.kernel,
               "--initrd", self.initrd, "--log", self.log, "--quiet",
               "--timeout", str(self.timeout), "--mem", str(self.mem),
               "--append", append,
               "--hostfwd", "tcp:%s:%d-:%d" % (HOSTFWD_ADDR, self.http_port,
                                               GUEST_HTTP),
               "--hostfwd", "tcp:127.0.0.1:%d-:%d" % (self.metrics_port,
                                                      GUEST_METRICS),
               "--hostfwd", "tcp:127.0.0.1:%d-:%d" % (self.agent_port,
                                                      GUEST_AGENT)]
        for p in self.same_ports:
            cmd += ["--hostfwd", "tcp:127.0.0.1:%d-:%d" % (p, p)]
        if self.share:
            cmd += ["--share", self.share]
        say("booting %s (engine %s); console %s"
            % (os.path.basename(self.kernel), self.engine or "-", self.log))
        self.t_boot = time.monotonic()
        # A session of its own: a terminal's Ctrl-C reaches this process
        # only, not boot.sh and its console logger, so that the guest can
        # still be stopped cleanly (orcd's exit status is read from the
        # console). kill() stops it; boot.sh's watchdog stops QEMU when
        # this process dies without doing so (SIGKILL, default SIGTERM).
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL,
                                     start_new_session=True)
        _running.add(self)
        self.wait_console("ORCD-GUEST: agent", ready_timeout)
        self.wait(lambda: self.agent("true")[0] == 0, 60, "the guest agent")
        self.sync_clock()
        if self.engine:
            m = self.wait_console(r"ORCD-GUEST: orcd pid=(\d+)", 60)
            self.orcd_pid = int(m.group(1))
            self.wait(self.http_ok, 120, "orcd in the guest to answer")
        say("guest up in %.1f s" % (time.monotonic() - self.t_boot))
        return self

    def console(self):
        try:
            with open(self.log, "rb") as f:
                return f.read().decode("utf-8", "replace")
        except FileNotFoundError:
            return ""

    def check_alive(self):
        if self.proc.poll() is not None:
            raise RuntimeError("QEMU exited (%d); console tail:\n%s"
                               % (self.proc.returncode, self.tail()))

    def tail(self, n=40):
        return "\n".join(self.console().splitlines()[-n:])

    def wait(self, pred, timeout, what):
        deadline = time.monotonic() + timeout
        while True:
            self.check_alive()
            try:
                v = pred()
            except OSError:
                v = None
            if v:
                return v
            if time.monotonic() > deadline:
                raise RuntimeError("timed out after %ds waiting for %s; "
                                   "console tail:\n%s"
                                   % (timeout, what, self.tail()))
            time.sleep(0.2)

    def wait_console(self, pattern, timeout):
        rx = re.compile(pattern)
        return self.wait(lambda: rx.search(self.console()), timeout, pattern)

    def agent(self, cmd, timeout=120):
        """Run a shell command in the guest: (exit status, output)."""
        with socket.create_connection(("127.0.0.1", self.agent_port),
                                      timeout=timeout) as s:
            s.sendall(cmd.encode() + b"\n")
            data = b""
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
        text = data.decode("utf-8", "replace")
        m = re.search(r"ORCD-AGENT-EXIT: (\d+)\s*$", text)
        if not m:
            return (255, text)
        return (int(m.group(1)), text[:m.start()])

    def sync_clock(self):
        """Set the guest's clock from the host's. Under TCG the guest's
        clock drifts (tens of seconds over a long run), and the e2e suite
        compares Date with mtimes the host writes. busybox date takes whole
        seconds, so the command is sent as the host's second begins."""
        time.sleep(1 - time.time() % 1)
        rc, out = self.agent("date -u -s @%d >/dev/null" % round(time.time()))
        if rc != 0:
            raise RuntimeError("setting the guest's clock: " + out)

    def http_ok(self):
        try:
            with socket.create_connection(("127.0.0.1", self.http_port),
                                          timeout=5) as s:
                s.sendall(b"HEAD / HTTP/1.1\r\nHost: guest\r\n"
                          b"Connection: close\r\n\r\n")
                return s.recv(64).startswith(b"HTTP/1.1 ")
        except OSError:
            return False

    def metrics(self):
        """orcd's Prometheus counters as {name{labels}: value}."""
        return orcdtest.read_metrics(self.metrics_port, timeout=30)

    def stop_orcd(self, timeout=60):
        """SIGTERM orcd in the guest; its exit status."""
        if not self.orcd_pid:
            return None
        self.agent("kill -TERM %d" % self.orcd_pid)
        m = self.wait_console(r"ORCD-GUEST: orcd-exit=(\d+)", timeout)
        self.orcd_pid = None
        return int(m.group(1))

    def poweroff(self, status=0, timeout=120):
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            try:
                self.agent("echo %d > /tmp/poweroff" % status, timeout=30)
            except OSError:
                pass
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        return self.proc.returncode

    def splats(self):
        return [l for l in self.console().splitlines() if SPLAT.search(l)]

    def kill(self, grace=15):
        """Stop QEMU now. SIGTERM to boot.sh, which stops QEMU (SIGTERM,
        SIGKILL 5 s later) and exits; SIGKILL to boot.sh if it has not
        exited after grace seconds, and then its watchdog stops QEMU."""
        _running.discard(self)
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(grace)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
