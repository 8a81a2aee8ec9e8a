#!/bin/bash
# demo.sh's command line, before it installs or boots anything: --help,
# an unknown option, and each option that takes a value given none (which
# once died on bash's "unbound variable" instead of a usage line). Last
# line: "N passed, N failed".
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
demo=$root/demo.sh
tmp=$(mktemp -d /tmp/orcd-demo-args.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
passed=0 failed=0
ok() { passed=$((passed + 1)); echo "ok - $1"; }
not_ok() { failed=$((failed + 1)); echo "not ok - $1"; [ -z "${2:-}" ] || sed 's/^/#   /' "$2"; }

# expect WHAT RC PATTERN ARGS...: exit status RC, PATTERN on stderr+stdout.
expect() {
	local what=$1 want=$2 pattern=$3 rc
	shift 3
	"$demo" "$@" >"$tmp/out" 2>&1
	rc=$?
	if [ "$rc" = "$want" ] && grep -qE -- "$pattern" "$tmp/out"; then
		ok "$what"
	else
		echo "# exit $rc, want $want; output:" >>"$tmp/out"
		not_ok "$what" "$tmp/out"
	fi
}

expect "--help prints the usage" 0 '^#   --engine ' --help
expect "an unknown option is exit 2, named" 2 'unknown option --bogus' --bogus
for opt in --engine --duration --connections --file --port; do
	expect "$opt without a value is exit 2, named" 2 \
		"^demo.sh: $opt needs a value" --host "$opt"
done

echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
