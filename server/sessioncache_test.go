package server

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The session cache behind chat.send (issue 10) stays correct across connections and session
// writes: a session renamed, archived or deleted from another connection, or deleted behind the
// server's back, is seen by the next chat.send; a run's status is written with its prompt, in one
// round trip, before chat.send answers.
func TestSessionCache_ChatSendSeesOtherConnectionsWrites(t *testing.T) {
	e := newEnv(t, nil)
	a, b := e.dial(), e.dial()
	a.hello()
	b.hello()
	sid := a.newSession()
	send := func() map[string]any {
		return a.call("chat.send", fmt.Sprintf(`{"sessionId":%q,"prompt":"Say hello."}`, sid))
	}
	ctx := context.Background()

	// A first run fills the cache.
	require.Nil(t, send()["error"])
	sigs := a.runSignals(sid)
	require.Equal(t, "run:start", firstKind(sigs, "run:"))
	x, err := e.st.GetSession(ctx, sid)
	require.NoError(t, err)
	require.Equal(t, "idle", x.Status, "status after run:end")

	// Rename from b: the cached session is replaced (the first prompt no longer names it).
	b.result("sessions.rename", fmt.Sprintf(`{"sessionId":%q,"title":"Named by b"}`, sid))
	cached, ok := e.srv.sessions.get(sid)
	require.True(t, ok)
	require.Equal(t, "Named by b", cached.Title)
	require.True(t, cached.TitleSet)
	b.result("sessions.archive", fmt.Sprintf(`{"sessionId":%q,"archived":true}`, sid))
	cached, _ = e.srv.sessions.get(sid)
	require.True(t, cached.Archived)

	// Delete from b: chat.send on a answers not found, and signals nothing.
	b.result("sessions.delete", fmt.Sprintf(`{"sessionId":%q}`, sid))
	m := send()
	require.NotNil(t, m["error"], "chat.send on a deleted session: %v", m)
	require.Contains(t, fmt.Sprint(m["error"]), "not found")

	// Deleted behind the server's back (the cache still holds it): run:start and the prompt go
	// out before the prompt's write, which finds no session; the answer says not found, the
	// run ends failed saying why, and the entry is gone.
	sid = a.newSession()
	require.Nil(t, send()["error"])
	a.runSignals(sid)
	_, ok = e.srv.sessions.get(sid)
	require.True(t, ok)
	require.NoError(t, e.st.DeleteSession(ctx, sid))
	m = send()
	require.NotNil(t, m["error"], "chat.send on a session deleted behind the cache: %v", m)
	require.True(t, strings.Contains(fmt.Sprint(m["error"]), "not found"), "%v", m)
	_, ok = e.srv.sessions.get(sid)
	require.False(t, ok)
	sigs = a.runSignals(sid)
	end := sigs[len(sigs)-1]
	require.Contains(t, string(end.raw), `"ok":false`)
	require.Contains(t, string(end.raw), "deleted before the prompt was stored")
	a.expectNothing(200 * time.Millisecond)
}

// firstKind returns the kind of the first signal whose kind has prefix.
func firstKind(sigs []signal, prefix string) string {
	for _, s := range sigs {
		if strings.HasPrefix(s.kind, prefix) {
			return s.kind
		}
	}
	return ""
}
