#!/usr/bin/env bash
# The main job: orcd serving the sample site while wrk drives it.
#   ./demo.sh [options]          orcd on the patched kernel in QEMU, wrk on the host
#   ./demo.sh --host [options]   orcd on this machine's kernel (quick)
# Either prints wrk's result, then orcd's counters (its metrics page).
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

mode=qemu engine='' duration=10 conns=64 file=/files/1k.bin port=8080 keep=0 chain=0
while [ $# -gt 0 ]; do
	case $1 in
	--engine|--duration|--connections|--file|--port)
		if [ $# -lt 2 ]; then
			echo "demo.sh: $1 needs a value (try --help)" >&2
			exit 2
		fi ;;
	esac
	case $1 in
	--host) mode=host ;;
	--engine) engine=$2; shift ;;
	--duration) duration=$2; shift ;;
	--connections) conns=$2; shift ;;
	--file) file=$2; shift ;;
	--port) port=$2; shift ;;
	--keep) keep=1 ;;
	--chain) chain=1 ;;
	-h|--help) sed -n '2,16p' "$0"; exit 0 ;;
	*) echo "demo.sh: unknown option $1" >&2; exit 2 ;;
	esac
	shift
done

if [ "$mode" = qemu ]; then
	tests/install-deps.sh
	more=()
	[ "$keep" = 0 ] || more+=(--keep)
	[ "$chain" = 0 ] || more+=(--chain)
	exec tests/qemu/run-demo --engine "${engine:-specific}" --duration "$duration" \
		--connections "$conns" --file "$file" --port "$port" "${more[@]}"
fi
engine=${engine:-auto}
cache=${ORCD_CACHE:-$HOME/.cache/orcd}
tests/install-deps.sh --build
command -v wrk >/dev/null || tests/install-deps.sh --build wrk
cmake -S . -B build-release -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build-release -j "$(nproc)" --target orcd >/dev/null
site=$(tests/site/build.sh "$cache/site")

url="http://127.0.0.1:$port$file"
# The shipped configuration with the metrics page on, on a free loopback
# port, for the counters the QEMU mode prints too (tests/qemu/run-demo).
mport=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
conf=$cache/demo-host.conf
{
	cat conf/orcd.conf
	echo 'metrics on;'
	echo "metrics_listen 127.0.0.1:$mport;"
	if [ "$chain" = 1 ]; then echo 'stat_cache 0;'; fi
} >"$conf"
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
# The series run-demo shows (its SHOWN), name and value, sorted by name.
shown='orcd_info|orcd_requests_total|orcd_connections_accepted_total'
shown+='|orcd_body_cache_hits_total|orcd_sendfile_bodies_total'
shown+='|orcd_chains_submitted_total|orcd_chains_completed_total'
shown+='|orcd_chains_in_flight_peak|orcd_slots_in_use|orcd_slots_peak'
shown+='|orcd_slot_waits_total|orcd_ebusy_total|orcd_chain_outcomes_total'
shown+='|orcd_submits_total'
echo
echo "orcd's counters:"
curl -fsS "http://127.0.0.1:$mport/metrics" |
	awk -v re="^($shown)" '$0 ~ re { v = $NF; sub(/ [^ ]*$/, "")
		printf "  %-55s %s\n", $0, v }' | sort
if [ "$keep" = 1 ]; then
	echo "serving until Ctrl-C: http://127.0.0.1:$port/"
	wait $pid
fi
