#!/bin/sh
# bench/model.sh BUILD_DIR - model connections: what interception costs against an opaque
# tunnel (docs/performance.md "Model connections"). Part of `make bench`; runs alone too.
#
# One TLS origin (bench/egmodel, 64-byte answers, keep-alive) on 127.0.9.50; one egressd
# (log_sync = batch) with two static grants on two loopback listeners: "opaque" (the
# origin granted, no connection: an SNI-checked opaque tunnel) and "intercepted" (the same
# origin bound to a model connection with a root-only credential: TLS terminated with a
# leaf of the operator CA, every request re-authorized, recorded and given the key). Plus
# the origin directly. Interleaved rounds; for each target:
#   keepalive  CONC threads x N requests on one CONNECT + TLS each (request rate, latency)
#   fresh      N requests, each a new CONNECT + TLS handshake + one request
# Every process is stopped by pid in the EXIT trap; every wait is bounded.
#
# Knobs: BENCH_MODEL_ROUNDS=3, BENCH_MODEL_N=2000 (keepalive requests per thread),
# BENCH_MODEL_CONC=8, BENCH_MODEL_FRESH=300, BENCH_OUT=DIR [BUILD_DIR/bench-results]
set -u

die() { echo "bench/model: $*" >&2; exit 1; }
[ $# -ge 1 ] || die "usage: sh bench/model.sh BUILD_DIR"
BUILD=$(cd "$1" 2>/dev/null && pwd) || die "no build directory $1"
EGMODEL=$BUILD/bench/egmodel
EGRESSD=$BUILD/egressd/egressd
for b in "$EGMODEL" "$EGRESSD"; do
	[ -x "$b" ] || die "$b is missing: build first (make build)"
done
ROUNDS=${BENCH_MODEL_ROUNDS:-3}
N=${BENCH_MODEL_N:-2000}
CONC=${BENCH_MODEL_CONC:-8}
FRESH=${BENCH_MODEL_FRESH:-300}
OUTDIR=${BENCH_OUT:-$BUILD/bench-results}
mkdir -p "$OUTDIR" || die "cannot create $OUTDIR"
OUT=$OUTDIR/model.txt

TMP=$(mktemp -d /tmp/egress-bench-model.XXXXXX) || die "mktemp failed"
chmod 755 "$TMP"
PIDS=""
cleanup() {
	for p in $PIDS; do kill "$p" 2>/dev/null; done
	for p in $PIDS; do
		i=0
		while kill -0 "$p" 2>/dev/null && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
		kill -9 "$p" 2>/dev/null
	done
	rm -rf "$TMP"
}
trap cleanup EXIT INT TERM

ORIGIN=127.0.9.50
OPORT=8443
mkdir -p "$TMP/oca" "$TMP/rca" "$TMP/egressd"
"$EGMODEL" ca "$TMP/oca" && "$EGMODEL" ca "$TMP/rca" || die "CA"
printf 'sk-bench-REAL-KEY\n' > "$TMP/model.key"
chmod 600 "$TMP/model.key"
cat > "$TMP/connections.ini" <<EOF
[connection bench]
destination = https://$ORIGIN:$OPORT
credential_file = $TMP/model.key
credential_header = x-api-key
EOF
cat > "$TMP/egressd/egressd.ini" <<EOF
[egressd]
control_socket = none
decision_log = $TMP/egressd/decisions.jsonl
log_sync = batch
allow_special_address = 127.0.0.0/8
connections = $TMP/connections.ini
origin_ca_file = $TMP/oca/ca.pem
intercept_ca_cert = $TMP/rca/ca.pem
intercept_ca_key = $TMP/rca/ca.key

[listener opaque]
listen = 127.0.9.51:3128
grant = opaque

[listener intercepted]
listen = 127.0.9.52:3128
grant = intercepted

[grant opaque]
allow = https://$ORIGIN:$OPORT
connections = 4096

[grant intercepted]
allow = https://$ORIGIN:$OPORT
model_connection = bench
connections = 4096
EOF

"$EGMODEL" origin $ORIGIN $OPORT "$TMP/oca" 2>"$TMP/origin.log" &
PIDS="$PIDS $!"
"$EGRESSD" -f -c "$TMP/egressd/egressd.ini" 2>"$TMP/egressd/egressd.log" &
PIDS="$PIDS $!"
i=0
until "$EGMODEL" client keepalive 127.0.9.52:3128 $ORIGIN:$OPORT "$TMP/rca/ca.pem" 1 1 \
    >"$TMP/probe.log" 2>&1; do
	i=$((i + 1))
	[ $i -lt 100 ] || { cat "$TMP/probe.log" "$TMP/egressd/egressd.log" "$TMP/egressd/decisions.jsonl" >&2; die "egressd did not come up"; }
	sleep 0.1
done

: > "$OUT"
r=1
while [ "$r" -le "$ROUNDS" ]; do
	for t in direct opaque intercepted; do
		case $t in
		direct) px=direct; ca=$TMP/oca/ca.pem ;;
		opaque) px=127.0.9.51:3128; ca=$TMP/oca/ca.pem ;;
		intercepted) px=127.0.9.52:3128; ca=$TMP/rca/ca.pem ;;
		esac
		printf 'round=%s target=%s ' "$r" "$t" >> "$OUT"
		"$EGMODEL" client keepalive "$px" $ORIGIN:$OPORT "$ca" "$N" "$CONC" >> "$OUT" ||
			echo "bench/model: $t keepalive had failures" >&2
		printf 'round=%s target=%s ' "$r" "$t" >> "$OUT"
		"$EGMODEL" client fresh "$px" $ORIGIN:$OPORT "$ca" "$FRESH" 1 >> "$OUT" ||
			echo "bench/model: $t fresh had failures" >&2
	done
	r=$((r + 1))
done

# Median over rounds per target and mode.
awk '
{ for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
  k = v["target"] " " v["mode"]; n[k]++
  rate[k, n[k]] = v["rate"]; p50[k, n[k]] = v["p50_us"]; p99[k, n[k]] = v["p99_us"] }
function med(a, k, m,   i, j, t, x) {
  for (i = 1; i <= m; i++) x[i] = a[k, i]
  for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (x[j] + 0 < x[i] + 0) { t = x[i]; x[i] = x[j]; x[j] = t }
  return x[int((m + 1) / 2)] }
END {
  printf "%-12s %-9s %10s %9s %9s\n", "target", "mode", "req/s", "p50 us", "p99 us"
  split("direct opaque intercepted", ts, " "); split("keepalive fresh", ms, " ")
  for (a = 1; a <= 3; a++) for (b = 1; b <= 2; b++) { k = ts[a] " " ms[b]
    if (n[k]) printf "%-12s %-9s %10s %9s %9s\n", ts[a], ms[b], med(rate, k, n[k]), med(p50, k, n[k]), med(p99, k, n[k]) }
}' "$OUT" | tee "$OUTDIR/model-summary.txt"
echo "raw: $OUT"
