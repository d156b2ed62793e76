package server

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/zidane-server/zidane/protocol"
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
	seq    int64
	kind   string // the signal's kind (the schema's string: shared, not a copy)
	signal []byte // the signal's JSON without $seq
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
}

// errSignalTooLarge is publish's answer for a signal whose frame would exceed the message limit.
var errSignalTooLarge = errors.New("signal exceeds the message limit")

func newHub(epoch string, limits ReplayLimits, maxFrame int) *hub {
	limits.defaults()
	h := &hub{epoch: epoch, limits: limits, logs: map[string]*sessionLog{}, conns: map[*conn]struct{}{},
		watchers: map[string]map[*conn]struct{}{}, watching: map[*conn]map[string]struct{}{}, maxFrame: maxFrame}
	h.list.Store(&[]*conn{})
	return h
}

// add makes c a recipient (after its handshake: nothing is pushed before ipc.hello, B33).
func (h *hub) add(c *conn) {
	h.mu.Lock()
	h.conns[c] = struct{}{}
	h.relist()
	h.mu.Unlock()
}

// remove drops c and its watches.
func (h *hub) remove(c *conn) {
	h.mu.Lock()
	delete(h.conns, c)
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
	return seq, nil
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

// trim enforces the per-session and total limits; callers hold h.mu.
func (h *hub) trim(lg *sessionLog) {
	for len(lg.entries) > h.limits.PerSessionSignals || (lg.bytes > h.limits.PerSessionBytes && len(lg.entries) > 1) {
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
			return
		}
	}
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
	h.mu.Lock()
	defer h.mu.Unlock()
	if lg := h.logs[sessionID]; lg != nil {
		return lg.lastSeq, h.epoch
	}
	return 0, h.epoch
}

// replay returns the signals of a session after afterSeq, if the log still holds all of them.
func (h *hub) replay(sessionID, epoch string, afterSeq int64) resumeAnswer {
	h.mu.Lock()
	defer h.mu.Unlock()
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
