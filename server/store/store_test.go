package store_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
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

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// openURL opens a store on a fresh database and also returns a raw
// connection to it for inspecting tables.
func openURL(t *testing.T) (*store.Store, *pgx.Conn, string) {
	t.Helper()
	u := storetest.URL(t)
	ctx := context.Background()
	s, err := store.Open(ctx, u, store.Options{Logger: quiet})
	require.NoError(t, err)
	t.Cleanup(s.Close)
	c, err := pgx.Connect(ctx, u)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close(context.Background()) })
	return s, c, u
}

func TestHostIDStableAcrossReopen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	u := storetest.URL(t)
	s, err := store.Open(ctx, u, store.Options{Logger: quiet})
	require.NoError(t, err)
	id1, err := s.HostID(ctx)
	require.NoError(t, err)
	require.Len(t, id1, 36)
	id1b, err := s.HostID(ctx)
	require.NoError(t, err)
	assert.Equal(t, id1, id1b)
	require.NoError(t, s.Ping(ctx))
	s.Close()

	s, err = store.Open(ctx, u, store.Options{Logger: quiet})
	require.NoError(t, err)
	defer s.Close()
	id2, err := s.HostID(ctx)
	require.NoError(t, err)
	assert.Equal(t, id1, id2)
}

func TestTokens(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, raw, _ := openURL(t)

	plain, tok, err := s.CreateToken(ctx, "laptop", store.ScopeChat)
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(plain, "zds_"))
	assert.Len(t, plain, 4+43)
	assert.Equal(t, "laptop", tok.Name)
	assert.Equal(t, "chat", tok.Scope)
	assert.Nil(t, tok.LastUsedAt)
	assert.Nil(t, tok.RevokedAt)
	assert.WithinDuration(t, time.Now(), tok.CreatedAt, time.Minute)

	// Only the SHA-256 is stored: the plaintext appears nowhere in the table.
	var dump string
	require.NoError(t, raw.QueryRow(ctx, `SELECT string_agg(t::text, '|') FROM tokens t`).Scan(&dump))
	assert.NotContains(t, dump, plain)
	assert.NotContains(t, dump, strings.TrimPrefix(plain, "zds_"))
	var hash []byte
	require.NoError(t, raw.QueryRow(ctx, `SELECT hash FROM tokens WHERE name = 'laptop'`).Scan(&hash))
	want := sha256.Sum256([]byte(plain))
	assert.Equal(t, want[:], hash)

	got, err := s.LookupToken(ctx, plain)
	require.NoError(t, err)
	assert.Equal(t, tok.ID, got.ID)
	require.NotNil(t, got.LastUsedAt)
	first := *got.LastUsedAt
	got, err = s.LookupToken(ctx, plain)
	require.NoError(t, err)
	assert.Equal(t, first, *got.LastUsedAt, "last_used_at written at most once a minute")

	_, err = s.LookupToken(ctx, plain+"x")
	assert.ErrorIs(t, err, store.ErrNotFound)
	_, err = s.LookupToken(ctx, "nonsense")
	assert.ErrorIs(t, err, store.ErrNotFound)

	_, _, err = s.CreateToken(ctx, "laptop", store.ScopeAdmin)
	assert.ErrorIs(t, err, store.ErrNameTaken)
	_, _, err = s.CreateToken(ctx, "other", "root")
	assert.ErrorIs(t, err, store.ErrInvalidScope)
	_, _, err = s.CreateToken(ctx, "bad\x00name", store.ScopeChat)
	assert.ErrorIs(t, err, store.ErrInvalidText)
	_, _, err = s.CreateToken(ctx, "", store.ScopeChat)
	assert.Error(t, err)

	plain2, _, err := s.CreateToken(ctx, "ci", store.ScopeMachine)
	require.NoError(t, err)
	assert.NotEqual(t, plain, plain2)

	list, err := s.ListTokens(ctx)
	require.NoError(t, err)
	require.Len(t, list, 2)
	assert.Equal(t, "laptop", list[0].Name)
	assert.Equal(t, "ci", list[1].Name)

	rev, err := s.RevokeToken(ctx, "laptop")
	require.NoError(t, err)
	require.NotNil(t, rev.RevokedAt)
	_, err = s.LookupToken(ctx, plain)
	assert.ErrorIs(t, err, store.ErrNotFound)
	_, err = s.RevokeToken(ctx, "laptop")
	assert.ErrorIs(t, err, store.ErrNotFound)
	_, err = s.RevokeToken(ctx, "nobody")
	assert.ErrorIs(t, err, store.ErrNotFound)

	// The name is free again once revoked.
	plain3, _, err := s.CreateToken(ctx, "laptop", store.ScopeAdmin)
	require.NoError(t, err)
	got, err = s.LookupToken(ctx, plain3)
	require.NoError(t, err)
	assert.Equal(t, "admin", got.Scope)

	list, err = s.ListTokens(ctx)
	require.NoError(t, err)
	require.Len(t, list, 3)
	assert.NotNil(t, list[0].RevokedAt)
}

func TestSessions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.New(t)

	a, err := s.CreateSession(ctx, store.Session{Title: "first ☃", ProjectRoot: "/p", Cwd: "/p/sub", AgentID: "claude", Status: "idle"})
	require.NoError(t, err)
	assert.Len(t, a.ID, 36)
	assert.False(t, a.CreatedAt.IsZero())
	assert.Equal(t, a.CreatedAt, a.UpdatedAt)

	old := time.Now().Add(-time.Hour).Truncate(time.Microsecond)
	b, err := s.CreateSession(ctx, store.Session{ID: "7d1c1b0e-5d6c-4b53-9e43-7ad8d1f1a2b3", Title: "second", CreatedAt: old, Archived: true})
	require.NoError(t, err)
	assert.Equal(t, "7d1c1b0e-5d6c-4b53-9e43-7ad8d1f1a2b3", b.ID)
	assert.True(t, b.CreatedAt.Equal(old))
	assert.True(t, b.Archived)

	got, err := s.GetSession(ctx, a.ID)
	require.NoError(t, err)
	assert.Equal(t, a, got)

	list, err := s.ListSessions(ctx)
	require.NoError(t, err)
	require.Len(t, list, 2)
	assert.Equal(t, a.ID, list[0].ID)

	require.NoError(t, s.SetSessionStatus(ctx, b.ID, "running"))
	got, err = s.GetSession(ctx, b.ID)
	require.NoError(t, err)
	assert.Equal(t, "running", got.Status)
	assert.True(t, got.UpdatedAt.After(a.UpdatedAt) || got.UpdatedAt.Equal(a.UpdatedAt))
	list, err = s.ListSessions(ctx)
	require.NoError(t, err)
	assert.Equal(t, b.ID, list[0].ID, "newest updated first")

	_, err = s.GetSession(ctx, "not-a-uuid")
	assert.ErrorIs(t, err, store.ErrNotFound)
	_, err = s.GetSession(ctx, "00000000-0000-0000-0000-000000000000")
	assert.ErrorIs(t, err, store.ErrNotFound)
	assert.ErrorIs(t, s.SetSessionStatus(ctx, "00000000-0000-0000-0000-000000000000", "x"), store.ErrNotFound)
	assert.ErrorIs(t, s.SetSessionStatus(ctx, "nope", "x"), store.ErrNotFound)

	_, err = s.CreateSession(ctx, store.Session{Title: "a\x00b"})
	require.ErrorIs(t, err, store.ErrInvalidText)
	assert.Contains(t, err.Error(), "title")
	_, err = s.CreateSession(ctx, store.Session{Cwd: "bad\xff"})
	require.ErrorIs(t, err, store.ErrInvalidText)
	assert.Contains(t, err.Error(), "cwd")
	assert.ErrorIs(t, s.SetSessionStatus(ctx, a.ID, "\x00"), store.ErrInvalidText)
	_, err = s.CreateSession(ctx, store.Session{ID: a.ID})
	assert.Error(t, err)
}

type posRow struct{ Pos, Turn int }

func positions(t *testing.T, c *pgx.Conn, sid string) []posRow {
	t.Helper()
	rows, err := c.Query(context.Background(), `SELECT pos, turn_pos FROM events WHERE session_id = $1 ORDER BY pos`, sid)
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[posRow])
	require.NoError(t, err)
	return out
}

func ev(sid, turn, text string) store.EventRow {
	b, _ := json.Marshal(map[string]string{"turn": turn, "text": text})
	return store.EventRow{SessionID: sid, TurnID: turn, Kind: "message", Body: b}
}

func TestAppendEventsBatchesAcrossSessionsAndTurns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, raw, _ := openURL(t)
	s1, err := s.CreateSession(ctx, store.Session{Title: "one"})
	require.NoError(t, err)
	s2, err := s.CreateSession(ctx, store.Session{Title: "two"})
	require.NoError(t, err)

	require.NoError(t, s.AppendEvents(ctx, nil))
	require.NoError(t, s.AppendEvents(ctx, []store.EventRow{
		ev(s1.ID, "A", "1"), ev(s2.ID, "X", "1"), ev(s1.ID, "A", "2"),
		ev(s2.ID, "Y", "2"), ev(s1.ID, "B", "3"),
	}))
	assert.Equal(t, []posRow{{0, 0}, {1, 0}, {2, 1}}, positions(t, raw, s1.ID))
	assert.Equal(t, []posRow{{0, 0}, {1, 1}}, positions(t, raw, s2.ID))

	// Turns continue across batches; a new turn id starts the next turn.
	require.NoError(t, s.AppendEvents(ctx, []store.EventRow{
		ev(s2.ID, "Y", "3"), ev(s1.ID, "C", "4"), ev(s1.ID, "C", "5"), ev(s2.ID, "Z", "4"),
	}))
	assert.Equal(t, []posRow{{0, 0}, {1, 0}, {2, 1}, {3, 2}, {4, 2}}, positions(t, raw, s1.ID))
	assert.Equal(t, []posRow{{0, 0}, {1, 1}, {2, 1}, {3, 2}}, positions(t, raw, s2.ID))

	evs, err := s.LoadEvents(ctx, s1.ID)
	require.NoError(t, err)
	require.Len(t, evs, 5)
	var texts []string
	for _, e := range evs {
		var m map[string]string
		require.NoError(t, json.Unmarshal(e.Body, &m))
		texts = append(texts, m["text"])
		assert.Equal(t, s1.ID, e.SessionID)
		assert.Equal(t, "message", e.Kind)
	}
	assert.Equal(t, []string{"1", "2", "3", "4", "5"}, texts)
	assert.Equal(t, "C", evs[4].TurnID)

	n, err := s.CountEvents(ctx, s2.ID)
	require.NoError(t, err)
	assert.Equal(t, 4, n)

	// Unknown session: nothing of the batch is written.
	err = s.AppendEvents(ctx, []store.EventRow{ev(s1.ID, "C", "x"), ev("00000000-0000-0000-0000-000000000000", "Q", "y")})
	assert.ErrorIs(t, err, store.ErrNotFound)
	err = s.AppendEvents(ctx, []store.EventRow{ev("junk", "Q", "y")})
	assert.ErrorIs(t, err, store.ErrNotFound)
	n, err = s.CountEvents(ctx, s1.ID)
	require.NoError(t, err)
	assert.Equal(t, 5, n)

	// Invalid text in turn_id/kind is reported with the field name.
	bad := ev(s1.ID, "t\x00", "x")
	err = s.AppendEvents(ctx, []store.EventRow{bad})
	require.ErrorIs(t, err, store.ErrInvalidText)
	assert.Contains(t, err.Error(), "turn_id")
	bad = ev(s1.ID, "t", "x")
	bad.Kind = "\xc3"
	err = s.AppendEvents(ctx, []store.EventRow{bad})
	require.ErrorIs(t, err, store.ErrInvalidText)
	assert.Contains(t, err.Error(), "kind")

	// Appending bumps the session's updated_at.
	got, err := s.GetSession(ctx, s1.ID)
	require.NoError(t, err)
	assert.True(t, got.UpdatedAt.After(s1.UpdatedAt))
}

func TestAppendEventsNULAndUnicodeRoundTrip(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.New(t)
	sess, err := s.CreateSession(ctx, store.Session{Title: "nul"})
	require.NoError(t, err)

	text := "a\x00b ☃ 😀 \u2028 \u2029 e\u0301 \ufeff <>&"
	body, err := json.Marshal(map[string]any{"type": "delta", "text": text})
	require.NoError(t, err)
	require.Contains(t, string(body), `\u0000`)
	raw := []byte(`{"k":"\u0000\ud83d\ude00 \\u0000 \"q\"",  "sp" : [1, 2 ]}`) // hand-written JSON, odd spacing kept
	require.NoError(t, s.AppendEvents(ctx, []store.EventRow{
		{SessionID: sess.ID, TurnID: "t1", Kind: "delta", Body: body},
		{SessionID: sess.ID, TurnID: "t1", Kind: "raw", Body: raw},
	}))
	evs, err := s.LoadEvents(ctx, sess.ID)
	require.NoError(t, err)
	require.Len(t, evs, 2)
	assert.Equal(t, body, evs[0].Body)
	assert.Equal(t, raw, evs[1].Body)
	var back map[string]string
	require.NoError(t, json.Unmarshal(evs[0].Body, &back))
	assert.Equal(t, text, back["text"])
}

func TestAppendEventsConcurrent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, raw, _ := openURL(t)
	a, err := s.CreateSession(ctx, store.Session{Title: "a"})
	require.NoError(t, err)
	b, err := s.CreateSession(ctx, store.Session{Title: "b"})
	require.NoError(t, err)

	const workers, batches, perBatch = 8, 15, 4
	var wg sync.WaitGroup
	errs := make(chan error, workers*batches)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; k < batches; k++ {
				turn := fmt.Sprintf("w%d-b%d", w, k)
				var rows []store.EventRow
				for i := 0; i < perBatch; i++ {
					// Alternate the session order so lock ordering matters.
					first, second := a.ID, b.ID
					if w%2 == 1 {
						first, second = b.ID, a.ID
					}
					rows = append(rows, ev(first, turn, fmt.Sprint(i)), ev(second, turn, fmt.Sprint(i)))
				}
				if err := s.AppendEvents(ctx, rows); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}

	for _, sid := range []string{a.ID, b.ID} {
		ps := positions(t, raw, sid)
		require.Len(t, ps, workers*batches*perBatch)
		for i, p := range ps {
			require.Equal(t, i, p.Pos, "gap-free positions")
			// Each batch is one whole turn of perBatch events.
			require.Equal(t, i/perBatch, p.Turn)
		}
		evs, err := s.LoadEvents(ctx, sid)
		require.NoError(t, err)
		for i := 0; i < len(evs); i += perBatch {
			for j := 0; j < perBatch; j++ {
				require.Equal(t, evs[i].TurnID, evs[i+j].TurnID, "a batch's events stay contiguous")
			}
		}
		page, err := s.LoadEventsPage(ctx, sid, nil, 1)
		require.NoError(t, err)
		assert.Equal(t, workers*batches, page.Turns)
	}
}

func TestLoadEventsPage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.New(t)
	sess, err := s.CreateSession(ctx, store.Session{Title: "paging"})
	require.NoError(t, err)

	// Turn sizes 2, 3 (split over two batches), 1, 2 => 8 events, 4 turns.
	require.NoError(t, s.AppendEvents(ctx, []store.EventRow{
		ev(sess.ID, "t0", "0"), ev(sess.ID, "t0", "1"), ev(sess.ID, "t1", "2"), ev(sess.ID, "t1", "3"),
	}))
	require.NoError(t, s.AppendEvents(ctx, []store.EventRow{
		ev(sess.ID, "t1", "4"), ev(sess.ID, "t2", "5"), ev(sess.ID, "t3", "6"), ev(sess.ID, "t3", "7"),
	}))
	intp := func(i int) *int { return &i }
	texts := func(p store.Page) []string {
		out := []string{}
		for _, e := range p.Events {
			var m map[string]string
			require.NoError(t, json.Unmarshal(e.Body, &m))
			out = append(out, m["text"])
		}
		return out
	}

	cases := []struct {
		name      string
		before    *int
		limit     int
		first     int
		start     int
		wantTexts []string
	}{
		{"last two turns", nil, 2, 2, 5, []string{"5", "6", "7"}},
		{"last turn", nil, 1, 3, 6, []string{"6", "7"}},
		{"before 2", intp(2), 2, 0, 0, []string{"0", "1", "2", "3", "4"}},
		{"before 2 limit 1", intp(2), 1, 1, 2, []string{"2", "3", "4"}},
		{"before 3 limit 1", intp(3), 1, 2, 5, []string{"5"}},
		{"limit larger than turns", intp(1), 10, 0, 0, []string{"0", "1"}},
		{"before 0", intp(0), 3, 0, 0, []string{}},
		{"before beyond end", intp(99), 1, 3, 6, []string{"6", "7"}},
		{"no limit", nil, 0, 0, 0, []string{"0", "1", "2", "3", "4", "5", "6", "7"}},
	}
	for _, c := range cases {
		p, err := s.LoadEventsPage(ctx, sess.ID, c.before, c.limit)
		require.NoError(t, err, c.name)
		assert.Equal(t, 4, p.Turns, c.name)
		assert.Equal(t, c.first, p.FirstTurn, c.name)
		assert.Equal(t, c.start, p.Start, c.name)
		assert.Equal(t, c.wantTexts, texts(p), c.name)
	}

	empty, err := s.CreateSession(ctx, store.Session{})
	require.NoError(t, err)
	p, err := s.LoadEventsPage(ctx, empty.ID, nil, 5)
	require.NoError(t, err)
	assert.Equal(t, store.Page{Events: []store.EventRow{}}, p)
	_, err = s.LoadEventsPage(ctx, "00000000-0000-0000-0000-000000000000", nil, 5)
	assert.ErrorIs(t, err, store.ErrNotFound)
	_, err = s.LoadEventsPage(ctx, "zzz", nil, 5)
	assert.ErrorIs(t, err, store.ErrNotFound)
}

func TestBusyAndUnavailable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	u := storetest.URL(t)
	s, err := store.Open(ctx, u, store.Options{MaxConns: 1, QueryTimeout: time.Second, Logger: quiet})
	require.NoError(t, err)
	defer s.Close()
	sess, err := s.CreateSession(ctx, store.Session{})
	require.NoError(t, err)

	// Another connection holds the session row lock, so the append blocks
	// and holds the store's only connection.
	c, err := pgx.Connect(ctx, u)
	require.NoError(t, err)
	defer c.Close(ctx)
	tx, err := c.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `SELECT 1 FROM sessions WHERE id = $1 FOR UPDATE`, sess.ID)
	require.NoError(t, err)

	appendErr := make(chan error, 1)
	go func() { appendErr <- s.AppendEvents(ctx, []store.EventRow{ev(sess.ID, "t", "x")}) }()
	time.Sleep(50 * time.Millisecond)
	wctx, wcancel := context.WithTimeout(ctx, 200*time.Millisecond)
	_, err = s.GetSession(wctx, sess.ID)
	wcancel()
	assert.ErrorIs(t, err, store.ErrBusy, "waiting for the only connection")
	assert.ErrorIs(t, <-appendErr, store.ErrBusy, "statement timeout")
	require.NoError(t, tx.Rollback(ctx))

	_, err = s.GetSession(ctx, sess.ID)
	require.NoError(t, err)

	// Caller cancellation is not reported as busy.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = s.GetSession(cctx, sess.ID)
	assert.ErrorIs(t, err, context.Canceled)
	assert.NotErrorIs(t, err, store.ErrBusy)

	_, err = store.Open(ctx, "postgres://nobody@/nodb?host=/nonexistent-zidane-dir&sslmode=disable",
		store.Options{QueryTimeout: 2 * time.Second, Logger: quiet})
	assert.ErrorIs(t, err, store.ErrUnavailable)
}

// FlushTranscript (issue 10): rows, usage rows and a run's end status in one transaction; the
// session returned is the one stored; a status of a session that does not exist is skipped.
func TestFlushTranscriptUsageAndStatus(t *testing.T) {
	s, _, _ := openURL(t)
	ctx := context.Background()
	a, err := s.CreateSession(ctx, store.Session{Title: "a", Status: "running"})
	require.NoError(t, err)
	rows := []store.EventRow{{SessionID: a.ID, TurnID: "t1", Kind: "markdown", Body: []byte(`{"kind":"markdown","text":"done"}`)}}
	usage := []store.TurnUsage{{SessionID: a.ID, RunID: "r", TurnID: "t1", ModelID: "m", Input: 3, Output: 4, Reported: true}}
	missing := "00000000-0000-0000-0000-000000000000"
	x, err := s.FlushTranscript(ctx, store.TranscriptBatch{Rows: rows, Usage: usage, StatusOf: a.ID, Status: "idle"})
	require.NoError(t, err)
	assert.Equal(t, "idle", x.Status)
	got, err := s.GetSession(ctx, a.ID)
	require.NoError(t, err)
	assert.Equal(t, x, got, "the session returned is the one stored")
	x, err = s.FlushTranscript(ctx, store.TranscriptBatch{StatusOf: missing, Status: "idle"})
	require.NoError(t, err)
	assert.Empty(t, x.ID, "the missing session is skipped")
	_, _, total, err := s.UsageSummary(ctx, time.Time{}, 0)
	require.NoError(t, err)
	assert.Equal(t, int64(3), total.TokensIn)
	assert.Equal(t, int64(4), total.TokensOut)
	n, err := s.CountEvents(ctx, a.ID)
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	// Bad text anywhere refuses the whole batch.
	_, err = s.FlushTranscript(ctx, store.TranscriptBatch{Rows: rows, Usage: []store.TurnUsage{{SessionID: a.ID, ModelID: "m\x00"}}})
	assert.ErrorIs(t, err, store.ErrInvalidText)
	n, err = s.CountEvents(ctx, a.ID)
	require.NoError(t, err)
	assert.Equal(t, 1, n)
}

// StartRun (issue 10): the prompt and the status "running" in one transaction; a missing session
// writes nothing; a server killed after it leaves the session for InterruptRunning.
func TestStartRunPromptAndStatusTogether(t *testing.T) {
	s, _, _ := openURL(t)
	ctx := context.Background()
	a, err := s.CreateSession(ctx, store.Session{Title: "a", Status: "idle"})
	require.NoError(t, err)
	rows := []store.EventRow{
		{SessionID: a.ID, TurnID: "t0", Kind: "markdown", Body: []byte(`{"kind":"markdown","text":"queued before"}`)},
		{SessionID: a.ID, TurnID: "t1", Kind: "user-prompt", Body: []byte(`{"kind":"user-prompt","text":"hi","turnId":"t1"}`)},
	}
	x, err := s.StartRun(ctx, a.ID, rows, "")
	require.NoError(t, err)
	assert.Equal(t, "running", x.Status)
	got, err := s.GetSession(ctx, a.ID)
	require.NoError(t, err)
	assert.Equal(t, x, got, "the session returned is the one stored")
	evs, err := s.LoadEvents(ctx, a.ID)
	require.NoError(t, err)
	require.Len(t, evs, 2)
	assert.Equal(t, "user-prompt", evs[1].Kind)

	// A session that does not exist: ErrNotFound, and nothing of the batch is written.
	b, err := s.CreateSession(ctx, store.Session{Title: "b", Status: "idle"})
	require.NoError(t, err)
	mixed := []store.EventRow{{SessionID: b.ID, TurnID: "t", Kind: "user-prompt", Body: []byte(`{}`)}, {SessionID: "00000000-0000-0000-0000-000000000000", TurnID: "t", Kind: "user-prompt", Body: []byte(`{}`)}}
	_, err = s.StartRun(ctx, b.ID, mixed, "")
	assert.ErrorIs(t, err, store.ErrNotFound)
	_, err = s.StartRun(ctx, "00000000-0000-0000-0000-000000000000", nil, "")
	assert.ErrorIs(t, err, store.ErrNotFound)
	got, err = s.GetSession(ctx, b.ID)
	require.NoError(t, err)
	assert.Equal(t, "idle", got.Status)
	n, err := s.CountEvents(ctx, b.ID)
	require.NoError(t, err)
	assert.Zero(t, n)
	// The transcript writer's batch (one round trip) fails the same way, writing nothing.
	_, err = s.FlushTranscript(ctx, store.TranscriptBatch{Rows: mixed})
	assert.ErrorIs(t, err, store.ErrNotFound)
	n, err = s.CountEvents(ctx, b.ID)
	require.NoError(t, err)
	assert.Zero(t, n)

	// Killed after StartRun: the next start's InterruptRunning ends the run.
	ids, err := s.InterruptRunning(ctx, func(sid string) store.EventRow {
		return store.EventRow{SessionID: sid, Kind: "error", Body: []byte(`{"kind":"error","message":"killed"}`)}
	})
	require.NoError(t, err)
	assert.Equal(t, []string{a.ID}, ids)
	x, err = s.SetStatus(ctx, a.ID, "idle")
	require.NoError(t, err)
	assert.Equal(t, "idle", x.Status)
}

// TestSessionVersionCountsEveryWrite (migration 00050): each write of a session, whoever makes
// it, answers a larger Version than the one before; a read answers the row's.
func TestSessionVersionCountsEveryWrite(t *testing.T) {
	s, _, _ := openURL(t)
	ctx := context.Background()
	x, err := s.CreateSession(ctx, store.Session{Title: "a", Status: "idle"})
	require.NoError(t, err)
	last := x.Version
	next := func(what string, y store.Session, err error) {
		t.Helper()
		require.NoError(t, err, what)
		require.Greater(t, y.Version, last, what)
		last = y.Version
	}
	y, err := s.StartRun(ctx, x.ID, []store.EventRow{{SessionID: x.ID, TurnID: "t1", Kind: "user-prompt", Body: []byte(`{"kind":"user-prompt","text":"hi"}`)}}, "")
	next("start run", y, err)
	y, err = s.FlushTranscript(ctx, store.TranscriptBatch{Rows: []store.EventRow{{SessionID: x.ID, TurnID: "t1", Kind: "markdown", Body: []byte(`{"kind":"markdown","text":"a"}`)}}, StatusOf: x.ID, Status: "idle"})
	next("flush with status", y, err)
	y, err = s.StartRun(ctx, x.ID, nil, "Named")
	next("start run with a title", y, err)
	y, err = s.RenameSession(ctx, x.ID, "Renamed")
	next("rename", y, err)
	y, err = s.SetStatus(ctx, x.ID, "idle")
	next("same status again", y, err)
	// A flush of rows alone (append_events) counts too: the next write answers more than one step.
	_, err = s.FlushTranscript(ctx, store.TranscriptBatch{Rows: []store.EventRow{{SessionID: x.ID, TurnID: "t1", Kind: "markdown", Body: []byte(`{"kind":"markdown","text":"b"}`)}}})
	require.NoError(t, err)
	got, err := s.GetSession(ctx, x.ID)
	require.NoError(t, err)
	require.Greater(t, got.Version, last)
}

// TestStartRunNamesTheSession: the first prompt stored names a session nobody named, in its
// start's transaction; later prompts, and an empty title, leave the name (pipelined chat.send
// answers named the session after the second prompt when the handler named it).
func TestStartRunNamesTheSession(t *testing.T) {
	s := storetest.New(t)
	ctx := context.Background()
	x, err := s.CreateSession(ctx, store.Session{Title: "New session", AgentID: "build", Status: "idle"})
	require.NoError(t, err)
	y, err := s.StartRun(ctx, x.ID, nil, "")
	require.NoError(t, err)
	assert.Equal(t, "New session", y.Title)
	assert.False(t, y.TitleSet)
	y, err = s.StartRun(ctx, x.ID, nil, "first")
	require.NoError(t, err)
	assert.Equal(t, "first", y.Title)
	assert.True(t, y.TitleSet)
	y, err = s.StartRun(ctx, x.ID, nil, "second")
	require.NoError(t, err)
	assert.Equal(t, "first", y.Title)
	named, err := s.CreateSession(ctx, store.Session{Title: "Budget", TitleSet: true, AgentID: "build", Status: "idle"})
	require.NoError(t, err)
	y, err = s.StartRun(ctx, named.ID, nil, "Plan the trip")
	require.NoError(t, err)
	assert.Equal(t, "Budget", y.Title)
	_, err = s.StartRun(ctx, x.ID, nil, "bad\x00title")
	require.ErrorIs(t, err, store.ErrInvalidText)
}
