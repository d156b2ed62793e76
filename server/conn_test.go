package server

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/zidane-server/zidane/server/store"
	"github.com/zidane-server/zidane/server/store/storetest"
)

// newLockEnv starts a server on a database of its own and returns it with the database's URL,
// for tests that hold rows locked from another client.
func newLockEnv(t *testing.T, opts store.Options, mod func(*Config)) (*testEnv, string) {
	url := storetest.URL(t)
	st, err := store.Open(context.Background(), url, opts)
	require.NoError(t, err)
	t.Cleanup(st.Close)
	return newEnvStore(t, st, mod), url
}

// lockSessions holds the sessions' rows locked from another database client until the returned
// release is called (at the latest when the test ends).
func lockSessions(t *testing.T, url string, ids ...string) (release func()) {
	return holdLock(t, url, `SELECT 1 FROM sessions WHERE id = ANY($1::uuid[]) FOR UPDATE`, ids)
}

// holdLock runs stmt (a locking statement) in a transaction of another database client and holds
// what it locked until the returned release is called (at the latest when the test ends).
func holdLock(t *testing.T, url, stmt string, args ...any) (release func()) {
	ctx := context.Background()
	locker, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	tx, err := locker.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, stmt, args...)
	require.NoError(t, err)
	var once sync.Once
	release = func() {
		once.Do(func() {
			require.NoError(t, tx.Rollback(ctx))
			locker.Close(ctx)
		})
	}
	t.Cleanup(release)
	return release
}

// TestConnHandoff: a request the read loop runs inline (serve) and that then waits (here on a
// row another database client holds) hands the read loop to another goroutine: later frames on
// the same connection are read and answered meanwhile, up to the connection's request bound,
// and the waiting request is answered once it can go on.
func TestConnHandoff(t *testing.T) {
	e, url := newLockEnv(t, store.Options{}, func(c *Config) { c.Limits.ConcurrentRequests = 2 })
	c := e.dial()
	c.hello()
	s1, s2 := c.newSession(), c.newSession()
	release := lockSessions(t, url, s1, s2)

	// One request waits on the lock; a ping sent after it is answered first.
	c.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":"w1","method":"chat.send","params":{"sessionId":%q,"prompt":"x"}}`, s1))
	c.send(`{"jsonrpc":"2.0","id":"p1","method":"$/ping","params":{}}`)
	requireID(t, decodeObj(t, c.nextAnswer()), `"p1"`)

	// A second waiting request takes the last slot: the next ping waits for a slot.
	c.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":"w2","method":"chat.send","params":{"sessionId":%q,"prompt":"x"}}`, s2))
	c.send(`{"jsonrpc":"2.0","id":"p2","method":"$/ping","params":{}}`)
	c.expectNothing(300 * time.Millisecond)

	release()
	got := map[string]bool{}
	for len(got) < 3 {
		m := decodeObj(t, c.nextAnswer())
		require.Nil(t, m["error"], "%v", m)
		got[fmt.Sprint(m["id"])] = true
	}
	require.Equal(t, map[string]bool{"w1": true, "w2": true, "p2": true}, got)
	c.result("$/ping", `{}`)
}

// TestConnHandoffClose: a connection closed while a handed-off request waits ends once that request
// has (the read loop's end, on the goroutine that took over reading, waits for it). chat.send's
// durable write outlives its connection, so here it ends at the store's query timeout.
func TestConnHandoffClose(t *testing.T) {
	e, url := newLockEnv(t, store.Options{QueryTimeout: 2 * time.Second}, nil)
	c := e.dial()
	c.hello()
	s1 := c.newSession()
	lockSessions(t, url, s1)
	c.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":"w1","method":"chat.send","params":{"sessionId":%q,"prompt":"x"}}`, s1))
	time.Sleep(50 * time.Millisecond) // handed off by now
	require.NoError(t, c.ws.CloseNow())
	require.Eventually(t, func() bool {
		e.srv.connsMu.Lock()
		defer e.srv.connsMu.Unlock()
		return len(e.srv.conns) == 0
	}, 10*time.Second, 10*time.Millisecond)
}

// TestInflightRequestBudget: the frames all connections have read and not yet answered are
// bounded together (Limits.InflightRequestBytes). With one large request waiting in its handler,
// another connection's large request waits unread-after (its read loop holds it, not running it)
// until the first is answered; then both are answered. Before the bound, every connection could
// hold ConcurrentRequests frames of MaxMessageBytes each, on any number of connections.
func TestInflightRequestBudget(t *testing.T) {
	const limit = 64 << 10
	e, url := newLockEnv(t, store.Options{}, func(c *Config) {
		c.Limits.MaxMessageBytes = limit
		c.Limits.InflightRequestBytes = limit
	})
	require.EqualValues(t, limit, e.srv.cfg.Limits.InflightRequestBytes)
	a, b := e.dial(), e.dial()
	a.hello()
	b.hello()
	s1, s2 := a.newSession(), b.newSession()
	release := lockSessions(t, url, s1)
	prompt := strings.Repeat("p", 40<<10)

	a.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":"a","method":"chat.send","params":{"sessionId":%q,"prompt":%q}}`, s1, prompt))
	room := func(n int64) bool {
		if !e.srv.inflight.TryAcquire(n) {
			return false
		}
		e.srv.inflight.Release(n)
		return true
	}
	require.Eventually(t, func() bool { return !room(limit - 40<<10 + 1) }, 5*time.Second, 5*time.Millisecond,
		"the waiting request holds its frame's bytes")
	b.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":"b","method":"chat.send","params":{"sessionId":%q,"prompt":%q}}`, s2, prompt))
	require.Eventually(t, func() bool { return e.srv.inflightWaiting.Load() == 1 }, 5*time.Second, 5*time.Millisecond,
		"the second connection's read loop waits for room")
	b.expectNothing(200 * time.Millisecond)

	release()
	requireID(t, decodeObj(t, a.nextAnswer()), `"a"`)
	requireID(t, decodeObj(t, b.nextAnswer()), `"b"`)
	require.Zero(t, e.srv.inflightWaiting.Load())
	require.Eventually(t, func() bool { return room(limit) }, 5*time.Second, 5*time.Millisecond, "every frame's bytes are given back")
	a.result("$/ping", `{}`)
}
