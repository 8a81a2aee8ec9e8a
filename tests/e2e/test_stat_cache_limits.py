#!/usr/bin/env python3
"""The stat cache at the kernel's inotify limits, set low in a user
namespace of orcd's own: with no inotify instance the cache is off and
says so; at the watch limit it says so once, serves every file fresh,
and stops trying a watch on every request. Each case starts its own
orcd."""

import ctypes
import os
import sys

import orcdtest
from orcdtest import check, eq

Server = orcdtest.Server
CLONE_NEWUSER = 0x10000000


def limited(name, value):
    """A preexec: orcd in a user namespace (root there, this uid
    outside) whose inotify limit `name` is `value`."""
    def pre():
        libc = ctypes.CDLL(None, use_errno=True)
        uid, gid = os.getuid(), os.getgid()
        if libc.unshare(CLONE_NEWUSER):
            raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWUSER)")
        for path, text in (("/proc/self/setgroups", "deny"),
                           ("/proc/self/uid_map", "0 %d 1" % uid),
                           ("/proc/self/gid_map", "0 %d 1" % gid),
                           ("/proc/sys/user/" + name, str(value))):
            with open(path, "w") as f:
                f.write(text)
    return pre


def start_limited(srv, name, value):
    if srv.forwarded:
        raise orcdtest.Skip("orcd runs elsewhere: its limits are not ours")
    if srv.shared_fs:
        raise orcdtest.Skip("no stat cache on a 9p root")
    srv.preexec = limited(name, value)
    srv.start()


def results(srv):
    m = srv.metrics()
    return {k: m['orcd_stat_cache_total{result="%s"}' % k]
            for k in ("hit", "miss", "bypass")}


@orcdtest.case
def no_inotify_instance_is_said():
    with Server(conf="stat_cache 64;\n", metrics=True) as srv:
        start_limited(srv, "max_inotify_instances", 0)
        for i in range(3):
            eq(srv.get("/hello.txt").body, b"hello, world\n", "request %d" % i)
        said = [ln for ln in srv.stderr_text().splitlines()
                if "stat cache off: no inotify instance" in ln]
        eq(len(said), 1, "the line saying the cache is off: %r"
           % srv.stderr_text())
        r = results(srv)
        eq((r["hit"], r["miss"]), (0, 0), "answered from a cache: %r" % r)
        srv.stop()


@orcdtest.case
def watch_limit_is_said_once_and_files_stay_fresh():
    with Server(conf="stat_cache 64;\n", metrics=True) as srv:
        for i in range(12):
            srv.write_file("w/f%d.txt" % i, b"%d\n" % i)
        start_limited(srv, "max_inotify_watches", 4)
        for round_ in range(3):
            for i in range(12):
                eq(srv.get("/w/f%d.txt" % i).body,
                   b"%d\n" % i if round_ < 2 else b"new %d\n" % i,
                   "round %d, file %d" % (round_, i))
            if round_ == 1:
                for i in range(12):
                    srv.write_file("w/f%d.txt" % i, b"new %d\n" % i)
        said = [ln for ln in srv.stderr_text().splitlines()
                if "inotify watch limit is reached" in ln]
        eq(len(said), 1, "lines about the watch limit: %r" % said)
        r = results(srv)
        check(r["bypass"] >= 12, "files past the limit bypass: %r" % r)
        srv.stop()


if __name__ == "__main__":
    sys.exit(orcdtest.run_serverless())
