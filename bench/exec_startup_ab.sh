#!/bin/sh
# bench/exec_startup_ab.sh N OUTDIR NAME=BUILD [NAME=BUILD ...]
#
# egress-exec start-up only, for one or more builds side by side (before/after comparisons
# in one session): bench/run.sh's start-up part with the same egspawn/egstamp command lines
# and variants (no network; --allow through a running egressd; --allow with a private
# egressd; the network variants in a namespace of their own), N runs per variant in 5
# interleaved blocks: bwrap, then each build's three variants, block after block. Prints the
# p50/p90 to the worker's first instruction, the ratio to bwrap's p50 of the same run, and
# the teardown p50 (whole run minus first instruction). Root only; every child bounded by
# timeout; the running egressd is stopped by pid by the inner shell's trap.
# Example: sh bench/exec_startup_ab.sh 30 /tmp/ab before=/tmp/old/build after=build
set -u
[ $# -ge 3 ] || { echo "usage: $0 N OUTDIR NAME=BUILD ..." >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "exec_startup_ab: needs root" >&2; exit 2; }
N=$1; OUT=$2; shift 2
BUILD=${1#*=}
EGSPAWN=$BUILD/bench/egspawn; EGSTAMP=$BUILD/bench/egstamp
BWRAP=$(command -v bwrap) || { echo "exec_startup_ab: bwrap is missing (make bench-deps)" >&2; exit 2; }
TMP=$(mktemp -d /tmp/egress-spawn.XXXXXX); chmod 755 "$TMP"
REPO=$TMP/repo; mkdir -p "$REPO" "$TMP/ctl" "$OUT"
cp "$EGSTAMP" "$REPO/egstamp"; chown -R 65534:65534 "$REPO"; chmod 755 "$REPO" "$REPO/egstamp"
printf '[egressd]\ncontrol_socket = %s\ndecision_log = %s\n' "$TMP/ctl/control.sock" "$TMP/ctl/decisions.jsonl" > "$TMP/ctl/egressd.ini"
# shellcheck disable=SC2034  # the SP_* are read through eval in run()
setb() { EXEC=$1/executor/egress-exec; EGRESSD=$1/egressd/egressd
SP_exec_nonet="$EXEC run --repo $REPO --"
SP_exec_net="$EXEC run --repo $REPO --allow https://bench.example.com --"
SP_exec_netd="$EXEC run --repo $REPO --egressd-control $TMP/ctl/control.sock --allow https://bench.example.com --"
}
# shellcheck disable=SC2034  # read through eval in run()
SP_bwrap="$BWRAP --unshare-all --ro-bind / / --"
block=$(( (N + 4) / 5 ))
run() { # variant worker raw
	case $1 in
	exec_net) timeout -k 5 600 unshare -n sh -c 'ip link set lo up && exec "$@"' sh "$EGSPAWN" -n $block --raw "$3" -- $SP_exec_net "$2" ;;
	exec_netd)
		rm -f "$TMP/ctl/control.sock"
		timeout -k 5 600 unshare -n sh -c '
			ip link set lo up || exit 1
			"$1" -f -c "$2" 2>>"$3" &
			e=$!
			trap "kill \$e 2>/dev/null; wait \$e 2>/dev/null" EXIT
			i=0
			while [ ! -S "$4" ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
			shift 4
			"$@"' sh "$EGRESSD" "$TMP/ctl/egressd.ini" "$TMP/ctl/egressd.log" "$TMP/ctl/control.sock" "$EGSPAWN" -n $block --raw "$3" -- $SP_exec_netd "$2" ;;
	*) pre=$(eval "echo \"\$SP_$1\""); timeout -k 5 600 "$EGSPAWN" -n $block --raw "$3" -- $pre "$2" ;;
	esac
}
b=1
while [ $b -le 5 ]; do
	run bwrap "$EGSTAMP" "$OUT/bwrap.stamp" >/dev/null 2>>"$OUT/spawn.log"
	for nb in "$@"; do
		setb "${nb#*=}"
		for v in exec_nonet exec_netd exec_net; do
			run $v /work/egstamp "$OUT/${nb%%=*}.$v.stamp" >/dev/null 2>>"$OUT/spawn.log"
		done
	done
	b=$((b + 1))
done
pf() { awk -v c="$2" '$c > 0 { print $c / 1e6 }' "$1" | sort -g | awk -v p="$3" '{ v[NR] = $1 } END { if (NR) printf "%.1f", v[int(p * (NR - 1) + 1.5)] }'; }
td() { awk '$2 > 0 { print ($1 - $2) / 1e6 }' "$1" | sort -g | awk '{ v[NR] = $1 } END { if (NR) printf "%.1f", v[int(0.5 * (NR - 1) + 1.5)] }'; }
bw=$(pf "$OUT/bwrap.stamp" 2 0.5)
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
for v in bwrap $(for nb in "$@"; do for x in exec_nonet exec_netd exec_net; do echo "${nb%%=*}.$x"; done; done); do
	f=$(pf "$OUT/$v.stamp" 2 0.5)
	echo "$v first_p50=$f p90=$(pf "$OUT/$v.stamp" 2 0.9) x_bwrap=$(awk -v a=$f -v b=$bw 'BEGIN{printf "%.1f", a/b}') teardown_p50=$(td "$OUT/$v.stamp") whole_p50=$(pf "$OUT/$v.stamp" 1 0.5) runs=$(wc -l < "$OUT/$v.stamp")"
done
rm -rf "$TMP"
