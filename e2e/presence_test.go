package e2e

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/zidane-server/zidane/server/store/storetest"
)

// waitPresence reads frames until a presence:changed shows the session with the given windows.
func waitPresence(t *testing.T, c *wsConn, sid string, windows int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		f := c.next(time.Until(deadline))
		if f.Method != "ipc.signal" {
			continue
		}
		var p struct {
			Kind     string `json:"kind"`
			Sessions []struct {
				SessionID string `json:"sessionId"`
				Windows   int    `json:"windows"`
			} `json:"sessions"`
		}
		require.NoError(t, json.Unmarshal(f.Params, &p))
		if p.Kind != "presence:changed" {
			continue
		}
		got := 0
		for _, s := range p.Sessions {
			if s.SessionID == sid {
				got = s.Windows
			}
		}
		if got == windows {
			return
		}
	}
	t.Fatalf("no presence:changed with %d windows on %s", windows, sid)
}

// TestPresenceWindows: presence:changed counts the connections that view a session, and drops a
// connection's window when it closes.
func TestPresenceWindows(t *testing.T) {
	s := startServer(t, serverOpts{dbURL: storetest.URL(t)})
	tok := s.mintToken("presence", "chat")
	a := dial(t, s, tok)
	a.hello()
	sid, _ := createSession(t, a)
	a.result("sessions.get", map[string]any{"sessionId": sid}, nil)
	waitPresence(t, a, sid, 1)
	b := dial(t, s, tok)
	b.hello()
	b.result("sessions.loadEvents", map[string]any{"sessionId": sid}, nil)
	waitPresence(t, a, sid, 2)
	require.NoError(t, b.ws.Close(websocket.StatusNormalClosure, ""))
	waitPresence(t, a, sid, 1)
}

// TestPresenceCoalesces: a connection switching sessions in a loop does not flood the others with
// presence:changed (adversarial review).
func TestPresenceCoalesces(t *testing.T) {
	s := startServer(t, serverOpts{dbURL: storetest.URL(t)})
	tok := s.mintToken("presence", "chat")
	a, bystander := dial(t, s, tok), dial(t, s, tok)
	a.hello()
	bystander.hello()
	s1, _ := createSession(t, a)
	s2, _ := createSession(t, a)
	start := time.Now()
	for i := 0; i < 200; i++ {
		id := s1
		if i%2 == 1 {
			id = s2
		}
		a.result("sessions.get", map[string]any{"sessionId": id}, nil)
	}
	elapsed := time.Since(start)
	time.Sleep(300 * time.Millisecond)
	n := 0
	for {
		select {
		case b := <-bystander.frames:
			if f := parseFrame(t, b); f.Method == "ipc.signal" {
				n++
			}
			continue
		default:
		}
		break
	}
	// One signal per 100 ms at most, plus the trailing one.
	require.LessOrEqual(t, n, int(elapsed/(100*time.Millisecond))+2, "%d presence signals in %s", n, elapsed)
}
