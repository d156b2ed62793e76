package e2e

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zidane-server/zidane/protocol"
	"github.com/zidane-server/zidane/server/store/storetest"
)

// repoGit runs the real git in dir as another process on the server's machine would, and
// returns its trimmed output.
func repoGit(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_AUTHOR_NAME=Ada", "GIT_AUTHOR_EMAIL=ada@example.com", "GIT_COMMITTER_NAME=Ada", "GIT_COMMITTER_EMAIL=ada@example.com")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "git %v: %s", args, out)
	return strings.TrimSpace(string(out))
}

func writeFile(t *testing.T, dir, rel, content string) {
	t.Helper()
	p := filepath.Join(dir, rel)
	require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
}

// makeRepo makes a repository at dir with one commit on main (a.txt … d.txt).
func makeRepo(t *testing.T, dir string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(dir, 0o755))
	repoGit(t, dir, "init", "-q", "-b", "main")
	for _, f := range []string{"a.txt", "b.txt", "c.txt", "d.txt"} {
		writeFile(t, dir, f, strings.Repeat(f+" line\n", 20))
	}
	repoGit(t, dir, "add", ".")
	repoGit(t, dir, "commit", "-q", "-m", "first\n\nthe body")
}

// signalsOf returns the ipc.signal params held or arriving on c within d, of the given kinds.
func signalsOf(c *wsConn, d time.Duration, kinds ...string) []map[string]any {
	c.t.Helper()
	var out []map[string]any
	take := func(b []byte) {
		f := parseFrame(c.t, b)
		if f.Method != "ipc.signal" {
			return
		}
		var m map[string]any
		require.NoError(c.t, json.Unmarshal(f.Params, &m))
		for _, k := range kinds {
			if m["kind"] == k || strings.HasPrefix(m["kind"].(string), k) {
				out = append(out, m)
				return
			}
		}
	}
	for _, b := range c.backlog {
		take(b)
	}
	c.backlog = nil
	deadline := time.After(d)
	for {
		select {
		case b, ok := <-c.frames:
			if !ok {
				return out
			}
			take(b)
		case <-deadline:
			return out
		}
	}
}

// waitSignal reads frames until a signal of kind for which match holds; other frames are
// dropped.
func waitSignal(c *wsConn, kind string, match func(map[string]any) bool) map[string]any {
	c.t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for {
		f := c.next(time.Until(deadline))
		if f.Method != "ipc.signal" {
			continue
		}
		var m map[string]any
		require.NoError(c.t, json.Unmarshal(f.Params, &m))
		if m["kind"] == kind && (match == nil || match(m)) {
			return m
		}
	}
}

func TestGitStatusDiffCommitOverWebSocket(t *testing.T) {
	s := startServer(t, serverOpts{dbURL: storetest.URL(t)})
	dir := filepath.Join(s.opts.root, "proj")
	makeRepo(t, dir)
	// A conflict on c.txt, then one change of every other kind.
	repoGit(t, dir, "checkout", "-q", "-b", "other")
	writeFile(t, dir, "c.txt", "theirs\n")
	repoGit(t, dir, "commit", "-q", "-am", "theirs")
	repoGit(t, dir, "checkout", "-q", "main")
	writeFile(t, dir, "c.txt", "ours\n")
	repoGit(t, dir, "commit", "-q", "-am", "ours")
	merge := exec.Command("git", "merge", "-q", "other")
	merge.Dir = dir
	merge.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_COMMITTER_NAME=Ada", "GIT_COMMITTER_EMAIL=ada@example.com")
	require.Error(t, merge.Run(), "the merge stops on the conflict")
	repoGit(t, dir, "mv", "a.txt", "renamed.txt")
	writeFile(t, dir, "b.txt", "changed\n")
	require.NoError(t, os.Remove(filepath.Join(dir, "d.txt")))
	writeFile(t, dir, "new.txt", "new\n")
	repoGit(t, dir, "add", "new.txt")
	writeFile(t, dir, "sub/untracked.txt", "u\n")

	c := dial(t, s, s.mintToken("git-chat", "chat"))
	c.hello()
	var st protocol.GitStatus
	c.result("git.status", map[string]any{"cwd": filepath.Join(dir, "sub")}, &st)
	assert.Equal(t, dir, st.Root)
	require.NotNil(t, st.Branch)
	assert.Equal(t, "main", *st.Branch)
	assert.Equal(t, []protocol.GitConflict{{Path: "c.txt", Kind: protocol.GitConflictKindBothModified}}, st.Conflicted)
	assert.Contains(t, st.Staged, protocol.GitChange{Path: "renamed.txt", Kind: protocol.GitChangeKindRenamed, From: ptr("a.txt"), Similarity: ptr(100)})
	assert.Contains(t, st.Staged, protocol.GitChange{Path: "new.txt", Kind: protocol.GitChangeKindAdded})
	assert.Contains(t, st.Unstaged, protocol.GitChange{Path: "b.txt", Kind: protocol.GitChangeKindModified})
	assert.Contains(t, st.Unstaged, protocol.GitChange{Path: "d.txt", Kind: protocol.GitChangeKindDeleted})
	assert.Equal(t, []string{"sub/untracked.txt"}, st.Untracked)
	assert.Nil(t, st.Upstream)
	assert.Nil(t, st.Ahead)

	var d protocol.GitDiff
	c.result("git.diff", map[string]any{"cwd": dir, "path": "b.txt"}, &d)
	require.Len(t, d.Files, 1)
	assert.Equal(t, protocol.GitFileStat{Path: "b.txt", Kind: protocol.GitChangeKindModified, Added: 1, Deleted: 20}, d.Files[0])
	assert.Contains(t, d.Patch, "+changed\n")
	assert.False(t, d.Truncated)
	c.result("git.diff", map[string]any{"cwd": dir, "staged": true}, &d)
	paths := []string{}
	for _, f := range d.Files {
		paths = append(paths, f.Path)
	}
	assert.Contains(t, paths, "new.txt")
	assert.Contains(t, paths, "renamed.txt")

	// One commit's facts.
	sha := repoGit(t, dir, "rev-parse", "other")
	var cm protocol.GitCommit
	c.result("git.commit", map[string]any{"cwd": dir, "rev": sha[:10]}, &cm)
	assert.Equal(t, sha, cm.SHA)
	assert.Equal(t, "theirs", cm.Subject)
	assert.Equal(t, protocol.GitPerson{Name: "Ada", Email: "ada@example.com", At: cm.Author.At}, cm.Author)
	assert.Equal(t, []protocol.GitFileStat{{Path: "c.txt", Kind: protocol.GitChangeKindModified, Added: 1, Deleted: 20}}, cm.Files)
	e := c.callErr("git.commit", map[string]any{"cwd": dir, "rev": "no-such-rev"})
	assert.Equal(t, protocol.CodeHandlerFailed, e.Code)
	assert.Contains(t, e.Message, "no-such-rev")

	var log protocol.GitLogResult
	c.result("git.log", map[string]any{"cwd": dir, "limit": 2}, &log)
	require.Len(t, log.Commits, 2)
	assert.Equal(t, "ours", log.Commits[0].Subject)

	// Outside the roots: refused, whether or not it exists.
	e = c.callErr("git.status", map[string]any{"cwd": "/"})
	assert.Equal(t, protocol.CodeHandlerFailed, e.Code)
	assert.Contains(t, e.Message, "outside the workspace roots")
	// A folder inside the roots whose repository's top lies outside them.
	outer := t.TempDir()
	makeRepo(t, outer)
	require.NoError(t, os.Symlink(outer, filepath.Join(s.opts.root, "link")))
	e = c.callErr("git.status", map[string]any{"cwd": filepath.Join(s.opts.root, "link")})
	assert.Contains(t, e.Message, "outside the workspace roots")
	// Not a repository.
	require.NoError(t, os.MkdirAll(filepath.Join(s.opts.root, "plain"), 0o755))
	e = c.callErr("git.status", map[string]any{"cwd": filepath.Join(s.opts.root, "plain")})
	assert.Contains(t, e.Message, "not in a git repository")
}

func TestGitRepositoryWhoseTopLiesOutsideTheRoots(t *testing.T) {
	// The workspace root is a folder inside a repository: the repository's top is outside.
	outer, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	makeRepo(t, outer)
	root := filepath.Join(outer, "inner")
	require.NoError(t, os.MkdirAll(root, 0o755))
	s := startServer(t, serverOpts{dbURL: storetest.URL(t), root: root})
	c := dial(t, s, s.mintToken("git-top", "chat"))
	c.hello()
	e := c.callErr("git.status", map[string]any{"cwd": root})
	assert.Equal(t, protocol.CodeHandlerFailed, e.Code)
	assert.Contains(t, e.Message, "outside the workspace roots")
}

func TestGitCheckoutRefusedToChatDoneByAdmin(t *testing.T) {
	s := startServer(t, serverOpts{dbURL: storetest.URL(t)})
	dir := filepath.Join(s.opts.root, "proj")
	makeRepo(t, dir)
	repoGit(t, dir, "branch", "feature")
	chat := dial(t, s, s.mintToken("co-chat", "chat"))
	chat.hello()
	for _, m := range []string{"git.checkout", "git.createBranch", "git.sync"} {
		e := chat.callErr(m, map[string]any{"cwd": dir, "ref": "feature", "name": "x"})
		assert.Equal(t, protocol.CodeForbidden, e.Code, m)
		assert.Contains(t, e.Message, "admin")
	}
	assert.Equal(t, "main", repoGit(t, dir, "branch", "--show-current"), "nothing changed")

	admin := dial(t, s, s.mintToken("co-admin", "admin"))
	admin.hello()
	var h protocol.GitHead
	admin.result("git.checkout", map[string]any{"cwd": dir, "ref": "feature"}, &h)
	require.NotNil(t, h.Branch)
	assert.Equal(t, "feature", *h.Branch)
	assert.Equal(t, "feature", repoGit(t, dir, "branch", "--show-current"))
	admin.result("git.createBranch", map[string]any{"cwd": dir, "name": "topic/one"}, &h)
	assert.Equal(t, "topic/one", *h.Branch)
	assert.Equal(t, repoGit(t, dir, "rev-parse", "HEAD"), h.Head)
	e := admin.callErr("git.checkout", map[string]any{"cwd": dir, "ref": "--orphan=x"})
	assert.Equal(t, protocol.CodeHandlerFailed, e.Code)
	e = admin.callErr("git.createBranch", map[string]any{"cwd": dir, "name": "bad..name"})
	assert.Contains(t, e.Message, "valid branch")
}

// TestGitNoRepositoryCodeRunsOnServer arms a hook, an fsmonitor, an external diff, a textconv
// driver and clean/smudge filters in the repository's config; the server's git calls run none.
func TestGitNoRepositoryCodeRunsOnServer(t *testing.T) {
	s := startServer(t, serverOpts{dbURL: storetest.URL(t)})
	dir := filepath.Join(s.opts.root, "evil")
	makeRepo(t, dir)
	repoGit(t, dir, "branch", "other")
	marker := filepath.Join(t.TempDir(), "ran")
	evil := "echo >>" + marker + " "
	for _, h := range []string{"post-checkout", "reference-transaction", "pre-commit"} {
		writeFile(t, filepath.Join(dir, ".git", "hooks"), h, "#!/bin/sh\n"+evil+h+"\n")
		require.NoError(t, os.Chmod(filepath.Join(dir, ".git", "hooks", h), 0o755))
	}
	for k, v := range map[string]string{
		"core.fsmonitor":     evil + "fsmonitor",
		"diff.external":      evil + "extdiff",
		"diff.evil.textconv": evil + "textconv",
		"filter.evil.clean":  evil + "clean",
		"filter.evil.smudge": evil + "smudge",
	} {
		repoGit(t, dir, "config", k, v)
	}
	writeFile(t, dir, ".gitattributes", "*.txt diff=evil filter=evil\n")
	writeFile(t, dir, "a.txt", "changed\n")
	admin := dial(t, s, s.mintToken("evil-admin", "admin"))
	admin.hello()
	admin.result("git.status", map[string]any{"cwd": dir}, nil)
	admin.result("git.diff", map[string]any{"cwd": dir}, nil)
	admin.result("git.log", map[string]any{"cwd": dir}, nil)
	admin.result("git.commit", map[string]any{"cwd": dir, "rev": "HEAD"}, nil)
	admin.result("git.checkout", map[string]any{"cwd": dir, "ref": "other"}, nil)
	admin.result("git.createBranch", map[string]any{"cwd": dir, "name": "new"}, nil)
	_, err := os.Stat(marker)
	require.True(t, os.IsNotExist(err), "repository code ran on the server: %s", readAll(marker))
	// The trap is armed: plain git runs it.
	repoGit(t, dir, "checkout", "-q", "main")
	assert.FileExists(t, marker)
}

func readAll(p string) string {
	b, _ := os.ReadFile(p)
	return string(b)
}

func ptr[T any](v T) *T { return &v }

func TestGitCloneLocalProgressOnlyToOrigin(t *testing.T) {
	s := startServer(t, serverOpts{dbURL: storetest.URL(t), extra: []string{"--allow-clone"}})
	src := filepath.Join(s.opts.root, "src")
	makeRepo(t, src)
	for i := 0; i < 20; i++ {
		writeFile(t, src, filepath.Join("many", strings.Repeat("f", i+1)), strings.Repeat("content ", 200*i))
	}
	repoGit(t, src, "add", ".")
	repoGit(t, src, "commit", "-q", "-m", "many")

	a := dial(t, s, s.mintToken("clone-a", "chat"))
	var h struct {
		Clone *bool `json:"clone"`
	}
	a.result("ipc.hello", map[string]any{"protocolVersion": protoVersion}, &h)
	require.NotNil(t, h.Clone)
	assert.True(t, *h.Clone)
	b := dial(t, s, s.mintToken("clone-b", "chat"))
	b.hello()

	var res protocol.GitCloneResult
	a.result("git.clone", map[string]any{"url": src, "into": "copy"}, &res)
	assert.Equal(t, filepath.Join(s.opts.root, "copy"), res.Path)
	var phases []string
	for {
		m := waitSignal(a, "git:clone:progress", func(m map[string]any) bool { return m["cloneId"] == res.CloneID })
		phases = append(phases, m["phase"].(string))
		if p := m["phase"].(string); p == "done" || p == "failed" || p == "cancelled" {
			require.Equal(t, "done", p, "clone ended: %v", m)
			assert.Equal(t, res.Path, m["path"])
			break
		}
	}
	assert.Equal(t, "starting", phases[0])
	assert.Contains(t, phases, "receiving")
	assert.FileExists(t, filepath.Join(res.Path, "many", "fff"))
	assert.Equal(t, repoGit(t, src, "rev-parse", "HEAD"), repoGit(t, res.Path, "rev-parse", "HEAD"))
	entries, err := os.ReadDir(s.opts.root)
	require.NoError(t, err)
	assert.Len(t, entries, 2, "src and copy only: no hidden half-made folder left")

	// The other connection saw none of it.
	b.result("$/ping", map[string]any{}, nil)
	assert.Empty(t, signalsOf(b, 300*time.Millisecond, "git:clone:progress"), "progress goes to the starting connection only")

	// Refusals: a destination outside the roots, an existing one, a source outside the roots,
	// a scheme off the allowlist, a remote helper.
	outside := t.TempDir()
	makeRepo(t, filepath.Join(outside, "elsewhere"))
	for _, tc := range []struct {
		url, into, msg string
	}{
		{src, filepath.Join(outside, "dest"), "inside the workspace roots"},
		{src, "../escape", "inside the workspace roots"},
		{src, "copy", "already exists"},
		{filepath.Join(outside, "elsewhere"), "stolen", "inside the workspace roots"},
		{"file://" + filepath.Join(outside, "elsewhere"), "stolen", "inside the workspace roots"},
		{"git://example.com/x.git", "x", "allowlist"},
		{"ext::sh -c touch% /tmp/pwned", "x", "remote helpers"},
		{"--upload-pack=touch /tmp/pwned", "x", "refused"},
	} {
		e := a.callErr("git.clone", map[string]any{"url": tc.url, "into": tc.into})
		assert.Equal(t, protocol.CodeHandlerFailed, e.Code, "%+v", tc)
		assert.Contains(t, e.Message, tc.msg, "%+v", tc)
	}
	assert.NoDirExists(t, filepath.Join(outside, "dest"))
	assert.NoDirExists(t, filepath.Join(s.opts.root, "stolen"))
	var cc protocol.GitCancelCloneResult
	a.result("git.cancelClone", map[string]any{"cloneId": res.CloneID}, &cc)
	assert.False(t, cc.Cancelled, "an ended clone cannot be cancelled")
}

func TestGitCloneAndTerminalsOffByDefault(t *testing.T) {
	s := startServer(t, serverOpts{dbURL: storetest.URL(t)})
	c := dial(t, s, s.mintToken("off-admin", "admin"))
	var h struct {
		Clone            *bool `json:"clone"`
		ProjectTerminals *bool `json:"projectTerminals"`
	}
	c.result("ipc.hello", map[string]any{"protocolVersion": protoVersion}, &h)
	assert.Nil(t, h.Clone, "absent means no")
	assert.Nil(t, h.ProjectTerminals, "absent means no")
	src := filepath.Join(s.opts.root, "src")
	makeRepo(t, src)
	e := c.callErr("git.clone", map[string]any{"url": src, "into": "copy"})
	assert.Equal(t, protocol.CodeHandlerFailed, e.Code)
	assert.Contains(t, e.Message, "--allow-clone")
	e = c.callErr("terminal.start", map[string]any{"argv": []string{"true"}})
	assert.Equal(t, protocol.CodeHandlerFailed, e.Code)
	assert.Contains(t, e.Message, "--project-terminals")
}

// TestGitCloneCancelledOrDroppedLeavesNothing cancels a clone of a large repository as soon as
// it starts, and drops the connection of another: neither leaves a folder behind.
func TestGitCloneCancelledOrDroppedLeavesNothing(t *testing.T) {
	s := startServer(t, serverOpts{dbURL: storetest.URL(t), extra: []string{"--allow-clone"}})
	src := filepath.Join(s.opts.root, "big")
	makeRepo(t, src)
	buf := make([]byte, 3<<20)
	for i := 0; i < 8; i++ {
		_, err := rand.Read(buf)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(src, fmt.Sprintf("blob%d.bin", i)), buf, 0o644))
	}
	repoGit(t, src, "add", ".")
	repoGit(t, src, "commit", "-q", "-m", "big")
	leftovers := func() []string {
		var out []string
		entries, err := os.ReadDir(s.opts.root)
		require.NoError(t, err)
		for _, e := range entries {
			if e.Name() != "big" {
				out = append(out, e.Name())
			}
		}
		return out
	}

	a := dial(t, s, s.mintToken("cancel-a", "chat"))
	a.hello()
	var res protocol.GitCloneResult
	a.result("git.clone", map[string]any{"url": src, "into": "cancelled"}, &res)
	waitSignal(a, "git:clone:progress", func(m map[string]any) bool { return m["phase"] == "starting" })
	var cc protocol.GitCancelCloneResult
	a.result("git.cancelClone", map[string]any{"cloneId": res.CloneID}, &cc)
	assert.True(t, cc.Cancelled)
	last := waitSignal(a, "git:clone:progress", func(m map[string]any) bool {
		p := m["phase"]
		return p == "done" || p == "failed" || p == "cancelled"
	})
	assert.Equal(t, "cancelled", last["phase"])
	assert.Empty(t, leftovers(), "a cancelled clone leaves nothing")

	b := dial(t, s, s.mintToken("cancel-b", "chat"))
	b.hello()
	b.result("git.clone", map[string]any{"url": src, "into": "dropped"}, &res)
	waitSignal(b, "git:clone:progress", func(m map[string]any) bool { return m["phase"] == "starting" })
	require.NoError(t, b.ws.CloseNow())
	require.Eventually(t, func() bool { return len(leftovers()) == 0 }, 20*time.Second, 50*time.Millisecond, "a dropped connection's clone leaves nothing: %v", leftovers())
}

func TestGitSyncFastForwardsInsideTheRoots(t *testing.T) {
	s := startServer(t, serverOpts{dbURL: storetest.URL(t)})
	src := filepath.Join(s.opts.root, "src")
	makeRepo(t, src)
	repoGit(t, s.opts.root, "clone", "-q", "--bare", src, "remote.git")
	repoGit(t, s.opts.root, "clone", "-q", "remote.git", "a")
	repoGit(t, s.opts.root, "clone", "-q", "remote.git", "b")
	a, b := filepath.Join(s.opts.root, "a"), filepath.Join(s.opts.root, "b")
	writeFile(t, b, "b.txt", "from b\n")
	repoGit(t, b, "commit", "-q", "-am", "from b")
	repoGit(t, b, "push", "-q")
	admin := dial(t, s, s.mintToken("sync-admin", "admin"))
	admin.hello()
	var res protocol.GitSyncResult
	admin.result("git.sync", map[string]any{"cwd": a}, &res)
	assert.Equal(t, protocol.GitSyncResult{Pulled: 1}, res)
	assert.Equal(t, "from b", repoGit(t, a, "log", "-1", "--format=%s"))
	writeFile(t, a, "a.txt", "from a\n")
	repoGit(t, a, "commit", "-q", "-am", "from a")
	// A push to a local repository is refused (its hooks would run; TestFieldCase_T01).
	e := admin.callErr("git.sync", map[string]any{"cwd": a})
	assert.Contains(t, e.Message, "does not push to a local repository")
	assert.Equal(t, repoGit(t, b, "rev-parse", "HEAD"), repoGit(t, filepath.Join(s.opts.root, "remote.git"), "rev-parse", "main"))

	// A remote outside the roots is refused before anything is fetched.
	outside := t.TempDir()
	repoGit(t, outside, "clone", "-q", "--bare", src, "out.git")
	repoGit(t, a, "remote", "set-url", "origin", filepath.Join(outside, "out.git"))
	e = admin.callErr("git.sync", map[string]any{"cwd": a})
	assert.Equal(t, protocol.CodeHandlerFailed, e.Code)
	assert.Contains(t, e.Message, "inside the workspace roots")
	// No upstream.
	e = admin.callErr("git.sync", map[string]any{"cwd": src})
	assert.Contains(t, e.Message, "no upstream")
}

// TestGitWatchRefsFromAnotherProcess: a watching connection gets git:refs after a commit made by
// another process (coalesced into one), a connection that does not watch gets none, and after
// git.unwatch no more arrive.
func TestGitWatchRefsFromAnotherProcess(t *testing.T) {
	s := startServer(t, serverOpts{dbURL: storetest.URL(t)})
	dir := filepath.Join(s.opts.root, "watched")
	makeRepo(t, dir)
	a := dial(t, s, s.mintToken("watch-a", "chat"))
	a.hello()
	b := dial(t, s, s.mintToken("watch-b", "chat"))
	b.hello()
	var w protocol.GitWatchResult
	a.result("git.watch", map[string]any{"cwd": dir}, &w)
	assert.Equal(t, dir, w.Root)
	require.NotNil(t, w.Head)
	a.result("git.watch", map[string]any{"cwd": dir}, nil) // twice is one watch

	writeFile(t, dir, "a.txt", "moved\n")
	repoGit(t, dir, "commit", "-q", "-am", "by another process")
	head := repoGit(t, dir, "rev-parse", "HEAD")
	m := waitSignal(a, "git:refs", nil)
	assert.Equal(t, dir, m["root"])
	assert.Equal(t, "main", m["branch"])
	assert.Equal(t, head, m["head"])
	assert.Empty(t, signalsOf(a, 500*time.Millisecond, "git:refs"), "one commit, one git:refs")

	repoGit(t, dir, "checkout", "-q", "-b", "topic")
	m = waitSignal(a, "git:refs", nil)
	assert.Equal(t, "topic", m["branch"])

	b.result("$/ping", map[string]any{}, nil)
	assert.Empty(t, signalsOf(b, 300*time.Millisecond, "git:refs"), "a connection that does not watch gets none")

	var u protocol.GitUnwatchResult
	a.result("git.unwatch", map[string]any{"cwd": filepath.Join(dir)}, &u)
	repoGit(t, dir, "commit", "-q", "--allow-empty", "-m", "after unwatch")
	assert.Empty(t, signalsOf(a, 800*time.Millisecond, "git:refs"), "none after git.unwatch")
}
