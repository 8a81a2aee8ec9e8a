#!/usr/bin/env bash
# The main job: orcd serving the sample site while wrk drives it.
#   ./demo.sh [options]          orcd on the patched kernel in QEMU, wrk on the host
#   ./demo.sh --host [options]   orcd on this machine's kernel (quick)
# Options:
#   --engine auto|specific|direct|epoll   (default specific in QEMU, auto on the host)
#   --duration SECONDS                    wrk run time (default 10)
#   --connections N                       wrk connections (default 64)
#   --file PATH                           URL path wrk fetches (default /files/1k.bin)
#   --port PORT                           127.0.0.1 port (default 8080)
#   --keep                                keep serving after wrk until Ctrl-C
#   --chain                               stat_cache 0: every request is the
#                                         linked open-read-send-close chain
set -euo pipefail
cd "$(dirname "$0")"

mode=qemu engine= duration=10 conns=64 file=/files/1k.bin port=8080 keep=0 chain=0
while [ $# -gt 0 ]; do
	case $1 in
	--host) mode=host ;;
	--engine) engine=$2; shift ;;
	--duration) duration=$2; shift ;;
	--connections) conns=$2; shift ;;
	--file) file=$2; shift ;;
	--port) port=$2; shift ;;
	--keep) keep=1 ;;
	--chain) chain=1 ;;
	-h|--help) sed -n '2,15p' "$0"; exit 0 ;;
	*) echo "demo.sh: unknown option $1" >&2; exit 2 ;;
	esac
	shift
done

if [ "$mode" = qemu ]; then
	tests/install-deps.sh
	exec tests/qemu/run-demo --engine "${engine:-specific}" --duration "$duration" \
		--connections "$conns" --file "$file" --port "$port" \
		$([ "$keep" = 1 ] && echo --keep) $([ "$chain" = 1 ] && echo --chain)
fi
engine=${engine:-auto}
cache=${ORCD_CACHE:-$HOME/.cache/orcd}
tests/install-deps.sh --build
command -v wrk >/dev/null || tests/install-deps.sh --build wrk
cmake -S . -B build-release -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build-release -j "$(nproc)" --target orcd >/dev/null
site=$(tests/site/build.sh "$cache/site")

url="http://127.0.0.1:$port$file"
conf=conf/orcd.conf
if [ "$chain" = 1 ]; then
	conf=$cache/demo-chain.conf
	{ cat conf/orcd.conf; echo 'stat_cache 0;'; } >"$conf"
fi
build-release/orcd --root "$site" --listen "127.0.0.1:$port" --engine "$engine" \
	--threads 2 -c "$conf" &
pid=$!
trap 'kill -TERM $pid 2>/dev/null; wait $pid 2>/dev/null' EXIT
deadline=$((SECONDS + 15))
until curl -fsS -o /dev/null "$url"; do
	kill -0 $pid 2>/dev/null || { echo "demo.sh: orcd exited" >&2; exit 1; }
	[ $SECONDS -lt $deadline ] || { echo "demo.sh: orcd did not answer" >&2; exit 1; }
	sleep 0.1
done
echo "orcd (pid $pid) serves $site on http://127.0.0.1:$port/"
wrk -t2 -c"$conns" -d"${duration}s" --latency "$url"
if [ "$keep" = 1 ]; then
	echo "serving until Ctrl-C: http://127.0.0.1:$port/"
	wait $pid
fi
