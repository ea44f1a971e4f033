#!/usr/bin/env bash
# Idempotent install of the real-VS-Code e2e stack (testing-clients.md §5b), offline-safe:
#   Debian chromium + libkrb5-dev + ripgrep, then code-server 4.100.3 (the newest that accepts Node 20)
#   and playwright-core into client-vscode/e2e/.cs/ (gitignored). Skips every step already done.
# Usage: client-vscode/e2e/install-code-server.sh        (as root for apt; ~75 s cold, ~0.1 s warm)
set -euo pipefail
CS_VERSION=4.100.3
PW_VERSION=1.65.1
HERE="$(cd "$(dirname "$0")" && pwd)"
CS="$HERE/.cs"
t0=$SECONDS
log() { echo "[install-code-server +$((SECONDS - t0))s] $*"; }

# 1. System packages (chromium for playwright, libkrb5-dev for code-server's kerberos module, rg for the seed).
missing=()
for p in chromium libkrb5-dev ripgrep; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if ((${#missing[@]})); then
  log "apt-get install ${missing[*]}"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null 2>&1 \
    || { $SUDO apt-get update -q >/dev/null && $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null; }
else
  log "apt packages present"
fi

# 2. code-server + playwright-core in a scratch npm package.
node_major="$(node -p 'process.versions.node.split(".")[0]')"
[ "$node_major" = 20 ] || { echo "code-server $CS_VERSION needs Node 20 (found $(node --version))" >&2; exit 1; }
installed() { node -p "require('$CS/node_modules/$1/package.json').version" 2>/dev/null || true; }
if [ "$(installed code-server)" = "$CS_VERSION" ] && [ "$(installed playwright-core)" = "$PW_VERSION" ] \
   && [ -x "$CS/node_modules/.bin/code-server" ]; then
  log "code-server $CS_VERSION + playwright-core $PW_VERSION present in $CS"
else
  mkdir -p "$CS/tmp"
  cd "$CS"
  # Its own package.json, so npm does not walk up into client-vscode/ (and `npm init` rejects the name ".cs").
  [ -f package.json ] || echo '{"name":"promptls-e2e-code-server","private":true}' > package.json
  # @vscode/ripgrep's postinstall downloads rg from GitHub: seed its cache with Debian's rg (x86_64 musl name).
  seed="$CS/tmp/vscode-ripgrep-cache-1.15.11/ripgrep-v13.0.0-10-x86_64-unknown-linux-musl.tar.gz"
  mkdir -p "$(dirname "$seed")"
  [ -s "$seed" ] || tar czf "$seed" -C /usr/bin rg
  log "npm install code-server@$CS_VERSION playwright-core@$PW_VERSION (compiles native modules, ~70 s)"
  # unsafe_perm: postinstall refuses root otherwise; nodedir: node-gyp would download headers;
  # yes: node-pty's postinstall runs `npx node-gyp`.
  TMPDIR="$CS/tmp" \
  npm_config_unsafe_perm=true \
  npm_config_nodedir=/usr \
  npm_config_yes=true \
    npm install --no-audit --no-fund --loglevel=error "code-server@$CS_VERSION" "playwright-core@$PW_VERSION"
  [ -x "$CS/node_modules/.bin/code-server" ] || { echo "code-server binary missing after install" >&2; exit 1; }
fi
log "done: $CS/node_modules/.bin/code-server, chromium $(dpkg-query -W -f='${Version}' chromium)"
