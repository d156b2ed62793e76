package storetest

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// SearchCorpus fills a database with sessions sessions of perSession events each, in one
// set-based INSERT … SELECT over generate_series per table (issue 28: search over a large
// corpus without a client round trip per row). Session i (1-based) has the id
// md5(i)::uuid, the title "Session <i>" and the folder /w/p<i%10>; its event k (0-based) is a
// user-prompt, markdown, tool or tool-result (k%4), turn k/2, whose text holds the words
// w<(i*131+k*7)%2000> and w<(i*17+k*13)%2000>, then "ok". Each word wN thus
// appears in about 2·sessions·perSession/2000 events. Every body is a valid StreamEvent.
func SearchCorpus(ctx context.Context, c *pgx.Conn, sessions, perSession int) error {
	if _, err := c.Exec(ctx, `
		INSERT INTO sessions (id, title, title_set, project_root, cwd, agent_id, status, event_count, turn_count, last_turn_id, updated_at)
		SELECT md5(i::text)::uuid, 'Session ' || i, true, '/w', '/w/p' || (i % 10), 'build', 'idle',
		       $2, ($2 + 1) / 2, 't' || (($2 - 1) / 2), now() - make_interval(secs => i)
		  FROM generate_series(1, $1) AS i`, sessions, perSession); err != nil {
		return fmt.Errorf("search corpus sessions: %w", err)
	}
	// The events' secondary indexes are built once after the insert, from their own definitions
	// (pg_get_indexdef), as a bulk load does: the same indexes, built in seconds rather than
	// maintained row by row.
	rows, err := c.Query(ctx, `SELECT i.relname, pg_get_indexdef(x.indexrelid) FROM pg_index x
		JOIN pg_class i ON i.oid = x.indexrelid WHERE x.indrelid = 'events'::regclass AND NOT x.indisprimary`)
	if err != nil {
		return err
	}
	var names, defs []string
	for rows.Next() {
		var n, d string
		if err := rows.Scan(&n, &d); err != nil {
			rows.Close()
			return err
		}
		names, defs = append(names, n), append(defs, d)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for _, n := range names {
		if _, err := c.Exec(ctx, `DROP INDEX `+pgx.Identifier{n}.Sanitize()); err != nil {
			return err
		}
	}
	if _, err := c.Exec(ctx, `
		INSERT INTO events (session_id, pos, turn_pos, turn_id, kind, body, doc)
		SELECT md5(i::text)::uuid, k, k / 2, 't' || (k / 2), kd,
		       CASE kd
		         WHEN 'user-prompt' THEN json_build_object('kind', kd, 'text', doc, 'turnId', 't' || (k / 2))
		         WHEN 'markdown' THEN json_build_object('kind', kd, 'text', doc, 'streaming', false, 'turnId', 't' || (k / 2))
		         WHEN 'tool' THEN json_build_object('kind', kd, 'tool', 'read_file', 'callId', 'c' || k, 'text', doc, 'input', json_build_object('path', 'f.txt'), 'turnId', 't' || (k / 2))
		         ELSE json_build_object('kind', kd, 'tool', 'read_file', 'callId', 'c' || (k - 1), 'text', doc, 'turnId', 't' || (k / 2))
		       END::text,
		       doc
		  FROM generate_series(1, $1) AS i, generate_series(0, $2 - 1) AS k,
		       LATERAL (SELECT (ARRAY['user-prompt', 'markdown', 'tool', 'tool-result'])[k % 4 + 1] AS kd,
		                       'w' || ((i * 131 + k * 7) % 2000) || ' w' || ((i * 17 + k * 13) % 2000) || ' ok' AS doc) AS g`, sessions, perSession); err != nil {
		return fmt.Errorf("search corpus events: %w", err)
	}
	if _, err := c.Exec(ctx, `SET maintenance_work_mem = '256MB'`); err != nil {
		return err
	}
	for _, d := range defs {
		if _, err := c.Exec(ctx, d); err != nil {
			return fmt.Errorf("search corpus: %s: %w", d, err)
		}
	}
	_, err = c.Exec(ctx, `ANALYZE sessions; ANALYZE events`)
	return err
}
