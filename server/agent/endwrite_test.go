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

// TestFieldCase_T08_TranscriptWriteRefused: a run whose transcript Postgres keeps refusing (a
// constraint refuses its run-summary row, so every flush of it fails) ends with run:end ok:false
// and an error event saying the transcript is not kept, never ok:true; the session's status is
// "error", not "running"; the refused rows are dropped, so the next read of the session
// (Consistent, behind sessions.loadEvents) answers and the next run is stored whole.
func TestFieldCase_T08_TranscriptWriteRefused(t *testing.T) {
	ctx := context.Background()
	u := storetest.URL(t)
	st, err := store.Open(ctx, u, store.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	t.Cleanup(st.Close)
	rep := newRecorder()
	rt, err := New(Config{Store: st, Reporter: rep, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	t.Cleanup(rt.Close)
	x, err := st.CreateSession(ctx, store.Session{Title: "t", AgentID: "build", Status: "idle"})
	require.NoError(t, err)
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
