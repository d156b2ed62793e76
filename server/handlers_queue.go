package server

import (
	"context"

	"github.com/zidane-server/zidane/protocol"
)

// Queue returns the queue group's handler.
func (h *handlers) Queue() protocol.QueueHandler { return queueHandler{h.s} }

type queueHandler struct{ s *Server }

// List implements queue.list.
func (h queueHandler) List(ctx context.Context, p *protocol.QueueListParams) (*protocol.QueueListResult, error) {
	if _, err := h.s.getSession(ctx, p.SessionID, "List the sessions with sessions.list."); err != nil {
		return nil, err
	}
	return &protocol.QueueListResult{Items: h.s.runs.Queue(p.SessionID)}, nil
}

// Remove implements queue.remove.
func (h queueHandler) Remove(ctx context.Context, p *protocol.QueueRemoveParams) (*protocol.QueueRemoveResult, error) {
	if _, err := h.s.getSession(ctx, p.SessionID, "List the sessions with sessions.list."); err != nil {
		return nil, err
	}
	return &protocol.QueueRemoveResult{Removed: h.s.runs.RemoveQueued(p.SessionID, p.RunID)}, nil
}
