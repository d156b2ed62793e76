package store

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// TokenPrefix starts every plaintext API token.
const TokenPrefix = "zds_"

// Token scopes accepted by CreateToken.
const (
	ScopeChat    = "chat"
	ScopeAdmin   = "admin"
	ScopeMachine = "machine"
)

// Token is an API token's metadata; the plaintext is never stored.
type Token struct {
	ID         string // UUID
	Name       string // unique among live tokens
	Scope      string // ScopeChat, ScopeAdmin or ScopeMachine
	CreatedAt  time.Time
	LastUsedAt *time.Time // nil if never used; updated at most once a minute
	RevokedAt  *time.Time // nil while live
	// ExpiresAt is when the token stops working (a paired token of `pair --ttl-token`); nil for
	// one that lasts until revoked. Past it the token is refused like a revoked one.
	ExpiresAt *time.Time
}

// Live reports whether t is neither revoked nor expired at now.
func (t Token) Live(now time.Time) bool {
	return t.RevokedAt == nil && (t.ExpiresAt == nil || now.Before(*t.ExpiresAt))
}

const tokenCols = `id::text, name, scope, created_at, last_used_at, revoked_at, expires_at`

// liveToken is the SQL condition of a live token: not revoked, not expired.
const liveToken = `revoked_at IS NULL AND (expires_at IS NULL OR expires_at > now())`

func scanToken(row pgx.Row) (Token, error) {
	var t Token
	err := row.Scan(&t.ID, &t.Name, &t.Scope, &t.CreatedAt, &t.LastUsedAt, &t.RevokedAt, &t.ExpiresAt)
	return t, err
}

// encodeToken is base64url without padding: valid in a WebSocket subprotocol (RFC 7230 token).
func encodeToken(raw []byte) string { return base64.RawURLEncoding.EncodeToString(raw) }

func hashToken(plaintext string) []byte {
	h := sha256.Sum256([]byte(plaintext))
	return h[:]
}

// CreateToken creates a token and returns its plaintext ("zds_" followed by
// 43 base64url characters encoding 32 random bytes) — shown once, only its
// SHA-256 is stored. Errors: ErrNameTaken if a live token has that name,
// ErrInvalidScope, ErrInvalidText, or an error for an empty name.
func (s *Store) CreateToken(ctx context.Context, name, scope string) (string, Token, error) {
	if name == "" {
		return "", Token{}, errors.New("create token: empty name")
	}
	if err := checkText("token name", name); err != nil {
		return "", Token{}, fmt.Errorf("create token: %w", err)
	}
	switch scope {
	case ScopeChat, ScopeAdmin, ScopeMachine:
	default:
		return "", Token{}, fmt.Errorf("create token: %w %q (want chat, admin or machine)", ErrInvalidScope, scope)
	}
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", Token{}, fmt.Errorf("create token: %w", err)
	}
	plaintext := TokenPrefix + encodeToken(raw[:])
	var t Token
	err := s.withConn(ctx, "create token", func(ctx context.Context, c *pgxpool.Conn) error {
		var err error
		t, err = scanToken(c.QueryRow(ctx,
			`INSERT INTO tokens (id, name, scope, hash) VALUES ($1, $2, $3, $4) RETURNING `+tokenCols,
			uuid.New(), name, scope, hashToken(plaintext)))
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == "23505" && pe.ConstraintName == "tokens_live_name_key" {
			return fmt.Errorf("%w: %q", ErrNameTaken, name)
		}
		return err
	})
	if err != nil {
		return "", Token{}, err
	}
	return plaintext, t, nil
}

// LookupToken returns the live token whose plaintext is given. Unknown,
// malformed, revoked or expired tokens give ErrNotFound. It records last_used_at (at
// most one write per token per minute).
func (s *Store) LookupToken(ctx context.Context, plaintext string) (Token, error) {
	if !strings.HasPrefix(plaintext, TokenPrefix) {
		return Token{}, fmt.Errorf("lookup token: %w", ErrNotFound)
	}
	want := hashToken(plaintext)
	var t Token
	err := s.withConn(ctx, "lookup token", func(ctx context.Context, c *pgxpool.Conn) error {
		var hash []byte
		err := c.QueryRow(ctx, `
			WITH t AS (
				SELECT * FROM tokens WHERE hash = $1 AND `+liveToken+`
			), u AS (
				UPDATE tokens SET last_used_at = now()
				 WHERE id IN (SELECT id FROM t)
				   AND (last_used_at IS NULL OR last_used_at < now() - interval '1 minute')
				RETURNING id, last_used_at
			)
			SELECT t.hash, t.id::text, t.name, t.scope, t.created_at,
			       coalesce(u.last_used_at, t.last_used_at), t.revoked_at, t.expires_at
			  FROM t LEFT JOIN u ON u.id = t.id`, want).
			Scan(&hash, &t.ID, &t.Name, &t.Scope, &t.CreatedAt, &t.LastUsedAt, &t.RevokedAt, &t.ExpiresAt)
		if err != nil {
			return err
		}
		if subtle.ConstantTimeCompare(hash, want) != 1 {
			return ErrNotFound
		}
		return nil
	})
	if err != nil {
		return Token{}, err
	}
	return t, nil
}

// ListTokens returns all tokens, live and revoked, oldest first.
func (s *Store) ListTokens(ctx context.Context) ([]Token, error) {
	var out []Token
	err := s.withConn(ctx, "list tokens", func(ctx context.Context, c *pgxpool.Conn) error {
		rows, err := c.Query(ctx, `SELECT `+tokenCols+` FROM tokens ORDER BY created_at, id`)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (Token, error) { return scanToken(r) })
		return err
	})
	return out, err
}

// RevokeToken revokes the live token called name and returns it (RevokedAt
// set), recorded in the audit log as the operator's. ErrNotFound if no live token has that name.
func (s *Store) RevokeToken(ctx context.Context, name string) (Token, error) {
	return s.RevokeTokenBy(ctx, name, "operator")
}

// RevokeTokenBy is RevokeToken recorded in the audit log as actor's (a token name).
func (s *Store) RevokeTokenBy(ctx context.Context, name, actor string) (Token, error) {
	if err := checkText("token name", name); err != nil {
		return Token{}, fmt.Errorf("revoke token: %w", err)
	}
	return s.revoke(ctx, "name = $1", name, actor)
}

// RevokeTokenID revokes the live token whose id is given (a UUID), recorded in the audit log as
// actor's: how tokens.revokeSelf signs a connection's own token out. ErrNotFound if no live token
// has that id.
func (s *Store) RevokeTokenID(ctx context.Context, id, actor string) (Token, error) {
	u, err := uuid.Parse(id)
	if err != nil {
		return Token{}, fmt.Errorf("revoke token: %w", ErrNotFound)
	}
	return s.revoke(ctx, "id = $1", u, actor)
}

// RevokeTokenSecret revokes the live token whose plaintext is given, recorded in the audit log as
// actor's, without counting as a use of it (LookupToken would set last_used_at): how a server's
// start revokes the token of a stale daemon.json. ErrNotFound if no live token has it.
func (s *Store) RevokeTokenSecret(ctx context.Context, plaintext, actor string) (Token, error) {
	if !strings.HasPrefix(plaintext, TokenPrefix) {
		return Token{}, fmt.Errorf("revoke token: %w", ErrNotFound)
	}
	return s.revoke(ctx, "hash = $1", hashToken(plaintext), actor)
}

// revoke revokes the live token that where (a condition on $1 = arg) picks.
func (s *Store) revoke(ctx context.Context, where string, arg any, actor string) (Token, error) {
	var t Token
	err := s.withConn(ctx, "revoke token", func(ctx context.Context, c *pgxpool.Conn) error {
		var err error
		t, err = scanToken(c.QueryRow(ctx,
			`UPDATE tokens SET revoked_at = now() WHERE `+where+` AND revoked_at IS NULL RETURNING `+tokenCols, arg))
		if err != nil {
			return err
		}
		if err := audit(ctx, c, actor, AuditTokenRevoke, "", "token "+t.Name+" ("+t.Scope+")"); err != nil {
			return err
		}
		// Tell running servers, so they close the token's connections (ListenTokenRevocations).
		_, err = c.Exec(ctx, `SELECT pg_notify($1, $2)`, revokeChannel, t.ID)
		return err
	})
	return t, err
}

const revokeChannel = "zidane_token_revoked"

// RevokedAmong returns those of ids (token ids) that are revoked, expired or no longer exist.
func (s *Store) RevokedAmong(ctx context.Context, ids []string) ([]string, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	var live []string
	err := s.withConn(ctx, "check tokens", func(ctx context.Context, c *pgxpool.Conn) error {
		rows, err := c.Query(ctx, `SELECT id::text FROM tokens WHERE id::text = ANY($1) AND `+liveToken, ids)
		if err != nil {
			return err
		}
		live, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err
	})
	if err != nil {
		return nil, err
	}
	alive := map[string]bool{}
	for _, id := range live {
		alive[id] = true
	}
	var out []string
	for _, id := range ids {
		if !alive[id] {
			out = append(out, id)
		}
	}
	return out, nil
}

// ListenTokenRevocations calls fn with the id of every token revoked by any process (the
// `zidane-server token revoke` command included), until ctx ends. It holds one pooled connection
// with LISTEN and reconnects after a failure, waiting retry between attempts.
//
// onListen, when set, runs after every (re)LISTEN: NOTIFY is fire-and-forget, so a caller re-reads
// there what it may have missed while the listener was down (field case B32).
//
// While the database is away the warning "token revocation listener stopped; retrying" is logged
// at once and then at most every ListenWarnEvery (with the failed attempts since the last line;
// each attempt is a debug line), and one info line says when it listens again (field case T13).
func (s *Store) ListenTokenRevocations(ctx context.Context, retry time.Duration, fn func(tokenID string), onListen func()) {
	s.Listen(ctx, retry, map[string]func(string){revokeChannel: fn}, onListen)
}

// Listen is ListenTokenRevocations for several channels on one connection: fns maps a channel
// (TokenRevokedChannel, ReplicaCallChannel, ...) to the function called with each of its
// payloads, in the order they arrive. onListen and the log lines are ListenTokenRevocations'.
func (s *Store) Listen(ctx context.Context, retry time.Duration, fns map[string]func(payload string), onListen func()) {
	var lim warnLimit
	listening := func() {
		if n, since, ok := lim.ok(); ok {
			s.log.Info("store: token revocation listener listens again", "failed_attempts", n, "down", time.Since(since).Round(time.Second))
		}
		if onListen != nil {
			go onListen()
		}
	}
	for ctx.Err() == nil {
		err := s.listenOnce(ctx, fns, listening)
		if ctx.Err() != nil {
			return
		}
		if n, warn := lim.fail(time.Now()); warn {
			s.log.Warn("store: token revocation listener stopped; retrying", "every", retry, "failed_attempts", n, "err", err)
		} else {
			s.log.Debug("store: token revocation listener: retry failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(retry):
		}
	}
}

// ListenWarnEvery is the least time between two warnings of the token revocation listener while
// it cannot listen.
const ListenWarnEvery = time.Minute

// warnLimit rate-limits a recurring warning: the first failure warns at once, later ones at most
// every ListenWarnEvery (a listener that reconnects and drops again counts as still failing).
type warnLimit struct {
	lastWarn time.Time // of the last warning; zero before the first
	held     int       // failures since the last warning
	outage   int       // failures since the last success
	failing  bool      // a warning was logged and ok has not been called since
	since    time.Time // when the outage that warned began
}

// fail records a failure at now; warn says whether to log it, with n the failures it stands for
// (itself and those held back since the last warning).
func (l *warnLimit) fail(now time.Time) (n int, warn bool) {
	if l.outage == 0 {
		l.since = now
	}
	l.held++
	l.outage++
	if !l.lastWarn.IsZero() && now.Sub(l.lastWarn) < ListenWarnEvery {
		return 0, false
	}
	l.failing = true
	n, l.held, l.lastWarn = l.held, 0, now
	return n, true
}

// ok records a success; when a warning was logged since the last success it returns the failures
// of that outage and when it began, with ok true.
func (l *warnLimit) ok() (n int, since time.Time, ok bool) {
	n, since, ok = l.outage, l.since, l.failing
	l.failing, l.outage = false, 0
	return n, since, ok
}

func (s *Store) listenOnce(ctx context.Context, fns map[string]func(string), listening func()) error {
	c, err := s.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer c.Release()
	for ch := range fns {
		if _, err := c.Exec(ctx, "LISTEN "+pgx.Identifier{ch}.Sanitize()); err != nil {
			return err
		}
	}
	listening()
	for {
		n, err := c.Conn().WaitForNotification(ctx)
		if err != nil {
			// The connection may be mid-wait; do not hand it back to the pool.
			c.Conn().Close(context.Background())
			return err
		}
		if fn := fns[n.Channel]; fn != nil {
			fn(n.Payload)
		}
	}
}
