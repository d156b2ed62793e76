package server

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zidane-server/zidane/protocol"
	"github.com/zidane-server/zidane/server/webapp"
)

func httpGet(t *testing.T, url string) (int, http.Header, string) {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

// TestWebAppServed (issue 24 item 3): with the app on, plain GETs that no route takes get the app
// (or, in a binary built without it, the page saying how to build it) under the strict CSP, the
// server's own routes keep answering, /zidane/… and /*.json answer 404, and an upgrade on any
// path, the app's routes included, still reaches the WebSocket: a same-origin page connects with
// no --allowed-origin entry, another origin is refused.
func TestWebAppServed(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.WebApp = true })
	for _, p := range []string{"/", "/s/7f6b2bc1-27b2-4052-a2b7-de05d2538178"} {
		status, hd, body := httpGet(t, e.hs.URL+p)
		assert.Equal(t, http.StatusOK, status, p)
		assert.Equal(t, "text/html; charset=utf-8", hd.Get("Content-Type"), p)
		assert.Contains(t, hd.Get("Content-Security-Policy"), "default-src 'self'", p)
		assert.Contains(t, body, "<html", p)
	}
	on, built := e.srv.WebApp()
	assert.True(t, on)
	if !built {
		_, _, body := httpGet(t, e.hs.URL+"/")
		assert.Contains(t, body, "make build", "a binary without the build says how to build it")
	}
	for _, p := range []string{"/zidane/x", "/x.json", "/api/chat/x"} {
		status, _, body := httpGet(t, e.hs.URL+p)
		assert.Equal(t, http.StatusNotFound, status, p)
		assert.NotContains(t, body, "<html", p)
	}
	status, _, body := httpGet(t, e.hs.URL+"/healthz")
	assert.Equal(t, http.StatusOK, status)
	assert.Equal(t, "ok", body)
	status, hd, _ := httpGet(t, e.hs.URL+"/protocol.json")
	assert.Equal(t, http.StatusOK, status)
	assert.Equal(t, "application/schema+json", hd.Get("Content-Type"))
	status, hd, body = httpGet(t, e.hs.URL+"/openrpc.json") // beside /protocol.json, no token (issue 29)
	assert.Equal(t, http.StatusOK, status)
	assert.Equal(t, "application/json", hd.Get("Content-Type"))
	assert.Equal(t, string(protocol.OpenRPCDocument), body)
	assert.Contains(t, body, `"openrpc": "1.3.2"`)

	origin := e.hs.URL // http://127.0.0.1:<port>: the page's own origin
	for _, p := range []string{"/", "/s/7f6b2bc1-27b2-4052-a2b7-de05d2538178"} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		ws, resp, err := websocket.Dial(ctx, e.wsURL+p, &websocket.DialOptions{
			HTTPHeader:   http.Header{"Origin": {origin}},
			Subprotocols: []string{"zidane", "zidane.bearer." + e.token},
		})
		cancel()
		require.NoError(t, err, "a same-origin upgrade on %s reaches the WebSocket", p)
		assert.Equal(t, http.StatusSwitchingProtocols, resp.StatusCode)
		assert.Equal(t, "zidane", ws.Subprotocol())
		c := &testConn{t: t, ws: ws, wake: make(chan struct{}, 1), done: make(chan struct{})}
		c.startReader()
		c.hello()
		ws.CloseNow()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, resp, err := websocket.Dial(ctx, e.wsURL+"/", &websocket.DialOptions{
		HTTPHeader:   http.Header{"Origin": {"http://evil.example"}},
		Subprotocols: []string{"zidane", "zidane.bearer." + e.token},
	})
	require.Error(t, err)
	assert.Equal(t, http.StatusForbidden, resp.StatusCode, "another origin is refused")
}

// TestWebAppOff: --web-app=false serves no page: a plain GET of / or a client route is the
// server's 404, and the WebSocket answers as before.
func TestWebAppOff(t *testing.T) {
	e := newEnv(t, nil) // Config.WebApp false, as --web-app=false sets it
	on, _ := e.srv.WebApp()
	assert.False(t, on)
	for _, p := range []string{"/", "/s/1", "/index.html"} {
		status, hd, body := httpGet(t, e.hs.URL+p)
		assert.Equal(t, http.StatusNotFound, status, p)
		assert.Equal(t, BaseCSP, hd.Get("Content-Security-Policy"), "%s: the server's own answer, not the app's policy", p)
		assert.Contains(t, body, "Connect a WebSocket", p)
	}
	c := e.dial()
	c.hello()
}

// TestEveryAnswerHasSecurityHeaders (break-it): not only the app's answers but every plain HTTP
// answer of the port, refusals included (health, version, pairing, media, metrics, the SSE
// routes, the 404 of an unknown method, an upgrade without a token, a foreign Host), carries
// nosniff, no-referrer, X-Frame-Options: DENY and a CSP that frames nothing; the app and
// /zidane/media keep their own policies.
func TestEveryAnswerHasSecurityHeaders(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.WebApp, c.SSEBasePath = true, "/api/chat" })
	do := func(method, path string, hdr ...string) *http.Response {
		req, err := http.NewRequest(method, e.hs.URL+path, strings.NewReader("{}"))
		require.NoError(t, err)
		for i := 0; i+1 < len(hdr); i += 2 {
			if hdr[i] == "Host" {
				req.Host = hdr[i+1]
			} else {
				req.Header.Set(hdr[i], hdr[i+1])
			}
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	upgrade := []string{"Connection", "Upgrade", "Upgrade", "websocket", "Sec-WebSocket-Version", "13", "Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="}
	cases := []struct {
		name, method, path string
		hdr                []string
		status             int
		csp                string
	}{
		{"health", http.MethodGet, "/healthz", nil, http.StatusOK, BaseCSP},
		{"version", http.MethodGet, "/version", nil, http.StatusOK, BaseCSP},
		{"pair GET", http.MethodGet, "/zidane/pair", nil, http.StatusMethodNotAllowed, BaseCSP},
		{"pair bad body", http.MethodPost, "/zidane/pair", nil, http.StatusBadRequest, BaseCSP},
		{"media without ticket", http.MethodGet, "/zidane/media?path=x.png", nil, http.StatusUnauthorized, BaseCSP},
		{"metrics without token", http.MethodGet, "/metrics", nil, http.StatusUnauthorized, BaseCSP},
		{"SSE without token", http.MethodPost, "/api/chat/sessions", nil, http.StatusUnauthorized, BaseCSP},
		{"POST to the app", http.MethodPost, "/s/1", nil, http.StatusMethodNotAllowed, webapp.CSP},
		{"POST to no route", http.MethodPost, "/zidane/nothing", nil, http.StatusNotFound, webapp.CSP},
		{"upgrade without token", http.MethodGet, "/", upgrade, http.StatusUnauthorized, BaseCSP},
		{"foreign Host", http.MethodGet, "/", []string{"Host", "evil.example"}, http.StatusForbidden, BaseCSP},
		{"the app", http.MethodGet, "/s/1", nil, http.StatusOK, webapp.CSP},
		{"the app's 404", http.MethodGet, "/x.json", nil, http.StatusNotFound, webapp.CSP},
	}
	for _, c := range cases {
		resp := do(c.method, c.path, c.hdr...)
		assert.Equal(t, c.status, resp.StatusCode, c.name)
		assert.Equal(t, "nosniff", resp.Header.Get("X-Content-Type-Options"), c.name)
		assert.Equal(t, "no-referrer", resp.Header.Get("Referrer-Policy"), c.name)
		assert.Equal(t, "DENY", resp.Header.Get("X-Frame-Options"), c.name)
		assert.Equal(t, c.csp, resp.Header.Get("Content-Security-Policy"), c.name)
		assert.Len(t, resp.Header.Values("Content-Security-Policy"), 1, "%s: one policy, not two", c.name)
	}
}
