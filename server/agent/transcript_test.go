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

// newRuntime starts a Runtime on a test store with rep and cfg's other settings, and creates a
// session.
func newRuntime(t *testing.T, rep Reporter, cfg Config) (*Runtime, *store.Store, store.Session) {
	t.Helper()
	st := storetest.New(t)
	cfg.Store, cfg.Reporter, cfg.Logger = st, rep, slog.New(slog.NewTextHandler(io.Discard, nil))
	rt, err := New(cfg)
	require.NoError(t, err)
	t.Cleanup(rt.Close)
	x, err := st.CreateSession(context.Background(), store.Session{Title: "t", AgentID: "build", Status: "idle"})
	require.NoError(t, err)
	return rt, st, x
}

// A panic while telling the session after a run's start is logged: the run, whose prompt is
// stored, goes on and ends ok, and the process does not end (the writer's recover must not close
// the start's outcome a second time).
func TestStartSnapshotPanicKeepsTheRun(t *testing.T) {
	ctx := context.Background()
	rep := &panicOnce{recorder: newRecorder()}
	rt, st, x := newRuntime(t, rep, Config{})
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

// A session is deleted only without a run, and no run starts on it while the store deletes it or
// after: a chat.send racing sessions.delete on another connection ran model turns for a session
// that was gone (a break-it helper's report: both answered ok, or the send answered not found
// while its run went on).
func TestDeleteSessionExcludesRuns(t *testing.T) {
	ctx := context.Background()
	rep := newRecorder()
	rt, st, x := newRuntime(t, rep, Config{StepDelay: 20 * time.Millisecond})

	// A run holds the session: the delete is refused and the store is not asked.
	runID, _, err := rt.Start(ctx, x, "Say hello.", nil)
	require.NoError(t, err)
	asked := false
	err = rt.DeleteSession(x.ID, func() error { asked = true; return nil })
	var rf *Refusal
	require.ErrorAs(t, err, &rf)
	assert.False(t, asked)
	require.Eventually(t, func() bool { return !rt.IsRunning(x.ID) }, 10*time.Second, 5*time.Millisecond, "run %s did not end", runID)

	// While the store deletes, a prompt is refused; the delete goes through.
	inDelete, release := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- rt.DeleteSession(x.ID, func() error {
			close(inDelete)
			<-release
			return st.DeleteSession(ctx, x.ID)
		})
	}()
	<-inDelete
	_, _, err = rt.Start(ctx, x, "Again.", nil)
	require.ErrorAs(t, err, &rf)
	assert.Contains(t, rf.Message, "is being deleted")
	close(release)
	require.NoError(t, <-done)

	// After it, a prompt with the session as read before the delete finds it gone, and no run
	// starts.
	_, _, err = rt.Start(ctx, x, "Once more.", nil)
	require.ErrorIs(t, err, store.ErrNotFound)
	assert.False(t, rt.IsRunning(x.ID))
	assert.Equal(t, 1, count[*protocol.RunStartSignal](rep), "only the first prompt ran")

	// A delete the store refuses leaves the session usable.
	y, err := st.CreateSession(ctx, store.Session{Title: "u", AgentID: "build", Status: "idle"})
	require.NoError(t, err)
	require.Error(t, rt.DeleteSession(y.ID, func() error { return store.ErrBusy }))
	_, stored, err := rt.Start(ctx, y, "Still here?", nil)
	require.NoError(t, err)
	require.NoError(t, stored(ctx))
}

// mergePieces (a takeover's stream tail) makes the rows the transcript writer makes of the same
// events: consecutive pieces of one kind and turn are one block, a change of kind or turn or
// any other event closes it, a closed markdown event stays its own row.
func TestMergePiecesAsTheWriter(t *testing.T) {
	md := func(turn, text string) *protocol.MarkdownEvent {
		return &protocol.MarkdownEvent{TurnID: turn, Text: text, Streaming: true}
	}
	th := &protocol.ThinkingEvent{TurnID: "t1", Text: "hm", Streaming: true}
	tool := &protocol.ToolEvent{TurnID: "t1", Text: "ls"}
	closed := &protocol.MarkdownEvent{TurnID: "t2", Text: "whole"}
	got := mergePieces([]protocol.StreamEvent{th, md("t1", "a"), md("t1", "b"), tool, md("t1", "c"), md("t2", "d"), closed, md("t2", "e")})
	want := []protocol.StreamEvent{
		&protocol.ThinkingEvent{TurnID: "t1", Text: "hm"},
		&protocol.MarkdownEvent{TurnID: "t1", Text: "ab"},
		tool,
		&protocol.MarkdownEvent{TurnID: "t1", Text: "c"},
		&protocol.MarkdownEvent{TurnID: "t2", Text: "d"},
		closed,
		&protocol.MarkdownEvent{TurnID: "t2", Text: "e"},
	}
	require.Equal(t, want, got)
	assert.Empty(t, mergePieces(nil))
}
