#!/usr/bin/env bash
# The whole test suite, as CI runs it (.ci/run calls exactly this).
#   ./test.sh           everything: unit + e2e (release and ASan/UBSan builds),
#                       fuzzers, kernel selftests and orcd in QEMU
#   ./test.sh --quick   unit + e2e on the host only (release build; no soak,
#                       systemd, package or script tests, which need the
#                       packages only the full tests/install-deps.sh installs)
# Build trees go to build*/ here; kernel trees and images to ~/.cache/orcd.
set -uo pipefail
cd "$(dirname "$0")" || exit 1
quick=0
[ "${1:-}" = "--quick" ] && quick=1

if [ "$quick" = 1 ]; then
	tests/install-deps.sh --build || exit 1
else
	tests/install-deps.sh || exit 1
fi

jobs=$(nproc)
total=0
failed=0
skipped=0
summary=()
case_skips=()

# run_ctest NAME BUILD_DIR [cmake args...]: configure, build, ctest; tally.
run_ctest() {
	local name=$1 dir=$2
	shift 2
	echo "=== $name: configure and build in $dir" >&2
	local log
	log=$(mktemp)
	if ! cmake -S . -B "$dir" "$@" >"$log" 2>&1; then
		cat "$log" >&2
		rm -f "$log"
		summary+=("$name: configure FAILED")
		failed=$((failed + 1)); total=$((total + 1))
		return
	fi
	rm -f "$log"
	if ! cmake --build "$dir" -j "$jobs"; then
		summary+=("$name: build FAILED")
		failed=$((failed + 1)); total=$((total + 1))
		return
	fi
	local out
	out=$(mktemp)
	ctest --test-dir "$dir" --output-on-failure -j "$jobs" 2>&1 | tee "$out"
	local line n f s
	line=$(grep -E 'tests passed, [0-9]+ tests failed out of [0-9]+' "$out" | tail -1)
	n=$(sed -nE 's/.*failed out of ([0-9]+).*/\1/p' <<<"$line")
	f=$(sed -nE 's/.* ([0-9]+) tests failed out of.*/\1/p' <<<"$line")
	# ctest counts a skipped test (SKIP_RETURN_CODE) among the passed.
	s=$(grep -cE '^ *[0-9]+/[0-9]+ Test +#[0-9]+: .*\*\*\*Skipped' "$out")
	if [ -z "$n" ]; then
		summary+=("$name: ctest produced no summary")
		failed=$((failed + 1)); total=$((total + 1))
	else
		total=$((total + n)); failed=$((failed + f)); skipped=$((skipped + s))
		summary+=("$name: $((n - f - s)) of $n passed, $s skipped")
	fi
	rm -f "$out"
	# A test program that passes may still have skipped some of its
	# cases ("ok - CASE # SKIP why"): name them, or they go unseen. (A
	# program ctest counts as skipped, exit 77, says why the same way and
	# is listed too.) The unit tests' cmocka says "[  SKIPPED ] name".
	local cases
	cases=$(grep -hE '^ok - .* # SKIP |^\[  SKIPPED \] ' \
		"$dir/Testing/Temporary/LastTest.log" 2>/dev/null |
		grep -v 'test(s), listed below' | sort -u)
	if [ -n "$cases" ]; then
		case_skips+=("--- $name:" "$cases")
		summary+=("$name: $(wc -l <<<"$cases") SKIP lines in the tests' output (listed above)")
	fi
}

# The QEMU tests build the kernels (kernel/build.sh; cold, ~17 min on 2
# cores) inside ctest, which shows a test's output only once it has ended.
# Build them here first, where build.sh's progress lines (objects done of
# the total and the time, every 20 s) reach the terminal; in ctest they are
# then up to date.
if [ "$quick" = 0 ]; then
	for variant in "" --unpatched; do
		echo "=== kernel: kernel/build.sh $variant" >&2
		if ! kernel/build.sh $variant >/dev/null; then
			summary+=("kernel/build.sh $variant: FAILED")
			failed=$((failed + 1)); total=$((total + 1))
		fi
	done
fi

# Both options every time: the build tree is shared, and its cache would
# otherwise keep what the last run chose.
run_ctest "release" build -DORCD_QEMU_TESTS=$((1 - quick)) -DORCD_QUICK_TESTS=$quick
if [ "$quick" = 0 ]; then
	run_ctest "asan+ubsan" build-asan -DORCD_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug
	CC=clang run_ctest "fuzz" build-fuzz -DORCD_FUZZ=ON -DORCD_E2E=OFF -DCMAKE_C_COMPILER=clang
fi

if [ "${#case_skips[@]}" -gt 0 ]; then
	echo
	echo "=== SKIP lines in the tests' output"
	printf '%s\n' "${case_skips[@]}"
fi
echo
echo "=== summary"
printf '%s\n' "${summary[@]}"
echo "$((total - failed - skipped)) passed, $skipped skipped, $failed failed"
[ "$failed" -eq 0 ]
