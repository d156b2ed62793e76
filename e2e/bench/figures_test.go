package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Every benchmark here starts its processes once per call and runs its candidate ("server") and
// baseline sub-benchmarks back to back against them. Custom metrics (b.ReportMetric) carry what
// scripts/benchtable compares; ns/op is the time of one operation (a round trip, a run, a
// resume, a broadcast).

const pingFrame = `{"jsonrpc":"2.0","id":1,"method":"$/ping","params":{}}`
const infoFrame = `{"jsonrpc":"2.0","id":2,"method":"daemon.info","params":{}}`

// roundTrips runs b.N request/answer round trips spread over the clients, each client sequential,
// and reports the latency percentiles.
func roundTrips(b *testing.B, cs []*client, req []byte) {
	per := b.N/len(cs) + 1
	lat := make([][]time.Duration, len(cs))
	var failed atomic.Value
	var wg sync.WaitGroup
	b.ResetTimer()
	for i, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l := make([]time.Duration, 0, per)
			ctx := b.Context()
			for range per {
				t0 := time.Now()
				if err := c.ws.Write(ctx, 1, req); err != nil {
					failed.Store(err)
					return
				}
				if _, _, err := c.ws.Read(ctx); err != nil {
					failed.Store(err)
					return
				}
				l = append(l, time.Since(t0))
			}
			lat[i] = l
		}()
	}
	wg.Wait()
	b.StopTimer()
	if err := failed.Load(); err != nil {
		b.Fatal(err)
	}
	reportLatency(b, "", slices.Concat(lat...))
}

func reportLatency(b *testing.B, prefix string, all []time.Duration) {
	if len(all) == 0 {
		return
	}
	slices.Sort(all)
	b.ReportMetric(float64(all[len(all)/2].Nanoseconds()), prefix+"p50-ns")
	b.ReportMetric(float64(all[len(all)*99/100].Nanoseconds()), prefix+"p99-ns")
}

// BenchmarkFigRoundTrip: $/ping and a small real method (daemon.info) on 1 and 8 connections,
// against a raw echo of frames of the same size.
func BenchmarkFigRoundTrip(b *testing.B) {
	s := startServer(b)
	raw := startRaw(b)
	for _, n := range []int{1, 8} {
		var sc, rc []*client
		for range n {
			sc = append(sc, s.dial(b))
			rc = append(rc, dialWS(b, "ws://"+raw.addr+"/echo", ""))
		}
		for _, m := range []struct{ name, frame string }{{"ping", pingFrame}, {"method", infoFrame}} {
			b.Run(fmt.Sprintf("%s-%dconn/server", m.name, n), func(b *testing.B) { roundTrips(b, sc, []byte(m.frame)) })
			b.Run(fmt.Sprintf("%s-%dconn/echo-baseline", m.name, n), func(b *testing.B) { roundTrips(b, rc, []byte(m.frame)) })
		}
		closeAll(sc)
		closeAll(rc)
	}
}

// watcher reads every frame of its connection, counting them and each run:end.
type watcher struct {
	c      *client
	frames atomic.Int64
	ends   chan struct{}
	stop   chan struct{}
	err    atomic.Value
	seq    atomic.Int64 // the last $seq seen
	keep   bool         // keep frames (to capture one run for the baseline)
	mu     sync.Mutex
	kept   [][]byte
}

func watch(c *client, endMarker string, keep bool) *watcher {
	w := &watcher{c: c, ends: make(chan struct{}, 1<<16), keep: keep}
	marker := []byte(endMarker)
	go func() {
		for {
			_, f, err := c.ws.Read(context0)
			if err != nil {
				w.err.Store(err)
				close(w.ends)
				return
			}
			w.frames.Add(1)
			if i := bytes.LastIndex(f, []byte(`"$seq":`)); i >= 0 {
				if n, err := strconv.ParseInt(strings.TrimRight(string(f[i+7:]), "}"), 10, 64); err == nil {
					w.seq.Store(n)
				}
			}
			if w.keep {
				w.mu.Lock()
				w.kept = append(w.kept, f)
				w.mu.Unlock()
			}
			if bytes.Contains(f, marker) {
				w.ends <- struct{}{}
			}
		}
	}()
	return w
}

func (w *watcher) waitEnd(b *testing.B) {
	select {
	case _, ok := <-w.ends:
		if !ok {
			b.Fatalf("watcher connection ended: %v", w.err.Load())
		}
	case <-time.After(60 * time.Second):
		b.Fatal("watcher saw no end within 60 s")
	}
}

var context0 = context.Background()

// smoke (BENCH_SMOKE=1, set by `make test`) shrinks the figures' sizes for a one-iteration run
// that only checks each benchmark still works.
var smoke = os.Getenv("BENCH_SMOKE") == "1"

// resumeSignals is the replay the resume figure asks for.
var resumeSignals = func() int64 {
	if smoke {
		return 200
	}
	return 2000
}()

const runEndMarker = `"kind":"run:end"`

// runPrompt sends one prompt on the driver (whose own frames a watcher drains).
func sendPrompt(b *testing.B, drv *client, sid string) {
	drv.id++
	drv.write(b, []byte(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"chat.send","params":{"sessionId":%q,"prompt":"Say hello."}}`, drv.id, sid)))
}

func newSession(b *testing.B, c *client) string {
	var r struct{ ID string }
	if err := json.Unmarshal(c.call(b, "sessions.create", `{}`), &r); err != nil {
		b.Fatal(err)
	}
	return r.ID
}

// BenchmarkFigFanout: one session streaming runs to 1 and 100 watchers, against a raw broadcaster
// writing the same frames (captured from a watcher) to as many raw connections. One op is one run
// (the baseline: one run's frames). Reports deliveries/s and the process's CPU per delivery.
func BenchmarkFigFanout(b *testing.B) {
	s := startServer(b)
	raw := startRaw(b)
	drv := s.dial(b)
	sid := newSession(b, drv)
	drvW := watch(drv, runEndMarker, false)
	for _, n := range []int{1, 100} {
		ws := make([]*watcher, n)
		for i := range ws {
			ws[i] = watch(s.dial(b), runEndMarker, i == 0)
		}
		// One run, captured for the baseline.
		sendPrompt(b, drv, sid)
		drvW.waitEnd(b)
		for _, w := range ws {
			w.waitEnd(b)
		}
		ws[0].mu.Lock()
		frames := ws[0].kept
		ws[0].keep, ws[0].kept = false, nil
		ws[0].mu.Unlock()
		b.Run(fmt.Sprintf("%dwatchers/server", n), func(b *testing.B) {
			if n > 1 {
				defer s.profile(b)() // BENCH_CPUPROFILE=file: the server's CPU profile of this case
			}
			before := deliveries(ws)
			cpu0 := s.cpu(b)
			t0 := time.Now()
			for b.Loop() {
				sendPrompt(b, drv, sid)
				drvW.waitEnd(b)
				for _, w := range ws {
					w.waitEnd(b)
				}
			}
			reportDeliveries(b, deliveries(ws)-before, time.Since(t0), s.cpu(b)-cpu0)
		})
		rws := make([]*watcher, n)
		for i := range rws {
			rws[i] = watch(dialWS(b, "ws://"+raw.addr+"/bcast", ""), runEndMarker, false)
		}
		time.Sleep(50 * time.Millisecond) // the joins are registered
		body, _ := json.Marshal(map[string]any{"frames": rawFrames(frames), "reps": 1})
		b.Run(fmt.Sprintf("%dwatchers/broadcast-baseline", n), func(b *testing.B) {
			before := deliveries(rws)
			cpu0 := raw.cpu(b)
			t0 := time.Now()
			for b.Loop() {
				resp, err := http.Post("http://"+raw.addr+"/bcast/send", "application/json", bytes.NewReader(body))
				if err != nil {
					b.Fatal(err)
				}
				resp.Body.Close()
				for _, w := range rws {
					w.waitEnd(b)
				}
			}
			reportDeliveries(b, deliveries(rws)-before, time.Since(t0), raw.cpu(b)-cpu0)
		})
		for _, w := range append(ws, rws...) {
			w.c.close()
		}
	}
}

// rawFrames turns frames into JSON strings, so that the broadcaster writes them byte for byte.
func rawFrames(fs [][]byte) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = string(f)
	}
	return out
}

func deliveries(ws []*watcher) int64 {
	var n int64
	for _, w := range ws {
		n += w.frames.Load()
	}
	return n
}

func reportDeliveries(b *testing.B, n int64, d, cpu time.Duration) {
	b.ReportMetric(float64(n)/d.Seconds(), "deliveries/s")
	if n > 0 && cpu >= 0 {
		b.ReportMetric(float64(cpu.Nanoseconds())/float64(n), "cpu-ns/delivery")
	}
}

// BenchmarkFigSend: chat.send → run:start (and → the first streamed piece) with the scripted
// provider, against a raw round trip of a frame of the same size.
func BenchmarkFigSend(b *testing.B) {
	s := startServer(b)
	raw := startRaw(b)
	c := s.dial(b)
	sid := newSession(b, c)
	req := fmt.Sprintf(`{"jsonrpc":"2.0","id":7,"method":"chat.send","params":{"sessionId":%q,"prompt":"Say hello."}}`, sid)
	b.Run("send/server", func(b *testing.B) {
		var start, first []time.Duration
		for b.Loop() {
			t0 := time.Now()
			c.write(b, []byte(req))
			gotStart, gotFirst := false, false
			for {
				f := c.read(b)
				switch {
				case !gotStart && bytes.Contains(f, []byte(`"kind":"run:start"`)):
					start = append(start, time.Since(t0))
					gotStart = true
				case gotStart && !gotFirst && bytes.Contains(f, []byte(`"streaming":true`)):
					first = append(first, time.Since(t0))
					gotFirst = true
				}
				if bytes.Contains(f, []byte(runEndMarker)) {
					break
				}
			}
		}
		reportLatency(b, "start-", start)
		reportLatency(b, "first-", first)
	})
	e := dialWS(b, "ws://"+raw.addr+"/echo", "")
	b.Run("send/echo-baseline", func(b *testing.B) { roundTrips(b, []*client{e}, []byte(req)) })
}

// BenchmarkFigResume: connect, hello and sessions.resume answering 2000 signals, against dialing a
// raw server that writes the same number of bytes.
func BenchmarkFigResume(b *testing.B) {
	s := startServer(b)
	raw := startRaw(b)
	c := dialWS(b, "ws://"+s.addr+"/", s.chat)
	var hello struct{ SignalEpoch string }
	_ = json.Unmarshal(c.call(b, "ipc.hello", `{"protocolVersion":16,"appVersion":"bench"}`), &hello)
	sid := newSession(b, c)
	w := watch(c, runEndMarker, false)
	// Fill the session's log past 2000 signals.
	for w.seq.Load() < resumeSignals+100 {
		sendPrompt(b, c, sid)
		w.waitEnd(b)
	}
	last := w.seq.Load()
	probe := s.dial(b)
	params := fmt.Sprintf(`{"sessionId":%q,"epoch":%q,"afterSeq":%d}`, sid, hello.SignalEpoch, last-resumeSignals)
	size := len(probe.call(b, "sessions.resume", params)) + 40
	b.Run("2000signals/server", func(b *testing.B) {
		defer s.profile(b)() // BENCH_CPUPROFILE=file: the server's CPU profile of this case
		for b.Loop() {
			x := s.dial(b)
			if r := x.callHead(b, "sessions.resume", params); !bytes.Contains(r[:min(len(r), 64)], []byte(`"result":{"ok":true,"signals":[`)) {
				b.Fatalf("resume: %.300s", r)
			}
			x.close()
		}
	})
	b.Run("2000signals/raw-baseline", func(b *testing.B) {
		for b.Loop() {
			x := dialWS(b, fmt.Sprintf("ws://%s/blob?n=%d", raw.addr, size), "")
			x.read(b)
			x.close()
		}
	})
}

// BenchmarkFigSlowConsumer: runs streamed to 100 watchers of which one never reads, against the
// same server with all 100 reading; reports the deliveries/s of the 99 that read.
func BenchmarkFigSlowConsumer(b *testing.B) {
	s := startServer(b)
	drv := s.dial(b)
	sid := newSession(b, drv)
	drvW := watch(drv, runEndMarker, false)
	ws := make([]*watcher, 99)
	for i := range ws {
		ws[i] = watch(s.dial(b), runEndMarker, false)
	}
	runs := func(b *testing.B) {
		before := deliveries(ws)
		t0 := time.Now()
		for b.Loop() {
			sendPrompt(b, drv, sid)
			drvW.waitEnd(b)
			for _, w := range ws {
				w.waitEnd(b)
			}
		}
		reportDeliveries(b, deliveries(ws)-before, time.Since(t0), -1)
	}
	reader := watch(s.dial(b), runEndMarker, false)
	b.Run("99of100/all-reading-baseline", runs)
	reader.c.close()
	slow := s.dial(b) // handshaken, then never read again
	b.Run("99of100/server-one-slow", runs)
	slow.close()
}

// BenchmarkFigIdle: resident memory and goroutines per handshaken idle connection at 5000
// connections, the server and the raw server each in a fresh process; then 10,000 connections
// come and go and the server's goroutines and file descriptors must return to their start.
func BenchmarkFigIdle(b *testing.B) {
	n, churn := 5000, 1000
	if smoke {
		n, churn = 100, 50
	}
	b.Run("5000conns/server", func(b *testing.B) {
		s := startServer(b)
		time.Sleep(200 * time.Millisecond)
		g0, rss0 := s.goroutines(b), s.rssKiB(b)
		cs := parallelDial(b, n, func() *client { return s.dial(b) })
		time.Sleep(500 * time.Millisecond)
		g1, rss1 := s.goroutines(b), s.rssKiB(b)
		b.ReportMetric(float64(rss1-rss0)/float64(n), "KiB/conn")
		b.ReportMetric(float64(g1-g0)/float64(n), "goroutines/conn")
		closeAll(cs)
		for range b.N {
		}
	})
	b.Run("5000conns/raw-baseline", func(b *testing.B) {
		raw := startRaw(b)
		time.Sleep(200 * time.Millisecond)
		g0, rss0 := rawGoroutines(b, raw), raw.rssKiB(b)
		cs := parallelDial(b, n, func() *client { return dialWS(b, "ws://"+raw.addr+"/idle", "") })
		time.Sleep(500 * time.Millisecond)
		g1, rss1 := rawGoroutines(b, raw), raw.rssKiB(b)
		b.ReportMetric(float64(rss1-rss0)/float64(n), "KiB/conn")
		b.ReportMetric(float64(g1-g0)/float64(n), "goroutines/conn")
		closeAll(cs)
		for range b.N {
		}
	})
	b.Run("churn10000/server", func(b *testing.B) {
		s := startServer(b)
		time.Sleep(200 * time.Millisecond)
		closeAll(parallelDial(b, churn, func() *client { return s.dial(b) })) // warm up: pools and buffers grow once
		time.Sleep(time.Second)
		g0, fd0 := s.goroutines(b), s.fds(b)
		for range 10 {
			closeAll(parallelDial(b, churn, func() *client { return s.dial(b) }))
		}
		var g1, fd1 int
		for range 50 { // closes finish asynchronously
			g1, fd1 = s.goroutines(b), s.fds(b)
			if g1 <= g0 && fd1 <= fd0 {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		b.ReportMetric(float64(g1-g0), "leaked-goroutines")
		b.ReportMetric(float64(fd1-fd0), "leaked-fds")
		for range b.N {
		}
	})
}

func parallelDial(b *testing.B, n int, dial func() *client) []*client {
	out := make([]*client, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(n) {
					return
				}
				out[i] = dial()
			}
		}()
	}
	wg.Wait()
	return out
}
