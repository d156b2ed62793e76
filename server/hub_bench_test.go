package server

import (
	"encoding/json"
	"testing"

	"github.com/zidane-server/zidane/protocol"
)

func benchConns(n int) (*hub, []*conn) {
	srv := &Server{cfg: Config{}}
	srv.cfg.Limits.defaults()
	h := newHub("epoch", srv.cfg.Limits.Replay, int(srv.cfg.Limits.MaxMessageBytes))
	var cs []*conn
	for i := 0; i < n; i++ {
		c := &conn{srv: srv, scope: protocol.ScopeChat, writing: true} // frames queue; no writer starts
		h.add(c)
		cs = append(cs, c)
	}
	return h, cs
}

func drain(cs []*conn) {
	for _, c := range cs {
		c.qmu.Lock()
		c.queue = c.queue[:0]
		c.addQueued(-c.qbytes)
		c.qmu.Unlock()
	}
}

// BenchmarkPublish: a signal to 100 connections, encoded once and shared (the hub), against
// encoding it for each connection (the baseline).
func BenchmarkPublish(b *testing.B) {
	sig := &protocol.EventSignal{SessionID: "7f6b2bc1-27b2-4052-a2b7-de05d2538178", Event: &protocol.MarkdownEvent{Text: "Hello from the scripted provider. ", Streaming: true, TurnID: "999068c5-c52b-4ccd-a936-682bea162657"}}
	b.Run("100conns/shared", func(b *testing.B) {
		h, cs := benchConns(100)
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			if _, err := h.publish(sig, nil, ""); err != nil {
				b.Fatal(err)
			}
			if i%64 == 0 {
				drain(cs)
			}
		}
	})
	b.Run("100conns/per-connection-baseline", func(b *testing.B) {
		_, cs := benchConns(100)
		b.ReportAllocs()
		var seq int64
		for i := 0; b.Loop(); i++ {
			seq++
			for _, c := range cs {
				body, err := json.Marshal(sig)
				if err != nil {
					b.Fatal(err)
				}
				c.sendSignal(signalFrame(body, seq))
			}
			if i%64 == 0 {
				drain(cs)
			}
		}
	})
}
