-- +goose Up
-- Subagents' child sessions (issue 27 item 4): the session whose run's task call created one, and
-- that run. Deleting a parent deletes its children (their transcripts are part of its work).
ALTER TABLE sessions ADD COLUMN parent_session_id uuid REFERENCES sessions(id) ON DELETE CASCADE;
ALTER TABLE sessions ADD COLUMN parent_run_id uuid;
CREATE INDEX sessions_parent ON sessions (parent_session_id, created_at) WHERE parent_session_id IS NOT NULL;

-- +goose Down
DROP INDEX sessions_parent;
ALTER TABLE sessions DROP COLUMN parent_run_id;
ALTER TABLE sessions DROP COLUMN parent_session_id;
