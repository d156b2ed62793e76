package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"

	"github.com/zidane-server/zidane/protocol"
	"github.com/zidane-server/zidane/server/cluster"
	"github.com/zidane-server/zidane/server/hub/jetstream"
	"github.com/zidane-server/zidane/server/store"
)

// openBus connects the hub to NATS JetStream (Config.NATSURL; issue 25 item 1): from then on the
// signal epoch is the stream's, sequenced signals are numbered by the stream and this replica's
// replay log is rebuilt from it. It fails when NATS does not answer within 15 s.
func (s *Server) openBus(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	s.hub.replica = uuid.NewString()
	bus, err := jetstream.Open(ctx, jetstream.Config{
		URL: s.cfg.NATSURL, Stream: s.cfg.NATSStream, Replica: s.hub.replica, Logger: s.log,
		Limits: jetstream.Limits{PerSessionSignals: s.cfg.Limits.Replay.PerSessionSignals,
			PerSessionBytes: s.cfg.Limits.Replay.PerSessionBytes, TotalBytes: s.cfg.Limits.Replay.TotalBytes},
		Apply: s.hub.apply, Live: s.hub.live, Reset: s.hub.reset,
	})
	if err != nil {
		return err
	}
	s.hub.mu.Lock()
	s.hub.epoch = bus.Epoch()
	s.hub.mu.Unlock()
	s.hub.bus.Store(bus)
	s.log.Info("signals on NATS JetStream", "replica", s.hub.replica, "signal_epoch", bus.Epoch())
	return nil
}

// Bus is the NATS JetStream bus of --nats-url, or nil (the in-process hub): /healthz reports its
// connection and the cross-replica requests of run leases travel on its connection (issue 25
// items 2 and 4); a takeover reads what a dead owner streamed but did not write from it (busTail).
func (s *Server) Bus() *jetstream.Bus { return s.hub.bus.Load() }

// busTail is cluster.Tail on the JetStream bus (issue 25 §2): the session's event signals in
// the stream after the stored transcript's signal mark.
type busTail struct{ s *Server }

var _ cluster.Tail = busTail{}

// Unwritten implements cluster.Tail. Errors: a mark of another epoch than the stream's, or none
// (nothing says where the stored rows end), jetstream.ErrGap, NATS's.
func (t busTail) Unwritten(ctx context.Context, sessionID string, after store.SignalMark) ([]protocol.StreamEvent, store.SignalMark, error) {
	bus := t.s.Bus()
	if bus == nil {
		return nil, store.SignalMark{}, errors.New("signals are not on NATS")
	}
	epoch := bus.Epoch()
	if after.Seq <= 0 || after.Epoch != epoch {
		return nil, store.SignalMark{}, fmt.Errorf("the stored transcript's signal mark ($seq %d, epoch %q) is not of the stream's epoch %q", after.Seq, after.Epoch, epoch)
	}
	msgs, err := bus.Since(ctx, sessionID, after.Seq)
	if err != nil {
		return nil, store.SignalMark{}, err
	}
	var evs []protocol.StreamEvent
	last := after
	for _, m := range msgs {
		if m.Kind != protocol.SignalEvent {
			continue
		}
		sig, err := protocol.DecodeSignal(m.Body)
		if err != nil {
			return nil, store.SignalMark{}, fmt.Errorf("$seq %d of the stream: %w", m.Seq, err)
		}
		es, ok := sig.(*protocol.EventSignal)
		if !ok || es.Event == nil {
			continue
		}
		evs = append(evs, es.Event)
		last = store.SignalMark{Seq: m.Seq, Epoch: epoch}
	}
	return evs, last, nil
}

// Replica names this replica among those sharing the bus ("" without one): the prefix of its
// connections' references, unique across replicas.
func (s *Server) Replica() string { return s.hub.replica }

// snapshotPrefix + session id is the subject on which the replica that runs a session answers
// other replicas' snapshots of it (sessions.loadEvents and sessions.getTurns elsewhere).
const snapshotPrefix = "zidane.snap."

// snapshotSubs are this replica's snapshot subscriptions: one per session it runs or is starting.
type snapshotSubs struct {
	mu       sync.Mutex
	subs     map[string]*nats.Subscription
	starting map[string]int // sessions whose chat.send is starting a run here
}

// snapshotReply is a snapshot as the replica that runs the session took it.
type snapshotReply struct {
	Mark  store.Mark      `json:"mark"`
	Open  json.RawMessage `json:"open,omitempty"` // the open block (a markdown or thinking event), if any
	Seq   int64           `json:"seq"`
	Epoch string          `json:"epoch"`
	Err   string          `json:"err,omitempty"`
}

// holdSnapshots makes this replica answer snapshots of sessionID before a run of it starts here
// (so no replica reads the store while the run's first rows are only here), until release and
// then as long as the session runs here.
func (s *Server) holdSnapshots(sessionID string) (release func()) {
	if s.Bus() == nil {
		return func() {}
	}
	s.snaps.mu.Lock()
	if s.snaps.starting == nil {
		s.snaps.starting = map[string]int{}
	}
	s.snaps.starting[sessionID]++
	s.snaps.mu.Unlock()
	s.reconcileSnapshots()
	return func() {
		s.snaps.mu.Lock()
		if s.snaps.starting[sessionID]--; s.snaps.starting[sessionID] <= 0 {
			delete(s.snaps.starting, sessionID)
		}
		s.snaps.mu.Unlock()
		s.reconcileSnapshots()
	}
}

// reconcileSnapshots subscribes to the snapshots of the sessions this replica runs or starts and
// ends the others' (a run's end unsubscribes after its last rows were written).
func (s *Server) reconcileSnapshots() {
	bus := s.Bus()
	if bus == nil {
		return
	}
	running := s.runs.Running()
	s.snaps.mu.Lock()
	defer s.snaps.mu.Unlock()
	if s.snaps.subs == nil {
		s.snaps.subs = map[string]*nats.Subscription{}
	}
	for sid, sub := range s.snaps.subs {
		if _, starting := s.snaps.starting[sid]; !starting && !slices.Contains(running, sid) {
			_ = sub.Unsubscribe()
			delete(s.snaps.subs, sid)
		}
	}
	want := running
	for sid := range s.snaps.starting {
		want = append(want, sid)
	}
	for _, sid := range want {
		if _, ok := s.snaps.subs[sid]; ok {
			continue
		}
		sub, err := bus.Conn().Subscribe(snapshotPrefix+sid, s.serveSnapshot(sid))
		if err != nil {
			s.log.Warn("this replica cannot answer other replicas' reloads of a session it runs", "session", sid, "err", err)
			continue
		}
		s.snaps.subs[sid] = sub
	}
}

// serveSnapshot answers another replica's snapshot request for sessionID from this replica.
func (s *Server) serveSnapshot(sessionID string) nats.MsgHandler {
	return func(m *nats.Msg) {
		go func() { // off the connection's dispatch: a snapshot flushes the transcript writer
			ctx, cancel := context.WithTimeout(s.baseCtx, busTimeout)
			defer cancel()
			var r snapshotReply
			mark, open, seq, epoch, err := s.localSnapshot(ctx, sessionID)
			r.Mark, r.Seq, r.Epoch = mark, seq, epoch
			if err != nil && !errors.Is(err, store.ErrNotFound) {
				r.Err = err.Error()
			}
			if open != nil {
				r.Open, _ = protocol.Marshal(open)
			}
			b, err := protocol.Marshal(r)
			if err == nil {
				_ = m.Respond(b)
			}
		}()
	}
}

// remoteSnapshot asks the replica that runs sessionID for its snapshot; ok is false when no
// replica runs it (no responder: the store holds its whole transcript, this replica answers).
func (s *Server) remoteSnapshot(ctx context.Context, sessionID string) (mark store.Mark, open protocol.StreamEvent, seq int64, epoch string, ok bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, busTimeout)
	defer cancel()
	msg, err := s.Bus().Conn().RequestWithContext(ctx, snapshotPrefix+sessionID, nil)
	if errors.Is(err, nats.ErrNoResponders) {
		return mark, nil, 0, "", false, nil
	}
	fail := func(why string) (store.Mark, protocol.StreamEvent, int64, string, bool, error) {
		return mark, nil, 0, "", true, protocol.NewHandlerFailedError("The replica running this session did not answer (" + why + "); try again in a moment.")
	}
	if err != nil {
		return fail(err.Error())
	}
	var r snapshotReply
	if err := json.Unmarshal(msg.Data, &r); err != nil {
		return fail("a malformed answer")
	}
	if r.Err != "" {
		return fail(r.Err)
	}
	if len(r.Open) > 0 {
		var k struct {
			Kind string `json:"kind"`
		}
		_ = json.Unmarshal(r.Open, &k)
		var ev protocol.StreamEvent
		switch k.Kind {
		case "markdown":
			ev = &protocol.MarkdownEvent{}
		case "thinking":
			ev = &protocol.ThinkingEvent{}
		default:
			return fail("an open block of kind " + k.Kind)
		}
		if err := json.Unmarshal(r.Open, ev); err != nil {
			return fail("a malformed open block")
		}
		open = ev
	}
	return r.Mark, open, r.Seq, r.Epoch, true, nil
}
