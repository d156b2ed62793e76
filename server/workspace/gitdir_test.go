package workspace

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestInGitDirFindsRepositoriesByWhatTheyHold: bare repositories under any name, a checkout's
// .git and a linked worktree's folder are git folders; a work tree, a folder that only looks
// half like one, and a path beside a repository are not.
func TestInGitDirFindsRepositoriesByWhatTheyHold(t *testing.T) {
	root, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	git := func(args ...string) {
		out, err := exec.Command("git", args...).CombinedOutput()
		require.NoError(t, err, "%s", out)
	}
	git("init", "-q", "--bare", filepath.Join(root, "a", "upstream"))
	git("init", "-q", filepath.Join(root, "proj"))
	git("-C", filepath.Join(root, "proj"), "-c", "user.name=A", "-c", "user.email=a@b", "commit", "-q", "--allow-empty", "-m", "x")
	git("-C", filepath.Join(root, "proj"), "worktree", "add", "-q", filepath.Join(root, "wt"))
	require.NoError(t, os.MkdirAll(filepath.Join(root, "half", "objects"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, "half", "HEAD"), []byte("ref: refs/heads/main\n"), 0o644))
	for rel, want := range map[string]bool{
		"a/upstream/hooks/post-receive":   true,
		"a/upstream/config":               true,
		"proj/.git/config":                true,
		"proj/.git/worktrees/wt/HEAD":     true,
		"proj/README":                     false,
		"wt/README":                       false,
		"a/README":                        false,
		"half/hooks/x":                    false,
		"a/upstream-sibling/hooks/update": false,
	} {
		p := Path{Root: root, Rel: rel}
		assert.Equal(t, want, p.InGitDir(), rel)
	}
	assert.True(t, IsGitDir(filepath.Join(root, "proj", ".git", "worktrees", "wt")), "a linked worktree's folder")
}
