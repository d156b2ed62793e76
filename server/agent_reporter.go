package server

import (
	"errors"
	"sort"

	"github.com/zidane-server/zidane/protocol"
	"github.com/zidane-server/zidane/server/agent"
	"github.com/zidane-server/zidane/server/store"
)

// agentReporter is the transport's side of agent.Reporter: the hub numbers, logs and fans out
// the runtime's signals; a change of the running sessions becomes presence:changed.
type agentReporter struct{ s *Server }

var _ agent.Reporter = agentReporter{}

// Publish implements agent.Reporter; origin is the *conn that sent the prompt, or nil.
func (a agentReporter) Publish(sig protocol.Signal, origin agent.Origin) (store.SignalMark, error) {
	c, _ := origin.(*conn)
	seq, err := a.s.hub.publish(sig, c, "")
	if seq <= 0 {
		return store.SignalMark{}, err
	}
	return store.SignalMark{Seq: seq, Epoch: a.s.hub.currentEpoch()}, err
}

// RunningChanged implements agent.Reporter.
func (a agentReporter) RunningChanged() {
	a.s.reconcileSnapshots()
	a.s.publishPresence()
}

// SessionChanged implements agent.Reporter: session:updated with the session as stored.
func (a agentReporter) SessionChanged(x store.Session) { a.s.publishSession(x) }

// originOf wraps a connection as the runtime's opaque origin (nil stays nil).
func originOf(c *conn) agent.Origin {
	if c == nil {
		return nil
	}
	return c
}

// agentErr turns a runtime error into the answer a client can act on.
func agentErr(err error) error {
	var rf *agent.Refusal
	if errors.As(err, &rf) {
		return protocol.NewHandlerFailedError(rf.Message)
	}
	var bad *agent.InvalidAnswer
	if errors.As(err, &bad) {
		return protocol.NewInvalidParamsError(bad.Message, &protocol.InvalidParamsErrorData{Pointer: bad.Pointer})
	}
	return storeErr(err, "")
}

// publishPresence sends presence:changed: every session that runs or that a connection views,
// with how many connections view it and how many of those are focused (schema/presence.json).
// With replicas on NATS, this replica's share goes to the others and its connections get the
// sum of every replica's (presence_share.go).
func (s *Server) publishPresence() {
	bus := s.Bus()
	if bus == nil {
		s.hub.publish(&protocol.PresenceChangedSignal{Sessions: s.localPresence()}, nil, "")
		return
	}
	s.sendPresenceShare(bus, s.localPresence(), false)
	s.deliverPresence()
}

// localPresence is what this replica counts: its runs, its connections' views and the approvals
// and questions its runs wait on, by session (sorted by id).
func (s *Server) localPresence() []protocol.SessionPresence {
	running := map[string]bool{}
	for _, id := range s.runs.Running() {
		running[id] = true
	}
	windows, focused := s.views()
	waiting := s.gate.Waiting()
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
		p := protocol.SessionPresence{SessionID: id, Running: running[id], Windows: windows[id], Attention: waiting[id]}
		if n := focused[id]; n > 0 {
			p.Focused = &n
		}
		ps = append(ps, p)
	}
	return ps
}
