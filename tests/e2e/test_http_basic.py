#!/usr/bin/env python3
"""GET and HEAD, the headers every 200 carries, 405 or 501 for other
methods, and the request errors (400/414/431/505) that must close the
connection."""

import os
import sys
import time

import orcdtest
from orcdtest import build_request, check, eq

DEFAULT_TYPE = "application/x-orcd-default"


def closes_with(srv, data, status, what):
    """Send data, expect `status`, then the server's close (RFC 9112 9.6:
    after an error in framing the stream cannot be trusted)."""
    r, closed = srv.exchange(data)
    check(r is not None, "%s: connection closed without a response" % what)
    eq(r.status, status, "%s: status" % what)
    check(closed, "%s: connection left open after %d" % (what, status))
    return r


@orcdtest.case
def get_serves_file_with_all_headers(srv):
    before = int(time.time())
    r = srv.get("/hello.txt")
    after = int(time.time())
    eq(r.status, 200, "status")
    eq(r.body, b"hello, world\n", "body")
    eq(r.header("content-length"), "13", "Content-Length")
    ct = r.header("content-type", "")
    check(ct.split(";")[0].strip() == "text/plain", "Content-Type %r" % ct)
    date = orcdtest.parse_http_date(r.header("date"))
    check(before - 2 <= date <= after + 2, "Date %r is not now"
          % r.header("date"))
    check(r.header("server", "").startswith("orcd"), "Server %r"
          % r.header("server"))
    st = os.stat(srv.path("hello.txt"))
    eq(orcdtest.parse_http_date(r.header("last-modified")), int(st.st_mtime),
       "Last-Modified")
    etag = r.header("etag", "")
    check(len(etag) > 2 and etag.startswith('"') and etag.endswith('"'),
          "ETag %r is not a strong quoted entity-tag" % etag)
    eq(r.header("accept-ranges"), "bytes", "Accept-Ranges")
    for name in ("date", "server", "content-type", "content-length",
                 "last-modified", "etag", "accept-ranges"):
        eq(len(r.header_all(name)), 1, "number of %s fields" % name)


@orcdtest.case
def head_has_get_headers_and_no_body(srv):
    get = srv.get("/style.css")
    # HEAD then GET on one connection: any body bytes after the HEAD
    # response would be read as the next status line.
    with srv.conn() as c:
        c.send(build_request("HEAD", "/style.css")
               + build_request("GET", "/hello.txt",
                               {"Connection": "close"}))
        head = c.read_response(head_request=True)
        nxt = c.read_response()
    eq(head.status, 200, "HEAD status")
    for name in ("content-type", "content-length", "last-modified", "etag",
                 "accept-ranges", "server"):
        eq(head.header(name), get.header(name), "HEAD %s vs GET" % name)
    check(head.header("date") is not None, "HEAD without Date")
    eq(nxt.status, 200, "request after HEAD")
    eq(nxt.body, b"hello, world\n", "body of the request after HEAD")


@orcdtest.case
def content_types(srv):
    srv.write_file("t/unknown.zzqx", b"x\n")
    srv.write_file("t/noext", b"x\n")
    for path, want in (("/index.html", "text/html"),
                       ("/style.css", "text/css"),
                       ("/hello.txt", "text/plain"),
                       ("/dir/page.html", "text/html"),
                       ("/UPPER.HTML", "text/html"),
                       ("/t/unknown.zzqx", DEFAULT_TYPE),
                       ("/t/noext", DEFAULT_TYPE)):
        r = srv.get(path)
        eq(r.status, 200, path)
        ct = r.header("content-type", "")
        eq(ct.split(";")[0].strip(), want, "Content-Type of " + path)


@orcdtest.case
def empty_file(srv):
    r = srv.get("/empty.txt")
    eq(r.status, 200, "status")
    eq(r.header("content-length"), "0", "Content-Length")
    eq(r.body, b"", "body")


@orcdtest.case
def big_file_exact_bytes(srv):
    r = srv.get("/big.bin")
    eq(r.status, 200, "status")
    with open(srv.path("big.bin"), "rb") as f:
        want = f.read()
    eq(r.header("content-length"), str(len(want)), "Content-Length")
    check(r.body == want, "big.bin body differs from the file")


@orcdtest.case
def other_methods_405_with_allow(srv):
    # RFC 9110 9.1: a method orcd knows but a file does not allow is
    # 405 with Allow; a token it does not know is 501.
    for m, status in (("POST", 405), ("PUT", 405), ("DELETE", 405),
                      ("OPTIONS", 405), ("PATCH", 405), ("TRACE", 405),
                      ("BREW", 501), ("M-SEARCH", 501)):
        with srv.conn() as c:
            c.send(build_request(m, "/hello.txt"))
            r = c.read_response()
            eq(r.status, status, m)
            eq(r.header("allow"), "GET, HEAD" if status == 405 else None,
               "Allow on %s" % m)
            # Without a body the connection stays usable.
            c.send(build_request("GET", "/hello.txt",
                                 {"Connection": "close"}))
            r2 = c.read_response()
            check(r2 is not None and r2.status == 200,
                  "request after %s 405: %r" % (m, r2))


@orcdtest.case
def methods_are_case_sensitive(srv):
    # RFC 9110 9.1: "get" is not GET, and not a method orcd knows.
    for m in ("get", "Head", "post"):
        r = srv.raw(("%s /hello.txt HTTP/1.1\r\nHost: t\r\n"
                     "Connection: close\r\n\r\n" % m).encode())
        eq(r.status, 501, m)
    r = srv.raw(b"OPTIONS * HTTP/1.1\r\nHost: t\r\nConnection: close"
                b"\r\n\r\n")
    eq(r.status, 405, "OPTIONS *")
    eq(r.header("allow"), "GET, HEAD", "Allow on OPTIONS *")


@orcdtest.case
def head_of_error_has_no_body(srv):
    # Error and redirect heads announce their body's length but a HEAD
    # gets no body: the next response must start right after the head.
    for path, hdrs, status in (("/missing", {}, 404), ("/dir", {}, 301),
                               ("/data.bin", {"Range": "bytes=5000-"}, 416),
                               ("/.hidden", {}, 404)):
        with srv.conn() as c:
            c.send(build_request("HEAD", path, hdrs)
                   + build_request("GET", "/hello.txt",
                                   {"Connection": "close"}))
            r = c.read_response(head_request=True)
            eq(r.status, status, "HEAD " + path)
            nxt = c.read_response()
            check(nxt is not None and nxt.body == b"hello, world\n",
                  "HEAD %s leaked a body: %r" % (path, nxt))


@orcdtest.case
def method_with_body_is_not_smuggled(srv):
    # A POST body that orcd does not read must never be parsed as a
    # request: either orcd discards it or it closes the connection.
    body = "GET /.hidden HTTP/1.1\r\nHost: x\r\n\r\n"
    with srv.conn() as c:
        c.send(build_request("POST", "/hello.txt",
                             {"Content-Length": str(len(body))})
               + body.encode()
               + build_request("GET", "/hello.txt", {"Connection": "close"}))
        r = c.read_response()
        eq(r.status, 405, "POST status")
        try:
            r2 = c.read_response()
        except (ConnectionResetError, orcdtest.TestFailure):
            r2 = None
        if r2 is not None:
            eq(r2.status, 200, "request after the POST body")
            eq(r2.body, b"hello, world\n", "body after the POST body")


@orcdtest.case
def error_reaches_client_still_sending_body(srv):
    # orcd answers before the client has finished sending a body it will
    # never read; the answer must still arrive (no reset that destroys
    # it: RFC 9112 9.6 staged close).
    import threading
    for m, status in (("POST", 405), ("GET", 400)):
        size = 1 << 20
        with srv.conn() as c:
            def sender():
                try:
                    c.sock.sendall(build_request(
                        m, "/hello.txt", {"Content-Length": str(size)})
                        + b"x" * size)
                except OSError:
                    pass
            t = threading.Thread(target=sender)
            t.start()
            try:
                r = c.read_response()
            except ConnectionResetError:
                r = None
            t.join(20)
            check(r is not None, "%s with a 1 MiB body: reset before "
                  "the response" % m)
            eq(r.status, status, "%s with a 1 MiB body" % m)


@orcdtest.case
def http2_version_505(srv):
    for v in ("HTTP/2.0", "HTTP/3.0", "HTTP/9.9"):
        closes_with(srv, ("GET / %s\r\nHost: t\r\n\r\n" % v).encode(), 505, v)


@orcdtest.case
def http_1x_minor_versions_accepted(srv):
    # RFC 9110 2.5: a 1.x request with a higher minor is handled as 1.1.
    r = srv.raw(b"GET /hello.txt HTTP/1.2\r\nHost: t\r\nConnection: close"
                b"\r\n\r\n")
    eq(r.status, 200, "HTTP/1.2 status")
    check(r.version in ("HTTP/1.1", "HTTP/1.0"), "version %r" % r.version)


@orcdtest.case
def garbage_request_lines_400(srv):
    for line in (b"GARBAGE", b"GET /", b"GET / HTTP/1.1 extra",
                 b"GET  / HTTP/1.1", b"GET / FOO/1.1", b"GET / HTTP/1.x",
                 b"GET / http/1.1", b"G(T / HTTP/1.1", b"\x01\x02 / HTTP/1.1",
                 b"GET /\x7f HTTP/1.1", b" GET / HTTP/1.1",
                 b"GET / HTTP/1.1\x00"):
        closes_with(srv, line + b"\r\nHost: t\r\n\r\n", 400, repr(line))


@orcdtest.case
def malformed_headers_400(srv):
    # (NUL in a value is not here: RFC 9110 5.5 also allows replacing it.)
    for hdr in (b"NoColon", b"Bad Name: x", b"Host : t", b"\x01X: y",
                b": empty-name", b"X-A\t: b"):
        req = b"GET /hello.txt HTTP/1.1\r\nHost: t\r\n" + hdr + b"\r\n\r\n"
        closes_with(srv, req, 400, repr(hdr))
    # obs-fold (RFC 9112 5.2): rejected with 400.
    closes_with(srv, b"GET /hello.txt HTTP/1.1\r\nHost: t\r\nX-A: a\r\n"
                b" folded\r\n\r\n", 400, "obs-fold")


@orcdtest.case
def missing_host_in_11_is_400(srv):
    closes_with(srv, b"GET /hello.txt HTTP/1.1\r\n\r\n", 400, "no Host")


@orcdtest.case
def duplicate_host_is_400(srv):
    # RFC 9112 3.2: MUST answer 400 to more than one Host field.
    closes_with(srv, b"GET /hello.txt HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
                400, "two Host fields")


@orcdtest.case
def head_refused_gets_no_body(srv):
    # RFC 9110 9.3.2: no content in any response to HEAD, an error's
    # included (the 400 page went out after the head).
    with srv.conn() as c:
        c.send(b"HEAD /hello.txt HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n")
        r = c.read_response(head_request=True)
        eq(r.status, 400, "two Host fields on a HEAD")
        check(int(r.header("content-length", "0")) > 0,
              "the 400's Content-Length names the page it would send")
        check(c.closed_by_peer(), "left open after a 400")
        eq(bytes(c.buf), b"", "bytes after the HEAD's 400 head")
    # A line too long to end: the method is known before it does.
    with srv.conn() as c:
        c.send(b"HEAD /" + b"a" * 9000 + b" HTTP/1.1\r\nHost: a\r\n\r\n")
        r = c.read_response(head_request=True)
        eq(r.status, 414, "a HEAD with a 9000-byte target")
        check(c.closed_by_peer(), "left open after a 414")
        eq(bytes(c.buf), b"", "bytes after the HEAD's 414 head")


@orcdtest.case
def invalid_host_is_400(srv):
    # RFC 9112 3.2: MUST answer 400 to a Host field with an invalid value
    # (Host = uri-host [ ":" port ], port = *DIGIT).
    for host in (b"a b", b"user@x", b"a/b", b"t:x", b"t:80x", b"[::1",
                 b"t\x01"):
        closes_with(srv, b"GET /hello.txt HTTP/1.1\r\nHost: " + host
                    + b"\r\n\r\n", 400, "Host: %r" % host)
    for host in ("example.com", "example.com:8080", "127.0.0.1:80",
                 "[::1]:80", "xn--bcher-kva.example"):
        r = srv.get("/hello.txt", {"Host": host})
        eq(r.status, 200, "Host: %s" % host)


@orcdtest.case
def future_mtime_last_modified_clamped(srv):
    # RFC 9110 8.8.2.1: Last-Modified MUST NOT be later than Date; a
    # future mtime is replaced with the message origination date.
    srv.write_file("future.txt", b"from the future\n",
                   mtime=time.time() + 86400)
    r = srv.get("/future.txt")
    eq(r.status, 200, "status")
    date = orcdtest.parse_http_date(r.header("date"))
    lm = orcdtest.parse_http_date(r.header("last-modified"))
    check(lm <= date, "Last-Modified %s is after Date %s"
          % (r.header("last-modified"), r.header("date")))


@orcdtest.case
def header_names_case_insensitive_values_trimmed(srv):
    r = srv.raw(b"GET /data.bin HTTP/1.1\r\nhOsT: t\r\nrAnGe: \t bytes=0-1"
                b" \t\r\ncOnNeCtIoN: CLOSE\r\n\r\n")
    eq(r.status, 206, "mixed-case Range with OWS")
    eq(r.body, b"\x00\x01", "range body")
    etag = srv.get("/hello.txt").header("etag")
    r = srv.raw(b"GET /hello.txt HTTP/1.1\r\nHOST: t\r\nIF-NONE-MATCH:\t"
                + etag.encode() + b"\t\r\nConnection: close\r\n\r\n")
    eq(r.status, 304, "upper-case If-None-Match with tabs")


@orcdtest.case
def error_stops_the_pipeline(srv):
    # Nothing after a malformed request is parsed or answered.
    with srv.conn() as c:
        c.send(b"GARBAGE\r\n\r\n" + build_request("GET", "/hello.txt"))
        eq(c.read_response().status, 400, "garbage")
        check(c.closed_by_peer(), "not closed after 400")
        eq(c.buf, b"", "bytes after the 400")


@orcdtest.case
def http10_transfer_encoding_400(srv):
    # RFC 9112 6.1: Transfer-Encoding in a 1.0 message is faulty framing.
    closes_with(srv, b"GET /hello.txt HTTP/1.0\r\nTransfer-Encoding: "
                b"chunked\r\n\r\n0\r\n\r\n", 400, "1.0 with TE")


@orcdtest.case
def http10_without_host_ok(srv):
    r, closed = srv.exchange(b"GET /hello.txt HTTP/1.0\r\n\r\n")
    eq(r.status, 200, "status")
    eq(r.body, b"hello, world\n", "body")
    check(closed, "HTTP/1.0 without keep-alive must close")


@orcdtest.case
def absolute_form_target(srv):
    # RFC 9112 3.2.2: a server MUST accept the absolute-form.
    r = srv.raw(b"GET http://test/hello.txt HTTP/1.1\r\nHost: test\r\n"
                b"Connection: close\r\n\r\n")
    eq(r.status, 200, "status")
    eq(r.body, b"hello, world\n", "body")


@orcdtest.case
def long_request_line_414(srv):
    # Default max_request_line is 8192.
    path = "/" + "a" * 9000
    closes_with(srv, build_request("GET", path), 414, "9 KB request line")


@orcdtest.case
def request_line_just_under_limit_is_not_414(srv):
    path = "/" + "a" * 4000
    r = srv.get(path)
    eq(r.status, 404, "4 KB path to a missing file")


@orcdtest.case
def huge_header_431(srv):
    closes_with(srv, build_request("GET", "/hello.txt",
                                   {"X-Big": "b" * 20000}),
                431, "one 20 KB header field")


@orcdtest.case
def too_many_headers_431(srv):
    hdrs = [("X-H%d" % i, "v") for i in range(150)]
    closes_with(srv, build_request("GET", "/hello.txt", hdrs), 431,
                "150 header fields")


@orcdtest.case
def transfer_encoding_400(srv):
    req = (b"GET /hello.txt HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: "
           b"chunked\r\n\r\n0\r\n\r\n")
    closes_with(srv, req, 400, "TE: chunked")
    req = (b"POST /hello.txt HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: "
           b"chunked\r\n\r\n0\r\n\r\n")
    closes_with(srv, req, 400, "POST with TE: chunked")
    req = (b"GET /hello.txt HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: "
           b"gzip, chunked\r\n\r\n0\r\n\r\n")
    closes_with(srv, req, 400, "TE: gzip, chunked")


@orcdtest.case
def content_length_with_transfer_encoding_400(srv):
    req = (b"POST /hello.txt HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n"
           b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n")
    closes_with(srv, req, 400, "CL + TE")
    req = (b"GET /hello.txt HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: "
           b"chunked\r\nContent-Length: 0\r\n\r\n0\r\n\r\n")
    closes_with(srv, req, 400, "TE + CL: 0")


@orcdtest.case
def duplicate_content_length_400(srv):
    for a, b in ((b"5", b"6"), (b"0", b"0")):
        req = (b"GET /hello.txt HTTP/1.1\r\nHost: t\r\nContent-Length: " + a
               + b"\r\nContent-Length: " + b + b"\r\n\r\n")
        closes_with(srv, req, 400, "Content-Length %s and %s" % (a, b))
    req = (b"GET /hello.txt HTTP/1.1\r\nHost: t\r\nContent-Length: 5, 6"
           b"\r\n\r\n")
    closes_with(srv, req, 400, "Content-Length: 5, 6")


@orcdtest.case
def invalid_content_length_400(srv):
    for v in (b"abc", b"-1", b"+5", b"0x10", b"5 5", b"1.0",
              b"99999999999999999999999999"):
        req = (b"GET /hello.txt HTTP/1.1\r\nHost: t\r\nContent-Length: " + v
               + b"\r\n\r\n")
        closes_with(srv, req, 400, "Content-Length: %r" % v)


@orcdtest.case
def get_or_head_with_body_400(srv):
    for m in ("GET", "HEAD"):
        req = ("%s /hello.txt HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n"
               "\r\nhello" % m).encode()
        r, closed = srv.exchange(req, head_request=(m == "HEAD"))
        eq(r.status, 400, "%s with a body" % m)
        check(closed, "%s with a body: connection left open" % m)


@orcdtest.case
def get_with_content_length_zero_ok(srv):
    r = srv.get("/hello.txt", {"Content-Length": "0"})
    eq(r.status, 200, "GET with Content-Length: 0")


@orcdtest.case
def error_response_is_well_formed(srv):
    r = closes_with(srv, b"GARBAGE\r\n\r\n", 400, "garbage")
    check(r.header("date") is not None, "400 without Date")
    check(r.header("content-length") is not None, "400 without CL")
    eq(r.header("connection", "").lower(), "close",
       "Connection field of a closing 400")


@orcdtest.case
def leading_empty_lines_skipped(srv):
    # RFC 9112 2.2: SHOULD ignore at least one empty line before a request.
    r = srv.raw(b"\r\nGET /hello.txt HTTP/1.1\r\nHost: t\r\n"
                b"Connection: close\r\n\r\n")
    eq(r.status, 200, "status")


if __name__ == "__main__":
    sys.exit(orcdtest.run(lambda: orcdtest.Orcd(
        conf="default_type %s;\n" % DEFAULT_TYPE)))
