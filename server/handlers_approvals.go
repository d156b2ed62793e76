package server

import (
	"context"
	"fmt"

	"github.com/zidane-server/zidane/protocol"
	"github.com/zidane-server/zidane/server/store"
)

// The approvals, safelist, audit, interactions, queue and plans groups (issue 9). The logic lives
// in server/agent (Gate, ToolHost, Runtime); these handlers check sessions and tokens and map
// errors.

// Approvals returns the approvals group's handler.
func (h *handlers) Approvals() protocol.ApprovalsHandler { return approvalsHandler{h.s} }

// Safelist returns the safelist group's handler.
func (h *handlers) Safelist() protocol.SafelistHandler { return safelistHandler{h.s} }

// Audit returns the audit group's handler.
func (h *handlers) Audit() protocol.AuditHandler { return auditHandler{h.s} }

type approvalsHandler struct{ s *Server }
type safelistHandler struct{ s *Server }
type auditHandler struct{ s *Server }

// actorOf is the name of the token a request came with (the audit log's actor).
func actorOf(ctx context.Context) string {
	if a, ok := forwardedActor(ctx); ok {
		return a // a call another replica forwarded: its caller's token
	}
	if c := connFrom(ctx); c != nil {
		return c.token.Name
	}
	if tok, ok := ctx.Value(sseCallerKey{}).(store.Token); ok { // an SSE request (sse_backend.go)
		return tok.Name
	}
	return "operator"
}

// Answer implements approvals.answer.
func (h approvalsHandler) Answer(ctx context.Context, p *protocol.ApprovalsAnswerParams) (*protocol.ApprovalsAnswerResult, error) {
	if _, err := h.s.getSession(ctx, p.SessionID, "List the sessions with sessions.list."); err != nil {
		return nil, err
	}
	if !p.Decision.IsKnown() {
		return nil, protocol.NewInvalidParamsError(fmt.Sprintf("params/decision: %q is not a decision; answer allow, always or deny.", p.Decision), &protocol.InvalidParamsErrorData{Pointer: "/decision"})
	}
	if owner := h.s.ownerElsewhere(ctx, p.SessionID); owner != "" { // its run is on another replica
		var out protocol.ApprovalsAnswerResult
		if err := h.s.forward(ctx, owner, protocol.MethodApprovalsAnswer, p, &out); err != nil {
			return nil, err
		}
		return &out, nil
	}
	r, err := h.s.gate.Answer(ctx, p.SessionID, p.RequestID, p.Decision, actorOf(ctx))
	if err != nil {
		return nil, agentErr(err)
	}
	out := &protocol.ApprovalsAnswerResult{OK: true}
	if r.Stored != nil {
		e := safelistOut(*r.Stored)
		out.Stored = &e
	}
	if r.Note != "" {
		out.Note = &r.Note
	}
	return out, nil
}

// List implements approvals.list.
func (h approvalsHandler) List(_ context.Context, p *protocol.ApprovalsListParams) (*protocol.ApprovalsListResult, error) {
	sid := ""
	if p.SessionID != nil {
		sid = *p.SessionID
	}
	return &protocol.ApprovalsListResult{Requests: h.s.gate.PendingApprovals(sid)}, nil
}

// GetMode implements approvals.getMode.
func (h approvalsHandler) GetMode(ctx context.Context, p *protocol.ApprovalsGetModeParams) (*protocol.ApprovalsGetModeResult, error) {
	if _, err := h.s.getSession(ctx, p.SessionID, "List the sessions with sessions.list."); err != nil {
		return nil, err
	}
	m, err := h.s.store.ApprovalMode(ctx, p.SessionID)
	if err != nil {
		return nil, storeErr(err, "")
	}
	return &protocol.ApprovalsGetModeResult{Mode: protocol.ApprovalMode(m)}, nil
}

// SetMode implements approvals.setMode: a chat token may set ask or locked, only an admin token
// auto-edit.
func (h approvalsHandler) SetMode(ctx context.Context, p *protocol.ApprovalsSetModeParams) (*protocol.ApprovalsSetModeResult, error) {
	if !p.Mode.IsKnown() {
		return nil, protocol.NewInvalidParamsError(fmt.Sprintf("params/mode: %q is not a mode; use ask, auto-edit or locked.", p.Mode), &protocol.InvalidParamsErrorData{Pointer: "/mode"})
	}
	if _, err := h.s.getSession(ctx, p.SessionID, "List the sessions with sessions.list."); err != nil {
		return nil, err
	}
	if c := connFrom(ctx); p.Mode == protocol.ApprovalModeAutoEdit && (c == nil || c.scope != protocol.ScopeAdmin) {
		scope := ""
		if c != nil {
			scope = string(c.scope)
		}
		return nil, protocol.NewForbiddenError("Only an admin token may loosen a session to auto-edit; a chat token may set ask or locked.",
			&protocol.ForbiddenErrorData{Needed: string(protocol.ScopeAdmin), Scope: scope})
	}
	actor := actorOf(ctx)
	if err := h.s.store.SetApprovalMode(ctx, p.SessionID, string(p.Mode), actor); err != nil {
		return nil, storeErr(err, "")
	}
	h.s.hub.publish(&protocol.ApprovalModeSignal{SessionID: p.SessionID, Mode: p.Mode, By: &actor}, connFrom(ctx), "")
	return &protocol.ApprovalsSetModeResult{Mode: p.Mode}, nil
}

func safelistOut(e store.SafelistEntry) protocol.SafelistEntry {
	out := protocol.SafelistEntry{ID: e.ID, ProjectRoot: e.ProjectRoot, Tool: e.Tool, CreatedAt: e.CreatedAt.UnixMilli(), CreatedBy: e.CreatedBy}
	if e.Prefix != "" {
		out.Prefix = &e.Prefix
	}
	return out
}

// List implements safelist.list.
func (h safelistHandler) List(ctx context.Context, p *protocol.SafelistListParams) (*protocol.SafelistListResult, error) {
	root := ""
	if p.ProjectRoot != nil {
		root = *p.ProjectRoot
	}
	es, err := h.s.store.ListSafelist(ctx, root)
	if err != nil {
		return nil, storeErr(err, "params/projectRoot")
	}
	out := &protocol.SafelistListResult{Entries: make([]protocol.SafelistEntry, 0, len(es))}
	for _, e := range es {
		out.Entries = append(out.Entries, safelistOut(e))
	}
	return out, nil
}

// Revoke implements safelist.revoke.
func (h safelistHandler) Revoke(ctx context.Context, p *protocol.SafelistRevokeParams) (*protocol.SafelistRevokeResult, error) {
	ok, err := h.s.store.RevokeSafelist(ctx, p.ID, actorOf(ctx))
	if err != nil {
		return nil, storeErr(err, "")
	}
	return &protocol.SafelistRevokeResult{Revoked: ok}, nil
}

// List implements audit.list (admin).
func (h auditHandler) List(ctx context.Context, p *protocol.AuditListParams) (*protocol.AuditListResult, error) {
	limit := 100
	if p.Limit != nil {
		limit = *p.Limit
	}
	var before int64
	if p.Before != nil {
		before = *p.Before
	}
	sid := ""
	if p.SessionID != nil {
		sid = *p.SessionID
	}
	es, err := h.s.store.ListAudit(ctx, limit, before, sid)
	if err != nil {
		return nil, storeErr(err, "")
	}
	out := &protocol.AuditListResult{Entries: make([]protocol.AuditEntry, 0, len(es))}
	for _, e := range es {
		x := protocol.AuditEntry{ID: e.ID, At: e.At.UnixMilli(), Actor: e.Actor, Action: protocol.AuditAction(e.Action), Detail: e.Detail}
		if e.SessionID != "" {
			x.SessionID = &e.SessionID
		}
		out.Entries = append(out.Entries, x)
	}
	return out, nil
}
