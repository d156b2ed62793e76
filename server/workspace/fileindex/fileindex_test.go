package fileindex_test

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zidane-server/zidane/server/workspace"
	"github.com/zidane-server/zidane/server/workspace/fileindex"
	"github.com/zidane-server/zidane/server/workspace/watch"
)

func write(t testing.TB, root, rel, data string) {
	t.Helper()
	p := filepath.Join(root, filepath.FromSlash(rel))
	require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(t, os.WriteFile(p, []byte(data), 0o644))
}

// rootIndex is the index of a workspace whose one root is root, hidden paths as given.
func rootIndex(t testing.TB, root string, w *watch.Watcher, hidden ...string) *fileindex.Index {
	t.Helper()
	ws, err := workspace.New([]string{root}, hidden...)
	require.NoError(t, err)
	t.Cleanup(func() { ws.Close() })
	p, err := ws.Folder(root)
	require.NoError(t, err)
	set := fileindex.NewSet(ws, w)
	t.Cleanup(set.Close)
	return set.Of(p)
}

func rels(r fileindex.Result) []string {
	var out []string
	for _, m := range r.Matches {
		out = append(out, m.Rel)
	}
	return out
}

// TestIndexQuery: fuzzy matches ranked by the base name and path segments; .gitignore and the
// hidden set leave paths out; a change in a watched folder is found without a new index.
func TestIndexQuery(t *testing.T) {
	root := t.TempDir()
	for _, f := range []string{"server/agent/history.go", "server/agent/history_test.go", "server/hub.go", "docs/history.md",
		"node_modules/x/history.js", "secret/history.key", "a/b/c/h/i/s/t/o/r/y.go"} {
		write(t, root, f, "x")
	}
	write(t, root, ".gitignore", "node_modules/\n")
	w := watch.New(0)
	x := rootIndex(t, root, w, filepath.Join(root, "secret"))
	ctx := context.Background()
	got := rels(x.Query(ctx, "history", 10))
	require.NotEmpty(t, got)
	assert.ElementsMatch(t, []string{"docs/history.md", "server/agent/history.go"}, got[:2], "exact base names first: %v", got)
	assert.NotContains(t, got, "node_modules/x/history.js", ".gitignore")
	assert.NotContains(t, got, "secret/history.key", "the hidden set")
	assert.Equal(t, "server/agent/history.go", rels(x.Query(ctx, "sahist", 5))[0], "segment starts: s(erver) a(gent) hist(ory)")
	assert.Equal(t, "server/hub.go", rels(x.Query(ctx, "hub", 5))[0])

	write(t, root, "server/agent/rollback.go", "x")
	require.Eventually(t, func() bool {
		g := rels(x.Query(ctx, "rollback", 5))
		return len(g) == 1 && g[0] == "server/agent/rollback.go"
	}, 10*time.Second, 10*time.Millisecond, "the watcher's change is followed")
}

var (
	treeOnce sync.Once
	treeDir  string
	treeErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if treeDir != "" {
		os.RemoveAll(treeDir)
	}
	os.Exit(code)
}

// bigTree is a tree of 100,000 files in 2,100 folders (100 × 20 × 50), made once per process.
func bigTree(b *testing.B) string {
	treeOnce.Do(func() {
		treeDir, treeErr = os.MkdirTemp("", "zt-tree-")
		if treeErr != nil {
			return
		}
		for i := range 100 {
			for j := range 20 {
				d := filepath.Join(treeDir, fmt.Sprintf("pkg%02d", i), fmt.Sprintf("mod%02d", j))
				if treeErr = os.MkdirAll(d, 0o755); treeErr != nil {
					return
				}
				for k := range 50 {
					if treeErr = os.WriteFile(filepath.Join(d, fmt.Sprintf("file_%d_%d_%d.go", i, j, k)), nil, 0o644); treeErr != nil {
						return
					}
				}
			}
		}
	})
	if treeErr != nil {
		b.Fatal(treeErr)
	}
	return treeDir
}

func report(b *testing.B, ds []time.Duration) {
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	b.ReportMetric(float64(ds[len(ds)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(ds[len(ds)*99/100].Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(ds[len(ds)/2].Nanoseconds()), "p50-ns")
}

// BenchmarkFigComplete (issue 28): an `@` query over a 100,000-file tree, the first after a
// start (the walk included; the file cache warm) and once the index is warm, against a bare
// walk of the same tree (fs.WalkDir) and a bare substring scan of its paths.
func BenchmarkFigComplete(b *testing.B) {
	root := bigTree(b)
	queries := []string{"file_42_7", "p17m3f9", "mod05/file_1", "f_9_9_4", "pkg88"}
	var paths []string
	b.Run("100000files/first-query", func(b *testing.B) {
		var ds []time.Duration
		for b.Loop() {
			x := rootIndex(b, root, nil)
			t0 := time.Now()
			if r := x.Query(context.Background(), "file_42_7_3", 20); len(r.Matches) == 0 {
				b.Fatal("nothing found")
			}
			ds = append(ds, time.Since(t0))
			x.Close()
		}
		report(b, ds)
	})
	b.Run("100000files/walk-baseline", func(b *testing.B) {
		var ds []time.Duration
		for b.Loop() {
			t0 := time.Now()
			paths = paths[:0]
			_ = fs.WalkDir(os.DirFS(root), ".", func(p string, d fs.DirEntry, err error) error {
				paths = append(paths, p)
				return nil
			})
			ds = append(ds, time.Since(t0))
		}
		report(b, ds)
	})
	x := rootIndex(b, root, nil)
	x.Query(context.Background(), "", 1)
	b.Run("100000files/warm", func(b *testing.B) {
		var ds []time.Duration
		i := 0
		for b.Loop() {
			t0 := time.Now()
			if r := x.Query(context.Background(), queries[i%len(queries)], 20); len(r.Matches) == 0 {
				b.Fatalf("nothing for %q", queries[i%len(queries)])
			}
			ds = append(ds, time.Since(t0))
			i++
		}
		report(b, ds)
	})
	b.Run("100000files/scan-baseline", func(b *testing.B) {
		var ds []time.Duration
		i := 0
		for b.Loop() {
			t0 := time.Now()
			q, n := queries[i%len(queries)], 0
			for _, p := range paths {
				if strings.Contains(strings.ToLower(p), q) {
					n++
				}
			}
			ds = append(ds, time.Since(t0))
			i++
		}
		report(b, ds)
	})
}
