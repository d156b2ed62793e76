package agent

import (
	"context"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zidane-server/zidane/protocol"
	"github.com/zidane-server/zidane/server/store"
	"github.com/zidane-server/zidane/server/store/storetest"
)

// panicOnce is a recorder whose first SessionChanged panics: the start's snapshot, told after
// the run learned that its prompt was written.
type panicOnce struct {
	*recorder
	done atomic.Bool
}

func (p *panicOnce) SessionChanged(store.Session) {
	if p.done.CompareAndSwap(false, true) {
		panic("reporter bug")
	}
}

// A panic while telling the session after a run's start is logged: the run, whose prompt is
// stored, goes on and ends ok, and the process does not end (the writer's recover must not close
// the start's outcome a second time).
func TestStartSnapshotPanicKeepsTheRun(t *testing.T) {
	ctx := context.Background()
	st := storetest.New(t)
	rep := &panicOnce{recorder: newRecorder()}
	rt, err := New(Config{Store: st, Reporter: rep, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	t.Cleanup(rt.Close)
	x, err := st.CreateSession(ctx, store.Session{Title: "t", AgentID: "build", Status: "idle"})
	require.NoError(t, err)
	_, stored, err := rt.Start(ctx, x, "Say hello.", nil)
	require.NoError(t, err)
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	require.NoError(t, stored(wctx))
	end := waitFor[*protocol.RunEndSignal](t, rep.recorder)
	assert.True(t, end.OK, "run:end %+v", end)
	assert.True(t, rep.done.Load(), "the start's snapshot was told")
	rows, err := st.LoadEvents(ctx, x.ID)
	require.NoError(t, err)
	require.NotEmpty(t, rows)
	assert.Equal(t, "user-prompt", rows[0].Kind)
	got, err := st.GetSession(ctx, x.ID)
	require.NoError(t, err)
	assert.Equal(t, "idle", got.Status)
}
