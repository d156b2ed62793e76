package server

import (
	"context"

	"github.com/zidane-server/zidane/protocol"
)

// presenceHandler serves the presence group (schema/presence.json; issue 7 item 7).
type presenceHandler struct{ s *Server }

// Presence returns the presence group's handler.
func (h *handlers) Presence() protocol.PresenceHandler { return presenceHandler{h.s} }

// Set implements presence.set: the connection declares the session it shows (null: none) and
// whether it is focused; from then on sessions.get, sessions.loadEvents and chat.send no longer
// move its view. An unknown session is HandlerFailed and leaves the view as it was.
func (h presenceHandler) Set(ctx context.Context, p *protocol.PresenceSetParams) (*protocol.PresenceSetResult, error) {
	id := ""
	if p.SessionID != nil {
		x, err := h.s.getSession(ctx, *p.SessionID, "List the sessions with sessions.list, or send sessionId null when the window shows none.")
		if err != nil {
			return nil, err
		}
		id = x.ID
	}
	h.s.setPresence(connFrom(ctx), id, p.Focused)
	return &protocol.PresenceSetResult{}, nil
}
