#!/usr/bin/env python3
"""What a SIGHUP reload applies and what it cannot: one warning line per
directive that only a restart applies and that the file sets to other than
what runs (and none for the others), compared with what runs at each
reload, and a lowered max_header_bytes enforced with a 431 even though the
io_uring engines' provided buffers keep the size they started with. Each
case starts its own orcd."""

import os
import re
import signal
import socket
import sys
import time

import orcdtest
from orcdtest import build_request, check, eq, wait_until

HELLO = b"hello, world\n"
Server = orcdtest.Server


def reload(srv, extra):
    """Rewrite the config with `extra` and SIGHUP; wait for the reload."""
    n = srv.stderr_text().count("configuration reloaded")
    srv.write_conf(extra)  # complete before the signal is sent
    srv.signal(signal.SIGHUP)
    wait_until(lambda: srv.stderr_text().count("configuration reloaded")
               > n, 10, "the reload to be logged")


def warnings(srv):
    return re.findall(r"reload: (\S+) (.*) -> (.*) needs a restart; "
                      r"keeping (.*)", srv.stderr_text())


@orcdtest.case
def restart_only_directives_warn_once_each():
    start = "slots 256;\naccepts 4;\nmetrics_path /m;\n"
    with Server(conf=start) as srv:
        srv.start()
        other = "epoll" if srv.engine != "epoll" else "direct"
        changed = {
            "slots": ("256", "512"),
            "accepts": ("4", "8"),
            "threads": ("1", "2"),
            "engine": (srv.engine, other),
            "worker_cpu_affinity": ("off", "auto"),
            "metrics": ("off", "on"),
            # (In the QEMU guest the file's addresses are widened.)
            "metrics_listen": ("127.0.0.1:9180",
                               srv.adapt_conf("127.0.0.1:9181")),
            "user": ("(unset)", "nobody"),
            "group": ("(unset)", "nogroup"),
        }
        # write_conf puts threads, engine and access_log first; the last
        # value of a directive wins.
        extra = "".join("%s %s;\n" % (k, v[1]) for k, v in changed.items())
        # Directives a reload applies: no warning for them.
        extra += "max_connections 100;\nsend_timeout 5s;\nmetrics_path /n;\n"
        extra += "access_log %s;\n" % (srv.access_log + ".2")
        changed["access_log"] = (srv.access_log, srv.access_log + ".2")
        reload(srv, extra)
        got = {w[0]: (w[1], w[2]) for w in warnings(srv)}
        eq(len(warnings(srv)), len(changed),
           "one line per changed directive: %r" % warnings(srv))
        eq(got, changed, "the warnings")
        for w in warnings(srv):
            eq(w[3], w[1], "keeping the running value")
        eq(srv.get("/hello.txt").body, HELLO, "served after the reload")
        # The same file again: it still asks for what does not run, and a
        # reload compares with what runs, so it says the same again.
        first = warnings(srv)
        reload(srv, extra)
        eq(warnings(srv), first + first, "the second reload's lines")
        srv.stop()


@orcdtest.case
def each_reload_compares_with_what_runs():
    # What runs is what a reload compares with, not the file it read
    # last: 1 -> 2 is refused, back to 1 is nothing to say, 2 again is
    # 1 -> 2 again (once this said "2 -> 1 ... keeping 2" with 1 running).
    with Server() as srv:
        srv.start()
        refused = ("threads", "1", "2", "1")
        reload(srv, "threads 2;\n")
        eq(warnings(srv), [refused], "threads 1 -> 2")
        reload(srv, "threads 1;\n")
        eq(warnings(srv), [refused], "back to the running 1")
        reload(srv, "threads 2;\n")
        eq(warnings(srv), [refused, refused], "threads 2 again")
        eq(srv.get("/hello.txt").body, HELLO, "served after the reloads")
        srv.assert_fds_back()
        srv.stop()


@orcdtest.case
def threads_0_is_the_count_it_started():
    # `threads 0` runs one worker per allowed CPU; a reload compares that
    # count, as it does an engine auto chose (once the file's 0 was
    # compared as written: "threads 0 -> 2 needs a restart" with 2
    # running, and "2 -> 0" the other way).
    with Server(conf="threads 0;\n") as srv:
        srv.start()
        m = re.search(r"with (\d+) worker\(s\)", srv.stderr_text())
        check(m, "the workers that run: %r" % srv.stderr_text())
        n = m.group(1)
        reload(srv, "threads %s;\n" % n)
        eq(warnings(srv), [], "threads 0 -> the %s it started" % n)
        reload(srv, "threads 0;\n")
        eq(warnings(srv), [], "threads 0 again")
        more = str(int(n) + 1)
        reload(srv, "threads %s;\n" % more)
        eq(warnings(srv), [("threads", n, more, n)], "another count")
        eq(srv.get("/hello.txt").body, HELLO, "served after the reloads")
        srv.stop()


@orcdtest.case
def engine_auto_is_the_engine_it_chose():
    # Started with engine auto, what runs is the engine auto chose: a
    # file that names it, or says auto again, needs no restart (once
    # naming it warned "engine auto -> direct ... keeping auto").
    with Server(engine="auto") as srv:
        srv.start()
        m = re.search(r"serving .* engine (\w+)", srv.stderr_text())
        check(m, "the engine that runs: %r" % srv.stderr_text())
        running = m.group(1)
        other = "epoll" if running != "epoll" else "direct"
        srv.engine = running
        reload(srv, "")
        eq(warnings(srv), [], "naming the running engine")
        srv.engine = "auto"
        reload(srv, "")
        eq(warnings(srv), [], "auto again")
        srv.engine = other
        reload(srv, "")
        eq(warnings(srv), [("engine", running, other, running)],
           "another engine")
        eq(srv.get("/hello.txt").body, HELLO, "served after the reloads")
        srv.stop()


@orcdtest.case(engines=("specific",))
def refused_listen_change_compares_with_what_runs():
    # specific reserves its fd ranges once, for one set of workers, so a
    # reload cannot start workers for new listen addresses: it says so
    # and serves on. Going back to the running address is then nothing
    # to say (once the installed config named the refused address, and
    # that reload warned again).
    with Server() as srv:
        srv.start()
        running = srv.port
        refused = "listen addresses change on restart"
        srv.port = orcdtest.free_port()
        reload(srv, "")
        srv.port = running
        eq(srv.stderr_text().count(refused), 1, "the change refused")
        eq(srv.get("/hello.txt").body, HELLO, "served on the running port")
        reload(srv, "")
        eq(srv.stderr_text().count(refused), 1,
           "lines after going back to the running address")
        srv.port = orcdtest.free_port()
        reload(srv, "")
        srv.port = running
        eq(srv.stderr_text().count(refused), 2,
           "lines after asking for another address again")
        srv.stop()


@orcdtest.case
def lowered_max_header_bytes_answers_431():
    with Server() as srv:
        srv.start()
        # A head of 2000 bytes: under the start-up limit (16k) and the
        # provided-buffer size (4k), over the reloaded limit.
        pad = "x" * 1900
        req = build_request("GET", "/hello.txt", {"X-Pad": pad})
        eq(srv.raw(req).status, 200, "2000-byte head before the reload")
        reload(srv, "max_request_line 512;\nmax_header_bytes 1k;\n")
        for _ in range(3):
            with srv.conn() as c:
                c.send(req)
                r = c.read_response()
                check(r is not None, "connection closed without an answer")
                eq(r.status, 431, "2000-byte head over a 1k limit")
        small = build_request("GET", "/hello.txt", {"X-Pad": "x" * 500})
        eq(srv.raw(small).body, HELLO, "a head under the new limit")
        srv.assert_fds_back()
        srv.stop()


@orcdtest.case(engines=("epoll", "direct"))
def listen_change_frees_the_old_address_at_once():
    # The previous workers drain a slow download, but the address the
    # reload removed is closed as soon as they accept no more: a client
    # there is refused rather than queued where no one accepts, and a
    # reload back to it binds it again. Each listen-changing reload
    # starts workers whose peaks are their own, not the sum of every
    # generation's.
    with Server(metrics=True) as srv:
        if srv.forwarded:
            raise orcdtest.Skip("the guest's forwarded ports are fixed")
        srv.write_file("big.bin", b"b" * (32 << 20))
        srv.start()
        eq(srv.get("/hello.txt").body, HELLO, "served before")
        peaks = ("orcd_chains_in_flight_peak", "orcd_slots_peak")
        first = srv.metrics()
        slow = srv.conn(rcvbuf=4096)
        slow.send(build_request("GET", "/big.bin"))
        check(slow.read_head() is not None, "the download's head")
        old = srv.port
        for round_ in range(4):
            srv.port = orcdtest.free_port() if round_ % 2 == 0 else old
            reload(srv, "")
            srv.addr = ("127.0.0.1", srv.port)
            check("reload failed" not in srv.stderr_text(),
                  "round %d: %s" % (round_, srv.stderr_text()))
            eq(srv.get("/hello.txt").body, HELLO,
               "round %d: served on the new address" % round_)
            if round_ % 2 == 0:
                gone = socket.socket()
                try:
                    gone.settimeout(5)
                    gone.connect(("127.0.0.1", old))
                    gone.sendall(build_request("GET", "/hello.txt"))
                    got = gone.recv(100)
                    check(False, "round %d: the removed address took a "
                          "connection and answered %r" % (round_, got))
                except ConnectionRefusedError:
                    pass
                except socket.timeout:
                    check(False, "round %d: the removed address queued a "
                          "connection no one accepts" % round_)
                finally:
                    gone.close()
        check(slow.read_some(65536), "the download still drains")
        # The draining generation's peaks and the current one's count;
        # the three gone between them do not.
        m = srv.metrics()
        for name in peaks:
            check(m.total(name) <= 2 * first.total(name) + 2,
                  "%s after four reloads: %d, at start %d"
                  % (name, m.total(name), first.total(name)))
        slow.close()
        srv.assert_fds_back()
        srv.stop()


@orcdtest.case
def the_same_listen_addresses_in_another_order_are_no_change():
    # Once compared place by place: swapping two listen lines started new
    # workers, closed idle keep-alive connections and cut downloads at
    # worker_shutdown_timeout.
    second = "listen 127.0.0.1:%d;\n" % orcdtest.free_port()
    with Server(conf=second) as srv:
        if srv.forwarded:
            raise orcdtest.Skip("the guest's forwarded ports are fixed")
        srv.start()
        first = "listen 127.0.0.1:%d;\n" % srv.port
        with srv.conn() as c:
            c.send(build_request("GET", "/hello.txt"))
            eq(c.read_response().body, HELLO, "before")
            srv.write_conf(second)
            with open(srv.conf_path) as f:
                text = f.read()
            check(text.index(first) < text.index(second), text)
            with open(srv.conf_path, "w") as f:
                f.write(second + first + text.replace(first, "")
                        .replace(second, ""))
            n = srv.stderr_text().count("configuration reloaded")
            srv.signal(signal.SIGHUP)
            wait_until(lambda: srv.stderr_text().count(
                "configuration reloaded") > n, 10, "the reload")
            check("new workers" not in srv.stderr_text(),
                  "a listen change: %r" % srv.stderr_text())
            # The idle keep-alive connection was not closed for it.
            c.send(build_request("GET", "/hello.txt",
                                 {"Connection": "close"}))
            r = c.read_response()
            check(r is not None and r.body == HELLO,
                  "the connection after the reload: %r" % r)
        srv.stop()


def other_root(srv):
    """A second document root beside srv's: its hello.txt says so."""
    other = os.path.join(srv.tmp, "other")
    os.makedirs(other)
    with open(os.path.join(other, "hello.txt"), "wb") as f:
        f.write(b"the new root\n")
    return other


@orcdtest.case(engines=("epoll", "direct"))
def new_workers_serve_the_new_configuration_at_once():
    # A reload that changes listen starts workers with the new
    # configuration. They were woken before the main thread published
    # it, and a woken worker's refresh took the one published then (the
    # old) for a newer one: until the main thread's next wake, the new
    # address answered from the old root. ORCD_TEST_RELOAD_PAUSE_MS
    # holds the main thread just after the new workers go.
    with Server() as srv:
        if srv.forwarded:
            raise orcdtest.Skip("the guest's forwarded ports are fixed")
        other = other_root(srv)
        srv.env["ORCD_TEST_RELOAD_PAUSE_MS"] = "3000"
        srv.start()
        eq(srv.get("/hello.txt").body, HELLO, "served before")
        srv.port = orcdtest.free_port()
        srv.write_conf("root %s;\n" % other)
        srv.signal(signal.SIGHUP)
        wait_until(lambda: "the previous ones drain" in srv.stderr_text(),
                   10, "the new workers to take over")
        srv.addr = ("127.0.0.1", srv.port)
        check("configuration reloaded" not in srv.stderr_text(),
              "the reload ended before the request: no window to test")
        eq(srv.get("/hello.txt").body, b"the new root\n",
           "the new address, before the reload ends")
        wait_until(lambda: "configuration reloaded" in srv.stderr_text(),
                   10, "the reload to be logged")
        eq(srv.get("/hello.txt").body, b"the new root\n",
           "the new address, after the reload")
        srv.assert_fds_back()
        srv.stop()


@orcdtest.case
def a_worker_that_cannot_take_the_new_root_tries_again():
    # A worker opens the new root for itself when it takes a reloaded
    # configuration; when it cannot (no fd left: ORCD_TEST_VIEW_FAILS=1
    # fails the first), it serves the previous one. It did so until the
    # next signal, while the reload had said it was done; it now tries
    # again each second.
    with Server() as srv:
        other = other_root(srv)
        srv.env["ORCD_TEST_VIEW_FAILS"] = "1"
        srv.start()
        eq(srv.get("/hello.txt").body, HELLO, "served before")
        reload(srv, "root %s;\n" % other)
        wait_until(lambda: "cannot open the new root" in srv.stderr_text(),
                   10, "the failed refresh to be said")
        wait_until(lambda: srv.get("/hello.txt").body == b"the new root\n",
                   10, "the new root to be served")
        check("serving the current configuration now" in
              srv.stderr_text(), "the recovery was not said")
        srv.assert_fds_back()
        srv.stop()


@orcdtest.case
def the_reload_is_logged_once_every_worker_serves_it():
    # "configuration reloaded" (and READY=1 under systemd) tells a client
    # that what it sends next is served under the new configuration. A
    # worker takes the new one when it handles its wake, and the line
    # came as soon as the workers were woken: a request sent on the word
    # could be served from the old root (a keep-alive request the worker
    # reads in the same turn as its wake, before it). The line now waits
    # for every worker to have taken it. ORCD_TEST_REFRESH_PAUSE_MS holds
    # each worker's refresh for 0.4 s: the line cannot come sooner
    # (before, it came at once), and the reload's wait (2 s) has room
    # for a worker slow to start its refresh.
    with Server(conf="threads 2;\n") as srv:
        other = other_root(srv)
        srv.env["ORCD_TEST_REFRESH_PAUSE_MS"] = "400"
        srv.start()
        eq(srv.get("/hello.txt").body, HELLO, "served before")
        t0 = time.monotonic()
        reload(srv, "threads 2;\nroot %s;\n" % other)
        took = time.monotonic() - t0
        check(took >= 0.35, "the reload was logged %.2fs after the "
              "signal, before the workers' refresh (held 0.4s) took it"
              % took)
        check("has not taken the new configuration" not in
              srv.stderr_text(), "a worker was not waited for: %s"
              % srv.stderr_text())
        # New connections land on either worker.
        for i in range(8):
            eq(srv.get("/hello.txt").body, b"the new root\n",
               "request %d after the reload was logged" % i)
        srv.stop()


@orcdtest.case(engines=("direct",))
def drain_cut_mid_download_closes_the_chains_file():
    # A retired generation's drain is bounded by the
    # worker_shutdown_timeout it served with (not the reload's). When it
    # ran out just as a chunk of a chained download had gone out, the
    # chain's file was never closed: its slot (on specific a real fd) was
    # never given back, nor the chain counted as completed.
    import threading
    with Server(conf="stat_cache 0;\nworker_shutdown_timeout 2s;\n",
                metrics=True) as srv:
        if srv.forwarded:
            raise orcdtest.Skip("the guest's forwarded ports are fixed")
        with open(srv.path("huge.bin"), "wb") as f:
            f.truncate(1 << 40)  # sparse: more than 2 s of downloading
        srv.start()
        done = threading.Event()

        def download(c):
            try:
                while not done.is_set() and c.sock.recv(1 << 20):
                    pass
            except OSError:
                pass

        conns = [srv.conn(timeout=30) for _ in range(3)]
        for c in conns:
            c.send(build_request("GET", "/huge.bin"))
        readers = [threading.Thread(target=download, args=(c,))
                   for c in conns]
        for t in readers:
            t.start()
        try:
            wait_until(lambda: srv.metrics().total(
                "orcd_chains_in_flight") == 3, 10, "three downloads")
            srv.port = orcdtest.free_port()
            reload(srv, "stat_cache 0;\nworker_shutdown_timeout 1h;\n")
            srv.addr = ("127.0.0.1", srv.port)
            wait_until(lambda: "still busy after 2s; cancelling" in
                       srv.stderr_text(), 30, "the drain to run out")
            for t in readers:
                t.join(30)
        finally:
            done.set()
            for c in conns:
                c.close()
        wait_until(lambda: srv.metrics().total("orcd_chains_in_flight")
                   == 0, 10, "no chain in flight")
        m = srv.metrics()
        eq(m.total("orcd_chains_completed_total"),
           m.total("orcd_chains_submitted_total"),
           "chains completed, of those submitted")
        eq(srv.get("/hello.txt").body, HELLO, "served afterwards")
        srv.assert_fds_back()
        srv.stop()


@orcdtest.case(engines=("epoll", "direct"))
def workers_that_cannot_start_leave_the_old_ones_serving():
    # A reload to more listen addresses whose workers cannot start (the
    # fd limit lowered under the running server) fails as a whole: the
    # old workers serve on, and a later reload that can start them
    # works. (On io_uring the old workers were retired first, and the
    # server then stopped: exit 1.)
    import resource
    with Server() as srv:
        if srv.forwarded:
            raise orcdtest.Skip("orcd runs elsewhere: its limit is not ours")
        srv.start()
        pid = srv.proc.pid
        keep = resource.prlimit(pid, resource.RLIMIT_NOFILE)
        added = [orcdtest.free_port(), orcdtest.free_port()]
        extra = "".join("listen 127.0.0.1:%d;\n" % p for p in added)
        for room in range(2, 16):
            # Room for some of what the new workers need, from too
            # little for the added listeners up to enough, one fd more
            # each round: counted from the baseline once the last round's
            # connection and workers are gone, so that no round is
            # skipped (the one where the worker starts, then fails).
            srv.assert_fds_back()
            lim = srv.fd_baseline + room
            resource.prlimit(pid, resource.RLIMIT_NOFILE, (lim, keep[1]))
            n = srv.stderr_text().count("reload failed")
            srv.write_conf(extra)
            srv.signal(signal.SIGHUP)
            wait_until(lambda: srv.stderr_text().count("reload failed") > n
                       or "configuration reloaded" in srv.stderr_text(),
                       15, "the reload's outcome")
            resource.prlimit(pid, resource.RLIMIT_NOFILE, keep)
            check(srv.proc.poll() is None, "room %d: orcd exited: %s"
                  % (room, srv.stderr_text()))
            if "configuration reloaded" in srv.stderr_text():
                break
            eq(srv.get("/hello.txt").body, HELLO,
               "room %d: the old address after the failed reload" % room)
        check("starting workers for the new listen addresses failed" in
              srv.stderr_text(), "no reload failed for its workers: %s"
              % srv.stderr_text())
        reload(srv, extra)
        # One reload changed the addresses; the room sweep reaches a
        # limit where the new worker starts and then fails (its ring or
        # loop), and that worker never served: when it ends, the log
        # does not call it the previous addresses' workers.
        wait_until(lambda: "workers started for the failed reload "
                   "finished" in srv.stderr_text(), 10,
                   "the failed reload's started worker to be reaped")
        wait_until(lambda: "previous listen addresses finished" in
                   srv.stderr_text(), 10, "the replaced workers to finish")
        eq(srv.stderr_text().count("previous listen addresses finished"),
           1, "workers logged as the previous listen addresses'")
        # Each failure names the limit, the epoll engine's event loop's
        # too (it was reported as ENOMEM).
        check("Cannot allocate memory" not in srv.stderr_text(),
              "a failure for want of fds said ENOMEM: %s"
              % srv.stderr_text())
        for port in added:
            with orcdtest.Conn(("127.0.0.1", port)) as c:
                c.send(build_request("GET", "/hello.txt"))
                eq(c.read_response().body, HELLO, "added port %d" % port)
        srv.stop()


if __name__ == "__main__":
    sys.exit(orcdtest.run_serverless())
