// Command benchtable reads `go test -bench Fig -count N` output on standard input and prints the
// figures of the issue "Close to the wire" as one Markdown table: for each figure the candidate's
// and the baseline's medians, the median ratio over the repetitions (repetition i of the candidate
// against repetition i of its baseline, run back to back), the min–max ratio, the target and
// pass/fail. It exits 0 whatever the verdicts; a figure whose benchmarks are missing says so.
package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// figure compares metric of cand against baseMetric of base.
type figure struct {
	name       string
	cand, base string // benchmark names without "Benchmark" and the -GOMAXPROCS suffix
	metric     string // the candidate's unit, e.g. "ns/op", "p99-ns", "deliveries/s"
	baseMetric string // the baseline's unit (default metric)
	invert     bool   // ratio = base/cand (a time per op turned into a throughput ratio)
	perOp      int    // with invert: the operations one op counts (1 round trip, 1000 rows), shown per second
	absolute   bool   // no baseline: the figure is the candidate's value itself
	op         string // "<=" or ">="
	target     float64
	unit       string // how the candidate and baseline values are shown
}

var figures = []figure{
	{name: "`$/ping` round trips/s, 1 connection", cand: "FigRoundTrip/ping-1conn/server", base: "FigRoundTrip/ping-1conn/echo-baseline", metric: "ns/op", invert: true, op: ">=", target: 0.7, perOp: 1, unit: "/s"},
	{name: "`$/ping` p99, 1 connection", cand: "FigRoundTrip/ping-1conn/server", base: "FigRoundTrip/ping-1conn/echo-baseline", metric: "p99-ns", op: "<=", target: 2, unit: "µs"},
	{name: "`$/ping` round trips/s, 8 connections", cand: "FigRoundTrip/ping-8conn/server", base: "FigRoundTrip/ping-8conn/echo-baseline", metric: "ns/op", invert: true, op: ">=", target: 0.8, perOp: 1, unit: "/s"},
	{name: "`$/ping` p99, 8 connections", cand: "FigRoundTrip/ping-8conn/server", base: "FigRoundTrip/ping-8conn/echo-baseline", metric: "p99-ns", op: "<=", target: 2, unit: "µs"},
	{name: "`daemon.info` round trips/s, 1 connection", cand: "FigRoundTrip/method-1conn/server", base: "FigRoundTrip/method-1conn/echo-baseline", metric: "ns/op", invert: true, op: ">=", target: 0.7, perOp: 1, unit: "/s"},
	{name: "`daemon.info` p99, 1 connection", cand: "FigRoundTrip/method-1conn/server", base: "FigRoundTrip/method-1conn/echo-baseline", metric: "p99-ns", op: "<=", target: 2, unit: "µs"},
	{name: "`daemon.info` round trips/s, 8 connections", cand: "FigRoundTrip/method-8conn/server", base: "FigRoundTrip/method-8conn/echo-baseline", metric: "ns/op", invert: true, op: ">=", target: 0.8, perOp: 1, unit: "/s"},
	{name: "`daemon.info` p99, 8 connections", cand: "FigRoundTrip/method-8conn/server", base: "FigRoundTrip/method-8conn/echo-baseline", metric: "p99-ns", op: "<=", target: 2, unit: "µs"},
	{name: "signals delivered/s, 1 session → 100 watchers", cand: "FigFanout/100watchers/server", base: "FigFanout/100watchers/broadcast-baseline", metric: "deliveries/s", op: ">=", target: 0.8, unit: "/s"},
	{name: "server CPU per delivered signal, 100 watchers", cand: "FigFanout/100watchers/server", base: "FigFanout/100watchers/broadcast-baseline", metric: "cpu-ns/delivery", op: "<=", target: 1.3, unit: "µs"},
	{name: "CPU per delivered signal, 100 watchers ÷ 1 watcher", cand: "FigFanout/100watchers/server", base: "FigFanout/1watchers/server", metric: "cpu-ns/delivery", op: "<=", target: 1.2, unit: "µs"},
	{name: "`chat.send` → `run:start`, p50", cand: "FigSend/send/server", base: "FigSend/send/echo-baseline", metric: "start-p50-ns", baseMetric: "p50-ns", op: "<=", target: 3, unit: "µs"},
	{name: "`chat.send` → first streamed piece, p50", cand: "FigSend/send/server", base: "FigSend/send/echo-baseline", metric: "first-p50-ns", baseMetric: "p50-ns", op: "<=", target: 5, unit: "µs"},
	{name: "SSE: prompt → first streamed piece ÷ the same over the WebSocket, p50", cand: "FigSSE/first/sse", base: "FigSSE/first/ws", metric: "first-p50-ns", op: "<=", target: 1.5, unit: "µs"},
	{name: "SSE: signals delivered/s to 100 SSE watchers ÷ 100 WebSocket watchers", cand: "FigSSE/100watchers/sse", base: "FigSSE/100watchers/ws", metric: "deliveries/s", op: ">=", target: 0.8, unit: "/s"},
	{name: "`sessions.resume` of 2000 signals, connect included", cand: "FigResume/2000signals/server", base: "FigResume/2000signals/raw-baseline", metric: "ns/op", op: "<=", target: 3, unit: "µs"},
	{name: "slow consumer: deliveries/s of the other 99", cand: "FigSlowConsumer/99of100/server-one-slow", base: "FigSlowConsumer/99of100/all-reading-baseline", metric: "deliveries/s", op: ">=", target: 0.95, unit: "/s"},
	{name: "transcript rows/s through the append path", cand: "FigPersist/1000rows/server", base: "FigPersist/1000rows/copyfrom-baseline", metric: "ns/op", invert: true, op: ">=", target: 0.5, perOp: 1000, unit: "/s"},
	{name: "fan-out with persistence on ÷ off", cand: "FigFanoutPersist/100watchers/server", base: "FigFanoutPersist/100watchers/no-persist-baseline", metric: "deliveries/s", op: ">=", target: 0.9, unit: "/s"},
	{name: "`search.sessions` over 10,000 sessions / 1,000,000 events, p50", cand: "FigSearch/10000sessions/server", metric: "p50-ms", absolute: true, op: "<=", target: 50},
	{name: "`search.sessions` over 10,000 sessions / 1,000,000 events, p99", cand: "FigSearch/10000sessions/server", metric: "p99-ms", absolute: true, op: "<=", target: 200},
	{name: "`search.sessions` p50 ÷ the bare index lookup of its word", cand: "FigSearch/10000sessions/server", base: "FigSearch/10000sessions/index-baseline", metric: "p50-ns", op: "<=", target: 20, unit: "µs"},
	{name: "`@` completion over 100,000 files, warm index, p50", cand: "FigComplete/100000files/warm", metric: "p50-ms", absolute: true, op: "<=", target: 30},
	{name: "`@` completion over 100,000 files, first query after a start, p50", cand: "FigComplete/100000files/first-query", metric: "p50-ms", absolute: true, op: "<=", target: 300},
	{name: "`@` first query ÷ a bare walk of the tree", cand: "FigComplete/100000files/first-query", base: "FigComplete/100000files/walk-baseline", metric: "p50-ns", op: "<=", target: 3, unit: "µs"},
	{name: "200-turn page of a 10,000-turn session", cand: "FigPaging/200of10000turns/server", base: "FigPaging/200of10000turns/pgx-baseline", metric: "ns/op", op: "<=", target: 2, unit: "µs"},
	{name: "fan-out, 100 watchers over 3 replicas on NATS ÷ 100 on one in-process server", cand: "FigReplicas/fanout-100watchers/3replicas-nats", base: "FigReplicas/fanout-100watchers/1server-inprocess-baseline", metric: "deliveries/s", op: ">=", target: 0.5, unit: "/s"},
	{name: "`chat.send` → `run:start` on another replica (NATS) ÷ in-process, p50", cand: "FigReplicas/latency/3replicas-nats", base: "FigReplicas/latency/3replicas-nats", metric: "nats-p50-ns", baseMetric: "inprocess-p50-ns", op: "<=", target: 2, unit: "µs"},
	{name: "latency a signal adds through JetStream, p50 (ns)", cand: "FigReplicas/latency/3replicas-nats", metric: "added-p50-ns", absolute: true, op: "<=", target: 1e6},
	{name: "latency a signal adds through JetStream, p99 (ns)", cand: "FigReplicas/latency/3replicas-nats", metric: "added-p99-ns", absolute: true, op: "<=", target: 5e6},
	{name: "MCP tool call through the agent (safelisted: mode, safelist, audit entry) ÷ direct Go SDK call", cand: "FigMCPCall/echo/agent", base: "FigMCPCall/echo/sdk-baseline", metric: "ns/op", op: "<=", target: 10, unit: "µs"},
	{name: "RSS per idle handshaken connection (5000)", cand: "FigIdle/5000conns/server", base: "FigIdle/5000conns/raw-baseline", metric: "KiB/conn", op: "<=", target: 1.3, unit: "KiB"},
	{name: "goroutines per idle connection", cand: "FigIdle/5000conns/server", metric: "goroutines/conn", absolute: true, op: "<=", target: 2},
	{name: "goroutines left after 10,000 connections", cand: "FigIdle/churn10000/server", metric: "leaked-goroutines", absolute: true, op: "<=", target: 0},
	{name: "file descriptors left after 10,000 connections", cand: "FigIdle/churn10000/server", metric: "leaked-fds", absolute: true, op: "<=", target: 0},
}

var suffix = regexp.MustCompile(`-\d+$`)

func main() {
	out, err := table(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchtable:", err)
		os.Exit(1)
	}
	fmt.Print(out)
}

// table reads benchmark output and returns the Markdown table with its closing line. Errors: the
// input could not be read, or holds no benchmark line. A value that is not a finite number is
// left out, as if not measured; a ratio figure's value at or below zero is refused as invalid.
func table(in io.Reader) (string, error) {
	// runs[name] is one map of metric → value per repetition, in output order.
	runs := map[string][]map[string]float64{}
	br := bufio.NewReader(in) // no line length limit: a long log line must not end the input
	lines := 0
	for {
		line, rerr := br.ReadString('\n')
		if f := strings.Fields(line); len(f) >= 4 && strings.HasPrefix(f[0], "Benchmark") {
			lines++
			name := suffix.ReplaceAllString(strings.TrimPrefix(f[0], "Benchmark"), "")
			m := map[string]float64{}
			for i := 2; i+1 < len(f); i += 2 {
				if v, err := strconv.ParseFloat(f[i], 64); err == nil && !math.IsNaN(v) && !math.IsInf(v, 0) {
					m[f[i+1]] = v
				}
			}
			runs[name] = append(runs[name], m)
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return "", fmt.Errorf("reading the benchmark output: %w", rerr)
		}
	}
	if lines == 0 {
		return "", errors.New("no benchmark result lines in the input: pipe `go test -run '^$' -bench Fig… ` output into it (docs/benchmarks.md)")
	}
	var b strings.Builder
	b.WriteString("| figure | candidate (median) | baseline (median) | ratio (median) | ratio (min–max) | target | verdict |\n")
	b.WriteString("|---|---|---|---|---|---|---|\n")
	failed, measured := 0, 0
	for _, fg := range figures {
		c := values(runs[fg.cand], fg.metric)
		if fg.absolute {
			if len(c) == 0 {
				fmt.Fprintf(&b, "| %s | not measured | | | | %s %g | — |\n", fg.name, fg.op, fg.target)
				continue
			}
			measured++
			med := median(c)
			ok := pass(med, fg.op, fg.target)
			if !ok {
				failed++
			}
			fmt.Fprintf(&b, "| %s | %.3g | (absolute) | %.3g | %.3g–%.3g | %s %g | %s |\n", fg.name, med, med, minOf(c), maxOf(c), fg.op, fg.target, verdict(ok))
			continue
		}
		bm := fg.baseMetric
		if bm == "" {
			bm = fg.metric
		}
		bv := values(runs[fg.base], bm)
		n := min(len(c), len(bv))
		if n == 0 {
			fmt.Fprintf(&b, "| %s | %s | %s | | | %s %g× | — |\n", fg.name, measuredOrNot(len(c)), measuredOrNot(len(bv)), fg.op, fg.target)
			continue
		}
		measured++
		if minOf(c[:n]) <= 0 || minOf(bv[:n]) <= 0 {
			failed++
			fmt.Fprintf(&b, "| %s | invalid: a value at or below zero | | | | %s %g× | **fail** |\n", fg.name, fg.op, fg.target)
			continue
		}
		var ratios []float64
		for i := 0; i < n; i++ {
			r := c[i] / bv[i]
			if fg.invert {
				r = bv[i] / c[i]
			}
			ratios = append(ratios, r)
		}
		med := median(ratios)
		ok := pass(med, fg.op, fg.target)
		if !ok {
			failed++
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %.2f× | %.2f–%.2f× | %s %g× | %s |\n", fg.name, show(median(c[:n]), fg), show(median(bv[:n]), fg), med, minOf(ratios), maxOf(ratios), fg.op, fg.target, verdict(ok))
	}
	if measured == len(figures) {
		fmt.Fprintf(&b, "\n%d of %d figures miss their target.\n", failed, len(figures))
	} else {
		fmt.Fprintf(&b, "\n%d of the %d figures measured miss their target (%d of %d not measured in this output).\n", failed, measured, len(figures)-measured, len(figures))
	}
	return b.String(), nil
}

// measuredOrNot says whether a side of a figure has values: a figure missing one side says which.
func measuredOrNot(n int) string {
	if n == 0 {
		return "not measured"
	}
	return fmt.Sprintf("%d runs, no pair", n)
}

func values(rs []map[string]float64, metric string) []float64 {
	var out []float64
	for _, r := range rs {
		if v, ok := r[metric]; ok {
			out = append(out, v)
		}
	}
	return out
}

// show formats a median: a time per op of a throughput figure as operations per second, times
// in µs, rates and sizes as they are.
func show(v float64, fg figure) string {
	switch {
	case fg.perOp > 0:
		return fmt.Sprintf("%.0f/s", float64(fg.perOp)*1e9/v)
	case strings.HasPrefix(fg.unit, "µs"):
		return fmt.Sprintf("%.1f %s", v/1000, fg.unit)
	case fg.unit == "/s":
		return fmt.Sprintf("%.0f/s", v)
	default:
		return fmt.Sprintf("%.3g %s", v, fg.unit)
	}
}

func pass(v float64, op string, target float64) bool {
	if op == ">=" {
		return v >= target
	}
	return v <= target
}

func verdict(ok bool) string {
	if ok {
		return "pass"
	}
	return "**fail**"
}

func median(v []float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func minOf(v []float64) float64 {
	m := v[0]
	for _, x := range v {
		m = min(m, x)
	}
	return m
}

func maxOf(v []float64) float64 {
	m := v[0]
	for _, x := range v {
		m = max(m, x)
	}
	return m
}
