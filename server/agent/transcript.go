package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/zidane-server/zidane/protocol"
	"github.com/zidane-server/zidane/server/store"
)

// flushInterval is how often queued transcript rows are written (DESIGN "Store": batched off the
// hot path, never a commit per streamed token), and how often a growing streamed block is
// checkpointed, so a crash loses at most that much of it (issue 8, "Crashes").
const flushInterval = 100 * time.Millisecond

// transcriptWriter merges streamed pieces into blocks and writes closed blocks, other events,
// turn usage and session statuses in batches: one FlushTranscript call (one round trip) per flush
// for every session. The block still streaming in a session is checkpointed in the same call
// whenever it grew. A run's prompt is queued like any event and wakes the writer at once (begin);
// chat.send waits for its commit (wait) while the run already streams (issue 10, "chat.send →
// run:start").
type transcriptWriter struct {
	st     *store.Store
	log    *slog.Logger
	stored func(store.Session) // told of each queued status change once written (session:updated)

	mu       sync.Mutex
	pending  []store.EventRow
	usage    []store.TurnUsage
	statuses map[string]string     // queued status changes, by session
	open     map[string]*openBlock // by session
	cleared  []string              // sessions whose checkpointed block closed since the last flush
	queued   uint64                // queue operations so far (rows, usage, statuses)
	written  uint64                // every queue operation up to this one is committed
	wrote    chan struct{}         // closed (and replaced) by each flush that succeeds
	lastErr  error                 // the last flush's error, nil once one succeeds
	gone     map[string]bool       // sessions whose queued rows were dropped: deleted
	flushMu  sync.Mutex            // one flush at a time keeps rows in order
	kick     chan struct{}         // wakes the loop for a flush now
	stop     chan struct{}
	stopped  chan struct{}
}

type openBlock struct {
	kind, turnID string
	text         []byte
	dirty        bool // grew since its last checkpoint
	saved        bool // has a checkpoint row
}

// newTranscriptWriter starts a writer; stored is told of every queued status change once it is
// written, in commit order.
func newTranscriptWriter(st *store.Store, log *slog.Logger, stored func(store.Session)) *transcriptWriter {
	w := &transcriptWriter{st: st, log: log, stored: stored, open: map[string]*openBlock{}, statuses: map[string]string{},
		gone: map[string]bool{}, wrote: make(chan struct{}), kick: make(chan struct{}, 1), stop: make(chan struct{}), stopped: make(chan struct{})}
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
		case <-w.kick:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := w.flush(ctx); err != nil {
			w.log.Warn("transcript flush failed; will retry", "err", err)
		}
		cancel()
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

// openEvent returns the session's open block as the streamed event it is so far (streaming true,
// the pieces' text merged), or nil when none is open.
func (w *transcriptWriter) openEvent(sessionID string) protocol.StreamEvent {
	w.mu.Lock()
	defer w.mu.Unlock()
	b := w.open[sessionID]
	if b == nil {
		return nil
	}
	if b.kind == "thinking" {
		return &protocol.ThinkingEvent{Text: string(b.text), TurnID: b.turnID, Streaming: true}
	}
	return &protocol.MarkdownEvent{Text: string(b.text), TurnID: b.turnID, Streaming: true}
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
		w.queued++
	}
}

// begin queues a run's prompt event after the session's queued rows, with the session's status
// "running", and wakes the loop to write them now; it returns the ticket wait takes. The caller
// publishes the prompt's signal meanwhile: the run does not wait for Postgres (issue 10). A
// server killed after the write leaves the session "running", which InterruptRunning ends at the
// next start; one killed before it loses a prompt whose chat.send was never answered.
func (w *transcriptWriter) begin(sessionID string, prompt protocol.StreamEvent) uint64 {
	w.mu.Lock()
	w.closeLocked(sessionID)
	w.queue(sessionID, prompt)
	w.statuses[sessionID] = "running"
	w.queued++
	t := w.queued
	w.mu.Unlock()
	select {
	case w.kick <- struct{}{}:
	default: // a flush is already due
	}
	return t
}

// addUsage queues a model turn's usage row (written with the next flush, at the latest at the
// run's end, before its run:end).
func (w *transcriptWriter) addUsage(u store.TurnUsage) {
	// A batch the store refuses is retried whole: no text in it may be invalid.
	for _, f := range []*string{&u.RunID, &u.TurnID, &u.ModelID} {
		*f = strings.ToValidUTF8(strings.ReplaceAll(*f, "\x00", ""), "\uFFFD")
	}
	w.mu.Lock()
	w.usage = append(w.usage, u)
	w.queued++
	w.mu.Unlock()
}

// wait blocks until everything queued up to ticket is committed. While Postgres fails the rows
// stay queued and flushes retry; wait then ends with ctx, naming the last flush's error.
// store.ErrNotFound when the session was deleted and its rows dropped.
func (w *transcriptWriter) wait(ctx context.Context, sessionID string, ticket uint64) error {
	for {
		w.mu.Lock()
		if w.written >= ticket {
			gone := w.gone[sessionID]
			w.mu.Unlock()
			if gone {
				return store.ErrNotFound
			}
			return nil
		}
		ch, last := w.wrote, w.lastErr
		w.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			if last != nil {
				return fmt.Errorf("%w; the last write failed: %v", ctx.Err(), last)
			}
			return ctx.Err()
		}
	}
}

// forget drops what is queued for a session that was deleted.
func (w *transcriptWriter) forget(sessionID string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.open, sessionID)
	delete(w.statuses, sessionID)
	w.markGoneLocked(sessionID)
	kept := w.pending[:0]
	for _, r := range w.pending {
		if r.SessionID != sessionID {
			kept = append(kept, r)
		}
	}
	w.pending = kept
}

// flush writes every queued row, usage row and status and checkpoints every grown open block, in
// one round trip. On failure everything stays queued, in order, and the blocks are checkpointed
// next time. A session deleted meanwhile (its rows cannot be written) loses its queued rows, not
// the others'.
func (w *transcriptWriter) flush(ctx context.Context) error {
	_, err := w.flushStatus(ctx, "", "")
	return err
}

// flushStatus is flush that also sets the status of session sessionID (unless ""), in the same
// round trip (a run's end), and returns the session as stored. The other status changes it writes
// are told to stored; the caller publishes its own.
func (w *transcriptWriter) flushStatus(ctx context.Context, sessionID, status string) (store.Session, error) {
	w.flushMu.Lock()
	defer w.flushMu.Unlock()
	w.mu.Lock()
	tb := store.TranscriptBatch{Rows: w.pending, Cleared: w.cleared, Usage: w.usage}
	statuses, upto := w.statuses, w.queued
	w.pending, w.cleared, w.usage, w.statuses = nil, nil, nil, map[string]string{}
	var grown []*openBlock
	for sid, b := range w.open {
		if b.dirty {
			if r, ok := w.row(sid, blockEvent(b.kind, b.turnID, string(b.text))); ok {
				tb.Open = append(tb.Open, r)
				grown = append(grown, b)
				b.dirty = false
			}
		}
	}
	w.mu.Unlock()
	for sid, st := range statuses {
		if sid != sessionID {
			tb.Statuses = append(tb.Statuses, store.StatusChange{SessionID: sid, Status: st})
		}
	}
	if sessionID != "" {
		tb.Statuses = append(tb.Statuses, store.StatusChange{SessionID: sessionID, Status: status})
	}
	xs, err := w.st.FlushTranscript(ctx, tb)
	var dropped []string
	if errors.Is(err, store.ErrNotFound) {
		tb.Rows, dropped = w.withoutDeleted(ctx, tb.Rows)
		xs, err = w.st.FlushTranscript(ctx, tb)
	}
	w.mu.Lock()
	if err != nil {
		w.pending = append(tb.Rows, w.pending...)
		w.cleared = append(tb.Cleared, w.cleared...)
		w.usage = append(tb.Usage, w.usage...)
		for sid, st := range statuses {
			if _, newer := w.statuses[sid]; !newer {
				w.statuses[sid] = st
			}
		}
		for _, b := range grown {
			b.dirty = true
		}
		w.lastErr = err
		w.mu.Unlock()
		return store.Session{}, err
	}
	for _, b := range grown {
		b.saved = true
	}
	for _, sid := range dropped {
		w.markGoneLocked(sid)
	}
	w.written, w.lastErr = upto, nil
	close(w.wrote)
	w.wrote = make(chan struct{})
	w.mu.Unlock()
	var mine store.Session
	mineFound := false
	for _, x := range xs {
		if x.ID == sessionID {
			mine, mineFound = x, true
		} else if w.stored != nil {
			w.stored(x) // under flushMu: in commit order
		}
	}
	if sessionID != "" && !mineFound {
		return store.Session{}, fmt.Errorf("flush transcript: session %s: %w", sessionID, store.ErrNotFound)
	}
	return mine, nil
}

// markGoneLocked records that a session's queued rows were dropped (it was deleted), for wait.
// The record is bounded: past 1024 sessions it starts over.
func (w *transcriptWriter) markGoneLocked(sessionID string) {
	if len(w.gone) >= 1024 {
		clear(w.gone)
	}
	w.gone[sessionID] = true
}

// withoutDeleted drops the rows of sessions that no longer exist, and names those sessions.
func (w *transcriptWriter) withoutDeleted(ctx context.Context, rows []store.EventRow) (kept []store.EventRow, dropped []string) {
	gone := map[string]bool{}
	kept = rows[:0:0]
	for _, r := range rows {
		if _, seen := gone[r.SessionID]; !seen {
			_, err := w.st.GetSession(ctx, r.SessionID)
			gone[r.SessionID] = errors.Is(err, store.ErrNotFound)
			if gone[r.SessionID] {
				dropped = append(dropped, r.SessionID)
			}
		}
		if !gone[r.SessionID] {
			kept = append(kept, r)
		}
	}
	return kept, dropped
}

func (w *transcriptWriter) close() {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	<-w.stopped
}
