#!/usr/bin/env python3
"""Request targets to files: percent-decoding exactly once, query ignored,
dot segments that never leave the root, NUL and control bytes, dotfiles,
symlinks inside and out of the root, index files and directory
redirects."""

import os
import sys

import orcdtest
from orcdtest import build_request, check, eq

HELLO = b"hello, world\n"
SECRETS = (b"root:", b"outside the root", b"[core]", b"secret")


def get_raw_target(srv, target):
    """GET with the target bytes exactly as given (no client
    normalisation)."""
    if isinstance(target, str):
        target = target.encode("latin-1")
    r = srv.raw(b"GET " + target + b" HTTP/1.1\r\nHost: t\r\n"
                b"Connection: close\r\n\r\n")
    check(r is not None, "no response to %r" % target)
    return r


def never_leaks(r, target, allowed=(400, 403, 404)):
    check(r.status in allowed, "%r: status %d, want one of %s"
          % (target, r.status, allowed))
    for s in SECRETS:
        check(s not in r.body, "%r: response contains %r" % (target, s))


@orcdtest.case
def percent_decoding(srv):
    for target in ("/hello%2etxt", "/hello%2Etxt", "/%68ello.txt",
                   "/%68%65%6c%6c%6f%2e%74%78%74"):
        r = get_raw_target(srv, target)
        eq((r.status, r.body), (200, HELLO), target)


@orcdtest.case
def percent_decoded_once(srv):
    # "%2568" decodes to "%68", which must not be decoded again to "h".
    r = get_raw_target(srv, "/%2568ello.txt")
    eq(r.status, 404, "/%2568ello.txt (no file named %68ello.txt)")
    srv.write_file("%68ello.txt", b"literal percent\n")
    r = get_raw_target(srv, "/%2568ello.txt")
    eq((r.status, r.body), (200, b"literal percent\n"),
       "/%2568ello.txt with a file named %68ello.txt")


@orcdtest.case
def bad_percent_encoding_400(srv):
    for target in ("/hello%zztxt", "/hello.txt%", "/hello.txt%2",
                   "/%g0hello.txt"):
        r, closed = srv.exchange(build_request("GET", target))
        eq(r.status, 400, target)


@orcdtest.case
def query_ignored(srv):
    for target in ("/hello.txt?x=1", "/hello.txt?", "/hello.txt?a=/../..",
                   "/hello.txt?%00", "/dir/?q=1"):
        r = get_raw_target(srv, target)
        eq(r.status, 200, target)
        if target.startswith("/hello"):
            eq(r.body, HELLO, target)


@orcdtest.case
def dot_segments_inside_root(srv):
    for target in ("/dir/../hello.txt", "/./hello.txt", "/dir/./page.html",
                   "/dir/%2e%2e/hello.txt", "/noindex/../dir/../hello.txt"):
        r = get_raw_target(srv, target)
        eq(r.status, 200, target)
    eq(get_raw_target(srv, "/dir/./page.html").body, b"<p>page</p>\n",
       "/dir/./page.html body")


@orcdtest.case
def traversal_never_leaves_root(srv):
    for target in ("/../../etc/passwd", "/../../../../../../etc/passwd",
                   "/%2e%2e/%2e%2e/etc/passwd", "/%2E%2E/%2E%2E/etc/passwd",
                   "/dir/../../outside.txt", "/%2e%2e/outside.txt",
                   "/..%2foutside.txt", "/..%2Foutside.txt",
                   "/dir/..%2f..%2foutside.txt", "/..", "/../",
                   "/.%2e/outside.txt", "/%2e./outside.txt",
                   "/..\\outside.txt", "/..%5coutside.txt",
                   "/%252e%252e/outside.txt", "../outside.txt",
                   "/dir/%2e%2e/%2e%2e/%2e%2e/etc/passwd"):
        never_leaks(get_raw_target(srv, target), target)


@orcdtest.case
def nul_and_control_bytes_400(srv):
    for target in ("/hello.txt%00", "/hello.txt%00.html", "/%00",
                   "/hello%01.txt", "/hello%0a.txt", "/hello%0d%0a.txt",
                   "/hello%1f.txt", "/hello%7f.txt"):
        r, closed = srv.exchange(build_request("GET", target))
        eq(r.status, 400, target)
    # Raw control bytes in the target are a malformed request line.
    for raw in (b"/hello\x01.txt", b"/hello\x00.txt", b"/hello\x7f.txt",
                b"/hello\t.txt"):
        r, closed = srv.exchange(b"GET " + raw + b" HTTP/1.1\r\nHost: t"
                                 b"\r\n\r\n")
        eq(r.status, 400, repr(raw))
        check(closed, "%r: connection left open after 400" % raw)


@orcdtest.case
def dotfiles_404(srv):
    srv.write_file(".env", b"SECRET=1\n")
    for target in ("/.hidden", "/dir/.git/config", "/dir/.git/",
                   "/dir/.git", "/%2ehidden", "/.env", "/dir/../.hidden",
                   "/dir/%2egit/config"):
        r = get_raw_target(srv, target)
        eq(r.status, 404, target)
        check(b"secret" not in r.body and b"[core]" not in r.body
              and b"SECRET" not in r.body, "%s leaks content" % target)


@orcdtest.case
def dot_segment_through_dotdir_is_fine(srv):
    # A ".." that removes a dot segment leaves no dotfile behind.
    r = get_raw_target(srv, "/dir/.git/../page.html")
    eq((r.status, r.body), (200, b"<p>page</p>\n"), "/dir/.git/../page.html")


@orcdtest.case
def symlink_inside_root_200(srv):
    r = get_raw_target(srv, "/link-inside.txt")
    eq((r.status, r.body), (200, HELLO), "/link-inside.txt")
    os.symlink("dir", srv.path("dirlink"))
    r = get_raw_target(srv, "/dirlink/page.html")
    eq((r.status, r.body), (200, b"<p>page</p>\n"), "/dirlink/page.html")


@orcdtest.case
def symlinks_leaving_root_refused(srv):
    os.symlink("/etc", srv.path("etc-link"))
    os.symlink(os.path.dirname(srv.root), srv.path("parent-link"))
    os.symlink("../..", srv.path("dir/up2"))
    for target in ("/link-outside", "/link-up.txt", "/etc-link/passwd",
                   "/parent-link/outside.txt", "/dir/up2/outside.txt",
                   "/dir/up2/etc/passwd"):
        never_leaks(get_raw_target(srv, target), target, (403, 404))


@orcdtest.case
def directory_index(srv):
    with open(srv.path("index.html"), "rb") as f:
        index = f.read()
    r = get_raw_target(srv, "/")
    eq((r.status, r.body), (200, index), "/")
    eq(r.header("content-type", "").split(";")[0], "text/html",
       "Content-Type of /")
    r = get_raw_target(srv, "/dir/")
    eq((r.status, r.body), (200, b"<p>dir index</p>\n"), "/dir/")


@orcdtest.case
def directory_without_slash_301(srv):
    for target, want in (("/dir", "/dir/"), ("/noindex", "/noindex/")):
        r = get_raw_target(srv, target)
        eq(r.status, 301, target)
        loc = r.header("location", "")
        check(loc == want or (loc.startswith("http://")
                              and loc.endswith("/") and
                              loc.split("/", 3)[-1] == want[1:]),
              "%s: Location %r, want %r" % (target, loc, want))
    r = get_raw_target(srv, "/dir?x=1")
    eq(r.status, 301, "/dir?x=1")
    check(r.header("location", "").split("?")[0].endswith("/dir/"),
          "/dir?x=1: Location %r" % r.header("location"))


@orcdtest.case
def redirect_location_stays_encoded(srv):
    # The Location of "/sp%20ace" must be a valid URI reference: the
    # space stays encoded, nothing decoded can break the header.
    srv.write_file("sp ace/index.html", b"<p>space dir</p>\n")
    r = get_raw_target(srv, "/sp%20ace")
    eq(r.status, 301, "/sp%20ace")
    loc = r.header("location", "")
    check(loc.endswith("/sp%20ace/"), "Location %r" % loc)
    check(" " not in loc, "raw space in Location %r" % loc)
    r = get_raw_target(srv, "/sp%20ace/")
    eq((r.status, r.body), (200, b"<p>space dir</p>\n"), "/sp%20ace/")


@orcdtest.case
def directory_without_index(srv):
    r = get_raw_target(srv, "/noindex/")
    check(r.status in (403, 404), "/noindex/: status %d" % r.status)
    check(b"file.txt" not in r.body, "/noindex/ lists its files")


@orcdtest.case
def file_with_trailing_slash_404(srv):
    eq(get_raw_target(srv, "/hello.txt/").status, 404, "/hello.txt/")


@orcdtest.case
def space_in_name(srv):
    r = get_raw_target(srv, "/with%20space.txt")
    eq((r.status, r.body), (200, b"space\n"), "/with%20space.txt")


@orcdtest.case
def missing_file_404_keeps_connection(srv):
    with srv.conn() as c:
        c.send(build_request("GET", "/nope.txt"))
        r = c.read_response()
        eq(r.status, 404, "missing")
        c.send(build_request("GET", "/hello.txt", {"Connection": "close"}))
        eq(c.read_response().body, HELLO, "after a 404")


@orcdtest.case
def fifo_does_not_block(srv):
    os.mkfifo(srv.path("pipe"))
    r = get_raw_target(srv, "/pipe")
    check(r.status in (403, 404), "/pipe (a FIFO): status %d" % r.status)
    eq(get_raw_target(srv, "/hello.txt").status, 200, "after the FIFO")


@orcdtest.case
def unreadable_file_403(srv):
    if os.geteuid() == 0:
        raise orcdtest.Skip("running as root: permissions do not apply "
                            "(test_systemd_privdrop covers it as nobody)")
    p = srv.write_file("private.txt", b"private\n")
    os.chmod(p, 0)
    r = get_raw_target(srv, "/private.txt")
    eq(r.status, 403, "/private.txt (mode 000)")
    check(b"private\n" != r.body, "content of an unreadable file")


@orcdtest.case
def long_path_components(srv):
    # NAME_MAX is 255: a longer name is a plain 404, not a 500.
    r = get_raw_target(srv, "/" + "x" * 300)
    eq(r.status, 404, "300-byte name")
    r = get_raw_target(srv, "/" + "a/" * 2000 + "x")
    check(r.status in (404, 414), "4 KB deep path: %d" % r.status)


if __name__ == "__main__":
    sys.exit(orcdtest.run())
