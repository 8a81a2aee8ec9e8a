#!/usr/bin/env python3
"""Conditional requests (RFC 9110 section 13): If-Match (strong
comparison), If-Unmodified-Since, If-None-Match (exact, list, weak
comparison, *; repeated lines as one list), If-Modified-Since, If-Range,
their precedence (13.2.2), 304s without a body and 412s that keep the
connection."""

import sys

import orcdtest
from orcdtest import build_request, check, eq, http_date, wait_until

MTIME = 1600000000  # Sun, 13 Sep 2020 12:26:40 GMT
BODY = b"conditional fixture\n"


def fixture(srv):
    """A file with a pinned, known Last-Modified; returns its ETag."""
    if not hasattr(srv, "_cond_etag"):
        srv.write_file("cond.txt", BODY, mtime=MTIME)
        r = srv.get("/cond.txt")
        eq(r.status, 200, "fixture status")
        eq(r.header("last-modified"), http_date(MTIME), "Last-Modified")
        srv._cond_etag = r.header("etag")
        check(srv._cond_etag and srv._cond_etag.startswith('"'),
              "fixture ETag %r" % srv._cond_etag)
    return srv._cond_etag


def cond(srv, headers, method="GET"):
    """Send the conditional request followed by a plain GET on the same
    connection: a 304 (or HEAD) that leaked body bytes would corrupt the
    second response."""
    with srv.conn() as c:
        c.send(build_request(method, "/cond.txt", headers)
               + build_request("GET", "/hello.txt", {"Connection": "close"}))
        r = c.read_response(head_request=(method == "HEAD"))
        nxt = c.read_response()
        check(nxt is not None and nxt.status == 200
              and nxt.body == b"hello, world\n",
              "response after the conditional one is corrupt: %r" % nxt)
    return r


def is_304(r, etag, what):
    eq(r.status, 304, what)
    eq(r.body, b"", what + ": body")
    eq(r.header("etag"), etag, what + ": ETag of the 304")
    check(r.header("date") is not None, what + ": 304 without Date")
    cl = r.header("content-length")
    check(cl is None or cl in ("0", str(len(BODY))),
          what + ": Content-Length %r on a 304" % cl)
    # RFC 9110 15.4.5: no representation metadata beyond the validators.
    eq(r.header("content-type"), None, what + ": Content-Type on a 304")


def is_200(r, what):
    eq(r.status, 200, what)
    eq(r.body, BODY, what + ": body")


@orcdtest.case
def inm_exact_etag_304(srv):
    etag = fixture(srv)
    is_304(cond(srv, {"If-None-Match": etag}), etag, "INM exact")


@orcdtest.case
def inm_head_304(srv):
    etag = fixture(srv)
    r = cond(srv, {"If-None-Match": etag}, method="HEAD")
    eq(r.status, 304, "HEAD with INM")


@orcdtest.case
def inm_in_list_304(srv):
    etag = fixture(srv)
    for v in ('"aaa", %s, "bbb"' % etag, '"aaa",%s' % etag,
              '%s , "zzz"' % etag, 'W/"x", %s' % etag):
        is_304(cond(srv, {"If-None-Match": v}), etag, "INM list %s" % v)


@orcdtest.case
def inm_weak_form_304(srv):
    # If-None-Match uses the weak comparison: W/"x" matches "x".
    etag = fixture(srv)
    is_304(cond(srv, {"If-None-Match": "W/" + etag}), etag, "INM W/")
    is_304(cond(srv, {"If-None-Match": '"a", W/' + etag}), etag,
           "INM list with W/")


@orcdtest.case
def inm_star_304(srv):
    etag = fixture(srv)
    is_304(cond(srv, {"If-None-Match": "*"}), etag, "INM *")


@orcdtest.case
def inm_star_on_missing_file_404(srv):
    r = srv.get("/no-such-file.txt", {"If-None-Match": "*"})
    eq(r.status, 404, "INM * on a missing file")


@orcdtest.case
def inm_non_matching_200(srv):
    etag = fixture(srv)
    for v in ('"nope"', '"a", "b"', etag[:-2] + '"', '"' + etag + '"',
              etag.strip('"')):
        is_200(cond(srv, {"If-None-Match": v}), "INM %s" % v)


@orcdtest.case
def inm_other_files_etag_200(srv):
    fixture(srv)
    other = srv.get("/hello.txt").header("etag")
    is_200(cond(srv, {"If-None-Match": other}), "ETag of another file")


@orcdtest.case
def ims_equal_304(srv):
    etag = fixture(srv)
    is_304(cond(srv, {"If-Modified-Since": http_date(MTIME)}), etag,
           "IMS == Last-Modified")


@orcdtest.case
def ims_later_304(srv):
    etag = fixture(srv)
    for t in (MTIME + 1, MTIME + 86400 * 365):
        is_304(cond(srv, {"If-Modified-Since": http_date(t)}), etag,
               "IMS %s" % http_date(t))


@orcdtest.case
def ims_earlier_200(srv):
    fixture(srv)
    for t in (MTIME - 1, MTIME - 86400 * 365):
        is_200(cond(srv, {"If-Modified-Since": http_date(t)}),
               "IMS %s" % http_date(t))


@orcdtest.case
def ims_obsolete_date_forms(srv):
    # RFC 9110 5.6.7: recipients MUST accept RFC 850 and asctime dates.
    etag = fixture(srv)
    is_304(cond(srv, {"If-Modified-Since":
                      "Sunday, 13-Sep-20 12:26:40 GMT"}), etag, "RFC 850")
    is_304(cond(srv, {"If-Modified-Since": "Sun Sep 13 12:26:40 2020"}),
           etag, "asctime")
    is_200(cond(srv, {"If-Modified-Since": "Sun Sep 13 12:26:39 2020"}),
           "asctime one second early")


@orcdtest.case
def ims_garbage_ignored_200(srv):
    fixture(srv)
    for v in ("garbage", "yesterday", "Sun, 13 Sep 2020 12:26:40",
              "Sun, 99 Sep 2020 12:26:40 GMT", "1600000000", ""):
        is_200(cond(srv, {"If-Modified-Since": v}), "IMS %r" % v)


@orcdtest.case
def inm_takes_precedence_over_ims(srv):
    etag = fixture(srv)
    # RFC 9110 13.2.2: IMS is evaluated only when INM is absent.
    is_200(cond(srv, {"If-None-Match": '"other"',
                      "If-Modified-Since": http_date(MTIME + 100)}),
           "INM mismatch + IMS fresh")
    is_304(cond(srv, {"If-None-Match": etag,
                      "If-Modified-Since": http_date(MTIME - 100)}), etag,
           "INM match + IMS stale")


@orcdtest.case
def conditional_keeps_connection(srv):
    etag = fixture(srv)
    with srv.conn() as c:
        for _ in range(3):
            c.send(build_request("GET", "/cond.txt", {"If-None-Match": etag}))
            eq(c.read_response().status, 304, "304 on a kept-alive conn")
        c.send(build_request("GET", "/cond.txt", {"Connection": "close"}))
        is_200(c.read_response(), "after three 304s")


def is_412(r, what, head=False):
    eq(r.status, 412, what)
    check(BODY not in r.body, what + ": the file's body on a 412")
    if head:
        eq(r.body, b"", what + ": body of a HEAD 412")
    else:
        check(r.body.startswith(b"<html>") and b"412" in r.body,
              what + ": error page %r" % r.body[:80])


@orcdtest.case
def repeated_list_fields_are_one_list(srv):
    # RFC 9110 5.3: two If-None-Match (or If-Match) lines mean the one
    # list of both; the tag that matches may be in the second line.
    etag = fixture(srv)
    for lines in ([("If-None-Match", '"aaa"'), ("If-None-Match", etag)],
                  [("If-None-Match", etag), ("If-None-Match", '"bbb"')]):
        is_304(cond(srv, lines), etag, "INM lines %s" % lines)
    is_200(cond(srv, [("If-None-Match", '"a"'), ("If-None-Match", '"b"')]),
           "INM lines, no match")
    is_200(cond(srv, [("If-Match", '"aaa"'), ("If-Match", etag)]),
           "If-Match lines, match in the second")
    is_412(cond(srv, [("If-Match", '"a"'), ("If-Match", '"b"')]),
           "If-Match lines, no match")
    # "*" is a list of its own: beside another line the field is broken.
    is_412(cond(srv, [("If-Match", "*"), ("If-Match", etag)]),
           "If-Match * beside a tag")


@orcdtest.case
def if_match_412(srv):
    # What a new user tried first: nginx answers both with 412.
    fixture(srv)
    is_412(cond(srv, {"If-Match": '"nope"'}), "If-Match \"nope\"")
    is_412(cond(srv, {"If-Unmodified-Since":
                      "Thu, 01 Jan 1970 00:00:00 GMT"}), "IUS 1970")


@orcdtest.case
def if_match_strong_comparison(srv):
    etag = fixture(srv)
    for v in (etag, "*", '"a", %s' % etag, '%s,"b"' % etag, "  *  "):
        is_200(cond(srv, {"If-Match": v}), "If-Match %s" % v)
    # A weak tag never matches strongly, nor does a near miss.
    for v in ("W/" + etag, '"a", W/%s' % etag, etag[:-2] + '"',
              etag.strip('"'), '"a", "b"', "*, " + etag, "junk"):
        is_412(cond(srv, {"If-Match": v}), "If-Match %s" % v)
    is_412(cond(srv, {"If-Match": '"nope"'}, method="HEAD"),
           "HEAD If-Match mismatch", head=True)
    is_200(cond(srv, {"If-Match": etag}, method="GET"), "GET If-Match ok")


@orcdtest.case
def if_match_star_on_missing_file_404(srv):
    # Preconditions are evaluated only where the answer would be 2xx.
    r = srv.get("/no-such-file.txt", {"If-Match": "*"})
    eq(r.status, 404, "If-Match * on a missing file")
    r = srv.get("/no-such-file.txt", {"If-Match": '"nope"'})
    eq(r.status, 404, "If-Match mismatch on a missing file")


@orcdtest.case
def if_unmodified_since(srv):
    fixture(srv)
    for t in (MTIME, MTIME + 1, MTIME + 86400 * 365):
        is_200(cond(srv, {"If-Unmodified-Since": http_date(t)}),
               "IUS %s" % http_date(t))
    for t in (MTIME - 1, 0):
        is_412(cond(srv, {"If-Unmodified-Since": http_date(t)}),
               "IUS %s" % http_date(t))
    is_412(cond(srv, {"If-Unmodified-Since":
                      "Sunday, 13-Sep-20 12:26:39 GMT"}), "IUS RFC 850")
    # An invalid date is ignored.
    for v in ("garbage", "Sun, 13 Sep 2020 12:26:39", "0",
              "Thu, 01 Jan 1970 00:00:00 GMT, Thu, 01 Jan 1970 00:00:00 GMT"):
        is_200(cond(srv, {"If-Unmodified-Since": v}), "IUS %r" % v)


@orcdtest.case
def precedence_rfc9110_13_2_2(srv):
    etag = fixture(srv)
    old, new = http_date(MTIME - 100), http_date(MTIME + 100)
    # 1. If-Match decides, and If-Unmodified-Since is then ignored.
    is_200(cond(srv, {"If-Match": etag, "If-Unmodified-Since": old}),
           "If-Match ok + IUS failing")
    is_412(cond(srv, {"If-Match": '"x"', "If-Unmodified-Since": new}),
           "If-Match failing + IUS ok")
    # 1/2 before 3: a failed If-Match or IUS is 412 even when
    # If-None-Match would have been 304.
    is_412(cond(srv, {"If-Match": '"x"', "If-None-Match": etag}),
           "If-Match failing + INM match")
    is_412(cond(srv, {"If-Unmodified-Since": old, "If-None-Match": etag}),
           "IUS failing + INM match")
    is_304(cond(srv, {"If-Match": etag, "If-None-Match": etag}), etag,
           "If-Match ok + INM match")
    is_304(cond(srv, {"If-Unmodified-Since": new,
                      "If-Modified-Since": new}), etag,
           "IUS ok + IMS not modified")
    is_200(cond(srv, {"If-Match": "*", "If-None-Match": '"x"',
                      "If-Modified-Since": new}), "INM mismatch wins over IMS")
    # 412 before Range.
    r = cond(srv, {"If-Match": '"x"', "Range": "bytes=0-3"})
    is_412(r, "If-Match failing + Range")
    check(r.header("content-range") is None, "Content-Range on a 412")
    r = cond(srv, {"If-Match": etag, "Range": "bytes=0-3"})
    eq((r.status, r.body), (206, BODY[:4]), "If-Match ok + Range")
    # 3/4 before 5: a 304 wins over Range and If-Range.
    is_304(cond(srv, {"If-None-Match": etag, "Range": "bytes=0-3",
                      "If-Range": etag}), etag, "INM match + Range")
    is_304(cond(srv, {"If-Modified-Since": new, "Range": "bytes=0-3"}),
           etag, "IMS + Range")
    # 5. If-Range: a match honours the Range, a mismatch sends it all.
    r = cond(srv, {"If-Match": etag, "If-None-Match": '"x"',
                   "Range": "bytes=0-3", "If-Range": etag})
    eq((r.status, r.body), (206, BODY[:4]), "all pass + If-Range match")
    is_200(cond(srv, {"If-Match": etag, "Range": "bytes=0-3",
                      "If-Range": '"x"'}), "If-Match ok + If-Range stale")
    is_200(cond(srv, {"Range": "bytes=0-3", "If-Range": old}),
           "If-Range date mismatch")


@orcdtest.case
def precondition_failed_keeps_connection(srv):
    fixture(srv)
    with srv.conn() as c:
        for h in ({"If-Match": '"nope"'},
                  {"If-Unmodified-Since": http_date(0)}) * 2:
            c.send(build_request("GET", "/cond.txt", h))
            is_412(c.read_response(), "412 on a kept-alive conn")
        c.send(build_request("HEAD", "/cond.txt", {"If-Match": '"nope"'}))
        is_412(c.read_response(head_request=True), "HEAD 412", head=True)
        c.send(build_request("GET", "/cond.txt", {"Connection": "close"}))
        is_200(c.read_response(), "after the 412s")
        check(c.closed_by_peer(), "Connection: close not honoured")


@orcdtest.case
def precondition_failed_logged(srv):
    fixture(srv)
    marker = "/cond.txt?logged-412"

    def lines():
        try:
            with open(srv.access_log, "rb") as f:
                text = f.read().decode("utf-8", "replace")
        except FileNotFoundError:
            return []
        return [ln for ln in text.splitlines() if marker in ln]

    srv.get(marker, {"If-Match": '"nope"'})
    wait_until(lambda: lines(), 10, "the 412 in the access log")
    check('"GET %s HTTP/1.1" 412 ' % marker in lines()[0],
          "access log line %r" % lines()[0])


@orcdtest.case
def etag_changes_with_content(srv):
    etag = fixture(srv)
    srv.write_file("cond2.txt", BODY, mtime=MTIME)
    other = srv.get("/cond2.txt").header("etag")
    check(other != etag, "two files share the ETag %s" % etag)
    srv.write_file("cond2.txt", BODY + b"more", mtime=MTIME)
    grown = srv.get("/cond2.txt").header("etag")
    check(grown != other, "ETag unchanged after the file grew")
    r = srv.get("/cond2.txt", {"If-None-Match": other})
    eq(r.status, 200, "old ETag after a change")
    eq(r.body, BODY + b"more", "body after a change")


@orcdtest.case
def mtime_at_the_epoch_is_a_date(srv):
    # Reproducible builds set every mtime to 0 (SOURCE_DATE_EPOCH=0): the
    # field was left out, while If-Modified-Since still compared with it.
    srv.write_file("epoch.txt", BODY, mtime=0)
    r = srv.get("/epoch.txt")
    eq((r.status, r.header("last-modified")), (200, http_date(0)),
       "Last-Modified of a file dated 0")
    with srv.conn() as c:
        c.send(build_request("GET", "/epoch.txt",
                             {"If-Modified-Since": http_date(0)}))
        r304 = c.read_response()
    eq((r304.status, r304.header("last-modified")), (304, http_date(0)),
       "If-Modified-Since the epoch")


if __name__ == "__main__":
    sys.exit(orcdtest.run())
