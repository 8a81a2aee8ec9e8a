#!/usr/bin/env python3
"""A real client: curl's view of orcd (GET, HEAD, ranges, HTTP/1.0,
redirects, conditionals, connection reuse) matches what the raw-socket
tests expect."""

import os
import shutil
import subprocess
import sys
import tempfile

import orcdtest
from orcdtest import check, eq

HELLO = b"hello, world\n"


def curl(srv, path, *args):
    """Run curl; return (status, headers dict of the last response, body,
    stderr)."""
    if not shutil.which("curl"):
        raise orcdtest.Skip("curl not installed")
    url = "http://127.0.0.1:%d%s" % (srv.port, path)
    with tempfile.TemporaryDirectory() as d:
        hdr, body = os.path.join(d, "h"), os.path.join(d, "b")
        p = subprocess.run(["curl", "-sS", "--max-time", "20", "-D", hdr,
                            "-o", body] + list(args) + [url],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=30)
        check(p.returncode == 0, "curl %s %s: exit %d: %s"
              % (" ".join(args), path, p.returncode,
                 p.stderr.decode("utf-8", "replace").strip()))
        with open(hdr, "rb") as f:
            raw = f.read().decode("latin-1")
        try:
            with open(body, "rb") as f:
                data = f.read()
        except FileNotFoundError:  # curl creates no file for no body
            data = b""
    # -D holds every response of a redirect chain: take the last head.
    heads = [h for h in raw.split("\r\n\r\n") if h.strip()]
    lines = heads[-1].split("\r\n")
    status = int(lines[0].split()[1])
    headers = {}
    for ln in lines[1:]:
        k, _, v = ln.partition(":")
        headers[k.strip().lower()] = v.strip()
    return status, headers, data, p.stderr.decode("utf-8", "replace")


@orcdtest.case
def curl_get(srv):
    status, h, body, _ = curl(srv, "/hello.txt")
    eq((status, body), (200, HELLO), "GET")
    eq(h.get("content-length"), "13", "Content-Length")
    eq(h.get("content-type", "").split(";")[0], "text/plain", "Content-Type")
    check("etag" in h and "last-modified" in h and "date" in h,
          "missing validators/Date: %r" % h)


@orcdtest.case
def curl_get_big(srv):
    status, h, body, _ = curl(srv, "/big.bin")
    with open(srv.path("big.bin"), "rb") as f:
        eq((status, body == f.read()), (200, True), "big.bin via curl")


@orcdtest.case
def curl_head(srv):
    # (curl -I writes the head to -o too: the body file says nothing.)
    status, h, body, _ = curl(srv, "/hello.txt", "-I")
    eq(status, 200, "HEAD")
    eq(h.get("content-length"), "13", "HEAD Content-Length")
    eq(h.get("accept-ranges"), "bytes", "Accept-Ranges")


@orcdtest.case
def curl_range(srv):
    status, h, body, _ = curl(srv, "/data.bin", "-r", "0-9")
    eq(status, 206, "range status")
    eq(body, bytes(range(10)), "range body")
    eq(h.get("content-range"), "bytes 0-9/1024", "Content-Range")
    status, h, body, _ = curl(srv, "/data.bin", "-r", "-4")
    eq((status, body), (206, bytes(range(252, 256))), "suffix range")


@orcdtest.case
def curl_http10(srv):
    status, h, body, _ = curl(srv, "/hello.txt", "--http1.0")
    eq((status, body), (200, HELLO), "HTTP/1.0")


@orcdtest.case
def curl_redirect(srv):
    status, h, body, _ = curl(srv, "/dir")
    eq(status, 301, "/dir")
    check(h.get("location", "").endswith("/dir/"),
          "Location %r" % h.get("location"))
    status, h, body, _ = curl(srv, "/dir", "-L")
    eq((status, body), (200, b"<p>dir index</p>\n"), "/dir followed")


@orcdtest.case
def curl_conditional(srv):
    status, h, _, _ = curl(srv, "/style.css")
    etag = h["etag"]
    status, h2, body, _ = curl(srv, "/style.css", "-H",
                               "If-None-Match: " + etag)
    eq((status, body), (304, b""), "If-None-Match via curl")
    status, _, _, _ = curl(srv, "/style.css", "-z", h["last-modified"])
    eq(status, 304, "curl -z Last-Modified")


@orcdtest.case
def curl_reuses_connection(srv):
    if not shutil.which("curl"):
        raise orcdtest.Skip("curl not installed")
    base = "http://127.0.0.1:%d" % srv.port
    p = subprocess.run(["curl", "-sS", "--max-time", "20", "-o", "/dev/null",
                        "-o", "/dev/null", "-o", "/dev/null", "-w",
                        "%{http_code} %{num_connects}\\n",
                        base + "/hello.txt", base + "/missing",
                        base + "/style.css"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=30)
    eq(p.returncode, 0, "curl exit (%s)" % p.stderr.decode().strip())
    got = p.stdout.decode().split()
    eq(got, ["200", "1", "404", "0", "200", "0"],
       "status and new connections per transfer")


@orcdtest.case
def curl_path_as_is_traversal(srv):
    if not shutil.which("curl"):
        raise orcdtest.Skip("curl not installed")
    url = "http://127.0.0.1:%d/../../../../etc/passwd" % srv.port
    p = subprocess.run(["curl", "-sS", "--max-time", "20", "--path-as-is",
                        "-w", "\\n%{http_code}", url],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=30)
    out = p.stdout
    check(b"root:" not in out, "/etc/passwd served")
    code = out.rsplit(b"\n", 1)[-1]
    check(code in (b"400", b"404"), "status %r" % code)


if __name__ == "__main__":
    sys.exit(orcdtest.run())
