#!/bin/bash
# Boot a kernel + initramfs in QEMU with the serial console on stdout and in a log.
#
# usage: tests/qemu/boot.sh --kernel BZIMAGE --initrd CPIO [--log FILE] [--timeout S]
#          [--hostfwd tcp:127.0.0.1:HOSTPORT-:GUESTPORT]... [--append ARGS]
#          [--mem MB] [--smp N] [--accel auto|kvm|tcg] [--quiet] [--share DIR]
#
# - --share DIR exports DIR to the guest over 9p (virtio, mount tag "share").
# - Networking is QEMU user mode (virtio-net) with restrict=on: the guest reaches
#   nothing outside; only the --hostfwd rules, bound to 127.0.0.1, come in.
#   Inside a container (Dockerfile.qemu) the environment may opt in with
#   ORCD_HOSTFWD_ADDR=0.0.0.0, so that `docker run -p` reaches a forward: only
#   then is a tcp:0.0.0.0:HOSTPORT-:GUESTPORT rule accepted. ORCD_HOSTFWD_ADDR
#   must be unset, 127.0.0.1 or 0.0.0.0.
# - --accel auto (default) uses KVM only if a short probe boot under KVM reaches
#   the kernel; the answer is cached in ${ORCD_CACHE:-$HOME/.cache/orcd}/qemu/.
#   On these machines KVM hangs after the BIOS, so the probe is bounded
#   (ORCD_KVM_PROBE_TIMEOUT, default 10 s) and TCG is the usual result.
# - --timeout (default 600 s) kills QEMU; the exit status is then 124.
# - SIGTERM, SIGINT or SIGHUP stops QEMU (SIGTERM, SIGKILL 5 s later); boot.sh
#   then ends of that signal (a shell caller sees 128+N). When boot.sh's
#   caller dies, or boot.sh is SIGKILLed, a watchdog stops QEMU within about
#   a second.
# - Exit status is QEMU's (0 after the guest powers off).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cache=${ORCD_CACHE:-$HOME/.cache/orcd}/qemu
qemu=${QEMU:-qemu-system-x86_64}

die() { echo "boot.sh: error: $*" >&2; exit 2; }
log() { echo "boot.sh: $*" >&2; }
usage() { sed -n '4,6p' "$0" | sed 's/^# //' >&2; exit 2; }

kernel= initrd= logf= timeout=600 append= mem=512 smp=2 accel=auto quiet=0
fwds=()
share_args=()
while [ $# -gt 0 ]; do
	case $1 in
	--kernel) kernel=${2:?}; shift ;;
	--initrd) initrd=${2:?}; shift ;;
	--log) logf=${2:?}; shift ;;
	--timeout) timeout=${2:?}; shift ;;
	--hostfwd) fwds+=("${2:?}"); shift ;;
	--append) append="$append ${2:?}"; shift ;;
	--mem) mem=${2:?}; shift ;;
	--smp) smp=${2:?}; shift ;;
	--accel) accel=${2:?}; shift ;;
	--quiet) quiet=1 ;;
	--share)
		[ -d "${2:?}" ] || die "--share: no such directory: $2"
		share_args=(-virtfs "local,path=$2,mount_tag=share,security_model=none,id=share")
		shift ;;
	-h|--help) usage ;;
	*) die "unknown argument $1" ;;
	esac
	shift
done
[ -f "$kernel" ] || die "--kernel: no such file: $kernel"
[ -f "$initrd" ] || die "--initrd: no such file: $initrd"
command -v "$qemu" >/dev/null || die "$qemu missing (apt-get install qemu-system-x86)"

fwd_addr=${ORCD_HOSTFWD_ADDR:-127.0.0.1}
case $fwd_addr in
127.0.0.1) fwd_rx='127\.0\.0\.1' ;;
0.0.0.0) fwd_rx='(127\.0\.0\.1|0\.0\.0\.0)' ;;
*) die "ORCD_HOSTFWD_ADDR must be 127.0.0.1 or 0.0.0.0, got $fwd_addr" ;;
esac
netdev=user,id=net0,restrict=on
for f in "${fwds[@]}"; do
	# only ever listen on the host's loopback (or, opted in, a container's 0.0.0.0)
	[[ $f =~ ^(tcp|udp):$fwd_rx:[0-9]+-:[0-9]+$ ]] ||
		die "--hostfwd must look like tcp:$fwd_addr:HOSTPORT-:GUESTPORT, got $f"
	netdev+=",hostfwd=$f"
done

# Does KVM get a kernel running? Bounded, cached per host kernel and QEMU.
kvm_works() {
	[ -c /dev/kvm ] && [ -r /dev/kvm ] && [ -w /dev/kvm ] || return 1
	local key file out rc
	key="$(uname -r) $("$qemu" --version | head -1)"
	file=$cache/kvm-probe
	if [ -f "$file" ] && [ "$(sed -n 1p "$file")" = "$key" ]; then
		[ "$(sed -n 2p "$file")" = kvm ]
		return
	fi
	mkdir -p "$cache"
	out=$(mktemp "${TMPDIR:-/tmp}/orcd-kvm-probe.XXXXXX")
	rc=0
	# No initrd: the kernel boots, finds no root and panics; panic=-1 with
	# -no-reboot makes QEMU exit. A KVM that hangs never prints the banner.
	timeout -k 2 "${ORCD_KVM_PROBE_TIMEOUT:-10}" "$qemu" -accel kvm -cpu host \
		-m 256 -smp 1 -nographic -no-reboot -monitor none -nodefaults \
		-serial "file:$out" -kernel "$kernel" \
		-append "console=ttyS0 panic=-1 root=/dev/nonexistent" \
		</dev/null >/dev/null 2>&1 || rc=$?
	local result=tcg
	if [ $rc -ne 124 ] && [ $rc -ne 137 ] && grep -q 'Linux version' "$out"; then
		result=kvm
	fi
	rm -f "$out"
	printf '%s\n%s\n' "$key" "$result" >"$file"
	log "KVM probe: $result (cached in $file)"
	[ $result = kvm ]
}

case $accel in
auto) if kvm_works; then accel=kvm; else accel=tcg; fi ;;
kvm|tcg) ;;
*) die "--accel must be auto, kvm or tcg" ;;
esac
if [ $accel = kvm ]; then
	accel_args=(-accel kvm -cpu host)
else
	accel_args=(-accel tcg,thread=multi -cpu max)
fi

[ -n "$logf" ] || logf=$(mktemp "${TMPDIR:-/tmp}/orcd-guest.XXXXXX.log")
mkdir -p "$(dirname "$logf")"
: >"$logf"
log "booting $(basename "$kernel") under $accel (${smp} CPUs, ${mem} MB, timeout ${timeout}s); console log $logf"

# Every forwarded connection is a socket in QEMU: the e2e suite holds
# 10,000 at once, beyond the usual soft limit of 1024.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

# QEMU runs in the background so that the traps below run at once: SIGTERM,
# SIGINT or SIGHUP to boot.sh stops it (TERM through timeout, which passes
# it on and sends KILL 5 s later) before boot.sh ends of that signal. timeout puts
# itself and QEMU in a process group of their own, which a terminal's Ctrl-C
# to the caller's group does not reach, so boot.sh is what must stop them.
# A watchdog stops them too when boot.sh or its caller is gone (SIGKILL),
# instead of QEMU running on until --timeout.
qpid= sig= watchdog=
stop_qemu() { [ -z "$qpid" ] || kill -TERM "$qpid" 2>/dev/null || true; }
trap 'sig=TERM; stop_qemu' TERM
trap 'sig=INT; stop_qemu' INT
trap 'sig=HUP; stop_qemu' HUP
# The watchdog is stopped and reaped on the way out, its sleep with it: a
# child left to die after boot.sh would be a zombie of whatever reaps
# orphans (a container's init may never).
stop_watchdog() {
	[ -z "$watchdog" ] || { kill "$watchdog" 2>/dev/null; wait "$watchdog"; } || true
	watchdog=
}
trap stop_watchdog EXIT

# The console goes through a pipe to the log (and stdout unless --quiet); the
# sink ignores SIGINT and SIGHUP (and tee a reader gone from stdout) so that
# the log gets QEMU's last words after a Ctrl-C or a hangup.
if [ $quiet = 1 ]; then
	exec 3> >(trap '' INT HUP; exec cat >>"$logf")
else
	exec 3> >(trap '' INT HUP; exec tee -p -a "$logf")
fi
sink=$!
set +e
timeout -k 5 "$timeout" "$qemu" "${accel_args[@]}" -m "$mem" -smp "$smp" \
	-nographic -no-reboot -nodefaults -monitor none -serial stdio \
	-kernel "$kernel" -initrd "$initrd" \
	-append "console=ttyS0 panic=-1 $append" \
	-netdev "$netdev" -device virtio-net-pci,netdev=net0 \
	-device virtio-rng-pci "${share_args[@]}" \
	</dev/null >&3 2>&1 3>&- &
qpid=$!
exec 3>&-
[ -z "$sig" ] || stop_qemu  # a signal came before QEMU had started

# The watchdog: once a second, is boot.sh still running (not a zombie its
# parent has yet to reap) with the same parent?
caller=$PPID
(
	# A terminal's Ctrl-C or hangup to the caller's group is boot.sh's to
	# answer (its traps stop QEMU, then stop_watchdog this): ignored
	# here, and by the sleep, which would otherwise die apart from its
	# parent and be reaped by whatever reaps orphans. (bash already
	# ignores SIGINT in a background subshell; SIGHUP it does not.)
	trap - EXIT
	trap '' INT HUP
	nap=
	trap '[ -z "$nap" ] || kill "$nap" 2>/dev/null; wait; exit 0' TERM
	while :; do
		sleep 1 &
		nap=$!
		wait "$nap"
		nap=
		read -r stat <"/proc/$$/stat" || break
		set -- ${stat##*) }
		[ "$1" != Z ] && [ "$2" = "$caller" ] || break
	done
	kill -TERM "$qpid" 2>/dev/null
) </dev/null >/dev/null 2>&1 &
watchdog=$!

# wait returns early (>128) when a trapped signal arrives: wait again until
# timeout (and so QEMU) has ended.
wait "$qpid"
rc=$?
while [ -n "$sig" ] && kill -0 "$qpid" 2>/dev/null; do
	wait "$qpid"
	r=$?
	[ $r = 127 ] && break
	rc=$r
done
qpid=
wait "$sink" 2>/dev/null
set -e
if [ -n "$sig" ]; then
	log "stopped QEMU on SIG$sig"
	# End of the same signal, so that a calling shell sees a Ctrl-C as
	# one and stops too (an exit 130 would let it carry on); 128+N where
	# the signal does not end us.
	stop_watchdog
	trap - "$sig"
	kill -s "$sig" $$
	exit $((128 + $(kill -l "$sig")))
fi
if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
	log "timeout: QEMU killed after ${timeout}s"
	exit 124
fi
exit "$rc"
