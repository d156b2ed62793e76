-- +goose Up
-- sessions.version counts the row's writes: every UPDATE of a session (a status, a title, the
-- transcript's counters) makes it one more, under the row lock, so of two snapshots of a session
-- the one with the larger version is the later, whichever writer's answer arrives first.
-- updated_at cannot tell: now() is a transaction's start, and two writes can share it. The server
-- publishes session:updated and caches sessions by it (a stale snapshot never replaces a newer).
ALTER TABLE sessions ADD COLUMN version bigint NOT NULL DEFAULT 0;

-- +goose StatementBegin
CREATE FUNCTION sessions_bump_version() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.version := OLD.version + 1;
    RETURN NEW;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER sessions_version BEFORE UPDATE ON sessions
    FOR EACH ROW EXECUTE FUNCTION sessions_bump_version();

-- +goose Down
DROP TRIGGER sessions_version ON sessions;
DROP FUNCTION sessions_bump_version();
ALTER TABLE sessions DROP COLUMN version;
