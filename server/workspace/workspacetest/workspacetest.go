// Package workspacetest builds the runtime cases' workspace layout for tests: $T/ws is the
// workspace root (with a folder sub/), $T/out lies outside every root and holds victim.txt
// ("original"). "Outside untouched" means victim.txt still says original and nothing new
// appeared under $T/out.
package workspacetest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Layout is one test's $T, $T/ws and $T/out (absolute, links resolved).
type Layout struct {
	T, WS, Out string
}

// New creates the layout in a fresh temporary folder.
func New(t testing.TB) *Layout {
	t.Helper()
	T, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	l := &Layout{T: T, WS: filepath.Join(T, "ws"), Out: filepath.Join(T, "out")}
	require.NoError(t, os.MkdirAll(filepath.Join(l.WS, "sub"), 0o755))
	require.NoError(t, os.MkdirAll(l.Out, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(l.Out, "victim.txt"), []byte("original"), 0o644))
	return l
}

// Link creates the symbolic link ws/name pointing at target.
func (l *Layout) Link(t testing.TB, target, name string) {
	t.Helper()
	require.NoError(t, os.Symlink(target, filepath.Join(l.WS, name)))
}

// Write creates ws/name (and its folders) holding content.
func (l *Layout) Write(t testing.TB, name, content string) {
	t.Helper()
	p := filepath.Join(l.WS, name)
	require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
}

// Read returns ws/name's content.
func (l *Layout) Read(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(l.WS, name))
	require.NoError(t, err)
	return string(b)
}

// Exists reports whether ws/name exists (a dangling link counts).
func (l *Layout) Exists(name string) bool {
	_, err := os.Lstat(filepath.Join(l.WS, name))
	return err == nil
}

// OutsideUntouched asserts victim.txt still says "original" and nothing new appeared in $T/out.
func (l *Layout) OutsideUntouched(t testing.TB) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(l.Out, "victim.txt"))
	require.NoError(t, err)
	assert.Equal(t, "original", string(b))
	des, err := os.ReadDir(l.Out)
	require.NoError(t, err)
	var names []string
	for _, d := range des {
		names = append(names, d.Name())
	}
	assert.Equal(t, []string{"victim.txt"}, names, "nothing new outside")
}
