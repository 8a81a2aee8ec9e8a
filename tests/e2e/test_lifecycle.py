#!/usr/bin/env python3
"""The process: command line (--check-config, --version, --help, bad
flags), SIGTERM draining in-flight responses, SIGHUP reload (good and
broken configs), the access log in combined format, and fds back to the
baseline after many connections. Each case starts its own orcd."""

import calendar
import errno
import os
import re
import resource
import shutil
import signal
import socket
import sys
import threading
import time

import orcdtest
from orcdtest import build_request, check, eq, wait_until

HELLO = b"hello, world\n"

# host ident authuser [date] "request" status bytes "referer" "agent"
QUOTED = r'"((?:[^"\\]|\\.)*)"'
COMBINED = re.compile(
    r'^(\S+) (\S+) (\S+) \[(\d{2}/[A-Z][a-z]{2}/\d{4}:\d{2}:\d{2}:\d{2} '
    r'[+-]\d{4})\] ' + QUOTED + r' (\d{3}) (\d+|-) ' + QUOTED + ' '
    + QUOTED + r'$')


def run_bin(args, timeout=20):
    """orcd run once, where the suite's orcd runs (orcdtest.run_orcd)."""
    return orcdtest.run_orcd(args, timeout)


Server = orcdtest.Server


def set_conf(srv, text):
    """Replace the config file atomically (a reload never sees half)."""
    tmp = srv.conf_path + ".tmp"
    with open(tmp, "w") as f:
        f.write(srv.adapt_conf(text))
    srv.rename(tmp, srv.conf_path)


def base_conf(srv, root=None):
    return ("listen 127.0.0.1:%d;\nroot %s;\nengine %s;\nthreads 1;\n"
            "access_log %s;\n" % (srv.port, root or srv.root, srv.engine,
                                  srv.access_log))


# ---- command line ----

@orcdtest.case
def check_config_good():
    with Server() as srv:
        # --check-config validates without binding: the port may be busy.
        busy = socket.socket()
        try:
            busy.bind(srv.addr)
            busy.listen(1)
        except OSError as e:
            # Already busy (a guest's forwarder holds it): as good.
            if e.errno != errno.EADDRINUSE:
                raise
        try:
            rc, out, err = run_bin(["--check-config", "-c", srv.conf_path])
        finally:
            busy.close()
        eq(rc, 0, "--check-config on a good config (stderr %r)" % err)


@orcdtest.case
def shipped_config_validates():
    shipped = os.path.join(orcdtest.SOURCE_DIR, "conf", "orcd.conf")
    check(os.path.exists(shipped), "no %s: is ORCD_SOURCE_DIR the source "
          "tree?" % shipped)
    with Server() as srv:
        # A copy in the test's folder, which a guest run shares with
        # the guest (the source tree it does not).
        shutil.copy(shipped, os.path.join(srv.tmp, "shipped.conf"))
        shipped = os.path.join(srv.tmp, "shipped.conf")
        rc, out, err = run_bin(["--check-config", "-c", shipped, "--root",
                                srv.root, "--listen",
                                "127.0.0.1:%d" % srv.port])
        eq(rc, 0, "--check-config on conf/orcd.conf (stderr %r)" % err)


@orcdtest.case
def check_config_bad_names_file_and_line():
    with Server() as srv:
        good = base_conf(srv)
        nlines = good.count("\n")
        for bad in ("bogus_directive 1;", "idle_timeout 5parsecs;",
                    "threads many;", "listen 127.0.0.1:99999;",
                    "max_headers 0;", "index;", "root /a /b;",
                    'root "unterminated;'):
            set_conf(srv, good + "\n# a comment\n" + bad + "\n")
            want_line = nlines + 3
            rc, out, err = run_bin(["--check-config", "-c", srv.conf_path])
            check(rc != 0, "%r: --check-config exited 0" % bad)
            check(re.search(re.escape(srv.conf_path) + r":%d:" % want_line,
                            err), "%r: stderr %r does not name %s:%d:"
                  % (bad, err, srv.conf_path, want_line))
            eq(len(err.strip().splitlines()), 1, "%r: stderr lines (%r)"
               % (bad, err))
        # A value shown escaped (800 bytes) still leaves room for why.
        set_conf(srv, good + "threads %s;\n" % ("\u00e9" * 100))
        rc, out, err = run_bin(["--check-config", "-c", srv.conf_path])
        check(rc != 0 and err.rstrip().endswith("expected a whole number"),
              "a long value's message: %r" % err[-100:])
        rc, out, err = run_bin(["--threads", "\u00e9" * 100, "-c",
                                srv.conf_path])
        check(rc != 0 and err.rstrip().endswith(
            "expected a whole number (try --help)"),
            "a long flag value's message: %r" % err[-100:])
        # Missing ';' at the end of the file.
        set_conf(srv, good + "idle_timeout 5s\n")
        rc, out, err = run_bin(["--check-config", "-c", srv.conf_path])
        check(rc != 0, "missing ';': exit 0")
        check(re.search(re.escape(srv.conf_path) + r":\d+:", err),
              "missing ';': stderr %r lacks FILE:LINE:" % err)
        # A root that does not exist.
        set_conf(srv, good.replace(srv.root, srv.root + "/nonexistent"))
        rc, out, err = run_bin(["--check-config", "-c", srv.conf_path])
        check(rc != 0, "nonexistent root: exit 0")
        check("nonexistent" in err, "nonexistent root: stderr %r" % err)
        check(re.search(re.escape(srv.conf_path) + r":2: root ", err),
              "nonexistent root: stderr %r does not name %s:2:"
              % (err, srv.conf_path))
        # Found only when starting, yet --check-config says so too, with
        # the line: an unknown user, an access log nowhere to be made.
        for bad, what in (("user orcd-no-such-user;", "no such user"),
                          ("group orcd-no-such-group;", "no such group"),
                          ("access_log %s/no/dir/a.log;" % srv.tmp,
                           "No such file or directory")):
            set_conf(srv, good + bad + "\n")
            rc, out, err = run_bin(["--check-config", "-c", srv.conf_path])
            check(rc != 0, "%r: --check-config exited 0" % bad)
            check(re.search(re.escape(srv.conf_path) + r":%d: .*%s"
                            % (nlines + 1, what), err),
                  "%r: stderr %r" % (bad, err))
        # A config file that does not exist.
        rc, out, err = run_bin(["--check-config", "-c",
                                srv.conf_path + ".missing"])
        check(rc != 0, "missing config file: exit 0")
        check(".missing" in err, "missing config file: stderr %r" % err)


@orcdtest.case
def check_config_refuses_the_engines_start_up_refuses():
    # A named engine this kernel lacks fails start-up ("FILE:LINE: engine
    # X unavailable"); --check-config, which ExecStartPre and ExecReload
    # run, must say the same. Each engine is checked and started on the
    # kernel orcd runs on (the guest's, in a guest run), and the two must
    # agree, with start-up's reason.
    for engine in ("specific", "direct", "epoll"):
        with Server(engine=engine) as srv:
            rc, out, err = run_bin(["--check-config", "-c", srv.conf_path])
            try:
                srv.start()
                refused = None
            except orcdtest.TestFailure as e:
                refused = re.search(r"engine %s unavailable: [^\n]*"
                                    % engine, srv.stderr_text())
                check(refused, "orcd --engine %s neither served nor "
                      "refused the engine: %s" % (engine, e))
            if refused:
                eq(rc, 1, "--check-config --engine %s, which start-up "
                   "refuses (%r): exit status (stderr %r)"
                   % (engine, refused.group(0), err))
                check(refused.group(0) in err, "--check-config --engine "
                      "%s: %r lacks start-up's reason %r"
                      % (engine, err, refused.group(0)))
                # Like every other error in the file, it names its line.
                check(re.search(r"%s:\d+: engine %s unavailable"
                                % (re.escape(srv.conf_path), engine), err),
                      "--check-config, engine %s: %r names no file:line"
                      % (engine, err))
            else:
                eq(rc, 0, "--check-config --engine %s, which start-up "
                   "takes: exit status (stderr %r)" % (engine, err))
                srv.stop()


@orcdtest.case
def bad_flags_exit_2_one_line():
    for args in (["--bogus"], ["-x"], ["--threads", "abc"],
                 ["--engine", "warp"], ["--listen", "nowhere:99999"],
                 ["--root"], ["-c"], ["--threads=-1"], ["stray-argument"]):
        rc, out, err = run_bin(args)
        eq(rc, 2, "%s: exit status (stderr %r)" % (args, err))
        eq(len(err.strip().splitlines()), 1, "%s: stderr %r" % (args, err))
        eq(out, "", "%s: stdout" % args)


@orcdtest.case
def version_and_help():
    rc, out, err = run_bin(["--version"])
    eq(rc, 0, "--version exit")
    check(re.search(r"orcd.*\d+\.\d+\.\d+", out), "--version: %r" % out)
    rc, out, err = run_bin(["--help"])
    eq(rc, 0, "--help exit")
    for flag in ("--check-config", "--root", "--listen", "--engine",
                 "--threads", "-c"):
        check(flag in out, "--help does not mention %s" % flag)


@orcdtest.case
def flags_override_config():
    with Server() as srv:
        other = os.path.join(srv.tmp, "other-root")
        os.makedirs(other)
        with open(os.path.join(other, "hello.txt"), "wb") as f:
            f.write(b"from --root\n")
        port = orcdtest.free_port()
        srv.args = ["--root", other, "--listen", "127.0.0.1:%d" % port]
        srv.port, srv.addr = port, ("127.0.0.1", port)
        srv.start()
        r = srv.get("/hello.txt")
        eq(r.body, b"from --root\n", "--root overrides root")
        srv.stop()


# ---- signals ----

@orcdtest.case
def a_worker_that_cannot_start_is_exit_1():
    """orcd.8: exit 1 when the server could not start. Here the root is
    one `user nobody` cannot open, which orcd finds only in its workers,
    after dropping root; it used to stop those that did start and exit
    0 with "stopped"."""
    if os.geteuid() != 0:
        raise orcdtest.Skip("user needs root")
    with Server() as srv:
        if srv.forwarded:
            raise orcdtest.Skip("orcd runs elsewhere: its users are not ours")
        os.chmod(srv.tmp, 0o755)
        os.chmod(srv.root, 0o700)
        set_conf(srv, base_conf(srv).replace("threads 1;", "threads 2;")
                 + "user nobody;\n")
        rc, out, err = run_bin(["-c", srv.conf_path])
        check("starting worker" in err and "Permission denied" in err,
              "the failure said: %r" % err)
        eq(rc, 1, "exit status (stderr: %r)" % err)
        check("stopped" not in err, "a failed start said as a stop: %r" % err)
        # --check-config finds it too, naming the directive and the root.
        rc, out, err = run_bin(["-c", srv.conf_path, "--check-config"])
        eq(rc, 1, "--check-config's exit status (%r)" % (out + err))
        check("root %s: the user orcd runs as cannot open it: Permission "
              "denied" % srv.root in err and "orcd.conf:" in err,
              "--check-config said: %r" % (out + err))
        # Where the user may open it, the check passes, also when orcd
        # inherits SIGCHLD ignored (the kernel would reap the checking
        # child, leaving no status to read).
        os.chmod(srv.root, 0o755)
        rc, out, err = run_bin(["-c", srv.conf_path, "--check-config"])
        eq(rc, 0, "--check-config's exit status, root open to the user "
           "(%r)" % (out + err))
        import subprocess
        p = subprocess.run(
            [orcdtest.BIN, "-c", srv.conf_path, "--check-config"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=20,
            preexec_fn=lambda: signal.signal(signal.SIGCHLD,
                                             signal.SIG_IGN))
        eq(p.returncode, 0, "--check-config with SIGCHLD ignored (%r)"
           % p.stdout)


@orcdtest.case
def access_log_fifo_is_opened_without_waiting():
    """A FIFO as the access log is opened without waiting for a reader:
    with none, start-up and --check-config refuse at once, and a SIGUSR1
    after the reader went keeps the open file and the server answering
    signals. A blocking open used to hold the main thread (SIGTERM,
    SIGHUP, the watchdog) until some process opened the FIFO."""
    import subprocess
    with Server() as srv:
        if srv.forwarded:
            raise orcdtest.Skip("orcd runs elsewhere: a FIFO here is not "
                                "one there")
        fifo = os.path.join(srv.tmp, "access.fifo")
        os.mkfifo(fifo)
        set_conf(srv, base_conf(srv).replace(
            "access_log %s;" % srv.access_log, "access_log %s;" % fifo))
        for extra in (["--check-config"], []):
            try:
                rc, out, err = run_bin(["-c", srv.conf_path] + extra, 10)
            except subprocess.TimeoutExpired:
                raise orcdtest.TestFailure("orcd %s waited for a reader"
                                           % " ".join(extra))
            eq(rc, 1, "exit status of orcd %s" % " ".join(extra))
            check("a FIFO no process reads" in out + err,
                  "the cause said: %r" % (out + err))
        reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
        try:
            srv.start()
            srv.get("/hello.txt", {"User-Agent": "through-the-fifo"})
            got = [b""]

            def line_read():
                try:
                    got[0] += os.read(reader, 65536)
                except BlockingIOError:
                    pass
                return b"through-the-fifo" in got[0]
            wait_until(line_read, 10, "the line through the FIFO")
        finally:
            os.close(reader)
        srv.signal(signal.SIGUSR1)
        wait_until(lambda: "a FIFO no process reads" in srv.stderr_text(),
                   10, "the failed reopen to be said")
        check("lines go on to the file it had open" in srv.stderr_text(),
              "what happens to the lines: %r" % srv.stderr_text())
        eq(srv.get("/hello.txt").status, 200, "served after the reopen")
        srv.stop()


@orcdtest.case
def a_crash_is_no_clean_stop():
    """The harness itself: an orcd that died before its stop (here of
    SIGKILL, as of a crash or a sanitizer's abort) fails that stop, so a
    case that ends in one cannot pass."""
    with Server() as srv:
        srv.start()
        eq(srv.get("/hello.txt").status, 200, "served before the kill")
        srv.signal(signal.SIGKILL)
        srv.proc.wait(15)
        try:
            srv.stop()
        except orcdtest.TestFailure as e:
            check("exit status" in str(e), "stop failed otherwise: %s" % e)
        else:
            raise orcdtest.TestFailure("stop() passed an orcd that had "
                                       "died of SIGKILL")


@orcdtest.case
def sigterm_drains_slow_download():
    with Server() as srv:
        srv.start()
        with open(srv.path("big.bin"), "rb") as f:
            big = f.read()
        c = srv.conn(rcvbuf=16384)
        c.send(build_request("GET", "/big.bin", {"Connection": "close"}))
        r = c.read_response(head_request=True)
        eq(r.status, 200, "status")
        got = c.read_exact(65536)
        srv.signal(signal.SIGTERM)
        # The client stays stalled a while after SIGTERM (a slow client),
        # then takes the rest.
        time.sleep(0.5)
        # (Through QEMU's forwarder, which reads everything orcd sends,
        # the response may be complete on orcd's side by now.)
        check(srv.proc.poll() is None or srv.forwarded,
              "orcd exited while a response was in flight")
        try:
            got += c.read_exact(len(big) - len(got))
        except orcdtest.TestFailure as e:
            raise orcdtest.TestFailure("download cut by SIGTERM: %s" % e)
        check(got == big, "drained body differs from big.bin")
        check(c.closed_by_peer(), "connection not closed after draining")
        c.close()
        srv.finish()


def stalled_reader_cut_at(conf, bound, said):
    """A client that asked for three large bodies and reads nothing
    (send_timeout far off) holds a stop for the drain's bound (seconds),
    then is cut with a warning that says `said`."""
    with Server(conf="send_timeout 120s;\n" + conf) as srv:
        srv.start()
        with srv.conn(rcvbuf=8192) as c:
            c.send(build_request("GET", "/big.bin") * 3)
            time.sleep(0.5)
            t0 = time.monotonic()
            srv.signal(signal.SIGTERM)
            try:
                srv.proc.wait(bound + 10)
            except orcdtest.subprocess.TimeoutExpired:
                pass
            took = time.monotonic() - t0
        check(bound - 1 <= took <= bound + 4, "orcd stopped %.1fs after "
              "SIGTERM (the bound is %g s)" % (took, bound))
        check(re.search(r"connections still busy after %s;" % said,
                        srv.stderr_text()),
              "the cut not said: %r" % srv.stderr_text())
        srv.stop()


@orcdtest.case
def sigterm_cuts_a_stalled_reader_at_the_drain_bound():
    # orcd.8: a stop waits at most worker_shutdown_timeout (10 s unless
    # set) for responses in flight, then cuts them.
    stalled_reader_cut_at("", 10, "10s")


@orcdtest.case
def worker_shutdown_timeout_sets_the_drain_bound():
    # orcd.conf.5: worker_shutdown_timeout, as nginx's; 0 cuts at once.
    stalled_reader_cut_at("worker_shutdown_timeout 2500ms;\n", 2.5,
                          "2500ms")
    stalled_reader_cut_at("worker_shutdown_timeout 0;\n", 0, "0s")
    # With nothing to cut there is nothing to say (direct once warned
    # "0 connections still busy after 0s" at every stop).
    with Server(conf="worker_shutdown_timeout 0;\n") as srv:
        srv.start()
        srv.signal(signal.SIGTERM)
        eq(srv.proc.wait(10), 0, "exit status")
        check("still busy" not in srv.stderr_text(),
              "an idle stop warned: %r" % srv.stderr_text())
        srv.stop()


@orcdtest.case(engines=("direct",))
def a_ring_refused_for_locked_memory_names_the_limit():
    # Recent kernels count each ring against RLIMIT_MEMLOCK for a process
    # without CAP_IPC_LOCK: at 64 KiB a second worker's ring fails with a
    # bare ENOMEM, which once named nothing.
    user = orcdtest.unprivileged_conf()
    if not user:
        raise orcdtest.Skip("needs root, to drop CAP_IPC_LOCK with user")
    with Server(conf=user + "threads 8;\n") as srv:
        for d in (srv.tmp, srv.root):
            os.chmod(d, 0o755)  # nobody must reach the root
        srv.preexec = lambda: resource.setrlimit(resource.RLIMIT_MEMLOCK,
                                                 (65536, 65536))
        srv.launch()
        wait_until(lambda: srv.proc.poll() is not None or
                   "serving " in srv.stderr_text(), 15,
                   "orcd to serve or to fail")
        err = srv.stderr_text()
        if "io_uring_queue_init" not in err:
            srv.stop()
            raise orcdtest.Skip("this kernel does not count rings against "
                                "RLIMIT_MEMLOCK")
        srv.finish(expect_rc=1)
        check("Cannot allocate memory (RLIMIT_MEMLOCK is 64 KiB" in err,
              "the limit not named: %r" % err)


@orcdtest.case(engines=("epoll",))
def engine_epoll_runs_on_epoll_whatever_libev_flags_says():
    """libev takes LIBEV_FLAGS from the environment in place of the flags
    it is given: with LIBEV_FLAGS=2 the engine named epoll ran on
    poll(2). orcd asks libev to ignore the variable."""
    with Server() as srv:
        if srv.forwarded:
            raise orcdtest.Skip("orcd runs elsewhere: only ORCD_ variables "
                                "reach it")
        srv.env["LIBEV_FLAGS"] = "2"  # EVBACKEND_POLL
        srv.start()
        eq(srv.get("/hello.txt").status, 200, "served")
        polls = [fd for fd, link in srv.fd_links().items()
                 if link == "anon_inode:[eventpoll]"]
        eq(len(polls), 1, "epoll instances (one worker)")
        srv.stop()


@orcdtest.case
def sigquit_stops_gracefully_usr2_and_winch_are_ignored():
    # nginx's signals, as its users send them: QUIT is its graceful stop;
    # USR2 (binary upgrade) and WINCH (stop the worker processes) have no
    # counterpart here, and their default actions would end orcd at once.
    with Server() as srv:
        srv.start()
        for sig in (signal.SIGUSR2, signal.SIGWINCH):
            srv.signal(sig)
            wait_until(lambda: "%s ignored" % sig.name in srv.stderr_text(),
                       5, "%s said" % sig.name)
            eq(srv.get("/hello.txt").body, HELLO, "served after " + sig.name)
        c = srv.conn(rcvbuf=16384)
        c.send(build_request("GET", "/big.bin", {"Connection": "close"}))
        r = c.read_response(head_request=True)
        eq(r.status, 200, "the download's status")
        srv.signal(signal.SIGQUIT)
        wait_until(lambda: "stopping: draining" in srv.stderr_text(), 5,
                   "the drain to begin")
        got = c.read_exact(int(r.header("content-length")))
        eq(len(got), os.path.getsize(srv.path("big.bin")),
           "the download, whole")
        c.close()
        srv.finish(10)


@orcdtest.case
def sigterm_stops_accepting_and_closes_idle():
    # While orcd drains (a download its client does not read holds it),
    # it closes idle connections and accepts no new one; once the
    # download is taken, it exits and refuses connections.
    with Server() as srv:
        srv.start()
        slow = srv.conn(rcvbuf=16384)
        slow.send(build_request("GET", "/big.bin", {"Connection": "close"}))
        r = slow.read_response(head_request=True)
        eq(r.status, 200, "the download's status")
        idle = srv.conn()
        idle.send(build_request("GET", "/hello.txt"))
        eq(idle.read_response().status, 200, "keep-alive request")
        t0 = time.monotonic()
        srv.signal(signal.SIGTERM)
        check(idle.closed_by_peer(10), "idle keep-alive connection not "
              "closed on SIGTERM")
        idle.close()
        # The idle close says the stop has begun: from here on nothing
        # is accepted, although the download still holds orcd.
        orcdtest.check_not_accepting(srv, "after SIGTERM")
        try:
            slow.read_exact(int(r.header("content-length")))
        except orcdtest.TestFailure as e:
            raise orcdtest.TestFailure("download cut by SIGTERM: %s" % e)
        check(slow.closed_by_peer(), "connection not closed after draining")
        slow.close()
        srv.finish(10)
        check(time.monotonic() - t0 < 10, "SIGTERM took too long")
        try:
            s = socket.create_connection(srv.addr, timeout=1)
            if srv.forwarded:
                # The forwarder accepts for the guest; with no listener
                # there, it closes without an answer.
                with s:
                    s.settimeout(10)
                    s.sendall(build_request("GET", "/hello.txt"))
                    check(s.recv(1) == b"", "answered after exit")
                return
            s.close()
            raise orcdtest.TestFailure("still accepting after exit")
        except OSError:
            pass


@orcdtest.case
def sighup_reload():
    with Server() as srv:
        srv.start()
        eq(srv.get("/hello.txt").body, HELLO, "first root")
        second = os.path.join(srv.tmp, "second")
        os.makedirs(second)
        with open(os.path.join(second, "hello.txt"), "wb") as f:
            f.write(b"second root\n")
        set_conf(srv, base_conf(srv, second))
        srv.signal(signal.SIGHUP)
        try:
            wait_until(lambda: srv.get("/hello.txt").body == b"second root\n",
                       10, "the reloaded root to be served")
        except orcdtest.TestFailure as e:
            raise orcdtest.TestFailure("%s; orcd: %s" % (
                e, srv.stderr_text()[-800:]))
        # A broken config: logged, and the running one kept.
        set_conf(srv, base_conf(srv, second) + "bogus_directive 1;\n")
        srv.signal(signal.SIGHUP)
        where = re.escape(srv.conf_path) + r":\d+:"
        wait_until(lambda: re.search(where, srv.stderr_text()), 10,
                   "the reload error (FILE:LINE:) in stderr")
        line = next(ln for ln in srv.stderr_text().splitlines()
                    if re.search(where, ln))
        check(re.match(r"^<[0-3]>", line),
              "reload error without a syslog error prefix: %r" % line)
        check(srv.proc.poll() is None, "orcd died on a broken reload")
        for _ in range(3):
            r = srv.get("/hello.txt")
            eq(r.body, b"second root\n", "old config after a bad reload")
        # Reload still works after a failed one.
        set_conf(srv, base_conf(srv))
        srv.signal(signal.SIGHUP)
        wait_until(lambda: srv.get("/hello.txt").body == HELLO, 10,
                   "the first root again")
        srv.assert_fds_back()
        srv.stop()


@orcdtest.case
def signals_while_starting_wait_for_the_server():
    """A SIGHUP or SIGUSR1 (a reload, a log rotation) that arrives while
    orcd still loads its configuration is handled once it serves, not by
    the default action, which killed it (logrotate and scripts signal
    whatever runs). ORCD_TEST_START_PAUSE_MS holds orcd in that stretch."""
    with Server() as srv:
        if srv.forwarded:
            raise orcdtest.Skip("orcd runs elsewhere: signalled by the "
                                "harness, not from a thread")
        srv.env["ORCD_TEST_START_PAUSE_MS"] = "1500"
        sent = []

        def signal_early():
            wait_until(lambda: srv.proc is not None, 10, "orcd to exist")
            time.sleep(0.7)
            for sig in (signal.SIGHUP, signal.SIGUSR1):
                srv.proc.send_signal(sig)
            sent.append(srv.proc.poll())
        t = threading.Thread(target=signal_early)
        t.start()
        try:
            srv.start()
        finally:
            t.join()
        eq(sent, [None], "orcd running when it was signalled")
        wait_until(lambda: "configuration reloaded" in srv.stderr_text(),
                   10, "the early SIGHUP to reload")
        err = srv.stderr_text()
        check(err.index("serving ") < err.index("configuration reloaded"),
              "the reload came after orcd served:\n" + err)
        eq(srv.get("/hello.txt").status, 200, "served")
        srv.stop()


SERVED = "orcd: serving "


def launch_held(srv, knob=None, ms=0):
    """Run orcd, with the test pause `knob` (if any) holding its start-up
    for ms milliseconds, not waiting for it to serve; here only, as the
    caller signals it."""
    if srv.forwarded:
        raise orcdtest.Skip("orcd runs elsewhere: signalled by the "
                            "harness, not from a thread")
    if knob:
        srv.env[knob] = str(ms)
    srv.launch()


def sigterm_stops_once_serving(srv):
    """SIGTERM an orcd that does not serve yet; it must serve, then stop.
    Returns its log."""
    eq(srv.proc.poll(), None, "orcd running when it was signalled")
    srv.proc.send_signal(signal.SIGTERM)
    srv.finish(30)
    err = srv.stderr_text()
    check(SERVED in err and "stopping" in err and
          err.index(SERVED) < err.index("stopping"),
          "orcd served, then stopped:\n" + err)
    return err


@orcdtest.case
def sigterm_while_starting_stops_once_serving():
    """orcd.8: a signal that arrives while orcd starts takes effect once it
    serves. A SIGTERM then stops a server that said "serving" (and sent
    READY=1 under systemd), not one that never did."""
    with Server() as srv:
        launch_held(srv, "ORCD_TEST_START_PAUSE_MS", 1000)
        time.sleep(0.5)
        sigterm_stops_once_serving(srv)


@orcdtest.case
def a_signal_just_after_serving_takes_effect_at_once():
    """The main loop's turn that found orcd serving polled without the
    signalfd, and for a second: a SIGTERM sent as orcd said "serving"
    waited that long (a stop then found responses it would have cut
    short already done)."""
    with Server() as srv:
        launch_held(srv)
        wait_until(lambda: SERVED in srv.stderr_text(), 15, "serving")
        t0 = time.monotonic()
        srv.proc.send_signal(signal.SIGTERM)
        wait_until(lambda: "stopping" in srv.stderr_text(), 10, "the stop")
        took = time.monotonic() - t0
        srv.finish(30)
        check(took < 0.6, "the SIGTERM took effect %.2fs after it was sent"
              % took)


@orcdtest.case
def a_worker_slow_to_start_is_named():
    """orcd serves, and takes signals, once every worker's loop has turned.
    A start-up held by a worker must say which one after 5 s instead of
    hanging silently; ORCD_TEST_WORKER_PAUSE_MS holds each worker before
    its first turn."""
    with Server() as srv:
        launch_held(srv, "ORCD_TEST_WORKER_PAUSE_MS", 7000)
        warning = "worker 0 has not begun serving after 5 s"
        wait_until(lambda: warning in srv.stderr_text(), 10,
                   "the warning naming the held worker")
        err = srv.stderr_text()
        check(SERVED not in err, "warned only while not serving:\n" + err)
        err = sigterm_stops_once_serving(srv)
        check(err.count(warning) == 1 and
              err.index(warning) < err.index(SERVED),
              "warned once, before serving:\n" + err)


@orcdtest.case
def test_hooks_in_the_environment_are_named():
    """orcd.8 ENVIRONMENT: ORCD_TEST_* and ORCD_URING_* change what orcd
    does; one left in a service's environment is named at start-up."""
    with Server() as srv:
        srv.env["ORCD_TEST_REFRESH_PAUSE_MS"] = "1"
        srv.start()
        check("ORCD_TEST_REFRESH_PAUSE_MS is set: a hook for orcd's tests"
              in srv.stderr_text(), "the hook not named:\n" +
              srv.stderr_text())
        srv.stop()


@orcdtest.case
def sighup_keeps_connections():
    # A kept-alive connection survives a reload and is served after it.
    with Server() as srv:
        srv.start()
        with srv.conn() as c:
            c.send(build_request("GET", "/hello.txt"))
            eq(c.read_response().body, HELLO, "before reload")
            n = srv.stderr_text().count("reload")
            srv.signal(signal.SIGHUP)
            wait_until(lambda: srv.stderr_text().count("reload") > n, 10,
                       "the reload to be logged")
            c.send(build_request("GET", "/hello.txt", {"Connection":
                                                       "close"}))
            r = c.read_response()
            check(r is not None and r.body == HELLO,
                  "kept-alive connection after reload: %r" % r)
        srv.stop()


@orcdtest.case
def sighup_during_download():
    # A response in flight finishes from the file it started on, even
    # when the reload swaps the root away (and frees the old config).
    with Server() as srv:
        srv.start()
        with open(srv.path("big.bin"), "rb") as f:
            big = f.read()
        second = os.path.join(srv.tmp, "second")
        os.makedirs(second)
        with open(os.path.join(second, "big.bin"), "wb") as f:
            f.write(b"other" * 1000)
        c = srv.conn(rcvbuf=16384)
        c.send(build_request("GET", "/big.bin"))
        r = c.read_response(head_request=True)
        eq(r.header("content-length"), str(len(big)), "Content-Length")
        got = c.read_exact(65536)
        set_conf(srv, base_conf(srv, second))
        n = srv.stderr_text().count("reload")
        srv.signal(signal.SIGHUP)
        wait_until(lambda: srv.stderr_text().count("reload") > n, 10,
                   "the reload to be logged")
        got += c.read_exact(len(big) - len(got))
        check(got == big, "body changed by a reload mid-response")
        # The same connection's next request sees the new root.
        c.send(build_request("GET", "/big.bin", {"Connection": "close"}))
        eq(c.read_response().body, b"other" * 1000, "after the reload")
        c.close()
        srv.assert_fds_back()
        srv.stop()


@orcdtest.case
def reloads_do_not_leak():
    with Server() as srv:
        srv.start()
        base = srv.fd_count()
        for i in range(20):
            n = srv.stderr_text().count("reload")
            srv.signal(signal.SIGHUP)
            wait_until(lambda: srv.stderr_text().count("reload") > n, 10,
                       "reload %d to be logged" % i)
            eq(srv.get("/hello.txt").body, HELLO, "after reload %d" % i)
        wait_until(lambda: srv.fd_count() == base, 10,
                   "fds after 20 reloads to return to %d (now %d)"
                   % (base, srv.fd_count()))
        srv.stop()


@orcdtest.case
def four_workers_serve_and_all_reload():
    # Every worker takes the new config: after the reload no new
    # connection, whichever worker accepts it, sees the old root.
    with Server(conf="threads 4;\n") as srv:
        srv.start()
        errors = []

        def fetch(want, i):
            try:
                r = srv.get("/hello.txt")
                if r.body != want:
                    errors.append("%d: %r" % (i, r.body))
            except Exception as e:
                errors.append("%d: %s" % (i, e))

        def burst(want):
            ts = [threading.Thread(target=fetch, args=(want, i))
                  for i in range(40)]
            for t in ts:
                t.start()
            for t in ts:
                t.join(30)

        burst(HELLO)
        check(not errors, "4 workers: %s" % errors[:3])
        second = os.path.join(srv.tmp, "second")
        os.makedirs(second)
        with open(os.path.join(second, "hello.txt"), "wb") as f:
            f.write(b"second root\n")
        set_conf(srv, base_conf(srv, second).replace("threads 1;",
                                                     "threads 4;"))
        n = srv.stderr_text().count("reload")
        srv.signal(signal.SIGHUP)
        wait_until(lambda: srv.stderr_text().count("reload") > n, 10,
                   "the reload to be logged")
        # Workers refresh when woken; give them a moment by polling.
        wait_until(lambda: srv.get("/hello.txt").body == b"second root\n",
                   10, "the new root")
        burst(b"second root\n")
        check(not errors, "after reload with 4 workers: %s" % errors[:3])
        srv.assert_fds_back()
        srv.stop()


@orcdtest.case
def engine_auto_serves():
    with Server(engine="auto") as srv:
        srv.start()
        eq(srv.get("/hello.txt").body, HELLO, "engine auto")
        srv.assert_fds_back()
        srv.stop()


# ---- access log ----

def log_lines(srv):
    try:
        with open(srv.access_log, "rb") as f:
            return f.read().decode("utf-8", "replace").splitlines()
    except FileNotFoundError:
        return []


def case_lines(srv):
    """The lines of a case's requests: without the start-up probe's
    (HEAD /), which a worker may write after the case's first ones, as
    each buffers its lines for a moment."""
    return [ln for ln in log_lines(srv) if '"HEAD / HTTP/1.1"' not in ln]


@orcdtest.case
def access_log_combined():
    with Server() as srv:
        srv.start()
        srv.get("/hello.txt", {"User-Agent": "orcd-e2e/1.0",
                               "Referer": "http://example.test/ref"})
        srv.get("/hello.txt", method="HEAD")
        srv.get("/missing.txt")
        srv.get("/data.bin", {"Range": "bytes=0-9"})
        srv.get("/hello.txt", {"User-Agent": 'evil" 200 999 "x'})
        srv.exchange(b"GARBAGE\r\n\r\n")
        # A backslash at a field's end would turn the closing quote into
        # an escaped one for a log reader: written as \x5C.
        srv.get("/hello.txt", {"User-Agent": "back\\slash\\"})
        want = 7
        wait_until(lambda: len(case_lines(srv)) >= want, 10,
                   "%d access log lines" % want)
        lines = case_lines(srv)
        eq(len(lines), want, "access log lines: %r" % lines)
        parsed = []
        for ln in lines:
            m = COMBINED.match(ln)
            check(m, "not combined log format: %r" % ln)
            parsed.append(m.groups())
        host, ident, user, ts, req, status, size, ref, ua = parsed[0]
        eq(host, srv.client_addr, "client address")
        eq((ident, user), ("-", "-"), "ident and user")
        off = (int(ts[-4:-2]) * 3600 + int(ts[-2:]) * 60) \
            * (-1 if ts[-5] == "-" else 1)
        t = calendar.timegm(time.strptime(ts[:20], "%d/%b/%Y:%H:%M:%S")) \
            - off
        check(abs(t - time.time()) < 120, "timestamp %r is not now" % ts)
        eq((req, status, size), ("GET /hello.txt HTTP/1.1", "200", "13"),
           "GET line")
        eq((ref, ua), ("http://example.test/ref", "orcd-e2e/1.0"),
           "referer and agent")
        eq(parsed[1][4:6], ("HEAD /hello.txt HTTP/1.1", "200"), "HEAD line")
        check(parsed[1][6] in ("0", "-"), "HEAD bytes %r" % parsed[1][6])
        eq(parsed[2][4:6], ("GET /missing.txt HTTP/1.1", "404"), "404 line")
        eq(parsed[3][4:7], ("GET /data.bin HTTP/1.1", "206", "10"),
           "206 line")
        eq(parsed[4][5], "200", "escaped agent line status")
        check(parsed[4][8] != "evil" and "evil" in parsed[4][8],
              "agent with a quote not escaped: %r" % lines[4])
        eq(parsed[5][5], "400", "garbage request line status")
        eq(parsed[6][8], "back\\x5Cslash\\x5C", "agent with backslashes")
        srv.stop()


@orcdtest.case
def access_log_names_the_bad_request():
    # A request refused for its headers is logged with its client and
    # request line, so the operator can see who sent what.
    with Server() as srv:
        srv.start()
        srv.exchange(b"GET /no-host.txt HTTP/1.1\r\n\r\n")
        srv.exchange(b"GET /" + b"L" * 9000 + b" HTTP/1.1\r\nHost: t\r\n\r\n")
        # Refused before the line ended (at the method's first bad byte):
        # logged as far as it was read, as nginx logs a TLS hello.
        srv.exchange(b"\x16\x03\x01\x00\xa5\x01\x00")
        srv.exchange(b"G\x7fET / HTTP/1.1\r\nHost: t\r\n\r\n")
        wait_until(lambda: len(case_lines(srv)) >= 4, 10,
                   "four access log lines")
        lines = case_lines(srv)
        m = COMBINED.match(lines[0])
        check(m, "not combined: %r" % lines[0])
        eq((m.group(1), m.group(5), m.group(6)),
           (srv.client_addr, "GET /no-host.txt HTTP/1.1", "400"),
           "line of a request without Host")
        m = COMBINED.match(lines[1])
        check(m and m.group(6) == "414", "414 line: %r" % lines[1][:200])
        check(m.group(5).startswith("GET /LLLL"),
              "414 request: %r" % m.group(5)[:40])
        for ln, want in zip(lines[2:], ("\\x16", "G\\x7F")):
            m = COMBINED.match(ln)
            eq((m.group(5), m.group(6)) if m else ln, (want, "400"),
               "request refused at its method")
        srv.stop()


@orcdtest.case
def access_log_marks_a_cut_field():
    # A log line holds 4 KiB: a request line or User-Agent longer than
    # its share is cut, and ends in "\\..." (which escaping never
    # writes), so the cut is not taken for the whole field.
    with Server() as srv:
        srv.start()
        path = "/" + "p" * 3500
        agent = "a" * 5000
        r, _ = srv.exchange(build_request("GET", path, {
            "User-Agent": agent, "Referer": "http://r/" + "r" * 900,
            "Connection": "close"}))
        eq(r.status, 404, "the long path's status")
        r, _ = srv.exchange(build_request("GET", "/hello.txt", {
            "User-Agent": "short", "Connection": "close"}))
        eq(r.status, 200, "the short request's status")
        wait_until(lambda: len(case_lines(srv)) >= 2, 10,
                   "two access log lines")
        long_line, short_line = case_lines(srv)[:2]
        check(len(long_line) < 4096, "a line of %d bytes" % len(long_line))
        m = COMBINED.match(long_line)
        check(m, "not combined: %r" % long_line[:200])
        for what, field, whole in (("request", m.group(5),
                                    "GET %s HTTP/1.1" % path),
                                   ("referer", m.group(8), None),
                                   ("user agent", m.group(9), agent)):
            check(field.endswith("\\..."), "the cut %s does not end in "
                  "\\...: %r" % (what, field[-40:]))
            check(whole is None or whole.startswith(field[:-4]),
                  "the cut %s is not the field's start" % what)
        m = COMBINED.match(short_line)
        check(m, "not combined: %r" % short_line)
        eq((m.group(5), m.group(9)), ("GET /hello.txt HTTP/1.1", "short"),
           "a whole request line and user agent")
        srv.stop()


@orcdtest.case
def access_log_stdout_and_off_by_default():
    with Server() as srv:
        conf = base_conf(srv).replace("access_log %s;\n" % srv.access_log,
                                      "")
        set_conf(srv, conf + "access_log -;\n")
        srv.start()
        srv.get("/hello.txt", {"User-Agent": "to-stdout"})
        wait_until(lambda: "to-stdout" in srv.stdout_text(), 10,
                   "the access log line on stdout")
        line = [ln for ln in srv.stdout_text().splitlines()
                if "to-stdout" in ln][0]
        check(COMBINED.match(line), "stdout line not combined: %r" % line)
        srv.stop()
    with Server() as srv:
        set_conf(srv, base_conf(srv).replace(
            "access_log %s;\n" % srv.access_log, ""))
        srv.start()
        eq(srv.get("/hello.txt").status, 200, "status")
        srv.stop()
        check(not os.path.exists(srv.access_log), "access log file written")
        check("hello.txt" not in srv.stdout_text(),
              "access log on stdout without access_log")


@orcdtest.case
def access_log_reopened_on_sigusr1():
    # logrotate: rename the file, SIGUSR1, new lines go to a new file.
    with Server() as srv:
        srv.start()
        srv.get("/hello.txt", {"User-Agent": "before-rotate"})
        wait_until(lambda: any("before-rotate" in ln
                               for ln in log_lines(srv)), 10, "first line")
        srv.rename(srv.access_log, srv.access_log + ".1")
        srv.signal(signal.SIGUSR1)
        wait_until(lambda: os.path.exists(srv.access_log), 10,
                   "the access log to be reopened")
        srv.get("/hello.txt", {"User-Agent": "after-rotate"})
        wait_until(lambda: any("after-rotate" in ln
                               for ln in log_lines(srv)), 10,
                   "a line in the new file")
        with open(srv.access_log + ".1") as f:
            check("after-rotate" not in f.read(), "written to the old file")
        srv.stop()


def read_to_close(c):
    """Everything the server sends until it closes."""
    data = b""
    while True:
        chunk = c.sock.recv(65536)
        if not chunk:
            return data
        data += chunk


@orcdtest.case
def access_log_on_closed_stdout_reaches_no_client():
    # Started with fd 1 closed, the server's next descriptors would take
    # it: "access_log -" would then write into a root fd, and after a
    # reload into a client's socket. /dev/null holds fd 1 instead.
    with Server() as srv:
        conf = base_conf(srv).replace("access_log %s;\n" % srv.access_log,
                                      "access_log -;\n")
        if srv.forwarded:
            raise orcdtest.Skip("orcd runs elsewhere: its fds are not ours")
        set_conf(srv, conf)
        srv.preexec = lambda: os.close(1)
        srv.start()
        eq(os.readlink("/proc/%d/fd/1" % srv.proc.pid), "/dev/null",
           "what holds fd 1")
        n = srv.stderr_text().count("configuration reloaded")
        set_conf(srv, conf.replace("threads 1;", "threads 2;"))
        srv.signal(signal.SIGHUP)
        wait_until(lambda: srv.stderr_text().count("configuration reloaded")
                   > n, 10, "the reload")
        for i in range(8):
            with srv.conn() as c:
                c.send(build_request("GET", "/hello.txt",
                                     {"Connection": "close",
                                      "User-Agent": "agent-%d" % i}))
                data = read_to_close(c)
            check(data.endswith(b"\r\n\r\n" + HELLO) and b"agent-" not in data,
                  "response %d carries more than its body: %r" % (i, data))
        eq(os.readlink("/proc/%d/fd/1" % srv.proc.pid), "/dev/null",
           "what holds fd 1 after the reload")
        srv.stop()


@orcdtest.case
def access_log_write_failure_is_said_and_tears_no_line():
    # At RLIMIT_FSIZE a write stops inside a line (EFBIG), as on a full
    # disk: the loss is said on stderr, the server lives on (SIGXFSZ),
    # and once writes land again the first begins on a line of its own.
    import resource
    limit = 3000
    with Server() as srv:
        if srv.forwarded:
            raise orcdtest.Skip("orcd runs elsewhere: its limit is not ours")
        srv.preexec = lambda: resource.setrlimit(resource.RLIMIT_FSIZE,
                                                 (limit, resource.RLIM_INFINITY))
        srv.start()
        i = 0
        while "write failed" not in srv.stderr_text():
            check(i < 200, "no write failure said after %d requests" % i)
            eq(srv.get("/hello.txt", {"User-Agent": "before-%d" % i}).status,
               200, "status while the log is full")
            i += 1
            time.sleep(0.05)
        m = re.search(r"access log (\S+): write failed: File too large; "
                      r"(\d+) lines lost \((\d+) in all\)", srv.stderr_text())
        check(m, "the failure, its cause and the loss: %r"
              % srv.stderr_text())
        eq(m.group(1), srv.access_log, "the log named")
        check(int(m.group(2)) >= 1, "lines lost")
        # More lines lost while the limit holds, in later batches (a
        # worker writes its lines within 1.5 s): the rate limit keeps
        # them from the log for a minute, but they are said by the exit.
        for j in range(10):
            eq(srv.get("/hello.txt", {"User-Agent": "during-%d" % j}).status,
               200, "status while the log is full")
            time.sleep(0.15)
        time.sleep(2)
        eq(os.path.getsize(srv.access_log), limit, "the log's size")
        with open(srv.access_log, "rb") as f:
            # Torn unless the limit happens to fall at a line's end.
            torn = not f.read().endswith(b"\n")
        resource.prlimit(srv.proc.pid, resource.RLIMIT_FSIZE,
                         (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
        for j in range(3):
            srv.get("/hello.txt", {"User-Agent": "after-%d" % j})
        wait_until(lambda: sum("after-" in ln for ln in log_lines(srv)) >= 3,
                   10, "the lines after the limit")
        lines = log_lines(srv)
        bad = [ln for ln in lines if not COMBINED.match(ln)]
        # A torn line glued to the next would hold two of these.
        eq(len(bad), int(torn), "lines that are not whole: %r" % bad)
        check(all(ln.count(" - - [") <= 1 for ln in bad),
              "the torn line stands alone: %r" % bad)
        srv.stop()
        # Every line that never reached the file is counted: the last
        # "in all" is what was sent less the whole lines the file holds.
        ours = re.compile(r'"(before|during|after)-\d+"$')
        landed = sum(1 for ln in log_lines(srv)
                     if COMBINED.match(ln) and ours.search(ln))
        in_all = [int(n) for n in re.findall(r"\((\d+) in all\)",
                                             srv.stderr_text())]
        check(in_all, "no count of lost lines: %r" % srv.stderr_text())
        eq(in_all[-1], i + 10 + 3 - landed,
           "lines lost in all, last said (%r)" % srv.stderr_text())


# ---- resources ----

def answer(r):
    """A response, briefly, for a failure message."""
    if r is None:
        return "closed unanswered"
    return "status %d, %d body bytes" % (r.status, len(r.body or b""))


def client(srv, i, errors, room):
    """One of six kinds of client; whatever goes wrong (an error, a
    missing or wrong answer) lands in errors, never only in the thread.
    room bounds how many connect at once."""
    # Through QEMU's forwarder a connect the host's accept queue dropped
    # is retried with backoff, seconds apart: slow, not wrong.
    timeout = 60 if srv.forwarded else 10
    try:
        kind = i % 6
        with room, srv.conn(timeout) as c:
            if kind == 0:    # keep-alive request, client closes
                c.send(build_request("GET", "/hello.txt"))
                r = c.read_response()
                if r is None or (r.status, r.body) != (200, HELLO):
                    errors.append("%d: %s" % (i, answer(r)))
            elif kind == 1:  # Connection: close, server closes
                c.send(build_request("GET", "/style.css",
                                     {"Connection": "close"}))
                r = c.read_response()
                if r is None or r.status != 200:
                    errors.append("%d: %s" % (i, answer(r)))
                elif not c.closed_by_peer():
                    errors.append("%d: not closed" % i)
            elif kind == 2:  # connect, close at once
                pass
            elif kind == 3:  # partial head, then gone
                c.send(b"GET /hello.txt HTTP/1.1\r\nHo")
            elif kind == 4:  # walk away in the middle of a big body
                c.send(build_request("GET", "/big.bin"))
                c.read_some(4096)
            else:            # a request error
                c.send(b"BAD REQUEST LINE\r\n\r\n")
                c.read_some(4096)
    except Exception as e:  # noqa: BLE001 - reported by the case
        errors.append("%d: %r" % (i, e))


@orcdtest.case
def fds_back_after_100_parallel_clients():
    with Server(metrics=True) as srv:
        srv.start()
        base = srv.fd_baseline
        # In the guest, no more connects at once than the forwarder's
        # accept queue holds (see orcdguest); loopback takes all 100.
        room = threading.BoundedSemaphore(srv.connect_burst or 100)
        for round_ in range(2):
            errors = []
            accepted = srv.metrics()["orcd_connections_accepted_total"]
            threads = [threading.Thread(target=client,
                                        args=(srv, i, errors, room),
                                        daemon=True)
                       for i in range(100)]
            for t in threads:
                t.start()
            deadline = time.monotonic() + 180
            for t in threads:
                t.join(max(0, deadline - time.monotonic()))
            running = sum(t.is_alive() for t in threads)
            if errors or running:
                # Whose they are: clients orcd never accepted waited in a
                # forwarder; accepted ones it left unanswered are its own.
                m = srv.metrics()
                raise orcdtest.TestFailure(
                    "%d client errors: %s; %d clients still running; orcd "
                    "accepted %d of the round's 100 connections, %d open "
                    "now" % (len(errors), errors[:5], running,
                             m["orcd_connections_accepted_total"] - accepted,
                             m["orcd_connections_open"]))
            srv.assert_fds_back()
            eq(srv.fd_count(), base, "round %d fds" % round_)
        eq(srv.get("/hello.txt").body, HELLO, "still serving")
        srv.stop()


if __name__ == "__main__":
    sys.exit(orcdtest.run_serverless())
