package store

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// pairAlphabet has no 0/O, 1/I/L or U: codes are read aloud and typed by hand.
const pairAlphabet = "ABCDEFGHJKMNPQRSTVWXYZ23456789"

// PairCodeLength is the number of characters of a pairing code (shown as XXXX-XXXX, ~39 bits).
const PairCodeLength = 8

// NormalizePairCode upper-cases a typed code and drops spaces and dashes.
func NormalizePairCode(code string) string {
	var b strings.Builder
	for _, r := range strings.ToUpper(code) {
		if r != '-' && r != ' ' {
			b.WriteRune(r)
		}
	}
	return b.String()
}

func hashPairCode(code string) []byte {
	h := sha256.Sum256([]byte("zidane-pair:" + NormalizePairCode(code)))
	return h[:]
}

// MaxTokenTTL bounds the life a pairing code may give its token (pair --ttl-token): 10 years.
const MaxTokenTTL = 10 * 365 * 24 * time.Hour

// CreatePairingCode stores a single-use code for a token of scope that expires after ttl, and
// returns it formatted XXXX-XXXX (shown once; only its hash is stored). tokenTTL, when not 0, is
// the life of the token it trades for, counted from the trade (1 s to MaxTokenTTL).
func (s *Store) CreatePairingCode(ctx context.Context, scope string, ttl, tokenTTL time.Duration) (string, time.Time, error) {
	switch scope {
	case ScopeChat, ScopeAdmin, ScopeMachine:
	default:
		return "", time.Time{}, fmt.Errorf("create pairing code: %w %q (want chat, admin or machine)", ErrInvalidScope, scope)
	}
	if ttl <= 0 || ttl > 24*time.Hour {
		return "", time.Time{}, fmt.Errorf("create pairing code: ttl %s must be between 1s and 24h", ttl)
	}
	if tokenTTL < 0 || (tokenTTL > 0 && tokenTTL < time.Second) || tokenTTL > MaxTokenTTL {
		return "", time.Time{}, fmt.Errorf("create pairing code: token ttl %s must be between 1s and %s (or 0 for a token that lasts until revoked)", tokenTTL, MaxTokenTTL)
	}
	var life *int64 // milliseconds
	if tokenTTL > 0 {
		ms := tokenTTL.Milliseconds()
		life = &ms
	}
	raw := make([]byte, PairCodeLength)
	if _, err := rand.Read(raw); err != nil {
		return "", time.Time{}, err
	}
	code := make([]byte, PairCodeLength)
	for i, b := range raw {
		code[i] = pairAlphabet[int(b)%len(pairAlphabet)]
	}
	expires := time.Now().Add(ttl)
	err := s.withConn(ctx, "create pairing code", func(ctx context.Context, c *pgxpool.Conn) error {
		_, err := c.Exec(ctx, `INSERT INTO pairing_codes (id, hash, scope, expires_at, token_ttl) VALUES ($1, $2, $3, $4, $5 * interval '1 millisecond')`,
			uuid.New(), hashPairCode(string(code)), scope, expires, life)
		return err
	})
	if err != nil {
		return "", time.Time{}, err
	}
	return string(code[:4]) + "-" + string(code[4:]), expires, nil
}

// RedeemPairingCode trades a live code for a new token named name, in one transaction: the code
// is marked used so it works once. The token expires after the code's token life, if it has one. Errors: ErrNotFound (unknown, used or expired code),
// ErrNameTaken, ErrInvalidText.
func (s *Store) RedeemPairingCode(ctx context.Context, code, name string) (string, Token, error) {
	if err := checkText("name", name); err != nil {
		return "", Token{}, err
	}
	if name == "" {
		return "", Token{}, fmt.Errorf("redeem pairing code: empty name: %w", ErrInvalidText)
	}
	var plaintext string
	var tok Token
	err := s.withConn(ctx, "redeem pairing code", func(ctx context.Context, c *pgxpool.Conn) error {
		return pgx.BeginFunc(ctx, c, func(tx pgx.Tx) error {
			var id uuid.UUID
			var scope string
			var used bool
			var life *int64 // the token's life in milliseconds, nil: until revoked
			// Parallel redemptions of one code queue on the row lock; the losers then see it
			// used (B30) rather than missing, so they are not counted as wrong guesses.
			err := tx.QueryRow(ctx, `SELECT id, scope, used_at IS NOT NULL, (extract(epoch FROM token_ttl) * 1000)::bigint FROM pairing_codes
				WHERE hash = $1 AND expires_at > now() FOR UPDATE`, hashPairCode(code)).Scan(&id, &scope, &used, &life)
			if errors.Is(err, pgx.ErrNoRows) {
				return ErrNotFound
			}
			if err != nil {
				return err
			}
			if used {
				return ErrPairingUsed
			}
			var raw [32]byte
			if _, err := rand.Read(raw[:]); err != nil {
				return err
			}
			plaintext = TokenPrefix + encodeToken(raw[:])
			tok, err = scanToken(tx.QueryRow(ctx,
				`INSERT INTO tokens (id, name, scope, hash, expires_at) VALUES ($1, $2, $3, $4, now() + $5 * interval '1 millisecond') RETURNING `+tokenCols,
				uuid.New(), name, scope, hashToken(plaintext), life))
			var pe *pgconn.PgError
			if errors.As(err, &pe) && pe.Code == "23505" {
				return fmt.Errorf("%w: %q", ErrNameTaken, name)
			}
			if err != nil {
				return err
			}
			_, err = tx.Exec(ctx, `UPDATE pairing_codes SET used_at = now(), token_id = $2 WHERE id = $1`, id, tok.ID)
			return err
		})
	})
	if err != nil {
		return "", Token{}, err
	}
	return plaintext, tok, nil
}
