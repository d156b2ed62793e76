package server

import (
	"context"
	"path"
	"sort"
	"strings"
	"time"
	"unicode/utf16"

	"github.com/zidane-server/zidane/protocol"
)

type completionsHandler struct{ s *Server }

// Completions returns the completions group's handler (issue 28, "Completions").
func (h *handlers) Completions() protocol.CompletionsHandler { return completionsHandler{h.s} }

// completionTime bounds a completions.query: the wait for a root's first walk and the scoring.
const completionTime = time.Second

// wordAt returns the word of text that ends at position (UTF-16 code units): the run back to a
// space or the start, its start, and position clamped, both in code units.
func wordAt(text string, position int) (word string, start, end int) {
	units := utf16.Encode([]rune(text))
	end = min(max(position, 0), len(units))
	start = end
	for start > 0 {
		switch units[start-1] {
		case ' ', '\t', '\n', '\r':
			return string(utf16.Decode(units[start:end])), start, end
		}
		start--
	}
	return string(utf16.Decode(units[start:end])), start, end
}

// Query implements completions.query.
func (h completionsHandler) Query(ctx context.Context, p *protocol.CompletionsQueryParams) (*protocol.CompletionsQueryResult, error) {
	limit := 20
	if p.Limit != nil {
		limit = *p.Limit
	}
	if err := textParam("/cwd", "a folder", p.Cwd); err != nil {
		return nil, err
	}
	word, start, end := wordAt(p.Text, p.Position)
	res := &protocol.CompletionsQueryResult{Items: []protocol.CompletionItem{}}
	if word == "" {
		return res, nil
	}
	rng := protocol.TextRange{Start: start, Length: end - start}
	trigger, q := word[:1], word[1:]
	switch trigger {
	case "@":
		if _, _, err := h.s.resolveCwd(p.Cwd); err != nil {
			return nil, err
		}
		dir, err := h.s.ws.Folder(p.Cwd)
		if err != nil {
			return nil, protocol.NewHandlerFailedError("Folder " + err.Error())
		}
		qctx, cancel := context.WithTimeout(ctx, completionTime)
		found := h.s.files.Of(dir).Query(qctx, q, limit)
		cancel()
		for _, m := range found.Matches {
			label := m.Rel
			if dir.Rel != "." && dir.Rel != "" {
				if r, ok := strings.CutPrefix(m.Rel, dir.Rel+"/"); ok {
					label = r
				} else {
					label = "/" + path.Join(path.Base(dir.Root), m.Rel) // outside cwd: from the root
				}
			}
			kind, insert := protocol.CompletionKindFile, "@"+label+" "
			if m.Dir {
				kind, insert = protocol.CompletionKindFolder, "@"+label+"/"
			}
			abs := path.Join(dir.Root, m.Rel)
			res.Items = append(res.Items, protocol.CompletionItem{Kind: kind, Label: label, InsertText: insert, Range: rng, Path: &abs})
		}
		if found.Incomplete {
			res.Incomplete = ptr(true)
		}
	case "/":
		if start != 0 {
			return res, nil // a command only starts the prompt
		}
		set, err := h.s.definitions(&p.Cwd)
		if err != nil {
			return nil, err
		}
		lq := strings.ToLower(q)
		type cand struct {
			name, desc, hint string
			rank             int
		}
		var cs []cand
		for _, c := range set.Commands {
			n := strings.ToLower(c.Name)
			switch {
			case strings.HasPrefix(n, lq):
				cs = append(cs, cand{c.Name, c.Description, c.ArgumentHint, 0})
			case strings.Contains(n, lq):
				cs = append(cs, cand{c.Name, c.Description, c.ArgumentHint, 1})
			}
		}
		sort.SliceStable(cs, func(i, j int) bool {
			if cs[i].rank != cs[j].rank {
				return cs[i].rank < cs[j].rank
			}
			return cs[i].name < cs[j].name
		})
		for _, c := range cs[:min(len(cs), limit)] {
			detail := c.desc
			if c.hint != "" {
				detail = strings.TrimSpace(c.hint + " — " + c.desc)
			}
			res.Items = append(res.Items, protocol.CompletionItem{Kind: protocol.CompletionKindCommand, Label: "/" + c.name, Detail: optString(detail), InsertText: "/" + c.name + " ", Range: rng})
		}
	case "#":
		xs, err := h.s.store.FindSessions(ctx, q, limit)
		if err != nil {
			return nil, storeErr(err, "params/text")
		}
		for _, x := range xs {
			id := x.ID
			res.Items = append(res.Items, protocol.CompletionItem{Kind: protocol.CompletionKindSession, Label: x.Title, Detail: optString(x.Cwd), InsertText: "#" + x.ID + " ", Range: rng, SessionID: &id})
		}
	default:
		return res, nil
	}
	res.Trigger = &trigger
	return res, nil
}
