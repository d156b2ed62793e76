package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zidane-server/zidane/protocol"
	"github.com/zidane-server/zidane/server/hub/jetstream"
	"github.com/zidane-server/zidane/server/sse"
)

// ReplayLimits bound the replay log (DESIGN "Replay log"; seed "Reconnect and resume").
type ReplayLimits struct {
	// PerSessionSignals is the most signals kept per session; default 2000.
	PerSessionSignals int
	// PerSessionBytes is the most bytes of signals kept per session; default 4 MiB.
	PerSessionBytes int
	// TotalBytes is the most bytes kept over all sessions; past it the least recently written
	// session's log is dropped first. Default 32 MiB.
	TotalBytes int
}

func (l *ReplayLimits) defaults() {
	if l.PerSessionSignals <= 0 {
		l.PerSessionSignals = 2000
	}
	if l.PerSessionBytes <= 0 {
		l.PerSessionBytes = 4 << 20
	}
	if l.TotalBytes <= 0 {
		l.TotalBytes = 32 << 20
	}
}

type logEntry struct {
	seq       int64
	streamSeq uint64 // the JetStream stream's sequence (with a bus), else 0
	kind      string // the signal's kind (the schema's string: shared, not a copy)
	signal    []byte // the signal's JSON without $seq
}

type sessionLog struct {
	// order is held from a signal's $seq assignment until it is queued on every recipient, so a
	// session's signals reach each connection in $seq order (field case B17) while other
	// sessions publish in parallel. Every signal of the session takes it, numbered or not, so
	// one publisher's signals keep their order too.
	order sync.Mutex

	// The rest is guarded by hub.mu.
	id      string
	lastSeq int64
	entries []logEntry // oldest first
	bytes   int
	tick    uint64 // last write, for least-recently-written eviction
}

// hub numbers sequenced signals, keeps the replay log and fans frames out to the connections
// each signal's audience (protocol.SignalSpec: Scopes, Delivery) allows. It has no code per
// signal kind: the generated signal table decides (docs/schema-guide.md "Signals and their
// audience").
//
// Locks: mu guards the logs, the watch lists and the connection list; it is never held while
// frames are queued. A session's signals are ordered by that session's sessionLog.order, the
// signals without a session by plain. Enqueueing never blocks (a full queue closes the slow
// connection), so holding an order lock during fan-out delays only that session's publishers.
type hub struct {
	mu       sync.Mutex
	epoch    string
	limits   ReplayLimits
	logs     map[string]*sessionLog
	total    int
	tick     uint64
	conns    map[*conn]struct{}
	list     atomic.Pointer[[]*conn]       // conns as a slice, replaced (never mutated) under mu
	watchers map[string]map[*conn]struct{} // watch key → connections
	watching map[*conn]map[string]struct{} // connection → its watch keys
	plain    sync.Mutex                    // orders signals without a session

	maxFrame  int                // the message limit: a larger signal is refused, never sent
	published interface{ Inc() } // the metrics counter, when set

	// With --nats-url (issue 25; docs/scaling.md): bus carries the signals between replicas. A
	// sequenced signal takes its $seq from the stream and enters this log when the stream hands
	// it back (apply), on every replica alike; unsequenced signals to all or others go through
	// the bus's live subject (live); origin and watchers signals stay with this replica, whose
	// connection caused them or watches. The connections and audiences stay here.
	bus     atomic.Pointer[jetstream.Bus]
	replica string          // this replica's name in connection references ("<replica>/<conn id>")
	byID    map[int64]*conn // the recipients by id, for references from the bus; under mu
	log     *slog.Logger
	// taps are the SSE streams (server/sse) by session, under mu; ntaps counts them so that a
	// publish with none takes no lock for them.
	taps  map[string]map[*tap]struct{}
	ntaps atomic.Int64
}

// tap is one SSE stream of a session: it receives the session's signals its scope receives, as
// encoded SSE records, through push (which never blocks).
type tap struct {
	scope protocol.Scope
	push  func(rec []byte) bool
}

// busTimeout bounds one signal's trip through JetStream (publish, then its return) and a
// resume's or snapshot's wait for this replica to catch up with the stream.
const busTimeout = 5 * time.Second

// errSignalTooLarge is publish's answer for a signal whose frame would exceed the message limit.
var errSignalTooLarge = errors.New("signal exceeds the message limit")

func newHub(epoch string, limits ReplayLimits, maxFrame int) *hub {
	limits.defaults()
	h := &hub{epoch: epoch, limits: limits, logs: map[string]*sessionLog{}, conns: map[*conn]struct{}{},
		watchers: map[string]map[*conn]struct{}{}, watching: map[*conn]map[string]struct{}{}, maxFrame: maxFrame, taps: map[string]map[*tap]struct{}{},
		byID: map[int64]*conn{}, log: slog.Default()}
	h.list.Store(&[]*conn{})
	return h
}

// add makes c a recipient (after its handshake: nothing is pushed before ipc.hello, B33).
func (h *hub) add(c *conn) {
	h.mu.Lock()
	h.conns[c] = struct{}{}
	h.byID[c.id] = c
	h.relist()
	h.mu.Unlock()
}

// remove drops c and its watches.
func (h *hub) remove(c *conn) {
	h.mu.Lock()
	delete(h.conns, c)
	if h.byID[c.id] == c {
		delete(h.byID, c.id)
	}
	for k := range h.watching[c] {
		h.unwatchLocked(c, k)
	}
	h.relist()
	h.mu.Unlock()
}

// relist publishes a fresh slice of the connections; callers hold mu.
func (h *hub) relist() {
	l := make([]*conn, 0, len(h.conns))
	for c := range h.conns {
		l = append(l, c)
	}
	h.list.Store(&l)
}

// watch subscribes c to the "watchers" signals published with key (for instance a repository's
// git:refs). Watching a key twice is one watch. A connection's watches end with it.
func (h *hub) watch(c *conn, key string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.conns[c]; !ok {
		return // not (or no longer) a recipient
	}
	if h.watchers[key] == nil {
		h.watchers[key] = map[*conn]struct{}{}
	}
	h.watchers[key][c] = struct{}{}
	if h.watching[c] == nil {
		h.watching[c] = map[string]struct{}{}
	}
	h.watching[c][key] = struct{}{}
}

// unwatch ends c's watch of key; a key it does not watch is a no-op.
func (h *hub) unwatch(c *conn, key string) {
	h.mu.Lock()
	h.unwatchLocked(c, key)
	h.mu.Unlock()
}

func (h *hub) unwatchLocked(c *conn, key string) {
	if w := h.watchers[key]; w != nil {
		delete(w, c)
		if len(w) == 0 {
			delete(h.watchers, key)
		}
	}
	if w := h.watching[c]; w != nil {
		delete(w, key)
		if len(w) == 0 {
			delete(h.watching, c)
		}
	}
}

// watchCount is how many connections watch key.
func (h *hub) watchCount(key string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.watchers[key])
}

// publish sends sig to the connections its audience allows (protocol.SignalSpec of its kind):
// those that completed the handshake with a token whose scope Receives it, narrowed by its
// Delivery: all of them; only from (origin); all but from (others); or only those that watch
// watchKey (watchers; watchKey is ignored otherwise). from is the connection that started or
// caused the work, or nil (then origin reaches nobody and others reaches everyone).
//
// A Sequenced signal gets the next $seq of its session and enters the replay log, also when no
// connection receives it now; publish returns that $seq (0 for other signals). A signal is
// encoded once and its frame shared by every recipient. Errors: an unknown kind, a watchers
// signal without a key, a frame over the message limit (errSignalTooLarge); nothing is sent then.
func (h *hub) publish(sig protocol.Signal, from *conn, watchKey string) (int64, error) {
	spec := protocol.LookupSignal(sig.SignalKind())
	if spec == nil {
		return 0, fmt.Errorf("signal kind %q is not in the schema", sig.SignalKind())
	}
	if spec.Delivery == protocol.DeliveryWatchers && watchKey == "" {
		return 0, fmt.Errorf("signal %q is delivered to watchers: publish it with a watch key", spec.Kind)
	}
	body, err := protocol.Marshal(sig)
	if err != nil {
		return 0, err
	}
	if h.maxFrame > 0 && len(body)+96 > h.maxFrame { // 96: the envelope and "$seq"
		return 0, fmt.Errorf("%w: %d bytes", errSignalTooLarge, len(body))
	}
	if h.published != nil {
		h.published.Inc()
	}
	var order *sync.Mutex
	var lg *sessionLog
	if ss, ok := sig.(interface{ SessionKey() string }); ok && spec.Session {
		h.mu.Lock()
		lg = h.logs[ss.SessionKey()]
		if lg == nil {
			lg = &sessionLog{id: ss.SessionKey()}
			h.logs[lg.id] = lg
		}
		h.mu.Unlock()
		order = &lg.order
	} else {
		order = &h.plain
	}
	if bus := h.bus.Load(); bus != nil && spec.Delivery != protocol.DeliveryOrigin && spec.Delivery != protocol.DeliveryWatchers {
		if !spec.Sequenced || lg == nil {
			return 0, bus.PublishLive(spec.Kind, body, h.ref(from), "")
		}
		// The order lock keeps this replica's publishers of the session from racing each other
		// for a $seq; the stream orders them against other replicas'.
		order.Lock()
		defer order.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), busTimeout)
		defer cancel()
		seq, streamSeq, err := bus.Publish(ctx, lg.id, spec.Kind, body, h.ref(from))
		if err == nil { // returned once in this replica's log, as the in-process hub's publish
			err = bus.WaitApplied(ctx, streamSeq)
		}
		return seq, err
	}
	order.Lock()
	defer order.Unlock()
	var seq int64
	if spec.Sequenced && lg != nil {
		h.mu.Lock()
		lg.lastSeq++
		seq = lg.lastSeq
		h.tick++
		lg.tick = h.tick
		lg.entries = append(lg.entries, logEntry{seq: seq, kind: spec.Kind, signal: body})
		lg.bytes += len(body)
		h.total += len(body)
		h.trim(lg)
		h.mu.Unlock()
	}
	frame := signalFrame(body, seq)
	h.deliver(spec, from, watchKey, frame)
	if lg != nil && h.ntaps.Load() > 0 && (spec.Delivery == protocol.DeliveryAll || spec.Delivery == protocol.DeliveryOthers) {
		h.deliverTaps(spec, lg.id, body, seq)
	}
	return seq, nil
}

// publishHere delivers an unsequenced signal to this replica's connections its audience allows,
// never through the bus (presence:changed, which each replica sums for its own connections).
// Errors as publish's.
func (h *hub) publishHere(sig protocol.Signal) error {
	spec := protocol.LookupSignal(sig.SignalKind())
	if spec == nil {
		return fmt.Errorf("signal kind %q is not in the schema", sig.SignalKind())
	}
	body, err := protocol.Marshal(sig)
	if err != nil {
		return err
	}
	if h.maxFrame > 0 && len(body)+96 > h.maxFrame {
		return fmt.Errorf("%w: %d bytes", errSignalTooLarge, len(body))
	}
	if h.published != nil {
		h.published.Inc()
	}
	h.plain.Lock()
	defer h.plain.Unlock()
	h.deliver(spec, nil, "", signalFrame(body, 0))
	return nil
}

// deliverTaps pushes a session signal to the session's SSE streams whose scope receives it, as
// one record encoded once; callers hold the session's order lock, so records keep $seq order.
func (h *hub) deliverTaps(spec *protocol.SignalSpec, sessionID string, body []byte, seq int64) {
	h.mu.Lock()
	out, epoch := h.tapsLocked(spec, sessionID), h.epoch
	h.mu.Unlock()
	pushTaps(out, epoch, spec, body, seq)
}

// tapsLocked lists the session's SSE streams whose scope receives spec; callers hold h.mu.
func (h *hub) tapsLocked(spec *protocol.SignalSpec, sessionID string) []*tap {
	ts := h.taps[sessionID]
	if len(ts) == 0 {
		return nil
	}
	out := make([]*tap, 0, len(ts))
	for t := range ts {
		if spec.Receives(t.scope) {
			out = append(out, t)
		}
	}
	return out
}

// pushTaps pushes one record, encoded once, to every tap of out.
func pushTaps(out []*tap, epoch string, spec *protocol.SignalSpec, body []byte, seq int64) {
	if len(out) == 0 {
		return
	}
	rec := sse.Record(epoch, seq, spec.Kind, withSeq(body, seq))
	for _, t := range out {
		t.push(rec)
	}
}

// tapSession adds an SSE stream of a session (sse.Backend.Subscribe). With at, it answers the
// session's records after at from the replay log first, or the reason it cannot (another epoch,
// a gap; a position past the session's last $seq is a gap too); either way the stream receives
// every record published after the ones replayed, none twice and none lost: the replay and the
// tap's registration are one critical section of h.mu, inside the session's order lock. Without
// a bus, publish holds the order lock from numbering to the taps' push; with one, apply appends
// to the log and lists the taps in one critical section of h.mu.
func (h *hub) tapSession(sessionID string, scope protocol.Scope, at *sse.Position, push func([]byte) bool) sse.Subscription {
	var sub sse.Subscription
	caughtUp := true
	if bus := h.bus.Load(); bus != nil && at != nil {
		caughtUp = h.barrier(bus, sessionID)
	}
	h.mu.Lock()
	lg := h.logs[sessionID]
	if lg == nil {
		lg = &sessionLog{id: sessionID}
		h.logs[sessionID] = lg
	}
	h.mu.Unlock()
	lg.order.Lock()
	t := &tap{scope: scope, push: push}
	h.mu.Lock()
	if at != nil {
		ans := resumeAnswer{reason: protocol.ResumeFailureGap}
		if caughtUp {
			ans = h.replayLocked(sessionID, at.Epoch, at.Seq)
		}
		switch {
		case ans.ahead:
			sub.Reset = protocol.ResumeFailureGap
		case !ans.ok:
			sub.Reset = ans.reason
		default:
			for _, e := range ans.signals {
				if spec := protocol.LookupSignal(e.kind); spec != nil && spec.Receives(scope) {
					sub.Replay = append(sub.Replay, sse.Record(h.epoch, e.seq, e.kind, withSeq(e.signal, e.seq)))
				}
			}
		}
	}
	if h.taps[sessionID] == nil {
		h.taps[sessionID] = map[*tap]struct{}{}
	}
	h.taps[sessionID][t] = struct{}{}
	h.ntaps.Add(1)
	h.mu.Unlock()
	lg.order.Unlock()
	var once sync.Once
	sub.Cancel = func() {
		once.Do(func() {
			h.mu.Lock()
			delete(h.taps[sessionID], t)
			if len(h.taps[sessionID]) == 0 {
				delete(h.taps, sessionID)
			}
			h.ntaps.Add(-1)
			h.mu.Unlock()
		})
	}
	return sub
}

// withSeq is a signal's JSON with "$seq" spliced in as its last member (as ipc.signal carries
// it); body itself when seq is 0.
func withSeq(body []byte, seq int64) []byte {
	if seq <= 0 {
		return body
	}
	b := make([]byte, 0, len(body)+24)
	b = append(b, body[:len(body)-1]...)
	b = append(b, `,"$seq":`...)
	b = strconv.AppendInt(b, seq, 10)
	return append(b, '}')
}

// deliver queues frame on every connection spec's audience allows.
func (h *hub) deliver(spec *protocol.SignalSpec, from *conn, watchKey string, frame []byte) {
	switch spec.Delivery {
	case protocol.DeliveryOrigin:
		if from == nil || !spec.Receives(from.scope) {
			return
		}
		h.mu.Lock()
		_, in := h.conns[from]
		h.mu.Unlock()
		if in {
			from.sendSignal(frame)
		}
	case protocol.DeliveryWatchers:
		h.mu.Lock()
		out := make([]*conn, 0, len(h.watchers[watchKey]))
		for c := range h.watchers[watchKey] {
			if spec.Receives(c.scope) {
				out = append(out, c)
			}
		}
		h.mu.Unlock()
		for _, c := range out {
			c.sendSignal(frame)
		}
	case protocol.DeliveryAll, protocol.DeliveryOthers:
		for _, c := range *h.list.Load() {
			if spec.Receives(c.scope) && (spec.Delivery == protocol.DeliveryAll || c != from) {
				c.sendSignal(frame)
			}
		}
	}
}

// trim enforces the per-session and total limits; callers hold h.mu. It reports whether the
// per-session byte limit dropped entries of lg.
func (h *hub) trim(lg *sessionLog) (byBytes bool) {
	for len(lg.entries) > h.limits.PerSessionSignals || (lg.bytes > h.limits.PerSessionBytes && len(lg.entries) > 1) {
		byBytes = byBytes || len(lg.entries) <= h.limits.PerSessionSignals
		lg.bytes -= len(lg.entries[0].signal)
		h.total -= len(lg.entries[0].signal)
		lg.entries[0] = logEntry{}
		lg.entries = lg.entries[1:]
	}
	for h.total > h.limits.TotalBytes {
		var oldest *sessionLog
		for _, l := range h.logs {
			if len(l.entries) > 0 && l != lg && (oldest == nil || l.tick < oldest.tick) {
				oldest = l
			}
		}
		if oldest == nil {
			oldest = lg
		}
		h.total -= oldest.bytes
		oldest.bytes = 0
		oldest.entries = nil
		if oldest == lg {
			return byBytes
		}
	}
	return byBytes
}

// signalFrame builds the ipc.signal notification, splicing "$seq" in as the last member.
func signalFrame(body []byte, seq int64) []byte {
	var b bytes.Buffer
	b.Grow(len(body) + 64)
	b.WriteString(`{"jsonrpc":"2.0","method":"ipc.signal","params":`)
	if seq > 0 {
		b.Write(body[:len(body)-1])
		b.WriteString(`,"$seq":`)
		b.WriteString(strconv.FormatInt(seq, 10))
		b.WriteByte('}')
	} else {
		b.Write(body)
	}
	b.WriteByte('}')
	return b.Bytes()
}

// resumeAnswer is the outcome of a replay request.
type resumeAnswer struct {
	ok      bool
	reason  protocol.ResumeFailure
	signals []logEntry
	ahead   bool  // afterSeq is past the session's last $seq
	last    int64 // the session's last $seq
}

// watermark returns the $seq of the session's last sequenced signal in this epoch (0 for none) and
// the epoch; the watermark of sessions.loadEvents and sessions.getTurns (see agent.Consistent).
func (h *hub) watermark(sessionID string) (int64, string) {
	if bus := h.bus.Load(); bus != nil {
		h.barrier(bus, sessionID)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if lg := h.logs[sessionID]; lg != nil {
		return lg.lastSeq, h.epoch
	}
	return 0, h.epoch
}

// replay returns the signals of a session after afterSeq, if the log still holds all of them.
func (h *hub) replay(sessionID, epoch string, afterSeq int64) resumeAnswer {
	if bus := h.bus.Load(); bus != nil && !h.barrier(bus, sessionID) {
		// What this replica holds may lag what the client saw elsewhere: a reload is safe.
		return resumeAnswer{reason: protocol.ResumeFailureGap}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.replayLocked(sessionID, epoch, afterSeq)
}

// replayLocked is replay once this replica caught up; callers hold h.mu.
func (h *hub) replayLocked(sessionID, epoch string, afterSeq int64) resumeAnswer {
	if epoch != h.epoch {
		return resumeAnswer{reason: protocol.ResumeFailureEpoch}
	}
	lg := h.logs[sessionID]
	var last int64
	if lg != nil {
		last = lg.lastSeq
	}
	if afterSeq > last {
		return resumeAnswer{ahead: true, last: last}
	}
	if afterSeq == last {
		return resumeAnswer{ok: true, last: last}
	}
	if len(lg.entries) == 0 || lg.entries[0].seq > afterSeq+1 {
		return resumeAnswer{reason: protocol.ResumeFailureGap, last: last}
	}
	i := int(afterSeq + 1 - lg.entries[0].seq)
	out := make([]logEntry, len(lg.entries)-i)
	copy(out, lg.entries[i:])
	return resumeAnswer{ok: true, signals: out, last: last}
}

// currentEpoch is the signal epoch: the process's, or the JetStream stream's with a bus.
func (h *hub) currentEpoch() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.epoch
}

// barrier waits until this replica's log holds every signal of the session the stream holds;
// false (logged) when NATS did not answer in time.
func (h *hub) barrier(bus *jetstream.Bus, sessionID string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), busTimeout)
	defer cancel()
	if err := bus.Barrier(ctx, sessionID); err != nil {
		h.log.Warn("this replica could not catch up with the signal stream", "session", sessionID, "err", err)
		return false
	}
	return true
}

// ref names c across replicas ("<replica>/<connection id>"); "" for nil.
func (h *hub) ref(c *conn) string {
	if c == nil {
		return ""
	}
	return h.replica + "/" + strconv.FormatInt(c.id, 10)
}

// local is the connection of this replica a reference names, or nil (another replica's, or none).
func (h *hub) local(ref string) *conn {
	rest, ok := strings.CutPrefix(ref, h.replica+"/")
	if !ok || h.replica == "" {
		return nil
	}
	id, err := strconv.ParseInt(rest, 10, 64)
	if err != nil {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.byID[id]
}

// apply is the bus's Apply: a sequenced signal off the stream (any replica's, in stream order)
// enters this replica's log under the $seq the stream gave it and goes to this replica's
// connections, as publish does without a bus. A $seq this log already has (the consumer
// delivered again after a reconnect) is skipped; a $seq past the next one (this replica did not
// see the ones between: evicted before it read them) starts the session's log again, so resume
// answers gap for what it lacks.
func (h *hub) apply(m jetstream.Message) {
	spec := protocol.LookupSignal(m.Kind)
	if spec == nil {
		h.log.Error("a signal of an unknown kind on the stream: skipped (a replica of another version?)", "kind", m.Kind)
		return
	}
	h.mu.Lock()
	lg := h.logs[m.Session]
	if lg == nil {
		lg = &sessionLog{id: m.Session}
		h.logs[lg.id] = lg
	}
	if m.Seq <= lg.lastSeq {
		h.mu.Unlock()
		return
	}
	if m.Seq != lg.lastSeq+1 {
		h.total -= lg.bytes
		lg.bytes, lg.entries = 0, nil
	}
	lg.lastSeq = m.Seq
	h.tick++
	lg.tick = h.tick
	lg.entries = append(lg.entries, logEntry{seq: m.Seq, streamSeq: m.StreamSeq, kind: spec.Kind, signal: m.Body})
	lg.bytes += len(m.Body)
	h.total += len(m.Body)
	var purge uint64
	if h.trim(lg) && m.Mine && len(lg.entries) > 0 {
		purge = lg.entries[0].streamSeq
	}
	taps, epoch := h.tapsLocked(spec, m.Session), h.epoch // with the append: see tapSession
	h.mu.Unlock()
	if purge > 0 {
		if bus := h.bus.Load(); bus != nil {
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), busTimeout)
				defer cancel()
				if err := bus.PurgeBefore(ctx, m.Session, purge); err != nil {
					h.log.Warn("the session's oldest signals past its byte limit were not purged from the stream", "session", m.Session, "err", err)
				}
			}()
		}
	}
	h.deliver(spec, h.local(m.From), "", signalFrame(m.Body, m.Seq))
	pushTaps(taps, epoch, spec, m.Body, m.Seq)
}

// live is the bus's Live: an unsequenced signal of any replica to this replica's connections.
func (h *hub) live(m jetstream.Message) {
	spec := protocol.LookupSignal(m.Kind)
	if spec == nil {
		h.log.Error("a signal of an unknown kind on NATS: skipped (a replica of another version?)", "kind", m.Kind)
		return
	}
	h.deliver(spec, h.local(m.From), m.WatchKey, signalFrame(m.Body, 0))
	if m.Session != "" && spec.Session && h.ntaps.Load() > 0 && (spec.Delivery == protocol.DeliveryAll || spec.Delivery == protocol.DeliveryOthers) {
		h.deliverTaps(spec, m.Session, m.Body, 0)
	}
}

// reset is the bus's Reset: the stream was created again, every $seq is of the old epoch.
func (h *hub) reset(epoch string) {
	h.mu.Lock()
	h.epoch = epoch
	h.logs = map[string]*sessionLog{}
	h.total = 0
	h.mu.Unlock()
}
