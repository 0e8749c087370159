#!/bin/bash
# The benchmark's verdicts rest on bench/lib.sh's pairing (make bench's goals table,
# egressd_ab.sh): paired_ratios, paired_median and paired_range on hand-made rounds, with
# rounds that lack one side, a reference of 0, odd and even counts, another reference and
# no common round at all; and rotate_list's orders. Pure shell arithmetic (no network, no
# timing), under dash as bench/run.sh runs (sh) and under bash.
set -u
SRC=${EGRESS_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
LIB=$SRC/bench/lib.sh
[ -r "$LIB" ] || { echo "FAIL: $LIB missing"; exit 1; }
fail=0

# check SHELL DESCRIPTION EXPECTED COMMAND INPUT: COMMAND's output under SHELL, lib.sh
# sourced, INPUT (with backslash escapes, as printf %b reads them) on stdin
check() {
	got=$(printf '%b' "$5" | "$1" -c ". '$LIB'; $4")
	if [ "$got" = "$3" ]; then
		echo "ok: $1: $2"
	else
		echo "FAIL: $1: $2: expected [$3], got [$got]"
		fail=1
	fi
}

# Rounds 1-3 have both; round 4 only egressd; round 5 only the relay; round 6's relay
# measured 0 (left out rather than dividing by it); a peer in rounds 1-2.
R='relay 1 100\nrelay 2 200\nrelay 3 50\nrelay 5 70\nrelay 6 0\n'
R="$R"'egressd 1 80\negressd 2 170\negressd 3 45\negressd 4 10\negressd 6 30\n'
R="$R"'ats 1 160\nats 2 100\n'
for sh in dash bash; do
	command -v "$sh" >/dev/null || { echo "FAIL: $sh missing"; fail=1; continue; }
	check "$sh" "ratios of the common rounds, ascending" "$(printf '0.8\n0.85\n0.9')" \
	    "paired_ratios egressd" "$R"
	check "$sh" "median of three" "0.8500" "paired_median egressd" "$R"
	check "$sh" "spread of three" "0.8000 0.9000" "paired_range egressd" "$R"
	check "$sh" "median of two (the mean of the middle pair)" "1.1000" \
	    "paired_median egressd ats" "$R"
	check "$sh" "spread of two" "0.5000 1.7000" "paired_range egressd ats" "$R"
	check "$sh" "one round" "1.0000" "paired_median x" 'relay 1 4\nx 1 4\n'
	check "$sh" "no common round: median empty" "" "paired_median nobody" "$R"
	check "$sh" "no common round: spread empty" "" "paired_range nobody" "$R"
	check "$sh" "a bulk repetition is its own unit" "0.7500 1.5000" "paired_range e" \
	    'relay 1.1 2\nrelay 1.2 4\ne 1.1 3\ne 1.2 3\n'
	check "$sh" "rotate_list round 0" "a b c" "rotate_list 0 a b c" ''
	check "$sh" "rotate_list round 1" "b c a" "rotate_list 1 a b c" ''
	check "$sh" "rotate_list round 5" "c a b" "rotate_list 5 a b c" ''
done
[ $fail = 0 ] && echo "PASS: bench/lib.sh pairing" || echo "FAIL: bench/lib.sh pairing"
exit $fail
