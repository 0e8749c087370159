#!/bin/sh
# Run every libFuzzer harness in BUILD_DIR for SECONDS each, on its seed corpus.
# A finding (crash, leak, timeout) fails the run and leaves the reproducer in fuzz/findings/.
set -eu
build=$1; secs=$2
top=$(cd "$(dirname "$0")/.." && pwd)
fail=0; n=0
mkdir -p "$build/fuzz-work"
for f in "$build"/fuzz/fuzz_*; do
	[ -x "$f" ] || continue
	name=$(basename "$f"); short=${name#fuzz_}
	seeds="$top/fuzz/corpus/$short"
	work="$build/fuzz-work/$short"
	mkdir -p "$work" "$top/fuzz/findings"
	[ -d "$seeds" ] || seeds=""
	n=$((n+1))
	if "$f" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -max_len=8192 -print_final_stats=1 \
	     -artifact_prefix="$top/fuzz/findings/$short-" $work $seeds \
	     >"$build/fuzz-work/$short.log" 2>&1; then
		echo "fuzz: $short ok ($(grep -o 'stat::number_of_executed_units: [0-9]*' "$build/fuzz-work/$short.log" | awk '{print $2}') runs)"
	else
		echo "fuzz: $short FAILED; log: $build/fuzz-work/$short.log"; tail -30 "$build/fuzz-work/$short.log"
		fail=1
	fi
done
echo "fuzz-smoke: $n harnesses, $([ $fail = 0 ] && echo 'no findings' || echo 'FINDINGS')"
exit $fail
