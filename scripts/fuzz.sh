#!/usr/bin/env bash
# Runs every fuzz target for the given time each (default 30s).
set -euo pipefail
cd "$(dirname "$0")/.."
t="${1:-30s}"
for pkg in $(go list ./...); do
  for f in $(go test -list '^Fuzz' "$pkg" 2>/dev/null | grep '^Fuzz' || true); do
    echo "== $pkg $f ($t)"
    go test "$pkg" -run '^$' -fuzz "^$f\$" -fuzztime "$t"
  done
done
