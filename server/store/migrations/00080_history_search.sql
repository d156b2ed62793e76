-- +goose Up
-- Issue 28: fork, rollback and compaction, search across every session, the prompt history.

-- A fork's source (history.fork); a deleted source leaves the fork without one.
ALTER TABLE sessions ADD COLUMN forked_from uuid REFERENCES sessions (id) ON DELETE SET NULL;

-- doc is an event's searchable text, written by the transcript writer with the event: a prompt's,
-- an answer's or a tool result's text, a tool call's one-line rendering; NULL for the others. It is
-- at most 64 KiB (a block or a result can be megabytes; the search needs its words, not all of
-- them), valid UTF-8 without NUL, \x01 or \x02 (the snippet markers).
ALTER TABLE events ADD COLUMN doc text;

-- search_vector is the full-text vector of a text: English stemming ("fixed" finds "fix") and the
-- words as they are ('simple': identifiers, names, numbers), one vector.
-- +goose StatementBegin
CREATE FUNCTION search_vector(t text) RETURNS tsvector
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT to_tsvector('english'::regconfig, coalesce(t, '')) || to_tsvector('simple'::regconfig, coalesce(t, '')) $$;
-- +goose StatementEnd

-- search_query is the query search.sessions matches search_vector against: the words as a web
-- search box takes them ("quoted phrases", or, -not), stemmed or as they are.
-- +goose StatementBegin
CREATE FUNCTION search_query(q text) RETURNS tsquery
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT websearch_to_tsquery('english'::regconfig, q) || websearch_to_tsquery('simple'::regconfig, q) $$;
-- +goose StatementEnd

-- Events written before this migration get their doc (those whose body Postgres can read as JSON:
-- not the ones holding \u0000).
UPDATE events
   SET doc = translate(left(body::jsonb ->> 'text', 65536), E'\x01\x02', '  ')
 WHERE kind IN ('user-prompt', 'markdown', 'tool', 'tool-result')
   AND strpos(body, '\u0000') = 0;

ALTER TABLE events ADD COLUMN tsv tsvector GENERATED ALWAYS AS (search_vector(doc)) STORED;
CREATE INDEX events_tsv_idx ON events USING gin (tsv) WHERE doc IS NOT NULL;

-- Trigram matching of code identifiers and paths (a part of a word: "istory.g").
CREATE EXTENSION IF NOT EXISTS pg_trgm;
CREATE INDEX events_doc_trgm_idx ON events USING gin (doc gin_trgm_ops) WHERE doc IS NOT NULL;

-- Titles and folders match too.
ALTER TABLE sessions ADD COLUMN tsv tsvector GENERATED ALWAYS AS (search_vector(title || ' ' || cwd)) STORED;
CREATE INDEX sessions_tsv_idx ON sessions USING gin (tsv);
CREATE INDEX sessions_find_trgm_idx ON sessions USING gin ((title || ' ' || cwd) gin_trgm_ops);

-- A turn of a session by its id (fork and rollback find the exchange that holds it).
CREATE INDEX events_session_turn_id_idx ON events (session_id, turn_id);

-- The prompt history (history.prompts): a project's prompts newest first.
CREATE INDEX sessions_project_idx ON sessions (project_root);
CREATE INDEX events_prompt_idx ON events (session_id, created_at DESC) WHERE kind = 'user-prompt';

-- A rollback's dropped events, kept until expires_at (history.restore); cut is the transcript's
-- event count the rollback left, which it must still have for a restore.
CREATE TABLE rollbacks (
    id         uuid        PRIMARY KEY,
    session_id uuid        NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    cut        integer     NOT NULL CHECK (cut >= 0),
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL
);
CREATE INDEX rollbacks_expires_idx ON rollbacks (expires_at);
CREATE INDEX rollbacks_session_idx ON rollbacks (session_id);

CREATE TABLE rolled_back_events (
    rollback_id uuid        NOT NULL REFERENCES rollbacks (id) ON DELETE CASCADE,
    pos         integer     NOT NULL,
    turn_pos    integer     NOT NULL,
    turn_id     text        NOT NULL,
    kind        text        NOT NULL,
    body        text        NOT NULL,
    doc         text,
    created_at  timestamptz NOT NULL,
    PRIMARY KEY (rollback_id, pos)
);

-- append_events takes each event's doc as a fifth array (NULL, or shorter: no doc).
DROP FUNCTION append_events(uuid[], text[], text[], text[]);
-- +goose StatementBegin
CREATE FUNCTION append_events(p_session uuid[], p_turn text[], p_kind text[], p_body text[], p_doc text[] DEFAULT NULL)
RETURNS integer
LANGUAGE plpgsql
AS $$
DECLARE
    n_in     integer := coalesce(cardinality(p_session), 0);
    n_locked integer;
    n_want   integer;
    n_done   integer;
BEGIN
    IF n_in = 0 THEN
        RETURN 0;
    END IF;
    IF cardinality(p_turn) <> n_in OR cardinality(p_kind) <> n_in OR cardinality(p_body) <> n_in THEN
        RAISE EXCEPTION 'append_events: array lengths differ' USING ERRCODE = '22023';
    END IF;

    SELECT count(DISTINCT x) INTO n_want FROM unnest(p_session) AS x;
    PERFORM 1 FROM sessions
     WHERE id = ANY (p_session)
     ORDER BY id
       FOR UPDATE;
    GET DIAGNOSTICS n_locked = ROW_COUNT;
    IF n_locked <> n_want THEN
        RAISE EXCEPTION 'append_events: session not found' USING ERRCODE = 'P0002';
    END IF;

    WITH input AS (
        SELECT u.session_id, u.turn_id, u.kind, u.body, u.doc, u.ord
          FROM unnest(p_session, p_turn, p_kind, p_body, coalesce(p_doc, '{}'::text[])) WITH ORDINALITY
               AS u(session_id, turn_id, kind, body, doc, ord)
         WHERE u.ord <= n_in
    ), marked AS (
        SELECT i.*, s.event_count, s.turn_count,
               row_number() OVER w - 1 AS idx,
               CASE WHEN i.turn_id IS NOT DISTINCT FROM
                         coalesce(lag(i.turn_id) OVER w, s.last_turn_id)
                    THEN 0 ELSE 1 END AS new_turn
          FROM input i
          JOIN sessions s ON s.id = i.session_id
        WINDOW w AS (PARTITION BY i.session_id ORDER BY i.ord)
    ), numbered AS (
        SELECT m.session_id, m.turn_id, m.kind, m.body, m.doc, m.ord,
               m.event_count + m.idx AS pos,
               greatest(m.turn_count - 1
                        + sum(m.new_turn) OVER (PARTITION BY m.session_id ORDER BY m.ord), 0) AS turn_pos
          FROM marked m
    ), ins AS (
        INSERT INTO events (session_id, pos, turn_pos, turn_id, kind, body, doc)
        SELECT session_id, pos, turn_pos, turn_id, kind, body, nullif(doc, '')
          FROM numbered
         ORDER BY session_id, pos
        RETURNING 1
    ), last AS (
        SELECT DISTINCT ON (session_id) session_id, pos, turn_pos, turn_id
          FROM numbered
         ORDER BY session_id, pos DESC
    ), upd AS (
        UPDATE sessions s
           SET event_count  = l.pos + 1,
               turn_count   = l.turn_pos + 1,
               last_turn_id = l.turn_id,
               updated_at   = now()
          FROM last l
         WHERE s.id = l.session_id
        RETURNING 1
    )
    SELECT (SELECT count(*) FROM ins) INTO n_done;

    IF n_done <> n_in THEN
        RAISE EXCEPTION 'append_events: inserted % of % events', n_done, n_in USING ERRCODE = 'XX000';
    END IF;
    RETURN n_done;
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION append_events(uuid[], text[], text[], text[], text[]);
DROP TABLE rolled_back_events;
DROP TABLE rollbacks;
DROP INDEX events_prompt_idx;
DROP INDEX sessions_project_idx;
DROP INDEX events_session_turn_id_idx;
DROP INDEX sessions_find_trgm_idx;
ALTER TABLE sessions DROP COLUMN tsv;
DROP INDEX events_doc_trgm_idx;
ALTER TABLE events DROP COLUMN tsv;
DROP FUNCTION search_query(text);
DROP FUNCTION search_vector(text);
ALTER TABLE events DROP COLUMN doc;
ALTER TABLE sessions DROP COLUMN forked_from;
-- +goose StatementBegin
CREATE FUNCTION append_events(p_session uuid[], p_turn text[], p_kind text[], p_body text[])
RETURNS integer
LANGUAGE plpgsql
AS $$
DECLARE
    n_in     integer := coalesce(cardinality(p_session), 0);
    n_locked integer;
    n_want   integer;
    n_done   integer;
BEGIN
    IF n_in = 0 THEN
        RETURN 0;
    END IF;
    IF cardinality(p_turn) <> n_in OR cardinality(p_kind) <> n_in OR cardinality(p_body) <> n_in THEN
        RAISE EXCEPTION 'append_events: array lengths differ' USING ERRCODE = '22023';
    END IF;

    SELECT count(DISTINCT x) INTO n_want FROM unnest(p_session) AS x;
    PERFORM 1 FROM sessions
     WHERE id = ANY (p_session)
     ORDER BY id
       FOR UPDATE;
    GET DIAGNOSTICS n_locked = ROW_COUNT;
    IF n_locked <> n_want THEN
        RAISE EXCEPTION 'append_events: session not found' USING ERRCODE = 'P0002';
    END IF;

    -- A new statement takes a new snapshot, so the counters read below are
    -- the latest committed ones (we hold the row locks).
    WITH input AS (
        SELECT u.session_id, u.turn_id, u.kind, u.body, u.ord
          FROM unnest(p_session, p_turn, p_kind, p_body) WITH ORDINALITY
               AS u(session_id, turn_id, kind, body, ord)
    ), marked AS (
        SELECT i.*, s.event_count, s.turn_count,
               row_number() OVER w - 1 AS idx,
               CASE WHEN i.turn_id IS NOT DISTINCT FROM
                         coalesce(lag(i.turn_id) OVER w, s.last_turn_id)
                    THEN 0 ELSE 1 END AS new_turn
          FROM input i
          JOIN sessions s ON s.id = i.session_id
        WINDOW w AS (PARTITION BY i.session_id ORDER BY i.ord)
    ), numbered AS (
        SELECT m.session_id, m.turn_id, m.kind, m.body, m.ord,
               m.event_count + m.idx AS pos,
               greatest(m.turn_count - 1
                        + sum(m.new_turn) OVER (PARTITION BY m.session_id ORDER BY m.ord), 0) AS turn_pos
          FROM marked m
    ), ins AS (
        INSERT INTO events (session_id, pos, turn_pos, turn_id, kind, body)
        SELECT session_id, pos, turn_pos, turn_id, kind, body
          FROM numbered
         ORDER BY session_id, pos
        RETURNING 1
    ), last AS (
        SELECT DISTINCT ON (session_id) session_id, pos, turn_pos, turn_id
          FROM numbered
         ORDER BY session_id, pos DESC
    ), upd AS (
        UPDATE sessions s
           SET event_count  = l.pos + 1,
               turn_count   = l.turn_pos + 1,
               last_turn_id = l.turn_id,
               updated_at   = now()
          FROM last l
         WHERE s.id = l.session_id
        RETURNING 1
    )
    SELECT (SELECT count(*) FROM ins) INTO n_done;

    IF n_done <> n_in THEN
        RAISE EXCEPTION 'append_events: inserted % of % events', n_done, n_in USING ERRCODE = 'XX000';
    END IF;
    RETURN n_done;
END
$$;
-- +goose StatementEnd
