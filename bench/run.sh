#!/bin/sh
# bench/run.sh BUILD_DIR - `make bench` (see docs/performance.md).
#
# Runs, in one run and interleaved (round r runs every target before round r+1 starts, in a
# rotating order), the same scenarios against: a direct connection, egressd with
# log_sync = none, batch and always, and - when installed - tinyproxy and squid. Then
# egress-exec start-up against bwrap and unshare, and (when perf works) a profile of egressd
# under the rate scenario. Everything listens on 127.0.0.1 / 127.0.9.x only; every process
# this script starts is stopped by pid in the EXIT trap; every wait is bounded.
#
# Knobs (environment):
#   BENCH_INSTALL_PEERS=1   apt-get install tinyproxy squid bubblewrap first (Debian)
#   BENCH_ROUNDS=3          interleaved rounds
#   BENCH_LAT_N=1000        latency transactions per target per round
#   BENCH_RATE_SECONDS=5    rate seconds per target per round; BENCH_RATE_CONC=64
#   BENCH_BULK_BYTES=1073741824  bytes per bulk run (one tunnel; four tunnels share it)
#   BENCH_IDLE_TUNNELS=5000 idle tunnels held per proxy
#   BENCH_DNS_N=300         DNS-cache scenario transactions per round
#   BENCH_SPAWN_RUNS=50     egress-exec/bwrap/unshare runs per variant
#   BENCH_PROFILE=1         perf profile of egressd under the rate scenario (0: skip)
#   BENCH_SKIP_EXEC=1       skip the egress-exec start-up part
#   BENCH_OUT=DIR           results directory [BUILD_DIR/bench-results]
# shellcheck disable=SC2034,SC3045
# (SC2034: PROXY_*, PID_*, SP_* are read through eval; SC3045: dash and bash both have
# ulimit -n/-H.)
set -u

die() { echo "bench: $*" >&2; exit 1; }

[ $# -ge 1 ] || die "usage: sh bench/run.sh BUILD_DIR"
BUILD=$(cd "$1" 2>/dev/null && pwd) || die "no build directory $1"
SRC=$(cd "$(dirname "$0")/.." && pwd)
ROUNDS=${BENCH_ROUNDS:-3}
LAT_N=${BENCH_LAT_N:-1000}
RATE_S=${BENCH_RATE_SECONDS:-5}
RATE_C=${BENCH_RATE_CONC:-64}
BULK=${BENCH_BULK_BYTES:-1073741824}
IDLE_N=${BENCH_IDLE_TUNNELS:-5000}
DNS_N=${BENCH_DNS_N:-300}
SPAWN_N=${BENCH_SPAWN_RUNS:-50}
PROFILE=${BENCH_PROFILE:-1}
OUTDIR=${BENCH_OUT:-$BUILD/bench-results}

EGLOAD=$BUILD/bench/egload
EGORIGIN=$BUILD/bench/egorigin
EGSPAWN=$BUILD/bench/egspawn
EGSTAMP=$BUILD/bench/egstamp
EGRESSD=$BUILD/egressd/egressd
EXEC=$BUILD/executor/egress-exec
for b in "$EGLOAD" "$EGORIGIN" "$EGSPAWN" "$EGSTAMP" "$EGRESSD"; do
	[ -x "$b" ] || die "$b is missing: build first (make build)"
done
[ "$(id -u)" = 0 ] || echo "bench: not root: egress-exec, squid and some limits will be skipped" >&2

# 5,000 idle tunnels = 10,000 proxy fds, 5,000 in egload and 5,000 in the origin (three
# processes, each under the limit). Raise the soft limit to the hard one.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
NOFILE=$(ulimit -n)
if [ "$NOFILE" != unlimited ] && [ "$NOFILE" -lt $((IDLE_N * 2 + 200)) ]; then
	IDLE_N=$(((NOFILE - 200) / 2))
	echo "bench: fd limit $NOFILE: idle tunnels lowered to $IDLE_N" >&2
fi

mkdir -p "$OUTDIR" || die "cannot create $OUTDIR"
TMP=$(mktemp -d /tmp/egress-bench.XXXXXX) || die "mktemp failed"
chmod 755 "$TMP"
RAW=$OUTDIR/raw.txt
REPO=$TMP/repo
: > "$RAW"
PIDS=""

cleanup() {
	trap - EXIT INT TERM
	for p in $PIDS; do
		kill -TERM "$p" 2>/dev/null
	done
	for p in $PIDS; do
		i=0
		while kill -0 "$p" 2>/dev/null && [ $i -lt 50 ]; do
			sleep 0.1
			i=$((i + 1))
		done
		kill -KILL "$p" 2>/dev/null
		wait "$p" 2>/dev/null
	done
	rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

addpid() { PIDS="$PIDS $1"; }
dropid() {
	n=""
	for p in $PIDS; do [ "$p" = "$1" ] || n="$n $p"; done
	PIDS=$n
}
stop_pid() {
	kill -TERM "$1" 2>/dev/null
	i=0
	while kill -0 "$1" 2>/dev/null && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
	kill -KILL "$1" 2>/dev/null
	wait "$1" 2>/dev/null
	dropid "$1"
}

# --- optional peers ------------------------------------------------------------------
if [ "${BENCH_INSTALL_PEERS:-0}" = 1 ]; then
	need=""
	command -v tinyproxy >/dev/null 2>&1 || [ -x /usr/bin/tinyproxy ] || need="$need tinyproxy"
	command -v squid >/dev/null 2>&1 || [ -x /usr/sbin/squid ] || need="$need squid"
	command -v bwrap >/dev/null 2>&1 || need="$need bubblewrap"
	if [ -n "$need" ]; then
		# deps.sh's bench set: the peers' own services never start and stay disabled
		# (they would listen beyond loopback, and at every boot).
		echo "bench: installing$need from Debian (scripts/deps.sh bench)" >&2
		sh "$SRC/scripts/deps.sh" bench >"$TMP/apt.log" 2>&1 ||
		    echo "bench: apt-get install failed (see $TMP/apt.log); peers skipped" >&2
	fi
fi
TINYPROXY=$(command -v tinyproxy 2>/dev/null || { [ -x /usr/bin/tinyproxy ] && echo /usr/bin/tinyproxy; })
SQUID=$(command -v squid 2>/dev/null || { [ -x /usr/sbin/squid ] && echo /usr/sbin/squid; })
BWRAP=$(command -v bwrap 2>/dev/null || true)
[ "$(id -u)" = 0 ] || SQUID=""

# --- helpers ---------------------------------------------------------------------------
# pick_port sets PORT to a free loopback port (TCP and UDP), starting from a per-run offset
# so parallel runs rarely collide. Not in a subshell: NEXT_PORT must advance.
NEXT_PORT=$((21000 + ($$ % 8000) * 4))
pick_port() {
	i=0
	while [ $i -lt 500 ]; do
		NEXT_PORT=$((NEXT_PORT + 1))
		[ $NEXT_PORT -gt 60000 ] && NEXT_PORT=21000
		if ! ss -Htuan "( sport = :$NEXT_PORT )" 2>/dev/null | grep -q .; then
			PORT=$NEXT_PORT
			return 0
		fi
		i=$((i + 1))
	done
	die "no free port"
}

wait_listen() { # addr port pid
	i=0
	while [ $i -lt 100 ]; do
		ss -Hltn "( sport = :$2 )" 2>/dev/null | grep -q "$1:$2" && return 0
		kill -0 "$3" 2>/dev/null || return 1
		sleep 0.1
		i=$((i + 1))
	done
	return 1
}

cpu_ticks() { awk '{ sub(/.*\) /, ""); print $12 + $13 }' "/proc/$1/stat" 2>/dev/null || echo 0; }
rss_kib() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status" 2>/dev/null || echo 0; }
CLK_TCK=$(getconf CLK_TCK)

# rec SCENARIO TARGET KEY VALUE
rec() { echo "$1 $2 $3 $4" >> "$RAW"; }
# kv KEY LINE: value of key=value in an egload output line
kv() { echo "$2" | tr ' ' '\n' | awk -F= -v k="$1" '$1 == k { print $2 }'; }

# --- the origin ------------------------------------------------------------------------
ORIGIN_IP=127.0.9.1
pick_port
DNS_ADDR=127.0.9.53:$PORT
"$EGORIGIN" --listen "$ORIGIN_IP:0" --port-file "$TMP/origin.port" --dns "$DNS_ADDR" \
    --dns-answer "$ORIGIN_IP" 2>"$TMP/origin.log" &
ORIGIN_PID=$!
addpid $ORIGIN_PID
i=0
while [ ! -s "$TMP/origin.port" ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
[ -s "$TMP/origin.port" ] || die "origin did not start: $(cat "$TMP/origin.log")"
OPORT=$(cat "$TMP/origin.port")
ORIGIN=$ORIGIN_IP:$OPORT

# --- the proxies -----------------------------------------------------------------------
TARGETS="direct"
# PROXY_<target> = egload --proxy value; IDLEPROXY_<target> for the idle scenario;
# PID_<target> = the proxy's pid (CPU and RSS from /proc).
PROXY_direct=""
IDLEPROXY_direct=""

start_egressd() { # variant(log_sync)
	v=$1
	pick_port
	p1=$PORT
	pick_port
	p2=$PORT
	d=$TMP/egressd-$v
	mkdir -p "$d"
	# Two listeners and grants: a grant allows at most 4096 connections
	# (EGRESS_GRANT_CONNECTIONS_MAX), the idle scenario holds more.
	cat > "$d/egressd.ini" <<EOF
[egressd]
control_socket = none
decision_log = $d/decisions.jsonl
log_sync = $v
max_connections = 20000
dns_server = $DNS_ADDR
allow_special_address = 127.0.0.0/8
idle_timeout = 10m
splice = on

[listener bench-a]
listen = 127.0.0.1:$p1
grant = bench-a

[listener bench-b]
listen = 127.0.0.1:$p2
grant = bench-b

[grant bench-a]
allow = tcp://$ORIGIN
allow = https://*.bench.test:$OPORT
connections = 4096

[grant bench-b]
allow = tcp://$ORIGIN
connections = 4096
EOF
	"$EGRESSD" -f -c "$d/egressd.ini" 2>"$d/egressd.log" &
	pid=$!
	addpid $pid
	if ! wait_listen 127.0.0.1 "$p1" $pid; then
		echo "bench: egressd ($v) did not start:" >&2
		tail -5 "$d/egressd.log" >&2
		return 1
	fi
	t=egressd-$v
	TARGETS="$TARGETS $t"
	eval "PROXY_$(echo $t | tr - _)=127.0.0.1:$p1"
	eval "IDLEPROXY_$(echo $t | tr - _)=127.0.0.1:$p1,127.0.0.1:$p2"
	eval "PID_$(echo $t | tr - _)=$pid"
}

start_tinyproxy() {
	pick_port
	p=$PORT
	d=$TMP/tinyproxy
	mkdir -p "$d"
	chmod 777 "$d"
	cat > "$d/tinyproxy.conf" <<EOF
Port $p
Listen 127.0.0.1
Timeout 600
MaxClients $((IDLE_N + 500))
LogFile "$d/tinyproxy.log"
LogLevel Warning
PidFile "$d/tinyproxy.pid"
ConnectPort $OPORT
Allow 127.0.0.1
DisableViaHeader Yes
EOF
	"$TINYPROXY" -d -c "$d/tinyproxy.conf" >"$d/stderr.log" 2>&1 &
	pid=$!
	addpid $pid
	if ! wait_listen 127.0.0.1 "$p" $pid; then
		echo "bench: tinyproxy did not start:" >&2
		tail -5 "$d/stderr.log" "$d/tinyproxy.log" >&2
		return 1
	fi
	TARGETS="$TARGETS tinyproxy"
	PROXY_tinyproxy=127.0.0.1:$p
	IDLEPROXY_tinyproxy=127.0.0.1:$p
	PID_tinyproxy=$pid
}

start_squid() {
	pick_port
	p=$PORT
	d=$TMP/squid
	mkdir -p "$d"
	chown proxy:proxy "$d" 2>/dev/null || chmod 777 "$d"
	cat > "$d/squid.conf" <<EOF
http_port 127.0.0.1:$p
acl bench src 127.0.0.0/8
http_access allow bench
http_access deny all
cache deny all
cache_mem 8 MB
access_log stdio:$d/access.log
cache_log $d/cache.log
pid_filename $d/squid.pid
coredump_dir $d
max_filedescriptors $((IDLE_N * 2 + 1000))
pinger_enable off
shutdown_lifetime 1 seconds
workers 1
client_db off
via off
forwarded_for delete
netdb_filename none
icp_port 0
htcp_port 0
logfile_rotate 0
EOF
	"$SQUID" -N -f "$d/squid.conf" >"$d/stderr.log" 2>&1 &
	pid=$!
	addpid $pid
	if ! wait_listen 127.0.0.1 "$p" $pid; then
		echo "bench: squid did not start:" >&2
		tail -5 "$d/stderr.log" "$d/cache.log" >&2
		return 1
	fi
	TARGETS="$TARGETS squid"
	PROXY_squid=127.0.0.1:$p
	IDLEPROXY_squid=127.0.0.1:$p
	PID_squid=$pid
}

for v in none batch always; do start_egressd $v; done
[ -n "$TINYPROXY" ] && start_tinyproxy
[ -n "$SQUID" ] && start_squid

var() { eval "echo \${$1_$(echo "$2" | tr - _):-}"; }
load() { # target mode args...: run egload through (or around) the target's proxy
	t=$1
	shift
	m=$1
	shift
	px=$(var PROXY "$t")
	if [ -n "$px" ]; then
		timeout -k 5 900 "$EGLOAD" "$m" --target "$ORIGIN" --proxy "$px" "$@" 2>>"$TMP/egload.log"
	else
		timeout -k 5 900 "$EGLOAD" "$m" --target "$ORIGIN" "$@" 2>>"$TMP/egload.log"
	fi
}
# The targets in a rotating order for round $1, so no target always runs first.
rotate() {
	set -- $1 $TARGETS
	r=$1
	shift
	n=$#
	k=$((r % n))
	out=""
	i=0
	for t in "$@"; do
		[ $i -ge $k ] && out="$out $t"
		i=$((i + 1))
	done
	i=0
	for t in "$@"; do
		[ $i -lt $k ] && out="$out $t"
		i=$((i + 1))
	done
	echo $out
}

echo "bench: targets:$(for t in $TARGETS; do printf ' %s' "$t"; done); origin $ORIGIN; $ROUNDS rounds" >&2
LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
T_START=$(date +%s)

# Warm-up: a few transactions through each target (lazy initialisation off the books).
for t in $TARGETS; do
	out=$(load "$t" latency -n 20)
	[ "$(kv ok "$out")" = 20 ] || echo "bench: warm-up through $t: $out" >&2
done

# --- idle tunnels first: RSS deltas are only meaningful before other load grew the heaps --
for t in $TARGETS; do
	pid=$(var PID "$t")
	[ -n "$pid" ] || continue
	px=$(var IDLEPROXY "$t")
	rm -f "$TMP/idle.ready"
	sleep 0.5
	r0=$(rss_kib "$pid")
	timeout -k 5 300 "$EGLOAD" idle --target "$ORIGIN" --proxy "$px" -n "$IDLE_N" -t 240 --timeout 5 \
	    --ready "$TMP/idle.ready" >"$TMP/idle.out" 2>>"$TMP/egload.log" &
	lp=$!
	addpid $lp
	i=0
	while [ ! -s "$TMP/idle.ready" ] && [ $i -lt 1200 ] && kill -0 $lp 2>/dev/null; do
		sleep 0.1
		i=$((i + 1))
	done
	sleep 1
	r1=$(rss_kib "$pid")
	fds=$(ls "/proc/$pid/fd" 2>/dev/null | wc -l)
	open=$(sed -n 's/.*open=\([0-9]*\).*/\1/p' "$TMP/idle.ready" 2>/dev/null)
	stop_pid $lp
	ierr=$(sed -n 's/.*errors=\([0-9]*\).*/\1/p' "$TMP/idle.ready" 2>/dev/null)
	open=${open:-0}
	echo "bench: idle $t: $open tunnels held, ${ierr:-?} failed, RSS $r0 -> $r1 KiB, $fds fds" >&2
	rec idle "$t" fds "$fds"
	rec idle "$t" open "$open"
	rec idle "$t" failed "${ierr:-$IDLE_N}"
	if [ "$open" -gt 0 ]; then
		rec idle "$t" kib_per_tunnel "$(awk -v a="$r0" -v b="$r1" -v n="$open" \
		    'BEGIN { printf "%.1f", (b - a) / n }')"
	fi
	# Let the proxy close the tunnels before the next one starts (bounded).
	i=0
	while [ $i -lt 100 ] && [ "$(ss -Htn "( dport = :$OPORT )" 2>/dev/null | wc -l)" -gt 10 ]; do
		sleep 0.1
		i=$((i + 1))
	done
done

# --- interleaved rounds ------------------------------------------------------------------
r=1
while [ $r -le "$ROUNDS" ]; do
	echo "bench: round $r of $ROUNDS" >&2
	# latency at concurrency 1
	for t in $(rotate $r); do
		out=$(load "$t" latency -n "$LAT_N")
		for k in p50_us p90_us p99_us; do rec lat "$t" $k "$(kv $k "$out")"; done
		rec lat "$t" errors "$(kv errors "$out")"
	done
	# transactions/s at concurrency RATE_C, proxy CPU per transaction
	for t in $(rotate $r); do
		pid=$(var PID "$t")
		c0=0
		[ -n "$pid" ] && c0=$(cpu_ticks "$pid")
		o0=$(cpu_ticks $ORIGIN_PID)
		out=$(load "$t" rate -c "$RATE_C" -t "$RATE_S")
		o1=$(cpu_ticks $ORIGIN_PID)
		c1=0
		[ -n "$pid" ] && c1=$(cpu_ticks "$pid")
		rec rate "$t" origin_ticks $((o1 - o0))
		rec rate "$t" tps "$(kv tps "$out")"
		rec rate "$t" ok "$(kv ok "$out")"
		rec rate "$t" errors "$(kv errors "$out")"
		rec rate "$t" p99_us "$(kv p99_us "$out")"
		[ -n "$pid" ] && rec rate "$t" cpu_ticks $((c1 - c0))
	done
	# bulk: one tunnel, four tunnels (BULK bytes in total each), proxy CPU per GiB
	for t in $(rotate $r); do
		pid=$(var PID "$t")
		for n in 1 4; do
			c0=0
			[ -n "$pid" ] && c0=$(cpu_ticks "$pid")
			out=$(load "$t" bulk -c $n --bytes $((BULK / n)) --timeout 300)
			c1=0
			[ -n "$pid" ] && c1=$(cpu_ticks "$pid")
			rec bulk$n "$t" mib_s "$(kv mib_s "$out")"
			rec bulk$n "$t" bytes "$(kv bytes "$out")"
			[ "$(kv errors "$out")" = 0 ] || rec bulk$n "$t" errors "$(kv errors "$out")"
			[ -n "$pid" ] && rec bulk "$t" cpu_ticks $((c1 - c0)) &&
			    rec bulk "$t" bytes "$(kv bytes "$out")"
		done
	done
	# DNS cache (egressd resolves; the peers are given IP literals everywhere else): a new
	# name per hop (first hop: DNS query, cache miss) versus one warm name (cache hit).
	for t in $TARGETS; do
		case $t in egressd-none) ;; *) continue ;; esac
		out=$(load "$t" latency -n "$DNS_N" --name "r${r}n%u.bench.test:$OPORT")
		rec dnsnew "$t" p50_us "$(kv p50_us "$out")"
		rec dnsnew "$t" p90_us "$(kv p90_us "$out")"
		rec dnsnew "$t" errors "$(kv errors "$out")"
		load "$t" latency -n 5 --name "cached.bench.test:$OPORT" >/dev/null
		out=$(load "$t" latency -n "$DNS_N" --name "cached.bench.test:$OPORT")
		rec dnshit "$t" p50_us "$(kv p50_us "$out")"
		rec dnshit "$t" p90_us "$(kv p90_us "$out")"
		rec dnshit "$t" errors "$(kv errors "$out")"
	done
	r=$((r + 1))
done
LOAD_AFTER=$(cut -d' ' -f1-3 /proc/loadavg)
T_PROXY=$(($(date +%s) - T_START))

# --- egress-exec start-up ------------------------------------------------------------------
SPAWN_VARIANTS=""
spawn_skip=""
if [ "${BENCH_SKIP_EXEC:-0}" = 1 ]; then
	spawn_skip="BENCH_SKIP_EXEC=1"
elif [ "$(id -u)" != 0 ]; then
	spawn_skip="not root"
elif [ ! -x "$EXEC" ]; then
	spawn_skip="$EXEC is not built"
else

	mkdir -p "$REPO"
	cp "$EGSTAMP" "$REPO/egstamp"
	chown -R 65534:65534 "$REPO"
	chmod 755 "$REPO" "$REPO/egstamp"
	if ! timeout -k 5 60 "$EXEC" run --repo "$REPO" -- /work/egstamp >"$TMP/exec-probe.out" 2>&1 ||
	    ! grep -q EGSTAMP "$TMP/exec-probe.out"; then
		spawn_skip="egress-exec run is not usable yet: $(tail -1 "$TMP/exec-probe.out")"
	fi
fi
# spawn variant: name | command prefix; the worker (egstamp or true) is appended.
SP_exec_nonet="$EXEC run --repo $REPO --"
SP_exec_net="$EXEC run --repo $REPO --allow https://bench.example.com --"
SP_exec_netd="$EXEC run --repo $REPO --egressd-control $TMP/ctl/control.sock --allow https://bench.example.com --"
SP_bwrap="$BWRAP --unshare-all --ro-bind / / --"
SP_unshare="unshare -n -m -p -f"
SP_plain=""
# The network variants run in a network namespace of their own (unshare -n, outside the
# timed region): egress-exec refuses network mode (capability_missing, network_enforcement)
# while any wildcard socket in egressd's namespace would be reachable through the veth, and
# the machine's own namespace has such sockets that are not ours to close. The namespace
# goes away with its last process; the inner egressd is stopped by the inner trap.
spawn_block() { # variant worker rawfile
	case $1 in
	exec_net)
		# shellcheck disable=SC2086
		timeout -k 5 600 unshare -n sh -c 'ip link set lo up && exec "$@"' sh \
		    "$EGSPAWN" -n $block --raw "$3" -- $SP_exec_net "$2"
		;;
	exec_netd)
		rm -f "$TMP/ctl/control.sock"
		# shellcheck disable=SC2016,SC2086
		timeout -k 5 600 unshare -n sh -c '
			ip link set lo up || exit 1
			"$1" -f -c "$2" 2>>"$3" &
			e=$!
			trap "kill \$e 2>/dev/null; wait \$e 2>/dev/null" EXIT
			i=0
			while [ ! -S "$4" ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
			shift 4
			"$@"' sh "$EGRESSD" "$TMP/ctl/egressd.ini" "$TMP/ctl/egressd.log" \
		    "$TMP/ctl/control.sock" "$EGSPAWN" -n $block --raw "$3" -- $SP_exec_netd "$2"
		;;
	*)
		pre=$(eval "echo \"\$SP_$1\"")
		# shellcheck disable=SC2086
		timeout -k 5 600 "$EGSPAWN" -n $block --raw "$3" -- $pre "$2"
		;;
	esac
}
if [ -z "$spawn_skip" ]; then
	SPAWN_VARIANTS="plain unshare"
	[ -n "$BWRAP" ] && SPAWN_VARIANTS="$SPAWN_VARIANTS bwrap"
	# exec_netd: a long-running egressd with a control socket, as a host service runs it;
	# the run's grant and veth listener are created over the socket instead of starting a
	# private egressd per run.
	SPAWN_VARIANTS="$SPAWN_VARIANTS exec_nonet exec_net exec_netd"
	mkdir -p "$TMP/ctl"
	printf '[egressd]\ncontrol_socket = %s\ndecision_log = %s\n' "$TMP/ctl/control.sock" \
	    "$TMP/ctl/decisions.jsonl" > "$TMP/ctl/egressd.ini"
	block=$(( (SPAWN_N + 4) / 5 ))
	b=1
	while [ $b -le 5 ]; do
		for v in $SPAWN_VARIANTS; do
			case $v in
			exec_*) stamp=/work/egstamp ;;
			*) stamp=$EGSTAMP ;;
			esac
			spawn_block $v "$stamp" "$TMP/spawn.$v.stamp" >/dev/null 2>>"$TMP/spawn.log"
			spawn_block $v /bin/true "$TMP/spawn.$v.true" >/dev/null 2>>"$TMP/spawn.log"
		done
		b=$((b + 1))
	done
fi

# --- profile of egressd (batch) under the rate scenario --------------------------------------
PROFILE_NOTE=""
if [ "$PROFILE" = 1 ] && [ -n "${PID_egressd_batch:-}" ] && command -v perf >/dev/null 2>&1 &&
    perf record -q -e cpu-clock -o "$TMP/perf.probe" -- true >/dev/null 2>&1; then
	pid=$PID_egressd_batch
	# DWARF call graphs: the distribution's libraries and egressd have no frame pointers,
	# so -g (fp) attributes most samples to raw addresses.
	perf record -q -e cpu-clock -F 499 --call-graph dwarf,16384 -p "$pid" \
	    -o "$OUTDIR/perf.data" -- sleep "$RATE_S" >/dev/null 2>&1 &
	pp=$!
	addpid $pp
	load egressd-batch rate -c "$RATE_C" -t "$RATE_S" > "$TMP/profile.rate"
	wait $pp 2>/dev/null
	dropid $pp
	{
		echo "# egressd (log_sync=batch) under rate -c $RATE_C -t $RATE_S: $(cat "$TMP/profile.rate")"
		echo "# perf record -e cpu-clock -F 499 --call-graph dwarf; flat profile by symbol (self time)"
		perf report -i "$OUTDIR/perf.data" --stdio --no-children --sort dso,symbol -g none \
		    --percent-limit 0.7 2>/dev/null | grep -v '^$'
		echo "# by shared object"
		perf report -i "$OUTDIR/perf.data" --stdio --no-children --sort dso -g none \
		    2>/dev/null | grep -v '^#' | grep -v '^$'
		echo "# inclusive (children) by user-space symbol, >= 2%: where egressd spends it"
		perf report -i "$OUTDIR/perf.data" --stdio --children --sort symbol -g none \
		    --percent-limit 2 2>/dev/null | grep -v '^#' | grep -v '^$' | grep -v '\[k\]' |
		    grep -v ' 0x0000'
		echo "# inclusive (children) by kernel symbol, >= 5%"
		perf report -i "$OUTDIR/perf.data" --stdio --children --sort symbol -g none \
		    --percent-limit 5 2>/dev/null | grep '\[k\]'
	} > "$OUTDIR/profile.txt"
	# System calls per transaction (strace counts them exactly; its overhead does not
	# matter for a count), egressd with log_sync = none, 200 transactions at c=1.
	if command -v strace >/dev/null 2>&1 && [ -n "${PID_egressd_none:-}" ]; then
		timeout -k 5 120 strace -f -c -p "$PID_egressd_none" -o "$TMP/strace.txt" 2>/dev/null &
		sp=$!
		addpid $sp
		sleep 1
		sout=$(load egressd-none latency -n 200 --timeout 30)
		sleep 0.5
		kill -INT $sp 2>/dev/null
		wait $sp 2>/dev/null
		dropid $sp
		{
			echo "# strace -f -c on egressd (log_sync=none) for 200 transactions at c=1: $sout"
			awk 'NR > 2 && $NF != "total" && $4 ~ /^[0-9]+$/ { printf "%-16s %8.2f per transaction\n", $NF, $4 / 200 }
			     $NF == "total" { printf "%-16s %8.2f per transaction\n", "TOTAL", $4 / 200 }' "$TMP/strace.txt"
		} >> "$OUTDIR/profile.txt"
	fi
	PROFILE_NOTE="profile: $OUTDIR/profile.txt"
else
	PROFILE_NOTE="profile: skipped (perf unusable or BENCH_PROFILE=0)"
fi

# --- the table ---------------------------------------------------------------------------
# med SCEN TARGET KEY: median over rounds; sum SCEN TARGET KEY
med() {
	awk -v s="$1" -v t="$2" -v k="$3" '$1 == s && $2 == t && $3 == k && $4 != "" { print $4 }' "$RAW" |
	    sort -g | awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)] }'
}
sum() {
	awk -v s="$1" -v t="$2" -v k="$3" '$1 == s && $2 == t && $3 == k { x += $4; n++ }
	    END { if (n) printf "%.0f\n", x }' "$RAW"
}
fmt() { # value reference decimals: "v (×r)"
	awk -v v="$1" -v ref="$2" -v d="$3" 'BEGIN {
		if (v == "") { printf "—"; exit }
		printf "%." d "f", v
		if (ref != "" && ref + 0 > 0) printf " (×%.2f)", v / ref }'
}

OUT=$OUTDIR/latest.md
{
	echo "# egress benchmark, $(date -u '+%Y-%m-%d %H:%M UTC')"
	echo
	echo "Machine: $(nproc) cores ($(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)), $(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo), Linux $(uname -r); load average $LOAD_BEFORE before, $LOAD_AFTER after the proxy scenarios (${T_PROXY} s)."
	echo "Source: $(git -C "$SRC" rev-parse --short HEAD 2>/dev/null || echo unknown); build: $BUILD."
	tpv="not installed"
	[ -n "$TINYPROXY" ] && tpv=$("$TINYPROXY" -v 2>&1 | head -1 | sed 's/^tinyproxy //')
	sqv="not installed"
	[ -n "$SQUID" ] && sqv=$("$SQUID" -v 2>/dev/null | head -1 | sed 's/.*Version //')
	echo "Peers: tinyproxy $tpv (LogLevel Warning), squid $sqv (access_log on, no cache); egressd splice on."
	echo "Rounds: $ROUNDS interleaved; latency $LAT_N transactions/round; rate $RATE_C connections × ${RATE_S} s/round; bulk $BULK bytes/run; $IDLE_N idle tunnels."
	echo "Each cell: median over rounds (×ratio to direct where direct has the figure)."
	echo
	printf '| scenario |'
	for t in $TARGETS; do printf ' %s |' "$t"; done
	echo
	printf '|---|'
	for t in $TARGETS; do printf -- '---|'; done
	echo
	row() { # label scen key decimals use_ratio
		printf '| %s |' "$1"
		ref=""
		[ "$5" = 1 ] && ref=$(med "$2" direct "$3")
		for t in $TARGETS; do printf ' %s |' "$(fmt "$(med "$2" "$t" "$3")" "$ref" "$4")"; done
		echo
	}
	row "CONNECT latency p50 (µs, c=1)" lat p50_us 0 1
	row "CONNECT latency p90 (µs)" lat p90_us 0 1
	row "CONNECT latency p99 (µs)" lat p99_us 0 1
	row "transactions/s (c=$RATE_C)" rate tps 0 1
	printf '| errors under load (all rounds) |'
	for t in $TARGETS; do printf ' %s |' "$(sum rate "$t" errors)"; done
	echo
	row "p99 under load (µs)" rate p99_us 0 1
	printf '| proxy CPU per transaction (µs) |'
	for t in $TARGETS; do
		tk=$(sum rate "$t" cpu_ticks)
		n=$(sum rate "$t" ok)
		if [ -n "$tk" ] && [ -n "$n" ] && [ "$n" -gt 0 ]; then
			printf ' %s |' "$(awk -v c="$tk" -v n="$n" -v hz="$CLK_TCK" 'BEGIN { printf "%.0f", c / hz * 1e6 / n }')"
		else
			printf ' — |'
		fi
	done
	echo
	# The origin's CPU for one accept/read/write/close, the same through every target: a
	# floor for the one-connection share of a proxy's per-transaction CPU (loopback: the
	# sender's CPU also runs the receiver's TCP input, see docs/performance.md).
	printf '| origin CPU per transaction (µs, reference) |'
	for t in $TARGETS; do
		tk=$(sum rate "$t" origin_ticks)
		n=$(sum rate "$t" ok)
		if [ -n "$tk" ] && [ -n "$n" ] && [ "$n" -gt 0 ]; then
			printf ' %s |' "$(awk -v c="$tk" -v n="$n" -v hz="$CLK_TCK" 'BEGIN { printf "%.0f", c / hz * 1e6 / n }')"
		else
			printf ' — |'
		fi
	done
	echo
	row "bulk, 1 tunnel (MiB/s)" bulk1 mib_s 0 1
	row "bulk, 4 tunnels (MiB/s)" bulk4 mib_s 0 1
	printf '| proxy CPU per GiB moved (s) |'
	for t in $TARGETS; do
		tk=$(sum bulk "$t" cpu_ticks)
		n=$(sum bulk "$t" bytes)
		if [ -n "$tk" ] && [ -n "$n" ] && [ "$n" -gt 0 ]; then
			printf ' %s |' "$(awk -v c="$tk" -v n="$n" -v hz="$CLK_TCK" 'BEGIN { printf "%.2f", c / hz / (n / 1073741824) }')"
		else
			printf ' — |'
		fi
	done
	echo
	printf '| RSS per idle tunnel (KiB; tunnels held) |'
	for t in $TARGETS; do
		k=$(med idle "$t" kib_per_tunnel)
		if [ -n "$k" ]; then printf ' %s (%s of %s) |' "$k" "$(med idle "$t" open)" "$IDLE_N"; else printf ' — |'; fi
	done
	echo
	printf '| proxy fds with the idle tunnels open |'
	for t in $TARGETS; do printf ' %s |' "$(fmt "$(med idle "$t" fds)" "" 0)"; done
	echo
	echo
	echo "Decision log cost (egressd, ratio to log_sync = none):"
	echo
	echo "| log_sync | latency p50 (µs) | transactions/s |"
	echo "|---|---|---|"
	ln=$(med lat egressd-none p50_us)
	tn=$(med rate egressd-none tps)
	for v in none batch always; do
		echo "| $v | $(fmt "$(med lat egressd-$v p50_us)" "$ln" 0) | $(fmt "$(med rate egressd-$v tps)" "$tn" 0) |"
	done
	echo
	echo "DNS cache (egressd, log_sync = none; ratio to direct latency p50):"
	echo
	echo "| hop | p50 (µs) | p90 (µs) | errors |"
	echo "|---|---|---|---|"
	ld=$(med lat direct p50_us)
	echo "| first hop to a new name (DNS query) | $(fmt "$(med dnsnew egressd-none p50_us)" "$ld" 0) | $(fmt "$(med dnsnew egressd-none p90_us)" "" 0) | $(sum dnsnew egressd-none errors) |"
	echo "| same name again (cache hit) | $(fmt "$(med dnshit egressd-none p50_us)" "$ld" 0) | $(fmt "$(med dnshit egressd-none p90_us)" "" 0) | $(sum dnshit egressd-none errors) |"
	echo "| IP literal (no DNS) | $(fmt "$(med lat egressd-none p50_us)" "$ld" 0) | $(fmt "$(med lat egressd-none p90_us)" "" 0) | |"
	echo
	echo "Start-up ($SPAWN_N runs per variant, interleaved in 5 blocks; ms):"
	echo
	if [ -n "$spawn_skip" ]; then
		echo "skipped: $spawn_skip"
	else
		echo "| variant | first instruction p50 | p90 | whole run of true p50 | p90 | failed runs |"
		echo "|---|---|---|---|---|---|"
		for v in $SPAWN_VARIANTS; do
			case $v in
			plain) label="plain fork+exec (no sandbox)" ;;
			unshare) label="unshare -n -m -p -f" ;;
			bwrap) label="bwrap --unshare-all --ro-bind / /" ;;
			exec_nonet) label="egress-exec run (full sandbox, no network)" ;;
			exec_net) label="egress-exec run --allow (full sandbox, network, private egressd; own netns)" ;;
			exec_netd) label="egress-exec run --allow --egressd-control (network, running egressd; own netns)" ;;
			esac
			pf() { # file column pct
				[ -s "$1" ] || { printf '—'; return; }
				awk -v c="$2" '$c > 0 { print $c / 1e6 }' "$1" | sort -g |
				    awk -v p="$3" '{ v[NR] = $1 } END { if (NR) printf "%.1f", v[int(p * (NR - 1) + 1.5)] }'
			}
			want=$(( ((SPAWN_N + 4) / 5) * 5 ))
			got=$(cat "$TMP/spawn.$v.stamp" "$TMP/spawn.$v.true" 2>/dev/null | wc -l)
			echo "| $label | $(pf "$TMP/spawn.$v.stamp" 2 0.5) | $(pf "$TMP/spawn.$v.stamp" 2 0.9) | $(pf "$TMP/spawn.$v.true" 1 0.5) | $(pf "$TMP/spawn.$v.true" 1 0.9) | $((want * 2 - got)) |"
		done
	fi
	echo
	echo "$PROFILE_NOTE"
} > "$OUT"
cat "$OUT"
# Logs worth keeping for a reader of the results.
cp "$TMP/egload.log" "$OUTDIR/egload.log" 2>/dev/null
cp "$TMP/spawn.log" "$OUTDIR/spawn.log" 2>/dev/null
[ -s "$TMP/apt.log" ] && cp "$TMP/apt.log" "$OUTDIR/apt.log"
echo "bench: results in $OUT (raw figures: $RAW)" >&2
exit 0
