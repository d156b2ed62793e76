package sandbox

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestFieldCase_T03_HiddenPathNotMovedAway: a command cannot move a hidden path out from under
// its hidden name by renaming a folder that holds it (a hidden path is matched by its path, so
// after `mv .config .old` read_file would read .old/gh/hosts.yml): every folder between a bound
// root and a hidden path inside it is a mount of its own in the view, which rename refuses
// (EBUSY). Variant: a hidden folder two levels down, and its parent renamed by `mv -T`.
func TestFieldCase_T03_HiddenPathNotMovedAway(t *testing.T) {
	ws := t.TempDir()
	file := filepath.Join(ws, ".config", "gh", "hosts.yml")
	dir := filepath.Join(ws, "a", "b", "secrets")
	require.NoError(t, os.MkdirAll(filepath.Dir(file), 0o755))
	require.NoError(t, os.WriteFile(file, []byte("oauth_token: HIDDEN-T03\n"), 0o600))
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "key"), []byte("HIDDEN-T03-KEY\n"), 0o600))
	f := newFixture(t, Options{Hide: []string{file, dir}})
	f.ws = ws
	needSandbox(t, f)
	out, _ := f.run(t, WorkspaceWrite, `mv .config .old; mv a moved; mv -T a/b a/c; mv a/b/secrets x; cat .config/gh/hosts.yml a/b/secrets/key; touch a/b/free.txt; echo end`)
	assert.Contains(t, out, "end")
	assert.NotContains(t, out, "HIDDEN-T03")
	assert.Contains(t, out, "busy", "rename refused as a mount: %s", out)
	assert.FileExists(t, file, "the hidden file is where its name says")
	assert.FileExists(t, filepath.Join(dir, "key"), "the hidden folder is where its name says")
	assert.NoDirExists(t, filepath.Join(ws, ".old"))
	assert.NoDirExists(t, filepath.Join(ws, "moved"))
	assert.FileExists(t, filepath.Join(ws, "a", "b", "free.txt"), "the folders stay writable")
}
