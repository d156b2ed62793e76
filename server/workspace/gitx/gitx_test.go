package gitx

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zidane-server/zidane/server/workspace/watch"
)

// gitT runs the real git in dir as a test's "other process" would (with hooks and config as the
// repository has them) and returns its trimmed output.
func gitT(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=Ada", "GIT_AUTHOR_EMAIL=ada@example.com", "GIT_COMMITTER_NAME=Ada", "GIT_COMMITTER_EMAIL=ada@example.com", "GIT_CONFIG_NOSYSTEM=1")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "git %v: %s", args, out)
	return strings.TrimSpace(string(out))
}

func write(t *testing.T, dir, rel, content string) {
	t.Helper()
	p := filepath.Join(dir, rel)
	require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
}

// newRepo makes a repository with one commit on main holding a.txt, b.txt, c.txt, d.txt.
func newRepo(t *testing.T) string {
	t.Helper()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	gitT(t, dir, "init", "-q", "-b", "main")
	for _, f := range []string{"a.txt", "b.txt", "c.txt", "d.txt"} {
		write(t, dir, f, strings.Repeat(f+" line\n", 20))
	}
	gitT(t, dir, "add", ".")
	gitT(t, dir, "commit", "-q", "-m", "first\n\nthe body")
	return dir
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return c
}

func TestStatusEveryKindOfChange(t *testing.T) {
	dir := newRepo(t)
	// A conflict: two branches change c.txt differently, then merge.
	gitT(t, dir, "checkout", "-q", "-b", "other")
	write(t, dir, "c.txt", "theirs\n")
	gitT(t, dir, "commit", "-q", "-am", "theirs")
	gitT(t, dir, "checkout", "-q", "main")
	write(t, dir, "c.txt", "ours\n")
	gitT(t, dir, "commit", "-q", "-am", "ours")
	cmd := exec.Command("git", "merge", "-q", "other")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_COMMITTER_NAME=Ada", "GIT_COMMITTER_EMAIL=ada@example.com")
	_ = cmd.Run()                                              // exits 1: the conflict
	gitT(t, dir, "mv", "a.txt", "renamed.txt")                 // staged rename
	write(t, dir, "b.txt", "changed\n")                        // unstaged modify
	require.NoError(t, os.Remove(filepath.Join(dir, "d.txt"))) // unstaged delete
	write(t, dir, "new.txt", "new\n")
	gitT(t, dir, "add", "new.txt")            // staged add
	write(t, dir, "sub/untracked.txt", "u\n") // untracked in a folder

	var r Runner
	st, err := r.Status(ctx(t), dir)
	require.NoError(t, err)
	assert.Equal(t, "main", st.Branch)
	assert.Len(t, st.Head, 40)
	assert.Equal(t, []Conflict{{Path: "c.txt", Kind: "both-modified"}}, st.Conflicted)
	assert.Contains(t, st.Staged, Change{Path: "renamed.txt", From: "a.txt", Kind: "renamed", Similarity: 100})
	assert.Contains(t, st.Staged, Change{Path: "new.txt", Kind: "added"})
	assert.Contains(t, st.Unstaged, Change{Path: "b.txt", Kind: "modified"})
	assert.Contains(t, st.Unstaged, Change{Path: "d.txt", Kind: "deleted"})
	assert.Equal(t, []string{"sub/untracked.txt"}, st.Untracked)
	assert.Empty(t, st.Upstream)
	assert.False(t, st.HasAheadBehind)
}

func TestStatusUpstreamAheadBehindAndEmptyRepo(t *testing.T) {
	origin := newRepo(t)
	parent, _ := filepath.EvalSymlinks(t.TempDir())
	gitT(t, parent, "clone", "-q", origin, "c")
	clone := filepath.Join(parent, "c")
	write(t, clone, "a.txt", "local\n")
	gitT(t, clone, "commit", "-q", "-am", "local 1")
	write(t, origin, "b.txt", "remote\n")
	gitT(t, origin, "commit", "-q", "-am", "remote 1")
	write(t, origin, "c.txt", "remote\n")
	gitT(t, origin, "commit", "-q", "-am", "remote 2")
	gitT(t, clone, "fetch", "-q")
	var r Runner
	st, err := r.Status(ctx(t), clone)
	require.NoError(t, err)
	assert.Equal(t, "origin/main", st.Upstream)
	assert.True(t, st.HasAheadBehind)
	assert.Equal(t, 1, st.Ahead)
	assert.Equal(t, 2, st.Behind)

	empty, _ := filepath.EvalSymlinks(t.TempDir())
	gitT(t, empty, "init", "-q", "-b", "trunk")
	st, err = r.Status(ctx(t), empty)
	require.NoError(t, err)
	assert.Equal(t, "trunk", st.Branch)
	assert.Empty(t, st.Head)
	log, err := r.Log(ctx(t), empty, LogOptions{})
	require.NoError(t, err)
	assert.Empty(t, log)
}

func TestOpenRefusesNonRepo(t *testing.T) {
	var r Runner
	_, err := r.Open(ctx(t), t.TempDir())
	require.ErrorIs(t, err, ErrNotRepository)
	dir := newRepo(t)
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "x", "y"), 0o755))
	repo, err := r.Open(ctx(t), filepath.Join(dir, "x", "y"))
	require.NoError(t, err)
	assert.Equal(t, dir, repo.Top)
	assert.Equal(t, filepath.Join(dir, ".git"), repo.GitDir)
	assert.Equal(t, filepath.Join(dir, ".git"), repo.CommonDir)
}

func TestDiffWorkTreeIndexAndOneFile(t *testing.T) {
	dir := newRepo(t)
	write(t, dir, "a.txt", "a.txt line\nnew line\n")
	write(t, dir, "b.txt", "b changed\n")
	write(t, dir, "bin.dat", "\x00\x01\x02")
	gitT(t, dir, "add", "b.txt", "bin.dat")
	var r Runner
	d, err := r.Diff(ctx(t), dir, DiffOptions{Context: -1})
	require.NoError(t, err)
	require.Len(t, d.Files, 1)
	assert.Equal(t, "a.txt", d.Files[0].Path)
	assert.Equal(t, 1, d.Files[0].Added)
	assert.Equal(t, 19, d.Files[0].Deleted)
	assert.Contains(t, d.Patch, "diff --git a/a.txt b/a.txt")
	assert.Contains(t, d.Patch, "+new line")

	d, err = r.Diff(ctx(t), dir, DiffOptions{Staged: true, Context: -1})
	require.NoError(t, err)
	require.Len(t, d.Files, 2)
	assert.Equal(t, FileStat{Change: Change{Path: "b.txt", Kind: "modified"}, Added: 1, Deleted: 20}, d.Files[0])
	assert.Equal(t, "bin.dat", d.Files[1].Path)
	assert.True(t, d.Files[1].Binary)
	assert.Contains(t, d.Patch, "Binary files /dev/null and b/bin.dat differ")

	d, err = r.Diff(ctx(t), dir, DiffOptions{Staged: true, Path: "bin.dat", Context: -1})
	require.NoError(t, err)
	require.Len(t, d.Files, 1)
	assert.NotContains(t, d.Patch, "b.txt")

	d, err = r.Diff(ctx(t), dir, DiffOptions{Staged: true, Path: "b.txt", Context: 0, MaxPatchBytes: 40})
	require.NoError(t, err)
	assert.True(t, d.Truncated)
	assert.Len(t, d.Patch, 40)
}

func TestCommitInfoAndLog(t *testing.T) {
	dir := newRepo(t)
	gitT(t, dir, "mv", "a.txt", "moved.txt")
	require.NoError(t, os.Remove(filepath.Join(dir, "d.txt")))
	write(t, dir, "b.txt", "b\n")
	write(t, dir, "n.txt", "n\n")
	gitT(t, dir, "add", "-A")
	gitT(t, dir, "commit", "-q", "-m", "second: ünïcode\n\nline one\nline two")
	var r Runner
	c, err := r.CommitInfo(ctx(t), dir, "HEAD")
	require.NoError(t, err)
	assert.Equal(t, gitT(t, dir, "rev-parse", "HEAD"), c.SHA)
	assert.Equal(t, []string{gitT(t, dir, "rev-parse", "HEAD~1")}, c.Parents)
	assert.Equal(t, "second: ünïcode", c.Subject)
	assert.Equal(t, "line one\nline two", c.Body)
	assert.Equal(t, Person{Name: "Ada", Email: "ada@example.com", At: c.Author.At}, c.Author)
	assert.InDelta(t, time.Now().UnixMilli(), c.Author.At, 60_000)
	kinds := map[string]string{}
	for _, f := range c.Files {
		kinds[f.Path] = f.Kind
	}
	assert.Equal(t, map[string]string{"moved.txt": "renamed", "d.txt": "deleted", "b.txt": "modified", "n.txt": "added"}, kinds)

	root, err := r.CommitInfo(ctx(t), dir, "HEAD~1")
	require.NoError(t, err)
	assert.Empty(t, root.Parents)
	assert.Len(t, root.Files, 4)
	assert.Equal(t, "the body", root.Body)

	_, err = r.CommitInfo(ctx(t), dir, "--output=/tmp/x")
	require.ErrorIs(t, err, ErrUnknownRevision)
	_, err = r.CommitInfo(ctx(t), dir, "nope")
	require.ErrorIs(t, err, ErrUnknownRevision)

	log, err := r.Log(ctx(t), dir, LogOptions{Limit: 1})
	require.NoError(t, err)
	require.Len(t, log, 1)
	assert.Equal(t, c.SHA, log[0].SHA)
	log, err = r.Log(ctx(t), dir, LogOptions{})
	require.NoError(t, err)
	require.Len(t, log, 2)
	assert.Equal(t, "first", log[1].Subject)
	log, err = r.Log(ctx(t), dir, LogOptions{Path: "n.txt"})
	require.NoError(t, err)
	require.Len(t, log, 1)
}

// TestNoRepositoryCodeRuns arms every program a repository's config can name: hooks, an
// fsmonitor, an external diff, a textconv driver, clean/smudge filters, a credential helper and a
// remote upload-pack command; the runner's reads and writes run none of them.
func TestNoRepositoryCodeRuns(t *testing.T) {
	dir := newRepo(t)
	marker := filepath.Join(t.TempDir(), "ran")
	evil := "echo >>" + marker + " "
	hooks := filepath.Join(dir, ".git", "hooks")
	for _, h := range []string{"post-checkout", "pre-commit", "reference-transaction", "pre-push", "post-merge"} {
		write(t, hooks, h, "#!/bin/sh\n"+evil+h+"\n")
		require.NoError(t, os.Chmod(filepath.Join(hooks, h), 0o755))
	}
	for k, v := range map[string]string{
		"core.fsmonitor":           evil + "fsmonitor",
		"diff.external":            evil + "extdiff",
		"diff.evil.textconv":       evil + "textconv",
		"diff.evil.command":        evil + "diffcommand",
		"filter.Evil.clean":        evil + "clean",
		"filter.Evil.smudge":       evil + "smudge",
		"filter.Evil.required":     "true",
		"credential.helper":        "!" + evil + "credential",
		"remote.origin.url":        dir,
		"remote.origin.uploadpack": evil + "uploadpack; git-upload-pack",
		"core.pager":               evil + "pager",
	} {
		gitT(t, dir, "config", k, v)
	}
	write(t, dir, ".gitattributes", "*.txt diff=evil filter=Evil\n")
	write(t, dir, "a.txt", "changed\n")
	// Status, diffs, log and commit facts.
	var r Runner
	_, err := r.Status(ctx(t), dir)
	require.NoError(t, err)
	_, err = r.Diff(ctx(t), dir, DiffOptions{Context: -1})
	require.NoError(t, err)
	_, err = r.Log(ctx(t), dir, LogOptions{})
	require.NoError(t, err)
	_, err = r.CommitInfo(ctx(t), dir, "HEAD")
	require.NoError(t, err)
	// Writes: a branch and a checkout.
	require.NoError(t, r.CreateBranch(ctx(t), dir, "feature", "", true))
	// The configured git without the runner does run them (the trap is armed).
	_, err = os.Stat(marker)
	require.True(t, os.IsNotExist(err), "the runner ran repository code: %s", readFile(marker))
	gitT(t, dir, "checkout", "-q", "main")
	gitT(t, dir, "diff")
	assert.FileExists(t, marker, "the trap should fire for plain git")
}

func readFile(p string) string {
	b, _ := os.ReadFile(p)
	return string(b)
}

func TestCheckoutAndCreateBranch(t *testing.T) {
	dir := newRepo(t)
	var r Runner
	require.NoError(t, r.CreateBranch(ctx(t), dir, "feat/x", "", false))
	st, _ := r.Status(ctx(t), dir)
	assert.Equal(t, "main", st.Branch)
	require.NoError(t, r.Checkout(ctx(t), dir, "feat/x"))
	st, _ = r.Status(ctx(t), dir)
	assert.Equal(t, "feat/x", st.Branch)
	require.ErrorIs(t, r.CreateBranch(ctx(t), dir, "bad..name", "", true), ErrBadName)
	require.ErrorIs(t, r.CreateBranch(ctx(t), dir, "-f", "", true), ErrBadName)
	require.ErrorIs(t, r.Checkout(ctx(t), dir, "--orphan=x"), ErrBadName)
	err := r.Checkout(ctx(t), dir, "no-such-branch")
	var ge *Error
	require.ErrorAs(t, err, &ge)
	assert.Contains(t, ge.Error(), "no-such-branch")
	// A detached checkout.
	sha := gitT(t, dir, "rev-parse", "HEAD")
	require.NoError(t, r.Checkout(ctx(t), dir, sha))
	st, _ = r.Status(ctx(t), dir)
	assert.Empty(t, st.Branch)
	assert.Equal(t, sha, st.Head)
}

func TestSyncPullsRefusesLocalPushChecksEveryURL(t *testing.T) {
	src := newRepo(t)
	parent, _ := filepath.EvalSymlinks(t.TempDir())
	gitT(t, parent, "clone", "-q", "--bare", src, "remote.git")
	bare := filepath.Join(parent, "remote.git")
	gitT(t, parent, "clone", "-q", bare, "a")
	gitT(t, parent, "clone", "-q", bare, "b")
	a, b := filepath.Join(parent, "a"), filepath.Join(parent, "b")
	write(t, b, "b.txt", "from b\n")
	gitT(t, b, "commit", "-q", "-am", "from b")
	gitT(t, b, "push", "-q")
	var r Runner
	var seen []string
	check := func(u string) error { seen = append(seen, u); return nil }
	res, err := r.Sync(ctx(t), a, check)
	require.NoError(t, err)
	assert.Equal(t, &SyncResult{Pulled: 1}, res)
	assert.Equal(t, []string{bare, bare}, seen, "the fetch URL and the push URL")
	// A push to a local repository is refused: its receive side would run its hooks.
	write(t, a, "a.txt", "from a\n")
	gitT(t, a, "commit", "-q", "-am", "from a")
	before := gitT(t, bare, "rev-parse", "main")
	_, err = r.Sync(ctx(t), a, check)
	require.ErrorIs(t, err, ErrLocalPush)
	assert.Equal(t, before, gitT(t, bare, "rev-parse", "main"))
	// Every URL git would use is checked, rewritten as git rewrites it.
	gitT(t, a, "config", "remote.origin.pushurl", "ssh://example.invalid/p.git")
	gitT(t, a, "config", "url.ssh://example.invalid/.pushInsteadOf", "ssh://rewrite.invalid/")
	gitT(t, a, "config", "--add", "remote.origin.pushurl", "ssh://rewrite.invalid/q.git")
	gitT(t, a, "config", "url."+parent+"/.insteadOf", "/nowhere/")
	gitT(t, a, "config", "--add", "remote.origin.url", "/nowhere/remote.git")
	seen = nil
	_, err = r.Sync(ctx(t), a, func(u string) error { seen = append(seen, u); return errors.New("refused") })
	require.Error(t, err)
	assert.Equal(t, []string{bare}, seen, "refused at the first URL")
	seen = nil
	_, _ = r.Sync(ctx(t), a, func(u string) error { seen = append(seen, u); return nil })
	assert.Equal(t, []string{bare, bare, "ssh://example.invalid/p.git", "ssh://rewrite.invalid/q.git"}, seen)
	gitT(t, a, "config", "--unset-all", "remote.origin.pushurl")
	gitT(t, a, "reset", "-q", "--hard", "origin/main")
	// Diverged: refused.
	write(t, b, "c.txt", "b again\n")
	gitT(t, b, "commit", "-q", "-am", "b again")
	write(t, a, "d.txt", "a again\n")
	gitT(t, a, "commit", "-q", "-am", "a again")
	gitT(t, a, "push", "-q")
	_, err = r.Sync(ctx(t), b, check)
	require.ErrorIs(t, err, ErrDiverged)
	// No upstream.
	_, err = r.Sync(ctx(t), src, check)
	require.ErrorIs(t, err, ErrNoUpstream)
}

func TestCloneProgressAndNoHalfMadeFolder(t *testing.T) {
	src := newRepo(t)
	for i := 0; i < 30; i++ {
		write(t, src, filepath.Join("many", strings.Repeat("x", i+1)), strings.Repeat("content ", 100*i))
	}
	gitT(t, src, "add", ".")
	gitT(t, src, "commit", "-q", "-m", "many")
	parent, _ := filepath.EvalSymlinks(t.TempDir())
	dest := filepath.Join(parent, "clone")
	var r Runner
	var mu sync.Mutex
	var phases []Progress
	require.NoError(t, r.Clone(ctx(t), src, dest, func(p Progress) { mu.Lock(); phases = append(phases, p); mu.Unlock() }))
	assert.FileExists(t, filepath.Join(dest, "many", "xxx"))
	require.NotEmpty(t, phases)
	names := map[string]bool{}
	for _, p := range phases {
		names[p.Phase] = true
		assert.True(t, p.Percent >= 0 && p.Percent <= 100, "%+v", p)
	}
	assert.True(t, names["receiving"], "phases: %+v", phases)
	entries, _ := os.ReadDir(parent)
	assert.Len(t, entries, 1, "only the clone is left in the parent")

	// Into an existing folder: refused, nothing changed.
	require.ErrorIs(t, r.Clone(ctx(t), src, dest, nil), ErrExists)
	// A failed clone (no such source) leaves nothing.
	err := r.Clone(ctx(t), filepath.Join(parent, "nope"), filepath.Join(parent, "failed"), nil)
	require.Error(t, err)
	entries, _ = os.ReadDir(parent)
	assert.Len(t, entries, 1)
	// A cancelled clone leaves nothing.
	cctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.ErrorIs(t, r.Clone(cctx, src, filepath.Join(parent, "cancelled"), nil), context.Canceled)
	entries, _ = os.ReadDir(parent)
	assert.Len(t, entries, 1)
	// A scheme off the allowlist is refused by git itself.
	err = r.Clone(ctx(t), "ext::sh -c touch% /tmp/zidane-ext-ran", filepath.Join(parent, "ext"), nil)
	require.Error(t, err)
	assert.NoFileExists(t, "/tmp/zidane-ext-ran")
}

func TestReadSide(t *testing.T) {
	dir := newRepo(t)
	write(t, dir, "a.txt", "new a\n")
	write(t, dir, "added.txt", "staged\n")
	gitT(t, dir, "add", "added.txt")
	write(t, dir, "added.txt", "staged then changed\n")
	var r Runner
	repo, err := r.Open(ctx(t), dir)
	require.NoError(t, err)
	old, err := r.ReadSide(ctx(t), repo, "a.txt", SideOld, 1<<20)
	require.NoError(t, err)
	assert.Equal(t, strings.Repeat("a.txt line\n", 20), string(old))
	nw, err := r.ReadSide(ctx(t), repo, "a.txt", SideNew, 1<<20)
	require.NoError(t, err)
	assert.Equal(t, "new a\n", string(nw))
	old, err = r.ReadSide(ctx(t), repo, "added.txt", SideOld, 1<<20)
	require.NoError(t, err)
	assert.Equal(t, "staged\n", string(old))
	_, err = r.ReadSide(ctx(t), repo, "a.txt", SideOld, 10)
	require.ErrorIs(t, err, ErrTooLarge)
	_, err = r.ReadSide(ctx(t), repo, "../etc/passwd", SideNew, 1<<20)
	require.ErrorIs(t, err, ErrNotFound)
	require.NoError(t, os.Symlink("/etc/passwd", filepath.Join(dir, "link")))
	_, err = r.ReadSide(ctx(t), repo, "link", SideNew, 1<<20)
	require.ErrorIs(t, err, ErrNotFound)
	_, err = r.ReadSide(ctx(t), repo, "untracked-nothing", SideOld, 1<<20)
	require.ErrorIs(t, err, ErrNotFound)
}

func TestWatchRefsCoalescedFromAnotherProcess(t *testing.T) {
	dir := newRepo(t)
	var r Runner
	repo, err := r.Open(ctx(t), dir)
	require.NoError(t, err)
	moves := make(chan Refs, 16)
	w, err := r.WatchRefs(watch.New(0), repo, RefWatchOptions{}, func(x Refs) { moves <- x })
	require.NoError(t, err)
	defer w.Close()
	write(t, dir, "a.txt", "x\n")
	gitT(t, dir, "commit", "-q", "-am", "moved") // another process: HEAD's branch moves
	select {
	case m := <-moves:
		assert.Equal(t, "main", m.Branch)
		assert.Equal(t, gitT(t, dir, "rev-parse", "HEAD"), m.Head)
	case <-time.After(5 * time.Second):
		t.Fatal("no move reported after a commit")
	}
	// One commit is one move: its several file events were coalesced.
	select {
	case m := <-moves:
		t.Fatalf("a second move for one commit: %+v", m)
	case <-time.After(400 * time.Millisecond):
	}
	// A branch switch; then a new branch under a new folder (refs/heads/feat/).
	gitT(t, dir, "checkout", "-q", "-b", "feat/one")
	m := <-moves
	assert.Equal(t, "feat/one", m.Branch)
	// Writing the index moves no ref: nothing reported.
	write(t, dir, "b.txt", "y\n")
	gitT(t, dir, "add", "b.txt")
	select {
	case m := <-moves:
		t.Fatalf("an index write reported as a move: %+v", m)
	case <-time.After(400 * time.Millisecond):
	}
	gitT(t, dir, "commit", "-q", "-m", "on feat")
	select {
	case m := <-moves:
		assert.Equal(t, "feat/one", m.Branch)
	case <-time.After(5 * time.Second):
		t.Fatal("no move reported for a commit on a branch in a new ref folder")
	}
	require.NoError(t, w.Close())
	gitT(t, dir, "commit", "-q", "--allow-empty", "-m", "after close")
	select {
	case m := <-moves:
		t.Fatalf("a move after Close: %+v", m)
	case <-time.After(400 * time.Millisecond):
	}
}

// fakeSSH puts an ssh on PATH that logs the command git asks the remote host to run and runs it
// on this machine (a remote host that is this one); it returns the log's path.
func fakeSSH(t *testing.T) string {
	bin := t.TempDir()
	log := filepath.Join(t.TempDir(), "ssh.log")
	write(t, bin, "ssh", "#!/bin/sh\nfor last; do :; done\nprintf '%s\\n' \"$last\" >> "+log+"\nexec sh -c \"$last\"\n")
	require.NoError(t, os.Chmod(filepath.Join(bin, "ssh"), 0o755))
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	return log
}

// TestSyncRunsNoRemoteCommandOfTheRepository arms a remote's upload-pack and receive-pack
// commands and an ssh command in a clone's config; Sync's fetch and push over ssh (to a push URL
// of its own) run none of them: the remote host is asked for git-upload-pack and git-receive-pack.
func TestSyncRunsNoRemoteCommandOfTheRepository(t *testing.T) {
	src := newRepo(t)
	parent, _ := filepath.EvalSymlinks(t.TempDir())
	gitT(t, parent, "clone", "-q", "--bare", src, "remote.git")
	gitT(t, parent, "clone", "-q", "--bare", src, "push.git")
	gitT(t, parent, "clone", "-q", "remote.git", "c")
	clone := filepath.Join(parent, "c")
	log := fakeSSH(t)
	gitT(t, clone, "remote", "set-url", "origin", "ssh://host.invalid"+parent+"/remote.git")
	gitT(t, clone, "remote", "set-url", "--push", "origin", "ssh://host.invalid"+parent+"/push.git")
	marker := filepath.Join(t.TempDir(), "ran")
	evil := "echo >>" + marker + " "
	gitT(t, clone, "config", "remote.origin.uploadpack", evil+"uploadpack; git-upload-pack")
	gitT(t, clone, "config", "remote.origin.receivepack", evil+"receivepack; git-receive-pack")
	gitT(t, clone, "config", "core.sshCommand", evil+"ssh")
	write(t, clone, "a.txt", "local\n")
	gitT(t, clone, "commit", "-q", "-am", "local")
	var r Runner
	res, err := r.Sync(ctx(t), clone, func(string) error { return nil })
	require.NoError(t, err)
	assert.Equal(t, 1, res.Pushed)
	assert.Equal(t, gitT(t, clone, "rev-parse", "HEAD"), gitT(t, filepath.Join(parent, "push.git"), "rev-parse", "main"), "pushed to the push URL")
	_, err = os.Stat(marker)
	require.True(t, os.IsNotExist(err), "the runner ran a remote command of the repository: %s", readFile(marker))
	assert.Equal(t, "git-upload-pack '"+parent+"/remote.git'\ngit-receive-pack '"+parent+"/push.git'\n", readFile(log))
	plain := exec.Command("git", "fetch", "-q") // fails: the armed ssh command only echoes
	plain.Dir = clone
	_ = plain.Run()
	assert.FileExists(t, marker, "the trap should fire for plain git")
}

// TestWatchRefsFolderBound (field case T10): a repository with more ref folders than the bound
// takes only MaxFolders of the server's watches, and a ref moved in a folder left unwatched is
// still reported, by the poll.
func TestWatchRefsFolderBound(t *testing.T) {
	dir := newRepo(t)
	var r Runner
	repo, err := r.Open(ctx(t), dir)
	require.NoError(t, err)
	head := gitT(t, dir, "rev-parse", "HEAD")
	for i := range 40 { // 40 folders refs/heads/f<i>/ with one branch each
		p := filepath.Join(repo.CommonDir, "refs", "heads", fmt.Sprintf("f%02d", i))
		require.NoError(t, os.MkdirAll(p, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(p, "b"), []byte(head+"\n"), 0o644))
	}
	w := watch.New(0)
	moves := make(chan Refs, 16)
	rw, err := r.WatchRefs(w, repo, RefWatchOptions{MaxFolders: 8, Poll: 150 * time.Millisecond}, func(x Refs) { moves <- x })
	require.NoError(t, err)
	defer rw.Close()
	assert.Equal(t, 8, rw.Folders(), "the watch holds its bound of folders")
	assert.Equal(t, 8, w.Watches(), "and so many kernel watches")
	assert.True(t, rw.Polling(), "the rest is polled")
	gitT(t, dir, "commit", "-q", "--allow-empty", "-m", "x") // main moves: watched
	select {
	case <-moves:
	case <-time.After(5 * time.Second):
		t.Fatal("no move reported for a commit on main")
	}
	// The last folder is not watched (breadth first, by name): move its branch.
	gitT(t, dir, "update-ref", "refs/heads/f39/b", "HEAD") // was HEAD~1
	select {
	case <-moves:
	case <-time.After(5 * time.Second):
		t.Fatal("no move reported for a ref in an unwatched folder")
	}
	require.NoError(t, rw.Close())
	assert.Zero(t, w.Watches(), "Close releases every kernel watch")
	assert.False(t, w.Open(), "and the inotify instance")
}
