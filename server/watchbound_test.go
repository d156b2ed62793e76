package server

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// gitIn runs the real git in dir (as another process of the user would).
func gitIn(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_AUTHOR_NAME=A", "GIT_AUTHOR_EMAIL=a@x", "GIT_COMMITTER_NAME=A", "GIT_COMMITTER_EMAIL=a@x")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "git %v: %s", args, out)
	return strings.TrimSpace(string(out))
}

// newRepos makes n repositories root/r1…rn with one commit each (copies of the first).
func newRepos(t *testing.T, root string, n int) []string {
	t.Helper()
	first := filepath.Join(root, "r1")
	require.NoError(t, os.Mkdir(first, 0o755))
	gitIn(t, first, "init", "-q", "-b", "main")
	gitIn(t, first, "commit", "-q", "--allow-empty", "-m", "x")
	out := []string{first}
	for i := 2; i <= n; i++ {
		d := filepath.Join(root, fmt.Sprintf("r%d", i))
		require.NoError(t, os.CopyFS(d, os.DirFS(first)))
		out = append(out, d)
	}
	return out
}

// inotify counts this process's inotify instances (its /proc/self/fd entries that link to
// anon_inode:inotify) and the kernel watches they hold (their fdinfo's "inotify wd:" lines).
func inotify(t *testing.T) (instances, watches int) {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	for _, e := range ents {
		if l, err := os.Readlink("/proc/self/fd/" + e.Name()); err != nil || l != "anon_inode:inotify" {
			continue
		}
		instances++
		f, err := os.Open("/proc/self/fdinfo/" + e.Name())
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "inotify wd:") {
				watches++
			}
		}
		f.Close()
	}
	return instances, watches
}

func cwdParams(dir string) string { return fmt.Sprintf(`{"cwd":%q}`, dir) }

// handlerFailed requires a -32014 answer and returns its message.
func handlerFailed(t *testing.T, m map[string]any) string {
	t.Helper()
	e, ok := m["error"].(map[string]any)
	require.True(t, ok, "an error answer: %v", m)
	assert.Equal(t, "-32014", fmt.Sprint(e["code"]))
	return fmt.Sprint(e["message"])
}

// TestFieldCase_T10_WatchesAreBounded (issue 22 item 2): git.watch on more repositories than a
// connection's bound is refused with a message naming the bound and what to do; another
// connection still watches; and however many repositories are watched, the server holds one
// inotify instance, so nothing a client does takes one from the server user's other programs.
func TestFieldCase_T10_WatchesAreBounded(t *testing.T) {
	e := newEnv(t, nil)
	root := e.srv.ws.Roots()[0]
	repos := newRepos(t, root, maxWatchesPerConn+1)
	inst0, watches0 := inotify(t)
	a, b := e.dial(), e.dial()
	a.hello()
	b.hello()
	for i, r := range repos[:maxWatchesPerConn] { // all at once: the server runs them together
		a.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":"w%d","method":"git.watch","params":%s}`, i, cwdParams(r)))
	}
	for range maxWatchesPerConn {
		m := decodeObj(t, a.nextAnswer())
		require.Nil(t, m["error"], "git.watch %v: %v", m["id"], m["error"])
	}
	a.result("git.watch", cwdParams(repos[0])) // watching one again takes nothing more
	msg := handlerFailed(t, a.call("git.watch", cwdParams(repos[maxWatchesPerConn])))
	assert.Equal(t, "This connection already watches 32 repositories, its limit; unwatch one first (git.unwatch).", msg)

	inst, watches := inotify(t)
	assert.Equal(t, inst0+1, inst, "32 watched repositories: one inotify instance")
	assert.Equal(t, e.srv.watcher.Watches(), watches-watches0, "the server's count is the kernel's")
	assert.LessOrEqual(t, watches-watches0, 32*4, "a fresh repository takes 4 folders (.git, refs, refs/heads, refs/tags)")

	// Another connection still watches, also the repository a was refused.
	b.result("git.watch", cwdParams(repos[maxWatchesPerConn]))
	b.result("git.watch", cwdParams(repos[0]))
	// After an unwatch, a has room again.
	a.result("git.unwatch", cwdParams(repos[1]))
	a.result("git.watch", cwdParams(repos[maxWatchesPerConn]))
	inst, _ = inotify(t)
	assert.Equal(t, inst0+1, inst, "still one instance for two connections")

	// A commit in a repository both watch reaches both.
	gitIn(t, repos[0], "commit", "-q", "--allow-empty", "-m", "y")
	for _, c := range []*testConn{a, b} {
		s := c.nextSignal()
		require.Equal(t, "git:refs", s.kind)
	}
	require.NoError(t, a.ws.CloseNow())
	require.NoError(t, b.ws.CloseNow())
	require.Eventually(t, func() bool { i, w := inotify(t); return i == inst0 && w == watches0 }, 5*time.Second, 20*time.Millisecond,
		"the dropped connections released every kernel watch and the instance")
	assert.Zero(t, e.srv.watcher.Watches())
}

// TestFieldCase_T10_WatchesShareAndRelease: the variants of the kind. Two connections watching
// one repository share its kernel watches; a drop releases them; a repository with more ref
// folders than the bound takes only the bound (and its refs are polled: a move in an unwatched
// folder is still signalled); and the server's cap refuses with a message naming it.
func TestFieldCase_T10_WatchesShareAndRelease(t *testing.T) {
	e := newEnv(t, func(c *Config) {
		c.Limits.MaxWatches = 80
		c.Limits.RefPoll = 150 * time.Millisecond
	})
	root := e.srv.ws.Roots()[0]
	repos := newRepos(t, root, 2)
	_, watches0 := inotify(t)
	a, b := e.dial(), e.dial()
	a.hello()
	b.hello()
	a.result("git.watch", cwdParams(repos[0]))
	_, one := inotify(t)
	b.result("git.watch", cwdParams(repos[0]))
	_, two := inotify(t)
	assert.Equal(t, one, two, "a second connection on the same repository takes no kernel watch")
	require.NoError(t, a.ws.CloseNow())
	b.result("$/ping", `{}`)
	_, after := inotify(t)
	assert.Equal(t, two, after, "b still watches: the watches stay")
	require.NoError(t, b.ws.CloseNow())
	require.Eventually(t, func() bool { _, w := inotify(t); return w == watches0 }, 5*time.Second, 20*time.Millisecond, "the last drop released them")

	// A repository with 300 ref folders takes at most RefWatchFolders (64) kernel watches.
	big := repos[1]
	head := gitIn(t, big, "rev-parse", "HEAD")
	for i := range 300 {
		p := filepath.Join(big, ".git", "refs", "heads", fmt.Sprintf("f%03d", i))
		require.NoError(t, os.MkdirAll(p, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(p, "b"), []byte(head+"\n"), 0o644))
	}
	c := e.dial()
	c.hello()
	c.result("git.watch", cwdParams(big))
	_, w := inotify(t)
	assert.Equal(t, 64, w-watches0, "the repository's watch takes its bound of folders")
	gitIn(t, big, "commit", "-q", "--allow-empty", "-m", "z")
	require.Equal(t, "git:refs", c.nextSignal().kind, "a commit on main is signalled")
	gitIn(t, big, "update-ref", "refs/heads/f299/b", "HEAD") // in a folder left unwatched
	require.Equal(t, "git:refs", c.nextSignal().kind, "a move in an unwatched ref folder is signalled (polled)")

	// The server's cap: 80 watches, 64 taken; a fresh repository takes 4 more each.
	more := make([]string, 0, 8)
	for i := range 8 {
		d := filepath.Join(root, fmt.Sprintf("m%d", i))
		require.NoError(t, os.Mkdir(d, 0o755))
		gitIn(t, d, "init", "-q", "-b", "main")
		more = append(more, d)
	}
	var msg string
	for _, d := range more {
		m := c.call("git.watch", cwdParams(d))
		if m["error"] != nil {
			msg = handlerFailed(t, m)
			break
		}
	}
	assert.Equal(t, "The server watches 80 folders, its limit (--max-watches); unwatch repositories no longer needed, or ask the operator to raise --max-watches.", msg)
	assert.LessOrEqual(t, e.srv.watcher.Watches(), 80)
	_, w = inotify(t)
	assert.LessOrEqual(t, w-watches0, 80, "the kernel holds no more than the cap")
}
