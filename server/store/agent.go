package store

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// TranscriptBatch is one flush of the runtime's transcript writer, written by FlushTranscript in
// one round trip and one transaction.
type TranscriptBatch struct {
	// Rows are appended in order (as AppendEvents).
	Rows []EventRow
	// Cleared are sessions whose open-block checkpoint is deleted (their block closed).
	Cleared []string
	// Open holds the new checkpoints, one per session: the streamed block not closed yet, as the
	// event it will become. A session deleted meanwhile has its checkpoint skipped.
	Open []EventRow
	// Usage are model turns' usage rows (At defaults to now).
	Usage []TurnUsage
	// StatusOf, when set, is the session whose status becomes Status after the rows (a run's
	// end). A session deleted meanwhile is skipped.
	StatusOf, Status string
}

func (b TranscriptBatch) empty() bool {
	return len(b.Rows) == 0 && len(b.Cleared) == 0 && len(b.Open) == 0 && len(b.Usage) == 0 && b.StatusOf == ""
}

// FlushTranscript writes one batch of the transcript writer: every statement goes in one pgx
// batch, one round trip, which Postgres runs as one implicit transaction (issue 10: a run's prompt
// and its status "running", its usage rows and its end reach Postgres without a round trip of their
// own). It returns the session StatusOf names as stored (zero when none was set). Errors as AppendEvents
// (ErrNotFound when a row's session does not exist, ErrInvalidText); on error nothing is written.
func (s *Store) FlushTranscript(ctx context.Context, tb TranscriptBatch) (Session, error) {
	var out Session
	if tb.empty() {
		return out, nil
	}
	const op = "flush transcript"
	sess, turns, kinds, bodies, docs, err := eventArrays(op, tb.Rows)
	if err != nil {
		return out, err
	}
	osess, oturns, okinds, obodies, _, err := eventArrays(op, tb.Open)
	if err != nil {
		return out, err
	}
	clear, err := parseIDs(op, tb.Cleared)
	if err != nil {
		return out, err
	}
	var statusOf uuid.UUID
	if tb.StatusOf != "" {
		u, err := parseID(op, tb.StatusOf)
		if err != nil {
			return out, err
		}
		if err := checkText("status", tb.Status); err != nil {
			return out, fmt.Errorf("%s: %w", op, err)
		}
		statusOf = u
	}
	var uSess []uuid.UUID
	var uRun, uTurn, uModel []string
	var uIn, uOut []int64
	var uRep []bool
	var uAt []time.Time
	now := time.Now()
	for _, u := range tb.Usage {
		id, err := parseID(op, u.SessionID)
		if err != nil {
			return out, err
		}
		for _, f := range []struct{ name, v string }{{"run_id", u.RunID}, {"turn_id", u.TurnID}, {"model_id", u.ModelID}} {
			if err := checkText(f.name, f.v); err != nil {
				return out, fmt.Errorf("%s: %w", op, err)
			}
		}
		at := u.At
		if at.IsZero() {
			at = now
		}
		uSess, uRun, uTurn, uModel = append(uSess, id), append(uRun, u.RunID), append(uTurn, u.TurnID), append(uModel, u.ModelID)
		uIn, uOut, uRep, uAt = append(uIn, u.Input), append(uOut, u.Output), append(uRep, u.Reported), append(uAt, at)
	}
	err = s.withConn(ctx, op, func(ctx context.Context, c *pgxpool.Conn) error {
		out = Session{}
		// One batch, one round trip: its statements run in one implicit transaction, and the
		// first error aborts the rest (a transaction block cost a round trip per statement plus
		// BEGIN and COMMIT — the fan-out figures of docs/benchmarks.md).
		b := &pgx.Batch{}
		if len(tb.Rows) > 0 {
			b.Queue(`SELECT append_events($1, $2, $3, $4, $5)`, sess, turns, kinds, bodies, docs) // raises unless it appends every row
			queueSignalMarks(b, tb.Rows)
		}
		if len(clear) > 0 {
			b.Queue(`DELETE FROM open_blocks WHERE session_id = ANY($1)`, clear)
		}
		if len(tb.Open) > 0 {
			b.Queue(`
				INSERT INTO open_blocks (session_id, turn_id, kind, body, updated_at)
				SELECT o.s, o.t, o.k, o.b, now()
				  FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[]) AS o(s, t, k, b)
				 WHERE EXISTS (SELECT 1 FROM sessions WHERE id = o.s)
				ON CONFLICT (session_id) DO UPDATE
				   SET turn_id = excluded.turn_id, kind = excluded.kind, body = excluded.body, updated_at = now()`,
				osess, oturns, okinds, obodies)
		}
		if len(uSess) > 0 {
			b.Queue(`INSERT INTO turn_usage (session_id, run_id, turn_id, model_id, input, output, reported, created_at)
				SELECT * FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::bigint[], $6::bigint[], $7::boolean[], $8::timestamptz[])`,
				uSess, uRun, uTurn, uModel, uIn, uOut, uRep, uAt)
		}
		if tb.StatusOf == "" {
			return c.SendBatch(ctx, b).Close()
		}
		b.Queue(`UPDATE sessions SET status = $2, updated_at = greatest(now(), updated_at) WHERE id = $1 RETURNING `+sessionCols, statusOf, tb.Status)
		br := c.SendBatch(ctx, b)
		for range b.Len() - 1 {
			if _, err := br.Exec(); err != nil {
				br.Close()
				return err
			}
		}
		x, err := scanSession(br.QueryRow())
		if errors.Is(err, pgx.ErrNoRows) {
			err = nil // deleted meanwhile: skipped
		}
		out = x
		if cerr := br.Close(); err == nil {
			err = cerr
		}
		return err
	})
	if err != nil {
		return Session{}, err
	}
	return out, nil
}

func parseIDs(op string, ids []string) ([]uuid.UUID, error) {
	var out []uuid.UUID
	for _, id := range ids {
		u, err := parseID(op, id)
		if err != nil {
			return nil, err
		}
		out = append(out, u)
	}
	return out, nil
}

func eventArrays(op string, rows []EventRow) (sess []uuid.UUID, turns, kinds, bodies, docs []string, err error) {
	for i, r := range rows {
		u, err := parseID(op, r.SessionID)
		if err != nil {
			return nil, nil, nil, nil, nil, err
		}
		body := string(r.Body) // one copy per row: a streamed block's can be megabytes (field case T08)
		for _, f := range []struct{ name, v string }{{"turn_id", r.TurnID}, {"kind", r.Kind}, {"body", body}} {
			if err := checkText(f.name, f.v); err != nil {
				return nil, nil, nil, nil, nil, fmt.Errorf("%s: row %d: %w", op, i, err)
			}
		}
		sess = append(sess, u)
		turns, kinds, bodies, docs = append(turns, r.TurnID), append(kinds, r.Kind), append(bodies, body), append(docs, SearchDoc(r.Doc))
	}
	return sess, turns, kinds, bodies, docs, nil
}

// signalMarkSQL sets each listed session's signal mark (migration 00100): $1 the sessions, $2
// and $3 their last rows' $seq and epoch (signalMarks).
const signalMarkSQL = `UPDATE sessions s SET signal_seq = m.q, signal_epoch = m.e
	  FROM unnest($1::uuid[], $2::bigint[], $3::text[]) AS m(id, q, e) WHERE s.id = m.id`

// signalMarks returns, for each session of rows with a row that a signal carried, the $seq and
// epoch of its last such row (rows are in transcript order), for signalMarkSQL; nothing when no
// row has one.
func signalMarks(rows []EventRow) (ids []uuid.UUID, seqs []int64, epochs []string) {
	at := map[string]int{}
	for _, r := range rows {
		if r.SignalSeq <= 0 {
			continue
		}
		u, err := uuid.Parse(r.SessionID)
		if err != nil {
			continue // eventArrays refuses it first
		}
		i, ok := at[r.SessionID]
		if !ok {
			i = len(ids)
			at[r.SessionID] = i
			ids, seqs, epochs = append(ids, u), append(seqs, 0), append(epochs, "")
		}
		seqs[i], epochs[i] = r.SignalSeq, r.SignalEpoch
	}
	return ids, seqs, epochs
}

// queueSignalMarks queues signalMarkSQL for rows on b, when any row has a signal $seq.
func queueSignalMarks(b *pgx.Batch, rows []EventRow) {
	if ids, seqs, epochs := signalMarks(rows); len(ids) > 0 {
		b.Queue(signalMarkSQL, ids, seqs, epochs)
	}
}

// InterruptRunning ends the runs a killed process left behind, in one transaction: every session
// still "running" gets its open-block checkpoint (the text streamed before the crash) appended to
// its transcript, then the event errorEvent returns for it, and the status "interrupted". Every
// checkpoint is removed. It returns the ids of those sessions.
func (s *Store) InterruptRunning(ctx context.Context, errorEvent func(sessionID string) EventRow) ([]string, error) {
	var ids []string
	err := s.withConn(ctx, "interrupt running sessions", func(ctx context.Context, c *pgxpool.Conn) error {
		return pgx.BeginFunc(ctx, c, func(tx pgx.Tx) error {
			ids = nil
			rows, err := tx.Query(ctx, `
				SELECT s.id::text, b.turn_id, b.kind, b.body
				  FROM sessions s LEFT JOIN open_blocks b ON b.session_id = s.id
				 WHERE s.status = 'running' ORDER BY s.id FOR UPDATE OF s`)
			if err != nil {
				return err
			}
			var batch []EventRow
			for rows.Next() {
				var id string
				var turn, kind, body *string
				if err := rows.Scan(&id, &turn, &kind, &body); err != nil {
					rows.Close()
					return err
				}
				ids = append(ids, id)
				if body != nil {
					batch = append(batch, EventRow{SessionID: id, TurnID: *turn, Kind: *kind, Body: []byte(*body), Doc: DocOfBody(*kind, []byte(*body))})
				}
				batch = append(batch, errorEvent(id))
			}
			if err := rows.Err(); err != nil {
				return err
			}
			if len(batch) > 0 {
				sess, turns, kinds, bodies, docs, err := eventArrays("interrupt running sessions", batch)
				if err != nil {
					return err
				}
				if _, err := tx.Exec(ctx, `SELECT append_events($1, $2, $3, $4, $5)`, sess, turns, kinds, bodies, docs); err != nil {
					return err
				}
			}
			if _, err := tx.Exec(ctx, `UPDATE sessions SET status = 'interrupted', updated_at = greatest(now(), updated_at) WHERE status = 'running'`); err != nil {
				return err
			}
			_, err = tx.Exec(ctx, `DELETE FROM open_blocks`)
			return err
		})
	})
	return ids, err
}

// TurnUsage is one model turn's usage as the provider reported it.
type TurnUsage struct {
	SessionID, RunID, TurnID string
	ModelID                  string // "provider/model"
	Input, Output            int64  // tokens; 0 when not Reported
	Reported                 bool   // false: the provider sent no usage
	At                       time.Time
}

// UsageRow is one group of usage.summary: a local day (YYYY-MM-DD in the zone asked for) or a
// model, with its totals.
type UsageRow struct {
	Key                   string // the day or the model id
	TokensIn, TokensOut   int64
	Runs, Sessions, Turns int64
	UnreportedTurns       int64 // turns whose provider sent no usage (not in the token totals)
}

// UsageSummary totals turn_usage since from (zero: all), grouped by day in the local time whose
// UTC offset is offsetSeconds (days as YYYY-MM-DD) and by model, plus the grand total.
func (s *Store) UsageSummary(ctx context.Context, from time.Time, offsetSeconds int) (days, models []UsageRow, total UsageRow, err error) {
	q := func(ctx context.Context, c *pgxpool.Conn, key string) ([]UsageRow, error) {
		// $2 is the offset; every key mentions it so the statements' parameters are the same.
		rows, err := c.Query(ctx, `
			SELECT `+key+` AS k, coalesce(sum(input), 0)::bigint, coalesce(sum(output), 0)::bigint,
			       count(DISTINCT run_id), count(DISTINCT session_id), count(*), count(*) FILTER (WHERE NOT reported)
			  FROM turn_usage WHERE created_at >= $1 AND $2::int IS NOT NULL GROUP BY 1 ORDER BY 1`, from, offsetSeconds)
		if err != nil {
			return nil, err
		}
		return pgx.CollectRows(rows, func(r pgx.CollectableRow) (UsageRow, error) {
			var u UsageRow
			err := r.Scan(&u.Key, &u.TokensIn, &u.TokensOut, &u.Runs, &u.Sessions, &u.Turns, &u.UnreportedTurns)
			return u, err
		})
	}
	err = s.withConn(ctx, "usage summary", func(ctx context.Context, c *pgxpool.Conn) error {
		var err error
		if days, err = q(ctx, c, `to_char((created_at AT TIME ZONE 'UTC') + make_interval(secs => $2::int), 'YYYY-MM-DD')`); err != nil {
			return err
		}
		if models, err = q(ctx, c, `model_id`); err != nil {
			return err
		}
		all, err := q(ctx, c, `''`)
		if err != nil {
			return err
		}
		if len(all) == 1 {
			total = all[0]
		}
		return nil
	})
	return days, models, total, err
}

// SessionPage is one page of ListSessionsPage.
type SessionPage struct {
	Sessions []Session
	// Next is the cursor of the next page, "" on the last one.
	Next string
}

// ListSessionsPage lists archived or not archived sessions, most recently updated first, at most
// limit of them after cursor (a Next of an earlier page with the same archived; "" for the first
// page). ErrBadCursor for a cursor that is not one.
func (s *Store) ListSessionsPage(ctx context.Context, archived bool, limit int, cursor string) (SessionPage, error) {
	var at time.Time
	var after uuid.UUID
	useCursor := cursor != ""
	if useCursor {
		raw, err := base64.RawURLEncoding.DecodeString(cursor)
		parts := strings.Split(string(raw), "|")
		if err != nil || len(parts) != 3 || parts[2] != strconv.FormatBool(archived) {
			return SessionPage{}, ErrBadCursor
		}
		us, err1 := strconv.ParseInt(parts[0], 10, 64)
		id, err2 := uuid.Parse(parts[1])
		if err1 != nil || err2 != nil {
			return SessionPage{}, ErrBadCursor
		}
		at, after = time.UnixMicro(us), id
	}
	var page SessionPage
	err := s.withConn(ctx, "list sessions", func(ctx context.Context, c *pgxpool.Conn) error {
		rows, err := c.Query(ctx, `SELECT `+sessionCols+` FROM sessions
			WHERE archived = $1 AND (NOT $2 OR (date_trunc('microseconds', updated_at), id) < ($3, $4))
			ORDER BY date_trunc('microseconds', updated_at) DESC, id DESC LIMIT $5`, archived, useCursor, at, after, limit+1)
		if err != nil {
			return err
		}
		page.Sessions, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (Session, error) { return scanSession(r) })
		return err
	})
	if err != nil {
		return SessionPage{}, err
	}
	if len(page.Sessions) > limit {
		page.Sessions = page.Sessions[:limit]
		last := page.Sessions[limit-1]
		page.Next = base64.RawURLEncoding.EncodeToString([]byte(fmt.Sprintf("%d|%s|%t", last.UpdatedAt.UnixMicro(), last.ID, archived)))
	}
	return page, nil
}

// ErrBadCursor: a paging cursor that this store did not give out (or for another filter).
var ErrBadCursor = errors.New("store: not a valid cursor")

// SetSessionModel sets the session's model id ("" = the server's default). ErrNotFound when the
// session does not exist.
func (s *Store) SetSessionModel(ctx context.Context, id, model string) (Session, error) {
	return s.updateSession(ctx, "set session model", id, `model = $2`, model)
}

// SetSessionAgent sets the session's agent (a name agents.list answers). ErrNotFound when the
// session does not exist.
func (s *Store) SetSessionAgent(ctx context.Context, id, agentID string) (Session, error) {
	return s.updateSession(ctx, "set session agent", id, `agent_id = $2`, agentID)
}

// RenameSession sets the session's title and marks it as set by a person (a first prompt no
// longer names it). ErrNotFound when the session does not exist.
func (s *Store) RenameSession(ctx context.Context, id, title string) (Session, error) {
	return s.updateSession(ctx, "rename session", id, `title = $2, title_set = true`, title)
}

// ArchiveSession sets the session's archived flag. ErrNotFound when it does not exist.
func (s *Store) ArchiveSession(ctx context.Context, id string, archived bool) (Session, error) {
	return s.updateSession(ctx, "archive session", id, `archived = $2`, archived)
}

// DeleteSession removes the session and its transcript. ErrNotFound when it does not exist.
func (s *Store) DeleteSession(ctx context.Context, id string) error {
	u, err := parseID("delete session", id)
	if err != nil {
		return err
	}
	return s.withConn(ctx, "delete session", func(ctx context.Context, c *pgxpool.Conn) error {
		tag, err := c.Exec(ctx, `DELETE FROM sessions WHERE id = $1`, u)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return ErrNotFound
		}
		return nil
	})
}

func (s *Store) updateSession(ctx context.Context, op, id, set string, arg any, where ...string) (Session, error) {
	u, err := parseID(op, id)
	if err != nil {
		return Session{}, err
	}
	if str, ok := arg.(string); ok {
		if err := checkText("value", str); err != nil {
			return Session{}, fmt.Errorf("%s: %w", op, err)
		}
	}
	var out Session
	err = s.withConn(ctx, op, func(ctx context.Context, c *pgxpool.Conn) error {
		var err error
		out, err = scanSession(c.QueryRow(ctx, `UPDATE sessions SET `+set+`, updated_at = greatest(now(), updated_at)
			WHERE id = $1 `+strings.Join(where, " ")+` RETURNING `+sessionCols, u, arg))
		return err
	})
	return out, err
}

// StartRun writes a run's start (issue 10, "chat.send → run:start": the runtime publishes
// run:start while it is in flight, and chat.send answers after it): it appends rows (the run's
// prompt, after any rows of the session not written yet) and sets the session's status to
// "running", in one implicit transaction sent as one batch, and returns the session as stored. A server killed right after it leaves the session "running",
// which InterruptRunning ends at the next start (issue 8, "Crashes"). title (unless "") names a
// session that nothing named yet, in the same transaction: the first prompt stored names it,
// whatever order concurrent chat.send answers come in. Errors as AppendEvents (ErrNotFound for a
// session that does not exist; nothing is written then).
func (s *Store) StartRun(ctx context.Context, sessionID string, rows []EventRow, title string) (Session, error) {
	u, err := parseID("start run", sessionID)
	if err != nil {
		return Session{}, err
	}
	sess, turns, kinds, bodies, docs, err := eventArrays("start run", rows)
	if err != nil {
		return Session{}, err
	}
	if err := checkText("title", title); err != nil {
		return Session{}, fmt.Errorf("start run: %w", err)
	}
	var out Session
	err = s.withConn(ctx, "start run", func(ctx context.Context, c *pgxpool.Conn) error {
		// The statements of one batch run in one implicit transaction: the first error
		// aborts the rest and nothing is written.
		b := &pgx.Batch{}
		marked := 0
		if len(rows) > 0 {
			b.Queue(`SELECT append_events($1, $2, $3, $4, $5)`, sess, turns, kinds, bodies, docs)
			if ids, seqs, epochs := signalMarks(rows); len(ids) > 0 {
				b.Queue(signalMarkSQL, ids, seqs, epochs)
				marked = 1
			}
		}
		b.Queue(`UPDATE sessions SET status = 'running', updated_at = greatest(now(), updated_at),
			        title = CASE WHEN NOT title_set AND $2 <> '' THEN $2 ELSE title END,
			        title_set = title_set OR $2 <> ''
			  WHERE id = $1 RETURNING `+sessionCols, u, title)
		br := c.SendBatch(ctx, b)
		if len(rows) > 0 {
			var n int // append_events raises unless it appended every row
			if err := br.QueryRow().Scan(&n); err != nil {
				br.Close()
				return err
			}
		}
		for range marked {
			if _, err := br.Exec(); err != nil {
				br.Close()
				return err
			}
		}
		var err error
		out, err = scanSession(br.QueryRow())
		if cerr := br.Close(); err == nil {
			err = cerr
		}
		return err
	})
	return out, err
}

// SetStatus sets the session's status, bumps updated_at and returns the session as stored.
// ErrNotFound if the session does not exist; ErrInvalidText for bad text.
func (s *Store) SetStatus(ctx context.Context, id, status string) (Session, error) {
	return s.updateSession(ctx, "set session status", id, `status = $2`, status)
}
