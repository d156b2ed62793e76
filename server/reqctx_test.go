package server

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func requireDone(t *testing.T, ctx context.Context, want error) {
	t.Helper()
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("context not done")
	}
	require.ErrorIs(t, ctx.Err(), want)
}

// TestReqCtx: a request's context behaves as context.WithValue over context.WithTimeout of the
// connection's, cancelled when the request ends, whether or not its timer was ever armed.
func TestReqCtx(t *testing.T) {
	type key struct{}
	conn := func() (context.Context, context.CancelFunc) {
		return context.WithCancel(context.WithValue(context.Background(), key{}, "conn"))
	}
	t.Run("values", func(t *testing.T) {
		p, cancel := conn()
		defer cancel()
		r := newReqCtx(p, time.Minute)
		require.Equal(t, "conn", r.Value(key{}))
		afterAnswer(r, func() {})
		require.Len(t, r.hooks, 1)
		d, ok := r.Deadline()
		require.True(t, ok)
		require.WithinDuration(t, time.Now().Add(time.Minute), d, 5*time.Second)
		require.NoError(t, r.Err())
		require.Nil(t, r.timed.Load(), "Value, Deadline and Err arm no timer")
		r.end()
		ran := false
		afterAnswer(r, func() { ran = true })
		require.True(t, ran, "a hook added once the request ended runs at once")
		require.Len(t, r.hooks, 1)
	})
	t.Run("deadline", func(t *testing.T) {
		p, cancel := conn()
		defer cancel()
		r := newReqCtx(p, 30*time.Millisecond)
		defer r.end()
		child, ccancel := context.WithCancel(r)
		defer ccancel()
		requireDone(t, r, context.DeadlineExceeded)
		requireDone(t, child, context.DeadlineExceeded)
		r2 := newReqCtx(p, time.Millisecond)
		defer r2.end()
		time.Sleep(5 * time.Millisecond)
		require.ErrorIs(t, r2.Err(), context.DeadlineExceeded, "unarmed, past the deadline")
		requireDone(t, r2, context.DeadlineExceeded)
	})
	t.Run("connection ends", func(t *testing.T) {
		p, cancel := conn()
		armed, unarmed := newReqCtx(p, time.Minute), newReqCtx(p, time.Minute)
		defer armed.end()
		defer unarmed.end()
		child, ccancel := context.WithCancel(armed)
		defer ccancel()
		_ = armed.Done()
		cancel()
		requireDone(t, child, context.Canceled)
		requireDone(t, armed, context.Canceled)
		require.ErrorIs(t, unarmed.Err(), context.Canceled)
		requireDone(t, unarmed, context.Canceled)
	})
	t.Run("request ends", func(t *testing.T) {
		p, cancel := conn()
		defer cancel()
		armed, unarmed := newReqCtx(p, time.Minute), newReqCtx(p, time.Minute)
		child, ccancel := context.WithCancel(armed)
		defer ccancel()
		armed.end()
		unarmed.end()
		requireDone(t, child, context.Canceled)
		requireDone(t, armed, context.Canceled)
		requireDone(t, unarmed, context.Canceled)
		late, lcancel := context.WithCancel(unarmed)
		defer lcancel()
		requireDone(t, late, context.Canceled)
		require.Equal(t, "conn", late.Value(key{}), "values outlive the request")
		require.NoError(t, p.Err(), "the connection goes on")
	})
}
