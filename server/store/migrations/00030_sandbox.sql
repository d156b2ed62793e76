-- +goose Up
-- A session's sandbox policy (issue 14), when an admin set one; a session without a row runs its
-- commands under the server's default policy.
CREATE TABLE session_sandbox (
    session_id uuid        PRIMARY KEY REFERENCES sessions (id) ON DELETE CASCADE,
    policy     text        NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE session_sandbox;
