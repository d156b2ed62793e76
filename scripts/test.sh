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
# its own (generator, protocol types, file operations, benchmark tables), the sandbox, whose
# tests start hundreds of sandboxed processes (-race took them from seconds to 175 s on a loaded
# 2-core machine), and ./e2e/, whose tests drive the real (non-race) binary: only their harness
# would be checked, at over 15 min. The sets run side by side: the race set mostly waits
# (./server/ under -race: about 10 min wall for 4 min of CPU), so the CPU-bound other set fits
# beside it.
no_race='/zidane/(gen|protocol|scripts/benchtable|e2e/bench|server/workspace|server/workspace/sandbox|server/workspace/workspacetest|server/store/storetest|client/clienttest|e2e)$'
server_pkg=github.com/zidane-server/zidane/server
mapfile -t race_pkgs < <(go list ./... | grep -v -E "$no_race" | grep -v -x "$server_pkg")
mapfile -t other_pkgs < <(go list ./... | grep -E "$no_race")
logs=$(mktemp -d)
echo "== go test -race (${#race_pkgs[@]} packages with goroutines, ./server/ in 3 shards) and go test (${#other_pkgs[@]} others), side by side"
# ./server/ under -race is the longest package (about 10 min wall, mostly waiting on sockets and
# Postgres): its tests run in three processes by the letter after "Test"; the last shard takes
# every test, example and fuzz seed the first two do not.
pids=()
go test -race -count=1 -timeout 18m "${race_pkgs[@]}" >"$logs/race" 2>&1 & pids+=($!)
go test -race -count=1 -timeout 18m -run '^Test[A-F]' ./server/ >"$logs/race-server-1" 2>&1 & pids+=($!)
go test -race -count=1 -timeout 18m -run '^Test[G-Q]' ./server/ >"$logs/race-server-2" 2>&1 & pids+=($!)
go test -race -count=1 -timeout 18m -skip '^Test[A-Q]' ./server/ >"$logs/race-server-3" 2>&1 & pids+=($!)
rc=0
go test -count=1 -timeout 15m "${other_pkgs[@]}" >"$logs/other" 2>&1 || rc=1
for pid in "${pids[@]}"; do wait "$pid" || rc=1; done
for f in race race-server-1 race-server-2 race-server-3 other; do echo "-- $f"; cat "$logs/$f"; done
rm -rf "$logs"
[ "$rc" = 0 ] || { echo "go test failed" >&2; exit 1; }

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
