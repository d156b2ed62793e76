package store_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zidane-server/zidane/server/store"
	"github.com/zidane-server/zidane/server/store/storetest"
)

// TestSearchSessions (issue 28, "Search"): among 1,000 sessions of 100 events each (100,000,
// generated in the database with one set-based insert), a word of one tool result finds that
// session first, at the result's turn, with the word marked in the snippet; an archived session
// only when asked; a path fragment through trigrams; a title; paging by cursor. EXPLAIN shows
// the indexes, never a sequential scan of events.
func TestSearchSessions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	u := storetest.URL(t)
	s, err := store.Open(ctx, u, store.Options{})
	require.NoError(t, err)
	t.Cleanup(s.Close)
	c, err := pgx.Connect(ctx, u)
	require.NoError(t, err)
	defer c.Close(ctx)
	t0 := time.Now()
	require.NoError(t, storetest.SearchCorpus(ctx, c, 1000, 100))
	t.Logf("100,000 events in %v", time.Since(t0))

	// Through the transcript writer's path (AppendEvents with Doc): one tool result of a new
	// session, one markdown of an archived one.
	x, err := s.CreateSession(ctx, store.Session{Title: "Login work", Cwd: "/w/p3"})
	require.NoError(t, err)
	require.NoError(t, s.AppendEvents(ctx, []store.EventRow{
		{SessionID: x.ID, TurnID: "u1", Kind: "user-prompt", Body: []byte(`{"kind":"user-prompt","text":"fix the login","turnId":"u1"}`), Doc: "fix the login"},
		{SessionID: x.ID, TurnID: "m1", Kind: "tool-result", Body: []byte(`{}`), Doc: "server/auth/loginHandler.go:42: the zebrafish token was refused"},
	}))
	a, err := s.CreateSession(ctx, store.Session{Title: "Old", Cwd: "/w/p4"})
	require.NoError(t, err)
	require.NoError(t, s.AppendEvents(ctx, []store.EventRow{{SessionID: a.ID, TurnID: "a1", Kind: "markdown", Body: []byte(`{}`), Doc: "zebrafish again"}}))
	_, err = s.ArchiveSession(ctx, a.ID, true)
	require.NoError(t, err)
	_, err = c.Exec(ctx, `ANALYZE events`)
	require.NoError(t, err)

	search := func(q store.SearchQuery) store.SearchPage {
		t.Helper()
		if q.Limit == 0 {
			q.Limit = 20
		}
		p, err := s.SearchSessions(ctx, q)
		require.NoError(t, err)
		return p
	}
	p := search(store.SearchQuery{Text: "zebrafish"})
	require.Len(t, p.Hits, 1, "the archived session only when asked")
	assert.Equal(t, x.ID, p.Hits[0].Session.ID)
	assert.Equal(t, "m1", p.Hits[0].TurnID)
	assert.Equal(t, "tool-result", p.Hits[0].Kind)
	assert.Contains(t, p.Hits[0].Snippet, "\x01zebrafish\x02")
	p = search(store.SearchQuery{Text: "zebrafish", Archived: true})
	require.Len(t, p.Hits, 2)
	assert.ElementsMatch(t, []string{x.ID, a.ID}, []string{p.Hits[0].Session.ID, p.Hits[1].Session.ID})
	assert.Empty(t, search(store.SearchQuery{Text: "zebrafish", Cwd: "/w/p4"}).Hits, "the folder filter")
	assert.Len(t, search(store.SearchQuery{Text: "zebrafish", Cwd: "/w/p3"}).Hits, 1)

	// An identifier fragment through trigrams, a stemmed word, a title.
	p = search(store.SearchQuery{Text: "loginHandler.go"})
	require.NotEmpty(t, p.Hits)
	assert.Equal(t, x.ID, p.Hits[0].Session.ID)
	assert.Contains(t, p.Hits[0].Snippet, "\x01loginHandler.go\x02")
	assert.Equal(t, x.ID, search(store.SearchQuery{Text: "refusing zebrafish"}).Hits[0].Session.ID, "English stemming")
	p = search(store.SearchQuery{Text: "Session 777"})
	require.NotEmpty(t, p.Hits)
	assert.Equal(t, "Session 777", p.Hits[0].Session.Title, "titles match")

	// Paging: a word of about 100 events of different sessions, 20 at a time, no repeats.
	seen := map[string]bool{}
	q := store.SearchQuery{Text: "w1234", Limit: 20}
	pages := 0
	for {
		p := search(q)
		for _, h := range p.Hits {
			assert.False(t, seen[h.Session.ID], "a session on two pages")
			seen[h.Session.ID] = true
			assert.Contains(t, h.Snippet, "\x01w1234\x02")
		}
		pages++
		if p.Next == "" {
			break
		}
		q.Cursor = p.Next
	}
	assert.Greater(t, pages, 1)
	assert.Greater(t, len(seen), 20)
	_, err = s.SearchSessions(ctx, store.SearchQuery{Text: "x", Cursor: "bogus"})
	assert.ErrorIs(t, err, store.ErrBadSearchCursor)

	// The plans read events through their indexes.
	for _, tc := range []struct {
		trgm bool
		args []any
	}{{false, []any{"zebrafish", "", false, "", 0, 21, "zebrafish"}}, {true, []any{"loginHandler.go", "%loginHandler.go%", true, "/w", 0, 21, "loginHandler.go"}}} {
		var plan []byte
		require.NoError(t, c.QueryRow(ctx, `EXPLAIN (FORMAT JSON) `+store.SearchSQL(tc.trgm), tc.args...).Scan(&plan))
		var v any
		require.NoError(t, json.Unmarshal(plan, &v))
		var nodes []string
		planNodes(v, &nodes)
		t.Logf("trgm %v: %v", tc.trgm, nodes)
		joined := strings.Join(nodes, "\n")
		assert.NotContains(t, joined, "Seq Scan on events", "%s", plan)
		assert.Contains(t, joined, "[events_tsv_idx]")
		if tc.trgm {
			assert.Contains(t, joined, "[events_doc_trgm_idx]")
		}
	}
}
