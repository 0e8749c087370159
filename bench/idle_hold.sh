#!/bin/sh
# bench/idle_hold.sh BUILD_DIR - `make bench-idle`: hold N idle tunnels (default 100,000)
# through egressd (log_sync = batch) and through the bare relay, one after the other, and
# report how many were held, how many failed, RSS per tunnel, the proxies' fds, how long
# opening them took, and the CONNECT + GET latency of new transactions while they are held.
# See docs/performance.md ("Holding 100,000 idle tunnels").
#
# What it takes (and why it runs in a network namespace of its own, made with unshare -n):
#   - fds: 2 per tunnel in a proxy (client and upstream sockets; pipes only while bytes
#     move), 1 per tunnel in a load generator and in an origin. A process can hold at most
#     its hard RLIMIT_NOFILE; raising that needs CAP_SYS_RESOURCE. When the hard limit is
#     too low for N tunnels in one proxy process (on the development VM: 20,000 and no
#     CAP_SYS_RESOURCE, so at most ~9,900 tunnels per process), the tunnels are spread over
#     as many proxy processes ("shards", each a complete egressd with its own listeners,
#     grants and decision log) as the limit needs, and the report says so: the figure is
#     then "N tunnels held by K egressd processes on this machine", not by one.
#   - ports: every tunnel is two TCP connections, client -> proxy listener and proxy ->
#     origin; each (source address, destination address:port) pair can have only as many
#     connections as there are local ports. So the tunnels are spread over LPER listeners
#     per shard and one origin (127.0.9.k) per load generator, and the namespace's own
#     net.ipv4.ip_local_port_range is widened to 1024-65535 (a per-namespace setting).
#   - egressd: a grant allows at most EGRESS_GRANT_CONNECTIONS_MAX (4,096) connections, so
#     there is one grant per listener; max_connections is at most 100,000 (config.c).
#   - memory: a few KiB of kernel memory per idle socket, 4 sockets per tunnel: ~1-2 GB of
#     kernel memory for 100,000 tunnels, plus the processes' own RSS.
#
# Knobs: BENCH_HOLD_TUNNELS=100000, BENCH_HOLD_SECONDS=10 (held after the last one opened),
# BENCH_HOLD_TARGETS="egressd relay", BENCH_OUT=DIR [BUILD_DIR/bench-results],
# BENCH_HOLD_FDLIMIT=n (a lower per-process fd limit, to try the sharding with a small N).
# Every wait is bounded; every process is stopped by pid; the namespace goes with them.
# shellcheck disable=SC3045
# (SC3045: dash and bash both have ulimit -H/-S/-n.)
set -u

die() { echo "idle_hold: $*" >&2; exit 1; }
. "$(dirname "$0")/lib.sh" || exit 1

[ $# -ge 1 ] || die "usage: sh bench/idle_hold.sh BUILD_DIR"
BUILD=$(cd "$1" 2>/dev/null && pwd) || die "no build directory $1"
SELF=$(cd "$(dirname "$0")" && pwd)/idle_hold.sh
N=${BENCH_HOLD_TUNNELS:-100000}
HOLD_S=${BENCH_HOLD_SECONDS:-10}
HOLD_TARGETS=${BENCH_HOLD_TARGETS:-egressd relay}
OUTDIR=${BENCH_OUT:-$BUILD/bench-results}
LPER=4                # listeners (and grants) per proxy shard

if [ "${IDLE_HOLD_INNER:-0}" != 1 ]; then
	[ "$(id -u)" = 0 ] || die "needs root (a network namespace of its own)"
	for b in egload egorigin egrelay; do
		[ -x "$BUILD/bench/$b" ] || die "$BUILD/bench/$b is missing: build first (make build)"
	done
	[ -x "$BUILD/egressd/egressd" ] || die "$BUILD/egressd/egressd is missing: build first"
	mkdir -p "$OUTDIR" || die "cannot create $OUTDIR"
	IDLE_HOLD_INNER=1 exec timeout -k 10 1800 unshare -n sh "$SELF" "$BUILD"
fi

# --- inside the namespace ------------------------------------------------------------------
ip link set lo up || die "ip link set lo up failed"
echo "1024 65535" > /proc/sys/net/ipv4/ip_local_port_range || die "cannot widen the port range"
if [ -n "${BENCH_HOLD_FDLIMIT:-}" ]; then
	# A lower limit (allowed without privilege), to try the sharding on a small N.
	ulimit -S -n "$BENCH_HOLD_FDLIMIT" && ulimit -H -n "$BENCH_HOLD_FDLIMIT" ||
	    die "cannot set the fd limit to $BENCH_HOLD_FDLIMIT"
fi
HARD0=$(ulimit -H -n)
need=$((N * 2 + 1000))
if [ "$HARD0" != unlimited ] && [ "$need" -gt "$HARD0" ]; then
	# Needs CAP_SYS_RESOURCE; without it the tunnels are sharded below.
	ulimit -H -n "$need" 2>/dev/null ||
	    echo "idle_hold: cannot raise the hard fd limit from $HARD0 to $need (no CAP_SYS_RESOURCE?): sharding" >&2
fi
ulimit -S -n "$(ulimit -H -n)" || die "cannot raise the soft fd limit"
HARD=$(ulimit -H -n)
[ "$HARD" = unlimited ] && HARD=$need
PER_PROXY=$(((HARD - 200) / 2))       # tunnels one proxy process can hold
PER_GEN=$((HARD - 200))               # tunnels one egload (or one origin) can hold
[ $PER_PROXY -gt 0 ] || die "fd limit $HARD is too low"
SHARDS=$(((N + PER_PROXY - 1) / PER_PROXY))
GENS=$(((N + PER_GEN - 1) / PER_GEN))
NL=$((SHARDS * LPER))
# egload takes up to 16 proxy addresses; 8 per generator here (its share stays small).
[ $((GENS * 8)) -lt $NL ] && GENS=$(((NL + 7) / 8))
# Each listener's share must fit a grant (4,096) and each shard's share PER_PROXY.
per_l=$(((N + NL - 1) / NL))
[ $per_l -le 4000 ] || die "$per_l tunnels per listener exceed a grant: raise LPER"
[ $GENS -le 250 ] || die "too many generators"
TMP=$(mktemp -d /tmp/egress-idle.XXXXXX) || die "mktemp failed"
PIDS=""
STOP_TICKS=100        # 10 s for a proxy holding 100,000 tunnels to stop
trap cleanup EXIT
trap 'exit 130' INT TERM
B=$BUILD/bench
OUT=$OUTDIR/idle_hold.md
BASE=30000            # listener j: 127.0.0.1:(BASE + j), j = 0 .. NL - 1; shard = j / LPER

# Origins 127.0.9.1 .. 127.0.9.GENS, one per generator.
k=1
while [ $k -le $GENS ]; do
	"$B/egorigin" --listen "127.0.9.$k:0" --port-file "$TMP/o$k.port" 2>"$TMP/origin$k.log" &
	PIDS="$PIDS $!"
	k=$((k + 1))
done
k=1
while [ $k -le $GENS ]; do
	i=0
	while [ ! -s "$TMP/o$k.port" ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
	[ -s "$TMP/o$k.port" ] || die "origin $k did not start"
	echo "127.0.9.$k:$(cat "$TMP/o$k.port")" > "$TMP/o$k.addr"
	k=$((k + 1))
done

# Generator k (1-based) gets the listeners j with j % GENS == k - 1.
proxies_for() {
	j=$(($1 - 1))
	l=""
	while [ $j -lt $NL ]; do
		l="$l${l:+,}127.0.0.1:$((BASE + j))"
		j=$((j + GENS))
	done
	echo "$l"
}
# Tunnels for generator k: N split in proportion to its listeners (k = 1 takes the
# remainder of the division, so that the shares add up to N).
tunnels_for() {
	nk=0
	j=$(($1 - 1))
	while [ $j -lt $NL ]; do nk=$((nk + 1)); j=$((j + GENS)); done
	n_k=$((N * nk / NL))
	if [ "$1" = 1 ]; then
		rest=$N
		g=2
		while [ $g -le $GENS ]; do
			mk=0
			j=$((g - 1))
			while [ $j -lt $NL ]; do mk=$((mk + 1)); j=$((j + GENS)); done
			rest=$((rest - N * mk / NL))
			g=$((g + 1))
		done
		n_k=$rest
	fi
	echo $n_k
}

start_shard() { # target shard -> SPID
	s=$2
	case $1 in
	egressd)
		d=$TMP/egressd$s
		mkdir -p "$d"
		{
			printf '[egressd]\ncontrol_socket = none\ndecision_log = %s/decisions.jsonl\n' "$d"
			printf 'log_sync = batch\nmax_connections = %s\n' $((PER_PROXY + 50 < 100000 ? PER_PROXY + 50 : 100000))
			printf 'allow_special_address = 127.0.0.0/8\nidle_timeout = 30m\nsplice = on\n\n'
			j=$((s * LPER))
			while [ $j -lt $(((s + 1) * LPER)) ]; do
				printf '[listener l%s]\nlisten = 127.0.0.1:%s\ngrant = g%s\n\n' $j $((BASE + j)) $j
				printf '[grant g%s]\nconnections = 4096\n' $j
				k=1
				while [ $k -le $GENS ]; do
					printf 'allow = tcp://%s\n' "$(cat "$TMP/o$k.addr")"
					k=$((k + 1))
				done
				echo
				j=$((j + 1))
			done
		} > "$d/egressd.ini"
		"$BUILD/egressd/egressd" -f -c "$d/egressd.ini" 2>"$d/egressd.log" &
		SPID=$!
		;;
	relay)
		args=""
		j=$((s * LPER))
		while [ $j -lt $(((s + 1) * LPER)) ]; do
			args="$args --listen 127.0.0.1:$((BASE + j))"
			j=$((j + 1))
		done
		# shellcheck disable=SC2086
		"$B/egrelay" $args 2>"$TMP/relay$s.log" &
		SPID=$!
		;;
	*) die "unknown target $1" ;;
	esac
}

{
	echo "Run: $(date -u '+%Y-%m-%d %H:%M UTC'); $N tunnels per target; hard fd limit $HARD per process (started with $HARD0), so at most $PER_PROXY tunnels per proxy process: $SHARDS proxy process(es) × $LPER listeners, $GENS load generators and origins; held $HOLD_S s; load average $(cut -d' ' -f1-3 /proc/loadavg) at the start."
	echo
	echo "| target | processes | held | failed | time to open all (s) | RSS before → with them, all processes (MiB) | RSS per tunnel (KiB) | proxy fds | CONNECT+GET p50 / p99 while held (µs) |"
	echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
} > "$OUT"

for t in $HOLD_TARGETS; do
	spids=""
	s=0
	while [ $s -lt $SHARDS ]; do
		start_shard "$t" $s
		spids="$spids $SPID"
		PIDS="$PIDS $SPID"
		s=$((s + 1))
	done
	i=0
	while ! ss -Hltn "( sport = :$((BASE + NL - 1)) )" | grep -q . && [ $i -lt 300 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	sleep 0.5
	r0=0
	for p in $spids; do r0=$((r0 + $(rss_kib "$p"))); done
	t0=$(date +%s.%N)
	gens=""
	k=1
	while [ $k -le $GENS ]; do
		rm -f "$TMP/ready$k"
		"$B/egload" idle --target "$(cat "$TMP/o$k.addr")" --proxy "$(proxies_for $k)" \
		    -n "$(tunnels_for $k)" -t 1500 --timeout 30 --ready "$TMP/ready$k" \
		    >"$TMP/idle$k.out" 2>>"$TMP/egload.log" &
		gens="$gens $!"
		k=$((k + 1))
	done
	PIDS="$PIDS $gens"
	# Wait (bounded: 20 min) until every generator has tried all its tunnels.
	i=0
	while [ $i -lt 12000 ]; do
		ready=0
		k=1
		while [ $k -le $GENS ]; do
			[ -s "$TMP/ready$k" ] && ready=$((ready + 1))
			k=$((k + 1))
		done
		[ $ready = $GENS ] && break
		sleep 0.1
		i=$((i + 1))
	done
	t1=$(date +%s.%N)
	sleep "$HOLD_S"
	r1=0
	fds=0
	alive=yes
	for p in $spids; do
		r1=$((r1 + $(rss_kib "$p")))
		fds=$((fds + $(ls "/proc/$p/fd" 2>/dev/null | wc -l)))
		kill -0 "$p" 2>/dev/null || alive="no (a proxy process died)"
	done
	probe=$("$B/egload" latency --target "$(cat "$TMP/o1.addr")" --proxy "127.0.0.1:$BASE" \
	    -n 200 --timeout 30 2>/dev/null)
	held=0
	failed=0
	k=1
	while [ $k -le $GENS ]; do
		o=$(sed -n 's/.*open=\([0-9]*\).*/\1/p' "$TMP/ready$k" 2>/dev/null)
		e=$(sed -n 's/.*errors=\([0-9]*\).*/\1/p' "$TMP/ready$k" 2>/dev/null)
		held=$((held + ${o:-0}))
		failed=$((failed + ${e:-0}))
		k=$((k + 1))
	done
	for g in $gens; do
		kill -TERM "$g" 2>/dev/null
		wait "$g" 2>/dev/null
	done
	echo "idle_hold: $t: held $held, failed $failed, RSS $r0 -> $r1 KiB over $SHARDS process(es), $fds fds, alive: $alive; probe: $probe" >&2
	p50=$(echo "$probe" | tr ' ' '\n' | sed -n 's/^p50_us=//p')
	p99=$(echo "$probe" | tr ' ' '\n' | sed -n 's/^p99_us=//p')
	awk -v t="$t" -v np="$SHARDS" -v h="$held" -v f="$failed" -v t0="$t0" -v t1="$t1" \
	    -v a="$r0" -v b="$r1" -v fds="$fds" -v p50="${p50:-—}" -v p99="${p99:-—}" \
	    -v alive="$alive" 'BEGIN {
		note = ""
		if (alive != "yes")
			note = " (" alive ")"
		per = "—"
		if (h > 0)
			per = sprintf("%.2f", (b - a) / h)
		printf "| %s%s | %d | %d | %d | %.1f | %.0f → %.0f | %s | %d | %s / %s |\n", t, note, np,
		    h, f, t1 - t0, a / 1024, b / 1024, per, fds, p50, p99 }' >> "$OUT"
	# Stop this target's processes before the next target (frees fds and memory).
	for p in $spids; do kill -TERM "$p" 2>/dev/null; done
	for p in $spids; do
		i=0
		while kill -0 "$p" 2>/dev/null && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
		kill -KILL "$p" 2>/dev/null
		wait "$p" 2>/dev/null
	done
	[ "$t" = egressd ] && cat "$TMP"/egressd*/egressd.log | grep -iE "error|refus|denied|fail" |
	    sort | uniq -c | sort -rn | head -5 >&2
	# Let the origins see the closes (bounded).
	i=0
	while [ $i -lt 300 ] && [ "$(ss -Htn state established | wc -l)" -gt 100 ]; do
		sleep 0.1
		i=$((i + 1))
	done
done
cat "$OUT"
echo "idle_hold: results in $OUT" >&2
