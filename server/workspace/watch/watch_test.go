package watch

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSharedCountedBounded: subscribers of one folder share its kernel watch and both get its
// events; the watch goes with the last of them; past Max an Add is a *LimitError; a watched
// folder deleted is forgotten; the instance closes with the last watch.
func TestSharedCountedBounded(t *testing.T) {
	dir := t.TempDir()
	a, b, c := filepath.Join(dir, "a"), filepath.Join(dir, "b"), filepath.Join(dir, "c")
	for _, d := range []string{a, b, c} {
		require.NoError(t, os.Mkdir(d, 0o755))
	}
	w := New(2)
	s1, s2 := w.Subscribe(), w.Subscribe()
	require.NoError(t, s1.Add(a))
	require.NoError(t, s2.Add(a))
	require.NoError(t, s1.Add(a), "a second Add of a folder is a no-op")
	assert.Equal(t, 1, w.Watches(), "one kernel watch for one folder")
	require.NoError(t, os.WriteFile(filepath.Join(a, "f"), nil, 0o644))
	for _, s := range []*Sub{s1, s2} {
		select {
		case ev := <-s.Events():
			assert.Equal(t, filepath.Join(a, "f"), ev.Name)
		case <-time.After(5 * time.Second):
			t.Fatal("no event")
		}
	}
	require.NoError(t, s1.Add(b))
	var lim *LimitError
	require.ErrorAs(t, s2.Add(c), &lim)
	assert.Equal(t, "the server watches 2 folders, its limit (--max-watches)", lim.Error())
	require.NoError(t, s2.Add(b), "a folder already watched shares its watch, even at the limit")
	s1.Close()
	assert.Equal(t, 2, w.Watches(), "s2 still watches a and b")
	require.NoError(t, os.Remove(b))
	require.Eventually(t, func() bool { return w.Watches() == 1 }, 5*time.Second, 10*time.Millisecond, "a deleted folder's watch is forgotten")
	assert.False(t, s2.Watching(b))
	assert.True(t, w.Open())
	s2.Close()
	assert.Zero(t, w.Watches())
	assert.False(t, w.Open(), "the last watch closes the instance")
}
