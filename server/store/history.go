package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// MaxDocBytes bounds an event's searchable text (EventRow.Doc): the search needs a block's words,
// not all of its megabytes, and Postgres refuses a tsvector over 1 MiB.
const MaxDocBytes = 64 << 10

// SearchDoc is doc as the store keeps it: at most MaxDocBytes (cut on a character), valid UTF-8,
// without NUL, and without \x01 and \x02, which mark the matches of a snippet (SearchHit).
func SearchDoc(doc string) string {
	if doc == "" {
		return ""
	}
	if len(doc) > MaxDocBytes {
		cut := MaxDocBytes
		for cut > 0 && !utf8.RuneStart(doc[cut]) {
			cut--
		}
		doc = doc[:cut]
	}
	if strings.ContainsAny(doc, "\x00\x01\x02") {
		doc = strings.NewReplacer("\x00", "", "\x01", " ", "\x02", " ").Replace(doc)
	}
	return strings.ToValidUTF8(doc, "\uFFFD")
}

// Searchable reports whether events of kind have a searchable text: prompts, answers, tool calls
// (their one-line rendering) and tool results. Thinking, summaries and errors do not.
func Searchable(kind string) bool {
	switch kind {
	case "user-prompt", "markdown", "tool", "tool-result":
		return true
	}
	return false
}

// DocOfBody is the searchable text of a stored event's body: its text member when the kind is
// Searchable, else "".
func DocOfBody(kind string, body []byte) string {
	if !Searchable(kind) {
		return ""
	}
	var t struct {
		Text string `json:"text"`
	}
	if json.Unmarshal(body, &t) != nil {
		return ""
	}
	return t.Text
}

// ErrNoRestore: the restoreId names no rollback of the session, or its window passed.
var ErrNoRestore = errors.New("no such rollback")

// ErrRestoreMoved: the session's transcript changed since the rollback, so its dropped exchanges
// cannot come back in their place.
var ErrRestoreMoved = errors.New("the transcript changed since the rollback")

// ErrNoTurn: the turn id names no turn of the session.
var ErrNoTurn = errors.New("no such turn")

// cutAfter returns the event count that keeps the exchange holding turnID and those before it:
// the pos of the first user prompt after that turn, or the session's event count. ErrNoTurn when
// no event of the session has turnID.
func cutAfter(ctx context.Context, q pgx.Tx, u uuid.UUID, turnID string, eventCount int) (int, error) {
	if turnID == "" {
		return eventCount, nil
	}
	var tp int
	err := q.QueryRow(ctx, `SELECT max(turn_pos) FROM events WHERE session_id = $1 AND turn_id = $2 HAVING count(*) > 0`, u, turnID).Scan(&tp)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, fmt.Errorf("%w: %q", ErrNoTurn, turnID)
	}
	if err != nil {
		return 0, err
	}
	cut := eventCount
	err = q.QueryRow(ctx, `SELECT pos FROM events WHERE session_id = $1 AND turn_pos > $2 AND kind = 'user-prompt'
		ORDER BY turn_pos, pos LIMIT 1`, u, tp).Scan(&cut)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return 0, err
	}
	return cut, nil
}

// setCounters sets the session's transcript counters to its first n events.
func setCounters(ctx context.Context, tx pgx.Tx, u uuid.UUID, n int) (Session, error) {
	return scanSession(tx.QueryRow(ctx, `
		UPDATE sessions s SET event_count = $2,
		       turn_count = coalesce((SELECT turn_pos + 1 FROM events WHERE session_id = $1 AND pos = $2 - 1), 0),
		       last_turn_id = (SELECT turn_id FROM events WHERE session_id = $1 AND pos = $2 - 1),
		       updated_at = greatest(now(), updated_at)
		 WHERE id = $1 RETURNING `+sessionCols, u, n))
}

// ForkSession creates a session holding the events of sessionID up to and including the exchange
// that holds turnID ("" for all of them), copied as stored, with the source's folder, agent and
// model, the given title and ForkedFrom set, in one transaction. Errors: ErrNotFound (the source),
// ErrNoTurn, ErrInvalidText (title).
func (s *Store) ForkSession(ctx context.Context, sessionID, turnID, title string) (Session, error) {
	u, err := parseID("fork session", sessionID)
	if err != nil {
		return Session{}, err
	}
	if err := checkText("title", title); err != nil {
		return Session{}, fmt.Errorf("fork session: %w", err)
	}
	var out Session
	err = s.withConn(ctx, "fork session", func(ctx context.Context, c *pgxpool.Conn) error {
		return pgx.BeginFunc(ctx, c, func(tx pgx.Tx) error {
			var count int
			if err := tx.QueryRow(ctx, `SELECT event_count FROM sessions WHERE id = $1 FOR SHARE`, u).Scan(&count); err != nil {
				return err
			}
			cut, err := cutAfter(ctx, tx, u, turnID, count)
			if err != nil {
				return err
			}
			id := uuid.New()
			if _, err := tx.Exec(ctx, `
				INSERT INTO sessions (id, title, title_set, project_root, cwd, agent_id, status, model, forked_from)
				SELECT $2, $3, true, project_root, cwd, agent_id, 'idle', model, id FROM sessions WHERE id = $1`, u, id, title); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `
				INSERT INTO events (session_id, pos, turn_pos, turn_id, kind, body, doc, created_at)
				SELECT $2, pos, turn_pos, turn_id, kind, body, doc, created_at FROM events
				 WHERE session_id = $1 AND pos < $3 ORDER BY pos`, u, id, cut); err != nil {
				return err
			}
			out, err = setCounters(ctx, tx, id, cut)
			return err
		})
	})
	return out, err
}

// Rollback is what RollbackSession dropped.
type Rollback struct {
	ID        string    // the restore id; "" when nothing was dropped
	Exchanges int       // exchanges dropped
	Events    int       // events dropped
	Until     time.Time // when the restore id expires
}

// RollbackSession drops the session's events after the exchange that holds turnID, keeping them
// until now+window for RestoreSession, in one transaction; rollbacks past their window are deleted
// meanwhile. The caller makes sure no run writes to the session. Errors: ErrNotFound, ErrNoTurn.
func (s *Store) RollbackSession(ctx context.Context, sessionID, turnID string, window time.Duration) (Rollback, Session, error) {
	u, err := parseID("roll back session", sessionID)
	if err != nil {
		return Rollback{}, Session{}, err
	}
	var rb Rollback
	var out Session
	err = s.withConn(ctx, "roll back session", func(ctx context.Context, c *pgxpool.Conn) error {
		return pgx.BeginFunc(ctx, c, func(tx pgx.Tx) error {
			rb, out = Rollback{}, Session{}
			if _, err := tx.Exec(ctx, `DELETE FROM rollbacks WHERE expires_at < now()`); err != nil {
				return err
			}
			var count int
			if err := tx.QueryRow(ctx, `SELECT event_count FROM sessions WHERE id = $1 FOR UPDATE`, u).Scan(&count); err != nil {
				return err
			}
			cut, err := cutAfter(ctx, tx, u, turnID, count)
			if err != nil {
				return err
			}
			if cut >= count {
				out, err = scanSession(tx.QueryRow(ctx, `SELECT `+sessionCols+` FROM sessions WHERE id = $1`, u))
				return err
			}
			id := uuid.New()
			if err := tx.QueryRow(ctx, `INSERT INTO rollbacks (id, session_id, cut, expires_at) VALUES ($1, $2, $3, now() + make_interval(secs => $4)) RETURNING expires_at`,
				id, u, cut, window.Seconds()).Scan(&rb.Until); err != nil {
				return err
			}
			if err := tx.QueryRow(ctx, `
				WITH moved AS (
					DELETE FROM events WHERE session_id = $1 AND pos >= $2
					RETURNING pos, turn_pos, turn_id, kind, body, doc, created_at
				), kept AS (
					INSERT INTO rolled_back_events (rollback_id, pos, turn_pos, turn_id, kind, body, doc, created_at)
					SELECT $3, pos, turn_pos, turn_id, kind, body, doc, created_at FROM moved
					RETURNING kind
				)
				SELECT count(*), count(*) FILTER (WHERE kind = 'user-prompt') FROM kept`, u, cut, id).Scan(&rb.Events, &rb.Exchanges); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `DELETE FROM open_blocks WHERE session_id = $1`, u); err != nil {
				return err
			}
			rb.ID = id.String()
			out, err = setCounters(ctx, tx, u, cut)
			return err
		})
	})
	return rb, out, err
}

// RestoreSession brings back the events of rollback restoreID into the session, which must still
// end where the rollback left it, in one transaction; the rollback is then gone. It returns the
// exchanges and events restored. Errors: ErrNotFound (the session), ErrNoRestore (no such
// rollback of the session, or past its window), ErrRestoreMoved.
func (s *Store) RestoreSession(ctx context.Context, sessionID, restoreID string) (exchanges, events int, out Session, err error) {
	u, err := parseID("restore session", sessionID)
	if err != nil {
		return 0, 0, Session{}, err
	}
	rid, perr := uuid.Parse(restoreID)
	if perr != nil {
		return 0, 0, Session{}, fmt.Errorf("restore session: %w: %q is not a restoreId", ErrNoRestore, restoreID)
	}
	err = s.withConn(ctx, "restore session", func(ctx context.Context, c *pgxpool.Conn) error {
		return pgx.BeginFunc(ctx, c, func(tx pgx.Tx) error {
			var count int
			if err := tx.QueryRow(ctx, `SELECT event_count FROM sessions WHERE id = $1 FOR UPDATE`, u).Scan(&count); err != nil {
				return err
			}
			var cut int
			err := tx.QueryRow(ctx, `SELECT cut FROM rollbacks WHERE id = $1 AND session_id = $2 AND expires_at >= now() FOR UPDATE`, rid, u).Scan(&cut)
			if errors.Is(err, pgx.ErrNoRows) {
				return fmt.Errorf("restore session: %w", ErrNoRestore)
			}
			if err != nil {
				return err
			}
			if cut != count {
				return fmt.Errorf("restore session: %w", ErrRestoreMoved)
			}
			var last int
			if err := tx.QueryRow(ctx, `
				WITH back AS (
					INSERT INTO events (session_id, pos, turn_pos, turn_id, kind, body, doc, created_at)
					SELECT $2, pos, turn_pos, turn_id, kind, body, doc, created_at FROM rolled_back_events
					 WHERE rollback_id = $1 ORDER BY pos
					RETURNING pos, kind
				)
				SELECT count(*), count(*) FILTER (WHERE kind = 'user-prompt'), coalesce(max(pos), -1) FROM back`, rid, u).Scan(&events, &exchanges, &last); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `DELETE FROM rollbacks WHERE id = $1`, rid); err != nil {
				return err
			}
			out, err = setCounters(ctx, tx, u, last+1)
			return err
		})
	})
	return exchanges, events, out, err
}

// PromptUse is one prompt of a project's history.
type PromptUse struct {
	Text      string
	SessionID string    // the session it was last sent in
	At        time.Time // when
}

// promptScan bounds the prompts PromptHistory reads: the project's newest.
const promptScan = 1000

// PromptHistory returns the prompts of the sessions of projectRoot, newest first, each text once
// (at its newest use), at most limit, from the promptScan newest.
func (s *Store) PromptHistory(ctx context.Context, projectRoot string, limit int) ([]PromptUse, error) {
	out := []PromptUse{}
	err := s.withConn(ctx, "prompt history", func(ctx context.Context, c *pgxpool.Conn) error {
		// Per session, newest first through events_prompt_idx, merged; the texts compared by hash
		// (a prompt can be a megabyte), the page's bodies read last.
		rows, err := c.Query(ctx, `
			WITH recent AS (
				SELECT e.session_id, e.pos, e.created_at, md5(coalesce(e.doc, e.body)) AS h
				  FROM sessions s
				  CROSS JOIN LATERAL (
					SELECT session_id, pos, created_at, doc, body FROM events
					 WHERE session_id = s.id AND kind = 'user-prompt'
					 ORDER BY created_at DESC LIMIT $2) e
				 WHERE s.project_root = $1
				 ORDER BY e.created_at DESC, e.pos DESC
				 LIMIT $2
			), firsts AS (
				SELECT DISTINCT ON (h) session_id, pos, created_at FROM recent ORDER BY h, created_at DESC, pos DESC
			)
			SELECT f.session_id::text, f.created_at, e.body FROM firsts f
			  JOIN events e ON e.session_id = f.session_id AND e.pos = f.pos
			 ORDER BY f.created_at DESC, f.pos DESC
			 LIMIT $3`, projectRoot, promptScan, limit)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var p PromptUse
			var body string
			if err := rows.Scan(&p.SessionID, &p.At, &body); err != nil {
				return err
			}
			var ev struct {
				Text string `json:"text"`
			}
			if json.Unmarshal([]byte(body), &ev) == nil {
				p.Text = ev.Text
				out = append(out, p)
			}
		}
		return rows.Err()
	})
	return out, err
}
