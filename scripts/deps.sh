#!/bin/sh
# Install every Debian package egress needs to build, run and test.
# One list, used by `make check`, `make demo` and .ci/run. Idempotent: installs only what is missing.
#
#   sh scripts/deps.sh          build, run and test packages (`make check`, `make demo`)
#   sh scripts/deps.sh --bench  those plus the benchmark's peers and tools (`make bench` only)
set -eu

BUILD="build-essential cmake pkg-config clang llvm
 libevent-dev libssl-dev libc-ares-dev libseccomp-dev libgit2-dev libinih-dev
 libmnl-dev libjansson-dev libidn2-dev libpsl-dev liburiparser-dev libcap-ng-dev
 libproxy-dev libkrb5-dev libcmocka-dev"
RUNTIME="libproxy1-plugin-webkit gss-ntlmssp iproute2 ca-certificates git publicsuffix"
TEST="curl python3 squid apache2-utils dante-server krb5-kdc krb5-admin-server krb5-user openssl procps psmisc chromium"
# The benchmark's set (bench/run.sh, docs/performance.md), installed only by `make bench`:
# the peers it compares egressd with (squid is already in TEST) and the measuring tools.
# Their services are never left enabled: started by the benchmark by pid, stopped by pid.
BENCH="trafficserver tinyproxy bubblewrap linux-perf strace"
BENCH_SERVICES="trafficserver tinyproxy"

sets="$BUILD $RUNTIME $TEST"
bench=0
case "${1:-}" in
--bench) sets="$sets $BENCH"; bench=1 ;;
"") ;;
*) echo "usage: sh scripts/deps.sh [--bench]" >&2; exit 2 ;;
esac

# Packages' own services must not stay enabled (the benchmark and the tests start their own
# instances by pid); idempotent, and a no-op without systemd.
disable_services() {
	[ "$bench" = 1 ] && [ "$(id -u)" = 0 ] && command -v systemctl >/dev/null 2>&1 || return 0
	for s in $BENCH_SERVICES; do
		if systemctl is-enabled "$s" >/dev/null 2>&1; then
			systemctl disable --now "$s" >/dev/null 2>&1 ||
			    echo "deps.sh: could not disable $s: run systemctl disable --now $s" >&2
		fi
	done
}

want=""
for p in $sets; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
		want="$want $p"
	fi
done
[ -z "$want" ] && { disable_services; exit 0; }

if [ "$(id -u)" != 0 ]; then
	echo "deps.sh: missing packages:$want" >&2
	echo "deps.sh: run as root (or: sudo apt-get install$want)" >&2
	exit 1
fi
echo "deps.sh: installing:$want"
export DEBIAN_FRONTEND=noninteractive
# Services that packages start on install (squid, danted, krb5-kdc) are not wanted:
# the tests start their own instances inside their own namespaces.
if [ ! -e /usr/sbin/policy-rc.d ]; then
	printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
	chmod 755 /usr/sbin/policy-rc.d
	trap 'rm -f /usr/sbin/policy-rc.d' EXIT
fi
apt-get update -qq
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $want
disable_services
