package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Session is a chat/agent session's metadata.
type Session struct {
	ID          string // UUID; CreateSession generates it when empty
	Title       string
	ProjectRoot string // absolute path of the project
	Cwd         string // working directory
	AgentID     string
	Status      string    // free-form status, e.g. "idle", "running"
	CreatedAt   time.Time // CreateSession sets now when zero
	UpdatedAt   time.Time // bumped by SetSessionStatus and AppendEvents
	Archived    bool
	Model       string // "provider/model"; "" means the server's default
	TitleSet    bool   // the title was set (renamed, or named by the first prompt)
	// Version counts the row's writes (0 when created): of two snapshots of a session, the one
	// with the larger Version is the later (migration 00050).
	Version int64
	// ForkedFrom is the session this one was forked from (history.fork); "" when none.
	ForkedFrom string
	// ParentSessionID and ParentRunID name, for a subagent's child session, the session and run
	// whose task call created it ("" for a root session; migration 00090).
	ParentSessionID, ParentRunID string
}

const sessionCols = `id::text, title, project_root, cwd, agent_id, status, created_at, updated_at, archived, model, title_set, version, coalesce(forked_from::text, ''), coalesce(parent_session_id::text, ''), coalesce(parent_run_id::text, '')`

func scanSession(row pgx.Row) (Session, error) {
	var x Session
	err := row.Scan(x.dests()...)
	return x, err
}

// dests are the scan destinations of sessionCols, in its order (a query selecting sessionCols
// and more appends its own).
func (x *Session) dests() []any {
	return []any{&x.ID, &x.Title, &x.ProjectRoot, &x.Cwd, &x.AgentID, &x.Status, &x.CreatedAt, &x.UpdatedAt, &x.Archived, &x.Model, &x.TitleSet, &x.Version, &x.ForkedFrom, &x.ParentSessionID, &x.ParentRunID}
}

// parseID parses a session id; malformed ids are reported as ErrNotFound. Only the canonical
// spelling (lowercase, hyphenated, as the server hands ids out) names a session: the server keys
// its in-memory state (running runs, the replay log, $seq, the session cache) by the id string,
// so an uppercase or urn:uuid: spelling that Postgres would accept must not reach a row that
// state does not know by that name.
func parseID(op, id string) (uuid.UUID, error) {
	u, err := uuid.Parse(id)
	if err == nil && u.String() != id {
		err = errors.New("not the canonical spelling")
	}
	if err != nil {
		return uuid.UUID{}, fmt.Errorf("%s: %w: session %q", op, ErrNotFound, id)
	}
	return u, nil
}

// CreateSession inserts s and returns it as stored. Empty ID gets a new
// UUID; zero CreatedAt/UpdatedAt get the current time. Errors:
// ErrInvalidText (field named), a malformed or duplicate ID.
func (s *Store) CreateSession(ctx context.Context, x Session) (Session, error) {
	for _, f := range []struct{ name, v string }{
		{"title", x.Title}, {"project_root", x.ProjectRoot}, {"cwd", x.Cwd},
		{"agent_id", x.AgentID}, {"status", x.Status}, {"model", x.Model},
	} {
		if err := checkText(f.name, f.v); err != nil {
			return Session{}, fmt.Errorf("create session: %w", err)
		}
	}
	id := uuid.New()
	if x.ID != "" {
		var err error
		if id, err = uuid.Parse(x.ID); err != nil {
			return Session{}, fmt.Errorf("create session: invalid id %q: %w", x.ID, err)
		}
	}
	now := time.Now()
	if x.CreatedAt.IsZero() {
		x.CreatedAt = now
	}
	if x.UpdatedAt.IsZero() {
		x.UpdatedAt = x.CreatedAt
	}
	var out Session
	err := s.withConn(ctx, "create session", func(ctx context.Context, c *pgxpool.Conn) error {
		var err error
		out, err = scanSession(c.QueryRow(ctx, `
			INSERT INTO sessions (id, title, project_root, cwd, agent_id, status, created_at, updated_at, archived, model, title_set, parent_session_id, parent_run_id)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, NULLIF($12, '')::uuid, NULLIF($13, '')::uuid)
			RETURNING `+sessionCols,
			id, x.Title, x.ProjectRoot, x.Cwd, x.AgentID, x.Status, x.CreatedAt, x.UpdatedAt, x.Archived, x.Model, x.TitleSet, x.ParentSessionID, x.ParentRunID))
		return err
	})
	return out, err
}

// ListChildren returns the child sessions of parentID (subagents' sessions), oldest first.
func (s *Store) ListChildren(ctx context.Context, parentID string) ([]Session, error) {
	u, err := parseID("list children", parentID)
	if err != nil {
		return nil, err
	}
	var out []Session
	err = s.withConn(ctx, "list children", func(ctx context.Context, c *pgxpool.Conn) error {
		rows, err := c.Query(ctx, `SELECT `+sessionCols+` FROM sessions WHERE parent_session_id = $1 ORDER BY created_at, id`, u)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (Session, error) { return scanSession(r) })
		return err
	})
	return out, err
}

// GetSession returns the session with the given id; ErrNotFound if there is
// none or id is not a UUID.
func (s *Store) GetSession(ctx context.Context, id string) (Session, error) {
	u, err := parseID("get session", id)
	if err != nil {
		return Session{}, err
	}
	var out Session
	err = s.withConn(ctx, "get session", func(ctx context.Context, c *pgxpool.Conn) error {
		var err error
		out, err = scanSession(c.QueryRow(ctx, `SELECT `+sessionCols+` FROM sessions WHERE id = $1`, u))
		return err
	})
	return out, err
}

// ListSessions returns all sessions, most recently updated first.
func (s *Store) ListSessions(ctx context.Context) ([]Session, error) {
	var out []Session
	err := s.withConn(ctx, "list sessions", func(ctx context.Context, c *pgxpool.Conn) error {
		rows, err := c.Query(ctx, `SELECT `+sessionCols+` FROM sessions ORDER BY updated_at DESC, id`)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (Session, error) { return scanSession(r) })
		return err
	})
	return out, err
}

// SetSessionStatus sets the session's status and bumps updated_at.
// ErrNotFound if the session does not exist; ErrInvalidText for bad text.
func (s *Store) SetSessionStatus(ctx context.Context, id, status string) error {
	u, err := parseID("set session status", id)
	if err != nil {
		return err
	}
	if err := checkText("status", status); err != nil {
		return fmt.Errorf("set session status: %w", err)
	}
	return s.withConn(ctx, "set session status", func(ctx context.Context, c *pgxpool.Conn) error {
		tag, err := c.Exec(ctx, `UPDATE sessions SET status = $2, updated_at = greatest(now(), updated_at) WHERE id = $1`, u, status)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return ErrNotFound
		}
		return nil
	})
}

// ResetRunningSessions marks every session still "running" as "idle" and returns how many there
// were: a server that starts has no runs, so such a status is left over from a crash.
func (s *Store) ResetRunningSessions(ctx context.Context) (int, error) {
	var n int64
	err := s.withConn(ctx, "reset running sessions", func(ctx context.Context, c *pgxpool.Conn) error {
		tag, err := c.Exec(ctx, `UPDATE sessions SET status = 'idle' WHERE status = 'running'`)
		n = tag.RowsAffected()
		return err
	})
	return int(n), err
}
