package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTable: a time per op becomes a throughput (the ratio and the values shown per second),
// repetition i of a candidate is compared with repetition i of its baseline, and a partial run
// counts only the figures it measured.
func TestTable(t *testing.T) {
	out, err := table(strings.NewReader(`goos: linux
BenchmarkFigRoundTrip/ping-1conn/server-2          10  50000 ns/op  40000 p50-ns  100000 p99-ns
BenchmarkFigRoundTrip/ping-1conn/server-2          10  60000 ns/op  40000 p50-ns  300000 p99-ns
BenchmarkFigRoundTrip/ping-1conn/echo-baseline-2   10  40000 ns/op  30000 p50-ns  100000 p99-ns
BenchmarkFigRoundTrip/ping-1conn/echo-baseline-2   10  30000 ns/op  30000 p50-ns  100000 p99-ns
BenchmarkFigPersist/1000rows/server-2              10  20000000 ns/op
BenchmarkFigPersist/1000rows/copyfrom-baseline-2   10  10000000 ns/op
`))
	require.NoError(t, err)
	lines := strings.Split(out, "\n")
	row := func(name string) string {
		for _, l := range lines {
			if strings.HasPrefix(l, "| "+name+" |") {
				return l
			}
		}
		require.Failf(t, "no row", "%s in\n%s", name, out)
		return ""
	}
	// 40/50 = 0.8 and 30/60 = 0.5: median 0.65, under the 0.7 target; 55 µs a round trip is 18182/s.
	assert.Equal(t, "| `$/ping` round trips/s, 1 connection | 18182/s | 28571/s | 0.65× | 0.50–0.80× | >= 0.7× | **fail** |", row("`$/ping` round trips/s, 1 connection"))
	assert.Equal(t, "| `$/ping` p99, 1 connection | 200.0 µs | 100.0 µs | 2.00× | 1.00–3.00× | <= 2× | pass |", row("`$/ping` p99, 1 connection"))
	assert.Equal(t, "| transcript rows/s through the append path | 50000/s | 100000/s | 0.50× | 0.50–0.50× | >= 0.5× | pass |", row("transcript rows/s through the append path"))
	assert.Equal(t, "| `chat.send` → `run:start`, p50 | not measured | not measured | | | <= 3× | — |", row("`chat.send` → `run:start`, p50"))
	assert.Contains(t, out, "\n1 of the 3 figures measured miss their target (32 of 35 not measured in this output).\n")
}

// TestTableBadInput: no benchmark line is an error; a value of zero, a NaN, a baseline missing and
// a log line over a megabyte say so in the table instead of a silent verdict.
func TestTableBadInput(t *testing.T) {
	_, err := table(strings.NewReader(""))
	require.ErrorContains(t, err, "no benchmark result lines")
	_, err = table(strings.NewReader("garbage\nBenchmarkX\n"))
	require.ErrorContains(t, err, "no benchmark result lines")

	out, err := table(strings.NewReader(strings.Repeat("x", 1<<21) + `
BenchmarkFigRoundTrip/ping-1conn/server-2          10  0 ns/op  40000 p50-ns  NaN p99-ns
BenchmarkFigRoundTrip/ping-1conn/echo-baseline-2   10  40000 ns/op  30000 p50-ns  100000 p99-ns
BenchmarkFigPersist/1000rows/server-2              10  20000000 ns/op
`))
	require.NoError(t, err)
	assert.Contains(t, out, "| `$/ping` round trips/s, 1 connection | invalid: a value at or below zero | | | | >= 0.7× | **fail** |")
	assert.Contains(t, out, "| `$/ping` p99, 1 connection | not measured | 1 runs, no pair | | | <= 2× | — |", "NaN is no value")
	assert.Contains(t, out, "| transcript rows/s through the append path | 1 runs, no pair | not measured | | | >= 0.5× | — |")
	assert.Contains(t, out, "\n1 of the 1 figures measured miss their target")
}
