package e2e

import (
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zidane-server/zidane/server/store/storetest"
)

// TestMetrics: GET /metrics exposes connections, requests by method and outcome, and the Go
// runtime's figures, to an admin token and on the --debug-listen address; a loopback peer without
// a token gets 401 (a reverse proxy on the same host would make every request loopback).
func TestMetrics(t *testing.T) {
	debug := freeAddr(t)
	s := startServer(t, serverOpts{dbURL: storetest.URL(t), extra: []string{"--debug-listen", debug}})
	c := dial(t, s, s.mintToken("metrics", "chat"))
	c.hello()
	c.callErr("sessions.get", map[string]any{"sessionId": "nope"})
	resp, err := http.Get("http://" + s.addr + "/metrics")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "loopback alone is no credential")
	req, _ := http.NewRequest(http.MethodGet, "http://"+s.addr+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+s.mintToken("scraper", "admin"))
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode)
	resp, err = http.Get("http://" + debug + "/metrics")
	require.NoError(t, err)
	b2, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode, "the debug address needs no token")
	assert.Contains(t, string(b2), "zidane_connections 1")
	body := string(b)
	assert.Contains(t, body, "zidane_connections 1")
	assert.Contains(t, body, `zidane_requests_total{method="ipc.hello",outcome="ok"} 1`)
	assert.Contains(t, body, `zidane_requests_total{method="sessions.get",outcome="-32014"} 1`)
	assert.Contains(t, body, "go_goroutines")
}
