#!/bin/sh
# The one list of Debian packages egress needs, in sets, so that each make target installs
# only what it uses:
#
#   deps.sh build     compile egressd, egressctl, egress-exec and the man pages
#   deps.sh runtime   what the installed programs need at run time (the .deb's Depends)
#   deps.sh demo      build + runtime + the demo's client and lab (make demo)
#   deps.sh test      everything: build, runtime, the test suite's peers, fuzzing and the
#                     Debian packaging tools (make check, .ci/run)
#   deps.sh bench     the benchmark's optional peers (make bench with BENCH_INSTALL_PEERS=1)
#   deps.sh --list SET  print the packages of SET, install nothing
#
# Idempotent: installs only what is missing. The test peers (squid, dante, a Kerberos KDC,
# rsyslog (the syslog mirror's collector), Apache Traffic Server when listed) are daemons
# Debian enables and starts on install; the
# suite starts its own instances inside its own namespaces, so they are installed with
# services blocked (policy-rc.d) and then disabled and masked: installing egress must never
# leave another daemon running or starting at boot (squid would hold :3128, the port of
# egressd's sample listener).
set -eu

BUILD="build-essential cmake pkg-config scdoc
 libevent-dev libssl-dev libc-ares-dev libseccomp-dev libgit2-dev libinih-dev
 libmnl-dev libnftables-dev libjansson-dev libidn2-dev libpsl-dev liburiparser-dev libcap-ng-dev
 libproxy-dev libkrb5-dev libcmocka-dev zlib1g-dev"
RUNTIME="libproxy1-plugin-webkit gss-ntlmssp iproute2 ca-certificates git publicsuffix
 libnftables1 libgit2-1.5"
DEMO="curl python3"
# Peers and tools of the test suite, the fuzzers (clang) and the package build and check.
TEST="curl python3 squid apache2-utils dante-server krb5-kdc krb5-admin-server krb5-user
 rsyslog rsyslog-openssl
 openssl procps psmisc chromium clang llvm debhelper lintian fakeroot dpkg-dev nodejs
 nftables"
BENCH="trafficserver tinyproxy squid bubblewrap linux-perf strace"
# Services of the test and bench peers above: never enabled, never left running.
PEER_SERVICES="squid danted krb5-kdc krb5-admin-server rsyslog trafficserver tinyproxy"

usage() {
	echo "usage: deps.sh [--list] build|runtime|demo|test|bench" >&2
	exit 2
}

list=0
if [ "${1:-}" = "--list" ]; then
	list=1
	shift
fi
set_=${1:-test}
case "$set_" in
build) pkgs="$BUILD" ;;
runtime) pkgs="$RUNTIME" ;;
demo) pkgs="$BUILD $RUNTIME $DEMO" ;;
test | all) pkgs="$BUILD $RUNTIME $DEMO $TEST" ;;
bench) pkgs="$BENCH" ;;
*) usage ;;
esac
if [ "$list" = 1 ]; then
	# shellcheck disable=SC2086
	printf '%s\n' $pkgs | sort -u
	exit 0
fi

want=""
for p in $pkgs; do
	case " $want " in *" $p "*) continue ;; esac
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
		want="$want $p"
	fi
done
# npm installs the agent CLIs of the acceptance tests (scripts/install-agents.sh). Debian's
# npm package only when no npm is there: a nodejs built with npm inside conflicts with it.
case "$set_" in
test | all) command -v npm >/dev/null 2>&1 || want="$want npm" ;;
esac
[ -z "$want" ] && exit 0

if [ "$(id -u)" != 0 ]; then
	echo "deps.sh: missing packages ($set_):$want" >&2
	echo "deps.sh: run as root (or: sudo apt-get install --no-install-recommends$want)" >&2
	exit 1
fi
echo "deps.sh: installing ($set_):$want"
export DEBIAN_FRONTEND=noninteractive
# No maintainer script may start a service while we install (invoke-rc.d asks policy-rc.d;
# 101 = action forbidden). An existing policy-rc.d (a container's) is left as it is.
if [ ! -e /usr/sbin/policy-rc.d ]; then
	printf '#!/bin/sh\n# egress scripts/deps.sh: no service starts during this install\nexit 101\n' \
	    > /usr/sbin/policy-rc.d
	chmod 755 /usr/sbin/policy-rc.d
	trap 'rm -f /usr/sbin/policy-rc.d' EXIT
fi
apt-get update -qq
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $want

# The peer daemons this run installed: disabled and masked (systemd), disabled in the SysV
# links (update-rc.d), so that no boot starts them. Peers that were installed before are
# the machine owner's business and are left alone.
for svc in $PEER_SERVICES; do
	case "$svc" in
	squid) pkg=squid ;;
	danted) pkg=dante-server ;;
	krb5-kdc) pkg=krb5-kdc ;;
	krb5-admin-server) pkg=krb5-admin-server ;;
	rsyslog) pkg=rsyslog ;;
	trafficserver) pkg=trafficserver ;;
	tinyproxy) pkg=tinyproxy ;;
	*) continue ;;
	esac
	case " $want " in *" $pkg "*) ;; *) continue ;; esac
	if command -v systemctl >/dev/null 2>&1; then
		# Works without a running systemd too (it edits the unit links).
		systemctl --quiet disable "$svc.service" 2>/dev/null || true
		systemctl --quiet mask "$svc.service" 2>/dev/null ||
		    echo "deps.sh: warning: could not mask $svc.service" >&2
		if [ -d /run/systemd/system ]; then
			systemctl --quiet stop "$svc.service" 2>/dev/null || true
		fi
	fi
	if [ -x "/etc/init.d/$svc" ] && command -v update-rc.d >/dev/null 2>&1; then
		update-rc.d "$svc" disable >/dev/null 2>&1 || true
	fi
	echo "deps.sh: $svc installed for the tests only: disabled and masked (the suite starts its own)"
done
