package provider

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// flaky fails its first len(errs) attempts with errs[i] (after streaming pre[i] when set), then
// streams "ok".
type flaky struct {
	errs  []*Error
	pre   []string
	calls []time.Time
}

func (f *flaky) Name() string                            { return "flaky" }
func (f *flaky) Models(context.Context) ([]Model, error) { return nil, nil }
func (f *flaky) Stream(ctx context.Context, _ *Request, on func(Event) error) (Result, error) {
	i := len(f.calls)
	f.calls = append(f.calls, time.Now())
	if i < len(f.errs) {
		if i < len(f.pre) && f.pre[i] != "" {
			if err := on(&TextDelta{Text: f.pre[i]}); err != nil {
				return Result{}, err
			}
		}
		e := *f.errs[i]
		return Result{}, &e
	}
	if err := on(&TextDelta{Text: "ok"}); err != nil {
		return Result{}, err
	}
	return Result{Stop: StopEndTurn, Usage: Usage{InputTokens: 1, OutputTokens: 1, Reported: true}}, nil
}

var fast = RetryPolicy{MaxRetries: 3, BaseDelay: time.Millisecond, MaxDelay: 4 * time.Millisecond, MaxRetryAfter: time.Minute}

func collect(t *testing.T, p Provider, ctx context.Context) (string, Result, error) {
	t.Helper()
	text := ""
	res, err := p.Stream(ctx, &Request{Model: "m"}, func(ev Event) error {
		if d, ok := ev.(*TextDelta); ok {
			text += d.Text
		}
		return nil
	})
	return text, res, err
}

func TestRetryHonoursRetryAfterAndAnswersOnce(t *testing.T) {
	rl := &Error{Kind: KindRetryable, Status: 429, RetryAfter: 150 * time.Millisecond, Message: "Rate limit reached"}
	f := &flaky{errs: []*Error{rl, rl}}
	var seen []time.Duration
	pol := fast
	pol.OnRetry = func(attempt int, wait time.Duration, err *Error) { seen = append(seen, wait) }
	text, res, err := collect(t, WithRetry(f, pol), context.Background())
	require.NoError(t, err)
	assert.Equal(t, "ok", text, "the answer arrives once")
	assert.Equal(t, StopEndTurn, res.Stop)
	require.Len(t, f.calls, 3)
	for i := 1; i < 3; i++ {
		assert.GreaterOrEqual(t, f.calls[i].Sub(f.calls[i-1]), 150*time.Millisecond, "gap %d honours Retry-After", i)
	}
	assert.Equal(t, []time.Duration{150 * time.Millisecond, 150 * time.Millisecond}, seen)
}

func TestRetryAtMostThreeTimes(t *testing.T) {
	e500 := &Error{Kind: KindRetryable, Status: 500, Message: "boom"}
	f := &flaky{errs: []*Error{e500, e500, e500, e500}}
	_, _, err := collect(t, WithRetry(f, fast), context.Background())
	pe, ok := AsError(err)
	require.True(t, ok, "%v", err)
	assert.Equal(t, 500, pe.Status)
	assert.Len(t, f.calls, 4, "1 attempt + 3 retries")

	f = &flaky{errs: []*Error{e500, e500, e500}}
	text, _, err := collect(t, WithRetry(f, fast), context.Background())
	require.NoError(t, err)
	assert.Equal(t, "ok", text)
}

func TestRetryNeverAfterAToken(t *testing.T) {
	e := &Error{Kind: KindRetryable, Message: "Overloaded"}
	f := &flaky{errs: []*Error{e}, pre: []string{"Hel"}}
	text, _, err := collect(t, WithRetry(f, fast), context.Background())
	pe, ok := AsError(err)
	require.True(t, ok)
	assert.True(t, pe.Streamed)
	assert.Equal(t, "Hel", text)
	assert.Len(t, f.calls, 1)
	assert.Contains(t, err.Error(), "Overloaded")
}

func TestRetryOnlyRetryableKinds(t *testing.T) {
	for _, k := range []ErrorKind{KindAuth, KindContextTooLong, KindBadRequest, KindBadResponse, KindOther} {
		f := &flaky{errs: []*Error{{Kind: k, Message: "no"}}}
		_, _, err := collect(t, WithRetry(f, fast), context.Background())
		require.Error(t, err)
		assert.Len(t, f.calls, 1, "%s is not retried", k)
	}
}

func TestRetryAfterBeyondTheCapFailsAtOnce(t *testing.T) {
	f := &flaky{errs: []*Error{{Kind: KindRetryable, Status: 429, RetryAfter: time.Hour, Message: "Rate limit reached"}}}
	start := time.Now()
	_, _, err := collect(t, WithRetry(f, fast), context.Background())
	require.Error(t, err)
	assert.Less(t, time.Since(start), time.Second)
	assert.Len(t, f.calls, 1)
	assert.Contains(t, err.Error(), "1h0m0s", "the error names the wait")
}

func TestRetryCancelDuringBackoff(t *testing.T) {
	f := &flaky{errs: []*Error{{Kind: KindRetryable, Status: 429, RetryAfter: 30 * time.Second, Message: "slow down"}}}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	start := time.Now()
	_, _, err := collect(t, WithRetry(f, fast), ctx)
	assert.True(t, errors.Is(err, context.Canceled), "%v", err)
	assert.Less(t, time.Since(start), time.Second)
}

func TestRetryAfterHeaderForms(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	h := http.Header{}
	assert.Equal(t, time.Duration(0), RetryAfter(h, now))
	h.Set("Retry-After", "2")
	assert.Equal(t, 2*time.Second, RetryAfter(h, now))
	h.Set("Retry-After", now.Add(5*time.Second).Format(http.TimeFormat))
	assert.Equal(t, 5*time.Second, RetryAfter(h, now))
	h.Set("Retry-After-Ms", "1500")
	assert.Equal(t, 1500*time.Millisecond, RetryAfter(h, now), "retry-after-ms wins")
	h = http.Header{"Retry-After": {"soon"}}
	assert.Equal(t, time.Duration(0), RetryAfter(h, now))
}

func TestErrorTextNamesTheEnvVar(t *testing.T) {
	e := &Error{Kind: KindAuth, Provider: "openai", Status: 401, Message: "Incorrect API key provided", EnvVar: "OPENAI_API_KEY"}
	assert.Equal(t, "openai (HTTP 401): authentication failed: Incorrect API key provided; set OPENAI_API_KEY to a valid API key", e.Error())
	assert.Equal(t, KindAuth, ClassifyStatus(403))
	assert.Equal(t, KindRetryable, ClassifyStatus(529))
	assert.Equal(t, KindBadRequest, ClassifyStatus(404))
}
