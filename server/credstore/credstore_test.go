package credstore_test

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/zidane-server/zidane/server/agent/provider"
	"github.com/zidane-server/zidane/server/credstore"
	"github.com/zidane-server/zidane/server/store"
	"github.com/zidane-server/zidane/server/store/storetest"
)

func TestMain(m *testing.M) { storetest.Main(m) }

func TestKeyFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "sub", credstore.KeyFileName)
	k1, err := credstore.LoadKey(p)
	require.NoError(t, err)
	require.Len(t, k1, 32)
	st, err := os.Stat(p)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), st.Mode().Perm())
	k2, err := credstore.LoadKey(p)
	require.NoError(t, err)
	require.Equal(t, k1, k2, "the key is read back, not made anew")

	require.NoError(t, os.Chmod(p, 0o644))
	_, err = credstore.LoadKey(p)
	require.ErrorContains(t, err, "chmod 600")
	require.NoError(t, os.WriteFile(p, []byte("short"), 0o600))
	require.NoError(t, os.Chmod(p, 0o600))
	_, err = credstore.LoadKey(p)
	require.ErrorContains(t, err, "64 hex digits")
}

// TestKeyFileRace: processes starting together on a fresh data dir all get the one key: none
// reads the file half-written (it failed as "not 64 hex digits" when the file was created empty
// and written after, in the MCP conformance suites run side by side).
func TestKeyFileRace(t *testing.T) {
	for round := 0; round < 50; round++ {
		dir := t.TempDir()
		p := filepath.Join(dir, credstore.KeyFileName)
		keys := make([][]byte, 16)
		errs := make([]error, 16)
		var wg sync.WaitGroup
		for i := range keys {
			wg.Add(1)
			go func() {
				defer wg.Done()
				keys[i], errs[i] = credstore.LoadKey(p)
			}()
		}
		wg.Wait()
		for i := range keys {
			require.NoError(t, errs[i], "round %d, caller %d", round, i)
			require.Equal(t, keys[0], keys[i], "round %d: one key for every caller", round)
		}
		left, err := os.ReadDir(dir)
		require.NoError(t, err)
		require.Len(t, left, 1, "round %d: only the key file is left: %v", round, left)
	}
}

func TestSealedAndBoundToItsRow(t *testing.T) {
	ctx := context.Background()
	db := storetest.New(t)
	key, err := credstore.LoadKey(filepath.Join(t.TempDir(), "k"))
	require.NoError(t, err)
	cs, err := credstore.New(db, key)
	require.NoError(t, err)

	require.NoError(t, cs.PutProvider(ctx, "openai", credstore.Provider{APIKey: provider.NewSecret("sk-very-secret"), BaseURL: "http://127.0.0.1:9/v1"}))
	p, err := cs.Provider(ctx, "openai")
	require.NoError(t, err)
	require.Equal(t, "sk-very-secret", p.APIKey.Reveal())
	require.Equal(t, "[redacted]", p.APIKey.String())

	row, err := db.GetCredential(ctx, credstore.KindProvider, "openai")
	require.NoError(t, err)
	require.NotContains(t, string(row.Sealed), "sk-very-secret")
	require.NotContains(t, string(row.Meta), "sk-very-secret")

	// A sealed value copied to another row does not open there.
	require.NoError(t, db.PutCredential(ctx, store.Credential{Kind: credstore.KindProvider, Key: "anthropic", Sealed: row.Sealed, Meta: row.Meta}))
	_, err = cs.Provider(ctx, "anthropic")
	require.ErrorContains(t, err, "does not open")

	// Another key opens nothing.
	other, err := credstore.New(db, make([]byte, 32))
	require.NoError(t, err)
	_, err = other.Provider(ctx, "openai")
	require.ErrorContains(t, err, "credential-key-file")

	require.NoError(t, cs.PutClientSecret(ctx, "srv", "cs-1"))
	sec, err := cs.ClientSecret(ctx, "srv")
	require.NoError(t, err)
	require.Equal(t, "cs-1", sec.Reveal())
	require.NoError(t, cs.PutClientSecret(ctx, "srv", ""))
	sec, err = cs.ClientSecret(ctx, "srv")
	require.NoError(t, err)
	require.False(t, sec.IsSet())

	is, err := cs.List(ctx, "")
	require.NoError(t, err)
	require.Len(t, is, 2)
	require.Equal(t, "provider:anthropic", is[0].ID())
	require.Equal(t, []string{"apiKey", "baseUrl"}, is[1].Meta.Fields)
	n, err := cs.DeleteAll(ctx)
	require.NoError(t, err)
	require.Equal(t, 2, n)
	require.ErrorIs(t, cs.Delete(ctx, credstore.KindProvider, "openai"), credstore.ErrNotFound)
}
