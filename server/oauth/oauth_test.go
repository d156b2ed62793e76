package oauth_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/zidane-server/zidane/server/credstore"
	"github.com/zidane-server/zidane/server/oauth"
	"github.com/zidane-server/zidane/server/oauth/oauthtest"
	"github.com/zidane-server/zidane/server/store"
	"github.com/zidane-server/zidane/server/store/storetest"
)

func TestMain(m *testing.M) { storetest.Main(m) }

type localAS = oauthtest.AS

func startAS(t *testing.T) localAS { return oauthtest.Start(t) }

// rig is a Manager over a real store, with its log kept to look for secrets.
type rig struct {
	m       *oauth.Manager
	creds   *credstore.Store
	dbURL   string
	logs    *syncBuf
	cb      *httptest.Server // serves the callback, as the server does at /zidane/oauth/callback
	as      localAS
	servers map[string]oauth.Server
}

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }
func (s *syncBuf) String() string              { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

func newRig(t *testing.T, mods ...func(*oauth.Config)) *rig {
	t.Helper()
	r := &rig{as: startAS(t), logs: &syncBuf{}}
	r.dbURL = storetest.URL(t)
	db, err := store.Open(context.Background(), r.dbURL, store.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	t.Cleanup(db.Close)
	key, err := credstore.LoadKey(filepath.Join(t.TempDir(), credstore.KeyFileName))
	require.NoError(t, err)
	r.creds, err = credstore.New(db, key)
	require.NoError(t, err)
	r.servers = map[string]oauth.Server{"demo": {URL: r.as.MCP}}
	cfg := oauth.Config{
		Creds: r.creds, Logger: slog.New(slog.NewTextHandler(r.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Resolve: func(_ context.Context, name string) (oauth.Server, error) {
			s, ok := r.servers[name]
			if !ok {
				return s, errors.New("no such MCP server")
			}
			return s, nil
		},
	}
	for _, mod := range mods {
		mod(&cfg)
	}
	r.m, err = oauth.New(cfg)
	require.NoError(t, err)
	t.Cleanup(r.m.Close)
	r.cb = httptest.NewServer(r.m.CallbackHandler())
	t.Cleanup(r.cb.Close)
	return r
}

func (r *rig) redirect() string { return r.cb.URL + oauth.CallbackPath }

// noFollow is a browser that stops at the authorization server's redirect.
var noFollow = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// authorize opens the authorization address and answers where the server sent the browser.
func authorize(t *testing.T, u string) *url.URL {
	t.Helper()
	resp, err := noFollow.Get(u)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusFound, resp.StatusCode, "the demo authorization server approves at once")
	loc, err := url.Parse(resp.Header.Get("Location"))
	require.NoError(t, err)
	return loc
}

// callMCP lists and calls the protected MCP server's tool with the go-sdk client, signed in
// through m.Handler (the way server/agent/mcp is to use it).
func (r *rig) callMCP(ctx context.Context) (string, error) {
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	s, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: r.as.MCP, OAuthHandler: r.m.Handler("demo"), DisableStandaloneSSE: true, MaxRetries: -1}, nil)
	if err != nil {
		return "", err
	}
	defer s.Close()
	res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "whoami", Arguments: map[string]any{}})
	if err != nil {
		return "", err
	}
	return res.Content[0].(*mcp.TextContent).Text, nil
}

// signInBrowser runs a browser-mode sign-in to the end and answers what Complete did.
func (r *rig) signInBrowser(t *testing.T, owner any) (credstore.Info, error, *http.Response) {
	t.Helper()
	ctx := context.Background()
	b, err := r.m.Begin(ctx, owner, "demo", r.redirect())
	require.NoError(t, err)
	require.Equal(t, oauth.ModeBrowser, b.Mode)
	type res struct {
		info credstore.Info
		err  error
	}
	done := make(chan res, 1)
	go func() { i, err := r.m.Complete(ctx, owner, b.FlowID, ""); done <- res{i, err} }()
	loc := authorize(t, b.URL)
	require.True(t, strings.HasPrefix(loc.String(), r.redirect()+"?"), loc.String())
	page, err := http.Get(loc.String())
	require.NoError(t, err)
	body, _ := io.ReadAll(page.Body)
	page.Body.Close()
	page.Body = io.NopCloser(bytes.NewReader(body))
	for _, v := range loc.Query() {
		require.NotContains(t, string(body), v[0], "the callback page reflects nothing from its query")
	}
	got := <-done
	return got.info, got.err, page
}

func TestBrowserModeThroughCallback(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	_, err := r.callMCP(ctx)
	require.ErrorIs(t, err, oauth.ErrSignInRequired, "before a sign-in the MCP client is told to sign in")

	owner := new(int)
	info, err, page := r.signInBrowser(t, owner)
	require.NoError(t, err)
	require.Equal(t, 200, page.StatusCode)
	require.Equal(t, "no-store", page.Header.Get("Cache-Control"))
	require.Equal(t, "no-referrer", page.Header.Get("Referrer-Policy"))
	require.Equal(t, credstore.KindMCPToken, info.Kind)
	require.Equal(t, "demo", info.Meta.Server)
	require.Equal(t, r.as.AS, info.Meta.Issuer)
	require.ElementsMatch(t, []string{"accessToken", "refreshToken"}, info.Meta.Fields)

	text, err := r.callMCP(ctx)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(text, "client "), text)

	l := r.as.Log(t)
	require.Equal(t, r.as.MCP, l.Authorize[0].Resource, "RFC 8707 resource on the authorization request")
	require.Equal(t, "authorization_code", l.Token[0].Grant)
	require.Equal(t, r.as.MCP, l.Token[0].Resource, "RFC 8707 resource on the token request")

	// The client registered for this redirect (application_type web) is reused; another
	// redirect registers again.
	clients := func() int {
		is, err := r.creds.List(ctx, credstore.KindMCPClient)
		require.NoError(t, err)
		return len(is)
	}
	require.Equal(t, 1, clients())
	_, err, _ = r.signInBrowser(t, owner)
	require.NoError(t, err)
	require.Equal(t, 1, clients(), "a stored registration for the same issuer and redirect is reused")
	b, err := r.m.Begin(ctx, owner, "demo", "")
	require.NoError(t, err)
	require.Equal(t, oauth.ModeLoopback, b.Mode)
	require.Equal(t, 2, clients(), "a client registered for another redirect registers again")

	r.noSecretInClear(t)
}

func TestLoopbackModeWithPastedAddress(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	owner, other := new(int), new(int)
	b, err := r.m.Begin(ctx, owner, "demo", "")
	require.NoError(t, err)
	require.Equal(t, oauth.ModeLoopback, b.Mode)
	loc := authorize(t, b.URL)
	require.Equal(t, oauth.LoopbackRedirect, loc.Scheme+"://"+loc.Host+loc.Path)

	_, err = r.m.Complete(ctx, other, b.FlowID, loc.String())
	require.ErrorIs(t, err, oauth.ErrOtherConnection, "complete only on the connection that began it")
	_, err = r.m.Complete(ctx, owner, b.FlowID, "")
	require.ErrorContains(t, err, "loopback mode")

	// A foreign state: another flow's, or made up.
	b2, err := r.m.Begin(ctx, owner, "demo", "")
	require.NoError(t, err)
	loc2 := authorize(t, b2.URL)
	foreign := *loc
	q := foreign.Query()
	q.Set("state", loc2.Query().Get("state"))
	foreign.RawQuery = q.Encode()
	_, err = r.m.Complete(ctx, owner, b.FlowID, foreign.String())
	require.ErrorContains(t, err, "state is not this sign-in's")
	q.Set("state", "made-up")
	foreign.RawQuery = q.Encode()
	_, err = r.m.Complete(ctx, owner, b.FlowID, foreign.String())
	require.ErrorContains(t, err, "state is not this sign-in's")

	info, err := r.m.Complete(ctx, owner, b.FlowID, loc.String())
	require.NoError(t, err)
	require.Equal(t, "demo", info.Meta.Server)
	_, err = r.m.Complete(ctx, owner, b.FlowID, loc.String())
	require.ErrorIs(t, err, oauth.ErrUnknownFlow, "a finished flow's address cannot be replayed")
	// the browser-mode callback does not take a loopback flow's code either
	resp, err := http.Get(r.redirect() + "?" + loc2.RawQuery)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)

	_, err = r.callMCP(ctx)
	require.NoError(t, err)
	r.noSecretInClear(t)
}

func TestReplayedOrForeignStateRefusedAtCallback(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	owner := new(int)
	b, err := r.m.Begin(ctx, owner, "demo", r.redirect())
	require.NoError(t, err)
	loc := authorize(t, b.URL)

	forged := *loc
	q := forged.Query()
	q.Set("state", "not-a-state-we-made")
	forged.RawQuery = q.Encode()
	resp, err := http.Get(forged.String())
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	require.NotContains(t, string(body), "not-a-state-we-made")
	require.Equal(t, "no-store", resp.Header.Get("Cache-Control"))

	resp, err = http.Get(loc.String())
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode)
	_, err = r.m.Complete(ctx, owner, b.FlowID, "")
	require.NoError(t, err)

	resp, err = http.Get(loc.String()) // the same code and state again
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, "a state is used once")
	require.Len(t, r.as.Log(t).Token, 1, "a replayed callback reaches no token endpoint")
}

func TestWrongIssRefused(t *testing.T) {
	r := newRig(t)
	for _, mode := range []string{"wrong", "none"} {
		r.as.Config(t, map[string]any{"iss": mode})
		_, err, page := r.signInBrowser(t, new(int))
		require.ErrorContains(t, err, "RFC 9207", mode)
		require.Equal(t, http.StatusBadRequest, page.StatusCode)
	}
	require.Empty(t, r.as.Log(t).Token, "no code is exchanged after a wrong iss")
	is, err := r.creds.List(context.Background(), credstore.KindMCPToken)
	require.NoError(t, err)
	require.Empty(t, is)
}

func TestRefreshBeforeExpiry(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	r.as.Config(t, map[string]any{"expiresIn": 30}) // inside RefreshBefore: refreshed at first use
	_, err, _ := r.signInBrowser(t, new(int))
	require.NoError(t, err)
	first, err := r.creds.Token(ctx, r.as.AS, "demo")
	require.NoError(t, err)

	r.as.Config(t, map[string]any{"expiresIn": 3600})
	_, err = r.callMCP(ctx)
	require.NoError(t, err)
	l := r.as.Log(t)
	require.Len(t, l.Token, 2)
	require.Equal(t, "refresh_token", l.Token[1].Grant)
	require.Equal(t, r.as.MCP, l.Token[1].Resource, "RFC 8707 resource on the refresh")
	second, err := r.creds.Token(ctx, r.as.AS, "demo")
	require.NoError(t, err)
	require.NotEqual(t, first.AccessToken.Reveal(), second.AccessToken.Reveal())
	require.NotEqual(t, first.RefreshToken.Reveal(), second.RefreshToken.Reveal(), "the rotated refresh token is kept")
	_, err = r.callMCP(ctx)
	require.NoError(t, err)
	require.Len(t, r.as.Log(t).Token, 2, "a fresh token is not refreshed again")

	// The token never goes to another address of the server.
	r.servers["demo"] = oauth.Server{URL: strings.Replace(r.as.MCP, "/mcp", "/other", 1)}
	_, err = r.m.Token(ctx, "demo")
	require.ErrorIs(t, err, oauth.ErrSignInRequired)
}

func TestSignOut(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	_, err, _ := r.signInBrowser(t, new(int))
	require.NoError(t, err)
	_, err = r.callMCP(ctx)
	require.NoError(t, err)
	require.NoError(t, r.creds.Delete(ctx, credstore.KindMCPToken, credstore.TokenKey(r.as.AS, "demo")))
	_, err = r.callMCP(ctx)
	require.ErrorIs(t, err, oauth.ErrSignInRequired)
}

func TestFlowExpiresAndEndsWithItsOwner(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	owner := new(int)
	b, err := r.m.Begin(ctx, owner, "demo", r.redirect())
	require.NoError(t, err)
	loc := authorize(t, b.URL)
	r.m.DropOwner(owner)
	resp, err := http.Get(loc.String())
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, "a flow ends with its connection")
	_, err = r.m.Complete(ctx, owner, b.FlowID, "")
	require.Error(t, err)

	wctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	b, err = r.m.Begin(ctx, owner, "demo", r.redirect())
	require.NoError(t, err)
	_, err = r.m.Complete(wctx, owner, b.FlowID, "")
	require.ErrorContains(t, err, "call auth.oauth.complete again", "a complete that gives up leaves the flow to a later one")
	_, err = r.m.Begin(ctx, owner, "nope", "")
	require.ErrorContains(t, err, "no such MCP server")
	for range oauth.DefaultMaxFlows - 1 { // one is open already
		_, err = r.m.Begin(ctx, owner, "demo", "")
		require.NoError(t, err)
	}
	_, err = r.m.Begin(ctx, owner, "demo", "")
	require.ErrorIs(t, err, oauth.ErrTooManyFlows)
	_, err = r.m.Begin(ctx, new(int), "demo", "")
	require.NoError(t, err, "the bound is per connection")
}

func TestFlowExpires(t *testing.T) {
	r := newRig(t, func(c *oauth.Config) { c.FlowTTL = 300 * time.Millisecond })
	owner := new(int)
	b, err := r.m.Begin(context.Background(), owner, "demo", r.redirect())
	require.NoError(t, err)
	loc := authorize(t, b.URL)
	_, err = r.m.Complete(context.Background(), owner, b.FlowID, "") // returns at expiry
	require.ErrorContains(t, err, "expired")
	resp, err := http.Get(loc.String())
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, "an expired flow's state is refused")
	_, err = r.m.Complete(context.Background(), owner, b.FlowID, "")
	require.ErrorIs(t, err, oauth.ErrUnknownFlow)
}

// noSecretInClear greps the database dump and the log for every secret the store holds.
func (r *rig) noSecretInClear(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	var secrets []string
	is, err := r.creds.List(ctx, credstore.KindMCPToken)
	require.NoError(t, err)
	require.NotEmpty(t, is)
	for _, i := range is {
		tok, err := r.creds.Token(ctx, i.Meta.Issuer, i.Meta.Server)
		require.NoError(t, err)
		secrets = append(secrets, tok.AccessToken.Reveal(), tok.RefreshToken.Reveal())
		if tok.ClientSecret.IsSet() {
			secrets = append(secrets, tok.ClientSecret.Reveal())
		}
	}
	dump, err := exec.Command("pg_dump", "--data-only", "--table=credentials", r.dbURL).CombinedOutput()
	require.NoError(t, err, string(dump))
	require.Contains(t, string(dump), "COPY public.credentials", "the dump has the table")
	for _, s := range secrets {
		require.NotEmpty(t, s)
		require.NotContains(t, string(dump), s, "no secret in the database in clear")
		require.NotContains(t, r.logs.String(), s, "no secret in the log")
	}
}

// TestClientMetadataDocument: served only with an https public URL, naming its own address as
// client_id and the public callback as its one redirect.
func TestClientMetadataDocument(t *testing.T) {
	get := func(public string) (int, map[string]any) {
		m, err := oauth.New(oauth.Config{Creds: &credstore.Store{}, Resolve: func(context.Context, string) (oauth.Server, error) { return oauth.Server{}, nil }, PublicURL: public})
		require.NoError(t, err)
		rec := httptest.NewRecorder()
		m.ClientMetadataHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, oauth.ClientMetadataPath, nil))
		var doc map[string]any
		_ = json.Unmarshal(rec.Body.Bytes(), &doc)
		return rec.Code, doc
	}
	code, _ := get("http://zidane.example")
	require.Equal(t, http.StatusNotFound, code, "no document without https")
	code, doc := get("https://zidane.example/")
	require.Equal(t, 200, code)
	require.Equal(t, "https://zidane.example"+oauth.ClientMetadataPath, doc["client_id"])
	require.Equal(t, []any{"https://zidane.example" + oauth.CallbackPath}, doc["redirect_uris"])
	require.Equal(t, "none", doc["token_endpoint_auth_method"])
}
