package store

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// EventRow is one transcript event. Body is the event's complete JSON
// (as produced by encoding/json), stored byte-for-byte as TEXT.
type EventRow struct {
	SessionID string // session UUID
	TurnID    string // events of one turn share it
	Kind      string // event kind, e.g. "message.delta"
	Body      []byte // complete JSON of the event
}

// Page is a slice of a session transcript made of whole turns.
type Page struct {
	Events    []EventRow // in transcript order
	Start     int        // number of events before the page (pos of its first event)
	FirstTurn int        // turn_pos of the page's first turn
	Turns     int        // total number of turns in the session
}

// AppendEvents appends rows, which may span several sessions, in one round
// trip and one transaction. Within each session, rows keep their order and
// get consecutive positions after the session's existing events; a row whose
// TurnID equals the session's previous event's TurnID continues that turn,
// any other TurnID starts the next turn. Safe under concurrent appends to
// the same session (the session rows are locked). Errors: ErrNotFound if a
// session does not exist (nothing is written), ErrInvalidText (field named).
func (s *Store) AppendEvents(ctx context.Context, rows []EventRow) error {
	if len(rows) == 0 {
		return nil
	}
	sess := make([]uuid.UUID, len(rows))
	turns := make([]string, len(rows))
	kinds := make([]string, len(rows))
	bodies := make([]string, len(rows))
	for i, r := range rows {
		u, err := parseID("append events", r.SessionID)
		if err != nil {
			return err
		}
		sess[i] = u
		turns[i], kinds[i], bodies[i] = r.TurnID, r.Kind, string(r.Body)
		for _, f := range []struct{ name, v string }{{"turn_id", turns[i]}, {"kind", kinds[i]}, {"body", bodies[i]}} {
			if err := checkText(f.name, f.v); err != nil {
				return fmt.Errorf("append events: row %d: %w", i, err)
			}
		}
	}
	return s.withConn(ctx, "append events", func(ctx context.Context, c *pgxpool.Conn) error {
		var n int
		if err := c.QueryRow(ctx, `SELECT append_events($1, $2, $3, $4)`, sess, turns, kinds, bodies).Scan(&n); err != nil {
			return err
		}
		if n != len(rows) {
			return fmt.Errorf("appended %d of %d events", n, len(rows))
		}
		return nil
	})
}

func collectEvents(rows pgx.Rows) ([]EventRow, error) {
	out := []EventRow{}
	for rows.Next() {
		var e EventRow
		var body string
		if err := rows.Scan(&e.SessionID, &e.TurnID, &e.Kind, &body); err != nil {
			rows.Close()
			return nil, err
		}
		e.Body = []byte(body)
		out = append(out, e)
	}
	return out, rows.Err()
}

// LoadEvents returns the session's whole transcript in position order
// (empty, not ErrNotFound, for a session without events or unknown id that
// is a valid UUID; ErrNotFound for a non-UUID id).
func (s *Store) LoadEvents(ctx context.Context, sessionID string) ([]EventRow, error) {
	u, err := parseID("load events", sessionID)
	if err != nil {
		return nil, err
	}
	var out []EventRow
	err = s.withConn(ctx, "load events", func(ctx context.Context, c *pgxpool.Conn) error {
		rows, err := c.Query(ctx,
			`SELECT session_id::text, turn_id, kind, body FROM events WHERE session_id = $1 ORDER BY pos`, u)
		if err != nil {
			return err
		}
		out, err = collectEvents(rows)
		return err
	})
	return out, err
}

// LoadEventsPage returns the last limit turns whose turn_pos is below
// *before (all turns when before is nil), with their events in order.
// limit <= 0 means no limit. ErrNotFound if the session does not exist.
func (s *Store) LoadEventsPage(ctx context.Context, sessionID string, before *int, limit int) (Page, error) {
	u, err := parseID("load events page", sessionID)
	if err != nil {
		return Page{}, err
	}
	// One statement, one round trip and one snapshot: the session's turn count, then the page's
	// rows. A row's pos is the number of events before it, so the page's first pos is Start (no
	// count of the earlier events) — the paging figure of docs/benchmarks.md.
	var upperArg any
	if before != nil {
		upperArg = *before
	}
	var p Page
	err = s.withConn(ctx, "load events page", func(ctx context.Context, c *pgxpool.Conn) error {
		rows, err := c.Query(ctx, `
			WITH sess AS (SELECT turn_count FROM sessions WHERE id = $1),
			     bounds AS (
			       SELECT turn_count,
			              LEAST(turn_count, GREATEST(COALESCE($2::int, turn_count), 0)) AS upper
			         FROM sess)
			SELECT b.turn_count, b.upper, e.pos, e.session_id::text, e.turn_id, e.kind, e.body
			  FROM bounds b
			  LEFT JOIN events e
			    ON e.session_id = $1
			   AND e.turn_pos >= CASE WHEN $3::int > 0 THEN GREATEST(b.upper - $3::int, 0) ELSE 0 END
			   AND e.turn_pos < b.upper
			 ORDER BY e.pos`, u, upperArg, limit)
		if err != nil {
			return err
		}
		defer rows.Close()
		found := false
		p.Events = []EventRow{}
		for rows.Next() {
			found = true
			var upper int
			var pos *int
			var sid, turn, kind, body *string
			if err := rows.Scan(&p.Turns, &upper, &pos, &sid, &turn, &kind, &body); err != nil {
				return err
			}
			p.FirstTurn = 0
			if limit > 0 {
				p.FirstTurn = max(upper-limit, 0)
			}
			if pos == nil { // the session has no events in range
				continue
			}
			if len(p.Events) == 0 {
				p.Start = *pos
			}
			p.Events = append(p.Events, EventRow{SessionID: *sid, TurnID: *turn, Kind: *kind, Body: []byte(*body)})
		}
		if err := rows.Err(); err != nil {
			return err
		}
		if !found {
			return pgx.ErrNoRows
		}
		if len(p.Events) == 0 {
			// An empty page starts after every event before its first turn.
			return c.QueryRow(ctx, `SELECT count(*) FROM events WHERE session_id = $1 AND turn_pos < $2`, u, p.FirstTurn).Scan(&p.Start)
		}
		return nil
	})
	return p, err
}

// CountEvents returns the number of events in the session's transcript
// (0 for an unknown session; ErrNotFound for a non-UUID id).
func (s *Store) CountEvents(ctx context.Context, sessionID string) (int, error) {
	u, err := parseID("count events", sessionID)
	if err != nil {
		return 0, err
	}
	var n int
	err = s.withConn(ctx, "count events", func(ctx context.Context, c *pgxpool.Conn) error {
		return c.QueryRow(ctx, `SELECT count(*) FROM events WHERE session_id = $1`, u).Scan(&n)
	})
	return n, err
}
