package workspace

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zidane-server/zidane/server/workspace/workspacetest"
)

// layout is the cases' layout (workspacetest) with a.txt and real-docs/ in the root, opened as a
// Workspace.
type layout struct {
	*workspacetest.Layout
	T, ws, out string
	w          *Workspace
}

func newLayout(t *testing.T) *layout {
	t.Helper()
	L := workspacetest.New(t)
	l := &layout{Layout: L, T: L.T, ws: L.WS, out: L.Out}
	require.NoError(t, os.MkdirAll(filepath.Join(l.ws, "real-docs"), 0o755))
	L.Write(t, "a.txt", "hello\n")
	var err error
	l.w, err = New([]string{l.ws})
	require.NoError(t, err)
	t.Cleanup(func() { l.w.Close() })
	return l
}

func TestResolveInside(t *testing.T) {
	l := newLayout(t)
	l.Link(t, filepath.Join(l.ws, "real-docs"), "docs") // absolute link that stays inside
	l.Link(t, "a.txt", "rel-link")                      // relative link inside

	for _, c := range []struct{ cwd, p, rel string }{
		{"", "a.txt", "a.txt"},
		{"", ".", "."},
		{l.ws, "sub/../a.txt", "a.txt"},
		{filepath.Join(l.ws, "sub"), "../a.txt", "a.txt"},
		{filepath.Join(l.ws, "sub"), "new/file.txt", "sub/new/file.txt"},
		{"", filepath.Join(l.ws, "a.txt"), "a.txt"},
		{"", "docs/a.md", "real-docs/a.md"},
		{"", "rel-link", "a.txt"},
		{"", "missing/../a.txt", "a.txt"},
	} {
		rp, err := l.w.Resolve(c.cwd, c.p)
		require.NoError(t, err, c.p)
		assert.Equal(t, c.rel, rp.Rel, c.p)
		assert.Equal(t, l.ws, rp.Root)
	}
	rp, err := l.w.ResolveLink("", "rel-link")
	require.NoError(t, err)
	assert.Equal(t, "rel-link", rp.Rel)
}

func TestResolveRefusesOutside(t *testing.T) {
	l := newLayout(t)
	l.Link(t, "../out/victim.txt", "notes.md")
	l.Link(t, filepath.Join(l.out, "new.txt"), "draft.txt")
	l.Link(t, l.out, "outbox")
	l.Link(t, "/etc", "etc")
	l.Link(t, "sub/../../out", "sneaky")
	for _, p := range []string{
		"../out/victim.txt", "..", "sub/../..", filepath.Join(l.out, "victim.txt"), "/etc/passwd",
		l.ws + "-sibling/x", "notes.md", "draft.txt", "outbox/escaped.txt", "outbox/../../etc/x",
		"notes.md/", "etc/", "etc/passwd", "sneaky/victim.txt",
	} {
		_, err := l.w.Resolve("", p)
		require.Error(t, err, p)
		assert.True(t, IsOutside(err), "%s: %v", p, err)
		assert.Contains(t, err.Error(), "outside the workspace roots", p)
		if !strings.Contains(p, l.out) {
			assert.NotContains(t, err.Error(), l.out, "a refusal never says where a link points")
		}
	}
	_, err := l.w.Resolve(filepath.Join(l.T, "out"), "victim.txt")
	assert.True(t, IsOutside(err), "a cwd outside the roots")
}

// TestResolveLinkLoop: a loop of links is a clear invalid path, by Resolve and ResolveLink alike
// (the loop is on the way), and a path that merely names such a link is kept by ResolveLink.
func TestResolveLinkLoop(t *testing.T) {
	l := newLayout(t)
	l.Link(t, "loop-b", "loop-a")
	l.Link(t, "loop-a", "loop-b")
	for _, p := range []string{"loop-a", "loop-b/x", "real-docs/../loop-a/"} {
		_, err := l.w.Resolve("", p)
		var e *Error
		require.ErrorAs(t, err, &e, p)
		assert.Equal(t, ReasonInvalid, e.Reason, p)
		assert.Equal(t, fmt.Sprintf("%q: too many levels of symbolic links", p), err.Error())
	}
	_, err := l.w.ResolveLink("", "loop-a/x")
	assert.ErrorContains(t, err, "too many levels of symbolic links")
	rp, err := l.w.ResolveLink("", "loop-a")
	require.NoError(t, err)
	assert.Equal(t, "loop-a", rp.Rel)
}

// TestRootThatIsALink: a root configured through a symbolic link works, by either name (R16).
func TestRootThatIsALink(t *testing.T) {
	l := newLayout(t)
	alias := filepath.Join(l.T, "ws-link")
	require.NoError(t, os.Symlink(l.ws, alias))
	w, err := New([]string{alias})
	require.NoError(t, err)
	defer w.Close()
	assert.Equal(t, []string{l.ws}, w.Roots())
	for _, p := range []string{filepath.Join(alias, "a.txt"), filepath.Join(l.ws, "a.txt"), "a.txt"} {
		b, _, _, err := w.ReadFile(alias, p, 0)
		require.NoError(t, err, p)
		assert.Equal(t, "hello\n", string(b))
	}
	_, err = w.WriteFile(alias, "sub/b.txt", []byte("b"), 0o644)
	require.NoError(t, err)
	assert.FileExists(t, filepath.Join(l.ws, "sub", "b.txt"))
}

func TestFolder(t *testing.T) {
	l := newLayout(t)
	l.Link(t, "/etc", "escape")
	p, err := l.w.Folder("sub")
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(l.ws, "sub"), p.Abs())
	for _, c := range []struct {
		p      string
		reason Reason
	}{{"a.txt", ReasonNotDir}, {"missing", ReasonNotExist}, {"escape", ReasonOutside}, {"escape/ssl", ReasonOutside}, {"/no/such/dir", ReasonOutside}} {
		_, err := l.w.Folder(c.p)
		var e *Error
		require.ErrorAs(t, err, &e, c.p)
		assert.Equal(t, c.reason, e.Reason, c.p)
	}
}

func TestWriteReadHelpers(t *testing.T) {
	l := newLayout(t)
	l.Link(t, l.out, "outbox")
	l.Link(t, "../out/victim.txt", "notes.md")
	l.Link(t, filepath.Join(l.ws, "real-docs"), "docs")

	rp, err := l.w.WriteFile("", "docs/a.md", []byte("ok"), 0o644)
	require.NoError(t, err)
	assert.Equal(t, "real-docs/a.md", rp.Rel)
	b, err := os.ReadFile(filepath.Join(l.ws, "real-docs", "a.md"))
	require.NoError(t, err)
	assert.Equal(t, "ok", string(b))

	require.NoError(t, os.Chmod(filepath.Join(l.ws, "a.txt"), 0o600))
	_, err = l.w.WriteFile("", "a.txt", []byte("new"), 0o644)
	require.NoError(t, err)
	fi, err := os.Stat(filepath.Join(l.ws, "a.txt"))
	require.NoError(t, err)
	assert.Equal(t, fs.FileMode(0o600), fi.Mode().Perm(), "an existing file keeps its mode")

	for _, p := range []string{"notes.md", "outbox/escaped.txt", "../out/x", "secret/"} {
		_, err := l.w.WriteFile("", p, []byte("OWNED"), 0o644)
		require.Error(t, err, p)
	}
	_, err = l.w.WriteFile("", "sub", []byte("x"), 0o644)
	assert.ErrorContains(t, err, "is a folder")

	data, _, cut, err := l.w.ReadFile("", "a.txt", 2)
	require.NoError(t, err)
	assert.Equal(t, "ne", string(data))
	assert.True(t, cut)
	_, _, _, err = l.w.ReadFile("", "notes.md", 0)
	assert.True(t, IsOutside(err))
	_, _, _, err = l.w.ReadFile("", "missing.txt", 0)
	assert.ErrorIs(t, err, fs.ErrNotExist)

	_, des, err := l.w.ReadDir("", ".")
	require.NoError(t, err)
	var names []string
	for _, d := range des {
		names = append(names, d.Name())
	}
	assert.Contains(t, names, "outbox")
	_, _, err = l.w.ReadDir("", "outbox")
	assert.True(t, IsOutside(err))

	var walked []string
	require.NoError(t, l.w.WalkDir("", ".", func(_ Path, name string, d fs.DirEntry, err error) error {
		walked = append(walked, name)
		return err
	}))
	assert.Contains(t, walked, "outbox")
	assert.NotContains(t, walked, "outbox/victim.txt", "links are never followed by a walk")

	_, err = l.w.Remove("", "notes.md")
	require.NoError(t, err, "removing a link removes the link")
	l.OutsideUntouched(t)
}

// TestSwapAfterResolve: a folder replaced by a link to the outside between the check and the use is
// refused by os.Root at use (R19's mechanism, with nothing in between re-resolving).
func TestSwapAfterResolve(t *testing.T) {
	l := newLayout(t)
	rp, err := l.w.Resolve("", "sub/a.txt")
	require.NoError(t, err)
	require.NoError(t, os.RemoveAll(filepath.Join(l.ws, "sub")))
	l.Link(t, l.out, "sub")
	_, err = l.w.rootOf(rp).OpenFile(rp.Rel, os.O_WRONLY|os.O_CREATE, 0o644)
	err = l.w.classify(rp, err)
	assert.True(t, IsOutside(err), "%v", err)
	// And through the helper, which resolves again at use.
	_, err = l.w.WriteFile("", "sub/a.txt", []byte("x"), 0o644)
	assert.True(t, IsOutside(err), "%v", err)
	l.OutsideUntouched(t)
}

// TestSwapRace: while one goroutine keeps swapping ws/sub between a real folder and a link to the
// outside, writes and reads through the workspace never touch the outside.
func TestSwapRace(t *testing.T) {
	l := newLayout(t)
	sub := filepath.Join(l.ws, "sub")
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			_ = os.RemoveAll(sub)
			_ = os.Symlink(l.out, sub)
			_ = os.Remove(sub)
			_ = os.Mkdir(sub, 0o755)
		}
	}()
	written := 0
	for i := 0; i < 2000; i++ {
		if _, err := l.w.WriteFile("", "sub/victim.txt", []byte("OWNED"), 0o644); err == nil {
			written++
		}
		if b, _, _, err := l.w.ReadFile("", "sub/victim.txt", 0); err == nil {
			assert.NotEqual(t, "original", string(b), "read the outside file")
		}
	}
	close(stop)
	wg.Wait()
	l.OutsideUntouched(t)
	t.Logf("%d of 2000 writes landed inside", written)
}
