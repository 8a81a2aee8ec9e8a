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
    # An absolute link is refused even where it points inside the root
    # (RESOLVE_BENEATH; conf/DIRECTIVES.md says so).
    os.symlink(srv.path("hello.txt"), srv.path("abs-inside.txt"))
    r = get_raw_target(srv, "/abs-inside.txt")
    eq(r.status, 404, "/abs-inside.txt (an absolute link into the root)")


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
def long_redirect_locations(srv):
    # A Location repeats the target, up to three bytes for each: any
    # request line the parser accepts (8 KiB by default) is redirected,
    # as nginx does, where a fixed 6 KiB buffer made it 414 URI Too Long
    # (a 2.3 KB target of UTF-8 names, or a long query).
    r = get_raw_target(srv, "/dir?" + "a" * 7000)
    eq(r.status, 301, "/dir? and 7000 bytes")
    eq(r.header("location"), "/dir/?" + "a" * 7000, "its Location")
    r = get_raw_target(srv, "/dir?" + "<" * 8000)
    eq(r.status, 301, "/dir? and 8000 bytes escaped")
    eq(r.header("location"), "/dir/?" + "%3C" * 8000, "its Location")
    name = "\u00e9" * 120  # 240 bytes of UTF-8, 720 encoded
    deep = "/".join([name] * 9)
    srv.write_file(deep + "/index.html", b"<p>deep</p>\n")
    target = ("/" + deep).encode()
    r = get_raw_target(srv, target)
    eq(r.status, 301, "a %d-byte target of UTF-8 names" % len(target))
    want = "/" + "/".join(["%C3%A9" * 120] * 9) + "/"
    eq(r.header("location"), want, "its Location")
    r = get_raw_target(srv, want)
    eq((r.status, r.body), (200, b"<p>deep</p>\n"), "where it points")


def redirect_of(srv, target):
    """The Location of the 301 for target (raw bytes, no client
    normalisation), checked to be a path on this server: exactly one
    leading slash (a "//" or "/\\" start is another host to a browser)
    and nothing a URI may not carry."""
    r = get_raw_target(srv, target)
    eq(r.status, 301, "%r" % target)
    loc = r.header("location", "")
    check(loc.startswith("/") and not loc.startswith("//"),
          "%r: Location %r leaves this server" % (target, loc))
    check("\\" not in loc, "%r: backslash in Location %r" % (target, loc))
    for ch in loc:
        check(0x20 < ord(ch) < 0x7f and ch not in '"<>^`{|}',
              "%r: %r in Location %r" % (target, ch, loc))
    return loc


@orcdtest.case
def redirect_never_to_another_host(srv):
    # Each normalises to the directory "dir" without a trailing slash; a
    # Location built from the raw target ("//evil.example/../dir/") is a
    # network-path reference a browser follows to evil.example.
    for target in ("//evil.example/../dir", "/\\evil.example/../dir",
                   "/%5cevil.example/../dir", "/%5Cevil.example/../dir",
                   "///evil.example/../dir", "//evil.example//../dir",
                   "//evil.example/%2e%2e/dir", "//evil.example/.%2E/dir",
                   "/%2fevil.example/../dir", "/dir/../dir",
                   "/" + "/" * 50 + "evil.example/../dir"):
        eq(redirect_of(srv, target), "/dir/", target)
    # Ending in a dot segment, each is the root directory itself (RFC
    # 3986 5.2.4): its index, and no Location at all.
    with open(srv.path("index.html"), "rb") as f:
        index = f.read()
    for target in ("//evil.example/..", "/\\evil.example/..",
                   "/%5cevil.example/..", "//evil.example//..",
                   "//evil.example/%2e%2e", "//evil.example/.%2E",
                   "/%2fevil.example/..", "/dir/..", "/dir/%2e%2e",
                   "/./.", "/."):
        r = get_raw_target(srv, target)
        eq((r.status, r.header("location"), r.body), (200, None, index),
           target)


@orcdtest.case
def redirect_location_is_normalised(srv):
    # Many slashes, dot segments and encoded separators fold away: the
    # Location names the directory once, with one slash between names.
    for target, want in (("//dir", "/dir/"), ("////dir", "/dir/"),
                         ("/" * 40 + "dir", "/dir/"), ("/./dir", "/dir/"),
                         ("/x/../dir", "/dir/"),
                         ("/x/%2e%2e/dir", "/dir/"),
                         ("/x/%2E%2E/dir", "/dir/"),
                         ("/%2fdir", "/dir/"), ("/%2F%2Fdir", "/dir/"),
                         ("/x%2f..%2fdir", "/dir/"),
                         ("/\\dir/../dir", "/dir/"),
                         ("//evil.example/../dir", "/dir/"),
                         ("/%64ir", "/dir/")):
        eq(redirect_of(srv, target), want, target)
    # A trailing slash, literal or encoded, or a last dot segment names the
    # directory itself: its index, no redirect. A ".." above the root stays a 400.
    for target, status in (("//dir//", 200), ("/dir/./", 200),
                           ("/dir/.", 200), ("/dir/x/..", 200),
                           ("/dir%2f", 200), ("/dir%2f..%2f..%2fdir", 400)):
        eq(get_raw_target(srv, target).status, status, target)


@orcdtest.case
def redirect_location_percent_encodes(srv):
    # Names are encoded in the Location (anything outside unreserved,
    # sub-delims, ':' and '@'), and the encoding round-trips to the same
    # directory.
    srv.write_file("back\\slash/index.html", b"<p>backslash dir</p>\n")
    srv.write_file("q?mark#hash/index.html", b"<p>query-looking dir</p>\n")
    srv.write_file("%2e%2e/index.html", b"<p>literal dots dir</p>\n")
    srv.write_file("caf\u00e9/index.html", b"<p>utf-8 dir</p>\n")
    srv.write_file("a:b@c!$&'()*+,;=~/index.html", b"<p>sub-delims</p>\n")
    for target, want, body in (
            ("/back%5cslash", "/back%5Cslash/", b"<p>backslash dir</p>\n"),
            ("/back\\slash", "/back%5Cslash/", b"<p>backslash dir</p>\n"),
            ("/q%3fmark%23hash", "/q%3Fmark%23hash/",
             b"<p>query-looking dir</p>\n"),
            ("/%252e%252e", "/%252e%252e/", b"<p>literal dots dir</p>\n"),
            ("/caf%C3%A9", "/caf%C3%A9/", b"<p>utf-8 dir</p>\n"),
            ("/caf\xc3\xa9", "/caf%C3%A9/", b"<p>utf-8 dir</p>\n"),
            ("/a:b@c!$&'()*+,;=~", "/a:b@c!$&'()*+,;=~/",
             b"<p>sub-delims</p>\n"),
            ("/a%3ab%40c%21%24%26%27%28%29%2a%2b%2c%3b%3d%7e",
             "/a:b@c!$&'()*+,;=~/", b"<p>sub-delims</p>\n")):
        eq(redirect_of(srv, target), want, target)
        r = get_raw_target(srv, want)
        eq((r.status, r.body), (200, body), "%r -> %r" % (target, want))


@orcdtest.case
def redirect_keeps_query(srv):
    # As nginx does: the directory redirect appends "?args", so a form
    # or a tracking parameter survives; the fragment never reaches us.
    for target, want in (("/dir?x=1", "/dir/?x=1"),
                         ("/dir?a=/../..&b=%2F", "/dir/?a=/../..&b=%2F"),
                         ("//evil.example/../dir?next=//x",
                          "/dir/?next=//x"),
                         ("/dir?", "/dir/"), ("/dir#frag", "/dir/"),
                         ("/dir?q=1#frag", "/dir/?q=1"),
                         ("/dir?a\\b", "/dir/?a%5Cb"),
                         ('/dir?a"b<c>', "/dir/?a%22b%3Cc%3E"),
                         ("/dir?%zz", "/dir/?%25zz"),
                         ("/dir?caf\xc3\xa9", "/dir/?caf%C3%A9")):
        eq(redirect_of(srv, target), want, target)


@orcdtest.case
def directory_without_index(srv):
    # 404, as orcd(8) says: it does not tell that the directory exists.
    r = get_raw_target(srv, "/noindex/")
    eq(r.status, 404, "/noindex/")
    check(b"file.txt" not in r.body, "/noindex/ lists its files")


@orcdtest.case
def file_with_trailing_slash_404(srv):
    eq(get_raw_target(srv, "/hello.txt/").status, 404, "/hello.txt/")
    # A last dot segment leaves a directory (RFC 3986 5.2.4): these name
    # "/hello.txt/", not the file (they were answered with it).
    for target in ("/hello.txt/.", "/hello.txt/x/..", "/hello.txt/%2e"):
        eq(get_raw_target(srv, target).status, 404, target)


@orcdtest.case
def last_dotdot_is_the_directory_itself(srv):
    # "/dir/sub/.." is "/dir/": its index, not a redirect to where it is.
    r = get_raw_target(srv, "/dir/noindex-sub/..")
    with open(srv.path("dir/index.html"), "rb") as f:
        eq((r.status, r.body), (200, f.read()), "/dir/noindex-sub/..")


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
    # A file orcd may not read is 403, its bytes never sent, with the
    # stat cache and without (epoll's plan then opens it itself). Root
    # reads any file: an orcd of its own runs as nobody then.
    user = orcdtest.unprivileged_conf()
    for what, conf in (("stat cache", ""), ("stat_cache 0",
                                            "stat_cache 0;\n")):
        with orcdtest.Server(conf=user + conf) as own:
            for d in (own.tmp, own.root):
                os.chmod(d, 0o755)  # nobody must reach the root
            p = own.write_file("private.txt", b"private\n")
            os.chmod(p, 0)
            own.start()
            for method in ("GET", "HEAD"):
                r = own.get("/private.txt", method=method)
                eq(r.status, 403, "%s /private.txt (mode 000), %s"
                   % (method, what))
                check(b"private" not in r.body,
                      "content of an unreadable file, " + what)
            eq(own.get("/hello.txt").body, HELLO, "a readable file, " + what)
            own.assert_fds_back()
            own.stop()


@orcdtest.case
def long_path_components(srv):
    # NAME_MAX is 255: a longer name is a plain 404, not a 500.
    r = get_raw_target(srv, "/" + "x" * 300)
    eq(r.status, 404, "300-byte name")
    r = get_raw_target(srv, "/" + "a/" * 2000 + "x")
    check(r.status in (404, 414), "4 KB deep path: %d" % r.status)


if __name__ == "__main__":
    sys.exit(orcdtest.run())
