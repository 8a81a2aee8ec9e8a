#!/bin/bash
# Build the orcd guest kernel from Debian's linux-source-6.1.
#
# usage: kernel/build.sh [--debug] [--unpatched] [--jobs N]
#                        [--print-source-dir] [--print-headers-dir]
#
# Cache layout (outside the repository), $C = ${ORCD_CACHE:-$HOME/.cache/orcd}/kernel:
#   $C/linux-source-6.1   pristine tree, git branch "pristine" (one commit of the tarball)
#   $C/linux-orcd         git worktree, branch "orcd" = pristine + kernel/patches/*.patch (git am)
#   $C/build/<variant>    out-of-tree build dirs: unpatched, patched, debug (patched + debug.config)
#   $C/build/<variant>/usr/include   uapi headers (make headers_install)
#   $C/ccache             ccache directory
#
# Every step is skipped when its inputs have not changed, so a re-run is a
# no-op make. Progress goes to stderr (during make, a line every 20 s with
# the objects done: kernel/build-progress); the last line of stdout is the
# bzImage path (or, with --print-*, the requested directory).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cache=${ORCD_CACHE:-$HOME/.cache/orcd}/kernel
tarball=/usr/src/linux-source-6.1.tar.xz
pristine=$cache/linux-source-6.1
patched=$cache/linux-orcd

variant=patched
debug=0
unpatched=0
jobs=$(nproc)
print=

usage() {
	sed -n '4,5p' "$0" | sed 's/^# //' >&2
	exit 2
}

while [ $# -gt 0 ]; do
	case $1 in
	--debug) debug=1 ;;
	--unpatched) unpatched=1 ;;
	--jobs) [ $# -ge 2 ] || usage; jobs=$2; shift ;;
	--jobs=*) jobs=${1#--jobs=} ;;
	--print-source-dir) print=source ;;
	--print-headers-dir) print=headers ;;
	-h|--help) usage ;;
	*) echo "build.sh: unknown argument: $1" >&2; usage ;;
	esac
	shift
done

if [ $debug = 1 ] && [ $unpatched = 1 ]; then
	variant=debug-unpatched
elif [ $debug = 1 ]; then
	variant=debug
elif [ $unpatched = 1 ]; then
	variant=unpatched
fi
build=$cache/build/$variant

log() { echo "build.sh: $*" >&2; }
die() { echo "build.sh: error: $*" >&2; exit 1; }

# Run a command with its stdout sent to stderr, so stdout stays ours.
quiet() { "$@" >&2; }

ensure_packages() {
	local missing=()
	[ -f "$tarball" ] || missing+=(linux-source-6.1)
	local tool pkg
	for tool in flex:flex bison:bison bc:bc ccache:ccache cpio:cpio \
		    xz:xz-utils pahole:dwarves gcc:gcc make:make; do
		command -v "${tool%%:*}" >/dev/null || missing+=("${tool#*:}")
	done
	[ -f /usr/include/libelf.h ] || missing+=(libelf-dev)
	[ -f /usr/include/openssl/ssl.h ] || missing+=(libssl-dev)
	[ ${#missing[@]} -eq 0 ] && return
	log "installing ${missing[*]}"
	quiet apt-get install -y "${missing[@]}"
}

git_src() { git -C "$pristine" "$@"; }

pristine_current() {
	local stamp=$pristine/.git/orcd-tarball
	[ -f "$stamp" ] && [ "$(cat "$stamp")" = "$(stat -c '%s %Y' "$tarball")" ]
}

# Unpack the tarball once and commit it as-is on branch "pristine".
ensure_pristine() {
	local stamp=$pristine/.git/orcd-tarball want
	want=$(stat -c '%s %Y' "$tarball")
	pristine_current && return
	log "unpacking $tarball into $cache"
	rm -rf "$pristine" "$patched" "$cache/build" "$cache/state"
	mkdir -p "$cache"
	tar -C "$cache" -xJf "$tarball"
	[ -d "$pristine" ] || die "$tarball did not unpack to linux-source-6.1/"
	git_src init -q -b pristine
	git_src config user.name "orcd build"
	git_src config user.email "orcd-build@localhost"
	git_src config gc.auto 0
	# Debian's top-level .gitignore ignores every top-level path: force.
	git_src add -f -A .
	git_src commit -q -m "linux-source-6.1 $(dpkg-query -W -f='${Version}' linux-source-6.1 2>/dev/null || true) (pristine)"
	echo "$want" >"$stamp"
}

patches_hash() {
	{
		git_src rev-parse pristine
		cat "$here"/patches/*.patch 2>/dev/null || true
	} | sha256sum | cut -d' ' -f1
}

patched_current() {
	local stamp=$cache/state/patched.hash
	[ -d "$patched" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$(patches_hash)" ]
}

# Worktree "linux-orcd" on branch "orcd": pristine + the series, rebuilt
# only when the series (or the pristine commit) changed.
ensure_patched() {
	local want stamp=$cache/state/patched.hash
	want=$(patches_hash)
	patched_current && return
	mkdir -p "$cache/state"
	if [ ! -d "$patched" ]; then
		quiet git_src worktree prune
		quiet git_src worktree add -q -f "$patched" pristine
	fi
	local gp=(git -C "$patched")
	if [ -n "$("${gp[@]}" status --porcelain --untracked-files=no)" ]; then
		die "$patched has uncommitted changes; commit or discard them first"
	fi
	"${gp[@]}" am --abort >/dev/null 2>&1 || true
	log "applying kernel/patches to a fresh branch orcd"
	# checkout rewrites only the files that differ, so make rebuilds little.
	quiet "${gp[@]}" checkout -q -f -B orcd pristine
	local p n=0
	for p in "$here"/patches/[0-9]*.patch; do
		[ -e "$p" ] || continue
		case $(basename "$p") in 0000-*) continue ;; esac
		quiet "${gp[@]}" am -q --whitespace=nowarn "$p" ||
			die "git am failed on $(basename "$p")"
		n=$((n + 1))
	done
	log "applied $n patches"
	echo "$want" >"$stamp"
}

# Every CONFIG_ line of the fragments must come out of Kconfig unchanged.
verify_config() {
	local frag line sym val got bad=0
	for frag in "$@"; do
		while IFS= read -r line; do
			case $line in
			CONFIG_*=*) sym=${line%%=*}; val=${line#*=} ;;
			"# CONFIG_"*" is not set") sym=${line#\# }; sym=${sym%% *}; val=n ;;
			*) continue ;;
			esac
			got=$(grep -E "^$sym=|^# $sym is not set" "$build/.config" || true)
			case $got in
			"$sym=$val") ;;
			"# $sym is not set") [ "$val" = n ] || { log "$(basename "$frag"): $sym=$val requested, not set"; bad=1; } ;;
			"") [ "$val" = n ] || { log "$(basename "$frag"): $sym=$val requested, not set"; bad=1; } ;;
			*) log "$(basename "$frag"): $sym=$val requested, got ${got#*=}"; bad=1 ;;
			esac
		done <"$frag"
	done
	[ $bad = 0 ] || die "required config options were dropped (see above)"
}

configure() {
	local frags=("$here/config/guest.config")
	[ $debug = 1 ] && frags+=("$here/config/debug.config")
	local want stamp=$build/.orcd-config.hash
	want=$( { git -C "$src" rev-parse HEAD; cat "${frags[@]}"; } | sha256sum | cut -d' ' -f1)
	if [ -f "$build/.config" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
		return
	fi
	log "configuring $variant: tinyconfig + ${frags[*]##*/}"
	mkdir -p "$build"
	# Kconfig only rebuilds what changed symbols touch, so regenerating
	# an identical .config costs nothing but these few seconds.
	local cfglog=$build/.orcd-config.log
	if ! { make -s -C "$src" O="$build" "${mkargs[@]}" tinyconfig &&
	       (cd "$build" && "$src/scripts/kconfig/merge_config.sh" -m \
			-O "$build" "$build/.config" "${frags[@]}") &&
	       make -s -C "$src" O="$build" "${mkargs[@]}" olddefconfig; } \
	       >"$cfglog" 2>&1; then
		cat "$cfglog" >&2
		die "configuration failed (log: $cfglog)"
	fi
	verify_config "${frags[@]}"
	echo "$want" >"$stamp"
}

# The objects of a complete build of this variant, for build-progress: the
# count its last complete build left, else the count measured for the guest
# configuration (1339, patched and unpatched alike, 2026-12-04); none for the
# debug variants before their first build.
objects_estimate() {
	local f=$cache/state/objects-$variant
	if [ -s "$f" ]; then
		cat "$f"
		return
	fi
	case $variant in
	patched|unpatched) echo 1339 ;;
	esac
}

# Wait for a lock, saying why when it is not free at once.
lock() {
	flock -n "$@" && return
	log "waiting for another build.sh using $cache"
	flock "$@"
}

ensure_packages
# Concurrent callers (CI, the QEMU harness, a developer) share the cache:
# the source trees are held shared while anything builds from them and
# exclusive only while they are (re)created; each build dir is held by
# one build at a time. A no-op run never waits for another variant.
mkdir -p "$cache"
exec 8>"$cache/.src.lock"
lock -s 8
if ! pristine_current || { [ $unpatched = 0 ] && ! patched_current; }; then
	lock -x 8
	ensure_pristine
	[ $unpatched = 1 ] || ensure_patched
	lock -s 8
fi
if [ $unpatched = 1 ]; then
	src=$pristine
else
	src=$patched
fi

if [ "$print" = source ]; then
	echo "$src"
	exit 0
fi

export CCACHE_DIR=$cache/ccache
export CCACHE_BASEDIR=$cache
export CCACHE_NOHASHDIR=1
mkdir -p "$CCACHE_DIR"
mkargs=(CC="ccache gcc" HOSTCC="ccache gcc" -j"$jobs")

mkdir -p "$build"
exec 9>"$build.lock"
lock 9

# What the tree is: its commit plus any local changes (sources here only
# change through git).
tree_state() {
	git -C "$src" rev-parse HEAD
	git -C "$src" status --porcelain --untracked-files=no
}

if [ "$print" = headers ]; then
	# Headers need no .config; skip them too when the tree is unchanged.
	hstamp=$build/.orcd-headers.hash
	want=$(tree_state | sha256sum | cut -d' ' -f1)
	if ! [ -d "$build/usr/include" ] || ! [ -f "$hstamp" ] ||
	   [ "$(cat "$hstamp")" != "$want" ]; then
		quiet make -s -C "$src" O="$build" "${mkargs[@]}" headers_install INSTALL_HDR_PATH="$build/usr"
		echo "$want" >"$hstamp"
	fi
	echo "$build/usr/include"
	exit 0
fi

configure

# Tree state + config identify the inputs; when they match the last
# successful build, even the ~20 s no-op make is skipped.
bzimage=$build/arch/x86/boot/bzImage
built=$build/.orcd-built.hash
inputs=$( { tree_state; cat "$build/.orcd-config.hash"; } | sha256sum | cut -d' ' -f1)
if [ -f "$bzimage" ] && [ -f "$built" ] && [ "$(cat "$built")" = "$inputs" ]; then
	log "$variant is up to date"
else
	start=$(date +%s)
	log "building $variant in $build (make -j$jobs)"
	rm -f "$built"
	# make -s prints nothing for the ~17 minutes of a cold build on 2
	# cores: kernel/build-progress says how far it is every 20 s.
	total=$(objects_estimate)
	quiet "$here/build-progress" --label "build.sh: building $variant" ${total:+--total "$total"} \
		"$build" -- make -s -C "$src" O="$build" "${mkargs[@]}" bzImage
	quiet make -s -C "$src" O="$build" "${mkargs[@]}" headers_install INSTALL_HDR_PATH="$build/usr"
	mkdir -p "$cache/state"
	find "$build" -name '*.o' | wc -l >"$cache/state/objects-$variant"
	echo "$inputs" >"$built"
	log "done in $(( $(date +%s) - start ))s; headers in $build/usr/include"
fi

mkdir -p "$cache/state"
status=$cache/status.txt
touch "$status"
{
	grep -v -E "^($variant|src|headers-$variant)=" "$status" || true
	echo "$variant=$bzimage"
	echo "headers-$variant=$build/usr/include"
	[ $unpatched = 1 ] || echo "src=$src"
} >"$status.new"
mv "$status.new" "$status"

echo "$bzimage"
