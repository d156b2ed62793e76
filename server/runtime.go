package server

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/zidane-server/zidane/protocol"
	"github.com/zidane-server/zidane/server/store"
)

// maxFollowUps bounds the prompts queued behind a session's running prompt.
const maxFollowUps = 16

// runtime runs prompts: one run per session at a time; a prompt sent during a run is queued as a
// follow-up and starts when the run ends (DESIGN "Agent runtime").
type runtime struct {
	s       *Server
	mu      sync.Mutex
	active  map[string]*run   // by session
	pending map[string][]*run // follow-ups, by session, in arrival order
	dropped map[string][]droppedPrompt
	wg      sync.WaitGroup
}

type run struct {
	id, sessionID, prompt string
	session               store.Session
	origin                *conn
	ctx                   context.Context
	cancel                context.CancelFunc
	cancelled             bool // stopped by chat.cancel (not by shutdown); guarded by runtime.mu
	streaming             bool // the provider still runs, so a cancel can stop it; runtime.mu
}

// droppedPrompt is a follow-up that never ran, to record in the transcript once the session's
// running prompt has ended (so it never lands inside another run's turns).
type droppedPrompt struct {
	prompt, msg string
	origin      *conn
}

func newRuntime(s *Server) *runtime {
	return &runtime{s: s, active: map[string]*run{}, pending: map[string][]*run{}, dropped: map[string][]droppedPrompt{}}
}

// start begins a run, or queues it behind the session's running one, and returns its id. A run
// that starts at once has its run:start and user-prompt event queued before start returns.
func (r *runtime) start(ctx context.Context, x store.Session, prompt string, origin *conn) (string, error) {
	r.mu.Lock()
	if r.s.draining.Load() || r.s.baseCtx.Err() != nil {
		r.mu.Unlock()
		return "", protocol.NewHandlerFailedError("The server is shutting down; send the prompt again once it is back.")
	}
	runCtx, cancel := context.WithCancel(r.s.baseCtx)
	ru := &run{id: uuid.NewString(), sessionID: x.ID, prompt: prompt, session: x, origin: origin, ctx: runCtx, cancel: cancel}
	if _, busy := r.active[x.ID]; busy {
		if len(r.pending[x.ID]) >= maxFollowUps {
			r.mu.Unlock()
			cancel()
			return "", protocol.NewHandlerFailedError(fmt.Sprintf("Session %q already has %d prompts waiting; wait for a run:end, then send again.", x.ID, maxFollowUps))
		}
		r.pending[x.ID] = append(r.pending[x.ID], ru)
		r.wg.Add(1)
		r.mu.Unlock()
		return ru.id, nil
	}
	r.active[x.ID] = ru
	ru.streaming = true
	r.wg.Add(1)
	r.mu.Unlock()
	if err := r.launch(ctx, ru); err != nil {
		r.mu.Lock()
		delete(r.active, x.ID)
		r.mu.Unlock()
		r.wg.Done()
		cancel()
		r.next(x.ID)
		return "", err
	}
	return ru.id, nil
}

// launch marks the session running, publishes run:start and the prompt, and runs the provider.
// The status write does not follow the request's context: a client that drops right after
// chat.send must not leave a session marked running with no run.
func (r *runtime) launch(ctx context.Context, ru *run) error {
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := r.s.store.SetSessionStatus(wctx, ru.sessionID, "running"); err != nil {
		// The write may have committed before the error: put the status back.
		if rerr := r.s.store.SetSessionStatus(wctx, ru.sessionID, "idle"); rerr != nil {
			r.s.log.Error("session status", "session", ru.sessionID, "err", rerr)
		}
		return storeErr(err, "")
	}
	r.s.hub.publish(&protocol.RunStartSignal{SessionID: ru.sessionID, RunID: ru.id}, ru.origin)
	r.publishPresence()
	r.emit(ru.sessionID, &protocol.UserPromptEvent{Text: ru.prompt, TurnID: uuid.NewString()}, ru.origin)
	go r.execute(ru, ru.session, ru.prompt, ru.origin)
	return nil
}

// next starts the session's oldest follow-up, if any. A follow-up that cannot start ends with
// run:end ok:false so its sender is not left waiting.
func (r *runtime) next(sessionID string) {
	for {
		r.mu.Lock()
		q := r.pending[sessionID]
		if len(q) == 0 || r.active[sessionID] != nil {
			r.mu.Unlock()
			return
		}
		ru := q[0]
		if len(q) == 1 {
			delete(r.pending, sessionID)
		} else {
			r.pending[sessionID] = q[1:]
		}
		r.active[sessionID] = ru
		ru.streaming = true
		r.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := r.launch(ctx, ru)
		cancel()
		if err == nil {
			return
		}
		r.mu.Lock()
		delete(r.active, sessionID)
		r.mu.Unlock()
		msg := "The queued prompt could not start: " + err.Error()
		r.s.hub.publish(&protocol.RunEndSignal{SessionID: sessionID, RunID: ru.id, OK: false, Error: &msg}, ru.origin)
		ru.cancel()
		r.wg.Done()
	}
}

func (r *runtime) finish(ru *run) {
	r.mu.Lock()
	if r.active[ru.sessionID] == ru {
		delete(r.active, ru.sessionID)
	}
	dropped := r.dropped[ru.sessionID]
	delete(r.dropped, ru.sessionID)
	r.mu.Unlock()
	for _, d := range dropped {
		r.recordDropped(ru.sessionID, d)
	}
	ru.cancel()
	r.wg.Done()
	if r.s.baseCtx.Err() == nil {
		r.next(ru.sessionID)
	}
}

// emit publishes an event signal and hands the event to the transcript writer.
// An event too large for one message is replaced, in the signal and the transcript, by an error
// event that says so. Streamed pieces are small; other events are measured before they go out.
func (r *runtime) emit(sessionID string, ev protocol.StreamEvent, origin *conn) {
	if !isStreamedPiece(ev) {
		if b, err := protocol.Marshal(ev); err != nil || len(b)+512 > int(r.s.cfg.Limits.MaxMessageBytes) {
			r.s.log.Error("event left out: over the message limit", "session", sessionID, "kind", ev.StreamEventKind(), "bytes", len(b))
			ev = &protocol.ErrorEvent{Message: fmt.Sprintf("A %s event of %d bytes was left out: it exceeds the %d-byte message limit.", ev.StreamEventKind(), len(b), r.s.cfg.Limits.MaxMessageBytes)}
		}
	}
	r.s.writer.add(sessionID, ev)
	if _, err := r.s.hub.publish(&protocol.EventSignal{SessionID: sessionID, Event: ev}, origin); err != nil {
		r.s.log.Error("event signal not sent", "session", sessionID, "err", err)
	}
}

func isStreamedPiece(ev protocol.StreamEvent) bool {
	switch e := ev.(type) {
	case *protocol.MarkdownEvent:
		return e.Streaming
	case *protocol.ThinkingEvent:
		return e.Streaming
	}
	return false
}

// publishPresence sends presence:changed: every session that runs or that a connection views,
// with how many connections view it.
func (r *runtime) publishPresence() {
	running := map[string]bool{}
	r.mu.Lock()
	for id := range r.active {
		running[id] = true
	}
	r.mu.Unlock()
	windows := r.s.views()
	ids := make([]string, 0, len(running)+len(windows))
	for id := range running {
		ids = append(ids, id)
	}
	for id := range windows {
		if !running[id] {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	ps := make([]protocol.SessionPresence, 0, len(ids))
	for _, id := range ids {
		ps = append(ps, protocol.SessionPresence{SessionID: id, Running: running[id], Windows: windows[id]})
	}
	r.s.hub.publish(&protocol.PresenceChangedSignal{Sessions: ps}, nil)
}

func (r *runtime) execute(ru *run, x store.Session, prompt string, origin *conn) {
	defer r.finish(ru)
	started := time.Now()
	p := scriptedProvider{delay: r.s.cfg.StepDelay}
	sum, err := p.run(ru.ctx, prompt, func(ev protocol.StreamEvent) { r.emit(x.ID, ev, origin) },
		func(turnID string, u protocol.Usage) {
			r.s.writer.closeBlock(x.ID)
			r.s.hub.publish(&protocol.TurnEndSignal{SessionID: x.ID, TurnID: turnID, Usage: u}, origin)
		})
	r.mu.Lock()
	ru.streaming = false
	cancelled := ru.cancelled
	r.mu.Unlock()
	if err == nil && cancelled {
		err = context.Canceled // cancelled after the last piece: it still ends as cancelled
	}
	end := &protocol.RunEndSignal{SessionID: x.ID, RunID: ru.id, OK: err == nil}
	if err != nil {
		msg := err.Error()
		if cancelled {
			msg = "The run was cancelled."
			t := true
			end.Interrupted = &t
		} else if ru.ctx.Err() != nil {
			msg = "The run was interrupted: the server is shutting down."
			t := true
			end.Interrupted = &t
		}
		end.Error = &msg
		r.emit(x.ID, &protocol.ErrorEvent{Message: msg}, origin)
	} else {
		sum.DurationMs = time.Since(started).Milliseconds()
		r.emit(x.ID, &protocol.RunSummaryEvent{Text: summaryLine(sum), RunSummary: sum, TurnID: p.lastTurn}, origin)
	}
	// The transcript is in Postgres before run:end, so a client that sees run:end can load it.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r.s.writer.closeBlock(x.ID)
	if ferr := r.s.writer.flush(ctx); ferr != nil {
		r.s.log.Error("transcript flush failed", "session", x.ID, "err", ferr)
	}
	status := "idle"
	if err != nil && ru.ctx.Err() == nil {
		status = "error"
	}
	if serr := r.s.store.SetSessionStatus(ctx, x.ID, status); serr != nil {
		r.s.log.Error("session status", "session", x.ID, "err", serr)
	}
	r.s.hub.publish(end, origin)
	r.mu.Lock()
	if r.active[ru.sessionID] == ru {
		delete(r.active, ru.sessionID)
	}
	r.mu.Unlock()
	r.publishPresence()
}

// cancel stops the session's running prompt (runID "" or its id) while its provider still runs,
// or drops a queued follow-up by runID. It reports whether it stopped anything: a run that is
// already ending, or already cancelled, is not stopped again.
func (r *runtime) cancel(sessionID, runID string) bool {
	r.mu.Lock()
	if ru := r.active[sessionID]; ru != nil && (runID == "" || ru.id == runID) {
		stop := ru.streaming && !ru.cancelled
		ru.cancelled = ru.cancelled || stop
		r.mu.Unlock()
		if stop {
			ru.cancel()
		}
		return stop
	}
	q := r.pending[sessionID]
	for i, ru := range q {
		if runID != "" && ru.id == runID {
			r.pending[sessionID] = append(q[:i:i], q[i+1:]...)
			if len(r.pending[sessionID]) == 0 {
				delete(r.pending, sessionID)
			}
			r.mu.Unlock()
			r.dropQueued(ru, "The queued prompt was cancelled.")
			return true
		}
	}
	r.mu.Unlock()
	return false
}

// dropQueued ends a follow-up that never ran: its sender gets its run:end now, and the transcript
// gets the prompt and why it did not run after the session's running prompt ends.
func (r *runtime) dropQueued(ru *run, msg string) {
	t := true
	r.s.hub.publish(&protocol.RunEndSignal{SessionID: ru.sessionID, RunID: ru.id, OK: false, Error: &msg, Interrupted: &t}, ru.origin)
	d := droppedPrompt{prompt: ru.prompt, msg: msg, origin: ru.origin}
	r.mu.Lock()
	_, running := r.active[ru.sessionID]
	if running {
		r.dropped[ru.sessionID] = append(r.dropped[ru.sessionID], d)
	}
	r.mu.Unlock()
	if !running {
		r.recordDropped(ru.sessionID, d)
	}
	ru.cancel()
	r.wg.Done()
}

func (r *runtime) recordDropped(sessionID string, d droppedPrompt) {
	r.emit(sessionID, &protocol.UserPromptEvent{Text: d.prompt, TurnID: uuid.NewString()}, d.origin)
	r.emit(sessionID, &protocol.ErrorEvent{Message: d.msg}, d.origin)
	r.s.writer.closeBlock(sessionID)
}

// interruptAll cancels every run, ends the queued follow-ups as interrupted, and waits for the
// runs to end (bounded by ctx).
func (r *runtime) interruptAll(ctx context.Context) {
	r.mu.Lock()
	for _, ru := range r.active {
		ru.cancel()
	}
	pending := r.pending
	r.pending = map[string][]*run{}
	r.mu.Unlock()
	for _, q := range pending {
		for _, ru := range q {
			r.dropQueued(ru, "The queued prompt did not run: the server is shutting down.")
		}
	}
	done := make(chan struct{})
	go func() { r.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
	}
}

func summaryLine(s protocol.RunSummary) string {
	d := "<1s"
	if s.DurationMs >= 1000 {
		d = fmt.Sprintf("%ds", s.DurationMs/1000)
	}
	return fmt.Sprintf("%s · %s · ↻%d · ↑%d ↓%d · %.0f tk/s", s.ModelID, d, s.Turns, s.TokensIn, s.TokensOut, s.TokensPerSecond)
}

// scriptedProvider is the deterministic, offline provider: it greets in several markdown pieces,
// calls the lookup tool once, then answers with the tool's result.
type scriptedProvider struct {
	delay    time.Duration
	lastTurn string
}

const scriptedModel = "scripted"

func (p *scriptedProvider) pause(ctx context.Context) error {
	if p.delay <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(p.delay)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func tokens(s string) int64 { return int64(len(strings.Fields(s))) + 1 }

func (p *scriptedProvider) run(ctx context.Context, prompt string, emit func(protocol.StreamEvent), turnEnd func(string, protocol.Usage)) (protocol.RunSummary, error) {
	sum := protocol.RunSummary{ModelID: scriptedModel}
	stream := func(turnID string, pieces []string) (int64, error) {
		var out int64
		for _, piece := range pieces {
			if err := p.pause(ctx); err != nil {
				return out, err
			}
			emit(&protocol.MarkdownEvent{Text: piece, Streaming: true, TurnID: turnID})
			out += tokens(piece)
		}
		return out, nil
	}
	// Turn 1: greet, then call the tool.
	t1 := uuid.NewString()
	first := time.Now()
	out1, err := stream(t1, []string{"Hello! ", "Let me ", "look that up."})
	if err != nil {
		return sum, err
	}
	input, _ := protocol.Marshal(map[string]string{"query": prompt})
	callID := "call_" + uuid.NewString()[:8]
	emit(&protocol.ToolEvent{Tool: "lookup", CallID: callID, Text: fmt.Sprintf("lookup(%q)", truncate(prompt, 60)), Input: input, TurnID: t1})
	if err := p.pause(ctx); err != nil {
		return sum, err
	}
	result := lookup(prompt)
	emit(&protocol.ToolResultEvent{Tool: "lookup", CallID: callID, Text: result, TurnID: t1})
	in1 := tokens(prompt) + 8
	u1 := protocol.Usage{Input: in1, Output: out1, ModelID: scriptedModel, TimeToFirstTokenMs: ptr(int64(0)), StreamDurationMs: ptr(time.Since(first).Milliseconds())}
	turnEnd(t1, u1)
	// Turn 2: answer with the result.
	t2 := uuid.NewString()
	p.lastTurn = t2
	second := time.Now()
	out2, err := stream(t2, []string{"The lookup ", "found: ", result})
	if err != nil {
		return sum, err
	}
	in2 := in1 + out1 + tokens(result)
	turnEnd(t2, protocol.Usage{Input: in2, Output: out2, ModelID: scriptedModel, TimeToFirstTokenMs: ptr(int64(0)), StreamDurationMs: ptr(time.Since(second).Milliseconds())})
	sum.Turns = 2
	sum.TokensIn = in1 + in2
	sum.TokensOut = out1 + out2
	secs := time.Since(first).Seconds()
	if secs < 0.001 {
		secs = 0.001
	}
	sum.TokensPerSecond = float64(int64(float64(sum.TokensOut)/secs*10)) / 10
	return sum, nil
}

func ptr[T any](v T) *T { return &v }

func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}

// lookup is the scripted provider's one tool: deterministic and offline.
func lookup(query string) string {
	n := len(strings.Fields(query))
	return fmt.Sprintf("%d word(s) in %q; the scripted agent is ready.", n, truncate(query, 80))
}
