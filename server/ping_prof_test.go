package server

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/zidane-server/zidane/server/store/storetest"
)

// BenchmarkPingInProcess: $/ping and daemon.info round trips against an in-process server, for CPU profiles of the
// request path (go test -run '^$' -bench PingInProcess -cpuprofile cpu.out ./server/); make bench
// measures the real binary against its baseline.
func BenchmarkPingInProcess(b *testing.B) {
	st := storetest.New(b)
	ctx := context.Background()
	s, err := New(ctx, Config{WorkspaceRoots: []string{b.TempDir()}, Logger: testLogger()}, st)
	if err != nil {
		b.Fatal(err)
	}
	hs := httptest.NewServer(s)
	b.Cleanup(func() {
		c, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		s.Shutdown(c)
		hs.Close()
	})
	tok, _, err := st.CreateToken(ctx, "bench", "chat")
	if err != nil {
		b.Fatal(err)
	}
	ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(hs.URL, "http"), &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + tok}}})
	if err != nil {
		b.Fatal(err)
	}
	defer ws.CloseNow()
	rt := func(frame string) {
		if err := ws.Write(ctx, websocket.MessageText, []byte(frame)); err != nil {
			b.Fatal(err)
		}
		if _, _, err := ws.Read(ctx); err != nil {
			b.Fatal(err)
		}
	}
	rt(`{"jsonrpc":"2.0","id":0,"method":"ipc.hello","params":{"protocolVersion":16,"appVersion":"bench"}}`)
	b.Run("ping", func(b *testing.B) {
		for b.Loop() {
			rt(`{"jsonrpc":"2.0","id":1,"method":"$/ping","params":{}}`)
		}
	})
	b.Run("daemon.info", func(b *testing.B) {
		for b.Loop() {
			rt(`{"jsonrpc":"2.0","id":2,"method":"daemon.info","params":{}}`)
		}
	})
}

// BenchmarkEchoInProcess is BenchmarkPingInProcess's floor: a raw coder/websocket echo.
func BenchmarkEchoInProcess(b *testing.B) {
	ctx := context.Background()
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		for {
			typ, m, err := ws.Read(ctx)
			if err != nil {
				return
			}
			if ws.Write(ctx, typ, m) != nil {
				return
			}
		}
	}))
	defer hs.Close()
	ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(hs.URL, "http"), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer ws.CloseNow()
	for b.Loop() {
		if err := ws.Write(ctx, websocket.MessageText, []byte(`{"jsonrpc":"2.0","id":1,"method":"$/ping","params":{}}`)); err != nil {
			b.Fatal(err)
		}
		if _, _, err := ws.Read(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
