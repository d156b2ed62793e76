package provider

import (
	"context"
	"fmt"
	"time"
)

// RetryPolicy bounds WithRetry.
type RetryPolicy struct {
	// MaxRetries is how many times a failed attempt is repeated (the "at most 3").
	MaxRetries int
	// BaseDelay is the first backoff; each retry doubles it, up to MaxDelay. A server's
	// Retry-After replaces it when longer.
	BaseDelay, MaxDelay time.Duration
	// MaxRetryAfter caps the wait a server may ask for: a longer Retry-After fails at once with
	// an error that names the wait.
	MaxRetryAfter time.Duration
	// OnRetry, when set, is told of each retry before its wait (for logs and status lines).
	OnRetry func(attempt int, wait time.Duration, err *Error)
}

// DefaultRetry is the runtime's policy: 3 retries, 1 s / 2 s / 4 s or the server's Retry-After,
// whichever is longer, and at most a 60 s wait.
var DefaultRetry = RetryPolicy{MaxRetries: 3, BaseDelay: time.Second, MaxDelay: 8 * time.Second, MaxRetryAfter: 60 * time.Second}

// WithRetry returns p retrying a KindRetryable *Error while nothing was streamed yet: at most
// pol.MaxRetries times, waiting the longer of the backoff and the server's Retry-After. An error
// after the first event is returned at once with Streamed set, so an answer is never repeated.
// A cancelled ctx ends a wait at once. The SDKs' own retries must be off (the providers of this
// module turn them off), so attempts are never multiplied.
func WithRetry(p Provider, pol RetryPolicy) Provider { return &retrying{Provider: p, pol: pol} }

type retrying struct {
	Provider
	pol RetryPolicy
}

func (r *retrying) Stream(ctx context.Context, req *Request, on func(Event) error) (Result, error) {
	delay := r.pol.BaseDelay
	for attempt := 0; ; attempt++ {
		streamed := false
		res, err := r.Provider.Stream(ctx, req, func(ev Event) error { streamed = true; return on(ev) })
		if err == nil {
			return res, nil
		}
		e, ok := AsError(err)
		if !ok {
			return res, err
		}
		if streamed {
			e.Streamed = true
		}
		if e.Kind != KindRetryable || e.Streamed || attempt >= r.pol.MaxRetries || ctx.Err() != nil {
			return res, err
		}
		if r.pol.MaxRetryAfter > 0 && e.RetryAfter > r.pol.MaxRetryAfter {
			e2 := *e
			e2.Message = fmt.Sprintf("%s (the server asks to wait %s before retrying, longer than the %s this server waits)", e.Message, e.RetryAfter.Round(time.Second), r.pol.MaxRetryAfter)
			return res, &e2
		}
		wait := max(delay, e.RetryAfter)
		if r.pol.OnRetry != nil {
			r.pol.OnRetry(attempt+1, wait, e)
		}
		if err := Sleep(ctx, wait); err != nil {
			return res, err
		}
		delay = min(2*delay, max(r.pol.MaxDelay, r.pol.BaseDelay))
	}
}

// Sleep waits d or until ctx ends, returning ctx's error then (at once when d <= 0 and ctx is
// done). Providers use it for pauses that a cancel must end.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
