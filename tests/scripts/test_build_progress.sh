#!/bin/bash
# kernel/build-progress against a fake make that writes *.o files into a
# temporary folder: the progress lines, their period, the exit status, and
# that nothing is left running after make ends or the script is stopped.
# No kernel is built. Last line: "N passed, N failed".
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
bp=$root/kernel/build-progress
tmp=$(mktemp -d /tmp/orcd-build-progress.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
passed=0 failed=0
ok() { passed=$((passed + 1)); echo "ok - $1"; }
not_ok() { failed=$((failed + 1)); echo "not ok - $1"; [ -z "${2:-}" ] || sed 's/^/#   /' "$2"; }

# fake-make DIR N DELAY [RC]: N objects, one every DELAY seconds, then exit RC.
cat >"$tmp/fake-make" <<'EOF'
#!/bin/bash
for i in $(seq "$2"); do sleep "$3"; : >"$1/obj$i.o"; done
exit "${4:-0}"
EOF
chmod +x "$tmp/fake-make"

# 1. A cold build: every line "N/TOTAL objects (P%), XmYs elapsed", N rising.
d=$tmp/cold; mkdir "$d"
"$bp" --interval 0.5 --total 40 "$d" -- "$tmp/fake-make" "$d" 20 0.1 2>"$tmp/cold.err"
rc=$?
re='^kernel build: ([0-9]+)/40 objects \(([0-9]+)%\), 0m[0-9]s elapsed$'
lines=$(wc -l <"$tmp/cold.err")
bad=$(grep -cvE "$re" "$tmp/cold.err")
counts=$(sed -nE "s#$re#\1#p" "$tmp/cold.err" | tr '\n' ' ')
rising=1 prev=0
for c in $counts; do [ "$c" -ge $prev ] || rising=0; prev=$c; done
if [ $rc = 0 ] && [ "$lines" -ge 2 ] && [ "$bad" = 0 ] && [ $rising = 1 ]; then
	ok "cold build: $lines lines, objects $counts of 40"
else
	not_ok "cold build: exit $rc, $lines lines, $bad malformed, counts $counts" "$tmp/cold.err"
fi
# 2. A line at least every interval: 3 s of make, interval 1 s.
d=$tmp/period; mkdir "$d"
s=$(date +%s%N)
"$bp" --interval 1 --total 100 "$d" -- "$tmp/fake-make" "$d" 6 0.5 2>"$tmp/period.err"
secs=$(( ($(date +%s%N) - s) / 1000000000 ))
lines=$(wc -l <"$tmp/period.err")
if [ "$lines" -ge $((secs - 1)) ] && [ "$lines" -ge 2 ] && [ "$lines" -le "$secs" ]; then
	ok "interval 1 s over ${secs} s of make: $lines lines"
else
	not_ok "interval 1 s over ${secs} s of make: $lines lines" "$tmp/period.err"
fi

# 3. An incremental build (the folder already holds the objects): the line
# counts what make writes now, not the total.
d=$tmp/incr; mkdir "$d"
for i in $(seq 40); do : >"$d/old$i.o"; done
sleep 0.01 # -newer compares mtimes: the old objects must be older than the stamp
"$bp" --interval 0.5 --total 40 "$d" -- "$tmp/fake-make" "$d" 4 0.3 2>"$tmp/incr.err"
if [ -s "$tmp/incr.err" ] &&
   ! grep -qvE '^kernel build: [0-4] objects compiled, 0m[0-9]s elapsed$' "$tmp/incr.err"; then
	ok "incremental build: $(tail -n 1 "$tmp/incr.err")"
else
	not_ok "incremental build" "$tmp/incr.err"
fi

# 4. make's exit status is the script's, as soon as make ends (not at the
# end of the interval: 5 s here, for ~0.1 s of make).
d=$tmp/fail; mkdir "$d"
s=$(date +%s%N)
"$bp" --interval 5 --total 10 "$d" -- "$tmp/fake-make" "$d" 1 0.1 3 2>/dev/null
rc=$?
ms=$(( ($(date +%s%N) - s) / 1000000 ))
if [ $rc = 3 ] && [ $ms -lt 2500 ]; then
	ok "a failing make's status comes back (3) when it ends (${ms} ms)"
else
	not_ok "status $rc (want 3) after ${ms} ms (want < 2500)"
fi

# 5. SIGTERM (and the like) stops make and the reporter; nothing is left.
d=$tmp/term; mkdir "$d"
"$bp" --interval 0.77 --total 10 "$d" -- "$tmp/fake-make" "$d" 1000 0.2 2>"$tmp/term.err" &
pid=$!
deadline=$((SECONDS + 10))
until [ -e "$d/obj2.o" ] || [ $SECONDS -ge $deadline ]; do sleep 0.05; done
kill -TERM $pid
wait $pid
rc=$?
left=
deadline=$((SECONDS + 5))
while :; do
	left=$(pgrep -f "$tmp/fake-make|^sleep 0.77$" | tr '\n' ' ')
	[ -n "$left" ] && [ $SECONDS -lt $deadline ] || break
	sleep 0.05
done
if [ $rc = 143 ] && [ -z "$left" ]; then
	ok "SIGTERM: exit 143, make and the reporter gone"
else
	not_ok "SIGTERM: exit $rc, still running: ${left:-nothing}"
	[ -z "$left" ] || kill $left 2>/dev/null
fi

# 6. Without a total there is no percentage.
d=$tmp/nototal; mkdir "$d"
"$bp" --interval 0.4 "$d" -- "$tmp/fake-make" "$d" 5 0.2 2>"$tmp/nototal.err"
if [ -s "$tmp/nototal.err" ] &&
   ! grep -qvE '^kernel build: [0-5] objects compiled, 0m[0-9]s elapsed$' "$tmp/nototal.err"; then
	ok "no total: $(tail -n 1 "$tmp/nototal.err")"
else
	not_ok "no total" "$tmp/nototal.err"
fi

echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
