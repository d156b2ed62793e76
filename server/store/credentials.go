package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Credential is one row of the credential store (migration 00060): Sealed is ciphertext made by
// server/credstore (this package never sees a secret in clear), Meta its non-secret description
// as JSON.
type Credential struct {
	Kind, Key string
	Sealed    []byte
	Meta      json.RawMessage
	UpdatedAt time.Time
}

// PutCredential inserts or replaces the credential (Kind, Key). Errors: ErrInvalidText for a kind
// or key that is not storable text, ErrBusy, ErrUnavailable.
func (s *Store) PutCredential(ctx context.Context, c Credential) error {
	if err := checkText("credential kind", c.Kind); err != nil {
		return err
	}
	if err := checkText("credential key", c.Key); err != nil {
		return err
	}
	meta := c.Meta
	if len(meta) == 0 {
		meta = json.RawMessage("{}")
	}
	return s.withConn(ctx, "put credential", func(ctx context.Context, conn *pgxpool.Conn) error {
		_, err := conn.Exec(ctx, `INSERT INTO credentials (kind, key, sealed, meta) VALUES ($1, $2, $3, $4)
			ON CONFLICT (kind, key) DO UPDATE SET sealed = EXCLUDED.sealed, meta = EXCLUDED.meta, updated_at = now()`,
			c.Kind, c.Key, c.Sealed, string(meta))
		return err
	})
}

// GetCredential returns the credential (kind, key); ErrNotFound when there is none.
func (s *Store) GetCredential(ctx context.Context, kind, key string) (Credential, error) {
	c := Credential{Kind: kind, Key: key}
	if checkText("k", kind) != nil || checkText("k", key) != nil {
		return c, fmt.Errorf("get credential: %w", ErrNotFound)
	}
	err := s.withConn(ctx, "get credential", func(ctx context.Context, conn *pgxpool.Conn) error {
		var meta string
		err := conn.QueryRow(ctx, `SELECT sealed, meta::text, updated_at FROM credentials WHERE kind = $1 AND key = $2`, kind, key).
			Scan(&c.Sealed, &meta, &c.UpdatedAt)
		c.Meta = json.RawMessage(meta)
		return err
	})
	return c, err
}

// ListCredentials returns every credential of kind ("" for every kind), sorted by kind and key,
// without their sealed values.
func (s *Store) ListCredentials(ctx context.Context, kind string) ([]Credential, error) {
	var out []Credential
	err := s.withConn(ctx, "list credentials", func(ctx context.Context, conn *pgxpool.Conn) error {
		rows, err := conn.Query(ctx, `SELECT kind, key, meta::text, updated_at FROM credentials
			WHERE $1 = '' OR kind = $1 ORDER BY kind, key`, kind)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (Credential, error) {
			var c Credential
			var meta string
			err := r.Scan(&c.Kind, &c.Key, &meta, &c.UpdatedAt)
			c.Meta = json.RawMessage(meta)
			return c, err
		})
		return err
	})
	return out, err
}

// DeleteCredential drops (kind, key) and reports whether there was one.
func (s *Store) DeleteCredential(ctx context.Context, kind, key string) (bool, error) {
	var n int64
	err := s.withConn(ctx, "delete credential", func(ctx context.Context, conn *pgxpool.Conn) error {
		tag, err := conn.Exec(ctx, `DELETE FROM credentials WHERE kind = $1 AND key = $2`, kind, key)
		n = tag.RowsAffected()
		return err
	})
	return n > 0, err
}

// DeleteAllCredentials drops every credential and returns how many there were.
func (s *Store) DeleteAllCredentials(ctx context.Context) (int, error) {
	var n int64
	err := s.withConn(ctx, "delete credentials", func(ctx context.Context, conn *pgxpool.Conn) error {
		tag, err := conn.Exec(ctx, `DELETE FROM credentials`)
		n = tag.RowsAffected()
		return err
	})
	return int(n), err
}
