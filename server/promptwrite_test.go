package server

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/zidane-server/zidane/server/store"
	"github.com/zidane-server/zidane/server/store/storetest"
)

// chat.send → run:start does not wait for Postgres (issue 10): run:start and the prompt's event
// reach the client while the prompt's write is held up behind a row lock; chat.send answers only
// once the write is committed, and then the transcript holds the prompt, in order, and the session
// is running or done.
func TestRunStartBeforePromptCommit(t *testing.T) {
	url, _, e := ownStoreEnv(t, store.Options{}, func(c *Config) { c.StepDelay = 20 * time.Millisecond })
	ctx := context.Background()
	a := e.dial()
	a.hello()
	sid := a.newSession()

	locker, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer locker.Close(ctx)
	tx, err := locker.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `SELECT 1 FROM sessions WHERE id = $1 FOR UPDATE`, sid)
	require.NoError(t, err)

	a.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":70,"method":"chat.send","params":{"sessionId":%q,"prompt":"held write"}}`, sid))
	var kinds []string
	for len(kinds) < 3 {
		f := a.next()
		require.True(t, isSignalFrame(f), "chat.send answered while its prompt's write was held: %s", f)
		s := parseSignal(t, f)
		if s.session != sid || s.seq == 0 {
			continue
		}
		kinds = append(kinds, s.kind)
		if s.kind == "event" {
			require.Contains(t, string(s.raw), `"kind":"user-prompt"`)
			require.Contains(t, string(s.raw), "held write")
		}
	}
	require.Equal(t, []string{"run:start", "plans:snapshot", "event"}, kinds, "the seed's order")
	n, err := e.st.CountEvents(ctx, sid)
	require.NoError(t, err)
	require.Zero(t, n, "nothing is written while the lock holds")

	time.Sleep(100 * time.Millisecond)
	require.NoError(t, tx.Rollback(ctx))
	m := decodeObj(t, a.nextAnswer())
	require.Nil(t, m["error"], "%v", m)
	require.NotEmpty(t, m["result"].(map[string]any)["runId"])
	a.runSignals(sid)
	evs, err := e.st.LoadEvents(ctx, sid)
	require.NoError(t, err)
	require.NotEmpty(t, evs)
	require.Equal(t, "user-prompt", evs[0].Kind, "the prompt comes first: the run's rows waited for its write")
	require.Contains(t, string(evs[0].Body), "held write")
	require.Equal(t, "run-summary", evs[len(evs)-1].Kind)
}

// A prompt whose write fails is refused after its run:start went out: chat.send answers the
// store's error, the run ends ok:false saying nothing of it is kept, and nothing of it is written
// (field case B29 covers the busy answer; here the run's signals and the transcript).
func TestRefusedPromptKeepsNothing(t *testing.T) {
	e := newEnv(t, nil)
	a := e.dial()
	a.hello()
	sid := a.newSession()
	ctx := context.Background()
	require.Nil(t, a.call("chat.send", fmt.Sprintf(`{"sessionId":%q,"prompt":"first"}`, sid))["error"])
	a.runSignals(sid)

	// Deleted behind the server's back: the write finds no session.
	require.NoError(t, e.st.DeleteSession(ctx, sid))
	m := a.call("chat.send", fmt.Sprintf(`{"sessionId":%q,"prompt":"second"}`, sid))
	require.NotNil(t, m["error"], "%v", m)
	require.Contains(t, fmt.Sprint(m["error"]), "not found")
	sigs := a.runSignals(sid)
	require.Equal(t, "run:start", sigs[0].kind)
	end := string(sigs[len(sigs)-1].raw)
	require.Contains(t, end, `"ok":false`)
	require.True(t, strings.Contains(end, "nothing of this run is kept"), end)
	_, ok := e.srv.sessions.get(sid)
	require.False(t, ok, "the cache forgets the session")
}

// ownStoreEnv is newEnv on a database of its own whose URL the test also gets, to hold rows
// locked from another client (the prompt-write tests), with the store's options opts.
func ownStoreEnv(t *testing.T, opts store.Options, mod func(*Config)) (url string, st *store.Store, e *testEnv) {
	t.Helper()
	url = storetest.URL(t)
	st, err := store.Open(context.Background(), url, opts)
	require.NoError(t, err)
	t.Cleanup(st.Close)
	return url, st, newEnvStore(t, st, mod)
}
