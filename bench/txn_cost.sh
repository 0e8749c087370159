#!/bin/sh
# bench/txn_cost.sh BUILD_DIR - what one transaction costs egressd against the bare relay
# (docs/performance.md, "Where the time goes"), for measuring before and after a change:
#   1. system calls per transaction, side by side (strace -f -c, N at c=1);
#   2. context switches per transaction per thread, at c=1 and at c=64 (/proc/PID/task);
#   3. one transaction of egressd in order, with its threads (strace -f -tt -T): the calls
#      between accept4 and the 200, per thread, and the full sequence;
#   4. the decision-log writer under load: its share of time in fdatasync (log_sync batch).
# Everything on 127.0.0.1 / 127.0.9.x; processes stopped by pid; every wait bounded.
# Knobs: TXN_N=500 (transactions for the counts), TXN_LOG_SYNC=batch, TXN_OUT=FILE
# [BUILD_DIR/bench-results/txn_cost.txt].
set -u

die() { echo "txn_cost: $*" >&2; exit 1; }
. "$(dirname "$0")/lib.sh" || exit 1

[ $# -ge 1 ] || die "usage: sh bench/txn_cost.sh BUILD_DIR"
BUILD=$(cd "$1" 2>/dev/null && pwd) || die "no build directory $1"
N=${TXN_N:-500}
SYNC=${TXN_LOG_SYNC:-batch}
OUT=${TXN_OUT:-$BUILD/bench-results/txn_cost.txt}
B=$BUILD/bench
for b in "$B/egload" "$B/egorigin" "$B/egrelay" "$BUILD/egressd/egressd"; do
	[ -x "$b" ] || die "$b is missing: build first (make build)"
done
command -v strace >/dev/null 2>&1 || die "strace is missing (sh scripts/deps.sh bench)"
mkdir -p "$(dirname "$OUT")" || die "cannot create $(dirname "$OUT")"
TMP=$(mktemp -d /tmp/egress-txn.XXXXXX) || die "mktemp failed"
PIDS=""
trap cleanup EXIT
trap 'exit 130' INT TERM

# shellcheck disable=SC2034 # read and advanced by free_port (bench/lib.sh)
FREE_PORT_NEXT=$((27000 + ($$ % 3000)))   # free_port (bench/lib.sh)

"$B/egorigin" --listen 127.0.9.1:0 --port-file "$TMP/o.port" 2>/dev/null &
PIDS="$PIDS $!"
wait_file "$TMP/o.port" || die "origin did not start"
O=127.0.9.1:$(cat "$TMP/o.port")
"$B/egrelay" --listen 127.0.0.1:0 --port-file "$TMP/r.port" 2>/dev/null &
RPID=$!
PIDS="$PIDS $RPID"
wait_file "$TMP/r.port" || die "relay did not start"
R=127.0.0.1:$(cat "$TMP/r.port")
free_port
EP=$PORT
egressd_ini "$TMP/egressd.ini" "$TMP/decisions.jsonl" "$SYNC"
egressd_grant "$TMP/egressd.ini" bench "$EP" "tcp://$O"
"$BUILD/egressd/egressd" -f -c "$TMP/egressd.ini" 2>"$TMP/egressd.log" &
EPID=$!
PIDS="$PIDS $EPID"
wait_listen 127.0.0.1 "$EP" "$EPID" || { tail -5 "$TMP/egressd.log" >&2; die "egressd did not start"; }
E=127.0.0.1:$EP
for px in "$R" "$E"; do "$B/egload" latency --target "$O" --proxy "$px" -n 50 >/dev/null; done

load() { timeout -k 5 300 "$B/egload" "$@" --target "$O" --timeout 30 2>/dev/null; }
threads() { # pid: "tid comm voluntary nonvoluntary" per thread
	for tk in /proc/"$1"/task/*; do
		echo "$(basename "$tk") $(cat "$tk/comm") $(awk '/^voluntary_ctxt/ { v = $2 }
		    /^nonvoluntary_ctxt/ { n = $2 } END { print v, n }' "$tk/status")"
	done
}

{
	echo "# txn_cost: $(date -u '+%Y-%m-%d %H:%M UTC'), source $(git -C "$(dirname "$0")/.." rev-parse --short HEAD 2>/dev/null), egressd log_sync = $SYNC, load average $(cut -d' ' -f1-3 /proc/loadavg)"
	echo
	echo "## 1. System calls per transaction (strace -f -c, $N transactions at c=1)"
	for t in relay egressd; do
		[ $t = relay ] && pid=$RPID px=$R || { pid=$EPID; px=$E; }
		timeout -k 5 300 strace -f -c -p "$pid" -o "$TMP/c.$t" 2>/dev/null &
		sp=$!
		sleep 1
		load latency --proxy "$px" -n "$N" >/dev/null
		sleep 0.3
		kill -INT $sp 2>/dev/null
		wait $sp 2>/dev/null
		awk -v n="$N" 'NR > 2 && $4 ~ /^[0-9]+$/ && $NF != "total" {
			e = ($5 ~ /^[0-9]+$/) ? $5 : 0; printf "%s %s %.2f %.2f\n", "'$t'", $NF, $4 / n, e / n }
		    $NF == "total" { printf "%s TOTAL %.2f %.2f\n", "'$t'", $4 / n, ($5 ~ /^[0-9]+$/ ? $5 : 0) / n }' \
		    "$TMP/c.$t" >> "$TMP/calls"
	done
	printf '%-14s %14s %14s\n' call "relay (errors)" "egressd (errors)"
	awk '{ k[$2] = 1; v[$1, $2] = sprintf("%.2f (%.2f)", $3, $4) }
	    END { for (c in k) printf "%-14s %14s %14s\n", c, (("relay", c) in v) ? v["relay", c] : "-",
	        (("egressd", c) in v) ? v["egressd", c] : "-" }' "$TMP/calls" | sort
	echo
	echo "## 2. Context switches per transaction, per thread (voluntary, involuntary)"
	for m in "latency -n $N" "rate -c 64 -t 3"; do
		for t in relay egressd; do
			[ $t = relay ] && pid=$RPID px=$R || { pid=$EPID; px=$E; }
			threads "$pid" > "$TMP/s0"
			# shellcheck disable=SC2086
			out=$(load $m --proxy "$px")
			threads "$pid" > "$TMP/s1"
			ok=$(kv ok "$out")
			echo "$t, egload $m: ok=$ok tps=$(kv tps "$out")"
			join "$TMP/s0" "$TMP/s1" | awk -v n="${ok:-1}" '{ printf "  tid %s (%s): %.2f, %.2f\n",
			    $1, $2, ($6 - $3) / n, ($7 - $4) / n }'
		done
	done
	echo
	echo "## 3. One egressd transaction in order (strace -f -tt -T; the 2nd of 3)"
	timeout -k 5 60 strace -f -tt -T -p "$EPID" -o "$TMP/t" 2>/dev/null &
	sp=$!
	sleep 1
	load latency --proxy "$E" -n 3 >/dev/null
	sleep 0.3
	kill -INT $sp 2>/dev/null
	wait $sp 2>/dev/null
	# (a call split by another thread's shows its result on a "<... resumed>" line)
	awk '/accept4/ && /sin_port/ && !/EAGAIN/ { n++ } n == 2' "$TMP/t" |
	    sed 's/\(.\{200\}\).*/\1.../' > "$TMP/one"
	echo "calls from accept4 to the 200, per thread:"
	awk '/HTTP\/1.1 200/ { print; exit } { print }' "$TMP/one" | grep -v 'resumed>' |
	    awk '{ c[$1]++ } END { for (t in c) printf "  tid %s: %d\n", t, c[t] }'
	echo "the whole transaction:"
	sed 's/^/  /' "$TMP/one"
	echo
	echo "## 4. The decision-log writer under rate -c 64 -t 4 (log_sync = $SYNC)"
	w=$(ls "/proc/$EPID/task" | sort -n | tail -1)
	timeout -k 5 60 strace -T -e trace=write,fdatasync -p "$w" -o "$TMP/w" 2>/dev/null &
	sp=$!
	sleep 0.5
	out=$(load rate -c 64 -t 4 --proxy "$E")
	kill -INT $sp 2>/dev/null
	wait $sp 2>/dev/null
	echo "egload: $out"
	awk '/^fdatasync/ { n++; x = $NF; gsub(/[<>]/, "", x); s += x }
	    /^write\(/ && !/"\\1\\0/ { split($0, a, "= "); split(a[2], b, " "); if (b[1] > 8) { g++; by += b[1] } }
	    END { printf "writer tid: fdatasync %d calls, %.3f s of 4 s (%.0f%%)%s; groups written %d, %.0f bytes each on average\n",
	        n, s, s / 4 * 100, n ? sprintf(", %.2f ms each", s / n * 1000) : "", g, g ? by / g : 0 }' "$TMP/w"
} > "$OUT"
cat "$OUT"
echo "txn_cost: written to $OUT" >&2
