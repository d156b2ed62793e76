package e2e

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zidane-server/zidane/protocol"
	"github.com/zidane-server/zidane/server/store/storetest"
)

// TestFieldCase_T07_LocalURLResolvedAsGitDoes: a local URL is checked as git resolves it, so
// no git.clone or git.sync reads a repository outside the roots. Git's upload-pack tries a
// path, then path.git (a link out of the roots the agent made beside a plain folder of a
// repository inside them); git.sync's fetch resolves a remote's relative path from the
// repository's top and expands "~" to the server user's home.
func TestFieldCase_T07_LocalURLResolvedAsGitDoes(t *testing.T) {
	home := t.TempDir()
	s := startServer(t, serverOpts{dbURL: storetest.URL(t), extra: []string{"--allow-clone"}, env: []string{"HOME=" + home}})
	root := s.opts.root
	outside := t.TempDir()
	secret := filepath.Join(outside, "secret-src")
	makeRepo(t, secret)
	writeFile(t, secret, "secret.txt", "OUTSIDE-SECRET\n")
	repoGit(t, secret, "add", ".")
	repoGit(t, secret, "commit", "-q", "-m", "the secret")
	repoGit(t, outside, "clone", "-q", "--bare", secret, "secret.git")
	repoGit(t, home, "clone", "-q", "--bare", secret, "secret.git")
	secretHead := repoGit(t, secret, "rev-parse", "HEAD")
	admin := dial(t, s, s.mintToken("t07-url-admin", "admin"))
	admin.hello()

	// git.clone of a plain folder of a repository, beside which "sub.git" leads outside.
	proj := filepath.Join(root, "proj")
	makeRepo(t, proj)
	writeFile(t, proj, "sub/keep.txt", "x\n")
	require.NoError(t, os.Symlink(filepath.Join(outside, "secret.git"), filepath.Join(proj, "sub.git")))
	e := admin.callErr("git.clone", map[string]any{"url": filepath.Join(proj, "sub"), "into": "c1"})
	assert.Equal(t, protocol.CodeHandlerFailed, e.Code, "%+v", e)
	assert.NoDirExists(t, filepath.Join(root, "c1"))

	// git.sync of a checkout whose origin is "up.git" (relative) or "~/secret.git": the checks
	// must see what git fetches from, not a folder of that name under the first root.
	src := filepath.Join(root, "src")
	makeRepo(t, src)
	repoGit(t, root, "clone", "-q", "--bare", src, "up.git")
	require.NoError(t, os.MkdirAll(filepath.Join(root, "~"), 0o755))
	repoGit(t, filepath.Join(root, "~"), "clone", "-q", "--bare", src, "secret.git")
	repoGit(t, root, "clone", "-q", "up.git", "p2")
	p2 := filepath.Join(root, "p2")
	require.NoError(t, os.Symlink(filepath.Join(outside, "secret.git"), filepath.Join(p2, "up.git")))
	for _, u := range []string{"up.git", "~/secret.git"} {
		repoGit(t, p2, "config", "remote.origin.url", u)
		e := admin.callErr("git.sync", map[string]any{"cwd": p2})
		assert.Equal(t, protocol.CodeHandlerFailed, e.Code, "%s: %+v", u, e)
		assert.NotContains(t, repoGit(t, p2, "log", "--all", "--format=%H"), secretHead, "%s: the outside repository was fetched", u)
	}
}
