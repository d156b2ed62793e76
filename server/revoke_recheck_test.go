package server

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zidane-server/zidane/server/store"
	"github.com/zidane-server/zidane/server/store/storetest"
)

// TestFieldCase_B32_LostRevocationNoticeIsEnforced: a revocation whose NOTIFY never reaches the
// server (written while its LISTEN connection was down; here straight into the table, without a
// notice) still closes the token's connections with 1008, by the periodic token re-check
// (Config.TokenRecheck) and the re-check after every (re)LISTEN. Before the fix the connection
// stayed open and kept answering.
func TestFieldCase_B32_LostRevocationNoticeIsEnforced(t *testing.T) {
	url := storetest.URL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := store.Open(ctx, url, store.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	t.Cleanup(st.Close)
	e := newEnvStore(t, st, func(c *Config) { c.TokenRecheck = 300 * time.Millisecond })
	c, _ := e.dialScoped("chat")
	other, _ := e.dialScoped("chat")
	tok, err := st.LookupToken(ctx, e.token) // the env's own token is not the one revoked below
	require.NoError(t, err)
	c.result("sessions.list", `{}`)

	var victim string
	e.srv.connsMu.Lock()
	for sc := range e.srv.conns {
		if sc.token.ID != tok.ID {
			victim = sc.token.ID
			break
		}
	}
	e.srv.connsMu.Unlock()
	require.NotEmpty(t, victim)
	pc, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer pc.Close(ctx)
	_, err = pc.Exec(ctx, `UPDATE tokens SET revoked_at = now() WHERE id::text = $1`, victim)
	require.NoError(t, err)

	// Exactly the revoked token's connection closes, with 1008, within a few intervals.
	var closed, open *testConn
	// Which test connection is the victim's: the one that ends.
	deadline := time.Now().Add(5 * time.Second)
	for closed == nil && time.Now().Before(deadline) {
		for _, x := range []*testConn{c, other} {
			select {
			case <-x.done:
				closed = x
			default:
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	require.NotNil(t, closed, "the revoked token's connection must close without a notice")
	assert.Equal(t, websocket.StatusPolicyViolation, closed.closeStatus(time.Second))
	open = c
	if closed == c {
		open = other
	}
	open.result("sessions.list", `{}`)
}
