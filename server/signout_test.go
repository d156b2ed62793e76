package server

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zidane-server/zidane/server/store"
)

// dialToken connects with token as the bearer and returns the upgrade's status (101 or a refusal).
func (e *testEnv) dialToken(token string) (*testConn, int) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ws, resp, err := websocket.Dial(ctx, e.wsURL, &websocket.DialOptions{
		HTTPHeader: http.Header{"Authorization": {"Bearer " + token}},
	})
	if err != nil {
		require.NotNil(e.t, resp, "dial: %v", err)
		return nil, resp.StatusCode
	}
	ws.SetReadLimit(64 << 20)
	c := &testConn{t: e.t, ws: ws, wake: make(chan struct{}, 1), done: make(chan struct{})}
	e.t.Cleanup(func() { ws.CloseNow() })
	c.startReader()
	return c, resp.StatusCode
}

// TestTokensRevokeSelf (issue 24, "sign out"): a chat token revokes itself over a real WebSocket:
// the caller gets the revoked token's info, then its connection and the token's other
// connection are closed with 1008, the token is refused at the next connect, another token is
// untouched, and the audit log holds the call and the revocation.
func TestTokensRevokeSelf(t *testing.T) {
	e := newEnv(t, nil)
	other := e.dial()
	other.hello()
	c := e.dial()
	c.hello()
	bystander, _ := e.dialToken(e.mint("chat"))
	bystander.hello()

	r := c.result("tokens.revokeSelf", `{}`)
	assert.Equal(t, "chat", r["scope"])
	assert.NotNil(t, r["revokedAt"], "the answer is the revoked token")
	assert.Equal(t, websocket.StatusPolicyViolation, c.closeStatus(5*time.Second), "the caller is closed after its answer")
	assert.Equal(t, websocket.StatusPolicyViolation, other.closeStatus(5*time.Second), "the token's other connection is closed")
	_, status := e.dialToken(e.token)
	assert.Equal(t, http.StatusUnauthorized, status, "a signed-out token is refused")
	bystander.result("daemon.info", `{}`) // another token's connection is untouched

	ctx := context.Background()
	entries, err := e.st.ListAudit(ctx, 50, 0, "")
	require.NoError(t, err)
	var call, revoke bool
	for _, en := range entries {
		call = call || (en.Action == store.AuditCall && strings.HasPrefix(en.Detail, "tokens.revokeSelf") && strings.HasSuffix(en.Detail, "ok"))
		revoke = revoke || (en.Action == store.AuditTokenRevoke && en.Actor == r["name"])
	}
	assert.True(t, call, "the call is audited: %+v", entries)
	assert.True(t, revoke, "the revocation is audited: %+v", entries)
}

// TestPairTTLToken (issue 24, `pair --ttl-token D`): a code made with a token life trades for a
// token that carries expiresAt, works until then, and past it is closed (1008) and refused; a
// code without one gives a token that lasts.
func TestPairTTLToken(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	pair := func(code, name string) string {
		resp, err := http.Post(e.hs.URL+"/zidane/pair", "application/json", bytes.NewBufferString(`{"code":"`+code+`","name":"`+name+`"}`))
		require.NoError(t, err)
		defer resp.Body.Close()
		var out map[string]string
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
		require.Equal(t, http.StatusOK, resp.StatusCode, out)
		return out["token"]
	}
	_, _, err := e.st.CreatePairingCode(ctx, "chat", time.Minute, -time.Second)
	require.Error(t, err, "a negative token life is refused")
	_, _, err = e.st.CreatePairingCode(ctx, "chat", time.Minute, store.MaxTokenTTL+time.Hour)
	require.Error(t, err, "a token life past the bound is refused")

	code, _, err := e.st.CreatePairingCode(ctx, "chat", time.Minute, time.Second)
	require.NoError(t, err)
	before := time.Now()
	short := pair(code, "short-lived")
	lasting, _, err := e.st.CreatePairingCode(ctx, "chat", time.Minute, 0)
	require.NoError(t, err)
	forever := pair(lasting, "lasting")

	admin, _ := e.dialToken(e.mint("admin"))
	admin.hello()
	list := admin.result("tokens.list", `{}`)["tokens"].([]any)
	byName := map[string]map[string]any{}
	for _, x := range list {
		m := x.(map[string]any)
		byName[m["name"].(string)] = m
	}
	exp, err := byName["short-lived"]["expiresAt"].(json.Number).Int64()
	require.NoError(t, err, "the paired token carries expiresAt: %v", byName["short-lived"])
	assert.InDelta(t, before.Add(time.Second).UnixMilli(), exp, 2000)
	assert.NotContains(t, byName["lasting"], "expiresAt")

	tok, err := e.st.LookupToken(ctx, short)
	require.NoError(t, err)
	c, status := e.dialToken(short)
	require.Equal(t, http.StatusSwitchingProtocols, status, "the token works within its life")
	c.hello()
	assert.Equal(t, websocket.StatusPolicyViolation, c.closeStatus(10*time.Second), "its connection is closed when it expires")
	_, status = e.dialToken(short)
	assert.Equal(t, http.StatusUnauthorized, status, "an expired token is refused")
	_, err = e.st.LookupToken(ctx, short)
	assert.ErrorIs(t, err, store.ErrNotFound)
	gone, err := e.st.RevokedAmong(ctx, []string{tok.ID})
	require.NoError(t, err)
	assert.Equal(t, []string{tok.ID}, gone, "the re-check of open connections counts it gone")
	_, status = e.dialToken(forever)
	assert.Equal(t, http.StatusSwitchingProtocols, status, "a token without a life lasts")
}
