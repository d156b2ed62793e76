package bench

import (
	"bytes"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/zidane-server/zidane/server/hub/jetstream/natstest"
	"github.com/zidane-server/zidane/server/store/storetest"
)

// startReplicas starts an embedded nats-server -js and n replicas on one database and root.
func startReplicas(b *testing.B, n int) []*server {
	b.Helper()
	ns := natstest.Start(b)
	db, root := storetest.URL(b), b.TempDir()
	out := make([]*server, n)
	for i := range out {
		out[i] = startServerOn(b, db, root, "--nats-url", ns.URL)
	}
	return out
}

// BenchmarkFigReplicas (issue 25): three replicas on NATS JetStream and one in-process server,
// started once for both figures (fanout, latency).
func BenchmarkFigReplicas(b *testing.B) {
	reps := startReplicas(b, 3)
	one := startServer(b)
	replicaFanout(b, reps, one)
	replicaLatency(b, reps, one)
}

// replicaFanout: one session streaming runs to 100 watchers spread over the three replicas (the
// driver on one of them), against the in-process hub with all 100 on one server, in the same
// run. One op is one run; reports deliveries/s.
func replicaFanout(b *testing.B, reps []*server, one *server) {
	const n = 100
	cases := []struct {
		name string
		on   func(i int) *server
		drv  *server
	}{
		{"fanout-100watchers/3replicas-nats", func(i int) *server { return reps[i%3] }, reps[1]},
		{"fanout-100watchers/1server-inprocess-baseline", func(int) *server { return one }, one},
	}
	for _, cs := range cases {
		drv := cs.drv.dial(b)
		sid := newSession(b, drv)
		drvW := watch(drv, runEndMarker, false)
		ws := make([]*watcher, n)
		for i := range ws {
			ws[i] = watch(cs.on(i).dial(b), runEndMarker, false)
		}
		run := func() {
			sendPrompt(b, drv, sid)
			drvW.waitEnd(b)
			for _, w := range ws {
				w.waitEnd(b)
			}
		}
		run() // warm: the session's first run, its rows and the replicas' consumers
		b.Run(cs.name, func(b *testing.B) {
			before := deliveries(ws)
			t0 := time.Now()
			for b.Loop() {
				run()
			}
			reportDeliveries(b, deliveries(ws)-before, time.Since(t0), -1)
		})
		for _, w := range append(ws, drvW) {
			w.c.close()
		}
	}
}

// replicaLatency: the latency a signal gains through JetStream. One op
// sends a prompt on each setup in turn and times chat.send → run:start at a watcher: on the
// in-process server a watcher on the same server, on the replicas a watcher on another replica
// than the driver's. Reports each setup's p50 and p99 and the added p50 and p99 (replicas minus
// in-process).
func replicaLatency(b *testing.B, reps []*server, one *server) {
	type setup struct {
		drv, w *client
		sid    string
		lat    []time.Duration
	}
	mk := func(drvOn, wOn *server) *setup {
		s := &setup{drv: drvOn.dial(b), w: wOn.dial(b)}
		s.sid = newSession(b, s.drv)
		return s
	}
	inproc, nats := mk(one, one), mk(reps[0], reps[1])
	start := []byte(`"kind":"run:start"`)
	measure := func(s *setup, keep bool) {
		s.drv.id++
		req := []byte(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"chat.send","params":{"sessionId":%q,"prompt":"Say hello."}}`, s.drv.id, s.sid))
		t0 := time.Now()
		s.drv.write(b, req)
		for got := false; ; {
			f := s.w.read(b)
			if !got && bytes.Contains(f, start) {
				if keep {
					s.lat = append(s.lat, time.Since(t0))
				}
				got = true
			}
			if bytes.Contains(f, []byte(runEndMarker)) {
				break
			}
		}
		for { // the driver's own copy of the run, up to its end
			if bytes.Contains(s.drv.read(b), []byte(runEndMarker)) {
				break
			}
		}
	}
	measure(inproc, false)
	measure(nats, false)
	b.Run("latency/3replicas-nats", func(b *testing.B) {
		inproc.lat, nats.lat = nil, nil
		for b.Loop() {
			measure(inproc, true)
			measure(nats, true)
		}
		slices.Sort(inproc.lat)
		slices.Sort(nats.lat)
		pct := func(l []time.Duration, p int) float64 { return float64(l[len(l)*p/100].Nanoseconds()) }
		b.ReportMetric(pct(nats.lat, 50), "nats-p50-ns")
		b.ReportMetric(pct(nats.lat, 99), "nats-p99-ns")
		b.ReportMetric(pct(inproc.lat, 50), "inprocess-p50-ns")
		b.ReportMetric(pct(inproc.lat, 99), "inprocess-p99-ns")
		b.ReportMetric(pct(nats.lat, 50)-pct(inproc.lat, 50), "added-p50-ns")
		b.ReportMetric(pct(nats.lat, 99)-pct(inproc.lat, 99), "added-p99-ns")
	})
}
