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

# Every package runs under the race detector except those whose code starts no goroutines of
# its own (generator, protocol types, file operations, benchmark tables) and the sandbox, whose
# tests start hundreds of sandboxed processes: -race took them from seconds to 175 s on a loaded
# 2-core machine. ./server/ and ./e2e/ are not in the race set yet: under -race a few of their
# tests still miss time budgets (TestAgentCancelDuringExec, TestFsAndFilesSearchBounds, B46;
# issue 7) and the pair takes over 15 min on a loaded machine; their races found so far are fixed.
no_race='/zidane/(gen|protocol|scripts/benchtable|e2e/bench|server/workspace|server/workspace/sandbox|server/workspace/workspacetest|server/store/storetest|client/clienttest|server|e2e)$'
mapfile -t race_pkgs < <(go list ./... | grep -v -E "$no_race")
mapfile -t other_pkgs < <(go list ./... | grep -E "$no_race")
echo "== go test -race (${#race_pkgs[@]} packages with goroutines)"
go test -race -count=1 -timeout 15m "${race_pkgs[@]}"
echo "== go test (${#other_pkgs[@]} other packages)"
go test -count=1 -timeout 15m "${other_pkgs[@]}"

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
