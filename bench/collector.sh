#!/bin/sh
# bench/collector.sh BUILD_DIR - how long egress-exec's collector takes (changed set,
# scope check, candidate.diff, manifest: executor/collector.h) over deep and big trees,
# and what each run's outcome is (accepted within its bounds, or rejected with a reason;
# never internal_error). Part of `make bench`; runs alone too (root).
#
# Scenarios (each one real `egress-exec run --workunit` whose worker makes the tree):
#   small       one modified file                       (the baseline)
#   deep100     a file 100 directories deep
#   files10k    10,000 new files in 100 directories
#   files50k    50,000 new files in 500 directories
#   big200m     one 200 MiB file (incompressible), diff_bytes 8 MiB: diff_too_large
#   zero200m    one 200 MiB file of zeros, diff_bytes 1 MiB: over 64 x diff_bytes,
#               refused before it is read
# Knobs: BENCH_COLLECT_RUNS=3 runs per scenario (the median is reported);
#        BENCH_OUT=DIR results directory [BUILD_DIR/bench-results].
# Output: one line per scenario - outcome, reason, collector ms (median, min, max), run ms;
# and BENCH_OUT/collector.tsv.
set -u

die() { echo "bench/collector: $*" >&2; exit 1; }

[ $# -ge 1 ] || die "usage: sh bench/collector.sh BUILD_DIR"
BUILD=$(cd "$1" 2>/dev/null && pwd) || die "no build directory $1"
EXE="$BUILD/executor/egress-exec"
[ -x "$EXE" ] || die "no $EXE"
[ "$(id -u)" = 0 ] || die "needs root (egress-exec builds namespaces)"
RUNS=${BENCH_COLLECT_RUNS:-3}
OUT=${BENCH_OUT:-$BUILD/bench-results}
mkdir -p "$OUT" || die "cannot create $OUT"
TOP=$(mktemp -d /tmp/egx-bench-collect.XXXXXX) || die "mktemp"
trap 'rm -rf "$TOP"' EXIT INT TERM
chmod 755 "$TOP"

cat > "$TOP/preset.ini" <<'EOF'
[preset]
name = bench-shell
executable = /bin/sh
argv = sh
argv = -s
prompt_transport = stdin
network_policy = disabled
env_allowlist = LANG
[ceilings]
wall_seconds = 300
cpu_millicores = 2000
memory_bytes = 1G
disk_bytes = 1G
processes = 64
output_bytes = 64K
diff_bytes = 64M
EOF

# workunit NAME DIFF_BYTES SCRIPT-LINE...
workunit() {
	name=$1 db=$2
	shift 2
	{
		echo "id = bench-$name"
		for l in "$@"; do echo "objective = $l"; done
		cat <<EOF
[security]
sandbox_required = true
[permissions]
process_execution = true
secrets =
network = none
filesystem_write = *
[budget]
wall_seconds = 240
cpu_millicores = 2000
memory_bytes = 768M
disk_bytes = 768M
processes = 32
output_bytes = 16K
diff_bytes = $db
[constraints]
allowed_paths = *
forbidden_paths =
EOF
	} > "$TOP/$name.ini"
}

workunit small 8M "echo more >> README.md"
workunit deep100 8M 'd=.; i=0; while [ $i -lt 100 ]; do d=$d/n$i; i=$((i+1)); done; mkdir -p $d && echo deep > $d/leaf.txt'
workunit files10k 8M 'i=0; while [ $i -lt 100 ]; do mkdir -p gen/d$i; j=0; while [ $j -lt 100 ]; do echo $i.$j > gen/d$i/f$j; j=$((j+1)); done; i=$((i+1)); done'
workunit files50k 64M 'i=0; while [ $i -lt 500 ]; do mkdir -p gen/d$i; j=0; while [ $j -lt 100 ]; do echo $i.$j > gen/d$i/f$j; j=$((j+1)); done; i=$((i+1)); done'
workunit big200m 8M "head -c 209715200 /dev/urandom > big.bin"
workunit zero200m 1M "head -c 209715200 /dev/zero > zero.bin"

base() {
	rm -rf "$TOP/repo" "$TOP/out"
	mkdir -p "$TOP/repo"
	echo hello > "$TOP/repo/README.md"
	git -C "$TOP/repo" init -q . &&
	git -C "$TOP/repo" -c user.email=b@example.com -c user.name=b add -A &&
	git -C "$TOP/repo" -c user.email=b@example.com -c user.name=b commit -q -m base ||
	    die "git"
	chown -R 65534:65534 "$TOP/repo"
}

now_ms() { date +%s%3N; }

printf 'scenario\toutcome\treason\tcollector_ms_median\tmin\tmax\trun_ms_median\n' \
    > "$OUT/collector.tsv"
for s in small deep100 files10k files50k big200m zero200m; do
	cms="" rms="" outcome="" reason=""
	r=0
	while [ $r -lt "$RUNS" ]; do
		base
		t0=$(now_ms)
		"$EXE" run --workunit "$TOP/$s.ini" --preset "$TOP/preset.ini" --repo "$TOP/repo" \
		    --out "$TOP/out" > /dev/null 2> "$TOP/err"
		t1=$(now_ms)
		c=$(sed -n 's/^  collector: \([0-9]*\) ms$/\1/p' "$TOP/err" | tail -n 1)
		o=$(sed -n 's/^  outcome: \([a-z_]*\) (\([a-z_]*\)).*/\1 \2/p' "$TOP/err" | tail -n 1)
		[ -n "$c" ] || { cat "$TOP/err" >&2; die "$s: no collector time"; }
		case "$o" in
		*internal_error*|*collector_failed*) cat "$TOP/err" >&2; die "$s: $o" ;;
		esac
		outcome=${o% *} reason=${o#* }
		cms="$cms $c" rms="$rms $((t1 - t0))"
		r=$((r + 1))
	done
	med() { echo "$@" | tr ' ' '\n' | sed '/^$/d' | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
	mn() { echo "$@" | tr ' ' '\n' | sed '/^$/d' | sort -n | head -n 1; }
	mx() { echo "$@" | tr ' ' '\n' | sed '/^$/d' | sort -n | tail -n 1; }
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$s" "$outcome" "$reason" "$(med $cms)" \
	    "$(mn $cms)" "$(mx $cms)" "$(med $rms)" >> "$OUT/collector.tsv"
	printf '%-10s %-9s %-15s collector %6s ms (min %s, max %s)  run %6s ms\n' "$s" \
	    "$outcome" "$reason" "$(med $cms)" "$(mn $cms)" "$(mx $cms)" "$(med $rms)"
done
echo "results: $OUT/collector.tsv"
