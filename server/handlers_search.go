package server

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode/utf16"

	"github.com/zidane-server/zidane/protocol"
	"github.com/zidane-server/zidane/server/store"
)

type searchHandler struct{ s *Server }

// Search returns the search group's handler (issue 28, "Search").
func (h *handlers) Search() protocol.SearchHandler { return searchHandler{h.s} }

// Sessions implements search.sessions: the store's full-text and trigram search, each hit's
// snippet with its marks turned into highlights.
func (h searchHandler) Sessions(ctx context.Context, p *protocol.SearchSessionsParams) (*protocol.SearchSessionsResult, error) {
	if strings.TrimSpace(p.Query) == "" {
		return nil, protocol.NewInvalidParamsError("params/query: give at least one word to look for.", &protocol.InvalidParamsErrorData{Pointer: "/query"})
	}
	if err := textParam("/query", "a query", p.Query); err != nil {
		return nil, err
	}
	q := store.SearchQuery{Text: p.Query, Archived: p.Archived != nil && *p.Archived, Limit: 20}
	if p.Cwd != nil {
		if err := textParam("/cwd", "a folder", *p.Cwd); err != nil {
			return nil, err
		}
		q.Cwd = *p.Cwd
	}
	if p.Limit != nil {
		q.Limit = *p.Limit
	}
	if p.Cursor != nil {
		q.Cursor = *p.Cursor
	}
	page, err := h.s.store.SearchSessions(ctx, q)
	if errors.Is(err, store.ErrSearchNoWords) {
		return nil, protocol.NewInvalidParamsError(`params/query: a query needs at least one word to look for; a -word only leaves out the sessions that hold it (e.g. "login -oauth").`, &protocol.InvalidParamsErrorData{Pointer: "/query"})
	}
	if errors.Is(err, store.ErrBadSearchCursor) {
		return nil, protocol.NewInvalidParamsError("params/cursor: not a cursor of this search; pass the nextCursor of the previous page, or leave it out for the first page.", &protocol.InvalidParamsErrorData{Pointer: "/cursor"})
	}
	if err != nil {
		return nil, storeErr(err, "params/query")
	}
	out := &protocol.SearchSessionsResult{Results: make([]protocol.SearchResult, 0, len(page.Hits)), NextCursor: optString(page.Next)}
	for _, hit := range page.Hits {
		snippet, marks := highlights(hit.Snippet)
		r := protocol.SearchResult{Session: *h.s.sessionOut(hit.Session), Snippet: snippet, Highlights: marks, Rank: max(hit.Rank, 0)}
		if hit.TurnID != "" || hit.Kind != "" {
			r.TurnID, r.Kind = optString(hit.TurnID), optString(hit.Kind)
		}
		out.Results = append(out.Results, r)
	}
	return out, nil
}

// textParam is the InvalidParams answer, naming pointer, for a string param holding a NUL
// character, which no text the store keeps can hold (what says what the param is); nil otherwise.
// A check at the handler, so the answer names the param the NUL is in, not the first the store
// happened to check.
func textParam(pointer, what, v string) error {
	if strings.IndexByte(v, 0) >= 0 {
		return protocol.NewInvalidParamsError(fmt.Sprintf("params%s: %s cannot hold a NUL character; remove it.", pointer, what), &protocol.InvalidParamsErrorData{Pointer: pointer})
	}
	return nil
}

// highlights takes the store's marks (\x01 … \x02) out of a snippet and returns them as ranges
// in UTF-16 code units.
func highlights(marked string) (string, []protocol.TextRange) {
	var b strings.Builder
	marks := []protocol.TextRange{}
	units, start := 0, -1
	for _, r := range marked {
		switch r {
		case '\x01':
			start = units
		case '\x02':
			if start >= 0 {
				marks = append(marks, protocol.TextRange{Start: start, Length: units - start})
				start = -1
			}
		default:
			b.WriteRune(r)
			units += utf16.RuneLen(r)
		}
	}
	return b.String(), marks
}
