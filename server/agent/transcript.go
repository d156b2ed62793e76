package agent

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"time"

	"github.com/zidane-server/zidane/protocol"
	"github.com/zidane-server/zidane/server/store"
)

// flushInterval is how often queued transcript rows are written (DESIGN "Store": batched off the
// hot path, never a commit per streamed token).
const flushInterval = 100 * time.Millisecond

// transcriptWriter merges streamed pieces into blocks and writes closed blocks and other events in
// batches: one AppendEvents call per flush for every session.
type transcriptWriter struct {
	st  *store.Store
	log *slog.Logger

	mu      sync.Mutex
	pending []store.EventRow
	open    map[string]*openBlock // by session
	flushMu sync.Mutex            // one flush at a time keeps rows in order
	stop    chan struct{}
	stopped chan struct{}
}

type openBlock struct {
	kind, turnID string
	text         []byte
}

func newTranscriptWriter(st *store.Store, log *slog.Logger) *transcriptWriter {
	w := &transcriptWriter{st: st, log: log, open: map[string]*openBlock{}, stop: make(chan struct{}), stopped: make(chan struct{})}
	go w.loop()
	return w
}

func (w *transcriptWriter) loop() {
	defer close(w.stopped)
	t := time.NewTicker(flushInterval)
	defer t.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			if err := w.flush(ctx); err != nil {
				w.log.Warn("transcript flush failed; will retry", "err", err)
			}
			cancel()
		}
	}
}

// add records one event: a streaming markdown or thinking piece extends the session's open block;
// anything else closes it and is queued as its own row.
func (w *transcriptWriter) add(sessionID string, ev protocol.StreamEvent) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch e := ev.(type) {
	case *protocol.MarkdownEvent:
		if e.Streaming {
			w.extend(sessionID, "markdown", e.TurnID, e.Text)
			return
		}
	case *protocol.ThinkingEvent:
		if e.Streaming {
			w.extend(sessionID, "thinking", e.TurnID, e.Text)
			return
		}
	}
	w.closeLocked(sessionID)
	w.queue(sessionID, ev)
}

func (w *transcriptWriter) extend(sessionID, kind, turnID, text string) {
	b := w.open[sessionID]
	if b != nil && (b.kind != kind || b.turnID != turnID) {
		w.closeLocked(sessionID)
		b = nil
	}
	if b == nil {
		b = &openBlock{kind: kind, turnID: turnID}
		w.open[sessionID] = b
	}
	b.text = append(b.text, text...)
}

// closeBlock closes the session's open block (at a turn's end).
func (w *transcriptWriter) closeBlock(sessionID string) {
	w.mu.Lock()
	w.closeLocked(sessionID)
	w.mu.Unlock()
}

func (w *transcriptWriter) closeLocked(sessionID string) {
	b := w.open[sessionID]
	if b == nil {
		return
	}
	delete(w.open, sessionID)
	var ev protocol.StreamEvent
	if b.kind == "thinking" {
		ev = &protocol.ThinkingEvent{Text: string(b.text), TurnID: b.turnID}
	} else {
		ev = &protocol.MarkdownEvent{Text: string(b.text), TurnID: b.turnID}
	}
	w.queue(sessionID, ev)
}

func (w *transcriptWriter) queue(sessionID string, ev protocol.StreamEvent) {
	body, err := protocol.Marshal(ev)
	if err != nil {
		w.log.Error("encode event", "err", err)
		return
	}
	turn := ""
	var t struct {
		TurnID string `json:"turnId"`
	}
	if json.Unmarshal(body, &t) == nil {
		turn = t.TurnID
	}
	w.pending = append(w.pending, store.EventRow{SessionID: sessionID, TurnID: turn, Kind: ev.StreamEventKind(), Body: body})
}

// flush writes every queued row in one batch. On failure the rows stay queued, in order.
func (w *transcriptWriter) flush(ctx context.Context) error {
	w.flushMu.Lock()
	defer w.flushMu.Unlock()
	w.mu.Lock()
	rows := w.pending
	w.pending = nil
	w.mu.Unlock()
	if len(rows) == 0 {
		return nil
	}
	if err := w.st.AppendEvents(ctx, rows); err != nil {
		w.mu.Lock()
		w.pending = append(rows, w.pending...)
		w.mu.Unlock()
		return err
	}
	return nil
}

func (w *transcriptWriter) close() {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	<-w.stopped
}
