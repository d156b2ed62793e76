package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// SearchQuery is a search over every session's transcript, titles and folders (search.sessions).
type SearchQuery struct {
	Text     string // as a web search box takes it: words, "a phrase", or, -word
	Cwd      string // "" for every session; else those whose folder is Cwd or below it
	Archived bool   // archived sessions too
	Limit    int    // results per page (1..100)
	Cursor   string // a page's Next; "" for the first page
}

// SearchHit is one session a search found, with its best match.
type SearchHit struct {
	Session Session
	// TurnID, Pos and Kind name the event of the best match; TurnID is "" when only the title or
	// the folder matched.
	TurnID string
	Pos    int
	Kind   string
	// Snippet is the text around the match, each matched word between \x01 and \x02 (SearchDoc
	// keeps both out of the stored text).
	Snippet string
	Rank    float64
}

// SearchPage is a page of hits, best first.
type SearchPage struct {
	Hits []SearchHit
	Next string // the next page's cursor; "" on the last
}

// ErrBadSearchCursor: the cursor is not one of SearchSessions.
var ErrBadSearchCursor = errors.New("not a search cursor")

// ErrSearchNoWords: the query names no word or phrase to look for, only words to leave out
// ("-foo -bar"), which would match every session and read them all.
var ErrSearchNoWords = errors.New("a search needs a word to look for")

// lookingFor reports whether q, in the web search syntax SearchQuery.Text takes (words, "a
// phrase", or, -word, -"a phrase"), holds a word or phrase that is not left out by a '-'.
func lookingFor(q string) bool {
	rs := []rune(q)
	for i := 0; i < len(rs); {
		if unicode.IsSpace(rs[i]) {
			i++
			continue
		}
		neg := rs[i] == '-'
		if neg {
			i++
		}
		start := i
		if i < len(rs) && rs[i] == '"' {
			for i++; i < len(rs) && rs[i] != '"'; i++ {
			}
			i++
		} else {
			for i < len(rs) && !unicode.IsSpace(rs[i]) && rs[i] != '"' {
				i++
			}
		}
		term := strings.Trim(string(rs[start:min(i, len(rs))]), `"`)
		if !neg && strings.TrimSpace(term) != "" && !strings.EqualFold(term, "or") {
			return true
		}
	}
	return false
}

// maxSearchOffset bounds how deep a search pages.
const maxSearchOffset = 1000

// identifierLike reports whether q reads as a code identifier or a path (one token holding
// punctuation such as . / _ - :, or a lower-case letter followed by an upper-case one), which
// trigram matching finds inside longer words ("istory.go" in "server/agent/history.go"). Letters
// and digits alone ("v16", "w1234") are a word the full-text index holds whole: matching them
// inside longer words would find "v160" for "v16" and read every such event.
func identifierLike(q string) bool {
	if len([]rune(q)) < 3 || strings.ContainsAny(q, " \t\n\"") {
		return false
	}
	prevLower := false
	for _, r := range q {
		switch {
		case strings.ContainsRune("./_-:\\#@$", r):
			return true
		case unicode.IsUpper(r) && prevLower:
			return true
		}
		prevLower = unicode.IsLower(r)
	}
	return false
}

// likePattern is q as an ILIKE pattern matching it anywhere.
func likePattern(q string) string {
	return "%" + strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(q) + "%"
}

// searchSQL builds the search's statement. Every match is found through an index: the events'
// tsv (events_tsv_idx) and doc trigrams (events_doc_trgm_idx, for identifiers), the sessions'
// tsv and title-and-folder trigrams; the page's snippets are made for its rows only.
func searchSQL(trgm bool) string {
	evMatch, sesMatch, evBonus := `e.tsv @@ search_query($1)`, `s.tsv @@ search_query($1)`, `0`
	if trgm {
		evMatch = `(e.tsv @@ search_query($1) OR e.doc ILIKE $2)`
		sesMatch = `(s.tsv @@ search_query($1) OR (s.title || ' ' || s.cwd) ILIKE $2)`
		evBonus = `CASE WHEN e.doc ILIKE $2 THEN 0.2 ELSE 0 END`
	}
	return `
	WITH ev AS (
		SELECT DISTINCT ON (e.session_id) e.session_id, e.pos, e.turn_id, e.kind,
		       ts_rank_cd(e.tsv, search_query($1)) + ` + evBonus + ` AS rank
		  FROM events e
		 WHERE e.doc IS NOT NULL AND ` + evMatch + `
		 ORDER BY e.session_id, rank DESC, e.pos DESC
	), ses AS (
		SELECT s.id AS session_id, 2 * ts_rank_cd(s.tsv, search_query($1)) + 0.1 AS rank
		  FROM sessions s WHERE ` + sesMatch + `
	), page AS (
		SELECT coalesce(ev.session_id, ses.session_id) AS hit_session, ev.pos AS hit_pos,
		       ev.turn_id AS hit_turn, ev.kind AS hit_kind,
		       coalesce(ev.rank, 0) + coalesce(ses.rank, 0) AS hit_rank, x.updated_at AS hit_updated
		  FROM ev FULL JOIN ses ON ses.session_id = ev.session_id
		  JOIN sessions x ON x.id = coalesce(ev.session_id, ses.session_id)
		 WHERE (NOT x.archived OR $3) AND ($4 = '' OR x.cwd = $4 OR left(x.cwd, length($4) + 1) = $4 || '/')
		 ORDER BY hit_rank DESC, hit_updated DESC, hit_session
		 OFFSET $5 LIMIT $6
	)
	SELECT ` + sessionCols + `, coalesce(p.hit_turn, ''), coalesce(p.hit_pos, -1), coalesce(p.hit_kind, ''), p.hit_rank,
	       coalesce((SELECT CASE WHEN strpos(h, E'\x01') > 0 OR $2 = '' THEN h
	                        ELSE substr(d.doc, greatest(strpos(lower(d.doc), lower($7)) - 80, 1), 80) || E'\x01' ||
	                             substr(d.doc, strpos(lower(d.doc), lower($7)), length($7)) || E'\x02' ||
	                             substr(d.doc, strpos(lower(d.doc), lower($7)) + length($7), 120) END
	                   FROM events d,
	                        LATERAL ts_headline('english', d.doc, search_query($1),
	                          'StartSel=` + "\x01" + `, StopSel=` + "\x02" + `, MaxWords=30, MinWords=12, MaxFragments=2, FragmentDelimiter=" … "') AS h
	                  WHERE d.session_id = p.hit_session AND d.pos = p.hit_pos), '')
	  FROM page p JOIN sessions ON sessions.id = p.hit_session
	 ORDER BY p.hit_rank DESC, p.hit_updated DESC, p.hit_session`
}

// SearchSessions finds the sessions whose prompts, answers, tool calls and results, title or
// folder match q.Text, best first (full-text rank, English stemming and the words as they are,
// plus trigram matching for identifiers and paths; a title or folder match adds to the rank),
// each with its best match's event and snippet. Errors: ErrBadSearchCursor, ErrSearchNoWords.
func (s *Store) SearchSessions(ctx context.Context, q SearchQuery) (SearchPage, error) {
	offset := 0
	if q.Cursor != "" {
		n, err := strconv.Atoi(strings.TrimPrefix(q.Cursor, "o"))
		if !strings.HasPrefix(q.Cursor, "o") || err != nil || n < 0 || n > maxSearchOffset {
			return SearchPage{}, ErrBadSearchCursor
		}
		offset = n
	}
	limit := min(max(q.Limit, 1), 100)
	text := strings.TrimSpace(q.Text)
	if err := checkText("query", text); err != nil {
		return SearchPage{}, fmt.Errorf("search sessions: %w", err)
	}
	if err := checkText("cwd", q.Cwd); err != nil {
		return SearchPage{}, fmt.Errorf("search sessions: %w", err)
	}
	if !lookingFor(text) {
		return SearchPage{}, ErrSearchNoWords
	}
	trgm := identifierLike(text)
	pattern := ""
	if trgm {
		pattern = likePattern(text)
	}
	page := SearchPage{Hits: []SearchHit{}}
	err := s.withConn(ctx, "search sessions", func(ctx context.Context, c *pgxpool.Conn) error {
		page.Hits = page.Hits[:0]
		// Planned with its values each time (an unnamed statement): a generic plan evaluates
		// search_query per row and cannot size the matches of the word.
		rows, err := c.Query(ctx, searchSQL(trgm), pgx.QueryExecModeExec, text, pattern, q.Archived, strings.TrimRight(q.Cwd, "/"), offset, limit+1, text)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var h SearchHit
			x := &h.Session
			if err := rows.Scan(append(x.dests(), &h.TurnID, &h.Pos, &h.Kind, &h.Rank, &h.Snippet)...); err != nil {
				return err
			}
			page.Hits = append(page.Hits, h)
		}
		return rows.Err()
	})
	if err != nil {
		return SearchPage{}, err
	}
	if len(page.Hits) > limit {
		page.Hits = page.Hits[:limit]
		if offset+limit <= maxSearchOffset {
			page.Next = "o" + strconv.Itoa(offset+limit)
		}
	}
	return page, nil
}

// FindSessions returns the sessions (not archived) whose title or folder holds q (any case; ""
// for all), most recently updated first, at most limit: the composer's session references. A q
// of three characters or more is matched through the title-and-folder trigram index.
func (s *Store) FindSessions(ctx context.Context, q string, limit int) ([]Session, error) {
	if err := checkText("query", q); err != nil {
		return nil, fmt.Errorf("find sessions: %w", err)
	}
	out := []Session{}
	err := s.withConn(ctx, "find sessions", func(ctx context.Context, c *pgxpool.Conn) error {
		out = out[:0]
		rows, err := c.Query(ctx, `SELECT `+sessionCols+` FROM sessions
			WHERE NOT archived AND ($1 = '' OR (title || ' ' || cwd) ILIKE $2)
			ORDER BY updated_at DESC, id LIMIT $3`, q, likePattern(q), min(max(limit, 1), 100))
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			x, err := scanSession(rows)
			if err != nil {
				return err
			}
			out = append(out, x)
		}
		return rows.Err()
	})
	return out, err
}
