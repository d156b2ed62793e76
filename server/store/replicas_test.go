package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zidane-server/zidane/server/store"
	"github.com/zidane-server/zidane/server/store/storetest"
)

// TestRunLeases (issue 25 §2): a session's lease is one replica's while that replica lives; the
// other replica is told who holds it; a late release of an older generation keeps the newer one;
// once the holder's row expired, the lease is not taken before its run was taken over, and
// TakeOverRuns ends the run once (the dead owner's checkpoint, then the error event, status
// interrupted), deletes the dead replica and leaves the live replica's running session alone.
func TestRunLeases(t *testing.T) {
	st := storetest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	require.NoError(t, st.RegisterReplica(ctx, "A", time.Hour))
	require.NoError(t, st.RegisterReplica(ctx, "B", time.Hour))
	mk := func() string {
		x, err := st.CreateSession(ctx, store.Session{Title: "s", Cwd: "/tmp"})
		require.NoError(t, err)
		return x.ID
	}
	s1, s2 := mk(), mk()

	gen, err := st.AcquireLease(ctx, s1, "B", "run-1")
	require.NoError(t, err)
	_, err = st.AcquireLease(ctx, s1, "A", "run-2")
	var held *store.LeaseHeldError
	require.ErrorAs(t, err, &held)
	assert.Equal(t, "B", held.Replica)
	owner, live, err := st.LeaseOwner(ctx, s1)
	require.NoError(t, err)
	assert.Equal(t, "B", owner)
	assert.True(t, live)

	gen2, err := st.AcquireLease(ctx, s1, "B", "run-3") // B again: a new generation
	require.NoError(t, err)
	require.NotEqual(t, gen, gen2)
	require.NoError(t, st.ReleaseLease(ctx, s1, gen)) // late release of the older one
	owner, _, err = st.LeaseOwner(ctx, s1)
	require.NoError(t, err)
	assert.Equal(t, "B", owner, "the newer generation is kept")

	// s1 runs on B, s2 on A; B dies.
	_, err = st.StartRun(ctx, s1, nil, "")
	require.NoError(t, err)
	_, err = st.AcquireLease(ctx, s2, "A", "run-a")
	require.NoError(t, err)
	_, err = st.StartRun(ctx, s2, nil, "")
	require.NoError(t, err)
	require.NoError(t, st.RegisterReplica(ctx, "B", time.Millisecond))
	require.Eventually(t, func() bool {
		live, err := st.LiveReplicas(ctx)
		return err == nil && len(live) == 1
	}, 5*time.Second, 10*time.Millisecond)
	_, err = st.AcquireLease(ctx, s1, "A", "run-4")
	require.ErrorIs(t, err, store.ErrLeaseHeld, "a dead replica's run is taken over before its lease")
	require.False(t, errors.As(err, &held), "the dead holder is not named as live")

	errorRow := func(sid string) store.EventRow {
		return store.EventRow{SessionID: sid, TurnID: "t", Kind: "error", Body: []byte(`{"kind":"error","message":"interrupted"}`)}
	}
	taken, err := st.TakeOverRuns(ctx, "A", false, errorRow, nil)
	require.NoError(t, err)
	require.Equal(t, []store.TakenRun{{SessionID: s1, RunID: "run-3", Replica: "B"}}, taken)
	again, err := st.TakeOverRuns(ctx, "A", false, errorRow, nil)
	require.NoError(t, err)
	assert.Empty(t, again, "each run is taken over once")
	x, err := st.GetSession(ctx, s1)
	require.NoError(t, err)
	assert.Equal(t, "interrupted", x.Status)
	x, err = st.GetSession(ctx, s2)
	require.NoError(t, err)
	assert.Equal(t, "running", x.Status, "the live replica's run is left alone")
	_, err = st.AcquireLease(ctx, s1, "A", "run-5")
	require.NoError(t, err, "the session takes prompts on A now")

	// A restarted replica ends its own leftovers at its start.
	taken, err = st.TakeOverRuns(ctx, "A", true, errorRow, nil)
	require.NoError(t, err)
	require.Equal(t, []store.TakenRun{{SessionID: s2, RunID: "run-a", Replica: "A"}}, taken)
}

// TestReplicaCalls: a call is announced to its target, claimed once, answered, and its reply read.
func TestReplicaCalls(t *testing.T) {
	url := storetest.URL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	a, err := store.Open(ctx, url, store.Options{})
	require.NoError(t, err)
	defer a.Close()
	b, err := store.Open(ctx, url, store.Options{})
	require.NoError(t, err)
	defer b.Close()
	notes := make(chan string, 4)
	listening := make(chan struct{}, 1)
	lctx, lcancel := context.WithCancel(ctx)
	defer lcancel()
	go b.Listen(lctx, 100*time.Millisecond, map[string]func(string){store.ReplicaCallChannel: func(p string) { notes <- p }},
		func() { listening <- struct{}{} })
	<-listening
	id, err := a.CallReplica(ctx, "B", `{"method":"chat.cancel"}`)
	require.NoError(t, err)
	target, got, ok := store.ParseCallNotice(<-notes)
	require.True(t, ok)
	assert.Equal(t, "B", target)
	assert.Equal(t, id, got)
	pending, err := b.PendingCalls(ctx, "B")
	require.NoError(t, err)
	assert.Equal(t, []int64{id}, pending)
	body, err := b.TakeCall(ctx, id, "B")
	require.NoError(t, err)
	assert.Equal(t, `{"method":"chat.cancel"}`, body)
	_, err = b.TakeCall(ctx, id, "B")
	require.ErrorIs(t, err, store.ErrNotFound, "claimed once")
	reply, err := a.CallReply(ctx, id)
	require.NoError(t, err)
	assert.Empty(t, reply, "no reply yet")
	require.NoError(t, b.ReplyCall(ctx, id, `{"result":{}}`))
	reply, err = a.CallReply(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, `{"result":{}}`, reply)
	require.NoError(t, a.EndCall(ctx, id))
	_, err = a.CallReply(ctx, id)
	require.ErrorIs(t, err, store.ErrNotFound)
}

// TestSignalMark (issue 25 §1, migration 00100): StartRun and FlushTranscript record the $seq of
// the last signalled row of each session as its signal mark (rows without a signal leave it),
// TranscriptMark reads it with the running state, and TakeOverRuns hands it to unwritten and
// records the mark of the rows it returns.
func TestSignalMark(t *testing.T) {
	st := storetest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	x, err := st.CreateSession(ctx, store.Session{Title: "s", Cwd: "/tmp"})
	require.NoError(t, err)
	row := func(kind string, seq int64) store.EventRow {
		return store.EventRow{SessionID: x.ID, TurnID: "t", Kind: kind, Body: []byte(`{"kind":"` + kind + `"}`), SignalSeq: seq, SignalEpoch: "e1"}
	}
	m, err := st.TranscriptMark(ctx, x.ID)
	require.NoError(t, err)
	assert.Equal(t, store.SignalMark{}, m.Signal)
	_, err = st.StartRun(ctx, x.ID, []store.EventRow{row("user-prompt", 2)}, "")
	require.NoError(t, err)
	m, err = st.TranscriptMark(ctx, x.ID)
	require.NoError(t, err)
	assert.Equal(t, store.SignalMark{Seq: 2, Epoch: "e1"}, m.Signal)
	assert.True(t, m.Running)
	_, err = st.FlushTranscript(ctx, store.TranscriptBatch{Rows: []store.EventRow{row("markdown", 7), row("compaction", 0)}})
	require.NoError(t, err)
	m, err = st.TranscriptMark(ctx, x.ID)
	require.NoError(t, err)
	assert.Equal(t, store.SignalMark{Seq: 7, Epoch: "e1"}, m.Signal, "the last signalled row's; an unsignalled one leaves it")
	assert.Equal(t, 3, m.Events)

	// Its owner is gone (no lease): the takeover is told the mark and records the tail's.
	var told store.SignalMark
	_, err = st.TakeOverRuns(ctx, "A", false, func(sid string) store.EventRow { return row("error", 0) },
		func(_ context.Context, sid string, after store.SignalMark) []store.EventRow {
			told = after
			return []store.EventRow{row("markdown", 9)}
		})
	require.NoError(t, err)
	assert.Equal(t, store.SignalMark{Seq: 7, Epoch: "e1"}, told)
	m, err = st.TranscriptMark(ctx, x.ID)
	require.NoError(t, err)
	assert.Equal(t, store.SignalMark{Seq: 9, Epoch: "e1"}, m.Signal)
	assert.False(t, m.Running)
	assert.Equal(t, 5, m.Events, "the tail and the error event")
}
