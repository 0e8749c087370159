#!/bin/sh
# bench/egressd_ab.sh BUILD_DIR ROUNDS LABEL=EGRESSD[@SYNC] [...] - egressd builds
# side by side against the bare relay, for measuring a change before and after in one
# session (docs/performance.md). Each round runs every target in a rotating order:
# latency (c=1), rate (c=64) with the proxy's CPU per transaction from /proc/PID/stat, and
# the same egressd through a `pinning = required` grant by a name (DNS cache hit). @SYNC
# (always, batch, none) sets that target's log_sync, e.g. `batch=E none=E@none` compares
# the two settings of one binary. The rate runs also count the wake-ups they cost: the
# whole machine's context switches and the origin's sleeps (voluntary switches) per
# transaction, since a slower proxy loop costs mostly in its peers' sleeps (the tenth
# round in docs/performance.md). Prints
# the medians over the rounds and each as a ratio to the relay of the same run, the median
# of the per-round ratios (paired: less sensitive to a noisy host) with the lowest and the
# highest of them, every further egressd target against the first one (paired by round,
# with a confidence interval: paired_ci, bench/lib.sh; through the IP literal and through
# the pinning + name grant, each against the first's same grant), and the load average
# before and after. egload, egorigin and egrelay come from BUILD_DIR.
# Everything on 127.0.0.1 / 127.0.9.x; processes stopped by pid; every wait bounded.
# Knobs: AB_LAT_N=500, AB_RATE_S=3, AB_RATE_C=64, AB_LOG_SYNC=batch, AB_OUT=FILE,
# AB_BULK_BYTES=0 (N > 0: each round also moves N bytes through one tunnel and through four,
# with the proxy's CPU per GB; the pinning targets are skipped there, their tunnel is the same),
# AB_LAT_MIX=0 (1: each round also runs one latency run whose transactions go to the relay
# and every egressd in turn, one each (egload --proxy A,B,...), so that every target meets
# the same moments of a noisy host; reported as "interleaved"; the pinning targets are
# skipped there). Interleaved, each proxy waits idle through the others' transactions, so
# the figures are those of sporadic requests, not of one client's back-to-back ones.
# AB_ONECPU=0 (1: each round also runs every target's latency with its proxy, the origin
# and the load generator pinned to one CPU, AB_ONECPU_CPU (0): no wake-up crosses CPUs, so
# the figure is the proxy's own work at one connection, steady to a few percent where free
# runs move by half on a quiet 2-vCPU host; reported as "one CPU", and against the first
# egressd: what a change of egressd's path decides on (docs/performance.md, "The fifteenth
# round")).
set -u

die() { echo "egressd_ab: $*" >&2; exit 1; }
. "$(dirname "$0")/lib.sh" || exit 1

[ $# -ge 3 ] || die "usage: sh bench/egressd_ab.sh BUILD_DIR ROUNDS LABEL=EGRESSD..."
BUILD=$(cd "$1" 2>/dev/null && pwd) || die "no build directory $1"
ROUNDS=$2
shift 2
LAT_N=${AB_LAT_N:-500}
RATE_S=${AB_RATE_S:-3}
RATE_C=${AB_RATE_C:-64}
SYNC=${AB_LOG_SYNC:-batch}
BULK=${AB_BULK_BYTES:-0}
MIX=${AB_LAT_MIX:-0}
case $BULK in '' | *[!0-9]*) die "AB_BULK_BYTES: a number of bytes" ;; esac
case $MIX in 0 | 1) ;; *) die "AB_LAT_MIX: 0 or 1" ;; esac
ONECPU=${AB_ONECPU:-0}
ONECPU_CPU=${AB_ONECPU_CPU:-0}
case $ONECPU in 0 | 1) ;; *) die "AB_ONECPU: 0 or 1" ;; esac
case $ONECPU_CPU in '' | *[!0-9]*) die "AB_ONECPU_CPU: a CPU number" ;; esac
CPUS_ALL=$(cpus_allowed $$)
if [ "$ONECPU" = 1 ] && { [ -z "$CPUS_ALL" ] || ! taskset -c "$ONECPU_CPU" true 2>/dev/null; }; then
	die "AB_ONECPU: CPU $ONECPU_CPU is not usable here (taskset)"
fi
B=$BUILD/bench
for b in "$B/egload" "$B/egorigin" "$B/egrelay"; do
	[ -x "$b" ] || die "$b is missing: build first (make build)"
done
TMP=$(mktemp -d /tmp/egress-ab.XXXXXX) || die "mktemp failed"
OUT=${AB_OUT:-$TMP/ab.txt}
PIDS=""
trap cleanup EXIT
trap 'exit 130' INT TERM

# shellcheck disable=SC2034 # read and advanced by free_port (bench/lib.sh)
FREE_PORT_NEXT=$((30000 + ($$ % 5000) * 4))

free_port
DNS=127.0.9.53:$PORT
"$B/egorigin" --listen 127.0.9.1:0 --port-file "$TMP/o.port" --dns "$DNS" \
    --dns-answer 127.0.9.1 2>/dev/null &
PID_origin=$!
PIDS="$PIDS $!"
wait_file "$TMP/o.port" || die "origin did not start"
OPORT=$(cat "$TMP/o.port")
O=127.0.9.1:$OPORT
"$B/egrelay" --listen 127.0.0.1:0 --port-file "$TMP/r.port" 2>/dev/null &
PID_relay=$!
PIDS="$PIDS $PID_relay"
wait_file "$TMP/r.port" || die "relay did not start"
PX_relay=127.0.0.1:$(cat "$TMP/r.port")
TARGETS="relay"

for spec in "$@"; do
	l=${spec%%=*}
	e=${spec#*=}
	sync=$SYNC
	case $e in *@*) sync=${e##*@}; e=${e%@*} ;; esac
	case $sync in always | batch | none) ;; *) die "$spec: log_sync $sync: always, batch or none" ;; esac
	case $l in *[!a-z0-9_]*|'') die "label $l: [a-z0-9_] only" ;; esac
	[ -x "$e" ] || die "$e is not executable"
	free_port
	p1=$PORT
	free_port
	p2=$PORT
	d=$TMP/$l
	mkdir -p "$d"
	egressd_ini "$d/egressd.ini" "$d/decisions.jsonl" "$sync"
	echo "dns_server = $DNS" >> "$d/egressd.ini"
	egressd_grant "$d/egressd.ini" ab "$p1" "tcp://$O"
	egressd_grant "$d/egressd.ini" abp "$p2" "https://*.bench.test:$OPORT" "pinning = required"
	"$e" -f -c "$d/egressd.ini" 2>"$d/egressd.log" &
	pid=$!
	PIDS="$PIDS $pid"
	wait_listen 127.0.0.1 "$p2" $pid || die "$l did not start: $(tail -3 "$d/egressd.log")"
	eval "PID_$l=$pid PX_$l=127.0.0.1:$p1 PXP_$l=127.0.0.1:$p2"
	TARGETS="$TARGETS $l ${l}_pin"
	eval "PID_${l}_pin=$pid PX_${l}_pin=127.0.0.1:$p2"
done
var() { eval "echo \${$1_$2:-}"; }
# context switches of the whole machine since boot; voluntary switches (sleeps) of PID
machine_ctxt() { awk '/^ctxt / { print $2; exit }' /proc/stat; }
sleeps() { awk '/^voluntary_ctxt_switches:/ { print $2 }' "/proc/$1/status" 2>/dev/null || echo 0; }
per_txn() { awk -v c="$1" -v n="$2" 'BEGIN { if (n > 0) printf "%.2f", c / n }'; }
load() { # target mode args...
	t=$1
	shift
	case $t in
	*_pin) timeout -k 5 300 "$B/egload" "$@" --target "$O" --proxy "$(var PX "$t")" \
	    --name "cached.bench.test:$OPORT" --timeout 30 2>/dev/null ;;
	*) timeout -k 5 300 "$B/egload" "$@" --target "$O" --proxy "$(var PX "$t")" \
	    --timeout 30 2>/dev/null ;;
	esac
}
for t in $TARGETS; do load "$t" latency -n 50 >/dev/null; done

LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)
: > "$TMP/raw"
r=1
while [ "$r" -le "$ROUNDS" ]; do
	# shellcheck disable=SC2086
	order=$(rotate_list "$r" $TARGETS)
	for t in $order; do
		out=$(load "$t" latency -n "$LAT_N")
		echo "$t p50 $(kv p50_us "$out") $r" >> "$TMP/raw"
		echo "$t p90 $(kv p90_us "$out") $r" >> "$TMP/raw"
	done
	if [ "$ONECPU" = 1 ]; then
		# this shell pinned too (alone: its children come and go), so that the load
		# generator it starts inherits the CPU
		for t in $order; do
			pin_tree "$PID_origin" "$ONECPU_CPU" && pin_tree "$(var PID "$t")" "$ONECPU_CPU" &&
			    taskset -p -c "$ONECPU_CPU" $$ >/dev/null || die "cannot pin $t to CPU $ONECPU_CPU"
			out=$(load "$t" latency -n "$LAT_N")
			taskset -p -c "$CPUS_ALL" $$ >/dev/null && pin_tree "$(var PID "$t")" "$CPUS_ALL" &&
			    pin_tree "$PID_origin" "$CPUS_ALL" || die "cannot unpin $t (CPUs $CPUS_ALL)"
			echo "$t one50 $(kv p50_us "$out") $r" >> "$TMP/raw"
		done
	fi
	if [ "$MIX" = 1 ]; then
		mt="" mp="" mn=0
		for t in $order; do
			case $t in *_pin) continue ;; esac
			mt="$mt $t"
			mp="$mp${mp:+,}$(var PX "$t")"
			mn=$((mn + 1))
		done
		out=$(timeout -k 5 300 "$B/egload" latency -n $((LAT_N * mn)) --target "$O" \
		    --proxy "$mp" --timeout 30 2>/dev/null)
		i=0
		for t in $mt; do
			echo "$t mix50 $(kv "p${i}_p50_us" "$out") $r" >> "$TMP/raw"
			echo "$t mixmean $(kv "p${i}_mean_us" "$out") $r" >> "$TMP/raw"
			i=$((i + 1))
		done
	fi
	for t in $order; do
		pid=$(var PID "$t")
		x0=$(machine_ctxt)
		s0=$(sleeps "$PID_origin")
		c0=$(cpu_ticks "$pid")
		out=$(load "$t" rate -c "$RATE_C" -t "$RATE_S")
		c1=$(cpu_ticks "$pid")
		s1=$(sleeps "$PID_origin")
		x1=$(machine_ctxt)
		ok=$(kv ok "$out")
		echo "$t ctxt $(per_txn $((x1 - x0)) "${ok:-0}") $r" >> "$TMP/raw"
		echo "$t osleep $(per_txn $((s1 - s0)) "${ok:-0}") $r" >> "$TMP/raw"
		echo "$t tps $(kv tps "$out") $r" >> "$TMP/raw"
		echo "$t err $(kv errors "$out") $r" >> "$TMP/raw"
		echo "$t cpu_us $(awk -v c=$((c1 - c0)) -v n="${ok:-0}" -v hz="$(getconf CLK_TCK)" \
		    'BEGIN { if (n > 0) printf "%.1f", c / hz * 1e6 / n }') $r" >> "$TMP/raw"
	done
	if [ "$BULK" -gt 0 ]; then
		for t in $order; do
			case $t in *_pin) continue ;; esac
			pid=$(var PID "$t")
			for n in 1 4; do
				c0=$(cpu_ticks "$pid")
				out=$(load "$t" bulk -c $n --bytes $((BULK / n)))
				c1=$(cpu_ticks "$pid")
				echo "$t bulk$n $(kv mib_s "$out") $r" >> "$TMP/raw"
				echo "$t err $(kv errors "$out") $r" >> "$TMP/raw"
				echo "$t cpu_gb$n $(awk -v c=$((c1 - c0)) -v b="$(kv bytes "$out")" -v hz="$(getconf CLK_TCK)" \
				    'BEGIN { if (b > 0) printf "%.3f", c / hz / (b / 1e9) }') $r" >> "$TMP/raw"
			done
		done
	fi
	echo "egressd_ab: round $r of $ROUNDS done" >&2
	r=$((r + 1))
done
LOAD1=$(cut -d' ' -f1-3 /proc/loadavg)

med() { # target key
	awk -v t="$1" -v k="$2" '$1 == t && $2 == k && $3 != "" { print $3 }' "$TMP/raw" | sort -g |
	    awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else if (NR) print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
# The median over the rounds of (target / relay of the same round): the host's noise moves
# every target of a round together, so pairing within a round removes much of it.
paired() { # target key
	awk -v k="$2" '$2 == k { print $1, $4, $3 }' "$TMP/raw" | paired_median "$1" |
	    awk '{ x = $1 } END { if (x == "") printf "—"; else printf "×%.2f", x }'
}
# The lowest and the highest of those per-round ratios: "(×LOW–×HIGH)" (paired_range).
spread() { # target key
	awk -v k="$2" '$2 == k { print $1, $4, $3 }' "$TMP/raw" | paired_range "$1" |
	    awk 'NF == 2 { printf "(×%.2f–×%.2f)", $1, $2 }'
}
# Against another target: the paired median of target / REF and its confidence interval
# from the rounds' order statistics (paired_ci): "×M (×LOW–×HIGH, PCT%)".
against() { # target key ref
	awk -v k="$2" '$2 == k { print $1, $4, $3 }' "$TMP/raw" > "$TMP/against"
	m=$(paired_median "$1" "$3" < "$TMP/against")
	c=$(paired_ci "$1" "$3" < "$TMP/against")
	awk -v m="$m" -v c="$c" 'BEGIN { if (m == "") { printf "—"; exit }
	    printf "×%.3f", m; if (split(c, a, " ") == 3) printf " (×%.3f–×%.3f, %d%%)", a[1], a[2], a[3] }'
}
all() { awk -v t="$1" -v k="$2" '$1 == t && $2 == k { printf "%s ", $3 }' "$TMP/raw"; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a != "" && b + 0 > 0) printf "×%.2f", a / b; else printf "—" }'; }
{
	echo "egressd_ab: $(date -u '+%Y-%m-%d %H:%M UTC'), $ROUNDS rounds, latency $LAT_N at c=1, rate c=$RATE_C × ${RATE_S} s, log_sync = $SYNC unless a target names one; load average $LOAD0 before, $LOAD1 after"
	echo "medians (× the relay of this run); all rounds in brackets"
	printf '%-16s %-28s %-28s %-28s %s\n' target "latency p50 µs" "transactions/s" "CPU µs/txn" "errors"
	for t in $TARGETS; do
		printf '%-16s %-28s %-28s %-28s %s\n' "$t" \
		    "$(med "$t" p50) $(ratio "$(med "$t" p50)" "$(med relay p50)")" \
		    "$(med "$t" tps) $(ratio "$(med "$t" tps)" "$(med relay tps)")" \
		    "$(med "$t" cpu_us) $(ratio "$(med "$t" cpu_us)" "$(med relay cpu_us)")" \
		    "$(awk -v t="$t" '$1 == t && $2 == "err" { s += $3 } END { print s + 0 }' "$TMP/raw")"
	done
	echo "paired: the median over the rounds of each round's ratio to that round's relay (lowest–highest round)"
	for t in $TARGETS; do
		[ "$t" = relay ] && continue
		printf '  %-14s latency p50 %s %s  transactions/s %s %s  CPU/txn %s %s\n' "$t" \
		    "$(paired "$t" p50)" "$(spread "$t" p50)" "$(paired "$t" tps)" "$(spread "$t" tps)" \
		    "$(paired "$t" cpu_us)" "$(spread "$t" cpu_us)"
	done
	# builds against the first one, paired by round: what an A/B decides on
	ref=""
	said=""
	for t in $TARGETS; do
		case $t in relay | *_pin) continue ;; esac
		if [ -z "$ref" ]; then
			ref=$t
			continue
		fi
		[ -n "$said" ] ||
		    echo "against $ref, paired by round (median; confidence interval from the rounds' order statistics, its coverage)"
		said=1
		printf '  %-14s latency p50 %s  transactions/s %s  CPU/txn %s\n' "$t" \
		    "$(against "$t" p50 "$ref")" "$(against "$t" tps "$ref")" "$(against "$t" cpu_us "$ref")"
		[ "$MIX" = 1 ] && printf '  %-14s interleaved p50 %s\n' "" "$(against "$t" mix50 "$ref")"
		[ "$ONECPU" = 1 ] && printf '  %-14s one-CPU p50 %s\n' "" "$(against "$t" one50 "$ref")"
		# the same builds through the pinning + name grant (a DNS cache hit, the SNI check)
		printf '  %-14s pinning + name: latency p50 %s  transactions/s %s  CPU/txn %s\n' "" \
		    "$(against "${t}_pin" p50 "${ref}_pin")" "$(against "${t}_pin" tps "${ref}_pin")" \
		    "$(against "${t}_pin" cpu_us "${ref}_pin")"
		[ "$ONECPU" = 1 ] && printf '  %-14s pinning + name, one-CPU p50 %s\n' "" \
		    "$(against "${t}_pin" one50 "${ref}_pin")"
	done
	if [ "$ONECPU" = 1 ]; then
		echo "latency at one CPU (proxy, origin and load generator on CPU $ONECPU_CPU): p50 µs, medians (paired to the relay, lowest–highest round)"
		for t in $TARGETS; do
			printf '  %-14s p50 %s (%s %s)\n' "$t" "$(med "$t" one50)" "$(paired "$t" one50)" \
			    "$(spread "$t" one50)"
		done
	fi
	if [ "$MIX" = 1 ]; then
		echo "interleaved latency (one run a round, the targets' transactions in turn): p50 and mean µs, medians (paired)"
		for t in $TARGETS; do
			case $t in *_pin) continue ;; esac
			printf '  %-14s p50 %s (%s %s)  mean %s (%s %s)\n' "$t" \
			    "$(med "$t" mix50)" "$(paired "$t" mix50)" "$(spread "$t" mix50)" \
			    "$(med "$t" mixmean)" "$(paired "$t" mixmean)" "$(spread "$t" mixmean)"
		done
	fi
	echo "wake-ups in the rate runs, per transaction: the machine's context switches, the origin's sleeps (medians; paired)"
	for t in $TARGETS; do
		printf '  %-14s machine %s (%s)  origin %s (%s)\n' "$t" \
		    "$(med "$t" ctxt)" "$(paired "$t" ctxt)" "$(med "$t" osleep)" "$(paired "$t" osleep)"
	done
	if [ "$BULK" -gt 0 ]; then
		echo "bulk, $BULK bytes per run (MiB/s; CPU s per GB, one tunnel and four): medians, then paired"
		for t in $TARGETS; do
			case $t in *_pin) continue ;; esac
			printf '  %-14s one %s (%s) four %s (%s)  CPU/GB %s (%s), %s (%s)\n' "$t" \
			    "$(med "$t" bulk1)" "$(paired "$t" bulk1)" "$(med "$t" bulk4)" "$(paired "$t" bulk4)" \
			    "$(med "$t" cpu_gb1)" "$(paired "$t" cpu_gb1)" "$(med "$t" cpu_gb4)" "$(paired "$t" cpu_gb4)"
		done
	fi
	for t in $TARGETS; do
		echo "  $t: p50 [$(all "$t" p50)] tps [$(all "$t" tps)] cpu [$(all "$t" cpu_us)]"
	done
} > "$OUT"
cat "$OUT"
[ -n "${AB_OUT:-}" ] && echo "egressd_ab: written to $OUT" >&2
exit 0
