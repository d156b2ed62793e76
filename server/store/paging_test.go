package store_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zidane-server/zidane/server/store"
	"github.com/zidane-server/zidane/server/store/storetest"
)

// bigSession creates a session holding storetest.BigTranscript(turns), appended in batches.
func bigSession(t *testing.T, s *store.Store, turns int) string {
	t.Helper()
	ctx := context.Background()
	x, err := s.CreateSession(ctx, store.Session{Title: "big"})
	require.NoError(t, err)
	rows := storetest.BigTranscript(x.ID, turns)
	for len(rows) > 0 {
		n := min(len(rows), 5000)
		require.NoError(t, s.AppendEvents(ctx, rows[:n]))
		rows = rows[n:]
	}
	return x.ID
}

// planNodes walks an EXPLAIN (FORMAT JSON) plan and returns "<Node Type> on <Relation>
// [<Index Name>]" for every scan node.
func planNodes(v any, out *[]string) {
	switch x := v.(type) {
	case []any:
		for _, e := range x {
			planNodes(e, out)
		}
	case map[string]any:
		if nt, ok := x["Node Type"].(string); ok {
			rel, hasRel := x["Relation Name"].(string)
			ix, hasIx := x["Index Name"].(string)
			if hasRel || hasIx {
				s := nt
				if hasRel {
					s += " on " + rel
				}
				if hasIx {
					s += " [" + ix + "]"
				}
				*out = append(*out, s)
			}
		}
		for _, e := range x {
			planNodes(e, out)
		}
	}
}

// TestPageQueriesUseAnIndex: the queries of sessions.loadEvents and sessions.getTurns read the
// events of a 10,000-turn session (among others as large, after ANALYZE) through an index, never
// a sequential scan (issue 7, item 8).
func TestPageQueriesUseAnIndex(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	u := storetest.URL(t)
	s, err := store.Open(ctx, u, store.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	t.Cleanup(s.Close)
	t0 := time.Now()
	sid := bigSession(t, s, 10000)
	bigSession(t, s, 10000)
	bigSession(t, s, 10000)
	t.Logf("loaded 3 sessions of 10,000 turns in %v", time.Since(t0))

	c, err := pgx.Connect(ctx, u)
	require.NoError(t, err)
	defer c.Close(ctx)
	_, err = c.Exec(ctx, `ANALYZE`)
	require.NoError(t, err)

	m, err := s.TranscriptMark(ctx, sid)
	require.NoError(t, err)
	require.Equal(t, 10000, m.Turns)
	args := map[string][]any{
		"range":     {sid, m.Turns - 200, m.Turns, m.Events},
		"firstKind": {sid, 5002},
		"start":     {sid, 4000, m.Events},
	}
	for name, q := range store.PageQueries {
		var plan []byte
		require.NoError(t, c.QueryRow(ctx, `EXPLAIN (FORMAT JSON) `+q, args[name]...).Scan(&plan), name)
		var v any
		require.NoError(t, json.Unmarshal(plan, &v))
		var nodes []string
		planNodes(v, &nodes)
		t.Logf("%s: %v", name, nodes)
		require.NotEmpty(t, nodes, name)
		indexed := false
		for _, n := range nodes {
			// An Index (Only) Scan, or a Bitmap Heap Scan fed by a Bitmap Index Scan: never a Seq Scan.
			assert.NotContains(t, n, "Seq Scan", "%s reads events sequentially: %s", name, plan)
			indexed = indexed || strings.Contains(n, "[events_")
		}
		assert.True(t, indexed, "%s reads through no index of events: %v", name, nodes)
	}

	// The pages themselves: a page near the start, one in the middle and the last one.
	for _, before := range []int{200, 5000, 10000} {
		t1 := time.Now()
		p, err := s.LoadEventsPageAt(ctx, sid, m, &before, 200)
		require.NoError(t, err)
		t.Logf("loadEvents page before %d: %d events in %v", before, len(p.Events), time.Since(t1))
		t1 = time.Now()
		tp, err := s.LoadTurnsAt(ctx, sid, m, before-200, 200)
		require.NoError(t, err)
		t.Logf("getTurns page from %d: %d events in %v", before-200, len(tp.Events), time.Since(t1))
	}
}

// TestPagesKeepExchanges: a loadEvents page never starts with a tool-result whose call is in an
// earlier turn, and a getTurns page never ends before such a turn; pages read up to a mark.
func TestPagesKeepExchanges(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.New(t)
	sid := bigSession(t, s, 20)
	m, err := s.TranscriptMark(ctx, sid)
	require.NoError(t, err)
	// Turn 2 starts with the result of turn 1's call: a page cannot start there.
	before := 5
	p, err := s.LoadEventsPageAt(ctx, sid, m, &before, 3)
	require.NoError(t, err)
	assert.Equal(t, 1, p.FirstTurn, "the page reaches back to the call")
	tp, err := s.LoadTurnsAt(ctx, sid, m, 0, 2)
	require.NoError(t, err)
	assert.Equal(t, 3, tp.Next, "the page reaches forward to the result")
	assert.Equal(t, []int{0, 1, 1, 2, 2}, tp.TurnPos)

	// Events appended after the mark are not read.
	require.NoError(t, s.AppendEvents(ctx, storetest.BigTranscript(sid, 1)))
	all, err := s.LoadEventsPageAt(ctx, sid, m, nil, 0)
	require.NoError(t, err)
	assert.Equal(t, m.Events, len(all.Events))
	tp, err = s.LoadTurnsAt(ctx, sid, m, 19, 10)
	require.NoError(t, err)
	assert.Equal(t, 20, tp.Next)
	assert.Equal(t, []int{19}, tp.TurnPos)
}
