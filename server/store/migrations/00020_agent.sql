-- +goose Up
-- The agent runtime's state (issue 8): each session's model ("provider/model", '' = the server's
-- default) and whether its title was set by a person (else the first prompt names it).
ALTER TABLE sessions ADD COLUMN model text NOT NULL DEFAULT '';
ALTER TABLE sessions ADD COLUMN title_set boolean NOT NULL DEFAULT false;

-- turn_usage keeps every model turn's usage as the provider reported it. It outlives its session
-- (no foreign key): usage.summary counts what was spent, also in deleted sessions.
CREATE TABLE turn_usage (
    session_id uuid        NOT NULL,
    run_id     text        NOT NULL,
    turn_id    text        NOT NULL,
    model_id   text        NOT NULL,
    input      bigint      NOT NULL CHECK (input >= 0),
    output     bigint      NOT NULL CHECK (output >= 0),
    reported   boolean     NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX turn_usage_created_at_idx ON turn_usage (created_at);

-- open_blocks holds, per session, the streamed block (markdown or thinking) not closed yet, as the
-- event it will become; it is rewritten at most every 100 ms while the block grows and deleted in
-- the transaction that appends the closed block. A server that starts after a crash appends the
-- ones it finds to their transcripts, so text streamed before the crash is not lost.
CREATE TABLE open_blocks (
    session_id uuid        PRIMARY KEY REFERENCES sessions (id) ON DELETE CASCADE,
    turn_id    text        NOT NULL,
    kind       text        NOT NULL,
    body       text        NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE open_blocks;
DROP TABLE turn_usage;
ALTER TABLE sessions DROP COLUMN title_set;
ALTER TABLE sessions DROP COLUMN model;
