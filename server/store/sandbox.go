package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
)

// SessionSandbox returns the sandbox policy an admin set for the session, or "" when none was
// set (the server's default applies). ErrNotFound when the session does not exist.
func (s *Store) SessionSandbox(ctx context.Context, id string) (string, error) {
	u, err := parseID("get session sandbox", id)
	if err != nil {
		return "", err
	}
	var policy *string
	err = s.withConn(ctx, "get session sandbox", func(ctx context.Context, c *pgxpool.Conn) error {
		return c.QueryRow(ctx, `SELECT p.policy FROM sessions s LEFT JOIN session_sandbox p ON p.session_id = s.id WHERE s.id = $1`, u).Scan(&policy)
	})
	if err != nil || policy == nil {
		return "", err
	}
	return *policy, nil
}

// SetSessionSandbox stores the session's sandbox policy; "" removes it (back to the server's
// default). ErrNotFound when the session does not exist; ErrInvalidText for bad text.
func (s *Store) SetSessionSandbox(ctx context.Context, id, policy string) error {
	u, err := parseID("set session sandbox", id)
	if err != nil {
		return err
	}
	if err := checkText("policy", policy); err != nil {
		return fmt.Errorf("set session sandbox: %w", err)
	}
	return s.withConn(ctx, "set session sandbox", func(ctx context.Context, c *pgxpool.Conn) error {
		var exists bool
		if err := c.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM sessions WHERE id = $1)`, u).Scan(&exists); err != nil {
			return err
		}
		if !exists {
			return ErrNotFound
		}
		if policy == "" {
			_, err := c.Exec(ctx, `DELETE FROM session_sandbox WHERE session_id = $1`, u)
			return err
		}
		_, err := c.Exec(ctx, `INSERT INTO session_sandbox (session_id, policy) VALUES ($1, $2)
			ON CONFLICT (session_id) DO UPDATE SET policy = EXCLUDED.policy, updated_at = now()`, u, policy)
		return err
	})
}
