package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/zidane-server/zidane/server/store"
	"github.com/zidane-server/zidane/server/store/storetest"
)

// TestRevocationIsBroadcast: a revoke by one store (another process, e.g. the CLI) reaches the
// listener of another store on the same database.
func TestRevocationIsBroadcast(t *testing.T) {
	url := storetest.URL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	server, err := store.Open(ctx, url, store.Options{})
	require.NoError(t, err)
	defer server.Close()
	cli, err := store.Open(ctx, url, store.Options{})
	require.NoError(t, err)
	defer cli.Close()

	_, tok, err := cli.CreateToken(ctx, "laptop", "chat")
	require.NoError(t, err)
	got := make(chan string, 1)
	lctx, lcancel := context.WithCancel(ctx)
	defer lcancel()
	go server.ListenTokenRevocations(lctx, 100*time.Millisecond, func(id string) { got <- id }, nil)
	// LISTEN must be in place before the revoke; retry the revoke path until one arrives.
	time.Sleep(200 * time.Millisecond)
	_, err = cli.RevokeToken(ctx, "laptop")
	require.NoError(t, err)
	select {
	case id := <-got:
		require.Equal(t, tok.ID, id)
	case <-time.After(5 * time.Second):
		t.Fatal("no revocation notification within 5 s")
	}
}

// TestRevokeTokenSecretIsNoUse: revoking a stale daemon.json's token by its plaintext (a server's
// start) leaves its last use as it was: `token list` showed the revocation as the token's last
// use while the start looked it up first.
func TestRevokeTokenSecretIsNoUse(t *testing.T) {
	st := storetest.New(t)
	ctx := context.Background()
	plain, _, err := st.CreateToken(ctx, "local-1234abcd", "chat")
	require.NoError(t, err)
	got, err := st.RevokeTokenSecret(ctx, plain, "operator")
	require.NoError(t, err)
	require.Equal(t, "local-1234abcd", got.Name)
	require.NotNil(t, got.RevokedAt)
	require.Nil(t, got.LastUsedAt, "a revoke is not a use")
	list, err := st.ListTokens(ctx)
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Nil(t, list[0].LastUsedAt)
	_, err = st.RevokeTokenSecret(ctx, plain, "operator")
	require.ErrorIs(t, err, store.ErrNotFound, "already revoked")
	_, err = st.RevokeTokenSecret(ctx, "not-a-token", "operator")
	require.ErrorIs(t, err, store.ErrNotFound)
	_, err = st.LookupToken(ctx, plain)
	require.ErrorIs(t, err, store.ErrNotFound, "a revoked token no longer authenticates")
}
