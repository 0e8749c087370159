#!/bin/bash
# The benchmark's bare relay (bench/egrelay.c) relays correctly: a smoke test of
# correctness, not of timing (no figure is asserted). Inside a network namespace of its own
# (loopback only): egorigin as the origin, egrelay in front of it, egload through it for a
# few CONNECT + GET transactions and a small bulk download, and a request that is not a
# CONNECT to an IP literal answered 400. The work-budget relay (--work-us, bench/run.sh)
# relays the same way, so does the relay with 1 MiB pipes (--pipe-size), and a bad
# --work-us or --pipe-size is refused with the usage. The per-CPU relay (--per-cpu,
# bench/placement.sh) serves a client pinned to CPU i from its process for CPU i: each
# process counts exactly the transactions of the client on its CPU. Needs root for the namespace (exit 77
# otherwise).
set -u
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root (network namespace)"; exit 77; }
B=${EGRESS_BINARY_DIR:?EGRESS_BINARY_DIR unset}/bench
for b in egrelay egorigin egload; do
	[ -x "$B/$b" ] || { echo "FAIL: $B/$b is not built"; exit 1; }
done
T=$(mktemp -d /tmp/egress-relay-test.XXXXXX) || exit 1
trap 'rm -rf "$T"' EXIT

# shellcheck disable=SC2016
timeout -k 5 120 unshare -n bash -c '
set -u
B=$1 T=$2
ip link set lo up || exit 1
"$B/egorigin" --listen 127.0.9.1:0 --port-file "$T/o.port" 2>"$T/origin.log" &
op=$!
"$B/egrelay" --listen 127.0.0.1:0 --port-file "$T/r.port" 2>"$T/relay.log" &
rp=$!
trap "kill $op $rp 2>/dev/null; wait 2>/dev/null" EXIT
i=0
while { [ ! -s "$T/o.port" ] || [ ! -s "$T/r.port" ]; } && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
[ -s "$T/o.port" ] && [ -s "$T/r.port" ] || { echo "FAIL: origin or relay did not start"; exit 1; }
O=127.0.9.1:$(cat "$T/o.port") R=127.0.0.1:$(cat "$T/r.port")
fail=0
out=$("$B/egload" latency --target "$O" --proxy "$R" -n 20 --timeout 10)
echo "latency: $out"
case " $out " in *" ok=20 errors=0 "*) ;; *) echo "FAIL: 20 transactions expected"; fail=1 ;; esac
out=$("$B/egload" bulk --target "$O" --proxy "$R" -c 2 --bytes 4000000 --timeout 30)
echo "bulk: $out"
case " $out " in *" ok=2 errors=0 tunnels=2 bytes=8000000 "*) ;; *) echo "FAIL: 2 x 4 MB expected"; fail=1 ;; esac
# Not a CONNECT to an IP literal: 400, and nothing relayed.
exec 3<>"/dev/tcp/127.0.0.1/$(cat "$T/r.port")" || exit 1
printf "GET http://example.test/ HTTP/1.1\r\nHost: example.test\r\n\r\n" >&3
read -r -t 10 line <&3
exec 3>&-
echo "non-CONNECT answered: ${line%$'\''\r'\''}"
case $line in "HTTP/1.1 400 "*) ;; *) echo "FAIL: 400 expected"; fail=1 ;; esac
kill -TERM $rp
wait $rp
cat "$T/relay.log"
grep -q "tunnels=22 refused=1" "$T/relay.log" || { echo "FAIL: relay counters"; fail=1; }
# start_relay NAME ARGS...: another egrelay with ARGS; RP its pid, RPORT its port
start_relay() {
	"$B/egrelay" --listen 127.0.0.1:0 --port-file "$T/$1.port" "${@:2}" 2>"$T/$1.log" &
	RP=$!
	trap "kill $op $RP 2>/dev/null; wait 2>/dev/null" EXIT
	i=0
	while [ ! -s "$T/$1.port" ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
	[ -s "$T/$1.port" ] || { echo "FAIL: egrelay ${*:2} did not start"; exit 1; }
	RPORT=$(cat "$T/$1.port")
}
# refused OPTION VALUE...: each value is refused with the usage (exit 2)
refused() {
	for bad in "${@:2}"; do
		"$B/egrelay" --listen 127.0.0.1:0 "$1" "$bad" 2>"$T/bad.log"
		rc=$?
		[ $rc = 2 ] && grep -q "usage:" "$T/bad.log" ||
		    { echo "FAIL: $1 \"$bad\" accepted (exit $rc)"; fail=1; }
	done
}
# --work-us: the same relay with busy work per connection still relays every transaction
start_relay w --work-us 50
out=$("$B/egload" latency --target "$O" --proxy "127.0.0.1:$RPORT" -n 20 --timeout 10)
echo "latency, --work-us 50: $out"
case " $out " in *" ok=20 errors=0 "*) ;; *) echo "FAIL: 20 transactions expected with --work-us"; fail=1 ;; esac
kill -TERM $RP
wait $RP
refused --work-us -1 1001 x 5x ""
# --pipe-size: a bulk download through 1 MiB pipes arrives whole
start_relay p --pipe-size 1048576
out=$("$B/egload" bulk --target "$O" --proxy "127.0.0.1:$RPORT" -c 2 --bytes 4000000 --timeout 30)
echo "bulk, --pipe-size 1048576: $out"
case " $out " in *" ok=2 errors=0 tunnels=2 bytes=8000000 "*) ;; *) echo "FAIL: 2 x 4 MB expected with --pipe-size"; fail=1 ;; esac
kill -TERM $RP
wait $RP
grep -q "F_SETPIPE_SZ" "$T/p.log" && { echo "FAIL: a pipe was not resized"; fail=1; }
refused --pipe-size 0 4095 1048577 x ""
# --per-cpu: a client pinned to CPU c sends its SYN from CPU c, so the program of the group
# hands its connections to the process pinned there; 5 + c transactions from each CPU,
# and each process ends with its counters and its CPU (egrelay cpu=C: ...).
# It needs the CPUs it may use to be 0..n-1 (n <= 64); elsewhere this part is skipped.
ncpu=$(nproc)
want="0-$((ncpu - 1))"
[ "$ncpu" = 1 ] && want=0
allowed=$(sed -n "s/^Cpus_allowed_list:[[:space:]]*//p" /proc/self/status)
if [ "$allowed" != "$want" ] || [ "$ncpu" -gt 64 ]; then
	echo "--per-cpu not checked: this process may use CPUs $allowed, not 0..n-1 (n <= 64)"
else
	start_relay c --per-cpu
	c=0
	while [ $c -lt "$ncpu" ] && [ $c -lt 8 ]; do
		out=$(taskset -c $c "$B/egload" latency --target "$O" --proxy "127.0.0.1:$RPORT" \
		    -n $((5 + c)) --timeout 10)
		echo "latency, --per-cpu, client on CPU $c: $out"
		case " $out " in *" ok=$((5 + c)) errors=0 "*) ;; *) echo "FAIL: $((5 + c)) transactions expected"; fail=1 ;; esac
		c=$((c + 1))
	done
	kill -TERM $RP
	wait $RP
	cat "$T/c.log"
	c=0
	while [ $c -lt "$ncpu" ] && [ $c -lt 8 ]; do
		grep -q "^egrelay cpu=$c: accepted=$((5 + c)) tunnels=$((5 + c)) refused=0 " "$T/c.log" ||
		    { echo "FAIL: the process of CPU $c did not serve exactly its $((5 + c)) connections"; fail=1; }
		c=$((c + 1))
	done
	[ "$(grep -c "^egrelay cpu=[0-9]*: accepted=" "$T/c.log")" = "$ncpu" ] ||
	    { echo "FAIL: one process per CPU expected"; fail=1; }
fi
"$B/egrelay" --listen 127.0.0.1:0 --listen 127.0.0.1:0 --per-cpu 2>"$T/bad.log"
[ $? = 2 ] && grep -q "usage:" "$T/bad.log" || { echo "FAIL: --per-cpu with two listeners accepted"; fail=1; }
exit $fail
' bash "$B" "$T"
rc=$?
[ $rc = 0 ] && echo PASS
exit $rc
