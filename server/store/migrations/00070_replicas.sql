-- +goose Up
-- Several replicas on one Postgres (issue 25 §2, docs/scaling.md). Each server process is a
-- replica with an id (--replica-id); it keeps its row here alive with a heartbeat (expires_at moves
-- forward every heartbeat). A run lease names the replica that runs a session's prompts: it is
-- valid while its replica's row has not expired. A replica whose row expired is dead: another one
-- takes its leases, ends their runs as interrupted and deletes the row.
CREATE TABLE replicas (
    id         text PRIMARY KEY,
    started_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL
);

-- One row per session with a run (or queued prompts) on some replica. gen changes on every
-- acquisition, so a late release of an older holding never deletes a newer one. No foreign key
-- to sessions: its check would lock the session's row, and a run's lease must not wait behind a
-- write of its session (chat.send → run:start waits for no row lock, issue 10). A session is
-- never deleted while it runs; a lease left by a dead replica is deleted by the takeover sweep.
CREATE TABLE run_leases (
    session_id  uuid PRIMARY KEY,
    replica_id  text NOT NULL,
    gen         uuid NOT NULL,
    run_id      text NOT NULL DEFAULT '',
    acquired_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX run_leases_replica ON run_leases (replica_id);

-- Calls one replica makes to another (a prompt, a cancel, an answer to an approval or a question
-- for the run the other owns): the caller inserts the row and NOTIFYs zidane_replica_call with
-- "<target> <id>"; the target writes reply and NOTIFYs zidane_replica_reply with the id; the
-- caller reads the reply and deletes the row. A row left behind (a caller killed mid-call) is
-- deleted by the sweep after an hour.
CREATE TABLE replica_calls (
    id         bigserial PRIMARY KEY,
    target     text NOT NULL,
    body       text NOT NULL,
    reply      text,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX replica_calls_target ON replica_calls (target) WHERE reply IS NULL;

-- The takeover sweep (every heartbeat of every replica) reads the running sessions only.
CREATE INDEX sessions_running ON sessions (id) WHERE status = 'running';

-- +goose Down
DROP INDEX sessions_running;
DROP TABLE replica_calls;
DROP TABLE run_leases;
DROP TABLE replicas;
