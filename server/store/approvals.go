package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/zidane-server/zidane/server/oneline"
)

// Approval modes of a session (issue 9; schema approvals.json ApprovalMode).
const (
	ModeAsk      = "ask"
	ModeAutoEdit = "auto-edit"
	ModeLocked   = "locked"
)

// Audit actions (schema audit.json AuditAction).
const (
	AuditApproval       = "approval"
	AuditSafelistAdd    = "safelist.add"
	AuditSafelistRevoke = "safelist.revoke"
	AuditMode           = "mode"
	AuditTokenRevoke    = "token.revoke"
	// AuditCall is a call of a security-relevant method (x-audit in the schema), recorded by the
	// dispatcher whatever its outcome.
	AuditCall = "call"
)

// SafelistEntry is an always-allow entry of a project root.
type SafelistEntry struct {
	ID          string // UUID
	ProjectRoot string
	Tool        string
	Prefix      string // exec: "program subcommand"; "" for other tools
	CreatedAt   time.Time
	CreatedBy   string // the token name whose always stored it
}

// AuditEntry is one row of the audit log.
type AuditEntry struct {
	ID        int64
	At        time.Time
	Actor     string // token name, or "operator"
	Action    string // one of the Audit* constants
	SessionID string // "" when none
	Detail    string
}

// ApprovalMode returns the session's approval mode (ModeAsk when never set).
func (s *Store) ApprovalMode(ctx context.Context, sessionID string) (string, error) {
	id, err := parseID("approval mode", sessionID)
	if err != nil {
		return "", err
	}
	mode := ModeAsk
	err = s.withConn(ctx, "approval mode", func(ctx context.Context, c *pgxpool.Conn) error {
		err := c.QueryRow(ctx, `SELECT mode FROM approval_modes WHERE session_id = $1`, id).Scan(&mode)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		return err
	})
	return mode, err
}

// SetApprovalMode sets the session's mode and records it in the audit log as actor's, in one
// transaction. ErrNotFound when the session does not exist.
func (s *Store) SetApprovalMode(ctx context.Context, sessionID, mode, actor string) error {
	id, err := parseID("set approval mode", sessionID)
	if err != nil {
		return err
	}
	if err := checkText("actor", actor); err != nil {
		return fmt.Errorf("set approval mode: %w", err)
	}
	return s.withConn(ctx, "set approval mode", func(ctx context.Context, c *pgxpool.Conn) error {
		return pgx.BeginFunc(ctx, c, func(tx pgx.Tx) error {
			tag, err := tx.Exec(ctx, `
				INSERT INTO approval_modes (session_id, mode)
				SELECT id, $2 FROM sessions WHERE id = $1
				ON CONFLICT (session_id) DO UPDATE SET mode = EXCLUDED.mode, updated_at = now()`, id, mode)
			if err != nil {
				return err
			}
			if tag.RowsAffected() == 0 {
				return fmt.Errorf("%w: session %q", ErrNotFound, sessionID)
			}
			_, err = tx.Exec(ctx, `INSERT INTO audit_log (actor, action, session_id, detail) VALUES ($1, $2, $3, $4)`,
				actor, AuditMode, id, "mode "+mode)
			return err
		})
	})
}

const safelistCols = `id::text, project_root, tool, prefix, created_at, created_by`

func scanSafelist(row pgx.Row) (SafelistEntry, error) {
	var e SafelistEntry
	err := row.Scan(&e.ID, &e.ProjectRoot, &e.Tool, &e.Prefix, &e.CreatedAt, &e.CreatedBy)
	return e, err
}

// AddSafelist stores an entry (an existing equal entry is returned as it is) and records it in
// the audit log under sessionID ("" for none), in one transaction.
func (s *Store) AddSafelist(ctx context.Context, e SafelistEntry, sessionID string) (SafelistEntry, error) {
	for _, f := range []struct{ name, v string }{{"project_root", e.ProjectRoot}, {"tool", e.Tool}, {"prefix", e.Prefix}, {"created_by", e.CreatedBy}} {
		if err := checkText(f.name, f.v); err != nil {
			return SafelistEntry{}, fmt.Errorf("add safelist entry: %w", err)
		}
	}
	var out SafelistEntry
	err := s.withConn(ctx, "add safelist entry", func(ctx context.Context, c *pgxpool.Conn) error {
		return pgx.BeginFunc(ctx, c, func(tx pgx.Tx) error {
			var err error
			out, err = scanSafelist(tx.QueryRow(ctx, `
				INSERT INTO safelist (id, project_root, tool, prefix, created_by) VALUES ($1, $2, $3, $4, $5)
				ON CONFLICT (project_root, tool, prefix) DO UPDATE SET tool = EXCLUDED.tool
				RETURNING `+safelistCols, uuid.New(), e.ProjectRoot, e.Tool, e.Prefix, e.CreatedBy))
			if err != nil {
				return err
			}
			return audit(ctx, tx, e.CreatedBy, AuditSafelistAdd, sessionID, fmt.Sprintf("%s %s in %s", e.Tool, e.Prefix, e.ProjectRoot))
		})
	})
	return out, err
}

// ListSafelist returns the entries of projectRoot ("" = every root), newest first.
func (s *Store) ListSafelist(ctx context.Context, projectRoot string) ([]SafelistEntry, error) {
	var out []SafelistEntry
	err := s.withConn(ctx, "list safelist", func(ctx context.Context, c *pgxpool.Conn) error {
		rows, err := c.Query(ctx, `SELECT `+safelistCols+` FROM safelist WHERE $1 = '' OR project_root = $1 ORDER BY created_at DESC, id`, projectRoot)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (SafelistEntry, error) { return scanSafelist(r) })
		return err
	})
	return out, err
}

// RevokeSafelist removes the entry id and records it as actor's; it reports whether it existed.
func (s *Store) RevokeSafelist(ctx context.Context, id, actor string) (bool, error) {
	u, err := uuid.Parse(id)
	if err != nil {
		return false, nil
	}
	found := false
	err = s.withConn(ctx, "revoke safelist entry", func(ctx context.Context, c *pgxpool.Conn) error {
		return pgx.BeginFunc(ctx, c, func(tx pgx.Tx) error {
			e, err := scanSafelist(tx.QueryRow(ctx, `DELETE FROM safelist WHERE id = $1 RETURNING `+safelistCols, u))
			if errors.Is(err, pgx.ErrNoRows) {
				return nil
			}
			if err != nil {
				return err
			}
			found = true
			return audit(ctx, tx, actor, AuditSafelistRevoke, "", fmt.Sprintf("%s %s in %s", e.Tool, e.Prefix, e.ProjectRoot))
		})
	})
	return found, err
}

// AppendAudit records one audit entry; sessionID may be "".
func (s *Store) AppendAudit(ctx context.Context, actor, action, sessionID, detail string) error {
	if err := checkText("audit detail", detail); err != nil {
		return fmt.Errorf("append audit: %w", err)
	}
	if err := checkText("actor", actor); err != nil {
		return fmt.Errorf("append audit: %w", err)
	}
	return s.withConn(ctx, "append audit", func(ctx context.Context, c *pgxpool.Conn) error {
		return audit(ctx, c, actor, action, sessionID, detail)
	})
}

// execer is a connection or a transaction.
type execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// auditDetailMax is the length, in characters, an audit entry's detail is cut at.
const auditDetailMax = 2 * oneline.Max

// audit inserts one audit row through q (a connection or a transaction). The actor and the detail
// are stored as one line a person can trust (oneline.Cut): both are built from names and text a
// client or a model chose.
func audit(ctx context.Context, q execer, actor, action, sessionID, detail string) error {
	actor, detail = oneline.Line(actor), oneline.Cut(detail, auditDetailMax)
	var sid *uuid.UUID
	if u, err := uuid.Parse(sessionID); err == nil {
		sid = &u
	}
	_, err := q.Exec(ctx, `INSERT INTO audit_log (actor, action, session_id, detail) VALUES ($1, $2, $3, $4)`, actor, action, sid, detail)
	return err
}

// ListAudit returns at most limit entries (newest first) with id < before (0 = no bound), of
// sessionID ("" = all).
func (s *Store) ListAudit(ctx context.Context, limit int, before int64, sessionID string) ([]AuditEntry, error) {
	var sid *uuid.UUID
	if sessionID != "" {
		u, err := uuid.Parse(sessionID)
		if err != nil {
			return nil, nil
		}
		sid = &u
	}
	var out []AuditEntry
	err := s.withConn(ctx, "list audit", func(ctx context.Context, c *pgxpool.Conn) error {
		rows, err := c.Query(ctx, `
			SELECT id, at, actor, action, COALESCE(session_id::text, ''), detail FROM audit_log
			WHERE ($1 = 0 OR id < $1) AND ($2::uuid IS NULL OR session_id = $2)
			ORDER BY id DESC LIMIT $3`, before, sid, limit)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (AuditEntry, error) {
			var e AuditEntry
			err := r.Scan(&e.ID, &e.At, &e.Actor, &e.Action, &e.SessionID, &e.Detail)
			return e, err
		})
		return err
	})
	return out, err
}

// SessionPlan returns the session's stored plan (JSON as it was set) and when it changed; nil
// when it has none.
func (s *Store) SessionPlan(ctx context.Context, sessionID string) (json.RawMessage, time.Time, error) {
	id, err := parseID("session plan", sessionID)
	if err != nil {
		return nil, time.Time{}, err
	}
	var plan json.RawMessage
	var at time.Time
	err = s.withConn(ctx, "session plan", func(ctx context.Context, c *pgxpool.Conn) error {
		err := c.QueryRow(ctx, `SELECT plan, updated_at FROM session_plans WHERE session_id = $1`, id).Scan(&plan, &at)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		return err
	})
	return plan, at, err
}

// SetSessionPlan replaces the session's plan (any JSON value) and returns when it was written.
// ErrNotFound when the session does not exist.
func (s *Store) SetSessionPlan(ctx context.Context, sessionID string, plan json.RawMessage) (time.Time, error) {
	id, err := parseID("set session plan", sessionID)
	if err != nil {
		return time.Time{}, err
	}
	var at time.Time
	err = s.withConn(ctx, "set session plan", func(ctx context.Context, c *pgxpool.Conn) error {
		err := c.QueryRow(ctx, `
			INSERT INTO session_plans (session_id, plan) SELECT id, $2 FROM sessions WHERE id = $1
			ON CONFLICT (session_id) DO UPDATE SET plan = EXCLUDED.plan, updated_at = now()
			RETURNING updated_at`, id, plan).Scan(&at)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("%w: session %q", ErrNotFound, sessionID)
		}
		return err
	})
	return at, err
}
