package store

import (
	"context"
	"errors"
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
	// Doc is the event's searchable text (search.sessions; "" for none): a prompt's, an answer's
	// or a tool result's text, a tool call's rendering. The store keeps SearchDoc(Doc).
	Doc string
	// SignalSeq is the $seq of the session signal that carried the event (for a block merged from
	// streamed pieces, its last piece's), 0 when none did; SignalEpoch is that $seq's signal epoch.
	// Writes record the last such $seq of each session's rows as its signal mark (Mark.Signal;
	// issue 25 §1). Reads leave both zero.
	SignalSeq   int64
	SignalEpoch string
}

// SignalMark is the $seq of the last session signal whose event a session's stored transcript
// holds, and its signal epoch (migration 00100): every event signal of that epoch with a $seq up
// to Seq is in the stored rows, none after it is. Zero when unknown (no row was written with one).
type SignalMark struct {
	Seq   int64  `json:"seq"`
	Epoch string `json:"epoch"`
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
	docs := make([]string, len(rows))
	for i, r := range rows {
		u, err := parseID("append events", r.SessionID)
		if err != nil {
			return err
		}
		sess[i] = u
		turns[i], kinds[i], bodies[i], docs[i] = r.TurnID, r.Kind, string(r.Body), SearchDoc(r.Doc)
		for _, f := range []struct{ name, v string }{{"turn_id", turns[i]}, {"kind", kinds[i]}, {"body", bodies[i]}} {
			if err := checkText(f.name, f.v); err != nil {
				return fmt.Errorf("append events: row %d: %w", i, err)
			}
		}
	}
	return s.withConn(ctx, "append events", func(ctx context.Context, c *pgxpool.Conn) error {
		var n int
		if err := c.QueryRow(ctx, `SELECT append_events($1, $2, $3, $4, $5)`, sess, turns, kinds, bodies, docs).Scan(&n); err != nil {
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

// Mark is a transcript's extent at one moment (sessions.loadEvents and sessions.getTurns read
// "up to a mark" so that what they answer matches a $seq watermark taken at the same moment):
// the first Events events, which make the first Turns turns, the last of them LastTurnID.
type Mark struct {
	Events     int    // events before the mark (the next event's pos)
	Turns      int    // turns before the mark
	LastTurnID string // turn id of the last event before the mark ("" when none)
	// Signal is the stored transcript's signal mark, and Running whether the session's status is
	// "running": a replica that does not run a running session answers Signal.Seq as the
	// watermark (its owner died with more streamed than written: that is in the signal stream).
	Signal  SignalMark
	Running bool
}

// TranscriptMark reads the session's transcript extent now. ErrNotFound if the session does not
// exist.
func (s *Store) TranscriptMark(ctx context.Context, sessionID string) (Mark, error) {
	u, err := parseID("transcript mark", sessionID)
	if err != nil {
		return Mark{}, err
	}
	var m Mark
	err = s.withConn(ctx, "transcript mark", func(ctx context.Context, c *pgxpool.Conn) error {
		var last *string
		if err := c.QueryRow(ctx, `SELECT event_count, turn_count, last_turn_id, signal_seq, signal_epoch, status = 'running' FROM sessions WHERE id = $1`, u).
			Scan(&m.Events, &m.Turns, &last, &m.Signal.Seq, &m.Signal.Epoch, &m.Running); err != nil {
			return err
		}
		if last != nil {
			m.LastTurnID = *last
		}
		return nil
	})
	return m, err
}

// Page queries. Each reads through an index of events (TestPageQueriesUseAnIndex checks the
// plans on a 10,000-turn session): rangeSQL walks events_session_turn_idx (session_id, turn_pos,
// pos) in its own order, so no sort either; firstKindSQL reads one entry of it.
const (
	// rangeSQL: the events of turns [$2, $3) among the first $4 events, in transcript order.
	rangeSQL = `SELECT pos, turn_pos, turn_id, kind, body FROM events
		 WHERE session_id = $1 AND turn_pos >= $2 AND turn_pos < $3 AND pos < $4
		 ORDER BY turn_pos, pos`
	// firstKindSQL: the kind of turn $2's first event.
	firstKindSQL = `SELECT kind FROM events WHERE session_id = $1 AND turn_pos = $2 ORDER BY turn_pos, pos LIMIT 1`
	// startSQL: how many events come before turn $2 (among the first $3 events).
	startSQL = `SELECT pos FROM events WHERE session_id = $1 AND turn_pos >= $2 AND pos < $3
		 ORDER BY turn_pos, pos LIMIT 1`
)

// exchangeBoundary reports whether a page may start at turn t: not when the turn starts with a
// tool-result, whose call is then in an earlier turn (an exchange is split only by turns whose
// events lack the call's turnId; the runtime gives a call and its result the same one).
func exchangeBoundary(ctx context.Context, c *pgxpool.Conn, u any, t int) (bool, error) {
	var kind string
	err := c.QueryRow(ctx, firstKindSQL, u, t).Scan(&kind)
	if errors.Is(err, pgx.ErrNoRows) {
		return true, nil
	}
	return kind != "tool-result", err
}

// readTurns returns the events of turns [lower, upper) among the first m.Events events, with
// their turn positions, and the pos of the first of them (m.Events when there is none).
func readTurns(ctx context.Context, c *pgxpool.Conn, u any, sessionID string, m Mark, lower, upper int) ([]EventRow, []int, int, error) {
	out, turnPos := []EventRow{}, []int{}
	start := -1
	rows, err := c.Query(ctx, rangeSQL, u, lower, upper, m.Events)
	if err != nil {
		return nil, nil, 0, err
	}
	defer rows.Close()
	for rows.Next() {
		var pos, tp int
		var e EventRow
		var body string
		if err := rows.Scan(&pos, &tp, &e.TurnID, &e.Kind, &body); err != nil {
			return nil, nil, 0, err
		}
		if start < 0 {
			start = pos
		}
		e.SessionID, e.Body = sessionID, []byte(body)
		out, turnPos = append(out, e), append(turnPos, tp)
	}
	if err := rows.Err(); err != nil {
		return nil, nil, 0, err
	}
	if start < 0 {
		start = m.Events
		err := c.QueryRow(ctx, startSQL, u, lower, m.Events).Scan(&start)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return nil, nil, 0, err
		}
	}
	return out, turnPos, start, nil
}

// LoadEventsPage is LoadEventsPageAt at the transcript's current mark.
func (s *Store) LoadEventsPage(ctx context.Context, sessionID string, before *int, limit int) (Page, error) {
	m, err := s.TranscriptMark(ctx, sessionID)
	if err != nil {
		return Page{}, err
	}
	return s.LoadEventsPageAt(ctx, sessionID, m, before, limit)
}

// LoadEventsPageAt returns the last limit turns whose turn_pos is below *before (the mark's end
// when before is nil), among the events before mark m, with their events in order; limit <= 0
// means no limit. The page starts on an exchange boundary: when its first turn would start with
// a tool-result, the turns before it are added until it does not (seed "Paging"). ErrNotFound
// for a non-UUID id.
func (s *Store) LoadEventsPageAt(ctx context.Context, sessionID string, m Mark, before *int, limit int) (Page, error) {
	u, err := parseID("load events page", sessionID)
	if err != nil {
		return Page{}, err
	}
	upper := m.Turns
	if before != nil {
		upper = min(max(*before, 0), m.Turns)
	}
	lower := 0
	if limit > 0 {
		lower = max(upper-limit, 0)
	}
	p := Page{Turns: m.Turns}
	err = s.withConn(ctx, "load events page", func(ctx context.Context, c *pgxpool.Conn) error {
		for lower > 0 && lower < upper {
			ok, err := exchangeBoundary(ctx, c, u, lower)
			if err != nil {
				return err
			}
			if ok {
				break
			}
			lower--
		}
		p.FirstTurn = lower
		var err error
		p.Events, _, p.Start, err = readTurns(ctx, c, u, sessionID, m, lower, upper)
		return err
	})
	return p, err
}

// TurnPage is a page of a transcript's stored turns, oldest first (sessions.getTurns).
type TurnPage struct {
	Events  []EventRow // the page's events in transcript order
	TurnPos []int      // TurnPos[i] is the turn position of Events[i]
	Next    int        // the turn position after the page (Turns when the page holds the last turn)
	Turns   int        // total number of turns before the mark
}

// LoadTurnsAt returns the limit turns from turn position from on (limit <= 0: all of them),
// among the events before mark m. The page ends on an exchange boundary: when the turn after it
// starts with a tool-result, that turn is added, and so on. ErrNotFound for a non-UUID id.
func (s *Store) LoadTurnsAt(ctx context.Context, sessionID string, m Mark, from, limit int) (TurnPage, error) {
	u, err := parseID("load turns", sessionID)
	if err != nil {
		return TurnPage{}, err
	}
	from = min(max(from, 0), m.Turns)
	end := m.Turns
	if limit > 0 {
		end = min(from+limit, m.Turns)
	}
	p := TurnPage{Turns: m.Turns}
	err = s.withConn(ctx, "load turns", func(ctx context.Context, c *pgxpool.Conn) error {
		for end > from && end < m.Turns {
			ok, err := exchangeBoundary(ctx, c, u, end)
			if err != nil {
				return err
			}
			if ok {
				break
			}
			end++
		}
		p.Next = end
		var err error
		p.Events, p.TurnPos, _, err = readTurns(ctx, c, u, sessionID, m, from, end)
		return err
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
