package server

import (
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestProfileAccess: /debug/pprof/ answers who may read /metrics (an admin token; anyone on the
// --debug-listen address), never a loopback peer by itself nor a chat token.
func TestProfileAccess(t *testing.T) {
	e := newEnv(t, nil)
	host := strings.TrimPrefix(e.hs.URL, "http://")
	code, _ := e.get("/debug/pprof/", host, "", false)
	assert.Equal(t, http.StatusUnauthorized, code, "a loopback peer without a token")
	code, body := e.get("/debug/pprof/", host, e.token, false)
	assert.Equal(t, http.StatusForbidden, code, "a chat token")
	assert.NotContains(t, body, "goroutine?debug")
	code, body = e.get("/debug/pprof/", host, e.mint("admin"), false)
	assert.Equal(t, http.StatusOK, code, "an admin token")
	assert.Contains(t, body, "goroutine")

	dl, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ds := &http.Server{Handler: e.srv.DebugHandler()}
	go ds.Serve(dl)
	t.Cleanup(func() { ds.Close() })
	resp, err := http.Get("http://" + dl.Addr().String() + "/debug/pprof/goroutine?debug=1")
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Contains(t, string(b), "goroutine profile")
}
