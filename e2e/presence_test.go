package e2e

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/zidane-server/zidane/server/store/storetest"
)

// presenceCount is one session's counts in a presence:changed.
type presenceCount struct {
	Windows int  `json:"windows"`
	Focused *int `json:"focused"` // absent means 0
}

// awaitPresence reads frames until a presence:changed whose state satisfies ok (session id →
// counts; a session absent from the signal is absent from the map) and returns that state.
func awaitPresence(t *testing.T, c *wsConn, what string, ok func(map[string]presenceCount) bool) map[string]presenceCount {
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
				presenceCount
			} `json:"sessions"`
		}
		require.NoError(t, json.Unmarshal(f.Params, &p))
		if p.Kind != "presence:changed" {
			continue
		}
		state := map[string]presenceCount{}
		for _, s := range p.Sessions {
			state[s.SessionID] = s.presenceCount
		}
		if ok(state) {
			return state
		}
	}
	t.Fatalf("no presence:changed with %s", what)
	return nil
}

// waitPresence reads frames until a presence:changed shows the session with the given windows.
func waitPresence(t *testing.T, c *wsConn, sid string, windows int) {
	t.Helper()
	awaitPresence(t, c, fmt.Sprintf("%d windows on %s", windows, sid), func(m map[string]presenceCount) bool {
		return m[sid].Windows == windows
	})
}

// waitCounts reads frames until a presence:changed shows sid with exactly these windows and
// focused counts (0 windows: sid absent) and returns the whole state.
func waitCounts(t *testing.T, c *wsConn, sid string, windows, focused int) map[string]presenceCount {
	t.Helper()
	return awaitPresence(t, c, fmt.Sprintf("%d windows, %d focused on %s", windows, focused, sid), func(m map[string]presenceCount) bool {
		got, in := m[sid]
		if windows == 0 {
			return !in
		}
		f := 0
		if got.Focused != nil {
			f = *got.Focused
		}
		return in && got.Windows == windows && f == focused
	})
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

// TestPresenceSet (issue 7 item 7): a connection declares its view and focus with presence.set;
// another connection sees the windows and focused counts; null and closing clear them.
func TestPresenceSet(t *testing.T) {
	s := startServer(t, serverOpts{dbURL: storetest.URL(t)})
	tok := s.mintToken("presence", "chat")
	a, b := dial(t, s, tok), dial(t, s, tok)
	a.hello()
	b.hello()
	sid, _ := createSession(t, a)

	b.result("presence.set", map[string]any{"sessionId": sid, "focused": true}, nil)
	waitCounts(t, a, sid, 1, 1)
	// A focused field of 0 is absent on the wire ("absent means 0").
	b.result("presence.set", map[string]any{"sessionId": sid, "focused": false}, nil)
	st := waitCounts(t, a, sid, 1, 0)
	require.Nil(t, st[sid].Focused, "focused 0 is omitted")

	// The same as a notification (no answer): it applies in arrival order.
	b.send(map[string]any{"jsonrpc": "2.0", "method": "presence.set", "params": map[string]any{"sessionId": sid, "focused": true}})
	waitCounts(t, a, sid, 1, 1)
	a.result("presence.set", map[string]any{"sessionId": sid, "focused": false}, nil)
	waitCounts(t, a, sid, 2, 1)

	// null clears b's view (a still views it); focused with no session counts nowhere.
	b.result("presence.set", map[string]any{"sessionId": nil, "focused": true}, nil)
	waitCounts(t, a, sid, 1, 0)
	a.result("presence.set", map[string]any{"sessionId": nil, "focused": false}, nil)
	waitCounts(t, a, sid, 0, 0)

	// Closing a connection removes its view.
	b.result("presence.set", map[string]any{"sessionId": sid, "focused": true}, nil)
	waitCounts(t, a, sid, 1, 1)
	require.NoError(t, b.ws.Close(websocket.StatusNormalClosure, ""))
	waitCounts(t, a, sid, 0, 0)
}

// TestPresenceSetGovernsView: once a connection called presence.set, sessions.get,
// sessions.loadEvents and chat.send no longer move its view; a connection that never called it
// keeps the inference.
func TestPresenceSetGovernsView(t *testing.T) {
	s := startServer(t, serverOpts{dbURL: storetest.URL(t)})
	tok := s.mintToken("presence", "chat")
	a, b, old := dial(t, s, tok), dial(t, s, tok), dial(t, s, tok)
	a.hello()
	b.hello()
	old.hello()
	s1, _ := createSession(t, a)
	s2, _ := createSession(t, a)
	s3, _ := createSession(t, a)

	b.result("presence.set", map[string]any{"sessionId": s1, "focused": true}, nil)
	waitCounts(t, a, s1, 1, 1)
	b.result("sessions.get", map[string]any{"sessionId": s2}, nil)
	b.result("sessions.loadEvents", map[string]any{"sessionId": s2}, nil)
	runID := sendPrompt(t, b, s2, "hello")
	// The connection that never declared still moves by inference: its sessions.get of s3 is
	// the barrier after which the state must show b still on s1 and nobody on s2.
	old.result("sessions.get", map[string]any{"sessionId": s3}, nil)
	st := awaitPresence(t, a, "old's inferred view on s3", func(m map[string]presenceCount) bool { return m[s3].Windows == 1 })
	require.Equal(t, 1, st[s1].Windows, "b's declared view stays on s1: %v", st)
	require.NotNil(t, st[s1].Focused)
	require.Equal(t, 1, *st[s1].Focused)
	require.Zero(t, st[s2].Windows, "sessions.get, loadEvents and chat.send did not move b's view: %v", st)
	require.Nil(t, st[s3].Focused, "an inferred view is not focused")
	_ = runID
}

// TestPresenceSetErrors: bad params are InvalidParams naming the member; an unknown session is
// HandlerFailed saying to list the sessions, and leaves the view as it was; a machine token may
// not call it (WrongConnectionKind: no chat methods on a machine connection).
func TestPresenceSetErrors(t *testing.T) {
	s := startServer(t, serverOpts{dbURL: storetest.URL(t)})
	tok := s.mintToken("presence", "chat")
	a, b := dial(t, s, tok), dial(t, s, tok)
	a.hello()
	b.hello()
	sid, _ := createSession(t, a)
	b.result("presence.set", map[string]any{"sessionId": sid, "focused": true}, nil)
	waitCounts(t, a, sid, 1, 1)

	for _, tc := range []struct {
		params  any
		pointer string
	}{
		{map[string]any{"focused": true}, ""},
		{map[string]any{"sessionId": sid}, ""},
		{map[string]any{"sessionId": sid, "focused": "yes"}, "/focused"},
		{map[string]any{"sessionId": 7, "focused": true}, "/sessionId"},
		{map[string]any{"sessionId": "", "focused": true}, "/sessionId"},
	} {
		e := b.callErr("presence.set", tc.params)
		require.Equal(t, -32602, e.Code, "%v: %+v", tc.params, e)
		var d struct {
			Pointer string `json:"pointer"`
		}
		require.NoError(t, json.Unmarshal(e.Data, &d))
		require.Equal(t, tc.pointer, d.Pointer, "%v: %s", tc.params, e.Message)
	}
	for _, bad := range []string{"7f6b2bc1-27b2-4052-a2b7-de05d2538178", "not-a-session"} {
		e := b.callErr("presence.set", map[string]any{"sessionId": bad, "focused": false})
		require.Equal(t, -32014, e.Code, "%+v", e)
		require.Contains(t, e.Message, "not found")
		require.Contains(t, e.Message, "sessions.list")
	}
	m := dial(t, s, s.mintToken("presence-machine", "machine"))
	m.hello()
	require.Equal(t, -32040, m.callErr("presence.set", map[string]any{"sessionId": sid, "focused": true}).Code)

	// The failed calls left b's view as it was: a's own change is the barrier.
	a.result("presence.set", map[string]any{"sessionId": sid, "focused": false}, nil)
	waitCounts(t, a, sid, 2, 1)
}

// TestPresenceDeletedSession: deleting a session ends every view of it, declared or inferred.
func TestPresenceDeletedSession(t *testing.T) {
	s := startServer(t, serverOpts{dbURL: storetest.URL(t)})
	tok := s.mintToken("presence", "chat")
	a, b := dial(t, s, tok), dial(t, s, tok)
	a.hello()
	b.hello()
	sid, _ := createSession(t, a)
	a.result("presence.set", map[string]any{"sessionId": sid, "focused": true}, nil)
	b.result("sessions.get", map[string]any{"sessionId": sid}, nil)
	waitCounts(t, a, sid, 2, 1)
	b.result("sessions.delete", map[string]any{"sessionId": sid}, nil)
	waitCounts(t, a, sid, 0, 0)
}
