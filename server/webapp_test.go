package server

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zidane-server/zidane/protocol"
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
		assert.Empty(t, hd.Get("Content-Security-Policy"), p)
		assert.Contains(t, body, "Connect a WebSocket", p)
	}
	c := e.dial()
	c.hello()
}
