#!/usr/bin/env bash
# The one test command (`make test`): drift check, vet, every Go test against a real Postgres
# (DATABASE_URL when set, else a managed local Postgres), and the TypeScript checks.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh --all

echo "== generated files match schema/"
go run ./gen -check

echo "== go vet"
go vet ./...

echo "== go test"
go test -count=1 -timeout 15m ./...

echo "== benchmarks, one iteration each (make bench runs them in full)"
BENCH_SMOKE=1 go test -count=1 -run '^$' -bench '^BenchmarkFig' -benchtime 1x -timeout 10m ./e2e/bench/ ./server/store/ ./server/ | grep -E '^(ok|FAIL|---|panic)'

if [ -f sdk-ts/package.json ]; then
  echo "== sdk-ts (its integration tests start bin/zidane-server: make build)"
  go build -o bin/ ./cmd/zidane-server ./cmd/zidane
  (cd sdk-ts && npm test --silent)
fi

if [ "${CI:-}" = "true" ]; then
  echo "== fuzz targets, 10s each"
  scripts/fuzz.sh 10s
  echo "== make generate leaves the tree clean"
  go run ./gen >/dev/null
  if [ -n "$(git status --porcelain)" ]; then
    git status --porcelain
    echo "generated files changed: run make generate and commit" >&2
    exit 1
  fi
fi
