-- +goose Up
-- append_events appends a batch of transcript events (parallel arrays, in
-- order) possibly spanning several sessions. It locks the affected session
-- rows in id order (so concurrent appenders serialise per session and cannot
-- deadlock), assigns pos and turn_pos from the counters kept in the session
-- row, inserts the events and advances the counters. A turn is a run of
-- consecutive events with the same turn_id; a turn_id different from the
-- session's previous event starts turn last_turn_pos+1. Returns the number of
-- events inserted; raises no_data_found (P0002) if a session does not exist.
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

-- +goose Down
DROP FUNCTION append_events(uuid[], text[], text[], text[]);
