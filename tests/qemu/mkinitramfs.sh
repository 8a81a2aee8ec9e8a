#!/bin/bash
# Build a guest initramfs: busybox-static, an init, and whatever else is asked for.
#
# usage: tests/qemu/mkinitramfs.sh OUT.cpio[.gz] [--init FILE] [--add SRC:DST]...
#                                  [--bin ELF[:DST]]... [--gzip]
#
#   --init FILE     becomes /init (default: tests/qemu/guest/init, the generic init
#                   that runs the payload named by orcd.run= on the kernel command line)
#   --add SRC:DST   copy a file or a directory tree to DST in the image
#   --bin ELF[:DST] copy a program (default DST /usr/bin/NAME) and, if it is
#                   dynamic, every shared library ldd reports for it, at the same path
#   --gzip          compress (also implied by an OUT ending in .gz)
#
# Output is a newc cpio owned by root. Nothing needs root to build it: /dev/console
# comes from the kernel's built-in initramfs.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
die() { echo "mkinitramfs: error: $*" >&2; exit 1; }
usage() { sed -n '4,5p' "$0" | sed 's/^# //' >&2; exit 2; }

out=
init=$here/guest/init
gzip=0
adds=()
bins=()
while [ $# -gt 0 ]; do
	case $1 in
	--init) [ $# -ge 2 ] || usage; init=$2; shift ;;
	--add) [ $# -ge 2 ] || usage; adds+=("$2"); shift ;;
	--bin) [ $# -ge 2 ] || usage; bins+=("$2"); shift ;;
	--gzip) gzip=1 ;;
	-h|--help) usage ;;
	-*) die "unknown option $1" ;;
	*) [ -z "$out" ] || usage; out=$1 ;;
	esac
	shift
done
[ -n "$out" ] || usage
case $out in *.gz) gzip=1 ;; esac
[ -f "$init" ] || die "init $init not found"

busybox=/bin/busybox
[ -x "$busybox" ] || die "$busybox missing (apt-get install busybox-static)"
if LC_ALL=C readelf -l "$busybox" 2>/dev/null | grep -q 'Requesting program interpreter'; then
	die "$busybox is dynamically linked; the guest needs busybox-static"
fi

stage=$(mktemp -d "${TMPDIR:-/tmp}/orcd-initramfs.XXXXXX")
trap 'rm -rf "$stage"' EXIT

mkdir -p "$stage"/{bin,sbin,usr/bin,usr/sbin,lib,lib64,etc,proc,sys,dev,tmp,run,root,var}
cp "$busybox" "$stage/bin/busybox"
# /init is a shell script: sh must exist before busybox --install runs
ln -s busybox "$stage/bin/sh"
install -m 0755 "$init" "$stage/init"
echo "root:x:0:0:root:/root:/bin/sh" >"$stage/etc/passwd"
echo "root:x:0:" >"$stage/etc/group"
printf '127.0.0.1\tlocalhost\n::1\tlocalhost\n' >"$stage/etc/hosts"

# Copy $1 to $stage$2, making parent directories.
put() {
	mkdir -p "$stage$(dirname "$2")"
	cp -a -L "$1" "$stage$2"
}

# Shared objects a dynamic ELF needs, as the host's loader resolves them.
libs_of() {
	LC_ALL=C ldd "$1" 2>/dev/null | awk '
		/=> \// { print $3; next }
		/^[ \t]*\/[^ ]+ \(0x/ { print $1 }'
}

for b in "${bins[@]}"; do
	src=${b%%:*}
	dst=${b#*:}
	[ "$dst" != "$b" ] || dst=/usr/bin/$(basename "$src")
	[ -f "$src" ] || die "--bin $src: no such file"
	put "$src" "$dst"
	while read -r lib; do
		[ -n "$lib" ] || continue
		[ -e "$stage$lib" ] || put "$lib" "$lib"
	done < <(libs_of "$src")
done

for a in "${adds[@]}"; do
	src=${a%%:*}
	dst=${a#*:}
	[ "$dst" != "$a" ] && [ -n "$dst" ] || die "--add needs SRC:DST, got $a"
	[ -e "$src" ] || die "--add $src: no such file"
	if [ -d "$src" ]; then
		mkdir -p "$stage$dst"
		cp -a -L "$src"/. "$stage$dst"/
	else
		put "$src" "$dst"
	fi
done

mkdir -p "$(dirname "$out")"
tmp=$out.tmp.$$
(
	cd "$stage"
	find . -mindepth 1 | LC_ALL=C sort |
		cpio -o -H newc --owner=0:0 --quiet
) | if [ $gzip = 1 ]; then gzip -6 -n; else cat; fi >"$tmp"
mv "$tmp" "$out"
echo "$out"
