#!/bin/bash
# The benchmark's verdicts rest on bench/lib.sh's pairing (make bench's goals table,
# egressd_ab.sh): paired_ratios, paired_median and paired_range on hand-made rounds, with
# rounds that lack one side, a reference of 0, odd and even counts, another reference and
# no common round at all; paired_ci's order-statistic intervals against their binomial
# coverage for 1, 3, 5, 9, 15 and 20 rounds; ci_side and ci_verdict for every operator
# and firmness; rotate_list's orders; pin_tree's affinities on a process of its own;
# egressd_ini's and egressd_grant's text; and free_port's choice of a loopback port.
# Shell arithmetic and affinities (no network, no timing), under dash as bench/run.sh runs
# (sh) and under bash.
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
	# paired_ci: rounds whose ratios are 1..n (the relay 1 in every round), given in
	# descending order
	rounds() { i=$1; while [ "$i" -ge 1 ]; do printf 'relay %d 1\\ne %d %d\\n' "$i" "$i" "$i"; i=$((i - 1)); done; }
	# n = 5: P(B <= 0) = 1/32, coverage 1 - 2/32 = 93.75%: the lowest and the highest
	check "$sh" "interval of 5 rounds: x(1)..x(5), 93%" "1.0000 5.0000 93" "paired_ci e" "$(rounds 5)"
	# n = 15: P(B <= 3) = 576/32768 -> 96.5%; k = 5 would give 88.2%
	check "$sh" "interval of 15 rounds: x(4)..x(12), 96%" "4.0000 12.0000 96" "paired_ci e" "$(rounds 15)"
	# n = 20: P(B <= 5) = 0.0207 -> 95.9%; k = 7 would give 88.5%
	check "$sh" "interval of 20 rounds: x(6)..x(15), 95%" "6.0000 15.0000 95" "paired_ci e" "$(rounds 20)"
	# n = 9: P(B <= 1) = 10/512 -> 96.1%; k = 3 would give 82.0%
	check "$sh" "interval of 9 rounds: x(2)..x(8), 96%" "2.0000 8.0000 96" "paired_ci e" "$(rounds 9)"
	check "$sh" "interval of 3 rounds: the extremes, 75%" "1.0000 3.0000 75" "paired_ci e" "$(rounds 3)"
	check "$sh" "interval of 1 round: 0%" "1.0000 1.0000 0" "paired_ci e" "$(rounds 1)"
	check "$sh" "interval: no common round" "" "paired_ci nobody" "$R"
	check "$sh" "ci_side le met" "met" "ci_side '1.05 1.14 93' le 1.15" ''
	check "$sh" "ci_side le at the bound is met" "met" "ci_side '1.05 1.15 93' le 1.15" ''
	check "$sh" "ci_side le open" "open" "ci_side '1.10 1.20 93' le 1.15" ''
	check "$sh" "ci_side le missed" "missed" "ci_side '1.16 1.30 93' le 1.15" ''
	check "$sh" "ci_side ge met" "met" "ci_side '0.85 0.95 93' ge 0.85" ''
	check "$sh" "ci_side ge open" "open" "ci_side '0.80 0.95 93' ge 0.85" ''
	check "$sh" "ci_side ge missed" "missed" "ci_side '0.70 0.84 93' ge 0.85" ''
	check "$sh" "ci_side lt at the bound is not met" "open" "ci_side '0.90 1.00 93' lt 1" ''
	check "$sh" "ci_side lt missed" "missed" "ci_side '1.00 1.20 93' lt 1" ''
	check "$sh" "ci_side gt met" "met" "ci_side '1.01 1.20 93' gt 1" ''
	check "$sh" "ci_side gt missed" "missed" "ci_side '0.80 1.00 93' gt 1" ''
	check "$sh" "ci_side without an interval" "open" "ci_side '' le 1.15" ''
	check "$sh" "ci_side below 90% coverage: open" "open" "ci_side '1.01 1.05 87' le 1.15" ''
	check "$sh" "ci_side at 90% coverage" "met" "ci_side '1.01 1.05 90' le 1.15" ''
	check "$sh" "ci_verdict yes, all met" "yes (firm)" "ci_verdict yes met met" ''
	check "$sh" "ci_verdict yes, one open" "yes (not firm)" "ci_verdict yes met open" ''
	check "$sh" "ci_verdict no, one missed" "no (firm)" "ci_verdict no open missed" ''
	check "$sh" "ci_verdict no, all open" "no (not firm)" "ci_verdict no open open" ''
	check "$sh" "ci_verdict without a figure" "—" "ci_verdict — open" ''
	check "$sh" "rotate_list round 0" "a b c" "rotate_list 0 a b c" ''
	check "$sh" "rotate_list round 1" "b c a" "rotate_list 1 a b c" ''
	check "$sh" "rotate_list round 5" "c a b" "rotate_list 5 a b c" ''
done

# pin_tree: a process and its child pinned to one CPU (the first this test may use), then
# back to the CPUs it had; a PID that is gone is an error, no PID is nothing to do.
# (Affinity only: no timing.) Skipped where taskset or ps is missing.
# shellcheck source=bench/lib.sh
. "$LIB"     # cpus_allowed, to read what pin_tree set
if command -v taskset >/dev/null 2>&1 && command -v ps >/dev/null 2>&1; then
	MINE=$(cpus_allowed $$)
	ONE=$(echo "$MINE" | sed 's/[-,].*//')
	child=""
	sh -c 'sleep 30 & wait' &
	parent=$!
	trap 'kill $child $parent 2>/dev/null' EXIT
	i=0
	while [ -z "$child" ] && [ $i -lt 50 ]; do
		child=$(ps -o pid= --ppid $parent 2>/dev/null | tr -d ' ')
		[ -n "$child" ] || sleep 0.1
		i=$((i + 1))
	done
	# pinned SHELL CPUS DESCRIPTION: pin_tree of the parent to CPUS, under SHELL, leaves the
	# parent and its child allowed exactly CPUS
	pinned() {
		if "$1" -c ". '$LIB'; pin_tree $parent '$2'" && [ "$(cpus_allowed $parent)" = "$2" ] &&
		    [ "$(cpus_allowed "$child")" = "$2" ]; then
			echo "ok: $1: pin_tree $3"
		else
			echo "FAIL: $1: pin_tree to $2: parent $(cpus_allowed $parent), child $(cpus_allowed "$child")"
			fail=1
		fi
	}
	for sh in dash bash; do
		if [ -z "$child" ]; then
			echo "FAIL: $sh: pin_tree: the test's child process did not start"
			fail=1
			break
		fi
		pinned "$sh" "$ONE" "pins a process and its child"
		pinned "$sh" "$MINE" "unpins them"
		check "$sh" "pin_tree without a PID does nothing" "0" "pin_tree '' 0; echo \$?" ''
	done
	kill $child $parent 2>/dev/null
	wait $parent 2>/dev/null
	for sh in dash bash; do
		check "$sh" "pin_tree of a process that is gone fails" "1" "pin_tree $parent $ONE 2>/dev/null; echo \$?" ''
	done
	trap - EXIT
else
	echo "skip: pin_tree (no taskset or ps here)"
fi
# egressd_ini and egressd_grant: the config text the bench's egressd starts from (egressd -t
# reads it in the runs: test_bench_placement.sh)
INI='[egressd]\ncontrol_socket = none\ndecision_log = /l\nlog_sync = batch\nmax_connections = 20000\nallow_special_address = 127.0.0.0/8\nsplice = on\n\n[listener a]\nlisten = 127.0.0.1:7\ngrant = a\n\n[grant a]\nallow = tcp://127.0.9.1:8\nconnections = 4096\npinning = required'
for sh in dash bash; do
	command -v "$sh" >/dev/null 2>&1 || continue
	check "$sh" "egressd_ini and egressd_grant write the bench's config" "$(printf '%b' "$INI")" \
	    "f=\$(mktemp) && egressd_ini \$f /l batch && egressd_grant \$f a 7 tcp://127.0.9.1:8 'pinning = required' && cat \$f; rm -f \$f" ''
done

# free_port: a port in use is skipped, the offset advances to the port given, and it wraps
# from 60000 to 21000 (a listener of the test's own on an ephemeral loopback port).
if command -v ss >/dev/null 2>&1 && command -v python3 >/dev/null 2>&1; then
	FP=$(mktemp /tmp/egress-freeport.XXXXXX) || exit 1
	python3 -c 'import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(1)
print(s.getsockname()[1], flush=True); time.sleep(60)' >"$FP" &
	lpid=$!
	i=0
	while [ ! -s "$FP" ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
	P=$(cat "$FP")
	if [ -n "$P" ]; then
		for sh in dash bash; do
			command -v "$sh" >/dev/null 2>&1 || continue
			check "$sh" "free_port skips a port in use and advances to the one it gives" "ok" \
			    "die() { echo died; exit 9; }; FREE_PORT_NEXT=$((P - 1)); free_port; [ \$PORT -gt $P ] && [ \$PORT = \$FREE_PORT_NEXT ] && echo ok" ''
			check "$sh" "free_port wraps from 60000 to 21000" "ok" \
			    "die() { echo died; exit 9; }; FREE_PORT_NEXT=60000; free_port; [ \$PORT -ge 21000 ] && [ \$PORT -lt 21500 ] && echo ok" ''
		done
	else
		echo "FAIL: free_port: the test's listener did not start"
		fail=1
	fi
	kill $lpid 2>/dev/null
	wait $lpid 2>/dev/null
	rm -f "$FP"
else
	echo "skip: free_port (no ss or python3 here)"
fi

[ $fail = 0 ] && echo "PASS: bench/lib.sh pairing" || echo "FAIL: bench/lib.sh pairing"
exit $fail
