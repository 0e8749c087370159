#!/bin/sh
# make demo: the main job. Until every piece exists it says plainly what is not built yet.
set -eu
build=${1:-build}
for b in egressd egressctl; do
	[ -x "$build/egressd/$b" ] || echo "demo: $b is not built yet"
done
[ -x "$build/executor/egress-exec" ] || { echo "demo: egress-exec is not built yet"; exit 0; }
exec sh "$(dirname "$0")/demo-run.sh" "$build"
