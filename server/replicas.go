package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/zidane-server/zidane/protocol"
	"github.com/zidane-server/zidane/server/cluster"
	"github.com/zidane-server/zidane/server/store"
)

// The transport's side of several replicas on one database (issue 25 §2, docs/scaling.md): the
// calls that reach the replica running a session (chat.send, chat.cancel, approvals.answer,
// interactions.answer), the takeover of a dead replica's runs, and what a replica does when it
// learns it lost its leases.

// replicaCall is the body of a call to another replica: the method a client called here, its
// params as received, and the name of the token that called it (the audit log's actor).
type replicaCall struct {
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Actor  string          `json:"actor"`
}

// replicaReply is a call's answer: the method's result or its JSON-RPC error.
type replicaReply struct {
	Result json.RawMessage `json:"result,omitempty"`
	Error  *protocol.Error `json:"error,omitempty"`
	// Yielded: the session was idle on the callee, which gave its lease up (cluster.LeaseLinger)
	// instead of running the prompt; the caller runs it itself.
	Yielded bool `json:"yielded,omitempty"`
}

// errYielded is forward's error when the callee yielded an idle session's lease (replicaReply).
var errYielded = errors.New("the replica yielded the idle session's lease")

// forwardedKey marks the context of a call another replica made: its actor, and that it is not
// forwarded again (one hop).
type forwardedKey struct{}

// forwardedActor returns the actor of a forwarded call, and whether ctx is one.
func forwardedActor(ctx context.Context) (string, bool) {
	a, ok := ctx.Value(forwardedKey{}).(string)
	return a, ok
}

// ownerElsewhere returns the live replica other than this one that runs the session, "" when
// this one does, none does, or ctx is a forwarded call (answered here, whatever it finds).
func (s *Server) ownerElsewhere(ctx context.Context, sessionID string) string {
	if _, fwd := forwardedActor(ctx); fwd || s.runs.IsRunning(sessionID) {
		return ""
	}
	owner, err := s.replica.Owner(ctx, sessionID)
	if err != nil {
		s.log.Warn("run lease lookup failed; answering here", "session", sessionID, "err", err)
		return ""
	}
	return owner
}

// forward calls method on replica target with params and decodes its result into out; the
// target's JSON-RPC error is returned as is.
func (s *Server) forward(ctx context.Context, target, method string, params, out any) error {
	raw, err := protocol.Marshal(params)
	if err != nil {
		return err
	}
	body, err := protocol.Marshal(replicaCall{Method: method, Params: raw, Actor: actorOf(ctx)})
	if err != nil {
		return err
	}
	b, err := s.replica.Call(ctx, target, body)
	if err != nil {
		return protocol.NewHandlerFailedError(fmt.Sprintf("The session's run is on replica %q, which did not answer (%v). If that replica stopped, its lease expires within %s and the session is then answered here: try again then.", target, err, s.replica.LeaseTTL()))
	}
	var rep replicaReply
	if err := json.Unmarshal(b, &rep); err != nil {
		return protocol.NewHandlerFailedError(fmt.Sprintf("Replica %q answered something that is not a reply (%v); try again.", target, err))
	}
	if rep.Yielded {
		return errYielded
	}
	if rep.Error != nil {
		return rep.Error
	}
	return json.Unmarshal(rep.Result, out)
}

// handleReplicaCall answers a call of another replica by running the method's handler here.
func (s *Server) handleReplicaCall(ctx context.Context, body []byte) []byte {
	var call replicaCall
	var result any
	err := json.Unmarshal(body, &call)
	if err == nil {
		ctx = context.WithValue(ctx, forwardedKey{}, call.Actor)
		h := s.handlers
		switch call.Method {
		case protocol.MethodChatSend:
			var p protocol.ChatSendParams
			if err = json.Unmarshal(call.Params, &p); err == nil {
				if !s.runs.IsRunning(p.SessionID) && s.replica.Yield(ctx, p.SessionID) {
					// Idle here: the caller runs it, where its client is.
					b, _ := protocol.Marshal(replicaReply{Yielded: true})
					return b
				}
				result, err = h.Chat().Send(ctx, &p)
			}
		case protocol.MethodChatCancel:
			var p protocol.ChatCancelParams
			if err = json.Unmarshal(call.Params, &p); err == nil {
				result, err = h.Chat().Cancel(ctx, &p)
			}
		case protocol.MethodApprovalsAnswer:
			var p protocol.ApprovalsAnswerParams
			if err = json.Unmarshal(call.Params, &p); err == nil {
				result, err = h.Approvals().Answer(ctx, &p)
			}
		case protocol.MethodInteractionsAnswer:
			var p protocol.InteractionsAnswerParams
			if err = json.Unmarshal(call.Params, &p); err == nil {
				result, err = h.Interactions().Answer(ctx, &p)
			}
		case oauthCallbackCall:
			var p struct{ Query string }
			if err = json.Unmarshal(call.Params, &p); err == nil && s.oauth != nil {
				q, _ := url.ParseQuery(p.Query)
				status, page := s.oauth.Callback(q)
				result = oauthCallbackReply{Status: status, Page: page}
			} else if err == nil {
				err = errors.New("this replica has no credential store")
			}
		default:
			err = fmt.Errorf("replica call %q is not one this replica answers", call.Method)
		}
	}
	var rep replicaReply
	if err != nil {
		rep.Error = toRPCError(err)
	} else if rep.Result, err = protocol.Marshal(result); err != nil {
		rep.Error = toRPCError(err)
	}
	b, err := protocol.Marshal(rep)
	if err != nil {
		b, _ = protocol.Marshal(replicaReply{Error: protocol.NewHandlerFailedError("The reply could not be encoded: " + err.Error())})
	}
	return b
}

// takeOver ends the runs no live replica owns (cluster.Config.TakeOver): each session is told
// (session:updated); with a shared signal hub its clients also get the run's run:end, marked
// interrupted, which the dead owner never sent.
func (s *Server) takeOver(ctx context.Context, startup bool) {
	var unwritten func(context.Context, string, store.SignalMark) ([]protocol.StreamEvent, store.SignalMark)
	t := s.cfg.SignalTail
	if t == nil && s.Bus() != nil {
		t = busTail{s}
	}
	if t != nil {
		unwritten = func(ctx context.Context, sessionID string, after store.SignalMark) ([]protocol.StreamEvent, store.SignalMark) {
			tctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			evs, last, err := t.Unwritten(tctx, sessionID, after)
			if err != nil {
				s.log.Warn("what the dead replica streamed could not be read from the signal stream; its last checkpoint is kept", "session", sessionID, "err", err)
				return nil, store.SignalMark{}
			}
			return evs, last
		}
	}
	taken, err := s.runs.TakeOver(ctx, s.replica.ID(), startup, unwritten)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("taking over the runs of dead replicas failed; retrying at the next heartbeat", "err", err)
		}
		return
	}
	if len(taken) == 0 {
		return
	}
	if startup {
		s.log.Warn("sessions were left running by a previous process that stopped without ending them; marked interrupted", "sessions", len(taken))
	} else {
		s.log.Warn("took over the runs of a replica whose lease expired; marked interrupted", "sessions", len(taken), "replica", taken[0].Replica)
	}
	for _, t := range taken {
		if s.sharedSignals() && t.RunID != "" {
			msg := agentInterruptedMessage
			yes := true
			if _, err := s.hub.publish(&protocol.RunEndSignal{SessionID: t.SessionID, RunID: t.RunID, OK: false, Error: &msg, Interrupted: &yes}, nil, ""); err != nil {
				s.log.Error("run:end of a taken-over run not sent", "session", t.SessionID, "err", err)
			}
		}
		if x, err := s.store.GetSession(ctx, t.SessionID); err == nil {
			s.publishSession(x)
		}
	}
}

// agentInterruptedMessage is the run:end error of a run taken over from a dead replica.
const agentInterruptedMessage = "The replica that ran this prompt stopped (it was killed, crashed or lost its database); what was streamed until then is kept. Send the prompt again to continue."

// leasesLost stops this replica's runs: another replica took them over (cluster.Config.Lost).
func (s *Server) leasesLost(reason string) {
	if stopped := s.runs.CancelAll(); len(stopped) > 0 {
		s.log.Error("runs stopped: "+reason, "sessions", len(stopped))
	}
}

// signalsUnhealthy is the shared signal hub's health (Config.SignalHealth): nil when healthy or
// when signals stay in this process.
func (s *Server) signalsUnhealthy() error {
	if s.cfg.SignalHealth != nil {
		return s.cfg.SignalHealth.Healthy()
	}
	if bus := s.hub.bus.Load(); bus != nil && !bus.Connected() {
		return errors.New("the connection to NATS is down; it reconnects on its own")
	}
	return nil
}

// sharedSignals reports whether signals travel between replicas (--nats-url, or a SignalTail):
// then a taken-over run's run:end is sent, for the clients that saw its run:start elsewhere.
func (s *Server) sharedSignals() bool {
	return s.cfg.SignalTail != nil || s.hub.bus.Load() != nil
}

// refuseWhileDegraded is chat.send's refusal while the shared signal hub is unreachable: a run
// started then could not be followed by any client (docs/scaling.md "Failure modes").
func (s *Server) refuseWhileDegraded() error {
	if err := s.signalsUnhealthy(); err != nil {
		return protocol.NewHandlerFailedError(fmt.Sprintf("New runs are refused while this replica cannot reach NATS (%v): a run's signals would reach no client. Open connections stay; send the prompt again once GET /healthz answers ok.", err))
	}
	return nil
}

// elsewhere reports the replica another live replica's lease names in err (a *cluster.ElsewhereError).
func elsewhere(err error) (string, bool) {
	var e *cluster.ElsewhereError
	if errors.As(err, &e) {
		return e.Replica, true
	}
	return "", false
}
