package store_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/zidane-server/zidane/server/store"
	"github.com/zidane-server/zidane/server/store/storetest"
)

// BenchmarkAppendEvents: 100 transcript rows written as one batch (how the transcript writer
// flushes) against 100 single-row calls (a commit per event, the baseline), on a real Postgres.
func BenchmarkAppendEvents(b *testing.B) {
	st := storetest.New(b)
	ctx := context.Background()
	sess, err := st.CreateSession(ctx, store.Session{Title: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	rows := make([]store.EventRow, 100)
	for i := range rows {
		rows[i] = store.EventRow{SessionID: sess.ID, TurnID: fmt.Sprintf("t%d", i/10), Kind: "markdown",
			Body: []byte(`{"kind":"markdown","text":"a streamed block of text","streaming":false,"turnId":"t"}`)}
	}
	b.Run("100rows/batch", func(b *testing.B) {
		for b.Loop() {
			if err := st.AppendEvents(ctx, rows); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("100rows/row-by-row-baseline", func(b *testing.B) {
		for b.Loop() {
			for i := range rows {
				if err := st.AppendEvents(ctx, rows[i:i+1]); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}
