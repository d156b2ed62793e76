package store_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/zidane-server/zidane/server/store"
	"github.com/zidane-server/zidane/server/store/storetest"
)

// figStore opens a store and a plain pgx connection on one fresh database.
func figStore(b *testing.B) (*store.Store, *pgx.Conn) {
	u := storetest.URL(b)
	ctx := context.Background()
	st, err := store.Open(ctx, u, store.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(st.Close)
	pc, err := pgx.Connect(ctx, u)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { pc.Close(context.Background()) })
	return st, pc
}

func figRows(sessionID string, n int) []store.EventRow {
	rows := make([]store.EventRow, n)
	for i := range rows {
		rows[i] = store.EventRow{SessionID: sessionID, TurnID: fmt.Sprintf("t%d", i/3), Kind: "markdown",
			Body: []byte(`{"kind":"markdown","text":"a streamed block of text","streaming":false,"turnId":"t"}`)}
	}
	return rows
}

// BenchmarkFigPersist: 1000 transcript rows through the store's append path, against a pgx
// CopyFrom of the same rows (positions computed by the caller) — issue "Close to the wire".
func BenchmarkFigPersist(b *testing.B) {
	st, pc := figStore(b)
	ctx := context.Background()
	a, err := st.CreateSession(ctx, store.Session{Title: "append"})
	if err != nil {
		b.Fatal(err)
	}
	c, err := st.CreateSession(ctx, store.Session{Title: "copy"})
	if err != nil {
		b.Fatal(err)
	}
	rows := figRows(a.ID, 1000)
	b.Run("1000rows/server", func(b *testing.B) {
		for b.Loop() {
			if err := st.AppendEvents(ctx, rows); err != nil {
				b.Fatal(err)
			}
		}
	})
	cid := uuid.MustParse(c.ID)
	pos := 0
	b.Run("1000rows/copyfrom-baseline", func(b *testing.B) {
		for b.Loop() {
			src := make([][]any, len(rows))
			for i, r := range rows {
				src[i] = []any{cid, pos, pos / 3, r.TurnID, r.Kind, string(r.Body)}
				pos++
			}
			if _, err := pc.CopyFrom(ctx, pgx.Identifier{"events"}, []string{"session_id", "pos", "turn_pos", "turn_id", "kind", "body"}, pgx.CopyFromRows(src)); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkFigPaging: the last 200 turns of a 10,000-turn session through the store, against the
// plain pgx query of the same rows.
func BenchmarkFigPaging(b *testing.B) {
	st, pc := figStore(b)
	ctx := context.Background()
	x, err := st.CreateSession(ctx, store.Session{Title: "paging"})
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; i < 30; i++ { // 30 × 1000 rows of 3 events per turn = 10,000 turns
		rows := figRows(x.ID, 1000)
		for j := range rows {
			rows[j].TurnID = fmt.Sprintf("t%d", (i*1000+j)/3)
		}
		if err := st.AppendEvents(ctx, rows); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := pc.Exec(ctx, `ANALYZE events`); err != nil {
		b.Fatal(err)
	}
	var want int
	b.Run("200of10000turns/server", func(b *testing.B) {
		for b.Loop() {
			p, err := st.LoadEventsPage(ctx, x.ID, nil, 200)
			if err != nil {
				b.Fatal(err)
			}
			want = len(p.Events)
		}
	})
	sid := uuid.MustParse(x.ID)
	b.Run("200of10000turns/pgx-baseline", func(b *testing.B) {
		for b.Loop() {
			rows, err := pc.Query(ctx, `SELECT session_id::text, turn_id, kind, body FROM events WHERE session_id = $1 AND turn_pos >= $2 ORDER BY pos`, sid, 10000-200)
			if err != nil {
				b.Fatal(err)
			}
			n := 0
			for rows.Next() {
				var s, t, k, body string
				if err := rows.Scan(&s, &t, &k, &body); err != nil {
					b.Fatal(err)
				}
				n++
			}
			rows.Close()
			if n != want {
				b.Fatalf("baseline read %d rows, the store %d", n, want)
			}
		}
	})
}

// searchCorpusURL is the database of BenchmarkFigSearch: 10,000 sessions of 100 events (1,000,000),
// built once per process (storetest.SearchCorpus).
func searchCorpusURL(b *testing.B) string {
	return storetest.SharedURL(b, "search-10000x100", func(u string) error {
		ctx := context.Background()
		st, err := store.Open(ctx, u, store.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			return err
		}
		st.Close()
		c, err := pgx.Connect(ctx, u)
		if err != nil {
			return err
		}
		defer c.Close(ctx)
		return storetest.SearchCorpus(ctx, c, 10000, 100)
	})
}

// latencies reports the p50 and p99 of ds in ms and ns.
func latencies(b *testing.B, ds []time.Duration) {
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	p50, p99 := ds[len(ds)/2], ds[len(ds)*99/100]
	b.ReportMetric(float64(p50.Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(p50.Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(p99.Microseconds())/1000, "p99-ms")
}

// BenchmarkFigSearch (issue 28): search.sessions' store query over 10,000 sessions and 1,000,000
// events (each query a word of about 1,000 events of different sessions, a page of 20 with its
// snippets), against the bare index lookup of the same word's first 21 events through plain pgx.
func BenchmarkFigSearch(b *testing.B) {
	u := searchCorpusURL(b)
	ctx := context.Background()
	st, err := store.Open(ctx, u, store.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	pc, err := pgx.Connect(ctx, u)
	if err != nil {
		b.Fatal(err)
	}
	defer pc.Close(ctx)
	word := func(i int) string { return fmt.Sprintf("w%d", (i*37)%2000) }
	b.Run("10000sessions/server", func(b *testing.B) {
		var ds []time.Duration
		i := 0
		for b.Loop() {
			t0 := time.Now()
			p, err := st.SearchSessions(ctx, store.SearchQuery{Text: word(i), Limit: 20})
			ds = append(ds, time.Since(t0))
			if err != nil || len(p.Hits) != 20 {
				b.Fatalf("search %s: %d hits, %v", word(i), len(p.Hits), err)
			}
			i++
		}
		latencies(b, ds)
	})
	b.Run("10000sessions/index-baseline", func(b *testing.B) {
		var ds []time.Duration
		i := 0
		for b.Loop() {
			t0 := time.Now()
			rows, err := pc.Query(ctx, `SELECT session_id, pos FROM events WHERE doc IS NOT NULL AND tsv @@ search_query($1) LIMIT 21`, word(i))
			if err != nil {
				b.Fatal(err)
			}
			n := 0
			for rows.Next() {
				n++
			}
			rows.Close()
			ds = append(ds, time.Since(t0))
			if n != 21 {
				b.Fatalf("baseline %s: %d rows", word(i), n)
			}
			i++
		}
		latencies(b, ds)
	})
}
