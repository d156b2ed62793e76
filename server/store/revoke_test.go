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
