#!/usr/bin/env bash
# The one test command (`make test`): drift check, vet, every Go test against a real Postgres
# (DATABASE_URL when set, else a managed local Postgres), and the TypeScript checks.
# Each set prints its result as it ends; a failing set does not stop the others (the TypeScript
# checks run after a Go failure too), and the command fails at the end naming every failed set.
set -uo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh --all || exit 1

logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
failed=()
start=$SECONDS

# finish NAME RC LOG: print one set's verdict, and its failing output in full.
finish() {
  local name=$1 rc=$2 log=$3
  if [ "$rc" = 0 ]; then
    printf '== %s: ok (%ds since start)\n' "$name" $((SECONDS - start))
    grep -E '^(ok|FAIL|---|panic)' "$log" | grep -v '^--- PASS' || true
  else
    printf '== %s: FAILED (%ds since start)\n' "$name" $((SECONDS - start))
    cat "$log"
    failed+=("$name")
  fi
}

# step NAME CMD...: run a set in the foreground and report it.
step() {
  local name=$1; shift
  echo "== $name"
  "$@" >"$logs/step" 2>&1
  finish "$name" $? "$logs/step"
}

step "generated files match schema/" go run ./gen -check
step "go vet" go vet ./...

# Every package runs under the race detector except those whose code starts no goroutines of
# its own (generator, protocol types, file operations, benchmark tables), the sandbox, whose
# tests start hundreds of sandboxed processes (-race took them from seconds to 175 s on a loaded
# 2-core machine), and ./e2e/, whose tests drive the real (non-race) binary: only their harness
# would be checked, at over 15 min. The sets run side by side: the race set mostly waits
# (./server/ under -race: about 10 min wall for 4 min of CPU), so the CPU-bound other set fits
# beside it. ./server/ under -race is compiled once and its test binary runs in three processes,
# its tests dealt round-robin by name (every test, example and fuzz seed in exactly one shard).
no_race='/zidane/(gen|protocol|scripts/benchtable|e2e/bench|server/workspace|server/workspace/sandbox|server/workspace/workspacetest|server/store/storetest|client/clienttest|e2e)$'
server_pkg=github.com/zidane-server/zidane/server
mapfile -t race_pkgs < <(go list ./... | grep -v -E "$no_race" | grep -v -x "$server_pkg")
mapfile -t other_pkgs < <(go list ./... | grep -E "$no_race")
echo "== go test -race (${#race_pkgs[@]} packages with goroutines, ./server/ in 3 shards) and go test (${#other_pkgs[@]} others), side by side"
declare -A sets=(
  [race]="go test -race -count=1 -timeout 18m ${race_pkgs[*]}"
  [other]="go test -count=1 -timeout 15m ${other_pkgs[*]}"
)
declare -A pid_of=()
for name in "${!sets[@]}"; do
  # shellcheck disable=SC2086 # the set's words are its command line
  ${sets[$name]} >"$logs/$name" 2>&1 &
  pid_of[$!]=$name
done
# ./server/ compiled once under -race, beside the two sets; then its shards.
if go test -race -c -o "$logs/server.test" ./server/ >"$logs/server-build" 2>&1; then
  mapfile -t names < <(cd server && "$logs/server.test" -test.list '.*' | grep -E '^(Test|Example|Fuzz)')
  for shard in 1 2 3; do
    re=""
    for ((i = shard - 1; i < ${#names[@]}; i += 3)); do re+="${re:+|}${names[$i]}"; done
    (cd server && "$logs/server.test" -test.run "^(${re})\$" -test.timeout 18m &&
      printf 'ok  \t%s (shard %d of 3, %d tests)\n' "$server_pkg" "$shard" $(((${#names[@]} - shard) / 3 + 1))) >"$logs/race-server-$shard" 2>&1 &
    pid_of[$!]=race-server-$shard
  done
else
  finish "go test -race -c ./server/" 1 "$logs/server-build"
fi
# The sets after the Go tests (benchmark smoke, the TypeScript and browser checks, fuzzing, the
# generate-clean check) run one after another in the background as soon as the race and other
# sets have ended: the ./server/ shards left then mostly wait, so these fit beside them (about
# four minutes off the wall time). Each writes its log and its "n|name|rc" line; they are reported
# when the chain ends.
later_n=0
run_later() {
  local name=$1
  shift
  later_n=$((later_n + 1))
  "$@" >"$logs/later-$later_n" 2>&1
  echo "$later_n|$name|$?" >>"$logs/later.results"
}
later_sets() {
  run_later "benchmarks, one iteration each (make bench runs them in full)" \
    env BENCH_SMOKE=1 go test -count=1 -run '^$' -bench '^BenchmarkFig' -benchtime 1x -timeout 10m ./e2e/bench/ ./server/store/ ./server/
  if [ -f sdk-ts/package.json ]; then
    # Its integration tests start bin/zidane-server; its conformance test runs bin/zidane-conformance.
    run_later "build bin/ for the sdk-ts tests" go build -o bin/ ./cmd/zidane-server ./cmd/zidane ./cmd/zidane-conformance
    run_later "sdk-ts" bash -c 'cd sdk-ts && npm test --silent'
    # The web app in Chromium against the real binary, which embeds the app: build the app, then bin/.
    run_later "web app in Chromium" bash -c 'cd sdk-ts && npm run build:app --silent && cd .. && go build -o bin/ ./cmd/zidane-server ./cmd/zidane && cd sdk-ts && npm run test:browser --silent'
  fi
  if [ "${CI:-}" = "true" ]; then
    run_later "fuzz targets, 10s each" scripts/fuzz.sh 10s
    run_later "make generate leaves the tree clean" bash -c \
      'go run ./gen >/dev/null && s=$(git status --porcelain) && { [ -z "$s" ] || { echo "$s"; echo "generated files changed: run make generate and commit" >&2; exit 1; }; }'
  fi
}
report_later() {
  local n name rc
  while IFS='|' read -r n name rc; do
    finish "$name" "$rc" "$logs/later-$n"
  done <"$logs/later.results"
}

# Report each set as it ends, in the order they end.
ended=()
while [ ${#pid_of[@]} -gt 0 ]; do
  wait -n -p done_pid "${!pid_of[@]}"
  rc=$?
  name=${pid_of[$done_pid]}
  unset "pid_of[$done_pid]"
  if [ "$name" = later ]; then
    report_later
    continue
  fi
  finish "go test $name" "$rc" "$logs/$name"
  ended+=("$name")
  if [[ " ${ended[*]} " == *" race "* && " ${ended[*]} " == *" other "* && -z "${later_started:-}" ]]; then
    later_started=1
    echo "== the later sets (benchmark smoke, sdk-ts, web app in Chromium${CI:+, fuzz, generate-clean}), beside the ./server/ shards"
    : >"$logs/later.results"
    later_sets &
    pid_of[$!]=later
  fi
done

if [ ${#failed[@]} -gt 0 ]; then
  printf 'make test: %d set(s) failed: %s\n' "${#failed[@]}" "$(IFS=,; echo "${failed[*]}")" >&2
  exit 1
fi
printf 'make test: every set passed in %ds\n' $((SECONDS - start))
