package e2e

import (
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zidane-server/zidane/server/store/storetest"
)

// TestMetrics: GET /metrics (loopback) exposes connections, requests by method and outcome, and
// the Go runtime's figures.
func TestMetrics(t *testing.T) {
	s := startServer(t, serverOpts{dbURL: storetest.URL(t)})
	c := dial(t, s, s.mintToken("metrics", "chat"))
	c.hello()
	c.callErr("sessions.get", map[string]any{"sessionId": "nope"})
	resp, err := http.Get("http://" + s.addr + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	require.Equal(t, 200, resp.StatusCode)
	body := string(b)
	assert.Contains(t, body, "zidane_connections 1")
	assert.Contains(t, body, `zidane_requests_total{method="ipc.hello",outcome="ok"} 1`)
	assert.Contains(t, body, `zidane_requests_total{method="sessions.get",outcome="-32014"} 1`)
	assert.Contains(t, body, "go_goroutines")
}
