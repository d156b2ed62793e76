package server

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/zidane-server/zidane/server/store"
	"github.com/zidane-server/zidane/server/store/storetest"
)

// upgradeStatus is the HTTP status a WebSocket upgrade with tok gets.
func (e *testEnv) upgradeStatus(tok string) int {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ws, resp, err := websocket.Dial(ctx, e.wsURL, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + tok}}})
	if err == nil {
		ws.CloseNow()
	}
	require.NotNil(e.t, resp, "dial: %v", err)
	return resp.StatusCode
}

// cachedTokenIDs is the set of token ids in the server's token cache.
func (e *testEnv) cachedTokenIDs() map[string]bool {
	out := map[string]bool{}
	for _, id := range e.srv.tokens.ids() {
		out[id] = true
	}
	return out
}

// TestTokenCacheRevocation: a token verified once is answered from the token cache, and every
// way a token is revoked ends that: tokens.revoke in this process at once (the next upgrade,
// right after the answer, is refused), a revocation by another process when its notice arrives,
// and one whose notice was lost by the periodic re-check.
func TestTokenCacheRevocation(t *testing.T) {
	url := storetest.URL(t)
	ctx := context.Background()
	st, err := store.Open(ctx, url, store.Options{})
	require.NoError(t, err)
	t.Cleanup(st.Close)
	// A re-check interval far longer than the test: only the first two paths can act, until
	// the third subtest starts a server with a short one.
	e := newEnvStore(t, st, func(c *Config) { c.TokenRecheck = time.Hour })
	admin := e.dialAs(e.mint("admin"))
	mint := func() (string, store.Token) {
		plain, tok, err := st.CreateToken(ctx, fmt.Sprintf("cached-%d", tokenSeq.Add(1)), "chat")
		require.NoError(t, err)
		return plain, tok
	}

	t.Run("tokens.revoke here", func(t *testing.T) {
		plain, tok := mint()
		require.Equal(t, http.StatusSwitchingProtocols, e.upgradeStatus(plain))
		require.True(t, e.cachedTokenIDs()[tok.ID], "a verified token is cached")
		require.Equal(t, http.StatusSwitchingProtocols, e.upgradeStatus(plain))
		admin.result("tokens.revoke", fmt.Sprintf(`{"name":%q}`, tok.Name))
		require.Equal(t, http.StatusUnauthorized, e.upgradeStatus(plain), "refused right after the answer")
		require.False(t, e.cachedTokenIDs()[tok.ID])
	})

	t.Run("revoked by another process", func(t *testing.T) {
		plain, tok := mint()
		require.Equal(t, http.StatusSwitchingProtocols, e.upgradeStatus(plain))
		require.True(t, e.cachedTokenIDs()[tok.ID])
		_, err := st.RevokeToken(ctx, tok.Name) // as `zidane-server token revoke` does: a notice
		require.NoError(t, err)
		// The notice's arrival is the event waited on; the bound is only a give-up for a lost one
		// (generous: a loaded 2-core machine delays it by seconds).
		require.Eventually(t, func() bool { return !e.cachedTokenIDs()[tok.ID] }, time.Minute, 5*time.Millisecond)
		require.Equal(t, http.StatusUnauthorized, e.upgradeStatus(plain))
	})

	t.Run("notice lost", func(t *testing.T) {
		e2 := newEnvStore(t, st, func(c *Config) { c.TokenRecheck = 300 * time.Millisecond })
		plain, tok := mint()
		require.Equal(t, http.StatusSwitchingProtocols, e2.upgradeStatus(plain))
		require.True(t, e2.cachedTokenIDs()[tok.ID])
		pc, err := pgx.Connect(ctx, url)
		require.NoError(t, err)
		defer pc.Close(ctx)
		_, err = pc.Exec(ctx, `UPDATE tokens SET revoked_at = now() WHERE id::text = $1`, tok.ID) // no notice
		require.NoError(t, err)
		// Wait for two re-checks to finish after the update (so one started after it), not for a
		// time: then the token is out of the cache and the next upgrade is refused.
		after := e2.srv.rechecks.Load()
		require.Eventually(t, func() bool { return e2.srv.rechecks.Load() >= after+2 }, time.Minute, 5*time.Millisecond)
		require.False(t, e2.cachedTokenIDs()[tok.ID], "a re-check drops a token revoked without a notice")
		require.Equal(t, http.StatusUnauthorized, e2.upgradeStatus(plain))
	})
}

// TestTokenCacheBounds: entries expire, the cache holds at most maxCachedTokens, a lookup under
// way when a token is dropped is not cached, and nothing is keyed by the plaintext.
func TestTokenCacheBounds(t *testing.T) {
	var c tokenCache
	now := time.Now()
	k := tokenKey("zds_one")
	c.put(k, store.Token{ID: "1"}, c.begin(), now, time.Second)
	_, ok := c.get(k, now.Add(999*time.Millisecond))
	require.True(t, ok)
	_, ok = c.get(k, now.Add(time.Second))
	require.False(t, ok, "expired")

	gen := c.begin()
	c.drop("some revoked token")
	c.put(k, store.Token{ID: "1"}, gen, now, time.Minute)
	_, ok = c.get(k, now)
	require.False(t, ok, "a lookup that raced a revocation is not cached")

	for i := range maxCachedTokens + 10 {
		c.put(tokenKey(fmt.Sprint("zds_", i)), store.Token{ID: fmt.Sprint(i)}, c.begin(), now, time.Minute)
	}
	require.Len(t, c.m, maxCachedTokens)
	for key := range c.m {
		require.NotEqual(t, "zds_1", string(key[:5]))
	}
}

// TestTokenRefusalCached: the store's refusal of a token is kept for TokenRecheck, so a client
// retrying a revoked or mistyped token does not cost a database round trip per try: with the
// tokens table locked by another client (a lookup would wait, then answer 503), the refused
// token is still refused at once with 401. Refusals expire and are bounded.
func TestTokenRefusalCached(t *testing.T) {
	e, url := newLockEnv(t, store.Options{}, nil)
	unknown := "zds_" + strings.Repeat("A", 43)
	require.Equal(t, http.StatusUnauthorized, e.upgradeStatus(unknown))

	release := holdLock(t, url, `LOCK TABLE tokens IN ACCESS EXCLUSIVE MODE`)
	require.Equal(t, http.StatusUnauthorized, e.upgradeStatus(unknown), "answered from the kept refusal, not the locked table")
	release()

	var c tokenCache
	now := time.Now()
	k := tokenKey(unknown)
	c.refuse(k, now, time.Second)
	require.True(t, c.wasRefused(k, now.Add(999*time.Millisecond)))
	require.False(t, c.wasRefused(k, now.Add(time.Second)), "expired")
	for i := range maxRefusedTokens + 10 {
		c.refuse(tokenKey(fmt.Sprint("zds_", i)), now, time.Minute)
	}
	require.Len(t, c.refused, maxRefusedTokens)
}
