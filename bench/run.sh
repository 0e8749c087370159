#!/bin/sh
# bench/run.sh BUILD_DIR - `make bench` (see docs/performance.md).
#
# Runs, in one run and interleaved (round r runs every target before round r+1 starts, in a
# rotating order), the same scenarios against: a direct connection, the bare relay
# (bench/egrelay: epoll + splice, no checks: the floor), egressd (log_sync = batch, the
# default; in the full run also none and always), egressd with `pinning = required` and a
# DNS name (cache hit), and - when installed - Apache Traffic Server, tinyproxy and squid.
# Every figure is reported as a ratio to direct and to the relay. Then egress-exec start-up
# against bwrap and unshare, and (full run, when perf works) a profile of egressd under the
# rate scenario. Everything listens on 127.0.0.1 / 127.0.9.x only; every process this
# script starts is stopped by pid in the EXIT trap; every wait is bounded.
#
# Knobs (environment):
#   BENCH_QUICK=1           quick mode (< 3 min): 1 round, small counts, egressd batch only,
#                           no profile; does not write docs/performance.md
#   BENCH_GOALS=1           goals mode (`make bench-goals`, ~9 min): only what the goals of
#                           latency, transactions/s and CPU per transaction are judged on
#                           (direct, the relay, egressd batch and the peers; latency 1000 and
#                           rate 5 s), over 15 rounds of one repetition, each a pairing unit
#                           farther apart in time than a full run's repetitions; writes its
#                           own block of docs/performance.md (bench-goals markers), goals.md
#                           and raw-goals.txt
#   BENCH_INSTALL_PEERS=1   install the peers first (sh scripts/deps.sh bench)
#   BENCH_ROUNDS=5          interleaved rounds (quick: 1)
#   BENCH_LAT_N=1000        latency transactions per target per repetition
#   BENCH_RATE_SECONDS=3    rate seconds per target per repetition; BENCH_RATE_CONC=64
#   BENCH_LAT_REPS=3        latency + rate repetitions per round (quick, goals: 1), each a
#                           pairing unit: a full run judges its goals on 5 x 3 = 15
#   BENCH_ONECPU=1          latency also with the proxy (its threads and children), the
#                           load generator and the origin pinned to one CPU (BENCH_ONECPU_CPU,
#                           default 0) after each repetition's free latency runs: the proxies' own cost at
#                           one connection without the host's cross-CPU wake-ups (0: skip;
#                           skipped on one core)
#   BENCH_BULK_BYTES=536870912  bytes per bulk run (one tunnel; four tunnels share it)
#   BENCH_BULK_REPS=3       bulk runs per target per round (interleaved; a bulk run is short
#                           and the host's noise large, so it is repeated within the round)
#   BENCH_IDLE_TUNNELS=5000 idle tunnels held per proxy
#   BENCH_DNS_N=300         DNS-cache scenario transactions per round
#   BENCH_SPAWN_RUNS=50     egress-exec/bwrap/unshare runs per variant
#   BENCH_PROFILE=1         perf profile of egressd under the rate scenario (0: skip)
#   BENCH_SKIP_EXEC=1       skip the egress-exec start-up part
#   BENCH_EXEC_STEPS=1      egress-exec start-up step by step under strace (bench/exec_steps.py;
#                           default: full run yes, quick run no); BENCH_EXEC_STEPS_RUNS=10
#   BENCH_WRITE_DOC=1       write the table into docs/performance.md (default: full run and
#                           goals run yes, quick run no)
#   BENCH_BUDGET_US="2 5 10 20 30 40"  the work budget: the relay again with this much busy
#                           work per transaction (egrelay --work-us), interleaved with the
#                           relay and egressd in rate and latency runs (free and, with
#                           BENCH_ONECPU, at one CPU) of their own (full run; "" skips it)
#   BENCH_OUT=DIR           results directory [BUILD_DIR/bench-results]
# shellcheck disable=SC2034,SC3045
# (SC2034: PROXY_*, PID_*, SP_* are read through eval; SC3045: dash and bash both have
# ulimit -n/-H.)
set -u

die() { echo "bench: $*" >&2; exit 1; }
. "$(dirname "$0")/lib.sh" || exit 1

[ $# -ge 1 ] || die "usage: sh bench/run.sh BUILD_DIR"
BUILD=$(cd "$1" 2>/dev/null && pwd) || die "no build directory $1"
SRC=$(cd "$(dirname "$0")/.." && pwd)
QUICK=${BENCH_QUICK:-0}
GOALS=${BENCH_GOALS:-0}
case $GOALS in 0 | 1) ;; *) die "BENCH_GOALS: 0 or 1" ;; esac
[ "$QUICK" = 1 ] && [ "$GOALS" = 1 ] && die "BENCH_QUICK and BENCH_GOALS: one at a time"
ONECPU=${BENCH_ONECPU:-1}
ONECPU_CPU=${BENCH_ONECPU_CPU:-0}
case $ONECPU in 0 | 1) ;; *) die "BENCH_ONECPU: 0 or 1" ;; esac
case $ONECPU_CPU in '' | *[!0-9]*) die "BENCH_ONECPU_CPU: a CPU number" ;; esac
# the CPUs this run may use (what it was started with), restored after each pinned run
CPUS_ALL=$(cpus_allowed $$)
if [ "$ONECPU" = 1 ] && { [ "$(nproc)" -lt 2 ] || ! command -v taskset >/dev/null 2>&1 ||
    ! taskset -c "$ONECPU_CPU" true 2>/dev/null || [ -z "$CPUS_ALL" ]; }; then
	echo "bench: no one-CPU latency (one core, no taskset, or CPU $ONECPU_CPU not usable)" >&2
	ONECPU=0
fi
if [ "$GOALS" = 1 ]; then
	# the goal figures only: no bulk, idle tunnels, DNS, start-up, profile, work budget,
	# wake-up or system-call passes
	ROUNDS=${BENCH_ROUNDS:-15}
	LAT_N=${BENCH_LAT_N:-1000}
	RATE_S=${BENCH_RATE_SECONDS:-5}
	LAT_REPS=${BENCH_LAT_REPS:-1}
	BULK=0
	BULK_REPS=0
	IDLE_N=0
	DNS_N=0
	SPAWN_N=0
	PROFILE=0
	WRITE_DOC=${BENCH_WRITE_DOC:-1}
	STEPS=0
	EGRESSD_SYNCS="batch"
	BUDGET_US=""
elif [ "$QUICK" = 1 ]; then
	ROUNDS=${BENCH_ROUNDS:-1}
	LAT_N=${BENCH_LAT_N:-200}
	RATE_S=${BENCH_RATE_SECONDS:-2}
	LAT_REPS=${BENCH_LAT_REPS:-1}
	BULK=${BENCH_BULK_BYTES:-268435456}
	BULK_REPS=${BENCH_BULK_REPS:-1}
	IDLE_N=${BENCH_IDLE_TUNNELS:-1000}
	DNS_N=${BENCH_DNS_N:-100}
	SPAWN_N=${BENCH_SPAWN_RUNS:-10}
	PROFILE=${BENCH_PROFILE:-0}
	WRITE_DOC=${BENCH_WRITE_DOC:-0}
	STEPS=${BENCH_EXEC_STEPS:-0}
	EGRESSD_SYNCS="batch"
	BUDGET_US=${BENCH_BUDGET_US-}
else
	ROUNDS=${BENCH_ROUNDS:-5}
	LAT_N=${BENCH_LAT_N:-1000}
	RATE_S=${BENCH_RATE_SECONDS:-3}
	LAT_REPS=${BENCH_LAT_REPS:-3}
	BULK=${BENCH_BULK_BYTES:-536870912}
	BULK_REPS=${BENCH_BULK_REPS:-3}
	IDLE_N=${BENCH_IDLE_TUNNELS:-5000}
	DNS_N=${BENCH_DNS_N:-300}
	SPAWN_N=${BENCH_SPAWN_RUNS:-50}
	PROFILE=${BENCH_PROFILE:-1}
	WRITE_DOC=${BENCH_WRITE_DOC:-1}
	STEPS=${BENCH_EXEC_STEPS:-1}
	EGRESSD_SYNCS="batch none always"
	BUDGET_US=${BENCH_BUDGET_US-2 5 10 20 30 40}
fi
RATE_C=${BENCH_RATE_CONC:-64}
case $LAT_REPS in '' | *[!0-9]*) die "BENCH_LAT_REPS: a whole number of at least 1" ;; esac
[ "$LAT_REPS" -ge 1 ] || die "BENCH_LAT_REPS: a whole number of at least 1"
LOAD_WRAP=""    # load()'s prefix; set only around the perf-counted runs below
STEPS_N=${BENCH_EXEC_STEPS_RUNS:-10}
OUTDIR=${BENCH_OUT:-$BUILD/bench-results}
DOC=$SRC/docs/performance.md

EGLOAD=$BUILD/bench/egload
EGORIGIN=$BUILD/bench/egorigin
EGSPAWN=$BUILD/bench/egspawn
EGSTAMP=$BUILD/bench/egstamp
EGRELAY=$BUILD/bench/egrelay
EGRESSD=$BUILD/egressd/egressd
EXEC=$BUILD/executor/egress-exec
for b in "$EGLOAD" "$EGORIGIN" "$EGSPAWN" "$EGSTAMP" "$EGRELAY" "$EGRESSD"; do
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
[ "$GOALS" = 1 ] && RAW=$OUTDIR/raw-goals.txt   # a goals run keeps the full run's figures
REPO=$TMP/repo
: > "$RAW"
PIDS=""

trap cleanup EXIT
trap 'exit 130' INT TERM

addpid() { PIDS="$PIDS $1"; }

# --- optional peers ------------------------------------------------------------------
# `make bench` installs them (scripts/deps.sh bench: a policy-rc.d keeps their services
# from starting, and they are disabled after the install). Here they only run by pid.
if [ "${BENCH_INSTALL_PEERS:-0}" = 1 ]; then
	sh "$SRC/scripts/deps.sh" bench || echo "bench: installing the peers failed; missing ones are skipped" >&2
fi
TINYPROXY=$(command -v tinyproxy 2>/dev/null || { [ -x /usr/bin/tinyproxy ] && echo /usr/bin/tinyproxy; })
SQUID=$(command -v squid 2>/dev/null || { [ -x /usr/sbin/squid ] && echo /usr/sbin/squid; })
ATS=$(command -v traffic_server 2>/dev/null || true)
BWRAP=$(command -v bwrap 2>/dev/null || true)
[ "$(id -u)" = 0 ] || { SQUID=""; ATS=""; }

# --- helpers ---------------------------------------------------------------------------
# free_port (bench/lib.sh) sets PORT to a free loopback port (TCP and UDP), from this per-run
# offset on, so parallel runs rarely collide. Not in a subshell: FREE_PORT_NEXT must advance.
FREE_PORT_NEXT=$((21000 + ($$ % 8000) * 4))

# Context switches of every thread of a process (voluntary + involuntary): on this machine
# each is a wake-up or a hand-off between threads.
ctxsw() {
	cat /proc/"$1"/task/*/status 2>/dev/null |
	    awk '/^(non)?voluntary_ctxt_switches:/ { n += $2 } END { print n + 0 }'
}
CLK_TCK=$(getconf CLK_TCK)

# rec SCENARIO TARGET KEY VALUE
rec() { echo "$1 $2 $3 $4" >> "$RAW"; }
# recp SCEN TARGET ROUND VALUE: one run's figure with its pairing unit (the round, or the
# round and repetition), for the paired ratios of the goals
recp() { echo "pair:$1 $2 $3 $4" >> "$RAW"; }

# --- the origin ------------------------------------------------------------------------
ORIGIN_IP=127.0.9.1
free_port
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
	free_port
	p1=$PORT
	free_port
	p2=$PORT
	free_port
	p3=$PORT
	d=$TMP/egressd-$v
	mkdir -p "$d"
	# Two listeners and grants: a grant allows at most 4096 connections
	# (EGRESS_GRANT_CONNECTIONS_MAX), the idle scenario holds more.
	egressd_ini "$d/egressd.ini" "$d/decisions.jsonl" "$v"
	cat >> "$d/egressd.ini" <<EOF
dns_server = $DNS_ADDR
idle_timeout = 10m

[listener bench-a]
listen = 127.0.0.1:$p1
grant = bench-a

[listener bench-b]
listen = 127.0.0.1:$p2
grant = bench-b

[listener bench-p]
listen = 127.0.0.1:$p3
grant = bench-p

[grant bench-a]
allow = tcp://$ORIGIN
allow = https://*.bench.test:$OPORT
connections = 4096

[grant bench-b]
allow = tcp://$ORIGIN
connections = 4096

[grant bench-p]
allow = https://*.bench.test:$OPORT
pinning = required
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
	if [ "$v" = batch ] && [ "$GOALS" = 0 ]; then
		# The same egressd through a grant with pinning = required, CONNECT by name
		# (load() adds --name): authorization by pattern, a DNS cache hit, pinning.
		TARGETS="$TARGETS egressd-pin"
		PROXY_egressd_pin=127.0.0.1:$p3
		PID_egressd_pin=$pid
	fi
}

start_relay() {
	free_port
	p1=$PORT
	free_port
	p2=$PORT
	"$EGRELAY" --listen "127.0.0.1:$p1" --listen "127.0.0.1:$p2" 2>"$TMP/relay.log" &
	pid=$!
	addpid $pid
	wait_listen 127.0.0.1 "$p1" $pid || { echo "bench: egrelay did not start" >&2; return 1; }
	TARGETS="$TARGETS relay"
	PROXY_relay=127.0.0.1:$p1
	IDLEPROXY_relay=127.0.0.1:$p1,127.0.0.1:$p2
	PID_relay=$pid
}

# The work budget (BUDGET_US): the same relay with W µs of busy work per accepted connection,
# PROXY_relay_wW / PID_relay_wW; not in TARGETS (only the budget runs use it).
BUDGET_TARGETS=""
start_relay_work() { # W
	free_port
	"$EGRELAY" --listen "127.0.0.1:$PORT" --work-us "$1" 2>"$TMP/relay-w$1.log" &
	pid=$!
	addpid $pid
	wait_listen 127.0.0.1 "$PORT" $pid || { echo "bench: egrelay --work-us $1 did not start" >&2; return 1; }
	BUDGET_TARGETS="$BUDGET_TARGETS relay-w$1"
	eval "PROXY_relay_w$1=127.0.0.1:$PORT"
	eval "PID_relay_w$1=$pid"
}

# Apache Traffic Server as a forward proxy: no remap required, CONNECT to the origin's port
# only, HTTP cache off, its access log on (squid format, like squid's); run by pid from a
# private runroot (config, logs, runtime under $TMP), never through its service.
start_ats() {
	free_port
	p=$PORT
	d=$TMP/ats
	mkdir -p "$d/etc" "$d/run" "$d/log" "$d/cache" "$d/var"
	cp -r /etc/trafficserver/body_factory "$d/etc/" 2>/dev/null
	cat > "$d/runroot.yaml" <<EOF
prefix: /usr
exec_prefix: /usr
bindir: /usr/bin
sbindir: /usr/sbin
sysconfdir: $d/etc
datadir: /usr/share/trafficserver
includedir: /usr/include
libdir: /usr/lib/trafficserver
libexecdir: /usr/lib/trafficserver/modules
localstatedir: $d/var
runtimedir: $d/run
logdir: $d/log
cachedir: $d/cache
bodyfactorydir: $d/etc/body_factory
EOF
	cat > "$d/etc/records.config" <<EOF
CONFIG proxy.config.http.server_ports STRING $p:ipv4:ip-in=127.0.0.1
CONFIG proxy.config.http.connect_ports STRING $OPORT
CONFIG proxy.config.url_remap.remap_required INT 0
CONFIG proxy.config.reverse_proxy.enabled INT 0
CONFIG proxy.config.http.cache.http INT 0
CONFIG proxy.config.log.logging_enabled INT 3
CONFIG proxy.config.log.max_space_mb_headroom INT 10
CONFIG proxy.config.admin.user_id STRING #-1
CONFIG proxy.config.crash_log_helper STRING /bin/true
CONFIG proxy.config.http.insert_request_via_str INT 0
CONFIG proxy.config.http.insert_client_ip INT 0
CONFIG proxy.config.http.insert_squid_x_forwarded_for INT 0
CONFIG proxy.config.http.transaction_no_activity_timeout_in INT 600
CONFIG proxy.config.http.transaction_no_activity_timeout_out INT 600
CONFIG proxy.config.net.connections_throttle INT $((IDLE_N * 2 + 1000))
CONFIG proxy.config.net.max_connections_in INT $((IDLE_N * 2 + 1000))
CONFIG proxy.config.diags.debug.enabled INT 0
CONFIG proxy.config.hostdb.host_file.path STRING /dev/null
EOF
	for f in remap.config storage.config plugin.config hosting.config volume.config \
	    cache.config parent.config socks.config splitdns.config ssl_multicert.config; do
		: > "$d/etc/$f"
	done
	echo "sni: []" > "$d/etc/sni.yaml"
	echo "strategies: []" > "$d/etc/strategies.yaml"
	cat > "$d/etc/ip_allow.yaml" <<EOF
ip_allow:
  - apply: in
    ip_addrs: 127.0.0.1
    action: allow
    methods: ALL
EOF
	cat > "$d/etc/logging.yaml" <<EOF
logging:
  formats:
    - name: squid
      format: '%<cqtq> %<ttms> %<chi> %<crc>/%<pssc> %<psql> %<cqhm> %<cquc> %<caun> %<phr>/%<shn> %<psct>'
  logs:
    - filename: access
      format: squid
EOF
	"$ATS" --run-root="$d/runroot.yaml" >"$d/stderr.log" 2>&1 &
	pid=$!
	addpid $pid
	if ! wait_listen 127.0.0.1 "$p" $pid; then
		echo "bench: traffic_server did not start:" >&2
		tail -5 "$d/stderr.log" "$d/log/diags.log" >&2
		return 1
	fi
	TARGETS="$TARGETS ats"
	PROXY_ats=127.0.0.1:$p
	IDLEPROXY_ats=127.0.0.1:$p
	PID_ats=$pid
}

start_tinyproxy() {
	free_port
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
	free_port
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

start_relay
start_egressd batch
[ -n "$ATS" ] && start_ats
[ -n "$TINYPROXY" ] && start_tinyproxy
[ -n "$SQUID" ] && start_squid
for v in $EGRESSD_SYNCS; do [ "$v" = batch ] || start_egressd "$v"; done

var() { eval "echo \${$1_$(echo "$2" | tr - _):-}"; }
load() { # target mode args...: run egload through (or around) the target's proxy
	# (LOAD_WRAP: a command line put before it, e.g. perf stat -p PID --, which counts
	# the proxy for exactly the run)
	t=$1
	shift
	m=$1
	shift
	px=$(var PROXY "$t")
	if [ "$t" = egressd-pin ]; then
		${LOAD_WRAP:-} timeout -k 5 900 "$EGLOAD" "$m" --target "$ORIGIN" --proxy "$px" \
		    --name "cached.bench.test:$OPORT" "$@" 2>>"$TMP/egload.log"
	elif [ -n "$px" ]; then
		${LOAD_WRAP:-} timeout -k 5 900 "$EGLOAD" "$m" --target "$ORIGIN" --proxy "$px" "$@" \
		    2>>"$TMP/egload.log"
	else
		${LOAD_WRAP:-} timeout -k 5 900 "$EGLOAD" "$m" --target "$ORIGIN" "$@" 2>>"$TMP/egload.log"
	fi
}
# The targets in a rotating order for round $1 (rotate_list, bench/lib.sh).
# shellcheck disable=SC2086
rotate() { rotate_list "$1" $TARGETS; }
# load() with the target's proxy (its threads and children), the origin and the load
# generator pinned to CPU ONECPU_CPU for the run, then unpinned to the CPUs the run started
# with (CPUS_ALL). A run that was not wholly pinned is not made (false, and said); both
# are always unpinned.
load_onecpu() { # target mode args...
	lo_t=$1
	lo_ok=1
	pin_tree "$ORIGIN_PID" "$ONECPU_CPU" || lo_ok=0
	pin_tree "$(var PID "$lo_t")" "$ONECPU_CPU" || lo_ok=0
	if [ $lo_ok = 1 ]; then
		LOAD_WRAP="taskset -c $ONECPU_CPU"
		load "$@"
		LOAD_WRAP=""
	else
		echo "bench: cannot pin $lo_t to CPU $ONECPU_CPU: its one-CPU run skipped" >&2
	fi
	pin_tree "$(var PID "$lo_t")" "$CPUS_ALL" ||
	    echo "bench: cannot unpin $lo_t (CPUs $CPUS_ALL)" >&2
	pin_tree "$ORIGIN_PID" "$CPUS_ALL" ||
	    echo "bench: cannot unpin the origin (CPUs $CPUS_ALL)" >&2
	[ $lo_ok = 1 ]
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
	[ "$IDLE_N" -gt 0 ] || break
	pid=$(var PID "$t")
	px=$(var IDLEPROXY "$t")
	[ -n "$pid" ] && [ -n "$px" ] || continue
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
	# latency at concurrency 1 (the wake-ups are counted in a pass of their own below),
	# then transactions/s at concurrency RATE_C with the proxy's CPU per transaction;
	# LAT_REPS times per round, every target once per repetition (rotated), each
	# repetition a pairing unit of its own ("R.K"): the goals' intervals rest on the
	# number of units (15 in a full run)
	k=1
	while [ $k -le "$LAT_REPS" ]; do
		for t in $(rotate $(((r - 1) * LAT_REPS + k))); do
			out=$(load "$t" latency -n "$LAT_N")
			for q in p50_us p90_us p99_us; do rec lat "$t" $q "$(kv $q "$out")"; done
			recp lat "$t" "$r.$k" "$(kv p50_us "$out")"
			rec lat "$t" errors "$(kv errors "$out")"
		done
		# after the repetition's free runs, the same at one CPU: each target's proxy (its
		# threads and children), the origin and the load generator pinned to one CPU for
		# its run, so that no wake-up of a transaction crosses CPUs. On this VM a wake-up of an idle vCPU costs ~20 µs, and
		# which of the placements a free run settles in (all three on one CPU, or split)
		# moves its p50 by half (docs/performance.md, "The fifteenth round"); pinned, the
		# figure is the proxies' own cost at one connection, steady to a few percent.
		if [ "$ONECPU" = 1 ]; then
			for t in $(rotate $(((r - 1) * LAT_REPS + k))); do
				out=$(load_onecpu "$t" latency -n "$LAT_N") || continue
				for q in p50_us p99_us; do rec lat1 "$t" $q "$(kv $q "$out")"; done
				recp lat1 "$t" "$r.$k" "$(kv p50_us "$out")"
				rec lat1 "$t" errors "$(kv errors "$out")"
			done
		fi
		for t in $(rotate $(((r - 1) * LAT_REPS + k))); do
			pid=$(var PID "$t")
			c0=0
			[ -n "$pid" ] && c0=$(cpu_ticks "$pid")
			o0=$(cpu_ticks $ORIGIN_PID)
			m0=$(machine_ticks)
			out=$(load "$t" rate -c "$RATE_C" -t "$RATE_S")
			m1=$(machine_ticks)
			o1=$(cpu_ticks $ORIGIN_PID)
			# the whole machine (load generator, origin, proxy, kernel): two shared cores
			# bound the rate by what all of them spend per transaction
			rec rate "$t" mbusy "$(echo "$m0 $m1" | awk '{ print $3 - $1 }')"
			rec rate "$t" midle "$(echo "$m0 $m1" | awk '{ print $4 - $2 }')"
			c1=0
			[ -n "$pid" ] && c1=$(cpu_ticks "$pid")
			rec rate "$t" origin_ticks $((o1 - o0))
			rec rate "$t" tps "$(kv tps "$out")"
			rec rate "$t" ok "$(kv ok "$out")"
			rec rate "$t" errors "$(kv errors "$out")"
			rec rate "$t" p99_us "$(kv p99_us "$out")"
			[ -n "$pid" ] && rec rate "$t" cpu_ticks $((c1 - c0))
			recp rate "$t" "$r.$k" "$(kv tps "$out")"
			[ -n "$pid" ] && [ "$(kv ok "$out")" -gt 0 ] 2>/dev/null &&
			    recp cpu "$t" "$r.$k" "$(awk -v c=$((c1 - c0)) -v n="$(kv ok "$out")" -v hz="$CLK_TCK" \
			        'BEGIN { printf "%.1f", c / hz * 1e6 / n }')"
		done
		k=$((k + 1))
	done
	# bulk: one tunnel, four tunnels (BULK bytes in total each), proxy CPU per GiB;
	# BULK_REPS times per round, every target once per repetition (rotated), each
	# repetition a pairing unit of its own ("R.K")
	k=1
	while [ $k -le "$BULK_REPS" ]; do
		for t in $(rotate $(((r - 1) * BULK_REPS + k))); do
			pid=$(var PID "$t")
			for n in 1 4; do
				c0=0
				[ -n "$pid" ] && c0=$(cpu_ticks "$pid")
				out=$(load "$t" bulk -c $n --bytes $((BULK / n)) --timeout 300)
				c1=0
				[ -n "$pid" ] && c1=$(cpu_ticks "$pid")
				rec bulk$n "$t" mib_s "$(kv mib_s "$out")"
				rec bulk$n "$t" bytes "$(kv bytes "$out")"
				recp bulk$n "$t" "$r.$k" "$(kv mib_s "$out")"
				[ "$(kv errors "$out")" = 0 ] || rec bulk$n "$t" errors "$(kv errors "$out")"
				[ -n "$pid" ] && rec bulk "$t" cpu_ticks $((c1 - c0)) &&
				    rec bulk "$t" bytes "$(kv bytes "$out")"
			done
		done
		k=$((k + 1))
	done
	# DNS cache (egressd resolves; the peers are given IP literals everywhere else): a new
	# name per hop (first hop: DNS query, cache miss) versus one warm name (cache hit).
	for t in $TARGETS; do
		case $t in egressd-batch) [ "$DNS_N" -gt 0 ] || continue ;; *) continue ;; esac
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

# --- wake-ups per transaction at c=1 ------------------------------------------------------
# Context switches of the proxy, all its threads, per transaction: one latency run per
# target after the rounds (a counter attached during the rounds would slow the latency
# figures). perf's context-switches counter is inherited by threads the proxy starts during
# the run and sums them when they end: tinyproxy runs a thread per connection, whose
# switches /proc/PID/task no longer lists once it has ended (that count said 1.0 for
# tinyproxy where perf counts 3.1). Without perf: /proc/PID/task, with that caveat.
# (perf only when it counts the event itself: where the kernel refuses it, perf may fall
# back to context-switches:u, which counts nothing useful)
WAKE_TOOL=proc
if [ "$GOALS" = 0 ] && perf stat -e context-switches -x, -o "$TMP/cs.probe" -- true >/dev/null 2>&1 &&
    awk -F, '$3 == "context-switches" { f = 1 } END { exit !f }' "$TMP/cs.probe"; then
	WAKE_TOOL=perf
fi
for t in $TARGETS; do
	pid=$(var PID "$t")
	[ -n "$pid" ] && [ "$GOALS" = 0 ] || continue
	w=""
	if [ "$WAKE_TOOL" = perf ]; then
		rm -f "$TMP/cs.$t"
		LOAD_WRAP="perf stat -e context-switches -x, -o $TMP/cs.$t -p $pid --"
		out=$(load "$t" latency -n "$LAT_N")
		LOAD_WRAP=""
		w=$(awk -F, '$3 == "context-switches" && $1 ~ /^[0-9]+$/ { print $1 }' "$TMP/cs.$t" 2>/dev/null)
	fi
	if [ -z "$w" ]; then
		w0=$(ctxsw "$pid")
		out=$(load "$t" latency -n "$LAT_N")
		w=$(( $(ctxsw "$pid") - w0 ))
	fi
	n=$(kv ok "$out")
	[ -n "$w" ] && [ "${n:-0}" -gt 0 ] &&
	    rec lat "$t" wakeups "$(awk -v w="$w" -v n="$n" 'BEGIN { printf "%.1f", w / n }')"
done

# --- the work budget (full run) --------------------------------------------------------------
# What per-transaction work costs a proxy here: transactions/s and latency at c=1 (free and,
# with ONECPU, at one CPU) of the relay with W µs of busy work per transaction, interleaved
# with the plain relay and egressd (batch) in runs of their own (the same rounds and rotation
# as above), so the table can say how much work egressd's figures correspond to and how much
# the 0.85× and 1.15× goals leave for everything a real proxy must do. egressd's checks,
# records and log are not optional; this only reads them.
if [ -n "$BUDGET_US" ] && [ -n "$(var PID relay)" ] && [ -n "$(var PID egressd-batch)" ]; then
	for w in $BUDGET_US; do
		case $w in
		'' | *[!0-9]*) echo "bench: BENCH_BUDGET_US: '$w' is not a whole number of µs; skipped" >&2 ;;
		*) start_relay_work "$w" || true ;;
		esac
	done
	if [ -n "$BUDGET_TARGETS" ]; then
		# shellcheck disable=SC2086
		set -- relay $BUDGET_TARGETS egressd-batch
		BUDGET_ALL="$*"
		r=1
		while [ $r -le "$ROUNDS" ]; do
			echo "bench: work budget, round $r of $ROUNDS" >&2
			# rotated as the rounds above are. First latency at c=1, free and (ONECPU)
			# pinned to one CPU: what per-transaction work costs one connection's p50
			# here (the latency goal's budget)
			# shellcheck disable=SC2086
			for t in $(rotate_list $r $BUDGET_ALL); do
				out=$(load "$t" latency -n "$LAT_N")
				for sc in budlatf "budlatf$r"; do rec "$sc" "$t" p50 "$(kv p50_us "$out")"; done
				rec budlatf "$t" errors "$(kv errors "$out")"
				if [ "$ONECPU" = 1 ] && out=$(load_onecpu "$t" latency -n "$LAT_N"); then
					for sc in budlato "budlato$r"; do rec "$sc" "$t" p50 "$(kv p50_us "$out")"; done
					rec budlato "$t" errors "$(kv errors "$out")"
				fi
			done
			# shellcheck disable=SC2086
			for t in $(rotate_list $r $BUDGET_ALL); do
				pid=$(var PID "$t")
				c0=$(cpu_ticks "$pid")
				out=$(load "$t" rate -c "$RATE_C" -t "$RATE_S")
				c1=$(cpu_ticks "$pid")
				rec budget "$t" tps "$(kv tps "$out")"
				rec "budget$r" "$t" tps "$(kv tps "$out")"
				rec budget "$t" ok "$(kv ok "$out")"
				rec budget "$t" errors "$(kv errors "$out")"
				rec budget "$t" cpu_ticks $((c1 - c0))
			done
			r=$((r + 1))
		done
	fi
fi
LOAD_AFTER=$(cut -d' ' -f1-3 /proc/loadavg)
T_PROXY=$(($(date +%s) - T_START))

# --- egress-exec start-up ------------------------------------------------------------------
SPAWN_VARIANTS=""
spawn_skip=""
if [ "${BENCH_SKIP_EXEC:-0}" = 1 ]; then
	spawn_skip="BENCH_SKIP_EXEC=1"
elif [ "$GOALS" = 1 ]; then
	spawn_skip="goals mode (BENCH_GOALS=1)"
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

# --- egress-exec start-up, step by step (strace; full run) ----------------------------------
STEPS_NOTE=""
if [ -z "$spawn_skip" ] && [ "$STEPS" = 1 ] && command -v strace >/dev/null 2>&1 &&
    command -v python3 >/dev/null 2>&1; then
	if timeout -k 5 900 python3 "$SRC/bench/exec_steps.py" "$BUILD" "$STEPS_N" \
	    > "$OUTDIR/exec_steps.md" 2>>"$TMP/spawn.log"; then
		STEPS_NOTE="$OUTDIR/exec_steps.md"
	fi
fi

# --- profile of egressd (batch) under the rate scenario; system calls per transaction ------
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
	PROFILE_NOTE="profile: $OUTDIR/profile.txt"
else
	PROFILE_NOTE="profile: skipped (perf unusable or BENCH_PROFILE=0)"
fi
# System calls per transaction at c=1 through egressd (batch) and through the relay:
# counted by perf's syscall tracepoints (no tracer stopping the process at each call, so
# the count is the one of a normal run: under strace a transaction takes ~15x longer and
# egressd's batch syncs and writer hand-offs multiply, the relay's EAGAIN splices vanish).
# `perf stat -p PID -- egload ...` (LOAD_WRAP) counts the proxy for exactly the load's
# run (a background perf stat -p in this script did not end on SIGINT). strace -f -c when
# perf cannot open the tracepoints.
SYS_N=1000
SYS_TOOL=""
if [ "$PROFILE" = 1 ] && command -v perf >/dev/null 2>&1 &&
    perf stat -e 'syscalls:sys_enter_close' -x, -o /dev/null -- true >/dev/null 2>&1; then
	SYS_TOOL=perf
elif [ "$PROFILE" = 1 ] && command -v strace >/dev/null 2>&1; then
	SYS_TOOL=strace
	SYS_N=200
fi
if [ -n "$SYS_TOOL" ]; then
	for t in relay egressd-batch; do
		pid=$(var PID "$t")
		[ -n "$pid" ] || continue
		rm -f "$TMP/sys.$t.txt"
		if [ "$SYS_TOOL" = perf ]; then
			# (set -f: the event's * is perf's, not the shell's)
			set -f
			LOAD_WRAP="perf stat -e syscalls:sys_enter_* -x, -o $TMP/sys.$t.raw -p $pid --"
			sout=$(load "$t" latency -n "$SYS_N" --timeout 30)
			LOAD_WRAP=""
			set +f
		else
			timeout -k 5 120 strace -f -c -p "$pid" -o "$TMP/sys.$t.raw" 2>/dev/null &
			sp=$!
			addpid $sp
			sleep 1
			sout=$(load "$t" latency -n "$SYS_N" --timeout 30)
			sleep 0.5
			kill -INT $sp 2>/dev/null
			wait $sp 2>/dev/null
			dropid $sp
		fi
		# per completed transaction (egload's ok: a failed one is retried)
		sn=$(kv ok "$sout")
		[ "${sn:-0}" -gt 0 ] 2>/dev/null || continue
		if [ "$SYS_TOOL" = perf ]; then
			awk -F, -v n="$sn" '$1 ~ /^[0-9]+$/ && $1 > 0 {
				c = $3; sub(/^syscalls:sys_enter_/, "", c)
				printf "%-16s %8.2f per transaction\n", c, $1 / n; s += $1 }
			    END { printf "%-16s %8.2f per transaction\n", "TOTAL", s / n }' \
			    "$TMP/sys.$t.raw" > "$TMP/sys.$t.txt"
		else
			awk -v n="$sn" 'NR > 2 && $NF != "total" && $4 ~ /^[0-9]+$/ { printf "%-16s %8.2f per transaction\n", $NF, $4 / n }
			     $NF == "total" { printf "%-16s %8.2f per transaction\n", "TOTAL", $4 / n }' \
			    "$TMP/sys.$t.raw" > "$TMP/sys.$t.txt"
		fi
		{
			if [ "$SYS_TOOL" = perf ]; then
				echo "# perf stat -e 'syscalls:sys_enter_*' on $t (all threads) for $sn transactions at c=1: $sout"
			else
				echo "# strace -f -c on $t for $sn transactions at c=1 (perf unusable): $sout"
			fi
			sort -k2 -rn "$TMP/sys.$t.txt"
		} >> "$OUTDIR/syscalls.txt.tmp"
		rec sys "$t" per_txn "$(awk '$1 == "TOTAL" { printf "%.1f", $2 }' "$TMP/sys.$t.txt")"
	done
	[ -f "$OUTDIR/syscalls.txt.tmp" ] && mv "$OUTDIR/syscalls.txt.tmp" "$OUTDIR/syscalls.txt"
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
# fmt VALUE DIRECT_REF RELAY_REF DECIMALS: "v (×d / ×r)", – for a missing reference
fmt() {
	awk -v v="$1" -v d="$2" -v r="$3" -v n="$4" 'BEGIN {
		if (v == "") { printf "—"; exit }
		printf "%." n "f", v
		if (d == "" && r == "") exit
		printf " ("
		if (d != "" && d + 0 > 0) printf "×%.2f", v / d; else printf "–"
		printf " / "
		if (r != "" && r + 0 > 0) printf "×%.2f", v / r; else printf "–"
		printf ")" }'
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b == "" || b + 0 == 0) printf "—"; else printf "×%.2f", a / b }'; }
# Derived per-target figures, recorded into RAW under scenario "calc".
for t in $TARGETS; do
	tk=$(sum rate "$t" cpu_ticks)
	n=$(sum rate "$t" ok)
	[ -n "$tk" ] && [ "${n:-0}" -gt 0 ] &&
	    rec calc "$t" cpu_us "$(awk -v c="$tk" -v n="$n" -v hz="$CLK_TCK" 'BEGIN { printf "%.1f", c / hz * 1e6 / n }')"
	tk=$(sum rate "$t" origin_ticks)
	[ -n "$tk" ] && [ "${n:-0}" -gt 0 ] &&
	    rec calc "$t" origin_us "$(awk -v c="$tk" -v n="$n" -v hz="$CLK_TCK" 'BEGIN { printf "%.1f", c / hz * 1e6 / n }')"
	tk=$(sum rate "$t" mbusy)
	ti=$(sum rate "$t" midle)
	[ -n "$tk" ] && [ "${n:-0}" -gt 0 ] &&
	    rec calc "$t" machine_us "$(awk -v c="$tk" -v n="$n" -v hz="$CLK_TCK" 'BEGIN { printf "%.1f", c / hz * 1e6 / n }')"
	[ -n "$tk" ] && [ -n "$ti" ] && [ $((tk + ti)) -gt 0 ] &&
	    rec calc "$t" idle_pct "$(awk -v b="$tk" -v i="$ti" 'BEGIN { printf "%.1f", 100 * i / (b + i) }')"
	tk=$(sum bulk "$t" cpu_ticks)
	n=$(sum bulk "$t" bytes)
	[ -n "$tk" ] && [ "${n:-0}" -gt 0 ] &&
	    rec calc "$t" cpu_s_per_gb "$(awk -v c="$tk" -v n="$n" -v hz="$CLK_TCK" 'BEGIN { printf "%.3f", c / hz / (n / 1e9) }')"
	for b in 1 4; do
		m=$(med bulk$b "$t" mib_s)
		[ -n "$m" ] && rec calc "$t" gbs$b "$(awk -v m="$m" 'BEGIN { printf "%.3f", m * 1048576 / 1e9 }')"
	done
done
label() {
	case $1 in
	direct) echo "direct" ;;
	relay) echo "bare relay" ;;
	egressd-batch) echo "egressd" ;;
	egressd-pin) echo "egressd, pinning + name" ;;
	egressd-none) echo "egressd, log_sync none" ;;
	egressd-always) echo "egressd, log_sync always" ;;
	ats) echo "Traffic Server" ;;
	*) echo "$1" ;;
	esac
}
# The intercepted model connection (the model-connections issue, egressd/mitm.c): measured
# by bench/model.sh, which `make bench` runs after this script (its own table, against an
# opaque tunnel and the origin directly).
MODEL_NOTE="n/a: not built (no model-connection interception module in this tree)"
if [ -f "$SRC/egressd/mitm.c" ] && [ -f "$SRC/bench/model.sh" ]; then
	MODEL_NOTE="measured separately by bench/model.sh (make bench runs it after this table; medians in $(basename "$OUTDIR")/model-summary.txt, quoted under \"Model connections\" below)"
fi

OUT=$OUTDIR/latest.md
[ "$GOALS" = 1 ] && OUT=$OUTDIR/goals.md
{
	mode="full mode"
	[ "$QUICK" = 1 ] && mode="QUICK mode (BENCH_QUICK=1)"
	[ "$GOALS" = 1 ] && mode="goals mode (BENCH_GOALS=1: the goal figures only, over more rounds)"
	echo "Run: $(date -u '+%Y-%m-%d %H:%M UTC'), $mode, source $(git -C "$SRC" rev-parse --short HEAD 2>/dev/null || echo unknown), build $(basename "$BUILD")."
	echo "Machine: $(nproc) cores ($(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)), $(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo), Linux $(uname -r); load average $LOAD_BEFORE before, $LOAD_AFTER after the proxy scenarios (${T_PROXY} s)."
	tpv="not installed"
	[ -n "$TINYPROXY" ] && tpv=$("$TINYPROXY" -v 2>&1 | head -1 | sed 's/^tinyproxy //')
	sqv="not installed"
	[ -n "$SQUID" ] && sqv=$("$SQUID" -v 2>/dev/null | head -1 | sed 's/.*Version //')
	atv="not installed"
	[ -n "$ATS" ] && atv=$("$ATS" -V 2>/dev/null | sed -n 's/^Traffic Server \([0-9.]*\).*/\1/p' | head -1)
	echo "Peers: Traffic Server $atv (forward proxy, cache off, access log on), tinyproxy $tpv (LogLevel Warning), squid $sqv (access log on, no cache); egressd log_sync = batch unless named, splice on; bare relay = bench/egrelay (epoll, splice, no checks)."
	if [ "$GOALS" = 1 ]; then
		echo "Rounds: $ROUNDS interleaved; latency $LAT_N transactions and rate $RATE_C connections × ${RATE_S} s, $LAT_REPS per target per round."
		echo "Each cell: the median over the runs (every repetition of every round), then (× direct / × bare relay)."
	else
		echo "Rounds: $ROUNDS interleaved; latency $LAT_N transactions and rate $RATE_C connections × ${RATE_S} s, $LAT_REPS per target per round (each repetition a pairing unit); bulk $BULK bytes/run, $BULK_REPS per target per round; $IDLE_N idle tunnels."
		echo "Each cell: the median over the runs (every repetition of every round; the wake-ups: one run per target after them), then (× direct / × bare relay)."
	fi
	echo
	printf '| figure |'
	for t in $TARGETS; do printf ' %s |' "$(label "$t")"; done
	echo
	printf '|---|'
	for t in $TARGETS; do printf -- '---:|'; done
	echo
	row() { # label scen key decimals [nodirect]
		printf '| %s |' "$1"
		d=""
		[ "${5:-}" = nodirect ] || d=$(med "$2" direct "$3")
		r=$(med "$2" relay "$3")
		for t in $TARGETS; do printf ' %s |' "$(fmt "$(med "$2" "$t" "$3")" "$d" "$r" "$4")"; done
		echo
	}
	row "CONNECT + GET latency p50 (µs, c=1)" lat p50_us 0
	row "latency p99 (µs, c=1)" lat p99_us 0
	if [ "$ONECPU" = 1 ]; then
		row "latency p50, one CPU (µs, c=1; proxy, load generator and origin pinned to CPU $ONECPU_CPU)" lat1 p50_us 0
		printf '| latency errors (all rounds, free / one CPU) |'
		for t in $TARGETS; do printf ' %s / %s |' "$(sum lat "$t" errors)" "$(sum lat1 "$t" errors)"; done
		echo
	fi
	row "transactions/s (c=$RATE_C)" rate tps 0
	printf '| errors under load (all rounds) |'
	for t in $TARGETS; do printf ' %s |' "$(sum rate "$t" errors)"; done
	echo
	row "proxy CPU per transaction (µs)" calc cpu_us 0 nodirect
	if [ "$GOALS" = 0 ]; then
		row "proxy wake-ups per transaction (context switches, c=1; one run, $WAKE_TOOL)" lat wakeups 1 nodirect
		row "bulk, one tunnel (GB/s)" calc gbs1 2
		row "bulk, four tunnels (GB/s)" calc gbs4 2
		row "proxy CPU per GB moved (s)" calc cpu_s_per_gb 2 nodirect
		printf '| RSS per idle tunnel (KiB) |'
		r=$(med idle relay kib_per_tunnel)
		for t in $TARGETS; do printf ' %s |' "$(fmt "$(med idle "$t" kib_per_tunnel)" "" "$r" 1)"; done
		echo
		printf '| idle tunnels held (of %s); proxy fds |' "$IDLE_N"
		for t in $TARGETS; do
			o=$(med idle "$t" open)
			if [ -n "$o" ]; then printf ' %s; %s |' "$o" "$(med idle "$t" fds)"; else printf ' — |'; fi
		done
		echo
	fi
	row "origin CPU per transaction (µs, reference)" calc origin_us 0
	row "machine CPU per transaction, all processes (µs, rate run)" calc machine_us 0
	printf '| machine idle during the rate run (%% of all cores) |'
	for t in $TARGETS; do v=$(med calc "$t" idle_pct); printf ' %s |' "${v:-—}"; done
	echo
	[ "$GOALS" = 0 ] && echo && echo "egressd with an intercepted model connection: $MODEL_NOTE."
	[ "$GOALS" = 0 ] && echo "egressd, pinning + name: the same egressd through a grant with \`pinning = required\`, CONNECT by a name (DNS cache hit) instead of an IP literal; its RSS is the same process's (—)."
	if [ -n "$(med sys egressd-batch per_txn)" ]; then
		echo "System calls per transaction ($SYS_TOOL, $SYS_N at c=1): bare relay $(med sys relay per_txn), egressd $(med sys egressd-batch per_txn) ($(ratio "$(med sys egressd-batch per_txn)" "$(med sys relay per_txn)")); the breakdown is in syscalls.txt."
	fi
	echo
	if [ "$GOALS" = 1 ]; then
		units="the median over the rounds of each round's ratio, paired within the round ($LAT_REPS run per target per round)"
		more="more rounds (BENCH_ROUNDS) narrow the interval"
	else
		units="the median over the repetitions of each one's ratio, paired within the repetition (every target runs once per repetition: $LAT_REPS latency and rate and $BULK_REPS bulk repetitions per round)"
		more="\`make bench-goals\` measures the latency, rate and CPU goals over 15 rounds"
	fi
	echo "Goals (egressd = log_sync batch). Measured: $units, which cancels most of the host's noise (it moves the runs of one unit together); in parentheses a confidence interval for that median from the order statistics of the per-unit ratios, with its coverage (distribution-free; 5 units: the lowest and the highest ratio, 93%; 15 units: the 4th to the 12th, 96%); in brackets the ratio of the medians in the table above. The verdict is the paired median's: *firm* when the whole interval lies on the verdict's side of the bound; *not firm* when the bound lies inside the interval, or the interval covers less than 90% (fewer than 5 units): this run cannot place that goal on either side ($more)."
	echo
	echo "| goal | measured (paired) (confidence interval) [ratio of the medians] | met? |"
	echo "|---|---|---|"
	# pp SCEN TARGET [REF]: the paired median ratio (paired_median, bench/lib.sh); pci: its
	# confidence interval, "LOW HIGH PCT" (paired_ci)
	pp() { awk -v s="pair:$1" '$1 == s { print $2, $3, $4 }' "$RAW" | paired_median "$2" "${3:-relay}"; }
	pci() { awk -v s="pair:$1" '$1 == s { print $2, $3, $4 }' "$RAW" | paired_ci "$2" "${3:-relay}"; }
	# three decimals: a figure just under its bound must not print as the bound
	x2() { awk -v v="$1" 'BEGIN { if (v == "") printf "—"; else printf "×%.3f", v }'; }
	# xr "LOW HIGH PCT": the interval as "(×LOW–×HIGH, PCT%)", three decimals as the
	# median's (an end on a two-decimal bound must not print as the bound) ("" without units)
	xr() { awk -v v="$1" 'BEGIN { if (split(v, a, " ") == 3) printf " (×%.3f–×%.3f, %d%%)", a[1], a[2], a[3] }'; }
	# where an interval lies against a bound and the verdict's firmness: ci_side and
	# ci_verdict (bench/lib.sh)
	goal() { # text scen op bound ratio-of-medians
		v=$(pp "$2" egressd-batch)
		ci=$(pci "$2" egressd-batch)
		m=$(awk -v v="$v" -v o="$3" -v b="$4" 'BEGIN { if (v == "") { print "—"; exit }
		    if ((o == "le" && v + 0 <= b + 0) || (o == "ge" && v + 0 >= b + 0)) print "yes"; else print "no" }')
		printf '| %s | %s%s [%s] | %s |\n' "$1" "$(x2 "$v")" "$(xr "$ci")" "$(x2 "$5")" \
		    "$(ci_verdict "$m" "$(ci_side "$ci" "$3" "$4")")"
	}
	rr() { awk -v a="$1" -v b="$2" 'BEGIN { if (a != "" && b != "" && b + 0 > 0) printf "%.4f", a / b }'; }
	goal "latency p50 ≤ 1.15× the bare relay" lat le 1.15 "$(rr "$(med lat egressd-batch p50_us)" "$(med lat relay p50_us)")"
	[ "$ONECPU" = 1 ] && goal "latency p50 ≤ 1.15× the bare relay, one CPU (beside the goal: pinned, no cross-CPU wake-ups)" lat1 le 1.15 "$(rr "$(med lat1 egressd-batch p50_us)" "$(med lat1 relay p50_us)")"
	goal "transactions/s ≥ 0.85× the bare relay" rate ge 0.85 "$(rr "$(med rate egressd-batch tps)" "$(med rate relay tps)")"
	goal "CPU per transaction ≤ 1.4× the bare relay" cpu le 1.4 "$(rr "$(med calc egressd-batch cpu_us)" "$(med calc relay cpu_us)")"
	if [ "$GOALS" = 0 ]; then
		goal "one-tunnel bulk ≥ 0.95× the bare relay" bulk1 ge 0.95 "$(rr "$(med calc egressd-batch gbs1)" "$(med calc relay gbs1)")"
		goal "four-tunnel bulk ≥ 0.95× the bare relay" bulk4 ge 0.95 "$(rr "$(med calc egressd-batch gbs4)" "$(med calc relay gbs4)")"
		k=$(med idle egressd-batch kib_per_tunnel)
		printf '| ≤ 4 KiB RSS per idle tunnel | %s KiB | %s |\n' "${k:-—}" "$(awk -v v="$k" 'BEGIN { if (v == "") print "—"; else print (v + 0 <= 4 ? "yes" : "no") }')"
	fi
	for t in ats tinyproxy squid; do
		[ -n "$(var PID "$t")" ] || continue
		pl=$(pp lat egressd-batch "$t")
		pr=$(pp rate egressd-batch "$t")
		cl=$(pci lat egressd-batch "$t")
		cr=$(pci rate egressd-batch "$t")
		printf '| below/above %s: latency p50, transactions/s | %s%s, %s%s of %s [%s, %s] | %s |\n' "$(label "$t")" \
		    "$(x2 "$pl")" "$(xr "$cl")" "$(x2 "$pr")" "$(xr "$cr")" "$(label "$t")" \
		    "$(ratio "$(med lat egressd-batch p50_us)" "$(med lat "$t" p50_us)")" \
		    "$(ratio "$(med rate egressd-batch tps)" "$(med rate "$t" tps)")" \
		    "$(ci_verdict "$(awk -v a="$pl" -v c="$pr" 'BEGIN { if (a == "" || c == "") print "—"; else print (a + 0 < 1 && c + 0 > 1) ? "yes" : "no" }')" \
		        "$(ci_side "$cl" lt 1)" "$(ci_side "$cr" gt 1)")"
	done
	if [ "$ONECPU" = 1 ]; then
		# the one-CPU latency against each peer, on one line (beside the goal)
		line=""
		all=yes
		miss=0
		sides=""
		for t in ats tinyproxy squid; do
			[ -n "$(var PID "$t")" ] || continue
			pl=$(pp lat1 egressd-batch "$t")
			cl=$(pci lat1 egressd-batch "$t")
			line="$line${line:+, }$(x2 "$pl")$(xr "$cl") of $(label "$t")"
			if [ -z "$pl" ]; then
				miss=1
			elif ! awk -v a="$pl" 'BEGIN { exit !(a + 0 < 1) }'; then
				all=no
			fi
			sides="$sides $(ci_side "$cl" lt 1)"
		done
		# a peer without a figure: no verdict, unless another peer already decided "no"
		[ $miss = 1 ] && [ $all = yes ] && all="—"
		# firm when every peer's interval lies below 1 (ci_verdict takes every side)
		# shellcheck disable=SC2086
		[ -n "$line" ] && printf '| below every peer: latency p50, one CPU (beside the goal) | %s | %s |\n' \
		    "$line" "$(ci_verdict "$all" $sides)"
	fi
	if [ -n "$(med lat egressd-none p50_us)" ]; then
		echo
		echo "Decision log cost (egressd, ratio to log_sync = none):"
		echo
		echo "| log_sync | latency p50 (µs) | transactions/s |"
		echo "|---|---|---|"
		ln=$(med lat egressd-none p50_us)
		tn=$(med rate egressd-none tps)
		for v in none batch always; do
			echo "| $v | $(med lat egressd-$v p50_us) ($(ratio "$(med lat egressd-$v p50_us)" "$ln")) | $(med rate egressd-$v tps) ($(ratio "$(med rate egressd-$v tps)" "$tn")) |"
		done
	fi
	if [ -n "${BUDGET_ALL:-}" ] && [ -n "$(med budget relay tps)" ]; then
		echo
		echo "Work budget (runs of their own, $ROUNDS interleaved rounds; rate at c=$RATE_C, latency at c=1): the bare relay with W µs of busy work per transaction on its one thread (egrelay --work-us W), beside egressd (batch) in the same rounds:"
		echo
		printf '| |'
		for t in $BUDGET_ALL; do
			case $t in relay) printf ' relay |' ;; relay-w*) printf ' relay + %s µs |' "${t#relay-w}" ;; *) printf ' egressd |' ;; esac
		done
		echo
		printf '|---|'
		for t in $BUDGET_ALL; do printf -- '---:|'; done
		echo
		# paired by round (paired_median, bench/lib.sh)
		pr() { awk '$1 ~ /^budget[0-9]+$/ && $3 == "tps" { print $2, $1, $4 }' "$RAW" | paired_median "$1"; }
		printf '| transactions/s (median; × the relay, paired by round) |'
		for t in $BUDGET_ALL; do
			printf ' %s (%s) |' "$(med budget "$t" tps | awk '{ printf "%.0f", $1 }')" \
			    "$(awk -v x="$(pr "$t")" 'BEGIN { if (x == "") printf "—"; else printf "×%.2f", x }')"
		done
		echo
		bc0=$(awk -v c="$(sum budget relay cpu_ticks)" -v n="$(sum budget relay ok)" -v hz="$CLK_TCK" \
		    'BEGIN { if (n > 0) printf "%.1f", c / hz * 1e6 / n }')
		printf '| proxy CPU per transaction (µs) |'
		for t in $BUDGET_ALL; do
			cu=$(awk -v c="$(sum budget "$t" cpu_ticks)" -v n="$(sum budget "$t" ok)" -v hz="$CLK_TCK" \
			    'BEGIN { if (n > 0) printf "%.1f", c / hz * 1e6 / n }')
			printf ' %s |' "$(fmt "$cu" "" "$bc0" 0 | sed 's/(– \/ /(/')"
		done
		echo
		printf '| errors (all rounds) |'
		for t in $BUDGET_ALL; do printf ' %s |' "$(sum budget "$t" errors)"; done
		echo
		# latency at c=1 in the same rounds: median p50 over the rounds (med), × the relay
		# paired by round (plr: the rounds' own scenarios, budlatfR / budlatoR); free, then
		# at one CPU
		plr() { awk -v s="$1" '$1 ~ ("^" s "[0-9]+$") && $3 == "p50" { print $2, $1, $4 }' "$RAW" | paired_median "$2"; }
		xratio() { awk -v x="$1" 'BEGIN { if (x == "") printf "—"; else printf "×%.2f", x }'; }
		for sc in budlatf budlato; do
			[ "$sc" = budlato ] && [ "$ONECPU" != 1 ] && continue
			[ -n "$(med "$sc" relay p50)" ] || continue
			case $sc in
			budlatf) printf '| latency p50 (µs, c=1; median; × the relay, paired by round) |' ;;
			*) printf '| latency p50, one CPU (µs, c=1, pinned to CPU %s; median; × the relay, paired by round) |' "$ONECPU_CPU" ;;
			esac
			for t in $BUDGET_ALL; do
				printf ' %s (%s) |' "$(v=$(med "$sc" "$t" p50); echo "${v:-—}")" "$(xratio "$(plr "$sc" "$t")")"
			done
			echo
			printf '| latency errors (all rounds%s) |' "$([ "$sc" = budlato ] && echo ', one CPU')"
			for t in $BUDGET_ALL; do printf ' %s |' "$(sum "$sc" "$t" errors)"; done
			echo
		done
		# W at which the relay's ratio falls to R (linear between the measured points; the
		# points are (0, 1) and (W, median ratio) in increasing W)
		# the points (0, 1) and (W, the paired ratio RATIOFN gives relay-wW) in increasing W
		pts() { # RATIOFN [ARG]
			for t in $BUDGET_ALL; do
				case $t in
				relay) echo "0 1" ;;
				relay-w*) echo "${t#relay-w} $("$@" "$t")" ;;
				esac
			done | sort -n
		}
		# at POINTS RATIO DIR: "about W µs of busy work" at which the relay's ratio reaches
		# RATIO, linear within the first segment that crosses it; DIR down: the ratio falls
		# with W (transactions/s), up: it rises (latency). A ratio the plain relay already
		# reaches needs no added work; one no point reaches needs more than the largest W.
		at() {
			[ -n "$2" ] || { printf "an unknown amount of busy work (no ratio)"; return; }
			echo "$1" | awk -v R="$2" -v d="$3" 'NF == 2 && $2 != "" {
				x = (d == "up") ? -$2 : $2; r = (d == "up") ? -R : R
				if (n == 0 && r >= x) { printf "no added work"; done = 1 }
				if (n > 0 && !done && px >= r && x <= r) {
					w = (px == x) ? $1 : pw + ($1 - pw) * (px - r) / (px - x)
					printf "about %.0f µs of busy work", w; done = 1
				}
				pw = $1; px = x; n++ }
				END { if (!done) printf "more than %s µs of busy work", pw }'
		}
		re=$(pr egressd-batch)
		tp=$(pts pr)
		echo
		echo "egressd's transactions/s in these runs ($(xratio "$re") of the relay, paired) is what the relay gives with $(at "$tp" "$re" down) per transaction; the goal of 0.85× is the relay with $(at "$tp" 0.85 down): the whole per-transaction budget, on this machine, for everything egressd does beyond relaying (authorization, address checks, the chained record and its write, the batch fdatasync's share, the seccomp filter, the event library)."
		if [ -n "$(med budlatf relay p50)" ]; then
			le=$(plr budlatf egressd-batch)
			lp=$(pts plr budlatf)
			l1=""
			if [ "$ONECPU" = 1 ] && [ -n "$(med budlato relay p50)" ]; then
				le1=$(plr budlato egressd-batch)
				lp1=$(pts plr budlato)
				l1=" At one CPU (no wake-up crosses CPUs) egressd's p50 is $(xratio "$le1") of the relay, what the relay gives with $(at "$lp1" "$le1" up); the bound of 1.15× is the relay with $(at "$lp1" 1.15 up)."
			fi
			echo
			echo "Latency, the same way: egressd's p50 at one connection ($(xratio "$le") of the relay, paired) is what the relay gives with $(at "$lp" "$le" up) per transaction; the goal of 1.15× is the relay with $(at "$lp" 1.15 up).$l1 Free, a run's p50 also depends on the placement it settles in (on the 2-vCPU host of docs/performance.md, \"The sixteenth round\", a proxy follows whoever wakes it across the CPUs in some runs and hours, and no wake-up then starts an idle vCPU: about 20 µs faster there); bench/placement.sh counts the runs in each."
		fi
	fi
	if [ "$GOALS" = 1 ]; then
		echo
		# units SCEN: egressd's per-unit ratios to the relay, ascending, two decimals
		units() { awk -v s="pair:$1" '$1 == s { print $2, $3, $4 }' "$RAW" | paired_ratios egressd-batch |
		    awk '{ printf "%s×%.2f", (NR > 1 ? " " : ""), $1 }'; }
		echo "Units as the verdicts saw them (per-unit ratios, egressd to the bare relay, ascending): latency p50 $(units lat); transactions/s $(units rate); CPU per transaction $(units cpu)."
	fi
} > "$OUT"
if [ "$GOALS" = 0 ]; then {
	echo
	echo "DNS cache (egressd; ratio to direct latency p50 / to the bare relay):"
	echo
	echo "| hop | p50 (µs) | p90 (µs) | errors |"
	echo "|---|---|---|---|"
	ld=$(med lat direct p50_us)
	lr=$(med lat relay p50_us)
	echo "| first hop to a new name (DNS query) | $(fmt "$(med dnsnew egressd-batch p50_us)" "$ld" "$lr" 0) | $(med dnsnew egressd-batch p90_us) | $(sum dnsnew egressd-batch errors) |"
	echo "| same name again (cache hit) | $(fmt "$(med dnshit egressd-batch p50_us)" "$ld" "$lr" 0) | $(med dnshit egressd-batch p90_us) | $(sum dnshit egressd-batch errors) |"
	echo "| IP literal (no DNS) | $(fmt "$(med lat egressd-batch p50_us)" "$ld" "$lr" 0) | $(med lat egressd-batch p90_us) | |"
	echo
	echo "Start-up ($SPAWN_N runs per variant, interleaved in 5 blocks; ms; ratio to bwrap's first instruction p50):"
	echo
	if [ -n "$spawn_skip" ]; then
		echo "skipped: $spawn_skip"
	else
		pf() { # file column pct
			[ -s "$1" ] || { printf '—'; return; }
			awk -v c="$2" '$c > 0 { print $c / 1e6 }' "$1" | sort -g |
			    awk -v p="$3" '{ v[NR] = $1 } END { if (NR) printf "%.1f", v[int(p * (NR - 1) + 1.5)] }'
		}
		# teardown: from the worker's first instruction (it exits right after the
		# stamp) to the end of the whole run
		tdown() {
			[ -s "$1" ] || { printf '—'; return; }
			awk '$2 > 0 { print ($1 - $2) / 1e6 }' "$1" | sort -g |
			    awk '{ v[NR] = $1 } END { if (NR) printf "%.1f", v[int(0.5 * (NR - 1) + 1.5)] }'
		}
		bw=$(pf "$TMP/spawn.bwrap.stamp" 2 0.5)
		echo "| variant | first instruction p50 | p90 | × bwrap | teardown p50 | whole run of true p50 | p90 | failed runs |"
		echo "|---|---|---|---|---|---|---|---|"
		for v in $SPAWN_VARIANTS; do
			case $v in
			plain) lb="plain fork+exec (no sandbox)" ;;
			unshare) lb="unshare -n -m -p -f" ;;
			bwrap) lb="bwrap --unshare-all --ro-bind / /" ;;
			exec_nonet) lb="egress-exec run (full sandbox, no network)" ;;
			exec_net) lb="egress-exec run --allow (network, private egressd; own netns)" ;;
			exec_netd) lb="egress-exec run --allow --egressd-control (network, running egressd; own netns)" ;;
			esac
			want=$(( ((SPAWN_N + 4) / 5) * 5 ))
			got=$(cat "$TMP/spawn.$v.stamp" "$TMP/spawn.$v.true" 2>/dev/null | wc -l)
			f=$(pf "$TMP/spawn.$v.stamp" 2 0.5)
			echo "| $lb | $f | $(pf "$TMP/spawn.$v.stamp" 2 0.9) | $(ratio "$f" "$bw") | $(tdown "$TMP/spawn.$v.stamp") | $(pf "$TMP/spawn.$v.true" 1 0.5) | $(pf "$TMP/spawn.$v.true" 1 0.9) | $((want * 2 - got)) |"
		done
	fi
	if [ -n "$STEPS_NOTE" ]; then
		echo
		echo "egress-exec, step by step (bench/exec_steps.py):"
		echo
		cat "$STEPS_NOTE"
	fi
	echo
	echo "$PROFILE_NOTE"
} >> "$OUT"; fi
cat "$OUT"
# The docs quote the latest full run (and the latest goals run): the block between the
# markers is replaced.
MARK=bench-table
[ "$GOALS" = 1 ] && MARK=bench-goals
if [ "$WRITE_DOC" = 1 ] && [ -f "$DOC" ] && grep -q "^<!-- $MARK-begin -->\$" "$DOC" &&
    grep -q "^<!-- $MARK-end -->\$" "$DOC"; then
	awk -v f="$OUT" -v b="<!-- $MARK-begin -->" -v e="<!-- $MARK-end -->" '
		$0 == b { print; while ((getline l < f) > 0) print l; skip = 1; next }
		$0 == e { skip = 0 }
		!skip { print }' "$DOC" > "$TMP/doc.md" && cat "$TMP/doc.md" > "$DOC" &&
	    echo "bench: wrote the table into $DOC ($MARK)" >&2
elif [ "$WRITE_DOC" = 1 ]; then
	echo "bench: $DOC has no $MARK markers; not written" >&2
fi
# Logs worth keeping for a reader of the results.
if [ "$GOALS" = 1 ]; then
	cp "$TMP/egload.log" "$OUTDIR/egload-goals.log" 2>/dev/null
else
	cp "$TMP/egload.log" "$OUTDIR/egload.log" 2>/dev/null
fi
cp "$TMP/spawn.log" "$OUTDIR/spawn.log" 2>/dev/null
echo "bench: results in $OUT (raw figures: $RAW)" >&2
exit 0
