#!/usr/bin/env python3
"""Batched waits (batch_wait_us; daemon/wait_batch.h). A busy io_uring
worker asks the kernel for several completions per wait, with a min wait
that bounds the latency this costs (Linux 6.12+). Many clients get every
response whole; a lone client's waits ask for one, however many
connections sit idle; a request among idle connections is not held for
a batch; 0 turns it off; a kernel without the min wait says so once and
waits as before. epoll has no such wait and never counts one."""

import re
import sys
import time

import orcdtest
from orcdtest import Skip, build_request, check, eq

# A worker batches from 16 connections on (two arrivals asked for, at
# WB_CONNS_PER_ARRIVAL = 8 connections each).
N_CONNS = 24
ROUNDS = 5


class Server(orcdtest.Orcd):
    def __init__(self, extra=""):
        # Connects through QEMU's forwarder take a third of a second each:
        # the guest run keeps the first ones open while the rest arrive.
        slow = "idle_timeout 120s;\nheader_timeout 120s;\n" \
            if self.forwarded else ""
        super().__init__(conf=extra + slow, metrics=True)


def with_server(fn, extra=""):
    srv = Server(extra)
    try:
        srv.start()
        fn(srv)
        srv.assert_fds_back()
        srv.stop()
    finally:
        srv.cleanup()


def min_wait_kernel(srv):
    """Whether the kernel orcd runs on has io_uring's min wait (6.12+):
    read where orcd runs (the guest's kernel is not the host's)."""
    rel = srv.proc_text("root/proc/sys/kernel/osrelease").split(".")
    return (int(rel[0]), int(re.match(r"\d+", rel[1]).group())) >= (6, 12)


def open_conns(srv, n):
    conns = []
    step = srv.connect_burst or n
    while len(conns) < n:
        conns += [srv.conn() for _ in range(min(step, n - len(conns)))]
        if srv.connect_burst:
            orcdtest.wait_until(
                lambda: srv.metrics()["orcd_connections_open"] >= len(conns),
                60, "%d connections open" % len(conns))
    orcdtest.wait_until(
        lambda: srv.metrics()["orcd_connections_open"] >= n, 10,
        "%d connections open" % n)
    return conns


def rounds(conns, n):
    """n rounds of a request on every connection at once; every response
    whole."""
    for i in range(n):
        for c in conns:
            c.send(build_request("GET", "/hello.txt"))
        for k, c in enumerate(conns):
            r = c.read_response()
            eq(r.status, 200, "round %d, connection %d" % (i, k))
            eq(r.body, b"hello, world\n", "round %d, connection %d" % (i, k))


def busy(srv):
    """ROUNDS rounds on N_CONNS connections, then close them."""
    conns = open_conns(srv, N_CONNS)
    try:
        rounds(conns, ROUNDS)
    finally:
        for c in conns:
            c.close()


def batched(srv):
    return srv.metrics()["orcd_batched_waits_total"]


def grew(srv, before):
    """Busy rounds made batched waits; where waits cannot batch (a
    kernel before 6.12) the case calling this has nothing to test and
    says so (a SKIP) rather than pass. (epoll never batches: such cases
    are for the io_uring engines only.)"""
    if not min_wait_kernel(srv):
        raise Skip("the kernel orcd runs on has no min wait (6.12+)")
    check(batched(srv) > before, "busy rounds made no batched wait")


NO_MIN_WAIT = "has no min wait for io_uring"


@orcdtest.case
def many_clients_batch_their_waits():
    def body(srv):
        busy(srv)
        n = batched(srv)
        log = srv.stderr_text()
        if srv.engine == "epoll":
            eq(n, 0, "epoll's batched waits")
        elif min_wait_kernel(srv):
            check(n > 0, "%d connections, %d rounds: no wait asked for "
                  "more than one completion" % (N_CONNS, ROUNDS))
            check(NO_MIN_WAIT not in log, "said there is no min wait "
                  "on a 6.12+ kernel")
        else:
            eq(n, 0, "batched waits without the kernel's min wait")
            eq(log.count(NO_MIN_WAIT), 1, "lines saying there is no min "
               "wait (log: %s)" % log[-1000:])
    with_server(body)


@orcdtest.case
def a_lone_client_never_waits_for_a_batch():
    def body(srv):
        with srv.conn() as c:
            for i in range(50):
                c.send(build_request("GET", "/hello.txt"))
                r = c.read_response()
                eq((r.status, r.body), (200, b"hello, world\n"), "request %d" % i)
        eq(batched(srv), 0, "batched waits with one client")
    with_server(body)


@orcdtest.case(engines=("direct", "specific"))
def a_lone_client_among_idle_connections_asks_for_one():
    # One arrival per turn never asks for more, however many connections
    # sit idle: a batched wait here would wait out the min wait on every
    # request (the recv is armed only after the send's CQE is handled).
    # Opening the idle ones may grow the ask for a few turns; it comes
    # back down within a few requests.
    def body(srv):
        conns = open_conns(srv, N_CONNS)
        try:
            rounds(conns, ROUNDS)
            grew(srv, 0)
            before = batched(srv)
            for i in range(50):
                conns[0].send(build_request("GET", "/hello.txt"))
                r = conns[0].read_response()
                eq((r.status, r.body), (200, b"hello, world\n"),
                   "request %d" % i)
            n = batched(srv) - before
        finally:
            for c in conns:
                c.close()
        check(n <= 5, "%d of 50 lone requests among %d connections had a "
              "batched wait" % (n, N_CONNS))
    with_server(body)


@orcdtest.case(engines=("direct", "specific"))
def a_request_among_idle_connections_is_not_held():
    # After a busy round the worker asks for several completions; a lone
    # request then must end the wait at the min wait (100 us), not at the
    # worker's next timer (a second away). Held, each lone request below
    # would take about a second (10 s for 10); they take milliseconds.
    def body(srv):
        conns = open_conns(srv, N_CONNS)
        lone = []
        try:
            rounds(conns, ROUNDS)
            grew(srv, 0)
            for i in range(10):
                rounds(conns, 1)
                t0 = time.monotonic()
                conns[0].send(build_request("GET", "/hello.txt"))
                r = conns[0].read_response()
                lone.append(time.monotonic() - t0)
                eq((r.status, r.body), (200, b"hello, world\n"),
                   "lone request %d" % i)
        finally:
            for c in conns:
                c.close()
        check(sum(lone) < 5, "10 lone requests after busy rounds took "
              "%.1f s (slowest %.2f s): held for a batch"
              % (sum(lone), max(lone)))
    with_server(body)


@orcdtest.case
def zero_turns_batching_off():
    def body(srv):
        busy(srv)
        eq(batched(srv), 0, "batched waits with batch_wait_us 0")
        check(NO_MIN_WAIT not in srv.stderr_text(),
              "said there is no min wait although batching is off")
    with_server(body, "batch_wait_us 0;\n")


if __name__ == "__main__":
    sys.exit(orcdtest.run_serverless())
