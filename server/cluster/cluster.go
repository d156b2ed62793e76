// Package cluster makes one zidane-server process a replica among several on one Postgres
// (issue 25 §2–4, docs/scaling.md): a replica row kept alive by a heartbeat, the run leases of the
// sessions it runs, the takeover of a dead replica's runs once its lease expires, and calls from
// one replica to another (a prompt, a cancel, an answer to an approval or a question for the run
// another replica owns) carried by Postgres LISTEN/NOTIFY.
//
// Why LISTEN/NOTIFY and not a NATS request: every replica has Postgres (the leases are there),
// not every deployment has NATS (--nats-url is optional, and the in-process hub stays the
// default), so the routing works the same in both. A call is a row (bodies of any size: a prompt
// may be megabytes, a NOTIFY payload at most 8000 bytes) announced by a NOTIFY in the same
// statement, answered by the owner in its row and announced back; a lost notice is made up for by
// a poll while a caller waits and a re-read of unanswered calls after every (re)LISTEN.
//
// The package knows nothing of the transport: the server hands it a Handle function for the
// calls it receives and a TakeOver function for the runs it takes over.
package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zidane-server/zidane/protocol"
	"github.com/zidane-server/zidane/server/store"
)

// Defaults of the lease bound (docs/scaling.md "Runs and leases"): a replica renews its row every
// DefaultHeartbeat; a row not renewed for DefaultLeaseTTL is dead, and the next sweep of any live
// replica (every heartbeat) takes its runs over. A killed replica's runs are therefore marked
// interrupted at most DefaultLeaseTTL + DefaultHeartbeat (12 s) after its last heartbeat.
const (
	DefaultLeaseTTL  = 10 * time.Second
	DefaultHeartbeat = 2 * time.Second
)

// LeaseLinger is how long a replica keeps a session's lease after the session's last run here
// ended: a next prompt within it starts without a round trip to Postgres (the lease is this
// replica's already), and a prompt sent to another replica meanwhile is queued here.
const LeaseLinger = 30 * time.Second

// CallTimeout bounds how long a call to another replica waits for its answer.
const CallTimeout = 10 * time.Second

// Config configures a Replica.
type Config struct {
	// Store is the shared database. Required.
	Store *store.Store
	// ID names this replica; unique among the replicas of one database, and the same across a
	// restart of one replica (so the restarted one ends its own runs at once). Required.
	ID string
	// LeaseTTL and Heartbeat: see DefaultLeaseTTL, DefaultHeartbeat. Heartbeat must be below
	// LeaseTTL (New refuses it otherwise).
	LeaseTTL, Heartbeat time.Duration
	// Logger logs; default slog.Default().
	Logger *slog.Logger
	// Handle answers a call another replica made to this one: body is the caller's, the answer
	// goes back as is. It runs on its own goroutine per call.
	Handle func(ctx context.Context, body []byte) []byte
	// TakeOver ends the runs no live replica owns (startup: this replica's own leftover runs
	// too); called at Start and after every heartbeat.
	TakeOver func(ctx context.Context, startup bool)
	// Lost is called when this replica finds it was declared dead (its row was taken over, or
	// its heartbeat failed for LeaseTTL): its runs are another replica's to end, so it stops them.
	Lost func(reason string)
}

// Replica is this process's membership of the replicas of one database. Safe for concurrent use.
type Replica struct {
	cfg Config
	st  *store.Store
	log *slog.Logger

	mu      sync.Mutex
	waiters map[int64]chan struct{} // calls this replica waits on, by id

	stop context.CancelFunc // ends the heartbeat loop (Close)
	done chan struct{}      // closed when the loop ended

	leaseMu sync.Mutex
	leases  map[string]*lease // the leases this replica holds, by session

	held   atomic.Int64 // len(leases) (the zidane_run_leases gauge)
	calls  atomic.Int64 // calls made to other replicas
	served atomic.Int64 // calls answered for other replicas
}

// New checks cfg and returns the replica; Start registers it.
func New(cfg Config) (*Replica, error) {
	if cfg.Store == nil || cfg.ID == "" {
		return nil, errors.New("cluster: Config.Store and Config.ID are required")
	}
	if cfg.LeaseTTL <= 0 {
		cfg.LeaseTTL = DefaultLeaseTTL
	}
	if cfg.Heartbeat <= 0 {
		cfg.Heartbeat = DefaultHeartbeat
	}
	if cfg.Heartbeat >= cfg.LeaseTTL {
		return nil, fmt.Errorf("cluster: the heartbeat (%s) must be shorter than the lease bound (%s); pass a shorter --lease-heartbeat or a longer --lease-ttl", cfg.Heartbeat, cfg.LeaseTTL)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Replica{cfg: cfg, st: cfg.Store, log: cfg.Logger, waiters: map[int64]chan struct{}{}, leases: map[string]*lease{}}, nil
}

// lease is a run lease this replica holds: its generation, whether a run holds it now, and the
// timer that gives it back LeaseLinger after its last run.
type lease struct {
	gen    string
	inUse  bool
	linger *time.Timer
}

// ID is this replica's id.
func (r *Replica) ID() string { return r.cfg.ID }

// LeaseTTL is the lease bound: how long a replica's row lives without a heartbeat.
func (r *Replica) LeaseTTL() time.Duration { return r.cfg.LeaseTTL }

// Held is the number of run leases this replica holds.
func (r *Replica) Held() int64 { return r.held.Load() }

// Calls returns the calls made to other replicas and those answered for them.
func (r *Replica) Calls() (made, served int64) { return r.calls.Load(), r.served.Load() }

// Start registers the replica, ends its own leftover runs and those of dead replicas (TakeOver
// with startup set), and keeps the row alive until ctx ends.
func (r *Replica) Start(ctx context.Context) error {
	if err := r.st.RegisterReplica(ctx, r.cfg.ID, r.cfg.LeaseTTL); err != nil {
		return fmt.Errorf("register replica %q: %w", r.cfg.ID, err)
	}
	if r.cfg.TakeOver != nil {
		r.cfg.TakeOver(ctx, true)
	}
	ctx, r.stop = context.WithCancel(ctx)
	r.done = make(chan struct{})
	go r.loop(ctx)
	return nil
}

func (r *Replica) loop(ctx context.Context) {
	defer close(r.done)
	t := time.NewTicker(r.cfg.Heartbeat)
	defer t.Stop()
	lastOK := time.Now()
	lost := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		hctx, cancel := context.WithTimeout(ctx, r.cfg.Heartbeat)
		err := r.st.Heartbeat(hctx, r.cfg.ID, r.cfg.LeaseTTL)
		cancel()
		switch {
		case errors.Is(err, store.ErrReplicaGone):
			r.log.Error("cluster: this replica was declared dead by another (its heartbeat had lapsed); its runs are stopped and it registers again", "replica", r.cfg.ID)
			r.lose("this replica's lease was taken over by another replica")
			if err := r.st.RegisterReplica(ctx, r.cfg.ID, r.cfg.LeaseTTL); err == nil {
				lastOK, lost = time.Now(), false
			}
			continue
		case err != nil:
			if ctx.Err() != nil {
				return
			}
			r.log.Warn("cluster: heartbeat failed", "replica", r.cfg.ID, "err", err)
			if !lost && time.Since(lastOK) >= r.cfg.LeaseTTL {
				lost = true
				r.lose("this replica could not renew its lease for " + r.cfg.LeaseTTL.String())
			}
			continue
		}
		lastOK, lost = time.Now(), false
		if r.cfg.TakeOver != nil {
			r.cfg.TakeOver(ctx, false)
		}
	}
}

func (r *Replica) lose(reason string) {
	r.leaseMu.Lock() // the leases are another replica's now
	for sid, l := range r.leases {
		if l.linger != nil {
			l.linger.Stop()
		}
		delete(r.leases, sid)
	}
	r.held.Store(0)
	r.leaseMu.Unlock()
	if r.cfg.Lost != nil {
		r.cfg.Lost(reason)
	}
}

// Close removes the replica's row and leases (a clean shutdown, after its runs ended), so the
// others need not wait for the lease bound.
func (r *Replica) Close(ctx context.Context) {
	if r.stop == nil {
		return
	}
	r.stop()
	<-r.done
	if err := r.st.RemoveReplica(ctx, r.cfg.ID); err != nil {
		r.log.Warn("cluster: could not remove this replica's row; the others take it over after the lease bound", "err", err)
	}
}

// ElsewhereError is the error of Acquire when another live replica runs the session: the caller
// sends the prompt there (CallReplica).
type ElsewhereError struct{ Replica string }

func (e *ElsewhereError) Error() string {
	return fmt.Sprintf("the session runs on replica %q", e.Replica)
}

// Acquire implements agent.Leases: it takes the session's run lease, at once when this replica
// still holds it (LeaseLinger). When the lease is held by a dead replica whose runs were not
// taken over yet, it takes them over first and tries again. Errors: *ElsewhereError (another live
// replica runs the session), the store's.
func (r *Replica) Acquire(ctx context.Context, sessionID, runID string) (string, error) {
	r.leaseMu.Lock()
	if l := r.leases[sessionID]; l != nil && !l.inUse {
		if l.linger != nil {
			l.linger.Stop()
			l.linger = nil
		}
		l.inUse = true
		r.leaseMu.Unlock()
		r.Running(sessionID, l.gen, runID)
		return l.gen, nil
	}
	r.leaseMu.Unlock()
	for try := 0; ; try++ {
		gen, err := r.st.AcquireLease(ctx, sessionID, r.cfg.ID, runID)
		var held *store.LeaseHeldError
		switch {
		case err == nil:
			r.leaseMu.Lock()
			if old := r.leases[sessionID]; old != nil && old.linger != nil {
				old.linger.Stop()
			}
			r.leases[sessionID] = &lease{gen: gen, inUse: true}
			r.held.Store(int64(len(r.leases)))
			r.leaseMu.Unlock()
			return gen, nil
		case errors.As(err, &held):
			return "", &ElsewhereError{Replica: held.Replica}
		case errors.Is(err, store.ErrLeaseHeld) && try == 0 && r.cfg.TakeOver != nil:
			r.cfg.TakeOver(ctx, false)
		default:
			return "", err
		}
	}
}

// Running implements agent.Leases: it records the follow-up that holds the session (in the
// background).
func (r *Replica) Running(sessionID, gen, runID string) {
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := r.st.SetLeaseRun(ctx, sessionID, gen, runID); err != nil {
			r.log.Warn("cluster: could not record the run of a lease", "session", sessionID, "err", err)
		}
	}()
}

// Release implements agent.Leases: the session's last run here ended. The lease is kept for
// LeaseLinger, then deleted in Postgres if it still has generation gen (a newer one is kept).
func (r *Replica) Release(sessionID, gen string) {
	r.leaseMu.Lock()
	defer r.leaseMu.Unlock()
	l := r.leases[sessionID]
	if l == nil || l.gen != gen {
		r.releaseNow(sessionID, gen) // not one this replica tracks (lost and taken again)
		return
	}
	l.inUse = false
	l.linger = time.AfterFunc(LeaseLinger, func() {
		r.leaseMu.Lock()
		defer r.leaseMu.Unlock()
		if cur := r.leases[sessionID]; cur == l && !l.inUse {
			delete(r.leases, sessionID)
			r.held.Store(int64(len(r.leases)))
			r.releaseNow(sessionID, gen)
		}
	})
}

// Yield gives the session's lingering lease up at once when no run holds it here (an idle
// session): another replica is about to run the session. It reports false when a run here holds
// the lease, or this replica tracks none for the session (then it runs the prompt itself).
func (r *Replica) Yield(ctx context.Context, sessionID string) bool {
	r.leaseMu.Lock()
	l := r.leases[sessionID]
	if l == nil || l.inUse {
		r.leaseMu.Unlock()
		return false
	}
	if l.linger != nil {
		l.linger.Stop()
	}
	delete(r.leases, sessionID)
	r.held.Store(int64(len(r.leases)))
	r.leaseMu.Unlock()
	if err := r.st.ReleaseLease(ctx, sessionID, l.gen); err != nil {
		r.log.Warn("cluster: could not yield a run lease", "session", sessionID, "err", err)
		return false
	}
	return true
}

// releaseNow deletes the lease of generation gen in Postgres, in the background.
func (r *Replica) releaseNow(sessionID, gen string) {
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := r.st.ReleaseLease(ctx, sessionID, gen); err != nil {
			r.log.Warn("cluster: could not release a run lease; it ends with this replica", "session", sessionID, "err", err)
		}
	}()
}

// Owner returns the live replica other than this one that runs the session, or "" when this one
// or none does.
func (r *Replica) Owner(ctx context.Context, sessionID string) (string, error) {
	owner, live, err := r.st.LeaseOwner(ctx, sessionID)
	if err != nil || !live || owner == r.cfg.ID {
		return "", err
	}
	return owner, nil
}

// Notices returns the channels the store's listener must carry to this replica (with
// store.Listen) and their handlers.
func (r *Replica) Notices() map[string]func(string) {
	return map[string]func(string){
		store.ReplicaCallChannel:  r.callNotice,
		store.ReplicaReplyChannel: r.replyNotice,
	}
}

// Listening is called after every (re)LISTEN: calls announced while the listener was down are
// served now, and the waiting callers look at their replies.
func (r *Replica) Listening(ctx context.Context) {
	ids, err := r.st.PendingCalls(ctx, r.cfg.ID)
	if err != nil {
		r.log.Warn("cluster: could not read the calls waiting for this replica", "err", err)
	}
	for _, id := range ids {
		go r.serve(ctx, id)
	}
	r.mu.Lock()
	for _, ch := range r.waiters {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	r.mu.Unlock()
}

func (r *Replica) callNotice(payload string) {
	target, id, ok := store.ParseCallNotice(payload)
	if ok && target == r.cfg.ID {
		go r.serve(context.Background(), id)
	}
}

func (r *Replica) replyNotice(payload string) {
	var id int64
	if _, err := fmt.Sscan(payload, &id); err != nil {
		return
	}
	r.mu.Lock()
	ch := r.waiters[id]
	r.mu.Unlock()
	if ch != nil {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// serve answers call id when it is this replica's and not answered yet.
func (r *Replica) serve(ctx context.Context, id int64) {
	body, err := r.st.TakeCall(ctx, id, r.cfg.ID)
	if err != nil {
		if !errors.Is(err, store.ErrNotFound) {
			r.log.Warn("cluster: could not read a call", "call", id, "err", err)
		}
		return
	}
	r.served.Add(1)
	hctx, cancel := context.WithTimeout(ctx, CallTimeout)
	reply := r.cfg.Handle(hctx, []byte(body))
	cancel()
	if len(reply) == 0 {
		reply = []byte(`{}`)
	}
	rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := r.st.ReplyCall(rctx, id, string(reply)); err != nil {
		r.log.Warn("cluster: could not answer a call", "call", id, "err", err)
	}
}

// ErrNoAnswer: the replica called did not answer within CallTimeout (or the caller's deadline).
var ErrNoAnswer = errors.New("cluster: the replica did not answer")

// Call sends body to replica target and returns its answer, waiting at most CallTimeout (or
// ctx's deadline). Errors: ErrNoAnswer (the target is down or stuck: its lease then expires
// within the lease bound), the store's.
func (r *Replica) Call(ctx context.Context, target string, body []byte) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, CallTimeout)
	defer cancel()
	r.calls.Add(1)
	ch := make(chan struct{}, 1)
	id, err := r.st.CallReplica(ctx, target, string(body))
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	r.waiters[id] = ch
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		delete(r.waiters, id)
		r.mu.Unlock()
		ectx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = r.st.EndCall(ectx, id)
		cancel()
	}()
	poll := time.NewTicker(time.Second) // a reply notice lost with the listener's connection
	defer poll.Stop()
	for {
		reply, err := r.st.CallReply(ctx, id)
		if err == nil && reply != "" {
			return []byte(reply), nil
		}
		if err != nil && ctx.Err() == nil {
			return nil, err
		}
		select {
		case <-ch:
		case <-poll.C:
		case <-ctx.Done():
			return nil, fmt.Errorf("%w within %s: replica %q", ErrNoAnswer, CallTimeout, target)
		}
	}
}

// Health is what a shared signal hub (the NATS JetStream one, --nats-url) implements for
// GET /healthz and chat.send: Healthy returns nil while the hub can publish, else what is wrong.
// While it is unhealthy the replica answers /healthz 503 "degraded: …", refuses new runs with a
// clear error and keeps its connections; it recovers without a restart once Healthy is nil again.
type Health interface {
	Healthy() error
}

// Tail is what a shared signal hub implements so a replica taking over a dead replica's run keeps
// what that run streamed but its owner did not write yet (issue 25 §2): Unwritten returns the
// session's events whose signals came after the stored transcript's signal mark after (the last
// $seq its rows hold; store.SignalMark), as signalled (streamed pieces one by one: the runtime
// merges them as its transcript writer does), in $seq order, and the mark of the last one. They
// replace the run's last open-block checkpoint. An error (the stream lost some of them, another
// epoch, NATS away) keeps the checkpoint instead.
type Tail interface {
	Unwritten(ctx context.Context, sessionID string, after store.SignalMark) ([]protocol.StreamEvent, store.SignalMark, error)
}
