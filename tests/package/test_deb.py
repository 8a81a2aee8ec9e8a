#!/usr/bin/env python3
"""The Debian package, end to end, on this machine: cpack -G DEB from a tree
configured for /usr, which lintian passes (no error, no warning, no hardening
tag), then dpkg -i; the installed units pass `systemd-analyze verify`;
`orcd --check-config` accepts the shipped /etc/orcd/orcd.conf (read by
default, no -c); the installed binary serves a file on 127.0.0.1; the
installed /etc/logrotate.d/orcd parses and rotates the access log where
the unit's LogsDirectory= puts it; an edited conffile survives `dpkg -r`;
`dpkg -P` leaves nothing behind, neither the package's files nor the logs
and enablement links that running and enabling orcd make, nor a /var/www
that postinst made.

It installs into the real system (as CI does, root on Debian 12), so it skips
where that could harm: not root, or an orcd package or any of its paths
already present. Whatever happens, it purges what it installed. Exit 77
(ctest SKIP_RETURN_CODE) with the reason on a skip. Runs once (ctest
package/test_deb), not per engine."""

import fcntl
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "e2e"))
from orcdtest import Conn, TestFailure, build_request, free_port, \
    wait_until  # noqa: E402

BUILD = os.environ.get("ORCD_BUILD_DIR", "build")
SOURCE = os.environ.get("ORCD_SOURCE_DIR",
                        os.path.join(os.path.dirname(__file__), "..", ".."))
CMAKE = os.environ.get("ORCD_CMAKE", "cmake")
CPACK = os.environ.get("ORCD_CPACK",
                       os.path.join(os.path.dirname(CMAKE), "cpack"))
SKIP = 77

BINARY = "/usr/sbin/orcd"
CONF = "/etc/orcd/orcd.conf"
LOGROTATE = "/etc/logrotate.d/orcd"
UNITDIR = "/lib/systemd/system"
UNITS = ("orcd.service", "orcd.socket", "orcd-metrics.socket")
MAN = ("/usr/share/man/man8/orcd.8.gz", "/usr/share/man/man5/orcd.conf.5.gz")
DOC = "/usr/share/doc/orcd"
WWW = "/var/www/orcd"
# postinst makes /var/www too where it is missing; a purge removes it again
# while it is empty (conf/deb/postrm).
WWW_PARENT = os.path.dirname(WWW)
# Where LogsDirectory=orcd lands with DynamicUser=yes.
LOGS = ("/var/log/private/orcd", "/var/log/orcd")
# Paths this test must find absent before it installs anything.
OURS = (BINARY, "/etc/orcd", LOGROTATE, DOC, WWW) + \
    tuple(os.path.join(UNITDIR, u) for u in UNITS) + MAN + LOGS
# Searched for names containing "orcd" before the install and after the
# purge; the two lists must be equal.
TRACES = ("/etc", "/lib/systemd", "/usr/lib/systemd", "/usr/sbin",
          "/usr/share/man", "/usr/share/doc", "/var/log", "/var/lib/dpkg/info",
          "/var/lib/systemd", "/var/www")

results = []


def case(name, ok, why=""):
    results.append(bool(ok))
    print(("ok - %s" % name) if ok else ("not ok - %s: %s" % (name, why)))
    sys.stdout.flush()
    return ok


def skip(why):
    print("SKIP: " + why)
    sys.exit(SKIP)


def run(cmd, timeout=300, **kw):
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, timeout=timeout, **kw)


def lexists(p):
    return os.path.lexists(p)


def dpkg_status():
    p = run(["dpkg-query", "-W", "-f=${db:Status-Abbrev}", "orcd"])
    return p.stdout.strip() if p.returncode == 0 else ""


def traces():
    found = set()
    for top in TRACES:
        for d, dirs, files in os.walk(top):
            for n in dirs + files:
                if "orcd" in n:
                    found.add(os.path.join(d, n))
    return found


def project_version():
    with open(os.path.join(SOURCE, "CMakeLists.txt")) as f:
        m = re.search(r"project\(orcd VERSION ([0-9.]+)", f.read())
    return m.group(1)


def get(port, path):
    """GET path from the installed orcd; None while it does not answer."""
    try:
        with Conn(("127.0.0.1", port), timeout=5) as c:
            c.send(build_request("GET", path))
            return c.read_response()
    except OSError:
        return None


def build_package(work):
    """cpack -G DEB in a tree of its own, configured as the README says."""
    tree = os.path.join(work, "tree")
    os.makedirs(tree)
    for cmd in ([CMAKE, "-S", SOURCE, "-B", tree, "-DCMAKE_INSTALL_PREFIX=/usr",
                 "-DCMAKE_BUILD_TYPE=Release", "-DORCD_E2E=OFF",
                 "-DCMAKE_SKIP_INSTALL_ALL_DEPENDENCY=ON"],
                [CMAKE, "--build", tree, "-j", str(os.cpu_count() or 2),
                 "--target", "orcd"],
                [CPACK, "-G", "DEB"]):
        p = run(cmd, cwd=tree)
        if p.returncode:
            case("build the package: " + " ".join(cmd[:2]), False, p.stdout)
            return None
    deb = os.path.join(tree, "orcd_%s_amd64.deb" % project_version())
    if not case("cpack -G DEB made %s" % os.path.basename(deb),
                os.path.isfile(deb), "not there: " + " ".join(os.listdir(tree))):
        return None
    return deb


def check_package(deb, work):
    p = run(["dpkg-deb", "-c", deb])
    listed = set(re.sub(r"^\./", "/", line.split()[-1]).rstrip("/")
                 for line in p.stdout.splitlines())
    want = [BINARY, CONF, LOGROTATE] + \
        [os.path.join(UNITDIR, u) for u in UNITS] + \
        list(MAN) + [DOC + "/copyright", DOC + "/changelog.gz"]
    case("binary, config, logrotate rule, units, gzipped man pages, "
         "copyright and changelog in the package",
         not [w for w in want if w not in listed],
         "missing: %s" % [w for w in want if w not in listed])
    # Debian policy 12.1 (pages compressed) and FHS / lintian
    # dir-or-file-in-var-www (postinst makes the root instead).
    bad = sorted(x for x in listed if x.startswith("/var/www")
                 or re.match(r"/usr/share/man/.*\.[0-9]$", x))
    case("nothing under /var/www, no uncompressed man page", not bad,
         "in the package: %s" % bad)
    x = os.path.join(work, "x")
    run(["dpkg-deb", "-x", deb, x])
    p = run(["dpkg-parsechangelog", "-l", "-", "-S", "Version"],
            input=run(["gzip", "-dc", x + DOC + "/changelog.gz"]).stdout)
    case("changelog.gz names this version (%s)" % project_version(),
         p.stdout.strip() == project_version(),
         "dpkg-parsechangelog: %s" % p.stdout.strip())
    with open(x + DOC + "/copyright") as f:
        text = f.read()
    case("copyright: machine-readable, Expat",
         text.startswith("Format: https://www.debian.org/doc/packaging-"
                         "manuals/copyright-format/1.0/")
         and "\nLicense: Expat\n" in text, text[:200])
    p = run(["dpkg-deb", "-I", deb, "conffiles"])
    case("conffiles: %s %s" % (CONF, LOGROTATE),
         p.stdout.split() == [CONF, LOGROTATE], p.stdout)
    p = run(["dpkg-deb", "-f", deb, "Depends"])
    deps = dict((d.split()[0], d) for d in p.stdout.strip().split(", "))
    # Versions only dpkg-shlibdeps writes: it read the libraries' symbols.
    shlib = [d for d in ("libc6", "liburing2", "libev4", "libsystemd0")
             if not re.match(r"\S+ \(>= [^)]+\)$", deps.get(d, ""))]
    case("Depends from dpkg-shlibdeps (libc6, liburing2, libev4, "
         "libsystemd0, versioned) and media-types",
         not shlib and "media-types" in deps,
         "Depends: %s" % p.stdout.strip())
    check_lintian(deb)


def check_lintian(deb):
    """Debian 12's lintian: no error or warning, and not even an
    informational hardening tag (CMakeLists.txt builds with Debian's
    hardening flags)."""
    if not shutil.which("lintian"):
        case("lintian is installed (tests/install-deps.sh installs it)", False,
             "not on PATH")
        return
    p = run(["lintian", "--fail-on", "error,warning", "--pedantic", "-I",
             deb], timeout=300)
    tags = [t for t in p.stdout.splitlines() if re.match(r"[EWIPXO]: ", t)]
    bad = [t for t in tags if t[0] in "EW" or "hardening-" in t]
    case("lintian: no error, no warning, no hardening tag",
         p.returncode == 0 and not bad,
         "exit %d:\n%s" % (p.returncode, "\n".join(tags) or p.stdout))


def check_installed(work):
    case("postinst made the shipped root %s" % WWW, os.path.isdir(WWW),
         "missing")
    p = run(["dpkg-query", "-W", "-f=${Conffiles}", "orcd"])
    for f in (CONF, LOGROTATE):
        case("dpkg knows %s as a conffile" % f,
             re.search(r"^ %s [0-9a-f]{32}$" % re.escape(f), p.stdout, re.M),
             p.stdout)
    if shutil.which("logrotate"):
        p = run(["logrotate", "-d", "-s", os.path.join(work, "lr.state"),
                 LOGROTATE])
        case("logrotate -d %s: parses" % LOGROTATE,
             p.returncode == 0 and not re.search(r"^error", p.stdout, re.M),
             "exit %d: %s" % (p.returncode, p.stdout))
    else:
        print("ok - logrotate -d %s # SKIP logrotate not installed "
              "(tests/install-deps.sh installs it)" % LOGROTATE)
    units = [os.path.join(UNITDIR, u) for u in UNITS]
    p = run(["systemd-analyze", "verify"] + units)
    case("systemd-analyze verify: installed units clean",
         p.returncode == 0 and not p.stdout.strip(),
         "exit %d: %s" % (p.returncode, p.stdout))
    p = run([BINARY, "--check-config"])
    case("orcd --check-config: the shipped %s" % CONF,
         p.returncode == 0 and ("configuration %s is valid" % CONF)
         in p.stdout, "exit %d: %s" % (p.returncode, p.stdout))

    site = os.path.join(work, "site")
    os.makedirs(site)
    body = b"served by the packaged orcd\n" + os.urandom(64).hex().encode()
    with open(os.path.join(site, "check.txt"), "wb") as f:
        f.write(body)
    port = free_port()
    # The shipped configuration, read by default, with root and listen
    # overridden: its own root and port are the administrator's.
    proc = subprocess.Popen([BINARY, "--root", site, "--listen",
                             "127.0.0.1:%d" % port],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        try:
            r = wait_until(lambda: proc.poll() is None and
                           get(port, "/check.txt"), 20, "orcd to answer")
            case("the installed orcd serves a file on 127.0.0.1:%d" % port,
                 r.status == 200 and r.body == body, "got %r" % r)
        except TestFailure as e:
            case("the installed orcd serves a file on 127.0.0.1:%d" % port,
                 False, "%s (orcd exit %s)" % (e, proc.poll()))
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            out = proc.communicate(timeout=30)[0]
        except subprocess.TimeoutExpired:
            proc.kill()
            out = proc.communicate()[0]
    case("orcd exits 0 on SIGTERM", proc.returncode == 0,
         "exit %s: %s" % (proc.returncode, out.decode(errors="replace")))


def make_logs_dir(made):
    """LOGS as systemd makes them for DynamicUser=yes + LogsDirectory=orcd:
    /var/log/private root-only (0700; systemd refuses to run such a service
    under a more permissive one), orcd's directory in it, /var/log/orcd a
    link to that. What did not exist is appended to made, parents first."""
    private = os.path.dirname(LOGS[0])
    if not lexists(private):
        os.mkdir(private, 0o700)
        made.append(private)
        os.chmod(private, 0o700)  # whatever the umask
    os.mkdir(LOGS[0], 0o755)
    made.append(LOGS[0])
    with open(os.path.join(LOGS[0], "access.log"), "w") as f:
        f.write('127.0.0.1 - - [04/Dec/2026:00:00:00 +0000] "GET / HTTP/1.1" '
                '200 0 "-" "-"\n')
    os.symlink("private/orcd", LOGS[1])
    made.append(LOGS[1])


def remove_made(made):
    """Undo make_logs_dir where the purge did not: the logs and the link
    wholly, a parent directory the test made only while it is empty."""
    for p in reversed(made):
        if os.path.islink(p):
            os.unlink(p)
        elif p in LOGS:
            shutil.rmtree(p, ignore_errors=True)
        else:
            try:
                os.rmdir(p)
            except OSError:
                pass


def use_like_a_service(made):
    """What enabling and running the service leave outside the file list
    (what the test itself made is appended to made)."""
    if shutil.which("systemctl"):
        p = run(["systemctl", "enable"] + list(UNITS))
        links = [t for t in traces() if t.startswith("/etc/systemd/system/")
                 and os.path.islink(t)]
        case("systemctl enable %s: %d links" % (" ".join(UNITS), len(links)),
             p.returncode == 0 and len(links) == len(UNITS), p.stdout)
    make_logs_dir(made)


def rotate(work):
    """The installed rule on the real layout (/var/log/orcd a link to
    /var/log/private/orcd, root-only): orcd is not running, so postrotate
    signals nothing and must not fail."""
    if not shutil.which("logrotate"):
        print("ok - logrotate -f %s # SKIP logrotate not installed"
              % LOGROTATE)
        return
    p = run(["logrotate", "-f", "-s", os.path.join(work, "lr.state"),
             LOGROTATE])
    log = os.path.join(LOGS[1], "access.log")
    case("logrotate -f %s: %s.1 made, no error" % (LOGROTATE, log),
         p.returncode == 0 and not p.stdout.strip()
         and os.path.isfile(log + ".1") and not lexists(log),
         "exit %d: %s; %s holds %s" % (p.returncode, p.stdout, LOGS[0],
                                       os.listdir(LOGS[0])))


def remove_and_purge(before, www_parent_before):
    files = run(["dpkg", "-L", "orcd"]).stdout.split()
    with open(CONF, "a") as f:
        f.write("# edited by tests/package/test_deb.py\n")
    p = run(["dpkg", "-r", "orcd"])
    case("dpkg -r orcd", p.returncode == 0, p.stdout)
    kept = os.path.isfile(CONF) and "edited by" in open(CONF).read()
    case("dpkg -r: binary gone, the edited conffile kept (%s)" % dpkg_status(),
         not lexists(BINARY) and kept and dpkg_status() == "rc",
         "binary there: %s, conffile kept: %s" % (lexists(BINARY), kept))
    p = run(["dpkg", "-P", "orcd"])
    case("dpkg -P orcd", p.returncode == 0, p.stdout)
    left = [f for f in files if lexists(f) and not os.path.isdir(f)]
    left += [d for d in ("/etc/orcd", LOGROTATE, DOC, WWW)
             + LOGS if lexists(d)]
    # /var/www, when postinst made it (it was not there before).
    if not www_parent_before and lexists(WWW_PARENT):
        left.append(WWW_PARENT)
    new = sorted(traces() - before)
    case("dpkg -P: nothing left (package files, logs, enablement links)",
         not left and not new and dpkg_status() == "",
         "left: %s; new paths naming orcd: %s; status %r"
         % (left, new, dpkg_status()))


def main():
    if os.geteuid() != 0:
        skip("needs root: it installs the package with dpkg -i")
    for tool in ("dpkg", "dpkg-deb", "dpkg-shlibdeps", "systemd-analyze"):
        if not shutil.which(tool):
            skip("%s is not installed" % tool)
    if not os.access(CPACK, os.X_OK):
        skip("no cpack beside %s" % CMAKE)
    # Two runs at once (two build trees) would purge each other's install.
    lock = open("/run/lock/orcd-test-deb.lock", "w")
    fcntl.flock(lock, fcntl.LOCK_EX)
    if dpkg_status():
        skip("an orcd package is known to dpkg here (%s); the test would "
             "replace and purge it" % dpkg_status())
    there = [p for p in OURS if lexists(p)]
    if there:
        skip("the package's paths exist already: %s" % " ".join(there))

    before = traces()
    www_parent_before = lexists(WWW_PARENT)
    work = tempfile.mkdtemp(prefix="orcd-deb-")
    made = []
    try:
        deb = build_package(work)
        if deb:
            print("# %s: %d bytes" % (os.path.basename(deb),
                                      os.path.getsize(deb)))
            check_package(deb, work)
            p = run(["dpkg", "-i", deb])
            if case("dpkg -i %s" % os.path.basename(deb), p.returncode == 0,
                    p.stdout):
                check_installed(work)
                use_like_a_service(made)
                rotate(work)
                remove_and_purge(before, www_parent_before)
    finally:
        if dpkg_status():
            run(["dpkg", "-P", "orcd"])
        # The test's own traces (logs, enablement links), should the purge
        # have failed to remove them, and an empty /var/www postinst made.
        remove_made(made)
        for p in sorted(t for t in traces() - before
                        if t.startswith("/etc/systemd/system/")
                        and os.path.islink(t)):
            os.unlink(p)
        if not www_parent_before:
            try:
                os.rmdir(WWW_PARENT)
            except OSError:
                pass
        shutil.rmtree(work, ignore_errors=True)
    print("%d passed, %d failed" % (results.count(True),
                                    results.count(False)))
    return 0 if results and all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
