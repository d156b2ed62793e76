package server

import (
	"context"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// get sends GET path to the test server with the given Host header (and a bearer token when tok
// is set; upgrade adds the WebSocket upgrade headers) and returns the status and body.
func (e *testEnv) get(path, host, tok string, upgrade bool) (int, string) {
	e.t.Helper()
	req, err := http.NewRequest(http.MethodGet, e.hs.URL+path, nil)
	require.NoError(e.t, err)
	req.Host = host
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	if upgrade {
		req.Header.Set("Connection", "Upgrade")
		req.Header.Set("Upgrade", "websocket")
		req.Header.Set("Sec-WebSocket-Version", "13")
		req.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
		req.Header.Set("Sec-WebSocket-Protocol", "zidane")
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(e.t, err)
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusSwitchingProtocols {
		return resp.StatusCode, ""
	}
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestHostCheck_RebindingRefused: on a loopback listener a request whose Host is a rebound name
// gets 403 on the upgrade and on /metrics (even with an admin token), while 127.0.0.1:<port>,
// localhost:<port> and [::1]:<port> work; /healthz and /health answer whatever the Host; a listed
// --allowed-host works, a listed name:port only on that port (issue 7 item 4).
func TestHostCheck_RebindingRefused(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.AllowedHosts = []string{"proxy.example", "pinned.example:8443"} })
	_, port, err := net.SplitHostPort(strings.TrimPrefix(e.hs.URL, "http://"))
	require.NoError(t, err)
	admin := e.mint("admin")
	for _, host := range []string{"evil.example:" + port, "evil.example", "localhost.evil.example:" + port, "127.0.0.1.nip.io:" + port, "pinned.example:" + port} {
		code, body := e.get("/", host, e.token, true)
		assert.Equal(t, http.StatusForbidden, code, "upgrade with Host %q", host)
		assert.Contains(t, body, "host not allowed")
		code, _ = e.get("/metrics", host, admin, false)
		assert.Equal(t, http.StatusForbidden, code, "/metrics with Host %q", host)
		code, _ = e.get("/version", host, "", false)
		assert.Equal(t, http.StatusForbidden, code, "/version with Host %q", host)
		for _, p := range []string{"/healthz", "/health"} {
			code, body = e.get(p, host, "", false)
			assert.Equal(t, http.StatusOK, code, "%s with Host %q", p, host)
			assert.Equal(t, "ok", body)
		}
	}
	for _, host := range []string{"127.0.0.1:" + port, "localhost:" + port, "LocalHost:" + port, "[::1]:" + port, "app.localhost:" + port, "proxy.example", "proxy.example:" + port, "localhost:8080" /* a tunnel's port */, "127.0.0.1", "pinned.example:8443"} {
		code, _ := e.get("/", host, e.token, true)
		assert.Equal(t, http.StatusSwitchingProtocols, code, "upgrade with Host %q", host)
		code, body := e.get("/metrics", host, admin, false)
		assert.Equal(t, http.StatusOK, code, "/metrics with Host %q", host)
		assert.Contains(t, body, "zidane_connections")
	}
	// A real WebSocket through the name localhost.
	saved := e.wsURL
	e.wsURL = "ws://localhost:" + port
	c := e.dial()
	e.wsURL = saved
	c.hello()
}

// TestMetricsAccess: /metrics answers an admin token and the unix socket, never a loopback peer
// by itself (a reverse proxy on the same host makes every request loopback) nor a chat token;
// DebugHandler serves it without a token for the --debug-listen address.
func TestMetricsAccess(t *testing.T) {
	e := newEnv(t, nil)
	host := strings.TrimPrefix(e.hs.URL, "http://")
	code, body := e.get("/metrics", host, "", false)
	assert.Equal(t, http.StatusUnauthorized, code, "a loopback peer without a token")
	assert.Contains(t, body, "admin token")
	code, body = e.get("/metrics", host, "zds_not-a-token-we-minted", false)
	assert.Equal(t, http.StatusUnauthorized, code, "a token that does not exist")
	assert.Contains(t, body, "token create --name metrics --scope admin")
	code, body = e.get("/metrics", host, e.token, false)
	assert.Equal(t, http.StatusForbidden, code, "a chat token")
	assert.Contains(t, body, "scope is chat")
	assert.NotContains(t, body, "go_goroutines")
	admin := e.mint("admin")
	code, body = e.get("/metrics", host, admin, false)
	assert.Equal(t, http.StatusOK, code, "an admin token")
	assert.Contains(t, body, "go_goroutines")
	for _, method := range []string{http.MethodHead, http.MethodPost} {
		req, err := http.NewRequest(method, e.hs.URL+"/metrics", nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+admin)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode, method)
		assert.Equal(t, "GET", resp.Header.Get("Allow"), method)
	}

	// The unix socket: local by construction, no token and no Host check.
	sock := filepath.Join(t.TempDir(), "s.sock")
	ln, err := net.Listen("unix", sock)
	require.NoError(t, err)
	hs := &http.Server{Handler: e.srv}
	go hs.Serve(ln)
	t.Cleanup(func() { hs.Close() })
	uc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	resp, err := uc.Get("http://rebound.example/metrics")
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Contains(t, string(b), "zidane_connections")

	// The debug handler (--debug-listen): /metrics without a token, nothing else.
	dl, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ds := &http.Server{Handler: e.srv.DebugHandler()}
	go ds.Serve(dl)
	t.Cleanup(func() { ds.Close() })
	resp, err = http.Get("http://" + dl.Addr().String() + "/metrics")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	resp, err = http.Get("http://" + dl.Addr().String() + "/protocol.json")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)
}
