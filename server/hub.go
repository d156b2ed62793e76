package server

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"sync"

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
	signal []byte // the signal's JSON without $seq
}

type sessionLog struct {
	id      string
	lastSeq int64
	entries []logEntry // oldest first
	bytes   int
	tick    uint64 // last write, for least-recently-written eviction
}

// hub numbers session signals, keeps the replay log and fans frames out to connections.
// One mutex covers "assign $seq → log → enqueue on every connection", so every connection's
// wire order equals $seq order (field case B17).
type hub struct {
	mu     sync.Mutex
	epoch  string
	limits ReplayLimits
	logs   map[string]*sessionLog
	total  int
	tick   uint64
	conns  map[*conn]struct{}

	maxFrame  int                // the message limit: a larger signal is refused, never sent
	published interface{ Inc() } // the metrics counter, when set
}

// errSignalTooLarge is publish's answer for a signal whose frame would exceed the message limit.
var errSignalTooLarge = errors.New("signal exceeds the message limit")

func newHub(epoch string, limits ReplayLimits, maxFrame int) *hub {
	limits.defaults()
	return &hub{epoch: epoch, limits: limits, logs: map[string]*sessionLog{}, conns: map[*conn]struct{}{}, maxFrame: maxFrame}
}

func (h *hub) add(c *conn) {
	h.mu.Lock()
	h.conns[c] = struct{}{}
	h.mu.Unlock()
}

func (h *hub) remove(c *conn) {
	h.mu.Lock()
	delete(h.conns, c)
	h.mu.Unlock()
}

// publish sends a signal to every connection that completed the handshake (or only to origin,
// when the schema says delivery "origin"). Session signals get the next $seq of their session and
// go into the replay log. It returns the $seq (0 for signals without a session).
func (h *hub) publish(sig protocol.Signal, origin *conn) (int64, error) {
	body, err := protocol.Marshal(sig)
	if err != nil {
		return 0, err
	}
	if h.maxFrame > 0 && len(body)+96 > h.maxFrame { // 96: the envelope and "$seq"
		return 0, fmt.Errorf("%w: %d bytes", errSignalTooLarge, len(body))
	}
	spec := protocol.LookupSignal(sig.SignalKind())
	if h.published != nil {
		h.published.Inc()
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	var seq int64
	var frame []byte
	if ss, ok := sig.(interface{ SessionKey() string }); ok && spec != nil && spec.Session {
		lg := h.logs[ss.SessionKey()]
		if lg == nil {
			lg = &sessionLog{id: ss.SessionKey()}
			h.logs[lg.id] = lg
		}
		lg.lastSeq++
		seq = lg.lastSeq
		h.tick++
		lg.tick = h.tick
		lg.entries = append(lg.entries, logEntry{seq: seq, signal: body})
		lg.bytes += len(body)
		h.total += len(body)
		h.trim(lg)
		frame = signalFrame(body, seq)
	} else {
		frame = signalFrame(body, 0)
	}
	if spec != nil && spec.Delivery == "origin" {
		if origin != nil {
			origin.sendSignal(frame)
		}
		return seq, nil
	}
	for c := range h.conns {
		c.sendSignal(frame)
	}
	return seq, nil
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
