package jetstream_test

import (
	"context"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zidane-server/zidane/server/hub/jetstream"
	"github.com/zidane-server/zidane/server/hub/jetstream/natstest"
)

// recorder collects what a bus applies.
type recorder struct {
	mu     sync.Mutex
	got    []jetstream.Message
	resets []string
}

func (r *recorder) apply(m jetstream.Message) { r.mu.Lock(); r.got = append(r.got, m); r.mu.Unlock() }
func (r *recorder) reset(e string)            { r.mu.Lock(); r.resets = append(r.resets, e); r.mu.Unlock() }
func (r *recorder) seqs(session string) []int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []int64
	for _, m := range r.got {
		if m.Session == session {
			out = append(out, m.Seq)
		}
	}
	return out
}

func open(t *testing.T, url string, rec *recorder) *jetstream.Bus {
	t.Helper()
	b, err := jetstream.Open(context.Background(), jetstream.Config{URL: url, Replica: uuid.NewString(), Logger: slog.New(slog.DiscardHandler), Apply: rec.apply, Reset: rec.reset,
		Limits: jetstream.Limits{PerSessionSignals: 2000, PerSessionBytes: 4 << 20, TotalBytes: 32 << 20}})
	require.NoError(t, err)
	t.Cleanup(b.Close)
	return b
}

func upTo(n int64) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = int64(i + 1)
	}
	return out
}

// Two replicas publishing to one session at once never take the same $seq and leave no gap:
// every replica applies 1..n in the same order.
func TestConcurrentReplicasNumberAlike(t *testing.T) {
	ns := natstest.Start(t)
	ra, rb := &recorder{}, &recorder{}
	a, b := open(t, ns.URL, ra), open(t, ns.URL, rb)
	require.Equal(t, a.Epoch(), b.Epoch(), "the epoch names the stream")
	sid := uuid.NewString()
	const per = 150
	var wg sync.WaitGroup
	taken := make(chan int64, 2*per)
	for _, bus := range []*jetstream.Bus{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < per; i++ {
				seq, sseq, err := bus.Publish(context.Background(), sid, "event", []byte(`{"kind":"event","i":`+strconv.Itoa(i)+`}`), "")
				if !assert.NoError(t, err) {
					return
				}
				assert.NoError(t, bus.WaitApplied(context.Background(), sseq))
				taken <- seq
			}
		}()
	}
	wg.Wait()
	close(taken)
	seen := map[int64]bool{}
	for s := range taken {
		require.False(t, seen[s], "$seq %d taken twice", s)
		seen[s] = true
	}
	require.NoError(t, a.Barrier(context.Background(), sid))
	require.NoError(t, b.Barrier(context.Background(), sid))
	assert.Equal(t, upTo(2*per), ra.seqs(sid), "replica A applies 1..n in order")
	assert.Equal(t, upTo(2*per), rb.seqs(sid), "replica B applies the same")
}

// A session whose every signal left the stream (purged, as the stream's byte limit evicts)
// continues after its last $seq, from the key-value floor, on a replica that never saw it.
func TestSeqSurvivesEviction(t *testing.T) {
	ns := natstest.Start(t)
	ra := &recorder{}
	a := open(t, ns.URL, ra)
	sid := uuid.NewString()
	var last uint64
	for i := 0; i < 5; i++ {
		_, sseq, err := a.Publish(context.Background(), sid, "event", []byte(`{"kind":"event"}`), "")
		require.NoError(t, err)
		last = sseq
	}
	require.NoError(t, a.PurgeBefore(context.Background(), sid, last+1))
	// The floor is written off the publish path: it is there once a fresh replica reads 5 from it.
	nc, err := nats.Connect(ns.URL)
	require.NoError(t, err)
	defer nc.Close()
	js, err := natsjs.New(nc)
	require.NoError(t, err)
	kv, err := js.KeyValue(context.Background(), jetstream.DefaultStream+"-seq")
	require.NoError(t, err)
	w, err := kv.Watch(context.Background(), sid)
	require.NoError(t, err)
	defer w.Stop()
	deadline := time.After(10 * time.Second)
	for floor := ""; floor != "5"; {
		select {
		case e := <-w.Updates():
			if e != nil {
				floor = string(e.Value())
			}
		case <-deadline:
			t.Fatal("the $seq floor was not written within 10 s")
		}
	}
	b := open(t, ns.URL, &recorder{})
	seq, _, err := b.Publish(context.Background(), sid, "event", []byte(`{"kind":"event"}`), "")
	require.NoError(t, err)
	assert.Equal(t, int64(6), seq, "no $seq is reused within the epoch")
}

// A stream created again (lost with the NATS server's store) is a new epoch: the replica is
// told (Reset) and numbers from 1 in it.
func TestRecreatedStreamIsANewEpoch(t *testing.T) {
	ns := natstest.Start(t)
	ra := &recorder{}
	a := open(t, ns.URL, ra)
	before := a.Epoch()
	sid := uuid.NewString()
	_, _, err := a.Publish(context.Background(), sid, "event", []byte(`{"kind":"event"}`), "")
	require.NoError(t, err)
	nc, err := nats.Connect(ns.URL)
	require.NoError(t, err)
	defer nc.Close()
	js, err := natsjs.New(nc)
	require.NoError(t, err)
	require.NoError(t, js.DeleteStream(context.Background(), jetstream.DefaultStream))
	require.NoError(t, js.DeleteKeyValue(context.Background(), jetstream.DefaultStream+"-seq"))
	ns.Restart() // the replica reconnects and finds the stream gone
	require.Eventually(t, func() bool { ra.mu.Lock(); defer ra.mu.Unlock(); return len(ra.resets) > 0 }, 20*time.Second, 10*time.Millisecond, "Reset after the stream is created again")
	ra.mu.Lock()
	assert.Equal(t, []string{a.Epoch()}, ra.resets)
	ra.mu.Unlock()
	assert.NotEqual(t, before, a.Epoch())
	seq, _, err := a.Publish(context.Background(), sid, "event", []byte(`{"kind":"event"}`), "")
	require.NoError(t, err)
	assert.Equal(t, int64(1), seq, "a new epoch numbers from 1")
}

// Since returns a session's signals after a $seq, whoever published them, and only that
// session's; nothing after the last; ErrGap once the stream lost the one right after it.
func TestSinceReadsTheSessionAfterASeq(t *testing.T) {
	ns := natstest.Start(t)
	a, b := open(t, ns.URL, &recorder{}), open(t, ns.URL, &recorder{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sid, other := uuid.NewString(), uuid.NewString()
	var last uint64
	for i := 1; i <= 6; i++ {
		bus := a
		if i%2 == 0 {
			bus = b
		}
		_, sseq, err := bus.Publish(ctx, sid, "event", []byte(`{"kind":"event","i":`+strconv.Itoa(i)+`}`), "")
		require.NoError(t, err)
		_, _, err = bus.Publish(ctx, other, "event", []byte(`{"kind":"event"}`), "")
		require.NoError(t, err)
		last = sseq
	}
	got, err := a.Since(ctx, sid, 3)
	require.NoError(t, err)
	var seqs []int64
	for _, m := range got {
		assert.Equal(t, sid, m.Session)
		assert.JSONEq(t, `{"kind":"event","i":`+strconv.FormatInt(m.Seq, 10)+`}`, string(m.Body))
		seqs = append(seqs, m.Seq)
	}
	assert.Equal(t, []int64{4, 5, 6}, seqs, "another replica's signals too, in order")
	got, err = b.Since(ctx, sid, 6)
	require.NoError(t, err)
	assert.Empty(t, got)
	got, err = a.Since(ctx, uuid.NewString(), 0)
	require.NoError(t, err)
	assert.Empty(t, got, "a session never signalled")

	require.NoError(t, a.PurgeBefore(ctx, sid, last)) // only $seq 6 left
	_, err = a.Since(ctx, sid, 3)
	require.ErrorIs(t, err, jetstream.ErrGap)
	got, err = a.Since(ctx, sid, 5)
	require.NoError(t, err)
	require.Len(t, got, 1)
	assert.Equal(t, int64(6), got[0].Seq)
}
