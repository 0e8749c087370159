#!/bin/sh
# bench/placement.sh BUILD_DIR [RUNS] [W ...] - where the scheduler puts one connection's
# three processes, and what that does to its latency (docs/performance.md, "The sixteenth
# round"). For every W (µs of busy work per transaction; default "0 5 10 20 40") RUNS times
# (default 8), in a rotating order: a fresh bare relay (egrelay --work-us W), a warm-up of
# 500 transactions, then PL_N (2000) CONNECT + GET transactions at c=1 (egload latency),
# free (no pinning). Each run prints its p50 and how many times per transaction the relay
# moved to another CPU (se.nr_migrations of /proc/PID/sched, before and after the run).
# With PL_EGRESSD=PATH, a fresh egressd (log_sync = batch, the bench's grant) is measured
# the same way in each run beside the relays, as "egressd". With PL_PERCPU=1, a fresh
# `egrelay --per-cpu` too, as "relay-percpu": one process pinned to each CPU, each new
# connection served on the CPU its client runs on ("The twenty-first round"); its
# processes are pinned and its migrations are the parent's (it only waits), 0: only its
# p50 says anything.
#
# On a 2-vCPU VM whose host does not poll an idle vCPU before halting it, a run settles in
# one of two placements: the proxy follows whoever wakes it (about two migrations per
# transaction, no wake-up starts an idle vCPU), or it stays where it is and each wake-up
# from the other CPU starts one (~20 µs each). The summary counts the runs that follow
# their wakers (more than 0.5 migrations per transaction) per W, and their p50s against
# the others'. Which placement a run gets came and went by the hour on the VM measured.
# Everything on 127.0.0.1 / 127.0.9.x; processes stopped by pid; every wait bounded; the
# scratch folder under TMPDIR (/tmp), removed at the end.
set -u

die() { echo "placement: $*" >&2; exit 1; }
. "$(dirname "$0")/lib.sh" || exit 1

[ $# -ge 1 ] || die "usage: sh bench/placement.sh BUILD_DIR [RUNS] [W ...]"
BUILD=$(cd "$1" 2>/dev/null && pwd) || die "no build directory $1"
shift
RUNS=${1:-8}
[ $# -ge 1 ] && shift
case $RUNS in '' | *[!0-9]* | 0) die "RUNS: a whole number of at least 1" ;; esac
[ $# -ge 1 ] || set -- 0 5 10 20 40
seen=" "
for w in "$@"; do
	case $w in '' | *[!0-9]*) die "W: a whole number of µs, not '$w'" ;; esac
	[ "$w" -le 1000 ] || die "W: at most 1000 µs"
	n=$(echo "$w" | sed 's/^0*//')
	case $seen in *" ${n:-0} "*) die "W: $w given twice" ;; esac
	seen="$seen${n:-0} "
done
N=${PL_N:-2000}
case $N in '' | *[!0-9]* | 0) die "PL_N: a whole number of at least 1" ;; esac
E=${PL_EGRESSD:-}
[ -z "$E" ] || [ -x "$E" ] || die "PL_EGRESSD: $E is not executable"
B=$BUILD/bench
for b in "$B/egload" "$B/egorigin" "$B/egrelay"; do
	[ -x "$b" ] || die "$b is missing: build first (make build)"
done
[ -r /proc/self/sched ] || die "no /proc/PID/sched here (a kernel without CONFIG_SCHED_DEBUG)"
TMP=$(mktemp -d "${TMPDIR:-/tmp}/egress-placement.XXXXXX") || die "mktemp failed"
PIDS=""
trap cleanup EXIT
trap 'exit 130' INT TERM

# shellcheck disable=SC2034 # read and advanced by free_port (bench/lib.sh)
FREE_PORT_NEXT=$((34000 + ($$ % 3000) * 4))
migrations() { awk '/^se.nr_migrations/ { print $3; exit }' "/proc/$1/sched" 2>/dev/null; }

free_port
"$B/egorigin" --listen 127.0.9.1:0 --port-file "$TMP/o.port" --dns "127.0.9.53:$PORT" \
    --dns-answer 127.0.9.1 2>/dev/null &
PIDS="$PIDS $!"
wait_file "$TMP/o.port" || die "origin did not start"
O=127.0.9.1:$(cat "$TMP/o.port")

# start_target T: a fresh proxy for target T (relay-wW or egressd); sets TPID and TPX
start_target() {
	free_port
	case $1 in
	relay-percpu)
		"$B/egrelay" --listen "127.0.0.1:$PORT" --per-cpu 2>/dev/null &
		TPID=$!
		;;
	relay-w*)
		"$B/egrelay" --listen "127.0.0.1:$PORT" --work-us "${1#relay-w}" 2>/dev/null &
		TPID=$!
		;;
	egressd)
		rm -f "$TMP/decisions.jsonl"*
		egressd_ini "$TMP/egressd.ini" "$TMP/decisions.jsonl" batch
		egressd_grant "$TMP/egressd.ini" pl "$PORT" "tcp://$O"
		"$E" -f -c "$TMP/egressd.ini" 2>"$TMP/egressd.log" &
		TPID=$!
		;;
	esac
	PIDS="$PIDS $TPID"
	TPX=127.0.0.1:$PORT
	if ! wait_listen 127.0.0.1 "$PORT" "$TPID"; then
		[ "$1" = egressd ] && tail -5 "$TMP/egressd.log" >&2
		die "$1 did not start (or did not listen within 10 s)"
	fi
}

TARGETS=""
for w in "$@"; do TARGETS="$TARGETS relay-w$w"; done
[ "${PL_PERCPU:-0}" = 1 ] && TARGETS="$TARGETS relay-percpu"
[ -n "$E" ] && TARGETS="$TARGETS egressd"
echo "placement: $(date -u '+%Y-%m-%d %H:%M UTC'), $RUNS runs per target of $N transactions at c=1, free; load average $(cut -d' ' -f1-3 /proc/loadavg)"
r=1
while [ "$r" -le "$RUNS" ]; do
	# shellcheck disable=SC2086
	for t in $(rotate_list "$r" $TARGETS); do
		start_target "$t"
		timeout -k 5 120 "$B/egload" latency --target "$O" --proxy "$TPX" -n 500 >/dev/null 2>&1
		m0=$(migrations "$TPID")
		out=$(timeout -k 5 300 "$B/egload" latency --target "$O" --proxy "$TPX" -n "$N" 2>/dev/null)
		m1=$(migrations "$TPID")
		stop_pid "$TPID"
		ok=$(kv ok "$out")
		if [ "${ok:-0}" -eq 0 ] || [ -z "$m0" ] || [ -z "$m1" ]; then
			echo "$t run $r: no result" >&2
			continue
		fi
		mig=$(awk -v a="$m0" -v b="$m1" -v n="$ok" 'BEGIN { printf "%.2f", (b - a) / n }')
		echo "$t run $r: p50 $(kv p50_us "$out") µs, migrations per transaction $mig, errors $(kv errors "$out")" |
		    tee -a "$TMP/runs.txt"
	done
	r=$((r + 1))
done
echo "per target: runs that follow their wakers (> 0.5 migrations per transaction) of all; their p50s, then the others' (µs)"
for t in $TARGETS; do
	# "T run R: p50 P µs, migrations per transaction M, errors E"
	awk -v t="$t" '$1 == t { p = $5; m = $10; sub(/,$/, "", m); m += 0
		if (m > 0.5) { f++; fp = fp " " p } else { s = s " " p }; n++ }
		END { if (n) printf "  %-12s %d of %d; following:%s; staying:%s\n", t, f, n, (fp == "" ? " —" : fp), (s == "" ? " —" : s) }' \
	    "$TMP/runs.txt"
done
