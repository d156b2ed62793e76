package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/zidane-server/zidane/protocol"
	"github.com/zidane-server/zidane/server/agent"
	"github.com/zidane-server/zidane/server/store"
)

// The history group (issue 28): fork, rollback, restore, compaction and the prompt history. Thin:
// the store changes the transcript in one transaction, the runtime keeps runs out meanwhile and
// publishes session:reset.

type historyHandler struct{ s *Server }

// History returns the history group's handler.
func (h *handlers) History() protocol.HistoryHandler { return historyHandler{h.s} }

// DefaultRestoreWindow is how long history.restore can bring back what a rollback dropped
// (Config.RestoreWindow's default): 7 days.
const DefaultRestoreWindow = 7 * 24 * time.Hour

func (s *Server) restoreWindow() time.Duration {
	if s.cfg.RestoreWindow > 0 {
		return s.cfg.RestoreWindow
	}
	return DefaultRestoreWindow
}

// historyErr answers the store's and the runtime's refusals of the history group.
func historyErr(sessionID, turnID string, err error) error {
	switch {
	case errors.Is(err, store.ErrNotFound):
		return sessionNotFound(sessionID, "List the sessions with sessions.list.")
	case errors.Is(err, store.ErrNoTurn):
		return protocol.NewHandlerFailedError(fmt.Sprintf("Turn %q is not in session %q; pass a turnId of one of its events (sessions.loadEvents).", turnID, sessionID))
	case errors.Is(err, store.ErrNoRestore):
		return protocol.NewHandlerFailedError(fmt.Sprintf("Restore id %q names no rollback of session %q that can still be restored: it was used, or its window passed (restoreUntil).", turnID, sessionID))
	case errors.Is(err, store.ErrRestoreMoved):
		return protocol.NewHandlerFailedError(fmt.Sprintf("Session %q changed since the rollback (a new prompt, another rollback), so the dropped exchanges cannot come back in their place; roll back to where the rollback left it first.", sessionID))
	}
	return agentErr(err)
}

// Fork implements history.fork.
func (h historyHandler) Fork(ctx context.Context, p *protocol.HistoryForkParams) (*protocol.Session, error) {
	src, err := h.s.getSession(ctx, p.SessionID, "List the sessions with sessions.list.")
	if err != nil {
		return nil, err
	}
	turn := ""
	if p.TurnID != nil {
		turn = *p.TurnID
	}
	h.s.runs.Flush(ctx) // what was signalled is stored
	title := agent.PromptTitle("Fork of " + src.Title)
	x, err := h.s.store.ForkSession(ctx, src.ID, turn, title)
	if err != nil {
		return nil, historyErr(src.ID, turn, err)
	}
	h.s.publishSession(x)
	return h.s.sessionOut(x), nil
}

// Rollback implements history.rollback.
func (h historyHandler) Rollback(ctx context.Context, p *protocol.HistoryRollbackParams) (*protocol.HistoryRollbackResult, error) {
	if _, err := h.s.getSession(ctx, p.SessionID, "List the sessions with sessions.list."); err != nil {
		return nil, err
	}
	var rb store.Rollback
	var x store.Session
	err := h.s.runs.Reset(ctx, p.SessionID, protocol.ResetReasonRollback, func(ctx context.Context) (bool, error) {
		var err error
		rb, x, err = h.s.store.RollbackSession(ctx, p.SessionID, p.TurnID, h.s.restoreWindow())
		return err == nil && rb.ID != "", err
	})
	if err != nil {
		return nil, historyErr(p.SessionID, p.TurnID, err)
	}
	res := &protocol.HistoryRollbackResult{Dropped: rb.Exchanges, DroppedEvents: rb.Events}
	if rb.ID != "" {
		res.RestoreID = &rb.ID
		until := ms(rb.Until)
		res.RestoreUntil = &until
		h.s.publishSession(x)
	}
	return res, nil
}

// Restore implements history.restore.
func (h historyHandler) Restore(ctx context.Context, p *protocol.HistoryRestoreParams) (*protocol.HistoryRestoreResult, error) {
	if _, err := h.s.getSession(ctx, p.SessionID, "List the sessions with sessions.list."); err != nil {
		return nil, err
	}
	var ex, evs int
	var x store.Session
	err := h.s.runs.Reset(ctx, p.SessionID, protocol.ResetReasonRestore, func(ctx context.Context) (bool, error) {
		var err error
		ex, evs, x, err = h.s.store.RestoreSession(ctx, p.SessionID, p.RestoreID)
		return err == nil, err
	})
	if err != nil {
		return nil, historyErr(p.SessionID, p.RestoreID, err)
	}
	h.s.publishSession(x)
	return &protocol.HistoryRestoreResult{Restored: ex, RestoredEvents: evs}, nil
}

// Compact implements history.compact.
func (h historyHandler) Compact(ctx context.Context, p *protocol.HistoryCompactParams) (*protocol.HistoryCompactResult, error) {
	x, err := h.s.getSession(ctx, p.SessionID, "List the sessions with sessions.list.")
	if err != nil {
		return nil, err
	}
	res, err := h.s.runs.Compact(ctx, x)
	if err != nil {
		var rf *agent.Refusal
		if errors.As(err, &rf) || errors.Is(err, store.ErrNotFound) {
			return nil, historyErr(p.SessionID, "", err)
		}
		return nil, protocol.NewHandlerFailedError(err.Error() + "; the conversation is left as it was.")
	}
	return &protocol.HistoryCompactResult{Compacted: res.Exchanges, TurnID: res.TurnID, TokensBefore: res.TokensBefore, TokensAfter: res.After}, nil
}

// Prompts implements history.prompts.
func (h historyHandler) Prompts(ctx context.Context, p *protocol.HistoryPromptsParams) (*protocol.HistoryPromptsResult, error) {
	root, _, err := h.s.resolveCwd(p.Cwd)
	if err != nil {
		return nil, err
	}
	limit := 50
	if p.Limit != nil {
		limit = *p.Limit
	}
	uses, err := h.s.store.PromptHistory(ctx, root, limit)
	if err != nil {
		return nil, storeErr(err, "")
	}
	out := &protocol.HistoryPromptsResult{Prompts: make([]protocol.PromptHistoryItem, 0, len(uses))}
	for _, u := range uses {
		out.Prompts = append(out.Prompts, protocol.PromptHistoryItem{Text: u.Text, SessionID: u.SessionID, At: ms(u.At)})
	}
	return out, nil
}
