package store

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
)

// SetPGBinGlob points the versioned-binaries lookup at g and returns a func
// restoring the previous value.
func SetPGBinGlob(g string) (restore func()) {
	old := pgBinGlob
	pgBinGlob = g
	return func() { pgBinGlob = old }
}

// PageQueries are the SQL statements of the transcript pages (sessions.loadEvents,
// sessions.getTurns), by name, for the plan test.
var PageQueries = map[string]string{"range": rangeSQL, "firstKind": firstKindSQL, "start": startSQL}

// ProcessGone exposes processGone: pid exited (or is a zombie, or no longer postgres).
var ProcessGone = processGone

// PGCtl runs the cluster's pg_ctl with args as an operator would (as the unprivileged user when
// root), with its output in out; the postmaster it starts is not m's child.
func (m *Managed) PGCtl(ctx context.Context, out *os.File, args ...string) error {
	pgctl := filepath.Join(filepath.Dir(m.bins.postgres), "pg_ctl")
	cmd := exec.CommandContext(ctx, pgctl, append([]string{"-D", m.clusterDir}, args...)...)
	m.prepare(cmd, m.as)
	cmd.Stdout, cmd.Stderr = out, out
	return cmd.Run()
}

// SearchSQL is the statement of SearchSessions (trigram matching or not), for the plan test.
var SearchSQL = searchSQL
