#!/usr/bin/env bash
# Installs what `make run` and `make test` need and are missing: PostgreSQL server binaries
# (for the managed local Postgres), the TypeScript toolchain of sdk-ts and the npm programs of e2e/*/
# (npm ci, from their lock files: the reference MCP server of e2e/mcp, the authorization server of
# e2e/oauth), and Chromium for the web app's browser tests (Debian's chromium, driven by playwright-core).
# Usage: scripts/bootstrap.sh --server | --app | --ts | --browser | --all
#   --app: only sdk-ts's node_modules, what building the web app needs (make build / make run);
#   --ts:  those and the npm programs of e2e/*/ the Go tests run (make test).
set -euo pipefail
cd "$(dirname "$0")/.."
want_server=0 want_sdk=0 want_e2e=0 want_browser=0
case "${1:---all}" in
  --server) want_server=1 ;;
  --app) want_sdk=1 ;;
  --ts) want_sdk=1 want_e2e=1 ;;
  --browser) want_browser=1 ;;
  --all) want_server=1 want_sdk=1 want_e2e=1 want_browser=1 ;;
  *) echo "bootstrap: unknown mode $1; use --server, --app, --ts, --browser or --all" >&2; exit 2 ;;
esac

# apt_install PACKAGE WHAT: installs a Debian package as root, else says how to get it.
apt_install() {
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "bootstrap: installing $2 (apt-get install $1)" >&2
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$1" >/dev/null
  else
    echo "bootstrap: $2 not found; install it (Debian/Ubuntu: sudo apt-get install $1)${3:+ or $3}" >&2
  fi
}

have_pg() {
  command -v initdb >/dev/null 2>&1 && command -v postgres >/dev/null 2>&1 && return 0
  ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1
}

if [ "$want_server" = 1 ] && ! have_pg; then
  apt_install postgresql "PostgreSQL server binaries" "set DATABASE_URL"
fi

if [ "$want_sdk" = 1 ] || [ "$want_e2e" = 1 ]; then
  if ! command -v npm >/dev/null; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
      apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null
    else
      echo "bootstrap: npm not found; install Node.js 20 and npm" >&2
      exit 1
    fi
  fi
fi

if [ "$want_sdk" = 1 ]; then
  if [ -f sdk-ts/package-lock.json ] && { [ ! -d sdk-ts/node_modules ] || [ sdk-ts/package-lock.json -nt sdk-ts/node_modules/.package-lock.json ]; }; then
    (cd sdk-ts && npm ci --no-audit --no-fund --loglevel=error)
  fi
fi

if [ "$want_e2e" = 1 ]; then
  # The npm programs Go tests run (e2e/<name>/package.json with its lock): the reference MCP server
  # of e2e/mcp (server/agent/mcp), the local authorization server of e2e/oauth (server/oauth), the
  # MCP conformance suite of e2e/conformance (server/agent/mcp TestMCPConformanceClient).
  for lock in e2e/*/package-lock.json; do
    [ -f "$lock" ] || continue
    d=$(dirname "$lock")
    if [ ! -d "$d/node_modules" ] || [ "$lock" -nt "$d/node_modules/.package-lock.json" ]; then
      (cd "$d" && npm ci --no-audit --no-fund --loglevel=error)
    fi
  done
fi

have_chromium() {
  [ -n "${CHROMIUM_BIN:-}" ] && [ -x "$CHROMIUM_BIN" ] && return 0
  command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1
}

if [ "$want_browser" = 1 ] && ! have_chromium; then
  apt_install chromium "Chromium for the browser tests" "set CHROMIUM_BIN"
fi
