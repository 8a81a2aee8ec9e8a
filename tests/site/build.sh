#!/usr/bin/env bash
# Lay out the sample site in OUTDIR: the static pages from this folder plus
# generated files of 0 B, 1 KiB, 16 KiB, 1 MiB and 64 MiB (not kept in git).
# Files already of the right size are left alone, so reruns are cheap.
set -euo pipefail
out=${1:?usage: tests/site/build.sh OUTDIR}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out/files"
cp -R "$here/static/." "$out/"
gen() {
	local name=$1 size=$2
	if [ "$(stat -c %s "$out/files/$name" 2>/dev/null || echo -1)" != "$size" ]; then
		head -c "$size" /dev/urandom >"$out/files/$name.tmp"
		mv "$out/files/$name.tmp" "$out/files/$name"
	fi
}
gen 0.bin 0
gen 1k.bin 1024
gen 16k.bin 16384
gen 1m.bin 1048576
gen 64m.bin 67108864
echo "$out"
