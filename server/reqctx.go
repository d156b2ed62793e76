package server

import (
	"context"
	"sync/atomic"
	"time"
)

// reqCtx is the context a request's handler runs with: the connection's context (cancelled when
// the connection ends), the request's afterAnswer hooks, and a deadline Limits.RequestTimeout
// after the request started; it ends (Canceled) when the request has been answered.
//
// It is context.WithValue over context.WithTimeout in one value whose timer is armed only when
// something waits for the context to end (Done: a query, a derived context, a select). Most
// requests never wait, and those two contexts with their timer cost about a tenth of the server's
// CPU in a `$/ping` or `daemon.info` round trip (BenchmarkPingInProcess, before: 2 µs of 20).
type reqCtx struct {
	parent   context.Context // the connection's
	deadline time.Time
	hooks    []func()                 // afterAnswer's, read by the request's caller once it ends
	order    *orderTicket             // an ordered request's place (order.go); nil otherwise
	timed    atomic.Pointer[armedCtx] // nil until Done; requestEnded once ended
}

// armedCtx is a reqCtx's parent with its deadline, made by the first Done.
type armedCtx struct {
	ctx    context.Context
	cancel context.CancelFunc
}

// requestEnded stands for the armed context of an ended request: done, Canceled.
var requestEnded = func() *armedCtx {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return &armedCtx{ctx: ctx}
}()

func newReqCtx(parent context.Context, timeout time.Duration) *reqCtx {
	return &reqCtx{parent: parent, deadline: time.Now().Add(timeout)}
}

// arm returns the context that carries the deadline, making it on first use.
func (r *reqCtx) arm() context.Context {
	if t := r.timed.Load(); t != nil {
		return t.ctx
	}
	ctx, cancel := context.WithDeadline(r.parent, r.deadline)
	t := &armedCtx{ctx: ctx, cancel: cancel}
	if !r.timed.CompareAndSwap(nil, t) { // armed (or ended) meanwhile
		cancel()
		t = r.timed.Load()
	}
	return t.ctx
}

// end ends the context once the request is answered, releasing its timer if one was armed.
func (r *reqCtx) end() {
	if t := r.timed.Swap(requestEnded); t != nil && t.cancel != nil {
		t.cancel()
	}
}

func (r *reqCtx) Deadline() (time.Time, bool) { return r.deadline, true }

func (r *reqCtx) Done() <-chan struct{} { return r.arm().Done() }

func (r *reqCtx) Err() error {
	if t := r.timed.Load(); t != nil {
		return t.ctx.Err()
	}
	if err := r.parent.Err(); err != nil {
		return err
	}
	if !time.Now().Before(r.deadline) {
		return context.DeadlineExceeded
	}
	return nil
}

// Value answers the request's afterAnswer hooks (none once it ended: afterAnswer then runs a hook
// at once) and forwards every other key, to the armed context while there is one (the standard
// library finds the cancelCtx behind Done that way).
func (r *reqCtx) Value(key any) any {
	t := r.timed.Load()
	if key == (orderKey{}) {
		return r.order
	}
	if key == (afterKey{}) {
		if t == requestEnded {
			return (*[]func())(nil)
		}
		return &r.hooks
	}
	if t != nil && t != requestEnded {
		return t.ctx.Value(key)
	}
	return r.parent.Value(key)
}
