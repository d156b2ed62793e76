#!/usr/bin/env bash
# Runs every fuzz target (func FuzzXxx in a _test.go file) for the given time each (default 30s).
set -euo pipefail
cd "$(dirname "$0")/.."
t="${1:-30s}"
grep -rl --include='*_test.go' '^func Fuzz' . | grep -v node_modules | while read -r f; do
  pkg="./$(dirname "${f#./}")"
  for fn in $(grep -o '^func Fuzz[A-Za-z0-9_]*' "$f" | sed 's/^func //'); do
    echo "== fuzz $pkg $fn ($t)"
    go test "$pkg" -run '^$' -fuzz "^$fn\$" -fuzztime "$t"
  done
done
