package workspace

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zidane-server/zidane/server/workspace/workspacetest"
)

// hiddenLayout is a root holding a data dir (.zidane/daemon.json), a hidden file (hidden.txt)
// beside visible ones, and links to both; the workspace hides .zidane and hidden.txt.
type hiddenLayout struct {
	*workspacetest.Layout
	w *Workspace
}

func newHiddenLayout(t *testing.T) *hiddenLayout {
	t.Helper()
	L := workspacetest.New(t)
	L.Write(t, "visible.txt", "VISIBLE\n")
	L.Write(t, "hidden.txt", "HIDDEN-IN-ROOT\n")
	L.Write(t, ".zidane/daemon.json", `{"token": "zds_SECRET"}`+"\n")
	L.Write(t, ".zidane/run/x", "HIDDEN-RUN\n")
	L.Write(t, "sub/deep.txt", "VISIBLE-DEEP\n")
	L.Link(t, "hidden.txt", "to-hidden")                        // a link to a hidden file
	L.Link(t, ".zidane", "to-data")                             // a link to the hidden folder
	L.Link(t, filepath.Join(L.WS, ".zidane/run"), "to-run-abs") // an absolute link below it
	w, err := New([]string{L.WS}, filepath.Join(L.WS, ".zidane"), filepath.Join(L.WS, "hidden.txt"))
	require.NoError(t, err)
	t.Cleanup(func() { w.Close() })
	return &hiddenLayout{Layout: L, w: w}
}

// hiddenPaths are the ways to name a hidden path the cases try.
func (l *hiddenLayout) hiddenPaths() []string {
	return []string{
		"hidden.txt", "./hidden.txt", "sub/../hidden.txt", filepath.Join(l.WS, "hidden.txt"),
		".zidane", ".zidane/", ".zidane/daemon.json", ".zidane/run/x", "sub/../.zidane/daemon.json",
		"missing/../.zidane/daemon.json", "to-hidden", "to-data/daemon.json", "to-data", "to-run-abs/x",
		// back out of a missing folder, then through a link (the walk resumes at the existing folder)
		"missing/../to-data/daemon.json", "missing/../to-data/new.txt", "missing/a/../../to-run-abs/x",
		"to-data/../visible.txt", // passes through the hidden folder
		".zidane/new.txt", ".zidane/missing/new.txt", "hidden.txt/x",
	}
}

// TestHiddenReadsAsMissing: every way to read a hidden path answers "does not exist", with the
// same message as a path that does not exist, whether it exists or not.
func TestHiddenReadsAsMissing(t *testing.T) {
	l := newHiddenLayout(t)
	for _, p := range l.hiddenPaths() {
		_, _, _, err := l.w.ReadFile("", p, 0)
		require.Error(t, err, p)
		assert.ErrorIs(t, err, fs.ErrNotExist, p)
		assert.True(t, IsHidden(err), p)
		assert.Equal(t, fmt.Sprintf("%q does not exist; pass an existing path inside the workspace roots (%s).", p, l.WS), err.Error())
		_, err = l.w.Resolve("", p)
		assert.ErrorIs(t, err, fs.ErrNotExist, p)
		_, _, err = l.w.Stat("", p)
		assert.ErrorIs(t, err, fs.ErrNotExist, p)
		_, _, err = l.w.Open("", p)
		assert.ErrorIs(t, err, fs.ErrNotExist, p)
		_, _, err = l.w.ReadDir("", p)
		assert.ErrorIs(t, err, fs.ErrNotExist, p)
		_, err = l.w.Folder(p)
		assert.ErrorIs(t, err, fs.ErrNotExist, p)
	}
	// A cwd inside a hidden folder is as missing as the folder.
	_, _, _, err := l.w.ReadFile(filepath.Join(l.WS, ".zidane"), "daemon.json", 0)
	assert.ErrorIs(t, err, fs.ErrNotExist)
	// The visible files still read.
	for _, p := range []string{"visible.txt", "sub/deep.txt", filepath.Join(l.WS, "visible.txt")} {
		_, _, _, err := l.w.ReadFile("", p, 0)
		assert.NoError(t, err, p)
	}
}

// TestHiddenWritesRefusedAsOutside: a write to a hidden path, existing or not, is refused as
// outside the roots and changes nothing there.
func TestHiddenWritesRefusedAsOutside(t *testing.T) {
	l := newHiddenLayout(t)
	for _, p := range l.hiddenPaths() {
		if p == "to-data/../visible.txt" {
			continue // resolves through the hidden folder: refused too, checked below
		}
		_, err := l.w.WriteFile("", p, []byte("PWNED"), 0o644)
		require.Error(t, err, p)
		assert.True(t, IsOutside(err), "%s: %v", p, err)
		assert.Equal(t, fmt.Sprintf("%q is outside the workspace roots (%s); use a path inside them.", p, l.WS), err.Error())
		_, err = l.w.ResolveWrite("", p)
		assert.True(t, IsOutside(err), p)
		_, err = l.w.MkdirAll("", p, 0o755)
		assert.True(t, IsOutside(err), p)
		if p != "to-hidden" && p != "to-data" { // removing a link removes the link itself, which is not hidden
			_, err = l.w.Remove("", p)
			assert.True(t, IsOutside(err), p)
		}
	}
	_, err := l.w.WriteFile("", "to-data/../visible.txt", []byte("x"), 0o644)
	assert.True(t, IsOutside(err))
	b, err := os.ReadFile(filepath.Join(l.WS, ".zidane/daemon.json"))
	require.NoError(t, err)
	assert.Contains(t, string(b), "zds_SECRET")
	b, _ = os.ReadFile(filepath.Join(l.WS, "hidden.txt"))
	assert.Equal(t, "HIDDEN-IN-ROOT\n", string(b))
	assert.FileExists(t, filepath.Join(l.WS, ".zidane/run/x"), "no Remove reached a hidden file")
	assert.NoFileExists(t, filepath.Join(l.WS, ".zidane/new.txt"))
	assert.NoDirExists(t, filepath.Join(l.WS, ".zidane/new.txt"), "MkdirAll made no folder in the hidden one")
	_, err = l.w.WriteFile("", "sub/new.txt", []byte("ok"), 0o644)
	assert.NoError(t, err, "a visible path is written")
}

// TestHiddenLeftOutOfListingsAndSearches: listings, walks, the text search, the folder search and
// the root's file system leave hidden paths and links to them out.
func TestHiddenLeftOutOfListingsAndSearches(t *testing.T) {
	l := newHiddenLayout(t)
	_, des, err := l.w.ReadDir("", ".")
	require.NoError(t, err)
	var names []string
	for _, d := range des {
		names = append(names, d.Name())
	}
	assert.Equal(t, []string{"sub", "visible.txt"}, names, "hidden paths and links to them are not listed")

	var walked []string
	require.NoError(t, l.w.WalkDir("", ".", func(_ Path, name string, _ fs.DirEntry, err error) error {
		walked = append(walked, name)
		return err
	}))
	assert.NotContains(t, walked, ".zidane")
	assert.NotContains(t, walked, ".zidane/daemon.json")
	assert.NotContains(t, walked, "hidden.txt")
	assert.Contains(t, walked, "sub/deep.txt")

	ms, _, err := l.w.Grep(context.Background(), l.WS, regexp.MustCompile("HIDDEN|zds_|VISIBLE"), GrepOptions{})
	require.NoError(t, err)
	var found []string
	for _, m := range ms {
		found = append(found, m.Path+":"+m.Text)
	}
	assert.Equal(t, []string{"sub/deep.txt:VISIBLE-DEEP", "visible.txt:VISIBLE"}, found)

	folders, _, err := l.w.FindFolders(context.Background(), []string{l.WS}, "run", 50, 1000)
	require.NoError(t, err)
	assert.Empty(t, folders)

	rp, err := l.w.Folder("")
	require.NoError(t, err)
	fsys := l.w.RootFS(rp)
	for _, name := range []string{"hidden.txt", ".zidane/daemon.json", ".zidane"} {
		_, err := fs.ReadFile(fsys, name)
		assert.ErrorIs(t, err, fs.ErrNotExist, name)
		_, err = fs.Stat(fsys, name)
		assert.ErrorIs(t, err, fs.ErrNotExist, name)
	}
	// os.Root follows a link that stays inside the root: the opened file is checked where the
	// kernel has it (a link swapped in after a listing).
	for _, name := range []string{"to-hidden", "to-data/daemon.json"} {
		_, err := fs.ReadFile(fsys, name)
		assert.ErrorIs(t, err, fs.ErrNotExist, name)
	}
	_, err = fs.ReadFile(fsys, "to-run-abs/x")
	assert.Error(t, err, "os.Root never follows an absolute link")
	b, err := fs.ReadFile(fsys, "visible.txt")
	require.NoError(t, err)
	assert.Equal(t, "VISIBLE\n", string(b))
}

// TestHiddenFormsAndStart: a hidden path named through a link, or whose own path is a link, is
// matched in every form; a root inside a hidden path is refused at New; credential files are
// hidden by default; HiddenInRoots names the ones inside a root.
func TestHiddenFormsAndStart(t *testing.T) {
	L := workspacetest.New(t)
	L.Write(t, "keys/id_rsa", "KEY\n")
	alias := filepath.Join(L.T, "alias")
	require.NoError(t, os.Symlink(L.WS, alias))
	// Named through the alias of the root; hidden in the root's resolved form.
	w, err := New([]string{L.WS}, filepath.Join(alias, "keys"))
	require.NoError(t, err)
	defer w.Close()
	_, _, _, err = w.ReadFile("", "keys/id_rsa", 0)
	assert.ErrorIs(t, err, fs.ErrNotExist)
	assert.Equal(t, []string{filepath.Join(alias, "keys")}, w.HiddenInRoots())
	assert.True(t, w.Hidden().Contains(filepath.Join(L.WS, "keys/id_rsa")))
	assert.False(t, w.Hidden().Contains(filepath.Join(L.WS, "keysx")))
	assert.Equal(t, []string{"keys"}, w.Hidden().Under(L.WS))

	// A hidden path that is itself a link (~/.ssh -> elsewhere in the root): both the link and
	// its target are hidden.
	require.NoError(t, os.Symlink("keys", filepath.Join(L.WS, "ssh-link")))
	w2, err := New([]string{L.WS}, filepath.Join(L.WS, "ssh-link"))
	require.NoError(t, err)
	defer w2.Close()
	for _, p := range []string{"ssh-link", "ssh-link/id_rsa", "keys/id_rsa"} {
		_, _, _, err = w2.ReadFile("", p, 0)
		assert.ErrorIs(t, err, fs.ErrNotExist, p)
	}

	_, err = New([]string{filepath.Join(L.WS, "keys")}, filepath.Join(L.WS, "keys"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "is hidden")
	_, err = New([]string{filepath.Join(L.WS, "sub")}, L.WS)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "is hidden")

	// Credential files under HOME are hidden without being named.
	t.Setenv("HOME", L.WS)
	L.Write(t, ".ssh/id_ed25519", "KEY\n")
	L.Write(t, ".docker/config.json", "{}\n")
	w3, err := New([]string{L.WS})
	require.NoError(t, err)
	defer w3.Close()
	for _, p := range []string{".ssh/id_ed25519", ".docker/config.json", ".netrc", ".ssh/authorized_keys"} {
		_, _, _, err = w3.ReadFile("", p, 0)
		assert.ErrorIs(t, err, fs.ErrNotExist, p)
		_, err = w3.WriteFile("", p, []byte("x"), 0o600)
		assert.True(t, IsOutside(err), p)
	}
	assert.Contains(t, w3.HiddenInRoots(), filepath.Join(L.WS, ".ssh"))
	assert.NoFileExists(t, filepath.Join(L.WS, ".ssh/authorized_keys"))
}

// TestHolds: the start's check of a root holding the data dir compares resolved paths.
func TestHolds(t *testing.T) {
	L := workspacetest.New(t)
	alias := filepath.Join(L.T, "alias")
	require.NoError(t, os.Symlink(L.WS, alias))
	assert.True(t, Holds(L.WS, filepath.Join(alias, ".zidane", "not-yet")))
	assert.True(t, Holds(alias, L.WS))
	assert.False(t, Holds(filepath.Join(L.WS, "sub"), L.WS))
	assert.False(t, Holds(L.WS, L.WS+"x"))
}

// BenchmarkHiddenCovers: the lookup of a path below a root that holds hidden paths (most paths
// leave the hidden folders' ancestors at their first component).
func BenchmarkHiddenCovers(b *testing.B) {
	rh := newRootHidden([]string{".zidane", ".local/share/zidane-server", ".ssh", "a/b/secret"})
	paths := []string{"src/server/workspace/hidden.go", "a/b/c/d.txt", ".local/bin/x", "README.md"}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if rh.covers(paths[i%len(paths)]) {
			b.Fatal("covered")
		}
	}
}

// BenchmarkGrepHidden compares a text search over 2000 files in a root with hidden paths
// (hidden=yes) and without (hidden=no).
func BenchmarkGrepHidden(b *testing.B) {
	L := workspacetest.New(b)
	for i := range 2000 {
		L.Write(b, fmt.Sprintf("d%02d/f%04d.txt", i%40, i), "some text\nmore text\n")
	}
	L.Write(b, ".zidane/daemon.json", "{}")
	for _, c := range []struct {
		name   string
		hidden []string
	}{{"no", nil}, {"yes", []string{filepath.Join(L.WS, ".zidane"), filepath.Join(L.WS, "d01/f0001.txt")}}} {
		w, err := New([]string{L.WS}, c.hidden...)
		require.NoError(b, err)
		re := regexp.MustCompile("nomatch")
		b.Run("hidden="+c.name, func(b *testing.B) {
			for b.Loop() {
				if _, _, err := w.Grep(context.Background(), L.WS, re, GrepOptions{}); err != nil && !errors.Is(err, context.Canceled) {
					b.Fatal(err)
				}
			}
		})
		w.Close()
	}
}
