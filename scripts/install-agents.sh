#!/bin/sh
# install-agents.sh - install the agent CLIs the acceptance tests run (docs/agents.md) into a
# cache outside the repository, from the npm registry, with Debian's node/npm.
#
#   scripts/install-agents.sh [CACHE]        default CACHE: /var/cache/egress-agents
#
# Pinned versions (override with CODEX_VERSION / CLAUDE_VERSION). Both packages ship their
# native program as an optional npm dependency for this platform (codex: a static musl
# binary; claude: a self-contained executable that the package's postinstall links to
# bin/claude.exe), so npm installs them without other downloads and Node's version does
# not matter at run time (claude-code declares node >= 22; npm only warns).
#
# Writes CACHE/agents.env with CODEX_BIN=... and CLAUDE_BIN=... (absolute paths) and prints
# it. Idempotent: a version already installed is kept. Serialized with flock, so parallel
# tests do not install twice. Exit 0 on success, 1 with the reason otherwise.
set -eu

CACHE=${1:-/var/cache/egress-agents}
CODEX_VERSION=${CODEX_VERSION:-0.171.0}
CLAUDE_VERSION=${CLAUDE_VERSION:-2.1.332}

die() { echo "install-agents: $*" >&2; exit 1; }

command -v npm >/dev/null 2>&1 || die "npm not found (apt-get install npm nodejs)"
case $CACHE in
/*) ;;
*) die "CACHE must be an absolute path" ;;
esac

case $(uname -m) in
x86_64) CODEX_TRIPLE=x86_64-unknown-linux-musl; ARCH=x64 ;;
aarch64) CODEX_TRIPLE=aarch64-unknown-linux-musl; ARCH=arm64 ;;
*) die "unsupported machine $(uname -m)" ;;
esac

mkdir -p "$CACHE"
chmod 0755 "$CACHE"
exec 9>"$CACHE/.lock"
flock -w 600 9 || die "timed out waiting for another install"

# install NAME PACKAGE VERSION: npm install into CACHE/NAME unless that version is there.
install_one() {
	dir=$CACHE/$1
	have=$(node -p "try{require('$dir/node_modules/$2/package.json').version}catch(e){''}" \
	    2>/dev/null || true)
	if [ "$have" = "$3" ]; then
		return 0
	fi
	rm -rf "$dir"
	mkdir -p "$dir"
	echo "install-agents: npm install $2@$3 into $dir" >&2
	# --prefix keeps everything under dir; scripts stay on: claude's postinstall links
	# its native binary into place (it copies from the optional dependency, no download).
	if ! (cd "$dir" && npm install --prefix "$dir" --no-audit --no-fund --no-save \
	    --loglevel=error "$2@$3" >"$dir/install.log" 2>&1); then
		tail -n 20 "$dir/install.log" >&2
		die "npm install $2@$3 failed (see $dir/install.log)"
	fi
}

install_one codex @openai/codex "$CODEX_VERSION"
install_one claude @anthropic-ai/claude-code "$CLAUDE_VERSION"

CODEX_BIN=$CACHE/codex/node_modules/@openai/codex-linux-$ARCH/vendor/$CODEX_TRIPLE/bin/codex
CLAUDE_BIN=$CACHE/claude/node_modules/@anthropic-ai/claude-code/bin/claude.exe
[ -x "$CODEX_BIN" ] || die "codex binary missing at $CODEX_BIN (optional dependency not installed?)"
[ -x "$CLAUDE_BIN" ] || die "claude binary missing at $CLAUDE_BIN (postinstall did not run?)"
# Everything readable and traversable by the sandbox's unprivileged worker.
chmod -R a+rX "$CACHE/codex" "$CACHE/claude"

tmp=$CACHE/agents.env.$$
{
	echo "CODEX_VERSION=$CODEX_VERSION"
	echo "CODEX_BIN=$CODEX_BIN"
	echo "CLAUDE_VERSION=$CLAUDE_VERSION"
	echo "CLAUDE_BIN=$CLAUDE_BIN"
} >"$tmp"
mv "$tmp" "$CACHE/agents.env"
cat "$CACHE/agents.env"
