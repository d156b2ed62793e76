package store

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
