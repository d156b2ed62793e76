package agent

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zidane-server/zidane/protocol"
	"github.com/zidane-server/zidane/server/store"
	"github.com/zidane-server/zidane/server/store/storetest"
)

// runEnds waits until rep holds n run:end signals and returns the last.
func runEnds(t *testing.T, rep *recorder, n int) *protocol.RunEndSignal {
	t.Helper()
	require.Eventually(t, func() bool { return count[*protocol.RunEndSignal](rep) >= n }, 10*time.Second, 5*time.Millisecond, "run:end %d", n)
	rep.mu.Lock()
	defer rep.mu.Unlock()
	var last *protocol.RunEndSignal
	for _, s := range rep.signals {
		if e, ok := s.(*protocol.RunEndSignal); ok {
			last = e
		}
	}
	return last
}

// endFixture opens a store on a fresh database (queryTimeout 0: the default), a runtime on it
// (stepDelay slows the scripted provider) and a session; it returns the database's URL too.
func endFixture(t *testing.T, queryTimeout, stepDelay time.Duration) (string, *store.Store, *recorder, *Runtime, store.Session) {
	t.Helper()
	ctx := context.Background()
	u := storetest.URL(t)
	discard := slog.New(slog.NewTextHandler(io.Discard, nil))
	st, err := store.Open(ctx, u, store.Options{Logger: discard, QueryTimeout: queryTimeout})
	require.NoError(t, err)
	t.Cleanup(st.Close)
	rep := newRecorder()
	rt, err := New(Config{Store: st, Reporter: rep, Logger: discard, StepDelay: stepDelay})
	require.NoError(t, err)
	t.Cleanup(rt.Close)
	x, err := st.CreateSession(ctx, store.Session{Title: "t", AgentID: "build", Status: "idle"})
	require.NoError(t, err)
	return u, st, rep, rt, x
}

// TestFieldCase_T08_TranscriptWriteRefused: a run whose transcript Postgres keeps refusing (a
// constraint refuses its run-summary row, so every flush of it fails) ends with run:end ok:false
// and an error event saying the transcript is not kept, never ok:true; the session's status is
// "error", not "running"; the refused rows are dropped, so the next read of the session
// (Consistent, behind sessions.loadEvents) answers and the next run is stored whole.
func TestFieldCase_T08_TranscriptWriteRefused(t *testing.T) {
	ctx := context.Background()
	u, st, rep, rt, x := endFixture(t, 0, 0)
	pg, err := pgx.Connect(ctx, u)
	require.NoError(t, err)
	t.Cleanup(func() { pg.Close(context.Background()) })
	_, err = pg.Exec(ctx, `ALTER TABLE events ADD CONSTRAINT t08_refuse CHECK (kind <> 'run-summary') NOT VALID`)
	require.NoError(t, err)

	_, stored, err := rt.Start(ctx, x, "Say hello.", nil)
	require.NoError(t, err)
	require.NoError(t, stored(ctx), "the prompt is stored")
	end := runEnds(t, rep, 1)
	assert.False(t, end.OK, "run:end ok:true for a transcript that is not stored")
	require.NotNil(t, end.Error)
	assert.Contains(t, *end.Error, "transcript could not be stored")
	var lastErr string
	rep.mu.Lock()
	for _, s := range rep.signals {
		if e, ok := s.(*protocol.EventSignal); ok {
			if ev, ok := e.Event.(*protocol.ErrorEvent); ok {
				lastErr = ev.Message
			}
		}
	}
	rep.mu.Unlock()
	assert.Equal(t, *end.Error, lastErr, "an error event says it before run:end")
	got, err := st.GetSession(ctx, x.ID)
	require.NoError(t, err)
	assert.Equal(t, "error", got.Status)
	assert.False(t, rt.IsRunning(x.ID))
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	require.NoError(t, rt.Consistent(cctx, x.ID, func(protocol.StreamEvent) error { return nil }), "the session reads again")

	_, err = pg.Exec(ctx, `ALTER TABLE events DROP CONSTRAINT t08_refuse`)
	require.NoError(t, err)
	_, stored, err = rt.Start(ctx, x, "Again.", nil)
	require.NoError(t, err)
	require.NoError(t, stored(ctx))
	end = runEnds(t, rep, 2)
	assert.True(t, end.OK, "%+v", end)
	rows, err := st.LoadEvents(ctx, x.ID)
	require.NoError(t, err)
	var kinds []string
	for _, r := range rows {
		kinds = append(kinds, r.Kind)
	}
	require.NotEmpty(t, kinds)
	assert.Equal(t, "user-prompt", kinds[0], "the first prompt was stored at its start")
	assert.Equal(t, "run-summary", kinds[len(kinds)-1], "the second run is stored whole: %v", kinds)
	got, err = st.GetSession(ctx, x.ID)
	require.NoError(t, err)
	assert.Equal(t, "idle", got.Status)
}

// TestFieldCase_T08_DatabaseAwayAtRunEnd: Postgres stops taking connections while a run streams
// (the test database refuses connections, its sessions are ended). The run's end write is retried
// until its bound, then the run ends ok:false saying the transcript is not kept; the status
// "error", which could not be written either, is written once the database is back, so the
// session is not left "running"; the next run is stored.
func TestFieldCase_T08_DatabaseAwayAtRunEnd(t *testing.T) {
	old := endWriteTimeout
	endWriteTimeout = time.Second
	t.Cleanup(func() { endWriteTimeout = old })
	ctx := context.Background()
	u, st, rep, rt, x := endFixture(t, 2*time.Second, 30*time.Millisecond)
	cfg, err := pgx.ParseConfig(u)
	require.NoError(t, err)
	db := cfg.Database
	cfg.Database = "postgres" // the server's maintenance database: ours refuses connections below
	pg, err := pgx.ConnectConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { pg.Close(context.Background()) })

	_, stored, err := rt.Start(ctx, x, "Say hello.", nil)
	require.NoError(t, err)
	require.NoError(t, stored(ctx))
	_, err = pg.Exec(ctx, `ALTER DATABASE `+db+` ALLOW_CONNECTIONS false`)
	require.NoError(t, err)
	_, err = pg.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()`, db)
	require.NoError(t, err)
	require.Zero(t, count[*protocol.RunEndSignal](rep), "the run was still streaming when the database went away")

	end := runEnds(t, rep, 1)
	assert.False(t, end.OK, "run:end ok:true for a transcript that is not stored")
	require.NotNil(t, end.Error)
	assert.Contains(t, *end.Error, "transcript could not be stored")

	_, err = pg.Exec(ctx, `ALTER DATABASE `+db+` ALLOW_CONNECTIONS true`)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		got, err := st.GetSession(ctx, x.ID)
		return err == nil && got.Status == "error"
	}, 10*time.Second, 20*time.Millisecond, "the status is written once the database is back")

	_, stored, err = rt.Start(ctx, x, "Again.", nil)
	require.NoError(t, err)
	require.NoError(t, stored(ctx))
	end = runEnds(t, rep, 2)
	assert.True(t, end.OK, "%+v", end)
	got, err := st.GetSession(ctx, x.ID)
	require.NoError(t, err)
	assert.Equal(t, "idle", got.Status)
}

// TestFieldCase_T08_ShutdownWithStuckDatabase: SIGTERM's shutdown while Postgres hangs (a lock
// holds the transcript's table) stays within its bound: past Shutdown's deadline the run's end
// write gives up, and its run:end (ok:false, saying the transcript is not kept) follows at once
// instead of after the store's own timeout.
func TestFieldCase_T08_ShutdownWithStuckDatabase(t *testing.T) {
	ctx := context.Background()
	u, _, rep, rt, x := endFixture(t, 8*time.Second, 30*time.Millisecond)
	pg, err := pgx.Connect(ctx, u)
	require.NoError(t, err)
	t.Cleanup(func() { pg.Close(context.Background()) })

	_, stored, err := rt.Start(ctx, x, "Say hello.", nil)
	require.NoError(t, err)
	require.NoError(t, stored(ctx))
	waitFor[*protocol.EventSignal](t, rep) // the prompt
	require.Eventually(t, func() bool { return count[*protocol.EventSignal](rep) >= 2 }, 5*time.Second, 5*time.Millisecond, "the run streams")
	tx, err := pg.Begin(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) }) // before the store closes
	_, err = tx.Exec(ctx, `LOCK TABLE events IN ACCESS EXCLUSIVE MODE`)
	require.NoError(t, err)
	require.Zero(t, count[*protocol.RunEndSignal](rep), "the run was still streaming when the database hung")

	start := time.Now()
	sctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	rt.Shutdown(sctx)
	end := runEnds(t, rep, 1)
	took := time.Since(start)
	t.Logf("run:end %s after Shutdown began (its bound: 1 s)", took)
	assert.Less(t, took, 3*time.Second, "the end write gave up at Shutdown's bound")
	assert.False(t, end.OK)
	require.NotNil(t, end.Error)
	assert.Contains(t, *end.Error, "transcript could not be stored")
	require.NoError(t, tx.Rollback(ctx))
}
