package server

import (
	"context"

	"github.com/zidane-server/zidane/protocol"
)

// Interactions returns the interactions group's handler.
func (h *handlers) Interactions() protocol.InteractionsHandler { return interactionsHandler{h.s} }

type interactionsHandler struct{ s *Server }

// Answer implements interactions.answer; a null answer dismisses the question.
func (h interactionsHandler) Answer(ctx context.Context, p *protocol.InteractionsAnswerParams) (*protocol.InteractionsAnswerResult, error) {
	if _, err := h.s.getSession(ctx, p.SessionID, "List the sessions with sessions.list."); err != nil {
		return nil, err
	}
	var a *protocol.InteractionAnswer
	if p.Answer != nil {
		a = &protocol.InteractionAnswer{Choices: p.Answer.Choices, Text: p.Answer.Text, Action: p.Answer.Action, Values: p.Answer.Values}
		if a.Choices == nil {
			a.Choices = []string{}
		}
	}
	if owner := h.s.ownerElsewhere(ctx, p.SessionID); owner != "" { // its run is on another replica
		var out protocol.InteractionsAnswerResult
		if err := h.s.forward(ctx, owner, protocol.MethodInteractionsAnswer, p, &out); err != nil {
			return nil, err
		}
		return &out, nil
	}
	if err := h.s.gate.AnswerQuestion(p.SessionID, p.RequestID, a, actorOf(ctx)); err != nil {
		return nil, agentErr(err)
	}
	return &protocol.InteractionsAnswerResult{OK: true}, nil
}

// List implements interactions.list.
func (h interactionsHandler) List(_ context.Context, p *protocol.InteractionsListParams) (*protocol.InteractionsListResult, error) {
	sid := ""
	if p.SessionID != nil {
		sid = *p.SessionID
	}
	return &protocol.InteractionsListResult{Requests: h.s.gate.PendingQuestions(sid)}, nil
}
