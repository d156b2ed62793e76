// Package agent is zidane-server's agent runtime: runs (one prompt's work), the follow-up queue,
// cancel, shutdown, and the transcript writer (DESIGN "Agent runtime").
//
// It knows nothing of WebSockets or JSON-RPC and never imports the transport package: it reports
// every signal through a Reporter the transport implements, and hands back the opaque Origin the
// transport gave it with the prompt (the connection that started the work). The transport numbers
// session signals ($seq), keeps the replay log and decides who receives what.
//
// Runs are bracketed (field case B46): every run the runtime accepts gets exactly one run:start
// and one run:end, every run-scoped signal (event, turn:end) carries its runId and comes between
// the two, and nothing of a run is signalled after its run:end, whatever ends it (an end, an
// error, a cancel of the running or a queued run, shutdown).
package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/zidane-server/zidane/protocol"
	"github.com/zidane-server/zidane/server/agent/provider"
	"github.com/zidane-server/zidane/server/agent/provider/scripted"
	"github.com/zidane-server/zidane/server/store"
	"github.com/zidane-server/zidane/server/workspace"
)

// MaxFollowUps bounds the prompts queued behind a session's running prompt (chat.send).
const MaxFollowUps = 16

// Origin is the transport's opaque handle of the connection that started a run (nil for none).
// The runtime never looks inside it; it passes it back with every signal of the run, so the
// transport can deliver "origin" signals and tell "others" from the sender.
type Origin any

// Reporter receives what the runtime reports. The transport implements it.
type Reporter interface {
	// Publish hands one signal to the transport, which numbers session signals ($seq), keeps the
	// replay log and fans the signal out to the connections the schema's audience allows. origin
	// is the run's Origin. Publish must not block on a slow connection. An error means the signal
	// was not sent (for instance, it exceeds the message limit); the runtime logs it. A session
	// signal's $seq and its epoch are returned (zero for other signals): the transcript records
	// the last one its rows hold (store.SignalMark; issue 25 §1).
	Publish(sig protocol.Signal, origin Origin) (store.SignalMark, error)
	// RunningChanged says the set of sessions with a run (Runtime.Running) changed, so the
	// transport can publish presence. It must not call back into the runtime synchronously
	// while holding its own locks in a way that could block on the runtime.
	RunningChanged()
	// SessionChanged says the runtime changed the session's stored state (its status); x is the
	// session as stored now, so the transport can tell every window (session:updated) without
	// reading it again. Called outside the runtime's locks.
	SessionChanged(x store.Session)
}

// Config configures a Runtime.
type Config struct {
	// Store holds sessions and transcripts. Required.
	Store *store.Store
	// Reporter receives the signals. Required.
	Reporter Reporter
	// Logger logs; default slog.Default().
	Logger *slog.Logger
	// MaxMessageBytes is the transport's message limit: an event whose signal would exceed it is
	// replaced, in the signal and the transcript, by an error event that says so. 0: no check.
	MaxMessageBytes int
	// StepDelay slows the default scripted provider between streamed pieces (tests and demos
	// watch a run). Used only when Models is nil.
	StepDelay time.Duration
	// Models resolves model ids; nil: the scripted provider alone ("scripted/scripted").
	Models Models
	// Tools runs the model's tool calls; nil: LookupTools (the scripted exchange's lookup).
	Tools ToolRunner
	// Gate, when set, is asked before each tool call runs (approvals).
	Gate ToolGate
	// Workspace reads AGENTS.md for the system prompt; nil: none is read.
	Workspace *workspace.Workspace
	// SystemPrompt replaces DefaultSystemPrompt (the operator's override); AGENTS.md files still
	// follow it.
	SystemPrompt string
	// DefsHome is the server user's home, whose .zidane/ (and .claude/) agents, skills and
	// commands are merged with the project's; "" reads only the project's.
	DefsHome string
	// Limits are the per-run limits.
	Limits Limits
	// Retry is the retry policy for provider errors before the first token; zero MaxRetries and
	// BaseDelay: provider.DefaultRetry.
	Retry provider.RetryPolicy
	// AutoCompact, when set and true, has a run compact the older exchanges into a summary when
	// a turn would otherwise leave them out to fit the context window (the autoCompact setting;
	// issue 28). Nil: never.
	AutoCompact func(context.Context) bool
	// Leases, when set, holds a session's run lease while the session has a run, queued prompts
	// or dropped runs on this runtime (issue 25 §2, several replicas on one database); nil: no
	// lease is taken (the runtime alone runs the database's sessions).
	Leases Leases
	// SharedSignals says the session signals are on a stream every replica reads (--nats-url;
	// issue 25): a run's start write then waits for its prompt's $seq (published right after the
	// write begins, after run:start and the plans' snapshot) so that the stored signal mark
	// covers the prompt from its first write (store.SignalMark); without it the start write runs
	// at once and later writes record the mark.
	SharedSignals bool
}

// Leases are the run leases of the sessions a runtime runs (server/cluster implements them).
type Leases interface {
	// Acquire takes the session's lease for the run runID, which starts on this runtime, and
	// returns its generation. An error refuses the run (Start returns it as is): for instance
	// another replica holds the lease.
	Acquire(ctx context.Context, sessionID, runID string) (gen string, err error)
	// Running records that the follow-up runID now holds the session under lease gen. It must
	// not block.
	Running(sessionID, gen, runID string)
	// Release gives back the lease of generation gen: the session has no run left here. It must
	// not block (it is called at a run's end).
	Release(sessionID, gen string)
}

// Refusal is an error a client can act on: Message says what happened and what to do. The
// transport answers it as HandlerFailed with Message as the text.
type Refusal struct{ Message string }

func (e *Refusal) Error() string { return e.Message }

// Runtime runs prompts: one run per session at a time; a prompt sent during a run is queued as a
// follow-up and starts when the run ends. Safe for concurrent use.
type Runtime struct {
	cfg    Config
	st     *store.Store
	rep    Reporter
	log    *slog.Logger
	writer *transcriptWriter
	conv   *conversations
	models Models
	tools  ToolRunner
	slots  chan struct{} // Limits.MaxConcurrentRuns
	base   context.Context
	// ends bounds the runs' end writes: Shutdown ends it when its own bound expires, so a run
	// ending against a stuck database does not hold the process past it.
	ends    context.Context
	endsOff context.CancelFunc
	stop    context.CancelFunc

	mu      sync.Mutex
	closed  bool                    // Shutdown began: no new prompts
	active  map[string]*run         // by session: the run that holds the session
	pending map[string][]*run       // follow-ups, by session, in arrival order
	dropped map[string][]droppedRun // runs that ended before they started, bracketed after the active run
	wg      sync.WaitGroup          // one per accepted run until its run:end
	// deleting holds the sessions DeleteSession is deleting (true) or deleted (false; ids are
	// never reused, bounded like the server's session cache): Start refuses them.
	deleting map[string]bool
	// rewriting holds the sessions a Reset or Compact is changing: Start refuses them.
	rewriting map[string]bool

	content sync.Map // session id → *sync.Mutex: see contentLock
	leasing sync.Map // session id → *sync.Mutex: held while Start takes the session's lease
}

type run struct {
	id, sessionID, prompt string
	command, arguments    string                // the command the prompt was made from (Prompt)
	attachments           []protocol.Attachment // sent with the prompt (Prompt)
	mentions              []string              // the files and folders attached (Prompt.Mentions)
	// parent is, for a subagent's run, the parent's agent as its run offers it: the child never
	// holds more (runTask). nil for a root run.
	parent *runAgent
	// answer is the text of the run's last model turn; finished is closed after its run:end,
	// with ok saying how it ended (a task call waits on them).
	answer    strings.Builder
	finished  chan struct{}
	endOnce   sync.Once
	ok        bool
	children  int // the task calls that started a child (run goroutine only)
	session   store.Session
	origin    Origin
	ctx       context.Context
	cancel    context.CancelFunc
	cancelled bool                 // stopped by Cancel (not by shutdown); guarded by Runtime.mu
	ended     bool                 // its run:end is about to go out or went out; Runtime.mu
	streaming bool                 // the provider still runs, so a cancel can stop it; Runtime.mu
	queuedAt  time.Time            // when it was queued as a follow-up (queue.list)
	promptEv  protocol.StreamEvent // its user-prompt event as sent, set by launch
	start     *runStart            // its prompt's write (launch)
	leaseGen  string               // the session's run lease it runs under (Config.Leases); "" without
}

// droppedRun is a run that ended before it started: a cancelled or interrupted follow-up, or one
// that could not start. It is signalled (run:start, its prompt, the error, run:end) and recorded
// once the session's running prompt has ended, so it never lands inside another run.
type droppedRun struct {
	ru          *run
	msg         string
	interrupted bool
	stopped     bool // a client cancelled it (ErrorEvent.stopped)
}

// New creates a runtime and starts its transcript writer. Call Shutdown, then Close, to stop it.
func New(cfg Config) (*Runtime, error) {
	if cfg.Store == nil || cfg.Reporter == nil {
		return nil, errors.New("agent: Config.Store and Config.Reporter are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	cfg.Limits.defaults()
	if cfg.Retry.MaxRetries == 0 && cfg.Retry.BaseDelay == 0 {
		cfg.Retry = provider.DefaultRetry
	}
	if cfg.Models == nil {
		m, err := NewRegistry(context.Background(), "", scripted.New(scripted.Options{StepDelay: cfg.StepDelay}))
		if err != nil {
			return nil, err
		}
		cfg.Models = m
	}
	if cfg.Tools == nil {
		cfg.Tools = LookupTools{}
	}
	base, stop := context.WithCancel(context.Background())
	ends, endsOff := context.WithCancel(context.Background())
	return &Runtime{
		cfg: cfg, st: cfg.Store, rep: cfg.Reporter, log: cfg.Logger,
		writer: newTranscriptWriter(cfg.Store, cfg.Logger, cfg.Reporter.SessionChanged, cfg.SharedSignals), conv: newConversations(),
		models: cfg.Models, tools: cfg.Tools, slots: make(chan struct{}, cfg.Limits.MaxConcurrentRuns),
		base: base, stop: stop, ends: ends, endsOff: endsOff,
		active: map[string]*run{}, pending: map[string][]*run{}, dropped: map[string][]droppedRun{},
	}, nil
}

// Models returns the runtime's model registry.
func (r *Runtime) Models() Models { return r.models }

// Start begins a run of prompt in session x, or queues it behind the session's running one, and
// returns its id (a UUID). A run that starts at once has its run:start and user-prompt event
// published before Start returns, and stored waits until its prompt is committed to Postgres
// (chat.send answers after it); stored is nil for a queued prompt, written when it starts.
// Errors: *Refusal (shutting down, the queue is full).
func (r *Runtime) Start(ctx context.Context, x store.Session, prompt string, origin Origin) (runID string, stored func(context.Context) error, err error) {
	return r.StartPrompt(ctx, x, Prompt{Text: prompt}, origin)
}

// StartPrompt is Start with a command's prompt: the user-prompt event records p.Command and
// p.Arguments beside the text. x may carry a command's agent and model for this run only.
func (r *Runtime) StartPrompt(ctx context.Context, x store.Session, p Prompt, origin Origin) (runID string, stored func(context.Context) error, err error) {
	ru, stored, err := r.startLeased(ctx, x, p, origin, nil)
	if err != nil {
		return "", nil, err
	}
	return ru.id, stored, nil
}

// startRun starts a subagent's run in its child session x, under parent.
func (r *Runtime) startRun(ctx context.Context, x store.Session, p Prompt, origin Origin, parent *runAgent) (*run, error) {
	ru, stored, err := r.startLeased(ctx, x, p, origin, parent)
	if err != nil {
		return nil, err
	}
	if stored != nil {
		go stored(context.WithoutCancel(ctx)) // a write that fails ends the child's run, refused
	}
	return ru, nil
}

// startLeased starts a run, taking the session's lease first when leases are on.
func (r *Runtime) startLeased(ctx context.Context, x store.Session, p Prompt, origin Origin, parent *runAgent) (ru *run, stored func(context.Context) error, err error) {
	if r.cfg.Leases == nil {
		return r.start(ctx, x, p, origin, uuid.NewString(), "", parent)
	}
	// The session's lease is taken when nothing runs it here; Starts of one session take turns,
	// so a second one queues behind the first under its lease.
	l, _ := r.leasing.LoadOrStore(x.ID, new(sync.Mutex))
	l.(*sync.Mutex).Lock()
	defer l.(*sync.Mutex).Unlock()
	r.mu.Lock()
	idle := r.active[x.ID] == nil && !r.closed && r.base.Err() == nil
	r.mu.Unlock()
	id := uuid.NewString()
	if !idle {
		return r.start(ctx, x, p, origin, id, "", parent)
	}
	gen, err := r.cfg.Leases.Acquire(ctx, x.ID, id)
	if err != nil {
		return nil, nil, err
	}
	ru, stored, err = r.start(ctx, x, p, origin, id, gen, parent)
	if err != nil {
		r.cfg.Leases.Release(x.ID, gen)
	}
	return ru, stored, err
}

// start is StartPrompt with the run's id and, when it may start at once, its lease generation;
// parent is a subagent's ceiling (nil for a root run).
func (r *Runtime) start(ctx context.Context, x store.Session, p Prompt, origin Origin, id, gen string, parent *runAgent) (ru *run, stored func(context.Context) error, err error) {
	prompt := p.Text
	r.mu.Lock()
	if r.closed || r.base.Err() != nil {
		r.mu.Unlock()
		return nil, nil, &Refusal{"The server is shutting down; send the prompt again once it is back."}
	}
	if deleting, ok := r.deleting[x.ID]; ok {
		r.mu.Unlock()
		if deleting {
			return nil, nil, &Refusal{fmt.Sprintf("Session %q is being deleted.", x.ID)}
		}
		return nil, nil, fmt.Errorf("session %s: %w", x.ID, store.ErrNotFound)
	}
	if r.rewriting[x.ID] {
		r.mu.Unlock()
		return nil, nil, &Refusal{fmt.Sprintf("Session %q is being rolled back, restored or compacted; send the prompt again once that call answers.", x.ID)}
	}
	runCtx, cancel := context.WithCancel(r.base)
	ru = &run{id: id, sessionID: x.ID, prompt: prompt, command: p.Command, arguments: p.Arguments, attachments: p.Attachments, mentions: p.Mentions, session: x, origin: origin, ctx: runCtx, cancel: cancel, leaseGen: gen,
		parent: parent, finished: make(chan struct{})}
	if act, busy := r.active[x.ID]; busy {
		ru.leaseGen = act.leaseGen // a follow-up runs under the running prompt's lease
		if len(r.pending[x.ID]) >= MaxFollowUps {
			r.mu.Unlock()
			cancel()
			return nil, nil, &Refusal{fmt.Sprintf("Session %q already has %d prompts waiting; wait for a run:end, then send again.", x.ID, MaxFollowUps)}
		}
		ru.queuedAt = time.Now()
		r.pending[x.ID] = append(r.pending[x.ID], ru)
		r.wg.Add(1)
		r.mu.Unlock()
		r.publishQueue(x.ID)
		return ru, nil, nil
	}
	r.active[x.ID] = ru
	ru.streaming = true
	r.wg.Add(1)
	r.mu.Unlock()
	r.launch(ctx, ru)
	return ru, func(ctx context.Context) error { return r.writer.wait(ctx, ru.start) }, nil
}

// launch publishes run:start, the session's plans:snapshot and the prompt, has the transcript
// writer write the prompt with the session's status "running" at once, and runs the provider.
// Nothing on this path waits for Postgres (issue 10, "chat.send → run:start": the prompt's commit
// costs a few ms with fsync, against tens of µs for a WebSocket round trip); chat.send waits for
// the commit, and a write that fails ends the run, refused. The session's conversation is read,
// when it is not in memory, by the run after run:start.
//
// The goroutines start before the signals are published, and the run waits for ready: the
// connection's writer, started by the first signal, is then the goroutine scheduled next when
// chat.send's handler blocks on the commit (Go runs the newest goroutine first); started after
// it, the run and the write went first and run:start left 0.4 ms later (the chat.send figure of
// docs/benchmarks.md).
func (r *Runtime) launch(ctx context.Context, ru *run) {
	ru.promptEv = ru.userPrompt()
	prompt := r.fit(ru, ru.promptEv)
	ready := make(chan struct{})
	l := r.contentLock(ru.sessionID) // the prompt is content: see Consistent
	l.Lock()
	title := ""
	if !ru.session.TitleSet { // only ever goes from false to true: a stale copy may only ask twice
		title = PromptTitle(ru.prompt)
	}
	ru.start = r.writer.begin(ru.sessionID, prompt, title, ru.cancel)
	go r.execute(ru, ready)
	r.publish(&protocol.RunStartSignal{SessionID: ru.sessionID, RunID: ru.id}, ru)
	if rs, ok := r.tools.(RunStarter); ok {
		pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		rs.RunStarted(pctx, ru.sessionID, ru.id, ru.origin)
		cancel()
	}
	r.rep.RunningChanged()
	r.conv.add(ru.sessionID, ru.promptEv) // the model reads the prompt as sent
	r.writer.sequenced(ru.start, r.publish(&protocol.EventSignal{SessionID: ru.sessionID, RunID: ru.id, Event: prompt}, ru))
	l.Unlock()
	close(ready)
}

// finish records how the run ended and wakes whoever waits on it (once).
func (ru *run) finish(ok bool) {
	ru.endOnce.Do(func() {
		ru.ok = ok
		if ru.finished != nil {
			close(ru.finished)
		}
	})
}

// userPrompt is the run's user-prompt event (a new turn id each time).
func (ru *run) userPrompt() *protocol.UserPromptEvent {
	ev := &protocol.UserPromptEvent{Text: ru.prompt, TurnID: uuid.NewString(), Attachments: ru.attachments}
	if ru.command != "" {
		ev.Command, ev.Arguments = ptr(ru.command), ptr(ru.arguments)
	}
	return ev
}

// refusedMessage is the error event and run:end text of a run whose prompt's write failed.
func refusedMessage(err error) string {
	if errors.Is(err, store.ErrNotFound) {
		return "The session was deleted before the prompt was stored; nothing of this run is kept."
	}
	return fmt.Sprintf("The prompt could not be stored (%v); nothing of this run is kept: send it again.", err)
}

// advance hands the session on after ru (which published its run:end, or never started): it
// signals the runs dropped meanwhile, then starts the oldest follow-up, if any and not shutting
// down.
func (r *Runtime) advance(ru *run) {
	sid := ru.sessionID
	var next *run
	for {
		// The dropped runs are signalled while ru still holds the session, so no new run's
		// signals interleave with them; cancels may add more meanwhile.
		r.mu.Lock()
		dropped := r.dropped[sid]
		delete(r.dropped, sid)
		if len(dropped) == 0 {
			if r.active[sid] == ru {
				if q := r.pending[sid]; len(q) > 0 && r.base.Err() == nil && !r.closed {
					next = q[0]
					if len(q) == 1 {
						delete(r.pending, sid)
					} else {
						r.pending[sid] = q[1:]
					}
					r.active[sid] = next
					next.streaming = true
				} else {
					delete(r.active, sid)
					if ru.leaseGen != "" && r.cfg.Leases != nil {
						defer r.cfg.Leases.Release(sid, ru.leaseGen)
					}
				}
			}
			r.mu.Unlock()
			break
		}
		r.mu.Unlock()
		for _, d := range dropped {
			r.bracket(d)
		}
	}
	r.rep.RunningChanged()
	if next != nil {
		if next.leaseGen != "" && r.cfg.Leases != nil {
			r.cfg.Leases.Running(sid, next.leaseGen, next.id)
		}
		r.publishQueue(sid)
		r.launch(context.Background(), next)
	}
}

// bracket signals and records a run that ended before it started: run:start, its prompt, the
// error event with msg, run:end ok:false — in that order, and the transcript flushed before the
// run:end so a client that sees it can load them.
func (r *Runtime) bracket(d droppedRun) {
	ru := d.ru
	r.publish(&protocol.RunStartSignal{SessionID: ru.sessionID, RunID: ru.id}, ru)
	r.emit(ru, ru.userPrompt())
	ev := &protocol.ErrorEvent{Message: d.msg}
	if d.stopped {
		ev.Stopped = ptr(true)
	}
	r.emit(ru, ev)
	r.closeBlock(ru.sessionID)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	if err := r.writer.flush(ctx); err != nil {
		r.log.Error("transcript flush failed", "session", ru.sessionID, "err", err)
	}
	cancel()
	msg := d.msg
	end := &protocol.RunEndSignal{SessionID: ru.sessionID, RunID: ru.id, OK: false, Error: &msg}
	defer ru.finish(false)
	if d.interrupted {
		t := true
		end.Interrupted = &t
	}
	r.publish(end, ru)
	ru.cancel()
	r.wg.Done()
}

// publish hands sig to the Reporter and returns its $seq and epoch (zero when it has none or was
// not sent: logged).
func (r *Runtime) publish(sig protocol.Signal, ru *run) store.SignalMark {
	m, err := r.rep.Publish(sig, ru.origin)
	if err != nil {
		r.log.Error("signal not sent", "session", ru.sessionID, "run", ru.id, "kind", sig.SignalKind(), "err", err)
	}
	return m
}

// emit publishes an event signal of ru and hands the event to the transcript writer, with the
// signal's $seq (under the content lock: see Consistent).
// An event too large for one message is replaced, in the signal and the transcript, by an error
// event that says so (fit). The model reads the event as it is, even when the transcript gets the
// replacement.
func (r *Runtime) emit(ru *run, ev protocol.StreamEvent) {
	r.conv.add(ru.sessionID, ev)
	ev = r.fit(ru, ev)
	l := r.contentLock(ru.sessionID)
	l.Lock()
	defer l.Unlock()
	m := r.publish(&protocol.EventSignal{SessionID: ru.sessionID, RunID: ru.id, Event: ev}, ru)
	r.writer.add(ru.sessionID, ev, m)
}

// fit returns ev, or an error event that says ev was left out when its signal would exceed the
// transport's message limit. Streamed pieces are small; other events are measured.
func (r *Runtime) fit(ru *run, ev protocol.StreamEvent) protocol.StreamEvent {
	if lim := r.cfg.MaxMessageBytes; lim > 0 && !isStreamedPiece(ev) {
		if b, err := protocol.Marshal(ev); err != nil || len(b)+512 > lim {
			r.log.Error("event left out: over the message limit", "session", ru.sessionID, "kind", ev.StreamEventKind(), "bytes", len(b))
			return &protocol.ErrorEvent{Message: fmt.Sprintf("A %s event of %d bytes was left out: it exceeds the %d-byte message limit.", ev.StreamEventKind(), len(b), lim)}
		}
	}
	return ev
}

// contentLock returns the lock that orders a session's transcript content with its signals:
// emit holds it from handing an event to the transcript writer until its event signal has its
// $seq, and closeBlock while it closes the open block; Consistent holds it to read a snapshot.
func (r *Runtime) contentLock(sessionID string) *sync.Mutex {
	m, _ := r.content.LoadOrStore(sessionID, new(sync.Mutex))
	return m.(*sync.Mutex)
}

// Consistent calls fn while the session's transcript stands still, after flushing everything the
// runtime holds for it to the store; open is the block a run is still streaming (a markdown or
// thinking event with streaming true, the pieces so far merged), or nil. It is how
// sessions.loadEvents and sessions.getTurns answer a $seq watermark (issue 7, item 10).
//
// The invariant: while fn runs, no event of the session is handed to the transcript writer or
// signalled, and every event signalled before is in the store or in open, or belongs to a run that
// was refused (its prompt's write failed: nothing of it is kept, and its run:end says so) or whose
// end could not be written (its rows were dropped, and its run:end says so). Because emit gives
// an event to the writer and publishes its signal (taking the next $seq) under the same lock,
// a watermark W read inside fn (the hub's last $seq of the session) and a store.Mark read inside
// fn delimit the same content: every event signal with $seq <= W is in the events before the
// mark or in open, and every later one comes after both. Signals without transcript content
// (run:start, turn:end, run:end, ...) need no lock: the client's transcript only closes its open
// block on them. The writer's periodic flush can still run meanwhile; it writes nothing of the
// session but the open block's checkpoint, which the mark does not count. A failed flush is the
// error: then no watermark may be answered.
func (r *Runtime) Consistent(ctx context.Context, sessionID string, fn func(open protocol.StreamEvent) error) error {
	l := r.contentLock(sessionID)
	l.Lock()
	defer l.Unlock()
	if err := r.writer.settle(ctx, sessionID); err != nil { // a run's start in flight holds its rows
		return err
	}
	if err := r.writer.flush(ctx); err != nil {
		return err
	}
	return fn(r.writer.openEvent(sessionID))
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

// Running returns the ids of the sessions that have a run, sorted.
func (r *Runtime) Running() []string {
	r.mu.Lock()
	ids := make([]string, 0, len(r.active))
	for id := range r.active {
		ids = append(ids, id)
	}
	r.mu.Unlock()
	sort.Strings(ids)
	return ids
}

func (r *Runtime) execute(ru *run, ready <-chan struct{}) {
	<-ready
	started := time.Now()
	ctx, cancelWall := context.WithTimeoutCause(ru.ctx, r.cfg.Limits.MaxWallTime, errWallTime)
	defer cancelWall()
	var sum protocol.RunSummary
	var lastTurn string
	var err error
	slot := false
	// The conversation, when not in memory, is read after run:start, off the chat.send →
	// run:start path. Its writes do not follow the run's context: a flush cancelled after its
	// commit would queue its rows again.
	lctx, lcancel := context.WithTimeout(r.ends, time.Minute) // bounded by the store's timeouts, and shutdown's
	err = r.loadConversation(lctx, ru.sessionID, ru.promptEv, ru.start)
	lcancel()
	if err == nil {
		if ru.parent != nil {
			sum, lastTurn, err = r.runModel(ctx, ru) // a child runs in its parent's slot
		} else {
			select {
			case r.slots <- struct{}{}:
				slot = true
				r.attachMentions(ctx, ru)
				sum, lastTurn, err = r.runModel(ctx, ru)
			case <-ctx.Done():
				err = ctx.Err()
			}
		}
	}
	r.mu.Lock()
	ru.streaming = false
	cancelled := ru.cancelled
	r.mu.Unlock()
	// A run faster than its prompt's write learns here whether it was written: the write's own
	// timeouts bound the wait (startWriteTimeout after an older flush of the session).
	wctx, wcancel := context.WithTimeout(context.Background(), time.Minute)
	refused := r.writer.wait(wctx, ru.start)
	wcancel()
	if refused != nil {
		err = refused
	}
	end := &protocol.RunEndSignal{SessionID: ru.sessionID, RunID: ru.id, OK: err == nil}
	status := "idle"
	if err != nil {
		msg := err.Error()
		switch {
		case refused != nil:
			msg = refusedMessage(refused)
		case cancelled:
			msg = "The run was cancelled."
			end.Interrupted = ptr(true)
		case ru.ctx.Err() != nil:
			msg = "The run was interrupted: the server is shutting down."
			end.Interrupted = ptr(true)
			status = "interrupted"
		case errors.Is(context.Cause(ctx), errWallTime):
			msg = fmt.Sprintf("The run stopped: it reached the limit of %s per run (the operator's --max-run-time).", r.cfg.Limits.MaxWallTime)
			status = "error"
		default:
			status = "error"
		}
		end.Error = &msg
		ev := &protocol.ErrorEvent{Message: msg, TurnID: optString(lastTurn)}
		if cancelled && refused == nil {
			ev.Stopped = ptr(true) // the user's own stop, not a failure
		}
		r.emit(ru, ev)
	} else {
		sum.DurationMs = time.Since(started).Milliseconds()
		r.emit(ru, &protocol.RunSummaryEvent{Text: summaryLine(sum), RunSummary: sum, TurnID: lastTurn})
	}
	// The transcript is in Postgres before run:end, so a client that sees run:end can load it:
	// the transcript and the status go in one round trip (retried while the database is busy
	// or away, within endWriteTimeout). When that fails the run ends with an error saying its
	// transcript is not kept, its rows are dropped (they would hold up every later write), and
	// the status "error" is written alone.
	r.closeBlock(ru.sessionID)
	var x store.Session
	var serr error
	if refused != nil {
		serr = refused // nothing of a refused run is written: the status stays as it was
	} else if x, serr = r.endWrite(ru.sessionID, status); serr != nil && !errors.Is(serr, store.ErrNotFound) {
		r.log.Error("transcript write at the run's end failed; the run ends with an error", "session", ru.sessionID, "err", serr)
		msg := lostMessage(serr)
		end.OK, end.Error = false, &msg
		l := r.contentLock(ru.sessionID) // as emit: no snapshot of the session between the two
		l.Lock()
		dctx, dcancel := context.WithTimeout(r.ends, 5*time.Second)
		r.writer.drop(dctx, ru.sessionID)
		dcancel()
		r.conv.forget(ru.sessionID) // the model must not remember what the transcript does not keep
		r.publish(&protocol.EventSignal{SessionID: ru.sessionID, RunID: ru.id, Event: &protocol.ErrorEvent{Message: msg, TurnID: optString(lastTurn)}}, ru)
		l.Unlock()
		if status == "idle" {
			status = "error"
		}
		sctx, scancel := context.WithTimeout(r.ends, 5*time.Second)
		x, serr = r.st.SetStatus(sctx, ru.sessionID, status)
		scancel()
		if serr != nil && !errors.Is(serr, store.ErrNotFound) {
			r.log.Error("session status; written once the database answers", "session", ru.sessionID, "err", serr)
			r.writer.statusLater(ru.sessionID, status)
		}
	}
	r.mu.Lock()
	ru.ended = true // a client that sees run:end may delete the session
	r.mu.Unlock()
	r.publish(end, ru)
	ru.finish(end.OK)
	if slot {
		<-r.slots // held until run:end: the next run's model turn follows this one's end
	}
	if serr == nil {
		r.rep.SessionChanged(x) // after run:end: the run's signals stay together
	}
	r.writer.end(ru.sessionID, ru.start)
	if refused != nil {
		r.conv.forget(ru.sessionID) // the model must not remember what the transcript does not keep
	}
	r.advance(ru)
	ru.cancel()
	r.wg.Done()
}

// endWriteTimeout bounds a run's end write (endWrite), its retries included (a variable for
// the tests).
var endWriteTimeout = 10 * time.Second

// endWrite writes the session's queued transcript with its status, in one round trip, and returns
// the session as stored. A database busy or away is retried (100 ms doubling to 1 s) until
// endWriteTimeout; any other refusal is final at once.
func (r *Runtime) endWrite(sessionID, status string) (store.Session, error) {
	ctx, cancel := context.WithTimeout(r.ends, endWriteTimeout)
	defer cancel()
	wait := 100 * time.Millisecond
	for {
		x, err := r.writer.flushStatus(ctx, sessionID, status)
		if err == nil || !transient(err) {
			return x, err
		}
		r.log.Warn("transcript write at the run's end failed; retrying", "session", sessionID, "err", err)
		if provider.Sleep(ctx, wait) != nil {
			return x, err
		}
		wait = min(2*wait, time.Second)
	}
}

// transient reports whether a store error may go away by itself: the database busy, away, or a
// deadline.
func transient(err error) bool {
	return errors.Is(err, store.ErrBusy) || errors.Is(err, store.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded)
}

// lostMessage is the error event and run:end text of a run whose transcript could not be stored.
func lostMessage(err error) string {
	return fmt.Sprintf("The run's transcript could not be stored (%v); what it streamed is not kept: send the prompt again.", err)
}

// closeBlock ends the session's streamed block in the transcript and the conversation.
func (r *Runtime) closeBlock(sessionID string) {
	l := r.contentLock(sessionID)
	l.Lock()
	r.writer.closeBlock(sessionID)
	l.Unlock()
	r.conv.closeBlock(sessionID)
}

// loadConversation reads the session's conversation from the store unless it is in memory; the
// writer is flushed first so the store holds everything signalled so far. The store's last event
// is the run's prompt (launch wrote it), which the conversation holds as prompt: the model reads
// the prompt as sent even when the transcript holds a replacement (Runtime.fit).
func (r *Runtime) loadConversation(ctx context.Context, sessionID string, prompt protocol.StreamEvent, start *runStart) error {
	return r.conv.load(ctx, sessionID, func(ctx context.Context) ([]protocol.StreamEvent, error) {
		if start != nil {
			if err := r.writer.wait(ctx, start); err != nil {
				return nil, err // refused: its prompt is not the store's last event, and nothing is cached
			}
		}
		if err := r.writer.flush(ctx); err != nil {
			return nil, err
		}
		rows, err := r.st.LoadEvents(ctx, sessionID)
		if err != nil {
			return nil, err
		}
		evs := make([]protocol.StreamEvent, 0, len(rows))
		for _, row := range rows {
			ev, err := protocol.DecodeStreamEvent(row.Body)
			if err != nil {
				r.log.Error("stored event does not decode; left out of the conversation", "session", sessionID, "err", err)
				continue
			}
			evs = append(evs, ev)
		}
		if prompt != nil && len(evs) > 0 {
			evs[len(evs)-1] = prompt
		}
		return evs, nil
	}, func(id string) bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.active[id] != nil
	})
}

func optString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// Cancel stops the session's running prompt (runID "" or its id) while its provider still runs,
// or drops a queued follow-up by runID. It reports whether it stopped anything: a run that is
// already ending, or already cancelled, is not stopped again. A dropped follow-up is signalled
// (run:start, prompt, error, run:end) right after the running prompt's run:end.
func (r *Runtime) Cancel(sessionID, runID string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if ru := r.active[sessionID]; ru != nil && (runID == "" || ru.id == runID) {
		stop := ru.streaming && !ru.cancelled
		ru.cancelled = ru.cancelled || stop
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
			// A queued run implies an active one (advance hands over under r.mu), whose
			// advance signals this one.
			r.dropped[sessionID] = append(r.dropped[sessionID], droppedRun{ru: ru, msg: "The queued prompt was cancelled.", interrupted: true, stopped: true})
			// Published under r.mu: the active run's advance, which signals the dropped run's
			// run:end, cannot come first (a queue:changed after a session's last run:end, seen
			// by TestRunsBracketed_Interleavings once runs got faster). The hub never waits.
			r.publishQueueLocked(sessionID)
			return true
		}
	}
	return false
}

// Shutdown refuses new prompts, cancels every run, ends the queued follow-ups as interrupted
// (each signalled after its session's running prompt ends), waits for the runs to end (bounded
// by ctx: past it, the runs' end writes still waiting on the database give up, and those runs end
// saying their transcript is not kept) and flushes the transcripts.
func (r *Runtime) Shutdown(ctx context.Context) {
	r.mu.Lock()
	r.closed = true
	for _, ru := range r.active {
		ru.cancel()
	}
	for sid, q := range r.pending {
		for _, ru := range q {
			r.dropped[sid] = append(r.dropped[sid], droppedRun{ru: ru, msg: "The queued prompt did not run: the server is shutting down.", interrupted: true})
		}
	}
	r.pending = map[string][]*run{}
	r.mu.Unlock()
	done := make(chan struct{})
	go func() { r.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		r.endsOff() // past ctx, the runs' end writes give up
	}
	if err := r.writer.flush(ctx); err != nil {
		r.log.Error("transcript flush at shutdown failed", "err", err)
	}
}

// Flush writes every queued transcript row, so a reader sees what was signalled so far.
func (r *Runtime) Flush(ctx context.Context) {
	if err := r.writer.flush(ctx); err != nil {
		r.log.Warn("transcript flush failed", "err", err)
	}
}

// Close stops the transcript writer's loop and the runs' base context. Call after Shutdown.
func (r *Runtime) Close() {
	r.stop()
	r.writer.close()
}

func summaryLine(s protocol.RunSummary) string {
	d := "<1s"
	if s.DurationMs >= 1000 {
		d = fmt.Sprintf("%ds", s.DurationMs/1000)
	}
	line := fmt.Sprintf("%s · %s · ↻%d · ↑%d ↓%d · %.0f tk/s", s.ModelID, d, s.Turns, s.TokensIn, s.TokensOut, s.TokensPerSecond)
	if s.Unreported != nil && *s.Unreported {
		line += " · usage not reported"
	}
	if s.CompactedExchanges != nil {
		line += fmt.Sprintf(" · %d exchange(s) compacted into a summary", *s.CompactedExchanges)
	}
	if s.DroppedExchanges != nil {
		line += fmt.Sprintf(" · %d oldest exchange(s) left out to fit the context", *s.DroppedExchanges)
	}
	return line
}

// InterruptedMessage is the error event a run left behind by a killed server gets at the next
// start (issue 8, "Crashes").
const InterruptedMessage = "The server stopped during the run (it was killed or crashed); what was streamed until then is kept above. Send the prompt again to continue."

// Recover ends the runs a killed process left behind; call it once at start, before any run. Each
// session still "running" gets the text streamed before the crash (the writer's last
// checkpoint), then an error event with InterruptedMessage, and the status "interrupted". It
// returns the ids of those sessions.
func (r *Runtime) Recover(ctx context.Context) ([]string, error) {
	return r.st.InterruptRunning(ctx, func(sessionID string) store.EventRow {
		row, _ := r.writer.row(sessionID, &protocol.ErrorEvent{Message: InterruptedMessage})
		return row
	})
}

// TakeOver ends the runs no live replica owns (store.TakeOverRuns; issue 25 §2): the runs of
// dead replicas, those without a lease and, at startup, this replica's own leftovers. Each
// session gets what unwritten returns for it after its stored signal mark (what the dead owner
// streamed but did not write, from the shared signal stream, as signalled, and the mark of the
// last; nil: nothing known, then the last checkpoint is kept), its streamed pieces merged into
// blocks as the transcript writer merges them, an error event with InterruptedMessage and the
// status "interrupted". Call it at start before any run (startup true), and then periodically.
func (r *Runtime) TakeOver(ctx context.Context, replica string, startup bool, unwritten func(ctx context.Context, sessionID string, after store.SignalMark) ([]protocol.StreamEvent, store.SignalMark)) ([]store.TakenRun, error) {
	var un func(context.Context, string, store.SignalMark) []store.EventRow
	if unwritten != nil {
		un = func(ctx context.Context, sessionID string, after store.SignalMark) []store.EventRow {
			evs, last := unwritten(ctx, sessionID, after)
			var rows []store.EventRow
			for _, ev := range mergePieces(evs) {
				if row, ok := r.writer.row(sessionID, ev); ok {
					rows = append(rows, row)
				}
			}
			if len(rows) > 0 {
				rows[len(rows)-1].SignalSeq, rows[len(rows)-1].SignalEpoch = last.Seq, last.Epoch
			}
			return rows
		}
	}
	return r.st.TakeOverRuns(ctx, replica, startup, func(sessionID string) store.EventRow {
		row, _ := r.writer.row(sessionID, &protocol.ErrorEvent{Message: InterruptedMessage})
		return row
	}, un)
}

// mergePieces merges the streamed markdown and thinking pieces of evs into the closed blocks the
// transcript writer would have written (transcriptWriter.add): consecutive pieces of one kind and
// turn make one block; any other event closes it and stays as it is.
func mergePieces(evs []protocol.StreamEvent) []protocol.StreamEvent {
	var out []protocol.StreamEvent
	var kind, turn string
	var text strings.Builder
	open := false
	closeOpen := func() {
		if open {
			out = append(out, blockEvent(kind, turn, text.String()))
			text.Reset()
			open = false
		}
	}
	for _, ev := range evs {
		if k, t, piece, ok := streamedPiece(ev); ok {
			if open && (k != kind || t != turn) {
				closeOpen()
			}
			kind, turn, open = k, t, true
			text.WriteString(piece)
			continue
		}
		closeOpen()
		out = append(out, ev)
	}
	closeOpen()
	return out
}

// CancelAll cancels every running prompt (as chat.cancel does): how a replica that lost its
// leases stops the runs another replica has taken over. It returns the sessions it stopped.
func (r *Runtime) CancelAll() []string {
	var out []string
	for _, sid := range r.Running() {
		if r.Cancel(sid, "") {
			out = append(out, sid)
		}
	}
	return out
}

// Forget drops what the runtime holds of a deleted session: its conversation in memory and its
// transcript rows not written yet. The session must have no run: DeleteSession calls it.
func (r *Runtime) Forget(sessionID string) {
	r.conv.forget(sessionID)
	r.writer.forget(sessionID)
}

// maxDeleted bounds the deleted sessions the runtime remembers; past it it starts over.
const maxDeleted = 4096

// DeleteSession runs del (the store's delete of the session) unless the session has a run, queued
// follow-ups or dropped runs still to signal (IsRunning): then it returns a *Refusal and del does
// not run. No run can start on the session while del runs (Start refuses it), nor after del
// succeeded (Start answers store.ErrNotFound), so a chat.send racing the delete on another
// connection never runs a model for a session that is gone. On success the runtime forgets what it
// holds of the session (Forget). del's error is returned as is.
func (r *Runtime) DeleteSession(sessionID string, del func() error) error {
	r.mu.Lock()
	if r.isRunningLocked(sessionID) || r.deleting[sessionID] {
		r.mu.Unlock()
		return &Refusal{fmt.Sprintf("Session %q has a run or queued prompts; cancel them with chat.cancel, wait for run:end, then delete it.", sessionID)}
	}
	if r.deleting == nil || len(r.deleting) >= maxDeleted {
		r.deleting = map[string]bool{}
	}
	r.deleting[sessionID] = true
	r.mu.Unlock()
	err := del()
	r.mu.Lock()
	if err != nil {
		delete(r.deleting, sessionID)
	} else {
		r.deleting[sessionID] = false
	}
	r.mu.Unlock()
	if err == nil {
		r.Forget(sessionID)
	}
	return err
}

// IsRunning reports whether the session has a run that has not sent its run:end, queued
// follow-ups, or dropped ones still to signal.
func (r *Runtime) IsRunning(sessionID string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.isRunningLocked(sessionID)
}

func (r *Runtime) isRunningLocked(sessionID string) bool {
	if ru := r.active[sessionID]; ru != nil && !ru.ended {
		return true
	}
	return len(r.pending[sessionID]) > 0 || len(r.dropped[sessionID]) > 0
}
