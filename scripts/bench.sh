#!/usr/bin/env bash
# Runs the benchmarks and prints, for each case, the time of every implementation as a ratio of the
# baseline measured in the same run (sub-benchmarks named "<case>/<impl>" and "<case>/<x>-baseline").
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(go test -run '^$' -bench . -benchmem -count "${BENCH_COUNT:-3}" ./protocol/ ./server/ ./server/store/ 2>&1)
echo "$out" | grep -E '^(Benchmark|ok|FAIL|---)' >&2 || true
echo "$out" | awk '
/^Benchmark/ {
  name=$1; sub(/-[0-9]+$/, "", name)
  for (i=1;i<=NF;i++) if ($(i+1)=="ns/op") { ns=$i }
  n=split(name, parts, "/"); impl=parts[n]; group=substr(name, 1, length(name)-length(impl)-1)
  sum[group SUBSEP impl]+=ns; cnt[group SUBSEP impl]++
  if (impl ~ /-baseline$/) base[group]=impl; else if (!((group SUBSEP impl) in seen)) { seen[group SUBSEP impl]=1; impls[group]=impls[group] " " impl }
}
END {
  for (g in base) {
    b=sum[g SUBSEP base[g]]/cnt[g SUBSEP base[g]]
    m=split(impls[g], list, " ")
    for (i=1;i<=m;i++) { if (list[i]=="") continue; v=sum[g SUBSEP list[i]]/cnt[g SUBSEP list[i]]
      printf "%-40s %-22s %6.2fx the time of %s (%.2fx faster)\n", g, list[i], v/b, base[g], b/v }
  }
}' | sort
