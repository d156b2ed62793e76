package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Replicas and run leases (issue 25 §2, docs/scaling.md "Runs and leases"): several server
// processes (replicas) share one database. Each keeps a row in replicas alive with Heartbeat; a
// run lease (run_leases) names the replica that runs a session's prompts and is valid while that
// replica's row has not expired. TakeOverRuns ends the runs of dead replicas.

// Channels of the replica calls (CallReplica): a call is announced on ReplicaCallChannel with the
// payload "<target replica id> <call id>", its reply on ReplicaReplyChannel with the call id.
const (
	ReplicaCallChannel  = "zidane_replica_call"
	ReplicaReplyChannel = "zidane_replica_reply"
	// TokenRevokedChannel carries the id of every revoked token (ListenTokenRevocations).
	TokenRevokedChannel = revokeChannel
)

// ErrLeaseHeld: another live replica holds the session's run lease; LeaseHeldError names it.
var ErrLeaseHeld = errors.New("store: the session's run lease is held by another replica")

// LeaseHeldError is the error of AcquireLease when another live replica holds the lease.
type LeaseHeldError struct{ Replica string }

func (e *LeaseHeldError) Error() string {
	return fmt.Sprintf("store: the session's run lease is held by replica %q", e.Replica)
}

// Unwrap makes errors.Is(err, ErrLeaseHeld) hold.
func (e *LeaseHeldError) Unwrap() error { return ErrLeaseHeld }

// ErrReplicaGone: Heartbeat found this replica's row gone: another replica declared it dead
// (its heartbeat had lapsed past the lease bound) and took its leases.
var ErrReplicaGone = errors.New("store: this replica's row was taken over by another replica")

// RegisterReplica writes (or renews, for a restarted replica of the same id) this replica's row,
// alive for ttl.
func (s *Store) RegisterReplica(ctx context.Context, id string, ttl time.Duration) error {
	return s.withConn(ctx, "register replica", func(ctx context.Context, c *pgxpool.Conn) error {
		_, err := c.Exec(ctx, `INSERT INTO replicas (id, expires_at) VALUES ($1, now() + make_interval(secs => $2))
			ON CONFLICT (id) DO UPDATE SET started_at = now(), expires_at = excluded.expires_at`, id, ttl.Seconds())
		return err
	})
}

// Heartbeat keeps this replica's row alive for ttl from now. ErrReplicaGone when the row is gone
// (another replica took this one's leases; the caller stops its runs and registers again).
func (s *Store) Heartbeat(ctx context.Context, id string, ttl time.Duration) error {
	return s.withConn(ctx, "replica heartbeat", func(ctx context.Context, c *pgxpool.Conn) error {
		tag, err := c.Exec(ctx, `UPDATE replicas SET expires_at = now() + make_interval(secs => $2) WHERE id = $1`, id, ttl.Seconds())
		if err == nil && tag.RowsAffected() == 0 {
			return ErrReplicaGone
		}
		return err
	})
}

// RemoveReplica deletes this replica's row and its leases: a clean shutdown, after its runs ended.
func (s *Store) RemoveReplica(ctx context.Context, id string) error {
	return s.withConn(ctx, "remove replica", func(ctx context.Context, c *pgxpool.Conn) error {
		b := &pgx.Batch{}
		b.Queue(`DELETE FROM run_leases WHERE replica_id = $1`, id)
		b.Queue(`DELETE FROM replicas WHERE id = $1`, id)
		return c.SendBatch(ctx, b).Close()
	})
}

// LiveReplicas returns the ids of the replicas whose row has not expired, sorted.
func (s *Store) LiveReplicas(ctx context.Context) ([]string, error) {
	var ids []string
	err := s.withConn(ctx, "live replicas", func(ctx context.Context, c *pgxpool.Conn) error {
		rows, err := c.Query(ctx, `SELECT id FROM replicas WHERE expires_at > now() ORDER BY id`)
		if err != nil {
			return err
		}
		ids, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err
	})
	return ids, err
}

// AcquireLease takes the session's run lease for replica and returns its generation (a UUID;
// ReleaseLease takes it back). A lease of this replica is taken again (a stale row); one of
// another live replica is not: the error is then a *LeaseHeldError naming it. One of a dead
// replica (its row expired) is not taken either before TakeOverRuns ended that replica's run:
// the error is then ErrLeaseHeld with the dead replica named, and the caller takes over first.
// The write does not wait for the WAL flush (synchronous_commit off): a lease lost in a crash of
// Postgres leaves a running session without lease, which TakeOverRuns ends as interrupted.
func (s *Store) AcquireLease(ctx context.Context, sessionID, replica, runID string) (gen string, err error) {
	u, err := parseID("acquire run lease", sessionID)
	if err != nil {
		return "", err
	}
	err = s.withConn(ctx, "acquire run lease", func(ctx context.Context, c *pgxpool.Conn) error {
		return pgx.BeginFunc(ctx, c, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `SET LOCAL synchronous_commit = off`); err != nil {
				return err
			}
			var holder string
			var live, took bool
			err := tx.QueryRow(ctx, `
				WITH ins AS (
					INSERT INTO run_leases (session_id, replica_id, gen, run_id) VALUES ($1, $2, gen_random_uuid(), $3)
					ON CONFLICT (session_id) DO UPDATE SET gen = excluded.gen, run_id = excluded.run_id, acquired_at = now()
					 WHERE run_leases.replica_id = excluded.replica_id
					RETURNING gen::text)
				SELECT coalesce((SELECT gen FROM ins), ''), coalesce(l.replica_id, ''),
				       EXISTS (SELECT 1 FROM replicas r WHERE r.id = l.replica_id AND r.expires_at > now()),
				       EXISTS (SELECT 1 FROM ins)
				  FROM (SELECT 1) one LEFT JOIN run_leases l ON l.session_id = $1`, u, replica, runID).Scan(&gen, &holder, &live, &took)
			if err != nil {
				return err
			}
			if took {
				return nil
			}
			if live {
				return &LeaseHeldError{Replica: holder}
			}
			return fmt.Errorf("%w: replica %q, whose heartbeat expired; take over its runs first", ErrLeaseHeld, holder)
		})
	})
	return gen, err
}

// SetLeaseRun records the run that now holds the session under the lease gen (a follow-up that
// started), so a replica taking the lease over names it in its run:end.
func (s *Store) SetLeaseRun(ctx context.Context, sessionID, gen, runID string) error {
	return s.withConn(ctx, "set lease run", func(ctx context.Context, c *pgxpool.Conn) error {
		_, err := c.Exec(ctx, `UPDATE run_leases SET run_id = $3 WHERE session_id::text = $1 AND gen::text = $2`, sessionID, gen, runID)
		return err
	})
}

// ReleaseLease deletes the session's lease if it still has generation gen.
func (s *Store) ReleaseLease(ctx context.Context, sessionID, gen string) error {
	return s.withConn(ctx, "release run lease", func(ctx context.Context, c *pgxpool.Conn) error {
		_, err := c.Exec(ctx, `DELETE FROM run_leases WHERE session_id::text = $1 AND gen::text = $2`, sessionID, gen)
		return err
	})
}

// LeaseOwner returns the replica holding the session's run lease and whether it is alive;
// "" when no replica holds it.
func (s *Store) LeaseOwner(ctx context.Context, sessionID string) (replica string, live bool, err error) {
	err = s.withConn(ctx, "run lease owner", func(ctx context.Context, c *pgxpool.Conn) error {
		err := c.QueryRow(ctx, `SELECT l.replica_id, EXISTS (SELECT 1 FROM replicas r WHERE r.id = l.replica_id AND r.expires_at > now())
			FROM run_leases l WHERE l.session_id::text = $1`, sessionID).Scan(&replica, &live)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		return err
	})
	return replica, live, err
}

// TakenRun is a run TakeOverRuns ended: its session, the run that held the lease ("" when the
// session had no lease) and the replica that held it.
type TakenRun struct{ SessionID, RunID, Replica string }

// TakeOverRuns ends, in one transaction, the runs no live replica owns: every session still
// "running" whose lease is missing, held by a replica whose row expired, or (startup set) held by
// replica itself (a restarted replica of the same id). Each gets what unwritten returns for it,
// given the session's signal mark (what its owner streamed after the mark but did not write, from
// the signal stream, each row with its SignalSeq; nil: nothing known) or else its open-block
// checkpoint, then errorEvent's row, and the status "interrupted"; its checkpoint
// and lease are deleted. The leases of dead replicas (or, at startup, of replica) on sessions that
// do not run are deleted too, and so are the rows of expired replicas. Sessions another replica's
// takeover holds locked are skipped (SKIP LOCKED): each run is ended once.
func (s *Store) TakeOverRuns(ctx context.Context, replica string, startup bool, errorEvent func(sessionID string) EventRow, unwritten func(ctx context.Context, sessionID string, after SignalMark) []EventRow) ([]TakenRun, error) {
	var out []TakenRun
	err := s.withConn(ctx, "take over runs", func(ctx context.Context, c *pgxpool.Conn) error {
		return pgx.BeginFunc(ctx, c, func(tx pgx.Tx) error {
			out = nil
			const dead = `(l.replica_id = $1 AND $2) OR (l.replica_id <> $1 AND NOT EXISTS (SELECT 1 FROM replicas r WHERE r.id = l.replica_id AND r.expires_at > now()))`
			rows, err := tx.Query(ctx, `
				SELECT s.id::text, coalesce(l.run_id, ''), coalesce(l.replica_id, ''), b.turn_id, b.kind, b.body, s.signal_seq, s.signal_epoch
				  FROM sessions s LEFT JOIN run_leases l ON l.session_id = s.id LEFT JOIN open_blocks b ON b.session_id = s.id
				 WHERE s.status = 'running' AND (l.session_id IS NULL OR `+dead+`)
				 ORDER BY s.id FOR UPDATE OF s SKIP LOCKED`, replica, startup)
			if err != nil {
				return err
			}
			type found struct {
				run        TakenRun
				checkpoint *EventRow
				mark       SignalMark
			}
			var fs []found
			for rows.Next() {
				var f found
				var turn, kind, body *string
				if err := rows.Scan(&f.run.SessionID, &f.run.RunID, &f.run.Replica, &turn, &kind, &body, &f.mark.Seq, &f.mark.Epoch); err != nil {
					rows.Close()
					return err
				}
				if body != nil {
					f.checkpoint = &EventRow{SessionID: f.run.SessionID, TurnID: *turn, Kind: *kind, Body: []byte(*body), Doc: DocOfBody(*kind, []byte(*body))}
				}
				fs = append(fs, f)
			}
			if err := rows.Err(); err != nil {
				return err
			}
			var batch []EventRow
			var ids []string
			for _, f := range fs {
				ids = append(ids, f.run.SessionID)
				out = append(out, f.run)
				var un []EventRow
				if unwritten != nil {
					un = unwritten(ctx, f.run.SessionID, f.mark)
				}
				if len(un) > 0 {
					batch = append(batch, un...)
				} else if f.checkpoint != nil {
					batch = append(batch, *f.checkpoint)
				}
				batch = append(batch, errorEvent(f.run.SessionID))
			}
			if len(batch) > 0 {
				sess, turns, kinds, bodies, docs, err := eventArrays("take over runs", batch)
				if err != nil {
					return err
				}
				if _, err := tx.Exec(ctx, `SELECT append_events($1, $2, $3, $4, $5)`, sess, turns, kinds, bodies, docs); err != nil {
					return err
				}
			}
			b := &pgx.Batch{}
			queueSignalMarks(b, batch)
			if len(ids) > 0 {
				b.Queue(`UPDATE sessions SET status = 'interrupted', updated_at = greatest(now(), updated_at) WHERE id::text = ANY($1)`, ids)
				b.Queue(`DELETE FROM open_blocks WHERE session_id::text = ANY($1)`, ids)
				b.Queue(`DELETE FROM run_leases WHERE session_id::text = ANY($1)`, ids)
			}
			b.Queue(`DELETE FROM run_leases l WHERE `+dead, replica, startup)
			b.Queue(`DELETE FROM replicas WHERE expires_at <= now() AND id <> $1`, replica)
			b.Queue(`DELETE FROM replica_calls WHERE created_at < now() - interval '1 hour'`)
			return tx.SendBatch(ctx, b).Close()
		})
	})
	return out, err
}

// CallReplica stores a call to replica target with body and announces it
// (ReplicaCallChannel); it returns the call's id, which the reply names.
func (s *Store) CallReplica(ctx context.Context, target, body string) (int64, error) {
	var id int64
	err := s.withConn(ctx, "call replica", func(ctx context.Context, c *pgxpool.Conn) error {
		return c.QueryRow(ctx, `WITH c AS (INSERT INTO replica_calls (target, body) VALUES ($1, $2) RETURNING id)
			SELECT id, pg_notify($3, $1 || ' ' || id) IS NULL FROM c`, target, body, ReplicaCallChannel).Scan(&id, new(bool))
	})
	return id, err
}

// PendingCalls returns the ids of the calls to target not answered yet, oldest first (read after
// a (re)LISTEN, for announcements it may have missed).
func (s *Store) PendingCalls(ctx context.Context, target string) ([]int64, error) {
	var ids []int64
	err := s.withConn(ctx, "pending replica calls", func(ctx context.Context, c *pgxpool.Conn) error {
		rows, err := c.Query(ctx, `SELECT id FROM replica_calls WHERE target = $1 AND reply IS NULL ORDER BY id`, target)
		if err != nil {
			return err
		}
		ids, err = pgx.CollectRows(rows, pgx.RowTo[int64])
		return err
	})
	return ids, err
}

// TakeCall claims the unanswered call id for target and returns its body; ErrNotFound when it
// is answered, gone or another's. A claimed call is answered with an empty reply meanwhile
// ("" = being handled), so it is handled once however often it is announced.
func (s *Store) TakeCall(ctx context.Context, id int64, target string) (string, error) {
	var body string
	err := s.withConn(ctx, "take replica call", func(ctx context.Context, c *pgxpool.Conn) error {
		return c.QueryRow(ctx, `UPDATE replica_calls SET reply = '' WHERE id = $1 AND target = $2 AND reply IS NULL RETURNING body`, id, target).Scan(&body)
	})
	return body, err
}

// ReplyCall stores reply (non-empty) as call id's answer and announces it (ReplicaReplyChannel).
func (s *Store) ReplyCall(ctx context.Context, id int64, reply string) error {
	return s.withConn(ctx, "reply replica call", func(ctx context.Context, c *pgxpool.Conn) error {
		_, err := c.Exec(ctx, `WITH u AS (UPDATE replica_calls SET reply = $2 WHERE id = $1 RETURNING id)
			SELECT pg_notify($3, id::text) FROM u`, id, reply, ReplicaReplyChannel)
		return err
	})
}

// CallReply returns call id's reply, "" while it has none; ErrNotFound when the call is gone.
func (s *Store) CallReply(ctx context.Context, id int64) (string, error) {
	var reply *string
	err := s.withConn(ctx, "replica call reply", func(ctx context.Context, c *pgxpool.Conn) error {
		return c.QueryRow(ctx, `SELECT reply FROM replica_calls WHERE id = $1`, id).Scan(&reply)
	})
	if err != nil || reply == nil {
		return "", err
	}
	return *reply, nil
}

// EndCall deletes call id (the caller read its reply or gave up).
func (s *Store) EndCall(ctx context.Context, id int64) error {
	return s.withConn(ctx, "end replica call", func(ctx context.Context, c *pgxpool.Conn) error {
		_, err := c.Exec(ctx, `DELETE FROM replica_calls WHERE id = $1`, id)
		return err
	})
}

// ParseCallNotice splits a ReplicaCallChannel payload into the target replica and the call id.
func ParseCallNotice(payload string) (target string, id int64, ok bool) {
	i := strings.LastIndexByte(payload, ' ')
	if i < 0 {
		return "", 0, false
	}
	id, err := strconv.ParseInt(payload[i+1:], 10, 64)
	return payload[:i], id, err == nil
}
