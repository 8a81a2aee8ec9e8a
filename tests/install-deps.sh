#!/usr/bin/env bash
# Install every Debian package orcd needs to build, test, benchmark and boot
# its kernel in QEMU. Idempotent: packages already present are skipped, and
# apt-get runs only when something is missing.
#   tests/install-deps.sh            everything
#   tests/install-deps.sh --build    just what building and host tests need
#   tests/install-deps.sh --build P… that and the packages named (demo.sh --host: wrk)
set -euo pipefail

# file: cpack's DEB generator needs it (README, "Debian package").
build=(build-essential cmake pkg-config git clang libclang-rt-14-dev
       liburing-dev libev-dev libsystemd-dev libcmocka-dev media-types
       python3 curl file)
# man-db: `systemd-analyze verify` (tests/systemd, tests/package) runs man
# for each Documentation=man: page, and a minimal image has no man.
runtime=(wrk nginx lighttpd h2o strace gnuplot-nox systemd lintian logrotate
         man-db)
kernel=(linux-source-6.1 flex bison bc libelf-dev libssl-dev ccache cpio rsync
        xz-utils dwarves kmod qemu-system-x86 busybox-static)

want=("${build[@]}")
if [ "${1:-}" = "--build" ]; then
	want+=("${@:2}")
else
	want+=("${runtime[@]}" "${kernel[@]}")
fi

missing=()
for p in "${want[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
		missing+=("$p")
done
if [ "${#missing[@]}" -eq 0 ]; then
	exit 0
fi
echo "install-deps: installing ${missing[*]}" >&2
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
# Debian starts nginx, lighttpd and h2o on port 80 when they are installed; the
# benchmarks start their own instances, so the system ones stay out of the way.
for svc in nginx lighttpd h2o; do
	if printf '%s\n' "${missing[@]}" | grep -qx "$svc"; then
		$SUDO systemctl disable --now "$svc" >/dev/null 2>&1 || true
	fi
done
