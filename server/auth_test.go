package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/zidane-server/zidane/protocol"
	"github.com/zidane-server/zidane/server/credstore"
	"github.com/zidane-server/zidane/server/oauth"
	"github.com/zidane-server/zidane/server/oauth/oauthtest"
	"github.com/zidane-server/zidane/server/store"
	"github.com/zidane-server/zidane/server/store/storetest"
)

// dialOrigin connects with tok as a browser page of origin would, and says hello.
func (e *testEnv) dialOrigin(tok, origin string) *testConn {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, e.wsURL, &websocket.DialOptions{
		HTTPHeader: http.Header{"Authorization": {"Bearer " + tok}, "Origin": {origin}},
	})
	require.NoError(e.t, err)
	ws.SetReadLimit(64 << 20)
	c := &testConn{t: e.t, ws: ws, wake: make(chan struct{}, 1), done: make(chan struct{})}
	e.t.Cleanup(func() { ws.CloseNow() })
	c.startReader()
	c.hello()
	return c
}

// lockedBuf is a log sink tests read.
type lockedBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}
func (l *lockedBuf) String() string { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }

// TestAuthSignInOverTheWire (issue 23 §5): an admin signs the server in to an MCP server
// behind the MCP TypeScript SDK's example authorization server, in browser mode through the
// server's own /zidane/oauth/callback; a foreign redirectUri and a completion from another
// connection are refused; auth.list (chat) shows the sign-in and never a secret; auth.remove
// signs out; no secret is in the log, the audit log or the database in clear.
func TestAuthSignInOverTheWire(t *testing.T) {
	as := oauthtest.Start(t)
	logs := &lockedBuf{}
	dbURL := storetest.URL(t)
	st := openStore(t, dbURL)
	e := newEnvStore(t, st, func(c *Config) {
		c.DataDir = t.TempDir()
		c.AllowedOrigins = []string{"http://app.test:5173"}
		c.Logger = slogTo(logs)
		c.MCPServers = func(_ context.Context, name string) (oauth.Server, error) {
			if name != "demo" {
				return oauth.Server{}, fmt.Errorf("no MCP server named %q", name)
			}
			return oauth.Server{Name: name, URL: as.MCP}, nil
		}
	})
	adminTok := e.mint("admin")
	admin := e.dialAs(adminTok)
	chat := e.dial()
	chat.hello()
	callback := e.hs.URL + oauth.CallbackPath

	for _, bad := range []string{"http://evil.example/zidane/oauth/callback", e.hs.URL + "/elsewhere", callback + "?x=1", "http://app.test:5173" + oauth.CallbackPath} {
		m := admin.call("auth.oauth.begin", fmt.Sprintf(`{"server":"demo","redirectUri":%q}`, bad))
		require.Equal(t, protocol.CodeInvalidParams, errCode(m), "%s: %v", bad, m)
		require.Contains(t, m["error"].(map[string]any)["message"], callback, "the refusal names the redirect to use")
	}
	// A browser page of an allowlisted origin: its own origin's callback, not the server's Host.
	page := e.dialOrigin(adminTok, "http://app.test:5173")
	require.Equal(t, protocol.CodeInvalidParams, errCode(page.call("auth.oauth.begin", fmt.Sprintf(`{"server":"demo","redirectUri":%q}`, callback))))
	require.Equal(t, "browser", page.result("auth.oauth.begin", `{"server":"demo","redirectUri":"http://app.test:5173/zidane/oauth/callback"}`)["mode"])

	require.Equal(t, protocol.CodeForbidden, errCode(chat.call("auth.oauth.begin", `{"server":"demo"}`)), "sign-in needs admin")
	require.Equal(t, protocol.CodeHandlerFailed, errCode(admin.call("auth.oauth.begin", `{"server":"nope"}`)))

	b := admin.result("auth.oauth.begin", fmt.Sprintf(`{"server":"demo","redirectUri":%q}`, callback))
	require.Equal(t, "browser", b["mode"])
	flowID := b["flowId"].(string)
	other := e.dialAs(adminTok)
	m := other.call("auth.oauth.complete", fmt.Sprintf(`{"flowId":%q}`, flowID))
	require.Equal(t, protocol.CodeHandlerFailed, errCode(m))
	require.Contains(t, m["error"].(map[string]any)["message"], "another connection")

	// complete waits for the callback: send it, then play the browser.
	admin.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":"done","method":"auth.oauth.complete","params":{"flowId":%q}}`, flowID))
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noFollow.Get(b["url"].(string))
	require.NoError(t, err)
	resp.Body.Close()
	loc := resp.Header.Get("Location")
	require.True(t, strings.HasPrefix(loc, callback+"?"), loc)
	resp, err = http.Get(loc)
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode, string(body))
	require.Equal(t, "no-store", resp.Header.Get("Cache-Control"))
	require.Equal(t, "no-referrer", resp.Header.Get("Referrer-Policy"))
	done := decodeObj(t, admin.nextAnswer())
	require.Equal(t, "done", done["id"])
	require.Nil(t, done["error"], "%v", done["error"])
	info := done["result"].(map[string]any)
	require.Equal(t, "mcp-token", info["kind"])
	require.Equal(t, "demo", info["server"])
	require.Equal(t, as.AS, info["issuer"])

	resp, err = http.Get(loc) // replayed
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)

	// The MCP client's way in: the token, refreshed as needed, for the MCP server only.
	tok, err := e.srv.OAuth().Token(t.Context(), "demo")
	require.NoError(t, err)
	req, _ := http.NewRequest(http.MethodPost, as.MCP, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	r2, err := (&http.Client{Transport: e.srv.OAuth().Transport("demo", nil)}).Do(req)
	require.NoError(t, err)
	r2.Body.Close()
	require.Equal(t, 200, r2.StatusCode, "the MCP server takes the token")

	// auth.list: chat may list; nothing secret on the wire.
	list := chat.call("auth.list", `{}`)
	raw := fmt.Sprint(list)
	require.Contains(t, raw, "mcp-token")
	require.Contains(t, raw, "mcp-client")
	require.NotContains(t, raw, tok.AccessToken)
	stored, err := e.srv.Credentials().Token(t.Context(), as.AS, "demo")
	require.NoError(t, err)
	require.NotContains(t, raw, stored.RefreshToken.Reveal())

	// auth.configure: a provider key, never answered, audited without it.
	require.Equal(t, protocol.CodeForbidden, errCode(chat.call("auth.configure", `{"provider":"openai","apiKey":"sk-chat"}`)))
	cfg := admin.result("auth.configure", `{"provider":"openai","apiKey":"sk-test-provider-key-123"}`)
	require.NotContains(t, fmt.Sprint(cfg), "sk-test")
	require.Equal(t, protocol.CodeInvalidParams, errCode(admin.call("auth.configure", `{"provider":"openai","baseUrl":"ftp://x"}`)))
	require.Equal(t, protocol.CodeInvalidParams, errCode(admin.call("auth.configure", `{"provider":"nope","apiKey":"k"}`)))
	audit := fmt.Sprint(admin.result("audit.list", `{}`))
	require.Contains(t, audit, "auth.configure")
	require.Contains(t, audit, "auth.oauth.begin")
	require.NotContains(t, audit, "sk-test")

	secrets := []string{tok.AccessToken, stored.RefreshToken.Reveal(), "sk-test-provider-key-123"}
	dump, err := exec.Command("pg_dump", "--data-only", dbURL).CombinedOutput()
	require.NoError(t, err, string(dump))
	require.Contains(t, string(dump), "COPY public.credentials")
	for _, s := range secrets {
		require.NotContains(t, string(dump), s, "no secret in the database in clear")
		require.NotContains(t, logs.String(), s, "no secret in the log")
	}

	// Sign-out: one, then all.
	require.Equal(t, protocol.CodeForbidden, errCode(chat.call("auth.remove", `{"all":true}`)))
	require.Equal(t, protocol.CodeInvalidParams, errCode(admin.call("auth.remove", `{}`)), "no params removes nothing")
	id := credstore.KindMCPToken + ":" + credstore.TokenKey(as.AS, "demo")
	require.EqualValues(t, "1", fmt.Sprint(admin.result("auth.remove", fmt.Sprintf(`{"id":%q}`, id))["removed"]))
	_, err = e.srv.OAuth().Token(t.Context(), "demo")
	require.ErrorIs(t, err, oauth.ErrSignInRequired)
	require.Equal(t, protocol.CodeHandlerFailed, errCode(admin.call("auth.remove", fmt.Sprintf(`{"id":%q}`, id))))
	admin.result("auth.remove", `{"all":true}`)
	require.Empty(t, chat.result("auth.list", `{}`)["credentials"])
}

// TestAuthConfigureReachesTheProvider (issue 23 §6): a key and base URL stored with
// auth.configure are used by the provider from its next request, without a restart, and
// onboarding.providers says they are stored (never what they are).
func TestAuthConfigureReachesTheProvider(t *testing.T) {
	var mu sync.Mutex
	var auths []string
	fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auths = append(auths, r.Header.Get("Authorization"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"object":"list","data":[{"id":"stored-model","object":"model"}]}`)
	}))
	t.Cleanup(fake.Close)
	e := newEnv(t, func(c *Config) { c.DataDir = t.TempDir() })
	admin := e.dialAs(e.mint("admin"))
	before := fmt.Sprint(admin.result("models.list", `{}`))
	require.NotContains(t, before, "openai/stored-model")

	admin.result("auth.configure", fmt.Sprintf(`{"provider":"openai","apiKey":"sk-stored-1","baseUrl":%q}`, fake.URL+"/v1"))
	require.Contains(t, fmt.Sprint(admin.result("models.list", `{}`)), "openai/stored-model")
	mu.Lock()
	require.Contains(t, auths, "Bearer sk-stored-1")
	mu.Unlock()

	ob := fmt.Sprint(admin.result("onboarding.providers", `{}`))
	require.Contains(t, ob, "stored:apiKey")
	require.Contains(t, ob, "stored:baseUrl")
	require.NotContains(t, ob, "sk-stored")

	admin.result("auth.configure", `{"provider":"openai","apiKey":"sk-stored-2"}`) // a new key, same base URL
	admin.result("models.list", `{}`)
	mu.Lock()
	require.Equal(t, "Bearer sk-stored-2", auths[len(auths)-1], "the new key is used without a restart")
	mu.Unlock()
}

// openStore opens a migrated store on the database at url, closed when t ends.
func openStore(t *testing.T, url string) *store.Store {
	t.Helper()
	st, err := store.Open(t.Context(), url, store.Options{Logger: testLogger()})
	require.NoError(t, err)
	t.Cleanup(st.Close)
	return st
}

// slogTo logs everything, debug included, as text to w.
func slogTo(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// TestAuthPreRegisteredClient (issue 23 §5, seed "mcp"): mcp.upsert's clientSecret goes to the
// credential store, never to mcps.json; a sign-in then uses the pre-registered client before
// any registration, and a client that pins its redirect stays in loopback mode.
func TestAuthPreRegisteredClient(t *testing.T) {
	as := oauthtest.Start(t)
	// The operator registered a confidential client with the authorization server beforehand.
	resp, err := http.Post(as.AS+"register", "application/json", strings.NewReader(`{"redirect_uris":["http://127.0.0.1/zidane/oauth/callback"],"token_endpoint_auth_method":"client_secret_post","client_name":"pre"}`))
	require.NoError(t, err)
	var reg struct {
		ClientID     string `json:"client_id"`
		ClientSecret string `json:"client_secret"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&reg))
	resp.Body.Close()
	require.NotEmpty(t, reg.ClientSecret)

	userFile := filepath.Join(t.TempDir(), "mcps.json")
	e := newEnv(t, func(c *Config) { c.DataDir = t.TempDir(); c.MCPUserFile = userFile })
	admin := e.dialAs(e.mint("admin"))
	chat := e.dial()
	chat.hello()
	upsert := fmt.Sprintf(`{"name":"pre","target":"user","server":{"type":"http","url":%q,"oauth":{"clientId":%q,"redirectUri":"http://127.0.0.1/zidane/oauth/callback"}},"clientSecret":%q}`, as.MCP, reg.ClientID, reg.ClientSecret)
	require.Equal(t, protocol.CodeForbidden, errCode(chat.call("mcp.upsert", upsert)))
	require.Equal(t, protocol.CodeInvalidParams, errCode(admin.call("mcp.upsert", `{"name":"s","target":"user","server":{"command":"true"},"clientSecret":"x"}`)))
	admin.result("mcp.upsert", upsert)
	file, err := os.ReadFile(userFile)
	require.NoError(t, err)
	require.Contains(t, string(file), reg.ClientID)
	require.NotContains(t, string(file), reg.ClientSecret, "no secret in mcps.json")
	require.NotContains(t, fmt.Sprint(admin.result("audit.list", `{}`)), reg.ClientSecret)

	b := admin.result("auth.oauth.begin", fmt.Sprintf(`{"server":"pre","redirectUri":%q}`, e.hs.URL+oauth.CallbackPath))
	require.Equal(t, "loopback", b["mode"], "a pre-registered client that pins its redirect stays loopback")
	require.Contains(t, b["url"], "client_id="+reg.ClientID)
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	r, err := noFollow.Get(b["url"].(string))
	require.NoError(t, err)
	r.Body.Close()
	done := admin.result("auth.oauth.complete", fmt.Sprintf(`{"flowId":%q,"input":%q}`, b["flowId"], r.Header.Get("Location")))
	require.Equal(t, "pre", done["server"])
	var kinds []string
	for _, c := range chat.result("auth.list", `{}`)["credentials"].([]any) {
		kinds = append(kinds, c.(map[string]any)["kind"].(string))
	}
	require.ElementsMatch(t, []string{"mcp-client-secret", "mcp-token"}, kinds, "the pre-registered client is used: no registration was made")
	tok, err := e.srv.Credentials().Token(t.Context(), as.AS, "pre")
	require.NoError(t, err)
	require.Equal(t, reg.ClientID, tok.ClientID)

	admin.result("mcp.remove", `{"name":"pre","target":"user"}`)
	sec, err := e.srv.Credentials().ClientSecret(t.Context(), "pre")
	require.NoError(t, err)
	require.False(t, sec.IsSet(), "removing the server drops its client secret")
}

// TestAuthCallbackReachesTheReplicaThatBegan (issues 23 §5, 25): two replicas on one database
// behind a load balancer without sticky sessions. A sign-in begun on A whose browser lands on B's
// /zidane/oauth/callback is passed to A, which exchanges the code: A's complete resolves, B shows
// the signed-in page, and the state is used up on both.
func TestAuthCallbackReachesTheReplicaThatBegan(t *testing.T) {
	as := oauthtest.Start(t)
	dbURL := storetest.URL(t)
	keyFile := filepath.Join(t.TempDir(), "credential.key")
	replica := func(id string) *testEnv {
		return newEnvStore(t, openStore(t, dbURL), func(c *Config) {
			c.DataDir = t.TempDir()
			c.CredentialKeyFile = keyFile
			c.ReplicaID = id
			c.MCPServers = func(_ context.Context, name string) (oauth.Server, error) {
				return oauth.Server{Name: name, URL: as.MCP}, nil
			}
		})
	}
	a := replica("A")
	b := replica("B")
	admin := a.dialAs(a.mint("admin"))
	callbackA := a.hs.URL + oauth.CallbackPath
	begun := admin.result("auth.oauth.begin", fmt.Sprintf(`{"server":"demo","redirectUri":%q}`, callbackA))
	require.Equal(t, "browser", begun["mode"])
	admin.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":"done","method":"auth.oauth.complete","params":{"flowId":%q}}`, begun["flowId"]))

	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noFollow.Get(begun["url"].(string))
	require.NoError(t, err)
	resp.Body.Close()
	loc := resp.Header.Get("Location")
	require.True(t, strings.HasPrefix(loc, callbackA+"?"), loc)
	onB := b.hs.URL + strings.TrimPrefix(loc, a.hs.URL) // the balancer sends the browser to B
	resp, err = http.Get(onB)
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	require.Contains(t, string(body), "Signed in")
	require.Equal(t, "no-store", resp.Header.Get("Cache-Control"))
	done := decodeObj(t, admin.nextAnswer())
	require.Nil(t, done["error"], "%v", done["error"])
	require.Equal(t, "demo", done["result"].(map[string]any)["server"])
	_, err = b.srv.OAuth().Token(t.Context(), "demo")
	require.NoError(t, err, "B reads the token A stored (one key file)")

	for _, u := range []string{onB, loc} { // replayed, on either replica
		resp, err = http.Get(u)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, u)
	}
	// A state naming a replica that does not answer: a page saying so, nothing reflected.
	resp, err = http.Get(b.hs.URL + oauth.CallbackPath + "?state=Z" + oauth.StateSep + "nope&code=<script>")
	require.NoError(t, err)
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusBadGateway, resp.StatusCode)
	require.NotContains(t, string(body), "script")
}
