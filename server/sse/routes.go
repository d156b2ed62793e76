package sse

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/zidane-server/zidane/protocol"
)

// decodeBody reads a POST body into v (a generated body type); false: answered 400 saying what
// is wrong and shape, the body the route takes.
func decodeBody(w http.ResponseWriter, body []byte, v any, shape string) bool {
	if err := json.Unmarshal(body, v); err != nil {
		// In the protocol's words (the member, the JSON type it must be), never the Go type the
		// body decodes into (protocol.SendBody: a break-it helper's report).
		refuse(w, http.StatusBadRequest, int(protocol.CodeInvalidParams), "Bad Request: "+protocol.DecodeErrorText("body", err)+"; send "+shape+" (GET /zidane/sse/openapi.json describes each route's body).")
		return false
	}
	return true
}

// queryInt reads an integer query parameter into *dst (absent: left nil); false: answered 400.
func queryInt(w http.ResponseWriter, r *http.Request, name string, dst **int) bool {
	v, ok := r.URL.Query()[name]
	if !ok {
		return true
	}
	n, err := strconv.Atoi(v[0])
	if err != nil || len(v) > 1 {
		refuse(w, http.StatusBadRequest, int(protocol.CodeInvalidParams), "Bad Request: query "+name+" is one integer.")
		return false
	}
	*dst = &n
	return true
}

// listSessions serves GET …/sessions (sessions.list).
func (h *Handler) listSessions(w http.ResponseWriter, r *http.Request, c Caller) {
	var p protocol.SessionsListParams
	q := r.URL.Query()
	if v, ok := q["archived"]; ok {
		b, err := strconv.ParseBool(v[0])
		if err != nil {
			refuse(w, http.StatusBadRequest, int(protocol.CodeInvalidParams), "Bad Request: query archived is true or false.")
			return
		}
		p.Archived = &b
	}
	if !queryInt(w, r, "limit", &p.Limit) {
		return
	}
	if v, ok := q["cursor"]; ok {
		p.Cursor = &v[0]
	}
	res, ok := h.call(w, r, c, protocol.MethodSessionsList, &p)
	if !ok {
		return
	}
	l := res.(*protocol.SessionsListResult)
	writeJSON(w, http.StatusOK, &protocol.SessionListResponse{Sessions: l.Sessions, NextCursor: l.NextCursor})
}

// createSession serves POST …/sessions (sessions.create in the server's own folder: the body
// names none, as the seed's security notes say).
func (h *Handler) createSession(w http.ResponseWriter, r *http.Request, c Caller, body []byte) {
	var b protocol.CreateSessionBody
	if !decodeBody(w, body, &b, `a JSON object: {} or {"title":"…"}`) {
		return
	}
	res, ok := h.call(w, r, c, protocol.MethodSessionsCreate, &protocol.SessionsCreateParams{Title: b.Title})
	if ok {
		writeJSON(w, http.StatusOK, res)
	}
}

// defaultHydrateTurns is how many turns hydrate answers when the query says nothing.
const defaultHydrateTurns = 200

// hydrate serves GET …/sessions/{id}: the session, a page of its transcript and the record id
// the page is consistent with (sessions.loadEvents' watermark).
func (h *Handler) hydrate(w http.ResponseWriter, r *http.Request, c Caller, sessionID string) {
	p := protocol.SessionsLoadEventsParams{SessionID: sessionID}
	if !queryInt(w, r, "before", &p.Before) || !queryInt(w, r, "limit", &p.Limit) {
		return
	}
	if p.Limit == nil {
		n := defaultHydrateTurns
		p.Limit = &n
	}
	sres, ok := h.call(w, r, c, protocol.MethodSessionsGet, &protocol.SessionsGetParams{SessionID: sessionID})
	if !ok {
		return
	}
	res, ok := h.call(w, r, c, protocol.MethodSessionsLoadEvents, &p)
	if !ok {
		return
	}
	ev := res.(*protocol.SessionsLoadEventsResult)
	writeJSON(w, http.StatusOK, &protocol.HydrateResponse{
		Session: *sres.(*protocol.Session), Events: ev.Events, Start: ev.Start, Exact: ev.Exact, Cursor: ev.Cursor,
		LastEventID: Position{Epoch: ev.SignalEpoch, Seq: ev.Seq}.String(),
	})
}

// send serves POST …/sessions/{id}/send: chat.send with the body's prompt or command and
// arguments, model and attachments, so chat.send's own checks apply (the model is set on the
// session first; agent.CheckAttachments refuses a bad attachment with InvalidParams naming it,
// answered 400, before anything takes effect).
func (h *Handler) send(w http.ResponseWriter, r *http.Request, c Caller, sessionID string, body []byte) {
	var b protocol.SendBody
	if !decodeBody(w, body, &b, `a JSON object such as {"prompt":"…"} (or command and arguments; model and attachments optional)`) {
		return
	}
	res, ok := h.call(w, r, c, protocol.MethodChatSend, &protocol.ChatSendParams{
		SessionID: sessionID, Prompt: &b.Prompt, Command: b.Command, Arguments: b.Arguments,
		Model: b.Model, Attachments: b.Attachments,
	})
	if ok {
		writeJSON(w, http.StatusOK, &protocol.SendResponse{RunID: res.(*protocol.ChatSendResult).RunID})
	}
}

// answer serves POST …/sessions/{id}/answer: approvals.answer or interactions.answer.
func (h *Handler) answer(w http.ResponseWriter, r *http.Request, c Caller, sessionID string, body []byte) {
	var b protocol.AnswerBody
	if !decodeBody(w, body, &b, `a JSON object: {"requestId":"…","approval":"allow"} or {"requestId":"…","question":{"choices":[…],"text":"…"}}`) {
		return
	}
	var method string
	var params any
	switch {
	case b.Approval != nil && b.Question == nil:
		method, params = protocol.MethodApprovalsAnswer, &protocol.ApprovalsAnswerParams{SessionID: sessionID, RequestID: b.RequestID, Decision: *b.Approval}
	case b.Question != nil && b.Approval == nil:
		p := &protocol.InteractionsAnswerParams{SessionID: sessionID, RequestID: b.RequestID}
		if q := b.Question; q.Dismissed == nil || !*q.Dismissed {
			p.Answer = &protocol.InteractionsAnswerParamsAnswer{Choices: q.Choices, Text: q.Text}
		}
		method, params = protocol.MethodInteractionsAnswer, p
	default:
		refuse(w, http.StatusBadRequest, int(protocol.CodeInvalidParams), "Bad Request: the body holds exactly one of approval (answering an approval:request) and question (answering an interaction:request).")
		return
	}
	res, ok := h.call(w, r, c, method, params)
	if !ok {
		return
	}
	okv := false
	switch x := res.(type) {
	case *protocol.ApprovalsAnswerResult:
		okv = x.OK
	case *protocol.InteractionsAnswerResult:
		okv = x.OK
	}
	writeJSON(w, http.StatusOK, &protocol.AnswerResponse{OK: okv})
}

// cancel serves POST …/sessions/{id}/cancel (chat.cancel).
func (h *Handler) cancel(w http.ResponseWriter, r *http.Request, c Caller, sessionID string, body []byte) {
	var b protocol.CancelBody
	if !decodeBody(w, body, &b, `a JSON object: {} or {"runId":"…"}`) {
		return
	}
	res, ok := h.call(w, r, c, protocol.MethodChatCancel, &protocol.ChatCancelParams{SessionID: sessionID, RunID: b.RunID})
	if ok {
		writeJSON(w, http.StatusOK, &protocol.CancelResponse{Cancelled: res.(*protocol.ChatCancelResult).Cancelled})
	}
}
