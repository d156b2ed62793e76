package agent

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/zidane-server/zidane/protocol"
	"github.com/zidane-server/zidane/server/store"
)

// flushInterval is how often queued transcript rows are written (DESIGN "Store": batched off the
// hot path, never a commit per streamed token), and how often a growing streamed block is
// checkpointed, so a crash loses at most that much of it (issue 8, "Crashes").
const flushInterval = 100 * time.Millisecond

// transcriptWriter merges streamed pieces into blocks and writes closed blocks and other events in
// batches: one FlushTranscript call per flush for every session. The block still streaming in a
// session is checkpointed in the same call whenever it grew.
type transcriptWriter struct {
	st  *store.Store
	log *slog.Logger

	mu      sync.Mutex
	pending []store.EventRow
	open    map[string]*openBlock // by session
	cleared []string              // sessions whose checkpointed block closed since the last flush
	flushMu sync.Mutex            // one flush at a time keeps rows in order
	stop    chan struct{}
	stopped chan struct{}
}

type openBlock struct {
	kind, turnID string
	text         []byte
	dirty        bool // grew since its last checkpoint
	saved        bool // has a checkpoint row
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
	if kind, turnID, text, ok := streamedPiece(ev); ok {
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
		b.dirty = true
		return
	}
	w.closeLocked(sessionID)
	w.queue(sessionID, ev)
}

// streamedPiece reports whether ev is a streamed markdown or thinking piece, and its parts.
func streamedPiece(ev protocol.StreamEvent) (kind, turnID, text string, ok bool) {
	switch e := ev.(type) {
	case *protocol.MarkdownEvent:
		return "markdown", e.TurnID, e.Text, e.Streaming
	case *protocol.ThinkingEvent:
		return "thinking", e.TurnID, e.Text, e.Streaming
	}
	return "", "", "", false
}

// blockEvent is the closed event a block of kind becomes.
func blockEvent(kind, turnID, text string) protocol.StreamEvent {
	if kind == "thinking" {
		return &protocol.ThinkingEvent{Text: text, TurnID: turnID}
	}
	return &protocol.MarkdownEvent{Text: text, TurnID: turnID}
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
	if b.saved {
		w.cleared = append(w.cleared, sessionID)
	}
	w.queue(sessionID, blockEvent(b.kind, b.turnID, string(b.text)))
}

func (w *transcriptWriter) row(sessionID string, ev protocol.StreamEvent) (store.EventRow, bool) {
	body, err := protocol.Marshal(ev)
	if err != nil {
		w.log.Error("encode event", "err", err)
		return store.EventRow{}, false
	}
	turn := ""
	var t struct {
		TurnID string `json:"turnId"`
	}
	if json.Unmarshal(body, &t) == nil {
		turn = t.TurnID
	}
	return store.EventRow{SessionID: sessionID, TurnID: turn, Kind: ev.StreamEventKind(), Body: body}, true
}

func (w *transcriptWriter) queue(sessionID string, ev protocol.StreamEvent) {
	if r, ok := w.row(sessionID, ev); ok {
		w.pending = append(w.pending, r)
	}
}

// startRun writes a run's prompt event durably with the session's status "running" (the run's
// one Postgres round trip before its run:start, store.StartRun), after the session's rows still
// queued so the transcript keeps its order, and returns the session as stored. On error nothing of
// it is written and the session's queued rows stay queued.
func (w *transcriptWriter) startRun(ctx context.Context, sessionID string, prompt protocol.StreamEvent) (store.Session, error) {
	row, ok := w.row(sessionID, prompt)
	if !ok {
		return store.Session{}, errors.New("the prompt could not be encoded")
	}
	w.flushMu.Lock() // a flush in progress may hold this session's earlier rows
	defer w.flushMu.Unlock()
	w.mu.Lock()
	w.closeLocked(sessionID)
	var mine []store.EventRow
	kept := w.pending[:0]
	for _, r := range w.pending {
		if r.SessionID == sessionID {
			mine = append(mine, r)
		} else {
			kept = append(kept, r)
		}
	}
	w.pending = kept
	w.mu.Unlock()
	x, err := w.st.StartRun(ctx, sessionID, append(mine, row))
	if err != nil && len(mine) > 0 {
		w.mu.Lock()
		w.pending = append(mine, w.pending...)
		w.mu.Unlock()
	}
	return x, err
}

// forget drops what is queued for a session that was deleted.
func (w *transcriptWriter) forget(sessionID string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.open, sessionID)
	kept := w.pending[:0]
	for _, r := range w.pending {
		if r.SessionID != sessionID {
			kept = append(kept, r)
		}
	}
	w.pending = kept
}

// flush writes every queued row and checkpoints every grown open block in one transaction. On
// failure the rows stay queued, in order, and the blocks are checkpointed next time. A session
// deleted meanwhile (its rows cannot be written) loses its queued rows, not the others'.
func (w *transcriptWriter) flush(ctx context.Context) error {
	_, err := w.flushStatus(ctx, "", "")
	return err
}

// flushStatus is flush that also sets the status of session sessionID (unless ""), in the same
// round trip (a run's end), and returns the session as stored.
func (w *transcriptWriter) flushStatus(ctx context.Context, sessionID, status string) (store.Session, error) {
	w.flushMu.Lock()
	defer w.flushMu.Unlock()
	w.mu.Lock()
	rows, cleared := w.pending, w.cleared
	w.pending, w.cleared = nil, nil
	var open []store.EventRow
	var grown []*openBlock
	for sid, b := range w.open {
		if b.dirty {
			if r, ok := w.row(sid, blockEvent(b.kind, b.turnID, string(b.text))); ok {
				open = append(open, r)
				grown = append(grown, b)
				b.dirty = false
			}
		}
	}
	w.mu.Unlock()
	write := func() (x store.Session, err error) {
		if sessionID == "" {
			return x, w.st.FlushTranscript(ctx, rows, open, cleared)
		}
		return w.st.FlushTranscriptStatus(ctx, rows, open, cleared, sessionID, status)
	}
	x, err := write()
	if errors.Is(err, store.ErrNotFound) {
		rows = w.withoutDeleted(ctx, rows)
		x, err = write()
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil {
		w.pending = append(rows, w.pending...)
		w.cleared = append(cleared, w.cleared...)
		for _, b := range grown {
			b.dirty = true
		}
		return x, err
	}
	for _, b := range grown {
		b.saved = true
	}
	return x, nil
}

// withoutDeleted drops the rows of sessions that no longer exist.
func (w *transcriptWriter) withoutDeleted(ctx context.Context, rows []store.EventRow) []store.EventRow {
	gone := map[string]bool{}
	kept := rows[:0:0]
	for _, r := range rows {
		if _, seen := gone[r.SessionID]; !seen {
			_, err := w.st.GetSession(ctx, r.SessionID)
			gone[r.SessionID] = errors.Is(err, store.ErrNotFound)
		}
		if !gone[r.SessionID] {
			kept = append(kept, r)
		}
	}
	return kept
}

func (w *transcriptWriter) close() {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	<-w.stopped
}
