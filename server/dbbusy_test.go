package server

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zidane-server/zidane/server/store"
	"github.com/zidane-server/zidane/server/store/storetest"
)

// TestDatabaseBusy: a statement stuck behind a lock hits the statement timeout, and a request that
// finds the pool exhausted waits at most the query timeout; both answer a clear "busy" error
// instead of hanging, and the server serves again once the lock is gone (field case B29).
func TestDatabaseBusy(t *testing.T) {
	url := storetest.URL(t)
	ctx := context.Background()
	// One pooled connection holds LISTEN for revocations; one is left for queries.
	st, err := store.Open(ctx, url, store.Options{MaxConns: 2, QueryTimeout: time.Second})
	require.NoError(t, err)
	t.Cleanup(st.Close)
	srv, err := New(ctx, Config{WorkspaceRoots: []string{t.TempDir()}, Logger: testLogger()}, st)
	require.NoError(t, err)
	hs := httptest.NewServer(srv)
	t.Cleanup(func() { srv.Shutdown(context.Background()); hs.Close() })
	e := &testEnv{t: t, srv: srv, st: st, hs: hs, wsURL: "ws" + strings.TrimPrefix(hs.URL, "http")}
	e.token = e.mint("chat")
	var ids []string
	for i := 0; i < 3; i++ {
		sess, err := st.CreateSession(ctx, store.Session{Title: "busy", Status: "idle"})
		require.NoError(t, err)
		ids = append(ids, sess.ID)
	}

	// Another client of the database holds the sessions' rows.
	locker, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer locker.Close(ctx)
	tx, err := locker.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `SELECT 1 FROM sessions WHERE id = ANY($1::uuid[]) FOR UPDATE`, ids)
	require.NoError(t, err)

	// Three prompts at once: one holds the only query connection behind the lock (statement
	// timeout), the others find the pool exhausted (acquire timeout).
	start := time.Now()
	var conns []*testConn
	for range ids { // connect first: the upgrade's token lookup needs the database too
		c := e.dial()
		c.hello()
		conns = append(conns, c)
	}
	for i, id := range ids {
		conns[i].send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"chat.send","params":{"sessionId":%q,"prompt":"x"}}`, i+1, id))
	}
	for _, c := range conns {
		m := decodeObj(t, c.nextAnswer())
		require.Equal(t, -32014, errCode(m), "answer: %v", m)
		assert.Contains(t, m["error"].(map[string]any)["message"], "The database is busy; try again in a moment.")
	}
	assert.Less(t, time.Since(start), 8*time.Second, "busy answers come within the timeouts, not a hang")

	require.NoError(t, tx.Rollback(ctx))
	conns[0].result("sessions.list", `{}`)
	for _, id := range ids {
		got, err := st.GetSession(ctx, id)
		require.NoError(t, err)
		assert.Equal(t, "idle", got.Status, "a refused prompt leaves no half-written status")
	}
}
