#!/bin/sh
# The main job, end to end (called by `make demo` through scripts/demo.sh):
#   1. a small lab of network namespaces (integration/lab.py): an "internet" with origins on
#      198.51.100.0/24 and 203.0.113.0/24 and a DNS server, and a "host" namespace linked
#      to it;
#   2. a throw-away git repository;
#   3. egress-exec runs conf/workunits/demo.ini with conf/presets/demo-agent.ini in the host
#      namespace with a private egressd: the confined worker reaches the allowlisted origin
#      through egressd, is refused an ungranted one, and edits a file in scope;
#   4. conf/workunits/demo-forbidden.ini also writes outside its allowed paths: its
#      candidate is rejected whole;
#   5. everything the demo created is removed (the first manifest is kept for reading).
# Needs root; touches nothing outside the lab's own namespaces.
set -eu

build=${1:-build}
top=$(cd "$(dirname "$0")/.." && pwd)
case $build in /*) ;; *) build="$top/$build" ;; esac
exe="$build/executor/egress-exec"
ctl="$build/egressd/egressctl"
[ "$(id -u)" = 0 ] || { echo "demo: needs root (namespaces, cgroups, mounts)" >&2; exit 1; }
[ -x "$exe" ] || { echo "demo: $exe is not built" >&2; exit 1; }
command -v curl >/dev/null || { echo "demo: curl is needed (apt-get install curl)" >&2; exit 1; }

prefix=$(printf 'egdemo%s' "$$" | cut -c1-10)
work=$(mktemp -d /tmp/egress-demo.XXXXXX)
chmod 755 "$work"
state="$work/lab.json"
export EGRESS_BINARY_DIR="$build"
kept=/tmp/egress-demo-manifest.json

cleanup() {
	[ -f "$state" ] && python3 "$top/integration/lab.py" down --state "$state" >/dev/null 2>&1 || true
	rm -rf "$work"
}
trap cleanup EXIT INT TERM

say() { printf '\n== %s\n' "$*"; }

say "building the lab ($prefix-inet: origins and DNS; $prefix-host: where egress-exec runs)"
python3 "$top/integration/lab.py" up --prefix "$prefix" --state "$state" --workers 0 \
	--timeout 60 >/dev/null
echo "origin.lab.test  -> 198.51.100.10 (allowlisted)"
echo "origin2.lab.test -> 203.0.113.10  (not in the grant)"

say "a throw-away repository"
repo="$work/repo"
mkdir -p "$repo"
git -C "$repo" init -q .
printf '# demo repository\n\nHello.\n' > "$repo/README.md"
git -C "$repo" add README.md
git -C "$repo" -c user.email=demo@example.invalid -c user.name=demo commit -q -m base
echo "  README.md (committed)"

run_unit() {  # run_unit WORKUNIT OUTDIR
	# Only the network namespace is entered (nsenter --net): `ip netns exec` would remount
	# /sys and hide the cgroup hierarchy the sandbox needs. The documentation ranges are
	# special-purpose addresses egressd blocks by default; the lab lifts that with the
	# same explicit, logged override a user would use.
	nsenter --net="/run/netns/$prefix-host" "$exe" run \
	    --workunit "$top/conf/workunits/$1" --preset "$top/conf/presets/demo-agent.ini" \
	    --repo "$repo" --out "$2" \
	    --egressd-setting dns_server=198.51.100.53 \
	    --egressd-setting allow_special_address=198.51.100.0/24 \
	    --egressd-setting allow_special_address=203.0.113.0/24 \
	    --egressd-setting dns_timeout=1s --egressd-setting connect_timeout=3s
}

say "run 1: conf/workunits/demo.ini (fetch the allowlisted origin, try another, edit README.md)"
first=0
run_unit demo.ini "$work/out1" || first=$?
echo "exit status: $first (0 = candidate accepted)"
if [ -f "$work/out1/candidate.diff" ]; then
	say "the candidate diff"
	cat "$work/out1/candidate.diff"
fi
if [ -f "$work/out1/decisions.jsonl" ]; then
	say "this run's decision records (hash-chained; egressctl log verify checks them)"
	python3 - "$work/out1/decisions.jsonl" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r.get("event") == "decision":
        print("  %-5s %-12s %-26s route=%s pinned=%s attested=%s" % (
            r["verdict"], r["reason"], r.get("target") or "-", r.get("route"),
            r.get("pinned"), str(r.get("attested")).lower()))
PY
	"$ctl" log verify "$work/out1/decisions.jsonl" | sed 's/^/  /' || true
fi
cp "$work/out1/manifest.json" "$kept" 2>/dev/null || true

say "run 2: conf/workunits/demo-forbidden.ini (also writes CHANGELOG.md, outside its allowed paths)"
second=0
run_unit demo-forbidden.ini "$work/out2" || second=$?
echo "exit status: $second (10 = candidate rejected)"
if [ -e "$work/out2/candidate.diff" ]; then
	echo "unexpected: a candidate.diff was written"
else
	echo "no candidate.diff: the candidate is rejected whole"
fi

say "the host repository is untouched"
if [ -z "$(git -C "$repo" status --porcelain)" ]; then
	echo "  clean: every write of both runs landed in the run's overlay"
else
	git -C "$repo" status --short | sed 's/^/  /'
fi

say "summary"
echo "run 1: $([ "$first" = 0 ] && echo "candidate accepted" || echo "exit $first")"
echo "run 2: $([ "$second" = 10 ] && echo "candidate rejected (scope)" || echo "exit $second")"
echo "the first run's manifest is kept at $kept (docs/workunit.md describes it);"
echo "everything else the demo created is removed now."
if [ "$first" != 0 ] || [ "$second" != 10 ]; then
	echo "demo: FAILED (exit codes $first, $second)" >&2
	exit 1
fi
echo "demo: ok"
