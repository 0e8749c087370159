#!/bin/sh
# make demo, after the build: a confined worker reaching an allowlisted origin through
# egressd, and a second run whose candidate is rejected.
#
# It builds a small lab (integration/lab.py: an "internet" namespace with an HTTP origin on
# 198.51.100.10 and a DNS server on 198.51.100.53, and a "host" namespace routed to it),
# creates a throw-away git repository, and runs `egress-exec run` with the embedded egressd
# on conf/workunits/demo.ini + conf/presets/demo-agent.ini: the agent fetches the
# allowlisted origin (allowed), tries origin2 (refused: not_granted) and edits README.md.
# Then conf/workunits/demo-forbidden.ini writes under a forbidden path: rejected.
# Everything it creates (namespaces, repository, output) is removed at the end, also on
# failure. Needs root; touches nothing outside the lab's own namespaces.
set -eu
build=${1:-build}
top=$(cd "$(dirname "$0")/.." && pwd)
case $build in /*) ;; *) build="$top/$build" ;; esac
exe="$build/executor/egress-exec"
[ "$(id -u)" = 0 ] || { echo "demo: needs root (namespaces, cgroups, mounts)"; exit 1; }
[ -x "$exe" ] || { echo "demo: $exe is not built"; exit 1; }
command -v curl >/dev/null || { echo "demo: curl is needed (apt-get install curl)"; exit 1; }

prefix="egdemo$$"
prefix=$(printf '%s' "$prefix" | cut -c1-10)
work=$(mktemp -d /tmp/egress-demo.XXXXXX)
chmod 755 "$work"
state="$work/lab.json"
export EGRESS_BINARY_DIR="$build"

cleanup() {
	[ -f "$state" ] && python3 "$top/integration/lab.py" down --state "$state" >/dev/null 2>&1 || true
	rm -rf "$work"
}
trap cleanup EXIT INT TERM

echo "== lab: origin http://origin.lab.test (198.51.100.10), DNS 198.51.100.53 =="
python3 "$top/integration/lab.py" up --prefix "$prefix" --state "$state" --workers 0 >/dev/null
hostns="$prefix-host"

repo="$work/repo"
mkdir -p "$repo"
git -C "$repo" init -q .
printf '# demo repository\n\nHello.\n' > "$repo/README.md"
git -C "$repo" add README.md
git -C "$repo" -c user.email=demo@example.invalid -c user.name=demo commit -q -m base

run() {  # run WORKUNIT OUTDIR
	# nsenter --net only (not `ip netns exec`, which remounts /sys and hides the cgroups).
	nsenter --net="/run/netns/$hostns" "$exe" run \
	    --workunit "$top/conf/workunits/$1" --preset "$top/conf/presets/demo-agent.ini" \
	    --repo "$repo" --out "$2" \
	    --egressd-setting dns_server=198.51.100.53 \
	    --egressd-setting allow_special_address=198.51.100.0/24 \
	    --egressd-setting allow_special_address=203.0.113.0/24 \
	    --egressd-setting dns_timeout=1s --egressd-setting connect_timeout=3s
}

echo
echo "== 1. conf/workunits/demo.ini with conf/presets/demo-agent.ini =="
rc=0; run demo.ini "$work/out1" || rc=$?
echo "-- exit code $rc (0 = candidate accepted)"
echo "-- candidate.diff:"
cat "$work/out1/candidate.diff" 2>/dev/null || echo "(none)"
cp "$work/out1/manifest.json" /tmp/egress-demo-manifest.json 2>/dev/null || true
first=$rc

echo
echo "== 2. conf/workunits/demo-forbidden.ini: writes under a forbidden path =="
rc=0; run demo-forbidden.ini "$work/out2" || rc=$?
echo "-- exit code $rc (10 = candidate rejected)"
[ -e "$work/out2/candidate.diff" ] && echo "-- unexpected candidate.diff!" || echo "-- no candidate.diff (rejected whole)"
second=$rc

echo
echo "The first run's manifest is kept at /tmp/egress-demo-manifest.json (docs/workunit.md"
echo "describes it). Everything else is removed now."
[ "$first" = 0 ] && [ "$second" = 10 ] || { echo "demo: FAILED (exit codes $first, $second)"; exit 1; }
echo "demo: ok"
