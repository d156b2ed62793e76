package server

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/zidane-server/zidane/protocol"
	"github.com/zidane-server/zidane/server/agent"
	"github.com/zidane-server/zidane/server/store"
)

// The handlers of issue 8's session management, models and usage; thin: the work is in the
// store and the agent runtime.

type (
	modelsHandler struct{ s *Server }
	usageHandler  struct{ s *Server }
)

// Models returns the models group's handler.
func (h *handlers) Models() protocol.ModelsHandler { return modelsHandler{h.s} }

// Usage returns the usage group's handler.
func (h *handlers) Usage() protocol.UsageHandler { return usageHandler{h.s} }

func optString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// List implements models.list.
func (h modelsHandler) List(ctx context.Context, _ *protocol.ModelsListParams) (*protocol.ModelsListResult, error) {
	m := h.s.runs.Models()
	ms, err := m.List(ctx)
	if err != nil {
		return nil, protocol.NewHandlerFailedError("The model list could not be read: " + err.Error())
	}
	out := &protocol.ModelsListResult{Default: m.DefaultID(), Models: make([]protocol.ModelInfo, 0, len(ms))}
	for _, x := range ms {
		mi := protocol.ModelInfo{ID: x.ID, Provider: x.Provider, Name: x.Name, IsDefault: x.ID == m.DefaultID()}
		if x.ContextWindow > 0 {
			w := x.ContextWindow
			mi.ContextWindow = &w
		}
		out.Models = append(out.Models, mi)
	}
	return out, nil
}

// Summary implements usage.summary: days are counted in the server's local time.
func (h usageHandler) Summary(ctx context.Context, p *protocol.UsageSummaryParams) (*protocol.UsageSummaryResult, error) {
	days := 30
	if p.Days != nil {
		days = int(*p.Days)
	}
	now := time.Now()
	y, mo, d := now.Date()
	from := time.Date(y, mo, d-(days-1), 0, 0, 0, 0, time.Local)
	_, offset := now.Zone()
	byDay, byModel, total, err := h.s.store.UsageSummary(ctx, from, offset)
	if err != nil {
		return nil, storeErr(err, "")
	}
	out := &protocol.UsageSummaryResult{Total: usageTotals(total), Days: []protocol.UsageTotals{}, Models: []protocol.UsageTotals{}, TimeZone: zoneName(now)}
	for _, r := range byDay {
		out.Days = append(out.Days, usageTotals(r))
	}
	for _, r := range byModel {
		out.Models = append(out.Models, usageTotals(r))
	}
	return out, nil
}

func usageTotals(r store.UsageRow) protocol.UsageTotals {
	return protocol.UsageTotals{Key: r.Key, TokensIn: r.TokensIn, TokensOut: r.TokensOut, Runs: r.Runs, Sessions: r.Sessions, Turns: r.Turns, UnreportedTurns: r.UnreportedTurns}
}

// zoneName names the local zone: its IANA name when the process knows it, else its UTC offset.
func zoneName(now time.Time) string {
	if n := time.Local.String(); n != "" && n != "Local" {
		return n
	}
	_, off := now.Zone()
	sign := "+"
	if off < 0 {
		sign, off = "-", -off
	}
	return fmt.Sprintf("UTC%s%02d:%02d", sign, off/3600, off%3600/60)
}

// List implements sessions.list: filtered by archived, paged by cursor.
func (h sessionsHandler) List(ctx context.Context, p *protocol.SessionsListParams) (*protocol.SessionsListResult, error) {
	limit := 100
	if p.Limit != nil {
		limit = int(*p.Limit)
	}
	cursor := ""
	if p.Cursor != nil {
		cursor = *p.Cursor
	}
	page, err := h.s.store.ListSessionsPage(ctx, p.Archived != nil && *p.Archived, limit, cursor)
	if errors.Is(err, store.ErrBadCursor) {
		return nil, protocol.NewInvalidParamsError("params/cursor: not a cursor of this listing; pass the nextCursor of the previous page with the same archived, or leave it out for the first page.", &protocol.InvalidParamsErrorData{Pointer: "/cursor"})
	}
	if err != nil {
		return nil, storeErr(err, "")
	}
	out := &protocol.SessionsListResult{Sessions: make([]protocol.Session, 0, len(page.Sessions)), NextCursor: optString(page.Next)}
	for _, x := range page.Sessions {
		out.Sessions = append(out.Sessions, *h.s.sessionOut(x))
	}
	return out, nil
}

// sessionDone answers a session-changing call: the session, and session:updated to everyone.
func (s *Server) sessionDone(id string, x store.Session, err error, what string) (*protocol.Session, error) {
	if errors.Is(err, store.ErrNotFound) {
		return nil, sessionNotFound(id, "List the sessions with sessions.list.")
	}
	if err != nil {
		return nil, storeErr(err, what)
	}
	s.publishSession(x)
	return s.sessionOut(x), nil
}

// publishSession sends session:updated with the session as it is, unless a later snapshot of it
// (store.Session.Version) went out already: writers' answers can arrive out of their commit order.
func (s *Server) publishSession(x store.Session) {
	s.sessions.publish(x, func(x store.Session) bool {
		if _, err := s.hub.publish(&protocol.SessionUpdatedSignal{SessionID: x.ID, Session: s.sessionOut(x)}, nil, ""); err != nil {
			s.log.Error("session:updated not sent", "session", x.ID, "err", err)
			return false
		}
		return true
	})
}

// setModel checks model against the configured providers and stores it on the session.
func (s *Server) setModel(ctx context.Context, sessionID, model, pointer string) (store.Session, error) {
	if model != "" {
		if _, _, err := s.runs.Models().Resolve(ctx, model); err != nil {
			msg := fmt.Sprintf("params%s: %s", pointer, err)
			if !strings.Contains(msg, "models.list") {
				msg += ". models.list shows the models."
			}
			return store.Session{}, protocol.NewInvalidParamsError(msg, &protocol.InvalidParamsErrorData{Pointer: pointer})
		}
	}
	x, err := s.store.SetSessionModel(ctx, sessionID, model)
	if _, err := s.sessionDone(sessionID, x, err, "params"+pointer); err != nil {
		return x, err
	}
	return x, nil
}

// SetModel implements sessions.setModel.
func (h sessionsHandler) SetModel(ctx context.Context, p *protocol.SessionsSetModelParams) (*protocol.Session, error) {
	x, err := h.s.setModel(ctx, p.SessionID, p.Model, "/model")
	if err != nil {
		return nil, err
	}
	return h.s.sessionOut(x), nil
}

// Rename implements sessions.rename.
func (h sessionsHandler) Rename(ctx context.Context, p *protocol.SessionsRenameParams) (*protocol.Session, error) {
	if err := titleInvalid(p.Title); err != nil {
		return nil, err
	}
	x, err := h.s.store.RenameSession(ctx, p.SessionID, p.Title)
	return h.s.sessionDone(p.SessionID, x, err, "params/title")
}

// Archive implements sessions.archive.
func (h sessionsHandler) Archive(ctx context.Context, p *protocol.SessionsArchiveParams) (*protocol.Session, error) {
	x, err := h.s.store.ArchiveSession(ctx, p.SessionID, p.Archived)
	return h.s.sessionDone(p.SessionID, x, err, "")
}

// Delete implements sessions.delete: refused while the session has a run or queued prompts.
func (h sessionsHandler) Delete(ctx context.Context, p *protocol.SessionsDeleteParams) (*protocol.SessionsDeleteResult, error) {
	err := h.s.runs.DeleteSession(p.SessionID, func() error { return h.s.store.DeleteSession(ctx, p.SessionID) })
	if errors.Is(err, store.ErrNotFound) {
		return nil, sessionNotFound(p.SessionID, "List the sessions with sessions.list.")
	}
	if err != nil {
		return nil, agentErr(err)
	}
	h.s.tools.ForgetPlan(p.SessionID)
	h.s.sessions.drop(p.SessionID)
	h.s.dropViews(p.SessionID)
	t := true
	if _, err := h.s.hub.publish(&protocol.SessionUpdatedSignal{SessionID: p.SessionID, Deleted: &t}, nil, ""); err != nil {
		h.s.log.Error("session:updated not sent", "session", p.SessionID, "err", err)
	}
	return &protocol.SessionsDeleteResult{Deleted: true}, nil
}

// titleInvalid is the InvalidParams answer for a title a client sets that agent.TitleProblem
// refuses; nil when it may be set.
func titleInvalid(title string) error {
	if problem := agent.TitleProblem(title); problem != "" {
		return protocol.NewInvalidParamsError("params/title: "+problem+".", &protocol.InvalidParamsErrorData{Pointer: "/title"})
	}
	return nil
}

// visible reports whether s has a character that shows (agent.Visible).
func visible(s string) bool { return agent.Visible(s) }
