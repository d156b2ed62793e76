package store_test

import (
	"context"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zidane-server/zidane/server/store"
	"github.com/zidane-server/zidane/server/store/storetest"
)

// countingHandler counts log records by level and message, and keeps the text of those at
// info level and above.
type countingHandler struct {
	mu    sync.Mutex
	n     map[string]int // "LEVEL msg"
	lines []string
}

func (h *countingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *countingHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.n[r.Level.String()+" "+r.Message]++
	if r.Level >= slog.LevelInfo {
		line := r.Time.Format("05.000") + " " + r.Level.String() + " " + r.Message
		r.Attrs(func(a slog.Attr) bool { line += " " + a.String(); return true })
		h.lines = append(h.lines, line)
	}
	return nil
}

// dump logs the kept lines when t failed.
func (h *countingHandler) dump(t *testing.T) {
	if t.Failed() {
		h.mu.Lock()
		defer h.mu.Unlock()
		t.Logf("log:\n%s", strings.Join(h.lines, "\n"))
	}
}
func (h *countingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *countingHandler) WithGroup(string) slog.Handler      { return h }
func (h *countingHandler) count(key string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n[key]
}

// TestFieldCase_T13_ListenerWarningRateLimited (issue 22 item 3): while its database is away
// (here dropped, as on an external server), the token revocation listener retries without
// logging a warning per attempt (T13 observed one a second, for ever): one warning, the retries
// at debug level, and one line when it listens again.
func TestFieldCase_T13_ListenerWarningRateLimited(t *testing.T) {
	u := storetest.URL(t)
	h := &countingHandler{n: map[string]int{}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := store.Open(ctx, u, store.Options{Logger: slog.New(h), QueryTimeout: 2 * time.Second})
	require.NoError(t, err)
	defer st.Close()

	listens := make(chan struct{}, 16)
	lctx, lcancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		st.ListenTokenRevocations(lctx, 5*time.Millisecond, func(string) {}, func() { listens <- struct{}{} })
	}()
	defer func() { lcancel(); <-done }()
	<-listens

	// The database goes away: every reconnect fails.
	pu, err := url.Parse(u)
	require.NoError(t, err)
	name := strings.TrimPrefix(pu.Path, "/")
	pu.Path = "/postgres"
	admin, err := pgx.Connect(ctx, pu.String())
	require.NoError(t, err)
	defer admin.Close(ctx)
	_, err = admin.Exec(ctx, `DROP DATABASE `+name+` WITH (FORCE)`)
	require.NoError(t, err)

	const warn = "WARN store: token revocation listener stopped; retrying"
	const retry = "DEBUG store: token revocation listener: retry failed"
	require.Eventually(t, func() bool { return h.count(retry)+h.count(warn) >= 30 }, 20*time.Second, 5*time.Millisecond,
		"the listener keeps retrying")
	assert.Equal(t, 1, h.count(warn), "one warning for the outage, not one per attempt")

	_, err = admin.Exec(ctx, `CREATE DATABASE `+name)
	require.NoError(t, err)
	select {
	case <-listens:
	case <-time.After(20 * time.Second):
		t.Fatal("the listener did not listen again")
	}
	assert.Equal(t, 1, h.count("INFO store: token revocation listener listens again"))
	assert.Equal(t, 1, h.count(warn))
}
