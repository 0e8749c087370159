#!/bin/bash
# bench/placement.sh runs and reports what it says it does: a smoke test of the script, not
# of timing (no figure is asserted). Inside a network namespace of its own (loopback only):
# one run of a fresh relay with 0 and with 3 µs of work, of a fresh per-CPU relay
# (PL_PERCPU=1) and of a fresh egressd, 50 transactions each; every run prints its p50 and its migrations per transaction with no
# errors, the summary counts one run per target, nothing it started is left running, and a
# bad argument is refused. Needs root for the namespace (exit 77 otherwise).
set -u
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root (network namespace)"; exit 77; }
BD=${EGRESS_BINARY_DIR:?EGRESS_BINARY_DIR unset}
SRC=${EGRESS_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
for b in bench/egrelay bench/egorigin bench/egload egressd/egressd; do
	[ -x "$BD/$b" ] || { echo "FAIL: $BD/$b is not built"; exit 1; }
done
[ -r /proc/self/sched ] || { echo "SKIP: no /proc/PID/sched (CONFIG_SCHED_DEBUG)"; exit 77; }
T=$(mktemp -d /tmp/egress-placement-test.XXXXXX) || exit 1
trap 'rm -rf "$T"' EXIT

# shellcheck disable=SC2016
timeout -k 5 120 unshare -n bash -c '
set -u
BD=$1 SRC=$2 T=$3
ip link set lo up || exit 1
TMPDIR=$T PL_N=50 PL_PERCPU=1 PL_EGRESSD="$BD/egressd/egressd" sh "$SRC/bench/placement.sh" "$BD" 1 0 3 >"$T/out" 2>"$T/err"
rc=$?
cat "$T/out"
fail=0
[ $rc = 0 ] || { echo "FAIL: placement.sh exited $rc: $(tail -3 "$T/err")"; fail=1; }
for t in relay-w0 relay-w3 relay-percpu egressd; do
	grep -Eq "^$t run 1: p50 [0-9]+ µs, migrations per transaction [0-9]+\.[0-9]{2}, errors 0$" "$T/out" ||
	    { echo "FAIL: no run line for $t"; fail=1; }
	grep -Eq "^  $t +[01] of 1; following: .*; staying: .*$" "$T/out" ||
	    { echo "FAIL: no summary line for $t"; fail=1; }
done
# nothing it started is left: no socket listens in this namespace (origin, relays,
# egressd), no egressd of its scratch folder runs, and the folder is gone
if ss -Hltn | grep -q .; then
	echo "FAIL: placement.sh left listeners: $(ss -Hltn | tr -s " " | head -3)"; fail=1
fi
if pgrep -f "$T/egress-placement\." >/dev/null; then
	echo "FAIL: placement.sh left egressd running"; fail=1
fi
ls -d "$T"/egress-placement.* 2>/dev/null | grep -q . && { echo "FAIL: scratch folder left"; fail=1; }
# bad arguments are refused, before anything starts
if TMPDIR=$T sh "$SRC/bench/placement.sh" "$BD" 1 x 2>"$T/err2"; then
	echo "FAIL: W=x accepted"; fail=1
fi
grep -q "W: a whole number" "$T/err2" || { echo "FAIL: W=x refused without its reason"; fail=1; }
if TMPDIR=$T sh "$SRC/bench/placement.sh" "$BD" 1 5 05 2>"$T/err3"; then
	echo "FAIL: W given twice accepted"; fail=1
fi
grep -q "given twice" "$T/err3" || { echo "FAIL: a repeated W refused without its reason"; fail=1; }
exit $fail
' bash "$BD" "$SRC" "$T"
rc=$?
[ $rc = 0 ] && echo "PASS"
exit $rc
