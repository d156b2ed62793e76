package server

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zidane-server/zidane/protocol"
	"github.com/zidane-server/zidane/server/workspace"
)

// TestResolveCwd: folders inside the roots (symlinks resolved) are accepted; anything outside
// answers the same "outside" message whether it exists or not (adversarial review: a chat token
// could probe which paths exist).
func TestResolveCwd(t *testing.T) {
	base := t.TempDir()
	root := filepath.Join(base, "root")
	require.NoError(t, os.MkdirAll(filepath.Join(root, "proj"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, "file"), nil, 0o644))
	require.NoError(t, os.Symlink("/etc", filepath.Join(root, "escape")))
	require.NoError(t, os.Symlink(filepath.Join(root, "proj"), filepath.Join(base, "inlink")))
	ws, err := workspace.New([]string{root})
	require.NoError(t, err)
	defer ws.Close()
	s := &Server{ws: ws}
	root = ws.Roots()[0]

	_, d, err := s.resolveCwd("")
	require.NoError(t, err)
	assert.Equal(t, root, d)
	_, d, err = s.resolveCwd("proj")
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(root, "proj"), d)

	msg := func(cwd string) string {
		_, _, err := s.resolveCwd(cwd)
		require.Error(t, err, cwd)
		return err.(*protocol.Error).Message
	}
	for _, p := range []string{"/etc", "/etc/passwd", "/no/such/dir", "../..", root + "-sibling", filepath.Join(root, "escape"), filepath.Join(base, "inlink"),
		filepath.Join(root, "escape", "ssl"), filepath.Join(root, "escape", "no-such-dir"), filepath.Join(root, "escape", "a", "b")} {
		assert.Contains(t, msg(p), "is outside the workspace roots", p)
	}
	assert.Contains(t, msg("missing"), "does not exist")
	assert.Contains(t, msg("file"), "is not a folder")
}
