package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zidane-server/zidane/protocol"
	"github.com/zidane-server/zidane/server/store/storetest"
)

// armHooks writes an executable hook of each name into dir that appends its name to marker.
func armHooks(t *testing.T, dir, marker string, names ...string) {
	t.Helper()
	for _, h := range names {
		writeFile(t, dir, h, "#!/bin/sh\nid >>"+marker+"; echo "+h+" >>"+marker+"\n")
		require.NoError(t, os.Chmod(filepath.Join(dir, h), 0o755))
	}
}

// localUpstream makes, in root, a repository src, a bare clone of it up.git, and a checkout proj
// whose origin is up.git.
func localUpstream(t *testing.T, root string) (src, up, proj string) {
	src = filepath.Join(root, "src")
	makeRepo(t, src)
	repoGit(t, root, "clone", "-q", "--bare", src, "up.git")
	repoGit(t, root, "clone", "-q", "up.git", "proj")
	return src, filepath.Join(root, "up.git"), filepath.Join(root, "proj")
}

// receiveHooks are the hooks a repository's receive side runs on a push.
var receiveHooks = []string{"pre-receive", "update", "post-receive", "post-update", "reference-transaction", "push-to-checkout", "proc-receive"}

// TestFieldCase_T01_LocalReceiveHooks: git.sync of a checkout whose upstream is a bare repository
// inside the roots with hooks the agent planted runs none of them as the server's user: the push
// to a local repository is refused, saying why. Variants: a fetch and a clone from a local
// repository (named without .git) whose hooks and config are armed run none of its code, and the
// server's reads of a partial clone do not lazily fetch through its config's upload-pack.
func TestFieldCase_T01_LocalReceiveHooks(t *testing.T) {
	s := startServer(t, serverOpts{dbURL: storetest.URL(t), extra: []string{"--allow-clone"}})
	root := s.opts.root
	src, up, proj := localUpstream(t, root)
	marker := filepath.Join(t.TempDir(), "ran")
	armHooks(t, filepath.Join(up, "hooks"), marker, receiveHooks...)
	writeFile(t, proj, "a.txt", "local-only commit\n")
	repoGit(t, proj, "commit", "-q", "-am", "local-only commit")
	before := repoGit(t, up, "rev-parse", "main")
	admin := dial(t, s, s.mintToken("t01-admin", "admin"))
	admin.hello()

	e := admin.callErr("git.sync", map[string]any{"cwd": proj})
	assert.Equal(t, protocol.CodeHandlerFailed, e.Code)
	assert.Contains(t, e.Message, "does not push to a local repository")
	assert.Contains(t, e.Message, "hooks")
	assert.NoFileExists(t, marker, "a hook of the other repository ran: %s", readAll(marker))
	assert.Equal(t, before, repoGit(t, up, "rev-parse", "main"), "nothing was pushed")

	// Variant: local fetch and clone run no code of the other repository.
	{
		// "upstream" is a bare repository without the .git suffix; proj2 is one commit behind it.
		repoGit(t, root, "clone", "-q", "--bare", src, "upstream")
		upstream := filepath.Join(root, "upstream")
		repoGit(t, root, "clone", "-q", "upstream", "proj2")
		repoGit(t, root, "clone", "-q", "upstream", "w")
		w := filepath.Join(root, "w")
		writeFile(t, w, "b.txt", "upstream moved\n")
		repoGit(t, w, "commit", "-q", "-am", "upstream moved")
		repoGit(t, w, "push", "-q")
		all := append([]string{"pre-upload-pack", "post-upload-pack", "post-checkout", "post-merge", "pre-auto-gc", "post-rewrite"}, receiveHooks...)
		armHooks(t, filepath.Join(upstream, "hooks"), marker, all...)
		armHooks(t, filepath.Join(upstream, "hooks2"), marker, all...)
		evil := "id >>" + marker + "; echo "
		for k, v := range map[string]string{
			"core.hooksPath":                filepath.Join(upstream, "hooks2"),
			"core.fsmonitor":                evil + "fsmonitor",
			"core.alternateRefsCommand":     evil + "alternaterefs",
			"uploadpack.packObjectsHook":    evil + "packobjectshook",
			"remote.origin.uploadpack":      evil + "uploadpack",
			"uploadpack.allowAnySHA1InWant": "true",
		} {
			repoGit(t, upstream, "config", k, v)
		}
		var res protocol.GitSyncResult
		admin.result("git.sync", map[string]any{"cwd": filepath.Join(root, "proj2")}, &res)
		assert.Equal(t, protocol.GitSyncResult{Pulled: 1}, res)
		assert.Equal(t, "upstream moved", repoGit(t, filepath.Join(root, "proj2"), "log", "-1", "--format=%s"))
		var cl protocol.GitCloneResult
		admin.result("git.clone", map[string]any{"url": upstream, "into": "cloned"}, &cl)
		done := waitSignal(admin, "git:clone:progress", func(m map[string]any) bool {
			return m["cloneId"] == cl.CloneID && (m["phase"] == "done" || m["phase"] == "failed")
		})
		require.Equal(t, "done", done["phase"], "%v", done)
		assert.FileExists(t, filepath.Join(root, "cloned", "b.txt"))
		assert.NoFileExists(t, marker, "code of the other repository ran: %s", readAll(marker))
	}

	// Variant: no lazy fetch through a partial clone's upload-pack.
	{
		repoGit(t, src, "config", "uploadpack.allowFilter", "true")
		repoGit(t, root, "clone", "-q", "--filter=blob:none", "--no-checkout", "file://"+src, "partial")
		partial := filepath.Join(root, "partial")
		repoGit(t, partial, "config", "remote.origin.uploadpack", "id >>"+marker+"; git-upload-pack")
		e := admin.callErr("git.commit", map[string]any{"cwd": partial, "rev": "HEAD"})
		assert.Equal(t, protocol.CodeHandlerFailed, e.Code, "the blobs are missing and are not fetched")
		assert.NoFileExists(t, marker, "the partial clone's upload-pack ran: %s", readAll(marker))
		// The trap is armed: plain git fetches the missing blobs through it.
		plain := exec.Command("git", "show", "HEAD")
		plain.Dir = partial
		_ = plain.Run()
		require.FileExists(t, marker)
		require.NoError(t, os.Remove(marker))
	}

	// The trap is armed: a plain push runs the other repository's hooks.
	repoGit(t, proj, "push", "-q")
	assert.FileExists(t, marker)
}

// TestFieldCase_T07_PushURLOutsideRoots: git.sync checks every URL git would push to, not only
// the fetch URL: a remote.<name>.pushurl outside the roots is refused before anything is fetched
// or pushed. Variants: a url.<base>.pushInsteadOf rewrite that leads outside, and a push URL
// naming a remote helper.
func TestFieldCase_T07_PushURLOutsideRoots(t *testing.T) {
	s := startServer(t, serverOpts{dbURL: storetest.URL(t)})
	root := s.opts.root
	src, up, proj := localUpstream(t, root)
	outside := t.TempDir()
	repoGit(t, outside, "clone", "-q", "--bare", src, "outside-remote.git")
	repoGit(t, outside, "clone", "-q", "--bare", src, "up.git")
	writeFile(t, proj, "a.txt", "local-only commit\n")
	repoGit(t, proj, "commit", "-q", "-am", "local-only commit")
	heads := func() []string {
		return []string{repoGit(t, up, "rev-parse", "main"), repoGit(t, outside, "--git-dir=outside-remote.git", "rev-parse", "main"),
			repoGit(t, outside, "--git-dir=up.git", "rev-parse", "main")}
	}
	before := heads()
	admin := dial(t, s, s.mintToken("t07-admin", "admin"))
	admin.hello()

	repoGit(t, proj, "config", "remote.origin.pushurl", filepath.Join(outside, "outside-remote.git"))
	e := admin.callErr("git.sync", map[string]any{"cwd": proj})
	assert.Equal(t, protocol.CodeHandlerFailed, e.Code)
	assert.Contains(t, e.Message, "inside the workspace roots")
	assert.Equal(t, before, heads(), "nothing was pushed anywhere")

	// Variant: pushInsteadOf.
	{
		repoGit(t, proj, "config", "--unset", "remote.origin.pushurl")
		repoGit(t, proj, "config", "url."+outside+"/.pushInsteadOf", root+"/")
		e := admin.callErr("git.sync", map[string]any{"cwd": proj})
		assert.Contains(t, e.Message, "inside the workspace roots")
		assert.Equal(t, before, heads())
		repoGit(t, proj, "config", "--remove-section", "url."+outside+"/")
	}
	// Variant: remote helper push URL.
	{
		repoGit(t, proj, "config", "remote.origin.pushurl", "ext::sh -c touch% "+filepath.Join(outside, "ran"))
		e := admin.callErr("git.sync", map[string]any{"cwd": proj})
		assert.Contains(t, e.Message, "remote helpers")
		assert.NoFileExists(t, filepath.Join(outside, "ran"))
		assert.Equal(t, before, heads())
	}
}
