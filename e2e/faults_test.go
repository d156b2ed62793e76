package e2e

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zidane-server/zidane/server/store"
)

func health(t *testing.T, s *serverProc) (int, string) {
	t.Helper()
	hc := &http.Client{Timeout: 5 * time.Second}
	resp, err := hc.Get("http://" + s.addr + "/healthz")
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestPostgresGoesAwayAndComesBack: with its database stopped the server stays up, says
// "degraded" on /healthz, answers calls with a clear error instead of hanging, keeps its
// connections, and recovers by itself when the database is back; the transcript is intact.
func TestPostgresGoesAwayAndComesBack(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a managed Postgres")
	}
	dir, err := os.MkdirTemp("/tmp", "zpg")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pg, err := store.StartManaged(ctx, dir, nil)
	require.NoError(t, err)
	t.Cleanup(func() { pg.Stop() })

	s := startServer(t, serverOpts{dbURL: pg.URL()})
	c := dial(t, s, s.mintToken("faults", "chat"))
	c.hello()
	sid, _ := createSession(t, c)
	runID := sendPrompt(t, c, sid, "Before the outage.")
	c.collectRun(runID)
	before := c.result("sessions.loadEvents", map[string]any{"sessionId": sid}, nil)

	require.NoError(t, pg.Stop())
	code, body := health(t, s)
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Contains(t, body, "degraded")
	start := time.Now()
	e := c.callErr("sessions.list", map[string]any{})
	assert.Equal(t, -32014, e.Code)
	assert.Contains(t, e.Message, "database")
	assert.Less(t, time.Since(start), 15*time.Second, "a call answers instead of hanging")
	e = c.callErr("chat.send", map[string]any{"sessionId": sid, "prompt": "During the outage."})
	assert.Equal(t, -32014, e.Code)
	c.result("$/ping", map[string]any{}, nil) // the connection is still served

	pg2, err := store.StartManaged(ctx, dir, nil)
	require.NoError(t, err)
	t.Cleanup(func() { pg2.Stop() })
	deadline := time.Now().Add(30 * time.Second)
	for {
		if code, _ := health(t, s); code == http.StatusOK {
			break
		}
		require.True(t, time.Now().Before(deadline), "no recovery within 30 s")
		time.Sleep(200 * time.Millisecond)
	}
	// The transcript is as it was: the prompt refused during the outage (its run:start went out
	// before its write failed, so the $seq watermark moved) kept nothing.
	after := c.result("sessions.loadEvents", map[string]any{"sessionId": sid}, nil)
	var b, a map[string]any
	require.NoError(t, json.Unmarshal(before, &b))
	require.NoError(t, json.Unmarshal(after, &a))
	assert.Greater(t, a["$seq"], b["$seq"])
	delete(a, "$seq")
	delete(b, "$seq")
	assert.Equal(t, b, a)
	runID = sendPrompt(t, c, sid, "After the outage.")
	c.collectRun(runID)
}
