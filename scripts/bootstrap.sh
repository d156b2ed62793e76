#!/usr/bin/env bash
# Installs what `make run` and `make test` need and are missing: PostgreSQL server binaries
# (for the managed local Postgres) and the TypeScript toolchain of sdk-ts (npm ci, from the lock file).
# Usage: scripts/bootstrap.sh --server | --ts | --all
set -euo pipefail
cd "$(dirname "$0")/.."
want_server=0 want_ts=0
case "${1:---all}" in
  --server) want_server=1 ;;
  --ts) want_ts=1 ;;
  --all) want_server=1 want_ts=1 ;;
esac

have_pg() {
  command -v initdb >/dev/null 2>&1 && command -v postgres >/dev/null 2>&1 && return 0
  ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1
}

if [ "$want_server" = 1 ] && ! have_pg; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "bootstrap: installing PostgreSQL server binaries (apt-get install postgresql)" >&2
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
  else
    echo "bootstrap: PostgreSQL binaries not found; install them (Debian/Ubuntu: sudo apt-get install postgresql) or set DATABASE_URL" >&2
  fi
fi

if [ "$want_ts" = 1 ]; then
  if ! command -v npm >/dev/null; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
      apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null
    else
      echo "bootstrap: npm not found; install Node.js 20 and npm" >&2
      exit 1
    fi
  fi
  if [ -f sdk-ts/package-lock.json ] && { [ ! -d sdk-ts/node_modules ] || [ sdk-ts/package-lock.json -nt sdk-ts/node_modules/.package-lock.json ]; }; then
    (cd sdk-ts && npm ci --no-audit --no-fund --loglevel=error)
  fi
fi
