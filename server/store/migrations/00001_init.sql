-- +goose Up
-- host_meta holds exactly one row: this host's stable identity.
CREATE TABLE host_meta (
    singleton  boolean     PRIMARY KEY DEFAULT true CHECK (singleton),
    host_id    uuid        NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
INSERT INTO host_meta (host_id) VALUES (gen_random_uuid()) ON CONFLICT DO NOTHING;

-- tokens stores API tokens; only the SHA-256 of the plaintext is kept.
CREATE TABLE tokens (
    id           uuid        PRIMARY KEY,
    name         text        NOT NULL,
    scope        text        NOT NULL CHECK (scope IN ('chat', 'admin', 'machine')),
    hash         bytea       NOT NULL UNIQUE CHECK (octet_length(hash) = 32),
    created_at   timestamptz NOT NULL DEFAULT now(),
    last_used_at timestamptz,
    revoked_at   timestamptz
);
CREATE UNIQUE INDEX tokens_live_name_key ON tokens (name) WHERE revoked_at IS NULL;
CREATE INDEX tokens_created_at_idx ON tokens (created_at, id);

-- sessions; event_count/turn_count/last_turn_id are the transcript counters
-- maintained by append_events under the session row lock.
CREATE TABLE sessions (
    id           uuid        PRIMARY KEY,
    title        text        NOT NULL DEFAULT '',
    project_root text        NOT NULL DEFAULT '',
    cwd          text        NOT NULL DEFAULT '',
    agent_id     text        NOT NULL DEFAULT '',
    status       text        NOT NULL DEFAULT '',
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now(),
    archived     boolean     NOT NULL DEFAULT false,
    event_count  integer     NOT NULL DEFAULT 0,
    turn_count   integer     NOT NULL DEFAULT 0,
    last_turn_id text
);
CREATE INDEX sessions_updated_at_idx ON sessions (updated_at DESC, id);

-- events is the transcript: body is the event's complete JSON kept as TEXT
-- (not jsonb) so escapes such as \u0000 survive byte-for-byte.
CREATE TABLE events (
    session_id uuid        NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    pos        integer     NOT NULL CHECK (pos >= 0),
    turn_pos   integer     NOT NULL CHECK (turn_pos >= 0),
    turn_id    text        NOT NULL,
    kind       text        NOT NULL,
    body       text        NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (session_id, pos)
);
CREATE INDEX events_session_turn_idx ON events (session_id, turn_pos, pos);

-- +goose Down
DROP TABLE events;
DROP TABLE sessions;
DROP TABLE tokens;
DROP TABLE host_meta;
