#!/usr/bin/env python3
"""`stat_cache 0`: no facts or bodies kept, every body by the engine's cold
path (io_uring: the linked open-read-send-close chain; epoll: the file the
plan opened, by sendfile). Bodies stay exact, changes are seen at once, and
nothing is counted as answered from a cache."""

import sys

import orcdtest
from orcdtest import check, eq


class Server(orcdtest.Orcd):
    def __init__(self):
        super().__init__(conf="stat_cache 0;\n", metrics=True)


def pattern(n, seed):
    return bytes((i * 31 + seed + (i >> 10)) & 0xFF for i in range(n))


@orcdtest.case
def bodies_by_the_cold_path_only(srv):
    files = {"small.bin": pattern(3000, 1), "mid.bin": pattern(40000, 2),
             "large.bin": pattern(3 << 20, 3)}
    for name, data in files.items():
        srv.write_file("nc/" + name, data)
    before = srv.metrics()
    with srv.conn() as c:
        for _ in range(3):
            for name, data in files.items():
                c.send(orcdtest.build_request("GET", "/nc/" + name))
                r = c.read_response()
                eq(r.status, 200, name)
                check(r.body == data, "%s: body differs" % name)
    after = srv.metrics()
    for name in ("orcd_body_cache_hits_total", "orcd_sendfile_bodies_total",
                 'orcd_stat_cache_total{result="hit"}'):
        eq(after[name] - before[name], 0, name + " with stat_cache 0")
    if srv.engine != "epoll":
        # Every body was a chain of its own.
        check(after["orcd_chains_submitted_total"]
              - before["orcd_chains_submitted_total"] >= 9,
              "fewer chains than bodies")


@orcdtest.case
def a_change_is_seen_at_once(srv):
    with srv.conn() as c:
        for i in range(4):
            data = pattern(70000 + i, 10 + i)
            srv.write_file("nc/changing.bin", data)
            c.send(orcdtest.build_request("GET", "/nc/changing.bin"))
            r = c.read_response()
            check(r.body == data, "round %d: stale body" % i)


if __name__ == "__main__":
    sys.exit(orcdtest.run(Server))
