package store

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
)

// jsonText is s as a JSON string, `<`, `>` and `&` as themselves (as protocol.Marshal writes
// them, B36); \u0000 survives in TEXT.
func jsonText(s string) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	return strings.TrimSuffix(b.String(), "\n")
}

// Draft is a session's unsent composer text (seed "drafts").
type Draft struct {
	SessionID string
	Text      string // any Unicode, NUL included
	UpdatedAt time.Time
}

// SaveDrafts upserts drafts in one statement; an empty Text deletes the session's draft. Drafts of
// sessions that no longer exist are skipped (a session deleted while its draft waited to be
// written), never an error. Malformed session ids are ErrNotFound.
func (s *Store) SaveDrafts(ctx context.Context, ds []Draft) error {
	if len(ds) == 0 {
		return nil
	}
	ids := make([]uuid.UUID, len(ds))
	texts := make([]string, len(ds))
	times := make([]time.Time, len(ds))
	for i, d := range ds {
		u, err := parseID("save drafts", d.SessionID)
		if err != nil {
			return err
		}
		ids[i], texts[i], times[i] = u, jsonText(d.Text), d.UpdatedAt
	}
	return s.withConn(ctx, "save drafts", func(ctx context.Context, c *pgxpool.Conn) error {
		_, err := c.Exec(ctx, `
			WITH d AS (SELECT * FROM unnest($1::uuid[], $2::text[], $3::timestamptz[]) AS d(session_id, text_json, updated_at)),
			     del AS (DELETE FROM drafts WHERE session_id IN (SELECT session_id FROM d WHERE text_json = '""'))
			INSERT INTO drafts (session_id, text_json, updated_at)
			SELECT d.session_id, d.text_json, d.updated_at FROM d JOIN sessions s ON s.id = d.session_id
			 WHERE d.text_json <> '""'
			ON CONFLICT (session_id) DO UPDATE SET text_json = EXCLUDED.text_json, updated_at = EXCLUDED.updated_at`,
			ids, texts, times)
		return err
	})
}

// GetDraft returns a session's draft; a session without one has Text "" and a zero UpdatedAt.
func (s *Store) GetDraft(ctx context.Context, sessionID string) (Draft, error) {
	u, err := parseID("get draft", sessionID)
	if err != nil {
		return Draft{}, err
	}
	d := Draft{SessionID: sessionID}
	err = s.withConn(ctx, "get draft", func(ctx context.Context, c *pgxpool.Conn) error {
		var tj string
		rows, err := c.Query(ctx, `SELECT text_json, updated_at FROM drafts WHERE session_id = $1`, u)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			if err := rows.Scan(&tj, &d.UpdatedAt); err != nil {
				return err
			}
			if err := json.Unmarshal([]byte(tj), &d.Text); err != nil {
				return fmt.Errorf("draft of %s: %w", sessionID, err)
			}
		}
		return rows.Err()
	})
	return d, err
}

// State returns every key of a client-state namespace with its JSON value.
func (s *Store) State(ctx context.Context, ns string) (map[string]json.RawMessage, error) {
	out := map[string]json.RawMessage{}
	err := s.withConn(ctx, "read state", func(ctx context.Context, c *pgxpool.Conn) error {
		rows, err := c.Query(ctx, `SELECT key, value FROM client_state WHERE ns = $1 ORDER BY key`, ns)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var k, v string
			if err := rows.Scan(&k, &v); err != nil {
				return err
			}
			out[k] = json.RawMessage(v)
		}
		return rows.Err()
	})
	return out, err
}

// SetState sets (or, with a nil value, deletes) keys of a namespace in one transaction. value must
// be valid JSON; key must be valid UTF-8 without NUL (ErrInvalidText). With max > 0, a new key that
// would make the namespace hold more than max keys is refused with ErrLimit and nothing is written;
// with maxBytes > 0, a write that leaves the namespace's values longer than maxBytes bytes in all is
// refused with ErrLimitBytes (so one answer can carry the whole namespace).
func (s *Store) SetState(ctx context.Context, ns string, kv map[string]json.RawMessage, max, maxBytes int) error {
	for k := range kv {
		if err := checkText("key", k); err != nil {
			return fmt.Errorf("set state: %w", err)
		}
	}
	return s.withConn(ctx, "set state", func(ctx context.Context, c *pgxpool.Conn) error {
		tx, err := c.Begin(ctx)
		if err != nil {
			return err
		}
		defer tx.Rollback(ctx) //nolint:errcheck // committed below
		// Serialise writers of one namespace, so the count below stays true until commit.
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('client_state:' || $1))`, ns); err != nil {
			return err
		}
		for k, v := range kv {
			if v == nil {
				if _, err := tx.Exec(ctx, `DELETE FROM client_state WHERE ns = $1 AND key = $2`, ns, k); err != nil {
					return err
				}
				continue
			}
			if _, err := tx.Exec(ctx, `
				INSERT INTO client_state (ns, key, value) VALUES ($1, $2, $3)
				ON CONFLICT (ns, key) DO UPDATE SET value = EXCLUDED.value, updated_at = now()`, ns, k, string(v)); err != nil {
				return err
			}
		}
		if max > 0 {
			var n int
			if err := tx.QueryRow(ctx, `SELECT count(*) FROM client_state WHERE ns = $1`, ns).Scan(&n); err != nil {
				return err
			}
			if n > max {
				return fmt.Errorf("%w: %s holds at most %d keys", ErrLimit, ns, max)
			}
		}
		if maxBytes > 0 {
			var n int64
			if err := tx.QueryRow(ctx, `SELECT coalesce(sum(octet_length(key) + octet_length(value)), 0) FROM client_state WHERE ns = $1`, ns).Scan(&n); err != nil {
				return err
			}
			if n > int64(maxBytes) {
				return fmt.Errorf("%w: %s holds at most %d bytes", ErrLimitBytes, ns, maxBytes)
			}
		}
		return tx.Commit(ctx)
	})
}
