#!/usr/bin/env python3
"""Privilege drop: orcd started as root with `user nobody; group
nogroup;` binds (a port below 1024 too), then drops, and serves with
uid, gid and groups all nobody/nogroup and no capabilities, as
/proc/PID/status shows for every thread. The rings of the io_uring
engines are created after the drop, so they still serve. Without root
the directives are an error, and --check-config says so too. Each case
starts its own orcd."""

import grp
import os
import pwd
import random
import re
import signal
import socket
import subprocess
import time
import sys

import orcdtest
from orcdtest import BIN, check, eq, wait_until
from systemdtest import listening_fds

HELLO = b"hello, world\n"


def need_root():
    if os.geteuid() != 0:
        raise orcdtest.Skip("needs root to drop privileges")
    try:
        return pwd.getpwnam("nobody").pw_uid, grp.getgrnam("nogroup").gr_gid
    except KeyError as e:
        raise orcdtest.Skip("no nobody/nogroup here: %s" % e)


def unprivileged():
    """The command prefix that runs orcd without root: setpriv
    (util-linux) as nobody, without a shell, when the test runs as root;
    nothing otherwise."""
    if os.geteuid() != 0:
        return []
    if not os.path.exists("/usr/bin/setpriv"):
        raise orcdtest.Skip("running as root and no setpriv")
    return ["setpriv", "--reuid=nobody", "--regid=nogroup",
            "--clear-groups", "--"]


def low_port():
    """A free port below 1024 on 127.0.0.1 (binding it needs root),
    picked at random: the epoll and direct runs of this test go in
    parallel, and orcd's SO_REUSEPORT listeners would share a port."""
    ports = list(range(600, 1024))
    random.shuffle(ports)
    for port in ports:
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", port))
            return port
        except OSError:
            continue
        finally:
            s.close()
    raise orcdtest.Skip("no free port below 1024")


def status(pid, tid=None):
    path = "/proc/%d/status" % pid if tid is None else \
        "/proc/%d/task/%d/status" % (pid, tid)
    out = {}
    with open(path) as f:
        for line in f:
            k, _, v = line.partition(":")
            out[k] = v.split()
    return out


def dropped_server(uid, gid, port=None):
    srv = orcdtest.Orcd(conf="user nobody;\ngroup nogroup;\n")
    if port:
        srv.port = port
        srv.addr = ("127.0.0.1", port)
        srv.write_conf("user nobody;\ngroup nogroup;\n")
    # nobody must reach the root. (The access log is opened before the
    # drop: see access_log_only_root_may_write.)
    for d in (srv.tmp, srv.root):
        os.chmod(d, 0o755)
    return srv


@orcdtest.case
def serves_as_nobody_with_no_capabilities():
    uid, gid = need_root()
    srv = dropped_server(uid, gid, low_port())
    try:
        srv.start()
        pid = srv.proc.pid
        # Ours, not another test's orcd on a shared port: it logs
        # "serving" after the drop, and holds a listener on the port.
        wait_until(lambda: "serving" in srv.stderr_text(), 10,
                   "orcd to log that it serves")
        eq(list(listening_fds(pid).values()), [srv.port],
           "orcd's listening ports")
        eq(srv.get("/hello.txt").body, HELLO, "served after the drop")
        tids = [int(t) for t in os.listdir("/proc/%d/task" % pid)]
        for tid in tids:
            st = status(pid, tid)
            what = "thread %d (%s)" % (tid, st["Name"][0])
            eq(st["Uid"], [str(uid)] * 4, what + " Uid real/eff/saved/fs")
            eq(st["Gid"], [str(gid)] * 4, what + " Gid real/eff/saved/fs")
            check(st.get("Groups", []) in ([], [str(gid)]),
                  "%s supplementary groups %r" % (what, st.get("Groups")))
            for cap in ("CapPrm", "CapEff", "CapAmb"):
                eq(int(st[cap][0], 16), 0, what + " " + cap)
        check(len(tids) >= 2, "no worker thread to check: %r (%s)"
              % ([(t, status(pid, t)["Name"]) for t in tids],
                 srv.stderr_text()))
        # The engine really is the one asked for (an io_uring one runs
        # its rings under nobody's credentials).
        check("engine %s" % srv.engine in srv.stderr_text(),
              "engine not reported: %s" % srv.stderr_text())
        # Serving goes on: many requests, a big file, the access log.
        with open(srv.path("big.bin"), "rb") as f:
            big = f.read()
        eq(srv.get("/big.bin").body, big, "big.bin after the drop")
        for _ in range(20):
            eq(srv.get("/hello.txt").body, HELLO, "repeated request")
        wait_until(lambda: os.path.getsize(srv.access_log) > 0, 5,
                   "access log lines written as nobody")
        srv.assert_fds_back()
        srv.stop()
    finally:
        srv.cleanup()


@orcdtest.case
def files_only_root_can_read_are_refused():
    # The drop is real: a file readable by root only is not served.
    uid, gid = need_root()
    srv = dropped_server(uid, gid)
    try:
        secret = srv.write_file("secret.txt", b"root only\n")
        os.chmod(secret, 0o600)
        os.chmod(srv.write_file("empty.txt", b""), 0o600)
        srv.start()
        # Every engine answers 403 and keeps the connection: the io_uring
        # engines plan from an O_PATH lookup that needs no read
        # permission, so their chain's open is what finds the refusal.
        with srv.conn() as c:
            for method in ("GET", "HEAD"):
                c.send(orcdtest.build_request(method, "/secret.txt"))
                r = c.read_response(head_request=method == "HEAD")
                eq(r.status, 403, "%s of a root-only file as nobody"
                   % method)
                check(b"root only" not in r.body, "secret in the body")
            # Nor does any answer that sends none of its bytes (a
            # precondition's, a range's, an empty file's) say more about
            # it: the ETag names its inode, size and mtime.
            for name, headers in (
                    ("secret.txt", {"If-None-Match": "*"}),
                    ("secret.txt", {"If-Match": '"x"'}),
                    ("secret.txt", {"Range": "bytes=999-"}),
                    ("secret.txt", {"If-Modified-Since":
                                    orcdtest.http_date(time.time())}),
                    ("empty.txt", {})):
                c.send(orcdtest.build_request("GET", "/" + name, headers))
                r = c.read_response()
                eq(r.status, 403, "GET /%s with %s as nobody"
                   % (name, headers))
                check(r.header("etag") is None and
                      r.header("content-range") is None,
                      "file facts in a 403: %r" % r)
            c.send(orcdtest.build_request("GET", "/hello.txt"))
            eq(c.read_response().body, HELLO, "same connection after 403")
        eq(srv.get("/hello.txt").status, 200, "readable file")
        srv.stop()
    finally:
        srv.cleanup()


def log_in_own_dir(srv, uid, gid):
    """srv's access log in a directory of its own (0700, owned by
    uid:gid), the config rewritten for it; the directory."""
    logdir = os.path.join(srv.tmp, "log")
    os.mkdir(logdir, 0o700)
    os.chown(logdir, uid, gid)
    srv.access_log = os.path.join(logdir, "access.log")
    srv.write_conf("user nobody;\ngroup nogroup;\n")
    return logdir


@orcdtest.case
def access_log_only_root_may_write():
    # The access log is opened as root, before the drop, like the
    # listeners: a path in a directory only root may enter (/var/log
    # style) works, and lines written as nobody reach it.
    uid, gid = need_root()
    srv = dropped_server(uid, gid)
    try:
        logdir = log_in_own_dir(srv, 0, 0)
        srv.start()
        eq(srv.get("/hello.txt").body, HELLO, "served after the drop")
        wait_until(lambda: os.path.exists(srv.access_log) and
                   b"/hello.txt" in open(srv.access_log, "rb").read(), 5,
                   "the request's line in the root-only access log")
        eq(os.stat(srv.access_log).st_uid, 0, "log created by root")
        # Said at start-up, before any rotation:
        check(re.search(r"access_log %s: the user orcd runs as cannot "
                        r"create files in %s \(Permission denied\)"
                        % (re.escape(srv.access_log), re.escape(logdir)),
                        srv.stderr_text()), srv.stderr_text())
        # A rotation there needs a file nobody may not create: the reopen
        # fails, says which file and why, and lines go on to the old one.
        os.rename(srv.access_log, srv.access_log + ".1")
        srv.signal(signal.SIGUSR1)
        wait_until(lambda: "reopening the access log" in srv.stderr_text(),
                   10, "the failed reopen to be said")
        check(re.search(r"reopening the access log %s failed: Permission "
                        r"denied" % re.escape(srv.access_log),
                        srv.stderr_text()), srv.stderr_text())
        srv.get("/hello.txt", {"User-Agent": "after-rotate"})
        wait_until(lambda: b"after-rotate" in
                   open(srv.access_log + ".1", "rb").read(), 5,
                   "lines going on to the renamed file")
        srv.stop()
    finally:
        srv.cleanup()


@orcdtest.case
def files_a_reload_reads_that_the_user_cannot():
    # A reload re-reads the config file and mime_types as the user orcd
    # runs as: one only root may read fails every SIGHUP. Start-up says so
    # for each, and a reload then keeps the running configuration.
    uid, gid = need_root()
    srv = dropped_server(uid, gid)
    try:
        mime = os.path.join(srv.tmp, "mime.types")
        with open(mime, "w") as f:
            f.write("text/plain txt\n")
        srv.write_conf("user nobody;\ngroup nogroup;\nmime_types %s;\n"
                       % mime)
        for path in (srv.conf_path, mime):
            os.chmod(path, 0o600)
        srv.start()
        for path in (srv.conf_path, mime):
            check(re.search(r"%s: the user orcd runs as cannot read it "
                            r"\(Permission denied\): every reload"
                            % re.escape(path), srv.stderr_text()),
                  srv.stderr_text())
        srv.signal(signal.SIGHUP)
        wait_until(lambda: "reload failed" in srv.stderr_text(), 10,
                   "the reload to fail")
        eq(srv.get("/hello.txt").body, HELLO, "served on")
        srv.stop()
    finally:
        srv.cleanup()


@orcdtest.case
def access_log_in_the_users_directory_rotates():
    # The way to rotate under `user`: the log's directory is the user's.
    # No warning, and the reopen creates the new file as the user.
    uid, gid = need_root()
    srv = dropped_server(uid, gid)
    try:
        log_in_own_dir(srv, uid, gid)
        srv.start()
        srv.get("/hello.txt", {"User-Agent": "before-rotate"})
        wait_until(lambda: os.path.exists(srv.access_log) and
                   b"before-rotate" in open(srv.access_log, "rb").read(), 5,
                   "the request's line in the access log")
        check("cannot create files" not in srv.stderr_text() and
              "cannot read it" not in srv.stderr_text(), srv.stderr_text())
        os.rename(srv.access_log, srv.access_log + ".1")
        srv.signal(signal.SIGUSR1)
        # The reopen makes the new file; a line buffered before it would
        # go to the renamed one, by design.
        wait_until(lambda: os.path.exists(srv.access_log), 5,
                   "the reopen to make the new file")
        eq(os.stat(srv.access_log).st_uid, uid, "new log made by nobody")
        srv.get("/hello.txt", {"User-Agent": "after-rotate"})
        wait_until(lambda: b"after-rotate" in
                   open(srv.access_log, "rb").read(), 5,
                   "the next line in the new file")
        check("failed" not in srv.stderr_text(), srv.stderr_text())
        srv.stop()
    finally:
        srv.cleanup()


@orcdtest.case
def user_without_root_is_an_error():
    prefix = unprivileged()
    srv = orcdtest.Orcd(conf="user nobody;\n")
    try:
        for d in (srv.tmp, srv.root):
            os.chmod(d, 0o755)
        os.chmod(srv.conf_path, 0o644)
        p = subprocess.run(prefix + [BIN, "-c", srv.conf_path],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=20)
        eq(p.returncode, 1, "exit status")
        check(b"not started as root" in p.stderr, "stderr: %r" % p.stderr)
    finally:
        srv.cleanup()


@orcdtest.case
def check_config_refuses_user_without_root():
    # --check-config refuses what start-up refuses: it said such a file
    # was valid.
    prefix = unprivileged()
    for directive, name in (("user", "nobody"), ("group", "nogroup")):
        # The access log to standard output: nothing else to refuse.
        srv = orcdtest.Orcd(conf="access_log -;\n%s %s;\n"
                            % (directive, name))
        try:
            for d in (srv.tmp, srv.root):
                os.chmod(d, 0o755)
            os.chmod(srv.conf_path, 0o644)
            with open(srv.conf_path) as f:
                line = f.read().splitlines().index("%s %s;"
                                                   % (directive, name)) + 1
            cmd = prefix + [BIN, "--check-config", "-c", srv.conf_path]
            p = subprocess.run(cmd, stdin=subprocess.DEVNULL,
                               stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, timeout=20)
            err = p.stderr.decode("utf-8", "replace")
            eq(p.returncode, 1, "%s: exit status (stderr %r)"
               % (directive, err))
            check("user/group set but not started as root" in err,
                  "%s: stderr %r" % (directive, err))
            check(re.search(re.escape(srv.conf_path) + ":%d: " % line, err),
                  "%s: stderr %r does not name %s:%d:"
                  % (directive, err, srv.conf_path, line))
            # Without it the same file is valid as the same user.
            srv.write_conf("access_log -;\n")
            os.chmod(srv.conf_path, 0o644)
            p = subprocess.run(cmd, stdin=subprocess.DEVNULL,
                               stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, timeout=20)
            eq(p.returncode, 0, "%s unset: exit status (stderr %r)"
               % (directive, p.stderr))
        finally:
            srv.cleanup()


if __name__ == "__main__":
    sys.exit(orcdtest.run_serverless())
