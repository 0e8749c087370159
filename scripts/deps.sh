#!/bin/sh
# Install every Debian package egress needs to build, run and test.
# One list, used by `make check`, `make demo` and .ci/run. Idempotent: installs only what is missing.
set -eu

BUILD="build-essential cmake pkg-config clang llvm
 libevent-dev libssl-dev libc-ares-dev libseccomp-dev libgit2-dev libinih-dev
 libmnl-dev libjansson-dev libidn2-dev libpsl-dev liburiparser-dev libcap-ng-dev
 libproxy-dev libkrb5-dev libcmocka-dev"
RUNTIME="libproxy1-plugin-webkit gss-ntlmssp iproute2 ca-certificates git publicsuffix"
TEST="curl python3 nodejs squid apache2-utils dante-server krb5-kdc krb5-admin-server krb5-user openssl procps psmisc chromium"

want=""
for p in $BUILD $RUNTIME $TEST; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
		want="$want $p"
	fi
done
[ -z "$want" ] && exit 0

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
