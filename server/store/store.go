// Package store is zidane-server's persistence layer: PostgreSQL through
// pgx/v5 and pgxpool, with embedded SQL migrations run by pressly/goose at
// Open. It holds the host identity, API tokens, sessions and session
// transcripts (events). See managed.go for the managed local PostgreSQL used
// when no DATABASE_URL is configured.
package store

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

//go:embed migrations/*.sql
var migrationsFS embed.FS

// Errors returned by the store. Test them with errors.Is; most are wrapped
// with context.
var (
	// ErrNotFound: the requested row does not exist (or, for tokens, is
	// revoked). Malformed ids (e.g. a non-UUID session id) also give it.
	ErrNotFound = errors.New("store: not found")
	// ErrBusy: the database is saturated — no pooled connection became free
	// (or the statement did not finish) within Options.QueryTimeout.
	ErrBusy = errors.New("store: database busy")
	// ErrUnavailable: a connection to the database could not be established.
	ErrUnavailable = errors.New("store: database unavailable")
	// ErrNameTaken: a live (non-revoked) token already has that name.
	ErrNameTaken = errors.New("store: token name already in use")
	// ErrPairingUsed: the pairing code exists but was redeemed already (for instance by a
	// parallel redemption that won the race, field case B30). It is not a wrong guess.
	ErrPairingUsed = errors.New("store: pairing code already used")
	// ErrLimit: a write would pass a count limit (SetState's max); nothing was written.
	ErrLimit = errors.New("store: limit reached")
	// ErrLimitBytes: a write would make a namespace's values pass SetState's maxBytes in all
	// (it wraps ErrLimit); nothing was written.
	ErrLimitBytes = fmt.Errorf("%w: too many bytes", ErrLimit)
	// ErrInvalidScope: a token scope other than chat, admin or machine.
	ErrInvalidScope = errors.New("store: invalid token scope")
	// ErrInvalidText: a string for a TEXT column is not valid UTF-8 or
	// contains a NUL byte, which PostgreSQL cannot store. The error names the
	// field.
	ErrInvalidText = errors.New("store: invalid text (not UTF-8 or contains NUL)")
)

// Options tunes Open. The zero value is valid.
type Options struct {
	// MaxConns is the pool size; 0 means 16.
	MaxConns int32
	// QueryTimeout bounds every store call, including the wait for a pooled
	// connection (exceeding that gives ErrBusy); it is also set as the
	// server-side statement_timeout. 0 means 10s.
	QueryTimeout time.Duration
	// Logger receives migration and pool messages; nil means slog.Default().
	Logger *slog.Logger
}

// Store is a handle on the zidane database. It is safe for concurrent use.
type Store struct {
	pool    *pgxpool.Pool
	timeout time.Duration
	log     *slog.Logger

	probeMu  sync.Mutex // serialises Health's fresh-connection probe
	probeAt  time.Time  // when the last probe ran
	probeErr error      // its outcome, reused for healthProbeEvery
}

// Open connects to databaseURL (a postgres:// URL or key=value DSN), checks
// the connection (ErrUnavailable if it cannot connect), applies pending
// embedded migrations and returns the store. Close it when done.
func Open(ctx context.Context, databaseURL string, opts Options) (*Store, error) {
	if opts.MaxConns <= 0 {
		opts.MaxConns = 16
	}
	if opts.QueryTimeout <= 0 {
		opts.QueryTimeout = 10 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	cfg, err := pgxpool.ParseConfig(databaseURL)
	if err != nil {
		return nil, fmt.Errorf("store: parse database URL: %w", err)
	}
	cfg.MaxConns = opts.MaxConns
	if cfg.ConnConfig.RuntimeParams == nil {
		cfg.ConnConfig.RuntimeParams = map[string]string{}
	}
	cfg.ConnConfig.RuntimeParams["statement_timeout"] = strconv.FormatInt(opts.QueryTimeout.Milliseconds(), 10)
	if cfg.ConnConfig.ConnectTimeout == 0 || cfg.ConnConfig.ConnectTimeout > opts.QueryTimeout {
		cfg.ConnConfig.ConnectTimeout = opts.QueryTimeout
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	s := &Store{pool: pool, timeout: opts.QueryTimeout, log: opts.Logger}
	if err := s.Ping(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	if err := s.migrate(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	return s, nil
}

func (s *Store) migrate(ctx context.Context) error {
	sub, err := fs.Sub(migrationsFS, "migrations")
	if err != nil {
		return fmt.Errorf("store: migrations: %w", err)
	}
	db := stdlib.OpenDBFromPool(s.pool)
	defer db.Close()
	locker, err := lock.NewPostgresSessionLocker()
	if err != nil {
		return fmt.Errorf("store: migrations: %w", err)
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, sub,
		goose.WithSessionLocker(locker), goose.WithDisableGlobalRegistry(true),
		// Parallel branches number their migrations apart (00020, 00030, …) and may land in any
		// order: a database that has a later one still gets an earlier one that lands after it.
		goose.WithAllowOutofOrder(true))
	if err != nil {
		return fmt.Errorf("store: migrations: %w", err)
	}
	res, err := p.Up(ctx)
	if err != nil {
		return fmt.Errorf("store: run migrations: %w", err)
	}
	for _, r := range res {
		s.log.Info("store: applied migration", "file", r.Source.Path, "duration", r.Duration)
	}
	return nil
}

// Close closes all pooled connections. The store must not be used afterwards.
func (s *Store) Close() { s.pool.Close() }

// Ping checks that a connection can be acquired and used within the query
// timeout. Errors: ErrUnavailable, ErrBusy.
func (s *Store) Ping(ctx context.Context) error {
	return s.withConn(ctx, "ping", func(ctx context.Context, c *pgxpool.Conn) error {
		return c.Ping(ctx)
	})
}

// healthProbeEvery bounds how often Health opens a fresh connection: an unauthenticated
// /healthz polled in a loop costs at most one new database connection per interval. A failed
// probe is trusted for healthProbeRetry only, so a database that is back shows ok at once.
const (
	healthProbeEvery = 2 * time.Second
	healthProbeRetry = 200 * time.Millisecond
)

// Health reports whether the database serves this store and would serve a new connection.
// Ping alone is not enough: a PostgreSQL in smart shutdown keeps serving the pool's open
// connections but refuses new ones, so the server would look healthy until its pool turns over.
// Health pings a pooled connection and, at most every healthProbeEvery, also opens (and closes)
// a fresh one (every healthProbeRetry while the last one failed); between probes it answers the
// last probe's outcome. Errors: ErrUnavailable, ErrBusy.
func (s *Store) Health(ctx context.Context) error {
	if err := s.Ping(ctx); err != nil {
		return err
	}
	s.probeMu.Lock()
	defer s.probeMu.Unlock()
	every := healthProbeEvery
	if s.probeErr != nil {
		every = healthProbeRetry
	}
	if !s.probeAt.IsZero() && time.Since(s.probeAt) < every {
		return s.probeErr
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	c, err := pgx.ConnectConfig(ctx, s.pool.Config().ConnConfig.Copy())
	if err == nil {
		err = c.Close(ctx)
	} else {
		err = fmt.Errorf("%w: a new connection was refused: %w", ErrUnavailable, err)
	}
	s.probeAt, s.probeErr = time.Now(), err
	return err
}

// withConn runs fn with a pooled connection under the store's timeout and
// maps errors to the package's sentinel errors.
func (s *Store) withConn(ctx context.Context, op string, fn func(ctx context.Context, c *pgxpool.Conn) error) error {
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	c, err := s.pool.Acquire(ctx)
	if err != nil {
		var ce *pgconn.ConnectError
		switch {
		case errors.As(err, &ce):
			return fmt.Errorf("%s: %w: %w", op, ErrUnavailable, err)
		case errors.Is(err, context.DeadlineExceeded):
			// Our timeout or the caller's deadline expired while waiting.
			return fmt.Errorf("%s: %w: no connection became free: %w", op, ErrBusy, err)
		case parent.Err() != nil:
			return fmt.Errorf("%s: %w", op, parent.Err())
		default:
			return fmt.Errorf("%s: %w: %w", op, ErrUnavailable, err)
		}
	}
	err = fn(ctx, c)
	if err != nil && pgconn.SafeToRetry(err) && ctx.Err() == nil {
		// The pooled connection died before the statement reached the server (Postgres
		// restarted): drop it and run once more on a fresh one.
		c.Conn().Close(context.Background())
		c.Release()
		if c, err = s.pool.Acquire(ctx); err != nil {
			return s.mapErr(parent, op, err)
		}
		err = fn(ctx, c)
	}
	c.Release()
	if err == nil {
		return nil
	}
	return s.mapErr(parent, op, err)
}

func (s *Store) mapErr(parent context.Context, op string, err error) error {
	if errors.Is(err, ErrNotFound) || errors.Is(err, ErrInvalidText) || errors.Is(err, ErrNameTaken) ||
		errors.Is(err, ErrInvalidScope) || errors.Is(err, ErrBusy) || errors.Is(err, ErrUnavailable) ||
		errors.Is(err, ErrLimit) {
		return fmt.Errorf("%s: %w", op, err)
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("%s: %w", op, ErrNotFound)
	}
	if parent.Err() != nil {
		return fmt.Errorf("%s: %w", op, parent.Err())
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case "57014": // query_canceled (statement_timeout)
			return fmt.Errorf("%s: %w: %w", op, ErrBusy, err)
		case "22021": // character_not_in_repertoire
			return fmt.Errorf("%s: %w: %w", op, ErrInvalidText, err)
		case "P0002": // no_data_found raised by append_events
			return fmt.Errorf("%s: %w", op, ErrNotFound)
		}
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%s: %w: %w", op, ErrBusy, err)
	}
	if isConnFailure(err) {
		return fmt.Errorf("%s: %w: %w", op, ErrUnavailable, err)
	}
	return fmt.Errorf("%s: %w", op, err)
}

// isConnFailure reports an error of the connection to Postgres (not of the statement): a closed
// or broken connection, a failed dial, a server shutting down.
func isConnFailure(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return strings.HasPrefix(pe.Code, "08") || strings.HasPrefix(pe.Code, "57P") // connection_exception, admin/crash shutdown
	}
	var ce *pgconn.ConnectError
	var ne net.Error
	return errors.As(err, &ce) || errors.As(err, &ne) || pgconn.SafeToRetry(err) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ENOENT)
}

// checkText returns ErrInvalidText naming field if v cannot be stored in a
// PostgreSQL TEXT column.
func checkText(field, v string) error {
	if !utf8.ValidString(v) {
		return fmt.Errorf("%w: %s is not valid UTF-8", ErrInvalidText, field)
	}
	if strings.IndexByte(v, 0) >= 0 {
		return fmt.Errorf("%w: %s contains a NUL byte", ErrInvalidText, field)
	}
	return nil
}

// HostID returns this host's identity: a UUID string created once (by the
// first migration, or on first call) and stable across restarts.
func (s *Store) HostID(ctx context.Context) (string, error) {
	var id string
	err := s.withConn(ctx, "host id", func(ctx context.Context, c *pgxpool.Conn) error {
		return c.QueryRow(ctx, `
			WITH ins AS (
				INSERT INTO host_meta (host_id) VALUES (gen_random_uuid())
				ON CONFLICT DO NOTHING RETURNING host_id
			)
			SELECT host_id::text FROM ins
			UNION ALL
			SELECT host_id::text FROM host_meta
			LIMIT 1`).Scan(&id)
	})
	return id, err
}
