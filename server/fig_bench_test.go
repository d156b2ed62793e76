package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/zidane-server/zidane/protocol"
	"github.com/zidane-server/zidane/server/store/storetest"
)

// figWatcher reads every frame of one connection, counting them and each run:end.
type figWatcher struct {
	ws     *websocket.Conn
	frames atomic.Int64
	ends   chan struct{}
	keep   atomic.Bool
	kept   [][]byte // while keep is set; read after its run:end
}

func (w *figWatcher) loop() {
	for {
		_, f, err := w.ws.Read(context.Background())
		if err != nil {
			close(w.ends)
			return
		}
		w.frames.Add(1)
		if w.keep.Load() && bytes.HasPrefix(f, []byte(`{"jsonrpc":"2.0","method":"ipc.signal"`)) {
			w.kept = append(w.kept, f)
		}
		if bytes.Contains(f, []byte(`"kind":"run:end"`)) {
			w.ends <- struct{}{}
		}
	}
}

func (w *figWatcher) waitEnd(b *testing.B) {
	select {
	case _, ok := <-w.ends:
		if !ok {
			b.Fatal("watcher connection ended")
		}
	case <-time.After(60 * time.Second):
		b.Fatal("no run:end within 60 s")
	}
}

// BenchmarkFigFanoutPersist: one session streaming runs of the scripted provider to 100 watchers,
// the runtime persisting every event (transcript writer, status writes), against publishing the
// same signals through the hub with nothing persisted and no runtime — in one process, over
// loopback (issue 10, "fan-out with persistence on ≥ 0.9× with it off"). The server has no switch
// to turn persistence off, so "off" is the hub alone; the ratio bounds what persistence and the
// run cost the fan-out. Reports deliveries/s of the 100 watchers.
func BenchmarkFigFanoutPersist(b *testing.B) {
	ctx := context.Background()
	st := storetest.New(b)
	s, err := New(ctx, Config{WorkspaceRoots: []string{b.TempDir()}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, st)
	if err != nil {
		b.Fatal(err)
	}
	hs := httptest.NewServer(s)
	b.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		s.Shutdown(sctx)
		hs.Close()
	})
	tok, _, err := st.CreateToken(ctx, "fig-fanout", "chat")
	if err != nil {
		b.Fatal(err)
	}
	url := "ws" + strings.TrimPrefix(hs.URL, "http")
	dial := func() *websocket.Conn {
		ws, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{Subprotocols: []string{"zidane", "zidane.bearer." + tok}})
		if err != nil {
			b.Fatal(err)
		}
		ws.SetReadLimit(64 << 20)
		if err := ws.Write(ctx, websocket.MessageText, []byte(`{"jsonrpc":"2.0","id":1,"method":"ipc.hello","params":{"protocolVersion":16,"appVersion":"bench"}}`)); err != nil {
			b.Fatal(err)
		}
		if _, _, err := ws.Read(ctx); err != nil {
			b.Fatal(err)
		}
		return ws
	}
	drv := dial()
	_ = drv.Write(ctx, websocket.MessageText, []byte(`{"jsonrpc":"2.0","id":2,"method":"sessions.create","params":{}}`))
	var sid string
	for sid == "" {
		_, f, err := drv.Read(ctx)
		if err != nil {
			b.Fatal(err)
		}
		var m struct {
			ID     json.RawMessage
			Result struct{ ID string }
		}
		if json.Unmarshal(f, &m) == nil && string(m.ID) == "2" {
			sid = m.Result.ID
		}
	}
	dw := &figWatcher{ws: drv, ends: make(chan struct{}, 1<<16)}
	go dw.loop()
	n := 100
	if os.Getenv("BENCH_SMOKE") == "1" { // make test's one-iteration smoke run
		n = 10
	}
	ws := make([]*figWatcher, n)
	for i := range ws {
		ws[i] = &figWatcher{ws: dial(), ends: make(chan struct{}, 1<<16)}
		go ws[i].loop()
	}
	id := 10
	run := func(b *testing.B) {
		id++
		if err := drv.Write(ctx, websocket.MessageText, []byte(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"chat.send","params":{"sessionId":%q,"prompt":"Say hello."}}`, id, sid))); err != nil {
			b.Fatal(err)
		}
		dw.waitEnd(b)
		for _, w := range ws {
			w.waitEnd(b)
		}
	}
	deliveries := func() int64 {
		var t int64
		for _, w := range ws {
			t += w.frames.Load()
		}
		return t
	}
	// One run captured: the baseline publishes its signals.
	ws[0].keep.Store(true)
	run(b)
	ws[0].keep.Store(false)
	var sigs []protocol.Signal
	for _, f := range ws[0].kept {
		var m struct{ Params json.RawMessage }
		if err := json.Unmarshal(f, &m); err != nil {
			b.Fatal(err)
		}
		p := m.Params
		if i := bytes.LastIndex(p, []byte(`,"$seq":`)); i >= 0 {
			p = append(append([]byte{}, p[:i]...), '}')
		}
		sig, err := protocol.DecodeSignal(p)
		if err != nil {
			b.Fatalf("captured signal: %v: %s", err, p)
		}
		if sig.SignalKind() != "session:updated" && sig.SignalKind() != "presence:changed" {
			sigs = append(sigs, sig)
		}
	}
	b.Run(fmt.Sprintf("%dwatchers/server", n), func(b *testing.B) {
		before, t0 := deliveries(), time.Now()
		for b.Loop() {
			run(b)
		}
		b.ReportMetric(float64(deliveries()-before)/time.Since(t0).Seconds(), "deliveries/s")
	})
	b.Run(fmt.Sprintf("%dwatchers/no-persist-baseline", n), func(b *testing.B) {
		before, t0 := deliveries(), time.Now()
		for b.Loop() {
			for _, sig := range sigs {
				if _, err := s.hub.publish(sig, nil, ""); err != nil {
					b.Fatal(err)
				}
			}
			dw.waitEnd(b)
			for _, w := range ws {
				w.waitEnd(b)
			}
		}
		b.ReportMetric(float64(deliveries()-before)/time.Since(t0).Seconds(), "deliveries/s")
	})
}
