-- +goose Up
-- Approvals (issue 9): each session's approval mode (absent row = 'ask'), the always-allow
-- safelist per project root, the audit log, and each session's plan.
CREATE TABLE approval_modes (
    session_id uuid        PRIMARY KEY REFERENCES sessions (id) ON DELETE CASCADE,
    mode       text        NOT NULL CHECK (mode IN ('ask', 'auto-edit', 'locked')),
    updated_at timestamptz NOT NULL DEFAULT now()
);

-- prefix is the exec command's "program subcommand" ('' for other tools).
CREATE TABLE safelist (
    id           uuid        PRIMARY KEY,
    project_root text        NOT NULL,
    tool         text        NOT NULL,
    prefix       text        NOT NULL DEFAULT '',
    created_at   timestamptz NOT NULL DEFAULT now(),
    created_by   text        NOT NULL,
    UNIQUE (project_root, tool, prefix)
);

-- The audit log outlives sessions and tokens (no foreign keys).
CREATE TABLE audit_log (
    id         bigserial   PRIMARY KEY,
    at         timestamptz NOT NULL DEFAULT now(),
    actor      text        NOT NULL,
    action     text        NOT NULL,
    session_id uuid,
    detail     text        NOT NULL
);
CREATE INDEX audit_log_session_idx ON audit_log (session_id, id);

CREATE TABLE session_plans (
    session_id uuid        PRIMARY KEY REFERENCES sessions (id) ON DELETE CASCADE,
    plan       jsonb       NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE session_plans;
DROP TABLE audit_log;
DROP TABLE safelist;
DROP TABLE approval_modes;
