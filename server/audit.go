package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/zidane-server/zidane/protocol"
	"github.com/zidane-server/zidane/server/store"
)

// auditCall records one call of a security-relevant method (x-audit in the schema; issue 22
// item 5): the token's name, the method, the params the schema names and the outcome. It runs
// for every such method whatever the handler does, so the log is complete by construction; the
// effect entries some changes also write in their own transaction (mode, safelist, token
// revocation) stay beside it. A failed write is logged: the call already took effect.
func (s *Server) auditCall(c *conn, m *protocol.MethodSpec, raw json.RawMessage, callErr error) {
	s.auditCallBy(c.token.Name, m, raw, callErr)
}

// auditCallBy records a call of an audited method by the token named actor (a WebSocket
// connection's, or an SSE request's).
func (s *Server) auditCallBy(actor string, m *protocol.MethodSpec, raw json.RawMessage, callErr error) {
	detail, sessionID := auditDetail(m, raw, callErr)
	ctx, cancel := context.WithTimeout(s.baseCtx, 5*time.Second)
	defer cancel()
	if err := s.store.AppendAudit(ctx, actor, store.AuditCall, sessionID, detail); err != nil {
		s.log.Error("audit: the call's entry was not written", "method", m.Name, "token", actor, "err", err)
	}
}

// auditDetail is an audited call's detail line, `<method> k=v … → ok` or `→ <code> <message>`
// (params as compact JSON, in the schema's order), and the session it concerns (its sessionId
// param, when it has one).
func auditDetail(m *protocol.MethodSpec, raw json.RawMessage, callErr error) (detail, sessionID string) {
	var params map[string]json.RawMessage
	_ = json.Unmarshal(raw, &params) // a call that got this far has an object (or no) params
	var b strings.Builder
	b.WriteString(m.Name)
	for _, name := range m.AuditParams {
		v, ok := params[name]
		if !ok {
			continue
		}
		var compact bytes.Buffer
		if json.Compact(&compact, v) != nil {
			continue
		}
		fmt.Fprintf(&b, " %s=%s", name, compact.Bytes())
		if name == "sessionId" {
			_ = json.Unmarshal(v, &sessionID)
		}
	}
	var rpcErr *protocol.Error
	switch {
	case callErr == nil:
		b.WriteString(" → ok")
	case errors.As(callErr, &rpcErr):
		fmt.Fprintf(&b, " → error %d: %s", rpcErr.Code, rpcErr.Message)
	default:
		fmt.Fprintf(&b, " → error: %v", callErr)
	}
	return b.String(), sessionID
}
