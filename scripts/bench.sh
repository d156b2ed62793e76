#!/usr/bin/env bash
# `make bench`: the figures of docs/benchmarks.md. Each figure's candidate (the real server over
# loopback, on a real Postgres) and its baseline (a raw coder/websocket server, or plain pgx) run
# back to back in one process, BENCH_COUNT times (default 5); scripts/benchtable prints the
# median ratio, min–max, target and verdict. BENCH_WRITE=1 also writes docs/benchmarks.md.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh --server >/dev/null
if [ -z "${DATABASE_URL:-}" ] && command -v pg_isready >/dev/null && pg_isready -q -h 127.0.0.1 -p 5432; then
  export DATABASE_URL="postgres://root@127.0.0.1:5432/postgres?sslmode=disable"
fi
count=${BENCH_COUNT:-5}
raw=$(mktemp)
trap 'rm -f "$raw"' EXIT
go test -run '^$' -bench '^BenchmarkFig' -count "$count" -timeout 30m ./e2e/bench/ ./server/store/ ./server/ ./server/workspace/fileindex/ | tee "$raw" | grep -E '^(Benchmark|ok|FAIL|---)' >&2
table=$(go run ./scripts/benchtable < "$raw")
echo "$table"
# The web app's budgets in Chromium (issue 24 section 4): the app built and embedded, then measured.
scripts/bootstrap.sh --ts >/dev/null && scripts/bootstrap.sh --browser >/dev/null
(cd sdk-ts && npm run build:app --silent) >&2
go build -o bin/ ./cmd/zidane-server ./cmd/zidane
browser=$(cd sdk-ts && npm run bench:browser --silent)
echo
echo "$browser"
table="$table

$browser"
if [ "${BENCH_WRITE:-}" = "1" ]; then
  # The accounts below the table (from its first "## " heading on) are written by hand: kept.
  accounts=$(sed -n '/^## /,$p' docs/benchmarks.md 2>/dev/null || true)
  {
    echo "# Benchmarks"
    echo
    echo "Written by \`BENCH_WRITE=1 make bench\` (BENCH_COUNT=$count) on $(date -u +%Y-%m-%d), commit $(git rev-parse --short HEAD), $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs))."
    echo "Each ratio is the candidate's figure against its baseline measured back to back in the same run;"
    echo "throughput figures (per second) are candidate ÷ baseline, times and sizes candidate ÷ baseline."
    echo "How each figure is measured: \`e2e/bench/figures_test.go\`, \`server/store/fig_bench_test.go\`, \`server/fig_bench_test.go\`; the browser figures (absolute budgets, one run): \`sdk-ts/test-browser/bench.ts\`."
    echo
    echo "$table"
    if [ -n "$accounts" ]; then
      echo
      echo "$accounts"
    fi
  } > docs/benchmarks.md
  echo "wrote docs/benchmarks.md" >&2
fi
