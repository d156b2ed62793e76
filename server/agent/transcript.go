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
// hot path, never a commit per streamed token), and how often a growing streamed block up to
// smallBlock is checkpointed, so a crash loses at most that much of it (issue 8, "Crashes"; a
// larger block: openBlock.due).
const flushInterval = 100 * time.Millisecond

// transcriptWriter merges streamed pieces into blocks and writes closed blocks, other events and
// turn usage in batches: one FlushTranscript call (one round trip) per flush for every session.
// The block still streaming in a session is checkpointed in the same call whenever it grew. A
// run's start (its prompt and the status "running") is written on its own, at once, while the run
// already streams (begin; issue 10, "chat.send → run:start"); the session's later rows wait for
// it, and are dropped if it fails.
type transcriptWriter struct {
	st     *store.Store
	log    *slog.Logger
	stored func(store.Session) // told of the session as stored by each run's start (session:updated)
	// waitSeq: a run's start write waits for its prompt's $seq (Config.SharedSignals).
	waitSeq bool

	mu      sync.Mutex
	pending []queuedRow
	usage   []store.TurnUsage
	open    map[string]*openBlock // by session
	cleared []string              // sessions whose checkpointed block closed since the last flush
	seq     uint64                // rows queued so far
	starts  map[string]*runStart  // by session: a run's start being written, or failed
	// flushing holds the sessions whose rows the flush in progress writes, and flushed is closed
	// when it ends: a run's start waits only for a flush that holds rows of its own session.
	flushing map[string]bool
	flushed  chan struct{}
	// later holds, by session, the status of a run's end that could not be written (the
	// database was away): the next flush that succeeds writes it, unless a run started since.
	later   map[string]string
	flushMu chan struct{} // holds one token per flush in progress: one at a time keeps rows in order
	stop    chan struct{}
	stopped chan struct{}
	// halt ends the periodic flush in progress when the writer closes: shutdown flushed what it
	// could first, and close must not wait out a slow database (the 15 s bound of shutdown).
	halt context.Context
	quit context.CancelFunc
}

type queuedRow struct {
	store.EventRow
	seq uint64
}

// runStart is a run's start write (begin). Until it is written the session's rows stay queued;
// once it failed, the session's rows are dropped until the run ends (end): the run is refused.
type runStart struct {
	title  string        // names the session if nothing did (store.StartRun)
	seq    uint64        // the prompt row's
	done   chan struct{} // closed once written or failed
	err    error         // set before done closes
	failed bool          // err != nil; guarded by mu
	// mark is the prompt's signal $seq, set before sequenced closes (sequenced): the start's
	// write records it as the session's signal mark, so it waits for it.
	mark      store.SignalMark
	sequenced chan struct{}
}

type openBlock struct {
	kind, turnID string
	text         chunkedText
	dirty        bool             // grew since its last checkpoint
	saved        bool             // has a checkpoint row
	savedLen     int              // the text's length at its last checkpoint
	savedAt      time.Time        // when that checkpoint was taken (zero: none, or it failed)
	mark         store.SignalMark // the signal $seq of its last piece (its row's SignalSeq)
}

// smallBlock is the size up to which a growing block is checkpointed at every flush.
const smallBlock = 64 << 10

// due reports whether the block, which grew, is checkpointed at a flush at now: every flush while
// small; past smallBlock (each checkpoint rewrites it whole) once it grew by half since the last
// one, or a second after it, so the checkpoints of a block of n bytes write O(n) bytes a second,
// not n every 100 ms (field case T08: a run that streamed hundreds of MiB copied its whole text
// ten times a second). A crash loses at most a third of such a block, or its last second.
func (b *openBlock) due(now time.Time) bool {
	n := b.text.Len()
	return n <= smallBlock || 2*n >= 3*b.savedLen || now.Sub(b.savedAt) >= time.Second
}

// newTranscriptWriter starts a writer (waitSeq: see Config.SharedSignals); stored is told of the session as stored by each run's
// start, after the run learned the outcome (a later write of the session may be told first:
// store.Session.Version orders them).
func newTranscriptWriter(st *store.Store, log *slog.Logger, stored func(store.Session), waitSeq bool) *transcriptWriter {
	w := &transcriptWriter{st: st, log: log, stored: stored, waitSeq: waitSeq, open: map[string]*openBlock{}, starts: map[string]*runStart{},
		stop: make(chan struct{}), stopped: make(chan struct{}), flushMu: make(chan struct{}, 1)}
	w.halt, w.quit = context.WithCancel(context.Background())
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
		}
		ctx, cancel := context.WithTimeout(w.halt, 10*time.Second)
		if err := w.flush(ctx); err != nil {
			w.log.Warn("transcript flush failed; will retry", "err", err)
		}
		cancel()
	}
}

// add records one event, which the signal of mark carried (zero: none): a streaming markdown or
// thinking piece extends the session's open block; anything else closes it and is queued as its
// own row. Each row keeps the $seq of its last signal, recorded as the session's signal mark
// when it is written.
func (w *transcriptWriter) add(sessionID string, ev protocol.StreamEvent, mark store.SignalMark) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if s := w.starts[sessionID]; s != nil && s.failed {
		return // a refused run keeps nothing
	}
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
		b.text.add(text)
		b.dirty = true
		if mark.Seq > 0 {
			b.mark = mark
		}
		return
	}
	w.closeLocked(sessionID)
	w.queue(sessionID, ev, mark)
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
		return &protocol.ThinkingEvent{Text: b.text.String(), TurnID: b.turnID, Streaming: true}
	}
	return &protocol.MarkdownEvent{Text: b.text.String(), TurnID: b.turnID, Streaming: true}
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
	w.queue(sessionID, blockEvent(b.kind, b.turnID, b.text.String()), b.mark)
}

func (w *transcriptWriter) row(sessionID string, ev protocol.StreamEvent) (store.EventRow, bool) {
	var body []byte
	var err error
	if m, ok := ev.(json.Marshaler); ok {
		// The generated encoders write what protocol.Marshal would (no HTML escaping, compact);
		// through Marshal a block's megabytes were validated and copied twice more (T08).
		body, err = m.MarshalJSON()
	} else {
		body, err = protocol.Marshal(ev)
	}
	if err != nil {
		w.log.Error("encode event", "err", err)
		return store.EventRow{}, false
	}
	turn, doc := "", ""
	switch e := ev.(type) { // a streamed block's turn without decoding its megabytes again
	case *protocol.MarkdownEvent:
		turn, doc = e.TurnID, e.Text
	case *protocol.ThinkingEvent:
		turn = e.TurnID
	case *protocol.UserPromptEvent:
		turn, doc = e.TurnID, e.Text
	case *protocol.ToolEvent:
		turn, doc = e.TurnID, e.Text
	case *protocol.ToolResultEvent:
		turn, doc = e.TurnID, e.Text
	default:
		var t struct {
			TurnID string `json:"turnId"`
		}
		if json.Unmarshal(body, &t) == nil {
			turn = t.TurnID
		}
	}
	// The searchable text (search.sessions) is kept beside the event, cut to the store's bound
	// here: a block's megabytes are not copied again.
	if len(doc) > store.MaxDocBytes {
		doc = store.SearchDoc(doc)
	}
	return store.EventRow{SessionID: sessionID, TurnID: turn, Kind: ev.StreamEventKind(), Body: body, Doc: doc}, true
}

func (w *transcriptWriter) queue(sessionID string, ev protocol.StreamEvent, mark store.SignalMark) {
	if r, ok := w.row(sessionID, ev); ok {
		r.SignalSeq, r.SignalEpoch = mark.Seq, mark.Epoch
		w.seq++
		w.pending = append(w.pending, queuedRow{r, w.seq})
	}
}

// begin queues a run's prompt event after the session's queued rows and writes them at once, with
// the session's status "running", in one round trip (store.StartRun), on a goroutine of its own:
// the caller publishes run:start and the prompt meanwhile, and the run streams. The session's later
// rows wait for the write. A server killed after it leaves the session "running", which
// InterruptRunning ends at the next start; one killed before it loses a prompt whose chat.send was
// never answered. When it fails, nothing of the run is written (its rows are dropped until end) and
// the session's earlier rows stay queued, and failed is called (the runtime ends the run).
func (w *transcriptWriter) begin(sessionID string, prompt protocol.StreamEvent, title string, failed func()) *runStart {
	w.mu.Lock()
	delete(w.later, sessionID) // the new run's status supersedes it
	w.closeLocked(sessionID)
	w.queue(sessionID, prompt, store.SignalMark{}) // its $seq comes with sequenced
	st := &runStart{title: title, seq: w.seq, done: make(chan struct{}), sequenced: make(chan struct{})}
	w.starts[sessionID] = st
	w.mu.Unlock()
	go w.writeStart(sessionID, st, failed)
	return st
}

// sequenced gives the run's start its prompt's signal $seq and epoch (zero: not sent); its write
// waits for it. The runtime calls it once per begin, right after publishing the prompt.
func (w *transcriptWriter) sequenced(st *runStart, mark store.SignalMark) {
	w.mu.Lock()
	st.mark = mark
	w.mu.Unlock()
	close(st.sequenced)
	// Without waitSeq the start may be written already: the prompt's row no longer queued, its
	// $seq is recorded by the session's next write (a later row's) or not at all.
}

// startWriteTimeout bounds a run's start write, from the moment nothing older of its session is
// being written.
const startWriteTimeout = 10 * time.Second

// writeStart writes st; failed is called when the write fails (the run is refused). It waits only
// for a flush in progress that holds rows of the same session (they are older and go first), so
// one session's slow write never holds up another session's start.
func (w *transcriptWriter) writeStart(sessionID string, st *runStart, failed func()) {
	var err error
	defer func() {
		if r := recover(); r != nil { // a bug here must refuse the run, not end the process
			select {
			case <-st.done: // the outcome is out: the panic came from telling the session after it
				w.log.Error("session:updated after a run's start panicked", "session", sessionID, "panic", r)
				return
			default:
			}
			w.log.Error("run start write panicked", "session", sessionID, "panic", r)
			err = fmt.Errorf("the prompt's write failed: %v", r)
			w.mu.Lock()
			st.failed, st.err = true, err
			close(st.done)
			w.mu.Unlock()
			failed()
		}
	}()
	if w.waitSeq {
		select { // the prompt's $seq: published right after begin, on the caller's goroutine
		case <-st.sequenced:
		case <-time.After(startWriteTimeout):
			w.log.Error("a run's start was not told its prompt's $seq; written without it", "session", sessionID)
		}
	}
	w.mu.Lock()
	for w.flushing[sessionID] {
		ch := w.flushed
		w.mu.Unlock()
		<-ch
		w.mu.Lock()
	}
	var rows []queuedRow
	kept := w.pending[:0]
	for _, r := range w.pending {
		if r.SessionID == sessionID && r.seq <= st.seq {
			if r.seq == st.seq { // the prompt
				r.SignalSeq, r.SignalEpoch = st.mark.Seq, st.mark.Epoch
			}
			rows = append(rows, r)
		} else {
			kept = append(kept, r)
		}
	}
	w.pending = kept
	w.mu.Unlock()
	evs := make([]store.EventRow, len(rows))
	for i, r := range rows {
		evs[i] = r.EventRow
	}
	ctx, cancel := context.WithTimeout(context.Background(), startWriteTimeout)
	x, err := w.st.StartRun(ctx, sessionID, evs, st.title)
	if err != nil && ctx.Err() != nil && !errors.Is(err, store.ErrBusy) {
		err = fmt.Errorf("%w: the prompt's write did not finish within %s", store.ErrBusy, startWriteTimeout)
	}
	cancel()
	w.mu.Lock()
	if err != nil {
		st.failed = true
		// The session's earlier rows stay queued, in their place; the prompt and the rows the
		// run queued since (every later row of the session: the next run starts after this
		// one's end, which waits for this outcome) go.
		var back []queuedRow
		for _, r := range rows {
			if r.seq < st.seq {
				back = append(back, r)
			}
		}
		kept := w.pending[:0]
		for _, r := range w.pending {
			if r.SessionID != sessionID || r.seq < st.seq {
				kept = append(kept, r)
			}
		}
		w.pending = mergeBySeq(back, kept)
		delete(w.open, sessionID)
	} else {
		delete(w.starts, sessionID)
	}
	st.err = err
	close(st.done)
	w.mu.Unlock()
	if err != nil {
		failed()
		return
	}
	// After done: the run goes on to its end's write while the session:updated fans out. Told
	// before, the waiting run queued behind the hundred goroutines that fan-out woke and went on
	// about 1 ms later (the persistence figure of docs/benchmarks.md). The session's snapshots
	// are ordered by their Version, so this one cannot overtake the run's end status.
	if w.stored != nil {
		w.stored(x)
	}
}

// wait blocks until the run's start is written; its error (store.ErrNotFound when the session is
// gone) or ctx's.
func (w *transcriptWriter) wait(ctx context.Context, st *runStart) error {
	select {
	case <-st.done:
		return st.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// settle waits until no run's start of the session is being written: then everything signalled of
// it is in the store after a flush, or was refused.
func (w *transcriptWriter) settle(ctx context.Context, sessionID string) error {
	w.mu.Lock()
	st := w.starts[sessionID]
	w.mu.Unlock()
	if st == nil {
		return nil
	}
	select {
	case <-st.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// end forgets a refused run's start once its run ended: the session's rows are written again.
func (w *transcriptWriter) end(sessionID string, st *runStart) {
	w.mu.Lock()
	if w.starts[sessionID] == st {
		delete(w.starts, sessionID)
	}
	w.mu.Unlock()
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
	w.mu.Unlock()
}

// statusLater has the next flush that succeeds set the session's status (a run's end whose write
// failed), unless a run starts on the session before.
func (w *transcriptWriter) statusLater(sessionID, status string) {
	w.mu.Lock()
	if w.later == nil {
		w.later = map[string]string{}
	}
	w.later[sessionID] = status
	w.mu.Unlock()
}

// drop forgets what is queued for a session whose run's end could not be written: its rows, its
// open block and its usage rows (the store refused them; kept, they would fail every later flush
// of every session). A checkpoint already written stays until the session's next closed block.
// It waits, at most until ctx ends, for a flush in progress (one that took the rows and fails
// puts them back), so that no flush re-queues them after they are dropped (field case T08, seen
// in CI under load); a flush stuck past ctx is not waited for (Shutdown's bound).
func (w *transcriptWriter) drop(ctx context.Context, sessionID string) {
	select {
	case w.flushMu <- struct{}{}:
		defer func() { <-w.flushMu }()
	case <-ctx.Done():
	}
	w.mu.Lock()
	if b := w.open[sessionID]; b != nil && b.saved {
		w.cleared = append(w.cleared, sessionID)
	}
	w.mu.Unlock()
	w.forget(sessionID)
	w.mu.Lock()
	defer w.mu.Unlock()
	kept := w.usage[:0]
	for _, u := range w.usage {
		if u.SessionID != sessionID {
			kept = append(kept, u)
		}
	}
	w.usage = kept
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

// flush writes every queued row, usage row and status and checkpoints every grown open block, in
// one round trip. On failure everything stays queued, in order, and the blocks are checkpointed
// next time. A session deleted meanwhile (its rows cannot be written) loses its queued rows, not
// the others'.
func (w *transcriptWriter) flush(ctx context.Context) error {
	_, err := w.flushStatus(ctx, "", "")
	return err
}

// flushStatus is flush that also sets the status of session sessionID (unless ""), in the same
// round trip (a run's end), and returns the session as stored. The rows of a session whose run's
// start is being written stay queued.
func (w *transcriptWriter) flushStatus(ctx context.Context, sessionID, status string) (store.Session, error) {
	select { // a flush waits for the one in progress only as long as its ctx allows
	case w.flushMu <- struct{}{}:
	case <-ctx.Done():
		return store.Session{}, fmt.Errorf("flush transcript: waiting for the flush in progress: %w", context.Cause(ctx))
	}
	defer func() { <-w.flushMu }()
	w.mu.Lock()
	var rows, held []queuedRow
	for _, r := range w.pending {
		if w.starts[r.SessionID] != nil {
			held = append(held, r)
		} else {
			rows = append(rows, r)
		}
	}
	tb := store.TranscriptBatch{Cleared: w.cleared, Usage: w.usage}
	w.flushing, w.flushed = map[string]bool{}, make(chan struct{})
	for _, r := range rows {
		tb.Rows = append(tb.Rows, r.EventRow)
		w.flushing[r.SessionID] = true
	}
	// The statuses left to write: their sessions count as being flushed, so a run's start
	// (writeStart) waits for them and its "running" comes after.
	later := w.later
	w.later = nil
	for sid := range later {
		w.flushing[sid] = true
	}
	defer func() { // after the rows are written or back in the queue
		w.mu.Lock()
		w.flushing = nil
		close(w.flushed)
		w.mu.Unlock()
	}()
	w.pending, w.cleared, w.usage = held, nil, nil
	var grown []*openBlock
	now := time.Now()
	for sid, b := range w.open {
		if b.dirty && w.starts[sid] == nil && b.due(now) {
			if r, ok := w.row(sid, blockEvent(b.kind, b.turnID, b.text.String())); ok {
				tb.Open = append(tb.Open, r)
				grown = append(grown, b)
				b.dirty, b.savedLen, b.savedAt = false, b.text.Len(), now
			}
		}
	}
	w.mu.Unlock()
	if sessionID != "" {
		tb.StatusOf, tb.Status = sessionID, status
	}
	x, err := w.st.FlushTranscript(ctx, tb)
	if errors.Is(err, store.ErrNotFound) {
		rows = w.withoutDeleted(ctx, rows)
		tb.Rows = tb.Rows[:0]
		for _, r := range rows {
			tb.Rows = append(tb.Rows, r.EventRow)
		}
		x, err = w.st.FlushTranscript(ctx, tb)
	}
	var told []store.Session
	if err == nil {
		for sid, status := range later {
			x, serr := w.st.SetStatus(ctx, sid, status)
			switch {
			case serr == nil:
				told = append(told, x)
				delete(later, sid)
			case errors.Is(serr, store.ErrNotFound):
				delete(later, sid)
			}
		}
	}
	if w.stored != nil {
		defer func() { // after the lock: the transport tells every window
			for _, x := range told {
				w.stored(x)
			}
		}()
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for sid, status := range later { // not written: again next time, unless a run started since
		if w.starts[sid] == nil {
			if w.later == nil {
				w.later = map[string]string{}
			}
			if _, newer := w.later[sid]; !newer {
				w.later[sid] = status
			}
		}
	}
	if err != nil {
		// Back in order: a row's place is its seq.
		w.pending = mergeBySeq(rows, w.pending)
		w.cleared = append(tb.Cleared, w.cleared...)
		w.usage = append(tb.Usage, w.usage...)
		for _, b := range grown {
			b.dirty, b.savedAt = true, time.Time{}
		}
		return store.Session{}, err
	}
	for _, b := range grown {
		b.saved = true
	}
	if sessionID == "" {
		return store.Session{}, nil
	}
	if x.ID == "" {
		return store.Session{}, fmt.Errorf("flush transcript: session %s: %w", sessionID, store.ErrNotFound)
	}
	return x, nil
}

// mergeBySeq merges two row lists each in seq order into one.
func mergeBySeq(a, b []queuedRow) []queuedRow {
	out := make([]queuedRow, 0, len(a)+len(b))
	for len(a) > 0 && len(b) > 0 {
		if a[0].seq < b[0].seq {
			out, a = append(out, a[0]), a[1:]
		} else {
			out, b = append(out, b[0]), b[1:]
		}
	}
	return append(append(out, a...), b...)
}

// withoutDeleted drops the rows of sessions that no longer exist.
func (w *transcriptWriter) withoutDeleted(ctx context.Context, rows []queuedRow) []queuedRow {
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
		w.quit()
	}
	<-w.stopped
}
