"""Run the e2e suite against orcd inside the QEMU guest.

tests/qemu/daemon-tests boots the guest with the host's temporary folder
shared over 9p at the same path, forwards a pool of 127.0.0.1 ports to the
same port numbers in the guest, and runs each test program with:
  ORCD_GUEST_AGENT=PORT        the guest's control agent (127.0.0.1:PORT)
  ORCD_GUEST_PORTS=P1,P2,...   forwarded ports, handed out by free_port()
  ORCD_GUEST_BIN=/usr/sbin/orcd
  TMPDIR=<shared folder>
install() then swaps orcdtest.Orcd for GuestOrcd: the same files and configs
(paths are identical on both sides), but orcd runs in the guest, started,
signalled and inspected through the agent. Addresses in configs are widened
from 127.0.0.1 to 0.0.0.0 in the guest, since QEMU delivers forwarded
connections to the guest's eth0 address; the host still only uses 127.0.0.1.
"""

import itertools
import os
import re
import shlex
import shutil
import signal
import socket
import tempfile
import time

AGENT_PORT = int(os.environ.get("ORCD_GUEST_AGENT", "0") or 0)
PORTS = [int(p) for p in os.environ.get("ORCD_GUEST_PORTS", "").split(",") if p]
GUEST_BIN = os.environ.get("ORCD_GUEST_BIN", "/usr/sbin/orcd")
_ports = itertools.cycle(PORTS) if PORTS else None


def agent(cmd, timeout=120):
    """(exit status, output) of a shell command run in the guest."""
    with socket.create_connection(("127.0.0.1", AGENT_PORT),
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
        raise OSError("guest agent gave no exit status: %r" % text[-200:])
    return int(m.group(1)), text[:m.start()]


def guest_free_port():
    return next(_ports)


def widen(text):
    """127.0.0.1:PORT in listen directives/flags -> 0.0.0.0:PORT."""
    return re.sub(r"127\.0\.0\.1:(\d+)", r"0.0.0.0:\1", text)


class RemoteProc:
    """The subset of subprocess.Popen the tests use, for a guest process."""

    def __init__(self, args, log_path, stdout_path, env):
        self.returncode = None
        base = log_path + ".guest"
        self.pidfile = base + ".pid"
        self.rcfile = base + ".rc"
        for f in (self.pidfile, self.rcfile):
            if os.path.exists(f):
                os.unlink(f)
        # The daemon's test knobs (ring and buffer sizes, faults) go
        # along.
        knobs = ["%s=%s" % (k, v) for k, v in sorted(env.items())
                 if k.startswith(("ORCD_URING_", "ORCD_TEST_"))]
        cmd = " ".join(shlex.quote(a) for a in (["env"] + knobs if knobs
                                                 else []) + list(args))
        script = ("ulimit -n 65536; %s </dev/null >%s 2>%s & p=$!; echo $p >%s; "
                  "wait $p; echo $? >%s"
                  % (cmd, shlex.quote(stdout_path), shlex.quote(log_path),
                     shlex.quote(self.pidfile), shlex.quote(self.rcfile)))
        rc, out = agent("(%s) >/dev/null 2>&1 &" % script.replace("\n", " "))
        if rc != 0:
            raise OSError("starting orcd in the guest failed: " + out)
        deadline = time.monotonic() + 30
        while True:
            try:
                with open(self.pidfile) as f:
                    text = f.read().strip()
                if text:
                    self.pid = int(text)
                    break
            except FileNotFoundError:
                pass
            if time.monotonic() > deadline:
                raise OSError("orcd in the guest never reported its pid")
            time.sleep(0.05)

    def poll(self):
        if self.returncode is None:
            try:
                with open(self.rcfile) as f:
                    text = f.read().strip()
                if text:
                    self.returncode = int(text)
            except FileNotFoundError:
                pass
        return self.returncode

    def send_signal(self, sig):
        if self.poll() is None:
            agent("kill -%d %d" % (int(sig), self.pid))

    def terminate(self):
        self.send_signal(signal.SIGTERM)

    def kill(self):
        self.send_signal(signal.SIGKILL)

    def wait(self, timeout=None):
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                import subprocess
                raise subprocess.TimeoutExpired("orcd (guest)", timeout)
            time.sleep(0.05)
        return self.returncode


def install(orcdtest):
    base = orcdtest.Orcd

    def in_guest(what, *argv):
        """Output of argv run in the guest; a test failure naming `what`
        if it exits non-zero."""
        rc, out = agent(" ".join(shlex.quote(str(a)) for a in argv))
        if rc != 0:
            raise orcdtest.TestFailure("%s in the guest: %s" % (what, out))
        return out

    class GuestOrcd(base):
        def start(self):
            with open(self.conf_path) as f:
                conf = f.read()
            with open(self.conf_path, "w") as f:
                f.write(widen(conf))
            args = [GUEST_BIN, "-c", self.conf_path] + \
                [widen(a) for a in self.args]
            self.stderr = open(os.devnull, "wb")
            self.proc = RemoteProc(args, self.log_path, self.stdout_path,
                                   dict(os.environ, **self.env))
            orcdtest.wait_until(self._answers, 60,
                                "orcd in the guest to answer on %s:%d"
                                % self.addr)
            # As for a local orcd: the probe's socket in the guest closes
            # only after QEMU's forwarder has passed on the probe's end.
            self._take_fd_baseline()
            return self

        def write_conf(self, extra=""):
            base.write_conf(self, extra)
            if getattr(self, "proc", None) is not None:
                with open(self.conf_path) as f:
                    conf = f.read()
                with open(self.conf_path, "w") as f:
                    f.write(widen(conf))

        # QEMU's user-mode network delivers the host's connections from
        # its gateway address.
        client_addr = "10.0.2.2"
        # The site reaches orcd over 9p, whose QEMU backend names files by
        # path: a stat through a name cached before a rename can report
        # the old inode number while reading the new file.
        shared_fs = True
        # QEMU's forwarding accepts on the host side whether or not orcd
        # listens in the guest, and buffers what a stalled host reader
        # leaves unread.
        forwarded = True
        # QEMU's forwarder listens with a tiny backlog: a burst of connects
        # beyond about a hundred overflows its accept queue, and the host
        # kernel drops those connections although connect() succeeded.
        connect_burst = 50

        def adapt_conf(self, text):
            return widen(text)

        def rename(self, src, dst):
            # In the guest, so its 9p dentries see it as a local rename
            # would (logrotate runs on the machine orcd runs on).
            in_guest("mv", "mv", "-f", src, dst)

        def symlink(self, target, path):
            # Made in the guest too: a link the host makes behind a 9p
            # dentry the guest already resolved is not seen there.
            in_guest("ln -s", "ln", "-s", target, path)

        def private_mounts(self):
            # The guest's mount table is not the host's: a mount the test
            # makes here reaches no other orcd's.
            pass

        def proc_text(self, name):
            return in_guest("/proc/PID/" + name, "cat",
                            "/proc/%d/%s" % (self.proc.pid, name))

        def ring_fdinfo(self):
            # fds closing while the shell reads are not an error.
            rc, out = agent("cd /proc/%d/fd && for f in *; do "
                            "[ \"$(readlink $f)\" = 'anon_inode:[io_uring]' ] "
                            "&& cat ../fdinfo/$f; done; true" % self.proc.pid)
            return out

        def fd_links(self):
            # The guest's /proc, not this machine's: the pid is the
            # guest's. fds closing while the shell reads are left out.
            rc, out = agent("cd /proc/%d/fd 2>/dev/null && for f in *; do "
                            "l=$(readlink $f) && echo \"$f $l\"; done; true"
                            % self.proc.pid)
            links = {}
            for line in out.splitlines():
                name, _, link = line.partition(" ")
                if name.isdigit() and link:
                    links[name] = link
            return links

        def tcp_rows(self):
            rc, out = agent("cat /proc/net/tcp /proc/net/tcp6 2>/dev/null; "
                            "true")
            for line in out.splitlines():
                cols = line.split()
                if cols and cols[0] != "sl":  # each table's heading
                    yield cols

        def fd_count(self):
            # fds closing while ls reads the folder are not an error.
            rc, out = agent("ls /proc/%d/fd 2>/dev/null | wc -l"
                            % self.proc.pid)
            if rc != 0:
                raise orcdtest.TestFailure("fd count in the guest: " + out)
            return int(out.strip())

    def run_orcd(args, timeout=20):
        """The guest's orcd run once (--check-config, --version): its
        exit status, stdout and stderr, through files in the shared
        folder."""
        d = tempfile.mkdtemp(prefix="orcd-run-")
        out, err = os.path.join(d, "out"), os.path.join(d, "err")
        try:
            rc, text = agent(" ".join(shlex.quote(str(a)) for a in
                                      [GUEST_BIN] + [widen(a) for a in args])
                             + " </dev/null >%s 2>%s"
                             % (shlex.quote(out), shlex.quote(err)),
                             timeout=timeout + 30)
            with open(out, "rb") as f:
                o = f.read().decode("utf-8", "replace")
            with open(err, "rb") as f:
                e = f.read().decode("utf-8", "replace")
            return rc, o, e
        finally:
            shutil.rmtree(d, ignore_errors=True)

    orcdtest.Orcd = GuestOrcd
    orcdtest.free_port = guest_free_port
    orcdtest.run_orcd = run_orcd
