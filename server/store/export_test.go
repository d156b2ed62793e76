package store

// SetPGBinGlob points the versioned-binaries lookup at g and returns a func
// restoring the previous value.
func SetPGBinGlob(g string) (restore func()) {
	old := pgBinGlob
	pgBinGlob = g
	return func() { pgBinGlob = old }
}
