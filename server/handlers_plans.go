package server

import (
	"context"

	"github.com/zidane-server/zidane/protocol"
)

// Plans returns the plans group's handler.
func (h *handlers) Plans() protocol.PlansHandler { return plansHandler{h.s} }

type plansHandler struct{ s *Server }

// Get implements plans.get.
func (h plansHandler) Get(ctx context.Context, p *protocol.PlansGetParams) (*protocol.PlanSnapshot, error) {
	if _, err := h.s.getSession(ctx, p.SessionID, "List the sessions with sessions.list."); err != nil {
		return nil, err
	}
	snap, err := h.s.tools.PlanSnapshot(ctx, p.SessionID)
	if err != nil {
		return nil, storeErr(err, "")
	}
	return &snap, nil
}
