package gitx

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestFieldCase_T01_CloneRunsNoConfiguredFilter: a clone's checkout runs no filter driver of the
// operator's global config (Git LFS's filter-process is one) on the cloned repository's files,
// whatever its .gitattributes name: the clone's call neutralizes them as every other call does.
// Variants: a process driver marked required; a destination inside a repository.
func TestFieldCase_T01_CloneRunsNoConfiguredFilter(t *testing.T) {
	src := newRepo(t)
	write(t, src, ".gitattributes", "*.txt filter=x\n*.bin filter=p\n")
	write(t, src, "e.bin", "raw\n")
	gitT(t, src, "add", ".")
	gitT(t, src, "commit", "-q", "-m", "attributes")
	marker := filepath.Join(t.TempDir(), "ran")
	home := t.TempDir()
	write(t, home, ".gitconfig", "[filter \"x\"]\n\tsmudge = touch "+marker+"; cat\n\tclean = cat\n"+
		"[filter \"p\"]\n\tprocess = touch "+marker+"\n\trequired = true\n")
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(home, ".config"))
	parent, _ := filepath.EvalSymlinks(t.TempDir())
	var r Runner
	require.NoError(t, r.Clone(ctx(t), src, filepath.Join(parent, "c"), nil))
	assert.NoFileExists(t, marker, "a configured filter ran on the clone's checkout")
	assert.Equal(t, "raw\n", readFile(filepath.Join(parent, "c", "e.bin")))
	assert.FileExists(t, filepath.Join(parent, "c", "a.txt"))

	// The check reads no config of a repository that holds the destination (git clone reads
	// none): a broken one there does not stop the clone.
	outer := newRepo(t)
	write(t, outer, ".git/config", "[[[ broken\n")
	require.NoError(t, r.Clone(ctx(t), src, filepath.Join(outer, "inner"), nil))
	assert.NoFileExists(t, marker)
}
