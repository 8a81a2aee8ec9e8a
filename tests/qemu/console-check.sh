#!/bin/bash
# Judge a guest console log: TAP results per program, kernel splats, final status.
#
# usage: tests/qemu/console-check.sh LOG [--program NAME]... [--require-skip NAME]...
#                                    [--forbid-skip NAME]... [--no-status]
#
# Each --program must appear between "ORCD-GUEST: begin NAME" and
# "ORCD-GUEST: end NAME rc=N" (as printed by a payload), with a TAP plan and
# one result per planned test; rc must be 0 or 4 (kselftest skip).
# --require-skip NAME: NAME must report at least one SKIP (feature absent).
# --forbid-skip NAME: NAME must report no SKIP (the kernel has every feature it
# probes for, so a probe that finds one missing is a regression).
# Any kernel splat (BUG, WARNING, Oops, KASAN, lockdep, hung task, panic...) fails,
# and so does a missing "ORCD-GUEST: status=0" (unless --no-status).
# Prints one line per program and per problem, then a last line
#   counts: PASSED FAILED SKIPPED
# where FAILED includes missing results and problems. Exit 0 only if FAILED is 0.
set -euo pipefail

log=
progs=()
needskip=()
noskip=()
status=1
while [ $# -gt 0 ]; do
	case $1 in
	--program) progs+=("${2:?}"); shift ;;
	--require-skip) needskip+=("${2:?}"); shift ;;
	--forbid-skip) noskip+=("${2:?}"); shift ;;
	--no-status) status=0 ;;
	-*) echo "console-check: unknown option $1" >&2; exit 2 ;;
	*) log=$1 ;;
	esac
	shift
done
[ -f "$log" ] || { echo "console-check: no log $log" >&2; exit 2; }

# Serial consoles add CRs and SeaBIOS adds escape sequences.
sed -e 's/\r//g' -e 's/\x1b\[[0-9;?]*[A-Za-z]//g' "$log" |
awk -v progs="${progs[*]}" -v needskip="${needskip[*]}" -v noskip="${noskip[*]}" \
	-v want_status=$status '
BEGIN {
	np = split(progs, plist, " ")
	split(needskip, s, " ")
	for (i in s) mustskip[s[i]] = 1
	split(noskip, s, " ")
	for (i in s) mustrun[s[i]] = 1
	splat = "(BUG:|WARNING:|Oops|KASAN|UBSAN:|kernel BUG at|general protection fault|" \
		"Unable to handle kernel|Kernel panic|possible circular locking|" \
		"possible recursive locking|inconsistent lock state|suspicious RCU usage|" \
		"DEBUG_LOCKS_WARN_ON|INFO: task|INFO: rcu|hung_task|soft lockup|" \
		"hard LOCKUP|Call Trace:|list_add corruption|list_del corruption)"
	cur = ""
}
$0 ~ splat {
	if (nsplat < 20) splats[++nsplat] = $0
	else nsplat++
}
/ORCD-GUEST: begin / {
	cur = $0; sub(/.*ORCD-GUEST: begin /, "", cur); sub(/[ \t].*/, "", cur)
	began[cur] = 1
	next
}
/ORCD-GUEST: end / {
	name = $0; sub(/.*ORCD-GUEST: end /, "", name); sub(/[ \t].*/, "", name)
	rc = $0; sub(/.*rc=/, "", rc); sub(/[^0-9].*/, "", rc)
	ended[name] = 1; rcs[name] = rc
	if ($0 ~ /secs=[0-9]/) {
		t = $0; sub(/.*secs=/, "", t); sub(/[^0-9].*/, "", t); secs[name] = t
	}
	cur = ""
	next
}
/ORCD-GUEST: status=/ {
	st = $0; sub(/.*ORCD-GUEST: status=/, "", st); sub(/[^0-9].*/, "", st)
	gotstatus = 1; finalstatus = st
	next
}
cur != "" && /^1\.\.[0-9]+/ { plan[cur] = substr($1, 4) + 0; next }
cur != "" && /^# / { diag2 = diag1; diag1 = $0; next }
cur != "" && /^not ok [0-9]+/ {
	fail[cur]++
	failed[cur, fail[cur]] = (diag2 != "" ? "  " diag2 "\n    " : "") \
		(diag1 != "" ? "  " diag1 "\n    " : "") $0
	diag1 = diag2 = ""
	next
}
cur != "" && /^ok [0-9]+/ {
	diag1 = diag2 = ""
	if ($0 ~ /# *[Ss][Kk][Ii][Pp]/) skip[cur]++
	else pass[cur]++
	next
}
END {
	P = F = S = 0
	for (i = 1; i <= np; i++) {
		n = plist[i]
		p = pass[n] + 0; f = fail[n] + 0; k = skip[n] + 0
		got = p + f + k
		line = sprintf("%-24s %3d passed, %d failed, %d skipped", n, p, f, k)
		if (n in secs) line = line sprintf(" (%d s)", secs[n])
		if (!(n in began)) {
			line = line "  (never started)"; f++
		} else {
			if (!(n in plan)) { line = line "  (no TAP plan)"; f++ }
			else if (got < plan[n]) {
				line = line sprintf("  (%d of %d results missing)", plan[n] - got, plan[n])
				f += plan[n] - got
			}
			if (!(n in ended)) { line = line "  (did not finish)"; f++ }
			else if (rcs[n] != "0" && rcs[n] != "4") {
				line = line sprintf("  (exit status %s)", rcs[n])
				if (fail[n] == 0) f++
			}
		}
		if ((n in mustskip) && k == 0) { line = line "  (no SKIP on a kernel without the feature)"; f++ }
		if ((n in mustrun) && k > 0) { line = line "  (SKIP on a kernel with every feature)"; f++ }
		print line
		for (j = 1; j <= fail[n]; j++) print "    " failed[n, j]
		P += p; F += f; S += k
	}
	if (nsplat) {
		print "kernel splat: " nsplat " suspicious console line(s):"
		for (j = 1; j <= nsplat && j <= 20; j++) print "    " splats[j]
		F++
	}
	if (want_status && !gotstatus) { print "no ORCD-GUEST: status line (guest hung, crashed or timed out)"; F++ }
	else if (want_status && finalstatus != "0") { print "guest payload status " finalstatus; if (F == 0) F++ }
	print "counts: " P " " F " " S
	exit F ? 1 : 0
}'
