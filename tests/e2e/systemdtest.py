"""Helpers for the test_systemd_*.py programs: a NOTIFY_SOCKET listener
that records what orcd tells the service manager, and a look at which
listening sockets a process holds (from /proc, as ss would)."""

import os
import socket
import time

from orcdtest import TestFailure


class NotifyListener:
    """An AF_UNIX datagram socket standing in for systemd's notify socket.
    Every datagram is one message: a list of VAR=VALUE lines."""

    def __init__(self, path):
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(path)
        os.chmod(path, 0o777)  # orcd may have dropped privileges
        self.messages = []     # (time.monotonic(), {VAR: VALUE})

    def poll(self, timeout):
        """Receive what arrives within timeout seconds."""
        self.sock.settimeout(timeout)
        try:
            while True:
                data = self.sock.recv(65536)
                fields = {}
                for line in data.decode("utf-8", "replace").split("\n"):
                    if "=" in line:
                        k, _, v = line.partition("=")
                        fields[k] = v
                self.messages.append((time.monotonic(), fields))
                self.sock.settimeout(0)
        except (socket.timeout, BlockingIOError):
            pass

    def wait_for(self, pred, timeout, what, start=0):
        """Index of the first message from `start` on with pred(fields)
        true; polls with a deadline."""
        deadline = time.monotonic() + timeout
        while True:
            for i in range(start, len(self.messages)):
                if pred(self.messages[i][1]):
                    return i
            left = deadline - time.monotonic()
            if left <= 0:
                raise TestFailure("timed out waiting for %s; got %r"
                                  % (what, [m for _, m in self.messages]))
            self.poll(min(left, 0.2))

    def close(self):
        self.sock.close()
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass


def _listening_inodes():
    """{socket inode: local port} of every listening TCP socket."""
    out = {}
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(name) as f:
                rows = f.read().splitlines()[1:]
        except FileNotFoundError:
            continue
        for row in rows:
            col = row.split()
            if col[3] == "0A":  # TCP_LISTEN
                out[int(col[9])] = int(col[1].rsplit(":", 1)[1], 16)
    return out


def listening_fds(pid):
    """{fd: port} of the listening TCP sockets process pid holds."""
    listening = _listening_inodes()
    out = {}
    fddir = "/proc/%d/fd" % pid
    for fd in os.listdir(fddir):
        try:
            target = os.readlink(os.path.join(fddir, fd))
        except OSError:
            continue
        if target.startswith("socket:["):
            inode = int(target[8:-1])
            if inode in listening:
                out[int(fd)] = listening[inode]
    return out
