package linkwalk

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// errHidden and errOutside are the errors the test walker's functions return, to show Walk hands
// them back as they are.
var (
	errHidden  = errors.New("hidden")
	errOutside = errors.New("outside every root")
)

// fixture is a set of real folders as roots, walked through their os.Root the way the workspace
// does: a missing component is no link, a hidden one is errHidden, and an absolute target is
// placed in the root that holds it. visited records every component Lstat was asked about.
type fixture struct {
	dirs    []string
	roots   []*os.Root
	hidden  map[string]bool // "root index:rel"
	visited []string
}

func newFixture(t *testing.T, n int) *fixture {
	t.Helper()
	f := &fixture{hidden: map[string]bool{}}
	for i := range n {
		d := filepath.Join(t.TempDir(), fmt.Sprint("root", i))
		require.NoError(t, os.Mkdir(d, 0o755))
		d, err := filepath.EvalSymlinks(d)
		require.NoError(t, err)
		r, err := os.OpenRoot(d)
		require.NoError(t, err)
		t.Cleanup(func() { r.Close() })
		f.dirs = append(f.dirs, d)
		f.roots = append(f.roots, r)
	}
	return f
}

func (f *fixture) file(t *testing.T, root int, rel string) {
	t.Helper()
	p := filepath.Join(f.dirs[root], rel)
	require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(t, os.WriteFile(p, []byte(rel), 0o644))
}

func (f *fixture) link(t *testing.T, root int, target, rel string) {
	t.Helper()
	p := filepath.Join(f.dirs[root], rel)
	require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(t, os.Symlink(target, p))
}

func (f *fixture) walker(keepLast bool) *Walker[int] {
	return &Walker[int]{
		Lstat: func(i int, rel string) (bool, error) {
			f.visited = append(f.visited, fmt.Sprintf("%d:%s", i, rel))
			fi, err := f.roots[i].Lstat(rel)
			if errors.Is(err, fs.ErrNotExist) {
				return false, nil
			}
			if err != nil {
				return false, err
			}
			if f.hidden[fmt.Sprintf("%d:%s", i, rel)] {
				return false, errHidden
			}
			return fi.Mode()&fs.ModeSymlink != 0, nil
		},
		Readlink: func(i int, rel string) (string, error) { return f.roots[i].Readlink(rel) },
		Absolute: func(target string) (int, string, error) {
			target = filepath.Clean(target)
			for i, d := range f.dirs {
				if target == d {
					return i, ".", nil
				}
				if rel, ok := strings.CutPrefix(target, d+"/"); ok {
					return i, rel, nil
				}
			}
			return 0, "", errOutside
		},
		KeepLast: keepLast,
	}
}

// walk walks rel from root 0 and returns "root:rel" or the error.
func (f *fixture) walk(keepLast bool, rel string) (string, error) {
	f.visited = nil
	i, out, err := f.walker(keepLast).Walk(0, rel)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%d:%s", i, out), nil
}

// expect walks each path of want from root 0 and checks the "root:rel" it resolves to.
func (f *fixture) expect(t *testing.T, keepLast bool, want map[string]string) {
	t.Helper()
	for rel, w := range want {
		got, err := f.walk(keepLast, rel)
		if assert.NoError(t, err, rel) {
			assert.Equal(t, w, got, rel)
		}
	}
}

// TestWalkPlainPaths: with no link, Walk cleans the path lexically (".", "" and ".." inside the
// root) and looks at every component on the way.
func TestWalkPlainPaths(t *testing.T) {
	f := newFixture(t, 1)
	f.file(t, 0, "a/b/c.txt")
	f.expect(t, false, map[string]string{
		"a/b/c.txt": "0:a/b/c.txt", "./a//b/./c.txt": "0:a/b/c.txt", "a/b/../b/c.txt": "0:a/b/c.txt",
		"": "0:.", ".": "0:.", "a/..": "0:.", "a/b/": "0:a/b",
	})
	_, err := f.walk(false, "a/b/c.txt")
	require.NoError(t, err)
	assert.Equal(t, []string{"0:a", "0:a/b", "0:a/b/c.txt"}, f.visited)
}

// TestWalkDotDotPastTheRoot: a ".." above the root is ErrEscapes, whether written in the path,
// reached after a missing folder, or brought in by a relative link's target.
func TestWalkDotDotPastTheRoot(t *testing.T) {
	f := newFixture(t, 1)
	f.file(t, 0, "a/x.txt")
	f.link(t, 0, "..", "up")
	f.link(t, 0, "../../etc/passwd", "a/passwd")
	f.link(t, 0, "x.txt/../../..", "a/deep") // climbs out through a file, lexically
	for _, rel := range []string{"..", "../x", "a/../..", "missing/../..", "missing/a/../../../x", "up", "up/x", "a/passwd", "a/deep", "a/deep/"} {
		_, err := f.walk(false, rel)
		assert.ErrorIs(t, err, ErrEscapes, rel)
	}
}

// TestWalkRelativeLinks: a relative target is walked from the link's folder in place of the link,
// its own links included; every link on the way is gone from the result.
func TestWalkRelativeLinks(t *testing.T) {
	f := newFixture(t, 1)
	f.file(t, 0, "real/sub/x.txt")
	f.link(t, 0, "real", "l1")            // a folder
	f.link(t, 0, "../real/sub", "d/l2")   // up from its own folder
	f.link(t, 0, "l1/sub/x.txt", "chain") // through another link
	f.link(t, 0, "./sub/../sub", "real/l3")
	f.expect(t, false, map[string]string{
		"l1": "0:real", "l1/sub/x.txt": "0:real/sub/x.txt", "d/l2/x.txt": "0:real/sub/x.txt",
		"chain": "0:real/sub/x.txt", "real/l3/x.txt": "0:real/sub/x.txt", "l1/sub/../../d": "0:d",
	})
}

// TestWalkLoopsAndTooManyLinks: a loop of links, a link to itself, and a chain of more than
// MaxLinks links end with ErrTooManyLinks; a chain of exactly MaxLinks resolves.
func TestWalkLoopsAndTooManyLinks(t *testing.T) {
	f := newFixture(t, 1)
	f.link(t, 0, "b", "a")
	f.link(t, 0, "a", "b")
	f.link(t, 0, "self", "self")
	f.link(t, 0, "../loop/l", "loop/l") // itself, through its folder
	for _, rel := range []string{"a", "b/x", "self", "loop/l", "loop/l/x"} {
		_, err := f.walk(false, rel)
		assert.ErrorIs(t, err, ErrTooManyLinks, rel)
	}
	f.file(t, 0, "end.txt")
	for i := range MaxLinks + 1 {
		next := fmt.Sprint("c", i+1)
		if i == MaxLinks-1 {
			next = "end.txt"
		}
		f.link(t, 0, next, fmt.Sprint("c", i))
	}
	got, err := f.walk(false, "c0") // c0 .. c39: MaxLinks links
	require.NoError(t, err)
	assert.Equal(t, "0:end.txt", got)
	f.link(t, 0, "c0", "c-1")
	_, err = f.walk(false, "c-1") // one more
	assert.ErrorIs(t, err, ErrTooManyLinks)
}

// TestWalkAbsoluteTargets: an absolute target goes on from where Absolute places it, another
// root included (later components are looked at in that root); one outside every root is
// Absolute's error, returned as it is, and nothing past it is looked at.
func TestWalkAbsoluteTargets(t *testing.T) {
	f := newFixture(t, 2)
	f.file(t, 0, "here/x.txt")
	f.file(t, 1, "there/y.txt")
	f.link(t, 0, filepath.Join(f.dirs[0], "here"), "abs-same")
	f.link(t, 0, filepath.Join(f.dirs[1], "there"), "abs-other")
	f.link(t, 0, f.dirs[1]+"//there/../there/", "abs-unclean")
	f.link(t, 1, "../there", "there/back")
	f.link(t, 0, filepath.Join(f.dirs[1], "there"), "deep/er/abs") // starts over, not from deep/er
	f.link(t, 0, "/etc", "abs-out")
	f.link(t, 0, filepath.Dir(f.dirs[0]), "abs-parent")
	f.expect(t, false, map[string]string{
		"abs-same/x.txt": "0:here/x.txt", "abs-other/y.txt": "1:there/y.txt",
		"abs-unclean/y.txt": "1:there/y.txt", "abs-other/back/y.txt": "1:there/y.txt",
		"abs-other/..": "1:.", "deep/er/abs/y.txt": "1:there/y.txt", "deep/er/abs/../there": "1:there",
	})
	_, err := f.walk(false, "abs-other/y.txt")
	require.NoError(t, err)
	assert.Equal(t, []string{"0:abs-other", "1:there", "1:there/y.txt"}, f.visited)
	_, err = f.walk(false, "abs-other/../..")
	assert.ErrorIs(t, err, ErrEscapes, "the new root is the new floor")
	for _, rel := range []string{"abs-out", "abs-out/passwd", "abs-parent/root0/here"} {
		_, err := f.walk(false, rel)
		assert.ErrorIs(t, err, errOutside, rel)
		assert.Equal(t, []string{"0:" + strings.Split(rel, "/")[0]}, f.visited, rel)
	}
}

// TestWalkLinkIntoHiddenThenOut: every component Walk passes through is handed to Lstat, so a
// link into a hidden folder followed by ".." out (or an absolute link into it) meets the hidden
// folder, and Lstat's error ends the walk as it is.
func TestWalkLinkIntoHiddenThenOut(t *testing.T) {
	f := newFixture(t, 1)
	f.file(t, 0, "secret/key")
	f.file(t, 0, "ok.txt")
	f.hidden["0:secret"] = true
	f.link(t, 0, "secret", "to-secret")
	f.link(t, 0, filepath.Join(f.dirs[0], "secret/key"), "abs-key")
	f.link(t, 0, "secret/../ok.txt", "through")
	for _, rel := range []string{"secret", "to-secret/../ok.txt", "abs-key", "through", "missing/../to-secret/../ok.txt"} {
		_, err := f.walk(false, rel)
		assert.ErrorIs(t, err, errHidden, rel)
	}
	_, err := f.walk(false, "to-secret/../ok.txt")
	assert.ErrorIs(t, err, errHidden)
	assert.Equal(t, []string{"0:to-secret", "0:secret"}, f.visited)
}

// TestWalkMissingTail: a missing component and what lies below it resolve as written (the path a
// write creates), cleaned; a ".." back out of it reaches existing folders again, whose links are
// read (not passed lexically).
func TestWalkMissingTail(t *testing.T) {
	f := newFixture(t, 1)
	f.file(t, 0, "real/x.txt")
	f.file(t, 0, "real/y.txt")
	f.link(t, 0, "real", "l")
	f.hidden["0:real/x.txt"] = true
	f.expect(t, false, map[string]string{
		"new/a/b.txt": "0:new/a/b.txt", "new/./a//../b.txt": "0:new/b.txt", "l/new/c": "0:real/new/c",
		"new/../l": "0:real", "new/a/../../l/new": "0:real/new", "real/y.txt/../new": "0:real/new",
	})
	_, err := f.walk(false, "new/../l/x.txt")
	assert.ErrorIs(t, err, errHidden, "the link after the missing folder is read and its target looked at")
	_, err = f.walk(false, "new/a")
	require.NoError(t, err)
	assert.Equal(t, []string{"0:new", "0:new/a"}, f.visited, "each missing component is looked at")
}

// TestWalkKeepLast: with KeepLast a link at the last component (trailing "" and "." components
// aside) is kept as it is, even one leading outside; links before it are still read.
func TestWalkKeepLast(t *testing.T) {
	f := newFixture(t, 1)
	f.file(t, 0, "real/x.txt")
	f.link(t, 0, "real", "l")
	f.link(t, 0, "/etc", "real/out")
	f.link(t, 0, "../..", "real/up")
	f.expect(t, true, map[string]string{
		"l": "0:l", "l/": "0:l", "l/.": "0:l", "l/x.txt": "0:real/x.txt", "l/out": "0:real/out",
		"l/up": "0:real/up",
	})
	for _, rel := range []string{"l/out/passwd", "l/out/.."} {
		_, err := f.walk(true, rel)
		assert.ErrorIs(t, err, errOutside, "%s: a link that is not last is read", rel)
	}
	_, err := f.walk(false, "l/out")
	assert.ErrorIs(t, err, errOutside, "without KeepLast the last link is read")
	got, err := f.walk(false, "l")
	require.NoError(t, err)
	assert.Equal(t, "0:real", got)
}

// TestWalkReadlinkError: an error reading a link ends the walk with that error.
func TestWalkReadlinkError(t *testing.T) {
	f := newFixture(t, 1)
	f.link(t, 0, "x", "l")
	errRead := errors.New("cannot read")
	w := f.walker(false)
	w.Readlink = func(int, string) (string, error) { return "", errRead }
	_, _, err := w.Walk(0, "l/y")
	assert.ErrorIs(t, err, errRead)
}
