#!/bin/sh
# bench/idle_hold.sh BUILD_DIR - `make bench-idle`: hold N idle tunnels (default 100,000)
# through egressd (log_sync = batch) and through the bare relay, one proxy after the other,
# and report how many were held, how many failed, RSS per tunnel, the proxy's fds, how long
# opening them took, and the CONNECT + GET latency of new transactions while they are held.
# See docs/performance.md ("Holding 100,000 idle tunnels").
#
# What it takes (and why it runs in a network namespace of its own, made with unshare -n):
#   - fds: 2 per tunnel in the proxy (client and upstream sockets; pipes only while bytes
#     move), 1 per tunnel in the load generators and in the origins. The session's default
#     hard limit here is 20,000 per process (ulimit -Hn), which caps one proxy at ~9,900
#     tunnels; root may raise it up to fs.nr_open (1,048,576). This script raises it for the
#     processes it starts only (ulimit in its own shell), nothing system-wide.
#   - ports: every tunnel is two TCP connections, client -> proxy listener and proxy ->
#     origin; each (source address, destination address:port) pair can have only as many
#     connections as there are local ports. So the tunnels are spread over HOLD_LISTENERS
#     proxy listeners and HOLD_ORIGINS origins (127.0.9.1..), and the namespace's own
#     net.ipv4.ip_local_port_range is widened to 1024-65535 (a per-namespace setting).
#   - egressd: a grant allows at most EGRESS_GRANT_CONNECTIONS_MAX (4,096) connections, so
#     there is one grant per listener; max_connections is at most 100,000 (config.c).
#   - memory: ~4 KiB of kernel socket memory per idle socket, 4 sockets per tunnel: ~1.6 GB
#     of kernel memory for 100,000 tunnels, plus the processes' own RSS.
#
# Knobs: BENCH_HOLD_TUNNELS=100000, BENCH_HOLD_SECONDS=10 (held after the last one opened),
# BENCH_HOLD_TARGETS="egressd relay", BENCH_OUT=DIR [BUILD_DIR/bench-results].
# Every wait is bounded; every process is stopped by pid; the namespace goes with them.
# shellcheck disable=SC3045
# (SC3045: dash and bash both have ulimit -H/-S/-n.)
set -u

die() { echo "idle_hold: $*" >&2; exit 1; }

[ $# -ge 1 ] || die "usage: sh bench/idle_hold.sh BUILD_DIR"
BUILD=$(cd "$1" 2>/dev/null && pwd) || die "no build directory $1"
SELF=$(cd "$(dirname "$0")" && pwd)/idle_hold.sh
N=${BENCH_HOLD_TUNNELS:-100000}
HOLD_S=${BENCH_HOLD_SECONDS:-10}
HOLD_TARGETS=${BENCH_HOLD_TARGETS:-egressd relay}
OUTDIR=${BENCH_OUT:-$BUILD/bench-results}
ORIGINS=4             # one load generator per origin
LPER=7                # proxy listeners per load generator (egload takes at most 8)

if [ "${IDLE_HOLD_INNER:-0}" != 1 ]; then
	[ "$(id -u)" = 0 ] || die "needs root (a network namespace of its own, fd limits)"
	for b in egload egorigin egrelay; do
		[ -x "$BUILD/bench/$b" ] || die "$BUILD/bench/$b is missing: build first (make build)"
	done
	[ -x "$BUILD/egressd/egressd" ] || die "$BUILD/egressd/egressd is missing: build first"
	echo "idle_hold: default fd limits here: soft $(ulimit -S -n), hard $(ulimit -H -n); fs.nr_open $(cat /proc/sys/fs/nr_open)" >&2
	mkdir -p "$OUTDIR" || die "cannot create $OUTDIR"
	IDLE_HOLD_INNER=1 exec timeout -k 10 1800 unshare -n sh "$SELF" "$BUILD"
fi

# --- inside the namespace ------------------------------------------------------------------
ip link set lo up || die "ip link set lo up failed"
echo "1024 65535" > /proc/sys/net/ipv4/ip_local_port_range || die "cannot widen the port range"
need=$((N * 2 + 10000))
if [ "$need" -gt "$(ulimit -H -n)" ]; then
	ulimit -H -n "$need" 2>/dev/null ||
	    die "cannot raise the fd limit to $need (fs.nr_open is $(cat /proc/sys/fs/nr_open))"
fi
ulimit -S -n "$(ulimit -H -n)" || die "cannot raise the soft fd limit"
TMP=$(mktemp -d /tmp/egress-idle.XXXXXX) || die "mktemp failed"
PIDS=""
cleanup() {
	trap - EXIT INT TERM
	for p in $PIDS; do kill -TERM "$p" 2>/dev/null; done
	for p in $PIDS; do
		i=0
		while kill -0 "$p" 2>/dev/null && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
		kill -KILL "$p" 2>/dev/null
		wait "$p" 2>/dev/null
	done
	rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
B=$BUILD/bench
per=$(((N + ORIGINS - 1) / ORIGINS))
OUT=$OUTDIR/idle_hold.md

# Origins 127.0.9.1 .. 127.0.9.ORIGINS, each on its own port.
k=1
while [ $k -le $ORIGINS ]; do
	"$B/egorigin" --listen "127.0.9.$k:0" --port-file "$TMP/o$k.port" 2>"$TMP/origin$k.log" &
	PIDS="$PIDS $!"
	k=$((k + 1))
done
k=1
while [ $k -le $ORIGINS ]; do
	i=0
	while [ ! -s "$TMP/o$k.port" ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
	[ -s "$TMP/o$k.port" ] || die "origin $k did not start"
	eval "O$k=127.0.9.$k:$(cat "$TMP/o$k.port")"
	k=$((k + 1))
done

rss_kib() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status" 2>/dev/null || echo 0; }

# Listener ports: 127.0.0.1:(BASE + j), j = 0 .. ORIGINS * LPER - 1.
BASE=30000
NL=$((ORIGINS * LPER))
proxies_for() { # origin index k -> egload --proxy list
	j=$(((${1} - 1) * LPER))
	l=""
	e=$((j + LPER))
	while [ $j -lt $e ]; do
		l="$l${l:+,}127.0.0.1:$((BASE + j))"
		j=$((j + 1))
	done
	echo "$l"
}

start_egressd() {
	d=$TMP/egressd
	mkdir -p "$d"
	{
		printf '[egressd]\ncontrol_socket = none\ndecision_log = %s/decisions.jsonl\n' "$d"
		printf 'log_sync = batch\nmax_connections = 100000\nallow_special_address = 127.0.0.0/8\n'
		printf 'idle_timeout = 30m\nsplice = on\n\n'
		j=0
		while [ $j -lt $NL ]; do
			printf '[listener l%s]\nlisten = 127.0.0.1:%s\ngrant = g%s\n\n' $j $((BASE + j)) $j
			printf '[grant g%s]\nconnections = 4096\n' $j
			k=1
			while [ $k -le $ORIGINS ]; do
				eval "printf 'allow = tcp://%s\n' \"\$O$k\""
				k=$((k + 1))
			done
			echo
			j=$((j + 1))
		done
	} > "$d/egressd.ini"
	"$BUILD/egressd/egressd" -f -c "$d/egressd.ini" 2>"$d/egressd.log" &
	PPID_=$!
}

start_relay() {
	args=""
	j=0
	while [ $j -lt $NL ]; do
		args="$args --listen 127.0.0.1:$((BASE + j))"
		j=$((j + 1))
	done
	# shellcheck disable=SC2086
	"$B/egrelay" $args 2>"$TMP/relay.log" &
	PPID_=$!
}

{
	echo "Run: $(date -u '+%Y-%m-%d %H:%M UTC'), $N tunnels per proxy over $NL listeners and $ORIGINS origins, held $HOLD_S s; load average $(cut -d' ' -f1-3 /proc/loadavg) at the start."
	echo
	echo "| proxy | held | failed | time to open all (s) | RSS before → with them (MiB) | RSS per tunnel (KiB) | proxy fds | CONNECT+GET p50 / p99 while held (µs) |"
	echo "|---|---:|---:|---:|---:|---:|---:|---:|"
} > "$OUT"

for t in $HOLD_TARGETS; do
	case $t in
	egressd) start_egressd ;;
	relay) start_relay ;;
	*) die "unknown target $t" ;;
	esac
	PIDS="$PIDS $PPID_"
	i=0
	while ! ss -Hltn "( sport = :$((BASE + NL - 1)) )" | grep -q . && [ $i -lt 100 ]; do
		kill -0 $PPID_ 2>/dev/null || die "$t did not start"
		sleep 0.1
		i=$((i + 1))
	done
	sleep 0.5
	r0=$(rss_kib $PPID_)
	t0=$(date +%s.%N)
	gens=""
	k=1
	while [ $k -le $ORIGINS ]; do
		rm -f "$TMP/ready$k"
		tgt=$(eval "echo \$O$k")
		"$B/egload" idle --target "$tgt" --proxy "$(proxies_for $k)" -n "$per" -t 1500 \
		    --timeout 30 --ready "$TMP/ready$k" >"$TMP/idle$k.out" 2>>"$TMP/egload.log" &
		gens="$gens $!"
		k=$((k + 1))
	done
	PIDS="$PIDS $gens"
	# Wait (bounded: 20 min) until every generator has tried all its tunnels.
	i=0
	while [ $i -lt 12000 ]; do
		done_=0
		k=1
		while [ $k -le $ORIGINS ]; do
			[ -s "$TMP/ready$k" ] && done_=$((done_ + 1))
			k=$((k + 1))
		done
		[ $done_ = $ORIGINS ] && break
		sleep 0.1
		i=$((i + 1))
	done
	t1=$(date +%s.%N)
	sleep "$HOLD_S"
	r1=$(rss_kib $PPID_)
	fds=$(ls "/proc/$PPID_/fd" 2>/dev/null | wc -l)
	alive=yes
	kill -0 $PPID_ 2>/dev/null || alive="no (the proxy died)"
	probe=$("$B/egload" latency --target "$O1" --proxy "127.0.0.1:$((BASE + LPER - 1))" -n 200 \
	    --timeout 30 2>/dev/null)
	held=0
	failed=0
	k=1
	while [ $k -le $ORIGINS ]; do
		o=$(sed -n 's/.*open=\([0-9]*\).*/\1/p' "$TMP/ready$k")
		e=$(sed -n 's/.*errors=\([0-9]*\).*/\1/p' "$TMP/ready$k")
		held=$((held + ${o:-0}))
		failed=$((failed + ${e:-0}))
		k=$((k + 1))
	done
	for g in $gens; do
		kill -TERM "$g" 2>/dev/null
		wait "$g" 2>/dev/null
	done
	echo "idle_hold: $t: held $held, failed $failed, RSS $r0 -> $r1 KiB, $fds fds, alive: $alive; probe: $probe" >&2
	p50=$(echo "$probe" | tr ' ' '\n' | sed -n 's/^p50_us=//p')
	p99=$(echo "$probe" | tr ' ' '\n' | sed -n 's/^p99_us=//p')
	awk -v t="$t" -v h="$held" -v f="$failed" -v t0="$t0" -v t1="$t1" -v a="$r0" -v b="$r1" \
	    -v fds="$fds" -v p50="${p50:-—}" -v p99="${p99:-—}" -v alive="$alive" 'BEGIN {
		note = ""
		if (alive != "yes")
			note = " (" alive ")"
		per = "—"
		if (h > 0)
			per = sprintf("%.2f", (b - a) / h)
		printf "| %s%s | %d | %d | %.1f | %.0f → %.0f | %s | %d | %s / %s |\n", t, note, h,
		    f, t1 - t0, a / 1024, b / 1024, per, fds, p50, p99 }' >> "$OUT"
	# Stop this proxy before the next one (frees its fds and memory).
	kill -TERM $PPID_ 2>/dev/null
	i=0
	while kill -0 $PPID_ 2>/dev/null && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
	kill -KILL $PPID_ 2>/dev/null
	wait $PPID_ 2>/dev/null
	[ "$t" = egressd ] && grep -E "error|refus|denied" "$TMP/egressd/egressd.log" | head -5 >&2
	# Let the origins see the closes (bounded).
	i=0
	while [ $i -lt 300 ] && [ "$(ss -Htn state established | wc -l)" -gt 100 ]; do
		sleep 0.1
		i=$((i + 1))
	done
done
cat "$OUT"
echo "idle_hold: results in $OUT" >&2
