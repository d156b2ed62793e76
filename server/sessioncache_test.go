package server

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/zidane-server/zidane/server/store"
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

// TestSessionUpdatedNeverGoesBack: two writers of a session whose answers arrive out of their
// commit order (the run's end status, then the first prompt's title committed after it but
// published before) send one session:updated, the later snapshot's; the cache keeps it too.
// Before the fix the run's end published the session without the title, and the cache kept it.
func TestSessionUpdatedNeverGoesBack(t *testing.T) {
	e := newEnv(t, nil)
	a := e.dial()
	a.hello()
	sid := a.newSession()
	ctx := context.Background()
	updates := func(d time.Duration) (n int) { // session:updated frames within d
		for {
			f, err := a.tryNext(d)
			require.NoError(t, err)
			if f == nil {
				return n
			}
			if strings.Contains(string(f), `"kind":"session:updated"`) {
				n++
			}
		}
	}
	updates(100 * time.Millisecond) // sessions.create's own, if any, out of the way
	older, err := e.st.SetStatus(ctx, sid, "idle")
	require.NoError(t, err)
	newer, err := e.st.StartRun(ctx, sid, nil, "Plan the trip") // the first prompt's title
	require.NoError(t, err)
	require.Greater(t, newer.Version, older.Version, "every write counts")

	e.srv.publishSession(newer)
	e.srv.publishSession(older) // arrives late: dropped
	e.srv.publishSession(newer) // the same snapshot again: dropped
	s := a.nextSignal()
	require.Equal(t, "session:updated", s.kind)
	require.Contains(t, string(s.raw), `"title":"Plan the trip"`)
	require.Zero(t, updates(200*time.Millisecond), "no stale or repeated session:updated")
	cached, ok := e.srv.sessions.get(sid)
	require.True(t, ok)
	require.Equal(t, "Plan the trip", cached.Title)

	// A later write goes out as usual.
	a.result("sessions.rename", fmt.Sprintf(`{"sessionId":%q,"title":"Renamed"}`, sid))
	s = a.nextSignal()
	require.Equal(t, "session:updated", s.kind)
	require.Contains(t, string(s.raw), `"title":"Renamed"`)
}

// TestSessionCachePublishRecordsOnlyWhatWentOut: a snapshot whose send failed may go again; one
// that went out, or an older one, does not; a deleted session's late snapshot (a run's start, told
// after the run went on; the reviewer's race with sessions.delete) is neither sent nor cached, so
// deleted:true stays the last word and chat.send does not find the session in the cache.
func TestSessionCachePublishRecordsOnlyWhatWentOut(t *testing.T) {
	var c sessionCache
	var sent []int64
	ok := false
	send := func(x store.Session) bool {
		sent = append(sent, x.Version)
		return ok
	}
	x := store.Session{ID: "s", Version: 3}
	c.publish(x, send) // fails
	ok = true
	c.publish(x, send) // goes out
	c.publish(x, send)
	c.publish(store.Session{ID: "s", Version: 2}, send)
	c.publish(store.Session{ID: "s", Version: 4}, send)
	require.Equal(t, []int64{3, 3, 4}, sent)
	c.drop("s")
	c.publish(store.Session{ID: "s", Version: 5}, send)
	require.Equal(t, []int64{3, 3, 4}, sent)
	c.put(store.Session{ID: "s", Version: 6}) // a read that raced the delete
	_, cached := c.get("s")
	require.False(t, cached, "a deleted session came back into the cache")
}
