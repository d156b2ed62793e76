package e2e

import (
	"context"
	"os/exec"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zidane-server/zidane/server/store/storetest"
)

// waitClosed waits for the connection to be closed by the server and returns the close status.
func waitClosed(t *testing.T, c *wsConn, within time.Duration) websocket.StatusCode {
	t.Helper()
	deadline := time.After(within)
	for {
		select {
		case _, ok := <-c.frames:
			if !ok {
				return websocket.CloseStatus(c.readErr)
			}
		case <-deadline:
			t.Fatalf("connection still open after %s", within)
		}
	}
}

// TestRevokeClosesLiveConnections: revoking a token closes its open connections with 1008 within
// a second, whether the revoke comes over the protocol (tokens.revoke) or from the CLI (another
// process); other tokens' connections stay open; the token can no longer connect.
func TestRevokeClosesLiveConnections(t *testing.T) {
	db := storetest.URL(t)
	s := startServer(t, serverOpts{dbURL: db})
	admin := dial(t, s, s.mintToken("ops", "admin"))
	admin.hello()

	phoneTok := s.mintToken("phone", "chat")
	phone := dial(t, s, phoneTok)
	phone.hello()
	other := dial(t, s, s.mintToken("laptop", "chat"))
	other.hello()

	start := time.Now()
	admin.result("tokens.revoke", map[string]any{"name": "phone"}, nil)
	assert.Equal(t, websocket.StatusPolicyViolation, waitClosed(t, phone, 2*time.Second))
	assert.Less(t, time.Since(start), time.Second+200*time.Millisecond)
	other.result("$/ping", map[string]any{}, nil) // still open

	status, body, _ := upgradeReq(t, s, map[string]string{"Authorization": "Bearer " + phoneTok})
	assert.Equal(t, 401, status)
	assert.Equal(t, "Unauthorized", body)

	// From another process: the operator's CLI.
	start = time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, serverBin, "token", "revoke", "laptop", "--database-url", db)
	cmd.Env = env(false)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Equal(t, websocket.StatusPolicyViolation, waitClosed(t, other, 2*time.Second))
	assert.Less(t, time.Since(start), 2*time.Second)

	f := admin.call("tokens.revoke", map[string]any{"name": "phone"})
	require.NotNil(t, f.Error)
	assert.Contains(t, f.Error.Message, `No live token named "phone"`)
}
