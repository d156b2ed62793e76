// Package oauth signs the server in to MCP servers with OAuth 2.1 as the MCP authorization
// specification requires (issue 23 §5; seed "auth"), and hands the MCP client the tokens.
//
// A sign-in is a flow in two calls. Begin discovers the MCP server's authorization server:
// Protected Resource Metadata (RFC 9728) from the resource_metadata of the 401's
// WWW-Authenticate, else the well-known addresses at the endpoint's path and at its root; then
// the authorization server's metadata (RFC 8414, or OpenID discovery). It picks a client in the
// specification's order — the pre-registered one of the server's config (its secret from the
// credential store, put there by mcp.upsert's clientSecret through
// credstore.Store.PutClientSecret), a Client ID Metadata Document (only when the server has an
// https public URL: <public-url>/zidane/oauth/client.json, served by ClientMetadataHandler, and
// only when the authorization server says it accepts them), a client this server registered
// before with that issuer for that exact redirect URI, else dynamic registration (RFC 7591,
// application_type web for a browser redirect, native for loopback) whose result is stored —
// and answers the authorization address (PKCE S256, state, the resource parameter of RFC 8707).
// Complete takes the code: in browser mode the authorization server sends the browser to the
// server's own /zidane/oauth/callback (CallbackHandler), which exchanges it and Complete resolves;
// in loopback mode the user pastes the address of the page that failed to load. The state is
// random, single-use and matched to its flow; iss (RFC 9207) is checked when the authorization
// server's metadata says it sends it, and whenever it is present. The token request carries the
// resource parameter and the PKCE verifier. Tokens are stored keyed by issuer and MCP server.
//
// The MCP client (server/agent/mcp) uses the result through three small pieces:
//
//	m.TokenSource(server)            an oauth2.TokenSource: the stored token, refreshed (with the
//	                                 resource parameter, at the token endpoint of the issuer that
//	                                 granted it) a minute before it expires; ErrSignInRequired
//	                                 when there is none
//	m.Transport(server, base)        an http.RoundTripper adding Authorization: Bearer from it
//	m.Handler(server)                a go-sdk auth.OAuthHandler for mcp.StreamableClientTransport
//	                                 (OAuthHandler field): its Authorize answers a 401 with
//	                                 ErrSignInRequired, since a sign-in needs the user
//
// A token is only ever sent to the MCP server whose canonical URI it was granted for (its
// resource), and a refresh token or client secret only to the issuer that issued it: nothing
// is sent to another authorization server.
//
// Why not the go-sdk's auth.AuthorizationCodeHandler: it runs the whole flow inside one HTTP
// request of the transport (a server has no user to wait for there), it tries the Client ID
// Metadata Document before a pre-registered client (the specification, and this issue, put the
// pre-registered client first), and it keeps no dynamic registration (each sign-in would
// register again). This package uses the SDK's discovery and registration pieces (oauthex) and
// golang.org/x/oauth2 for the authorization request and the code exchange.
package oauth

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"golang.org/x/oauth2"

	"github.com/zidane-server/zidane/server/agent/provider"
	"github.com/zidane-server/zidane/server/credstore"
)

// CallbackPath is where the server takes a browser-mode code (seed "HTTP on the same port").
const CallbackPath = "/zidane/oauth/callback"

// ClientMetadataPath is where the Client ID Metadata Document is served.
const ClientMetadataPath = "/zidane/oauth/client.json"

// LoopbackRedirect is the redirect URI of a loopback flow with no pinned redirect: nothing
// listens there, so the browser shows a page that failed to load, whose address the user pastes.
const LoopbackRedirect = "http://127.0.0.1/zidane/oauth/callback"

// FlowTTL is how long a flow may wait for its code.
const FlowTTL = 10 * time.Minute

// RefreshBefore is how long before its expiry a token is refreshed.
const RefreshBefore = time.Minute

// ErrSignInRequired is returned when an MCP server has no usable stored token.
var ErrSignInRequired = errors.New("this MCP server needs a sign-in: call auth.oauth.begin with its name")

// Mode is how a flow's code comes back.
type Mode string

// The modes (schema auth.json OAuthMode).
const (
	ModeBrowser  Mode = "browser"
	ModeLoopback Mode = "loopback"
)

// Server is what a sign-in needs to know of one MCP server (from mcps.json).
type Server struct {
	// Name is the server's name in mcps.json.
	Name string
	// URL is its streamable HTTP endpoint.
	URL string
	// ClientID is a pre-registered OAuth client ("" for none); its secret is in the store.
	ClientID string
	// RedirectURI is the pre-registered client's pinned redirect ("" for none): a flow with
	// it stays loopback.
	RedirectURI string
	// Scopes, when set, replace the scopes the metadata names.
	Scopes []string
}

// Resolver returns the MCP server named name, or an error saying it is unknown or not HTTP.
type Resolver func(ctx context.Context, name string) (Server, error)

// Config configures a Manager.
type Config struct {
	// Creds is the credential store (required).
	Creds *credstore.Store
	// Resolve finds MCP servers by name (required).
	Resolve Resolver
	// HTTPClient makes every request (discovery, registration, token); default a client with a
	// 30 s timeout.
	HTTPClient *http.Client
	// PublicURL is the server's --public-url; an https one enables the Client ID Metadata Document.
	PublicURL string
	// ClientName is the client_name registered; default "zidane-server".
	ClientName string
	// Logger logs flows (never a secret); default slog.Default().
	Logger *slog.Logger
	// Now is the clock; default time.Now.
	Now func() time.Time
	// MaxFlowsPerOwner bounds the flows one owner (connection) has open at once; default
	// DefaultMaxFlows. Begin past it is refused.
	MaxFlowsPerOwner int
	// FlowTTL is how long a flow lives; default FlowTTL (10 minutes, issue 23 §5).
	FlowTTL time.Duration
	// StateOwner, when set, names this process in every flow's state: the state is StateOwner,
	// StateSep and a random part, so a replica that receives a callback it holds no flow for can
	// pass it to the one that does (StateOwnerOf).
	StateOwner string
}

// StateSep separates a state's owner from its random part.
const StateSep = "~"

// StateOwnerOf returns the owner a state names ("" when it names none).
func StateOwnerOf(state string) string {
	i := strings.LastIndex(state, StateSep)
	if i <= 0 {
		return ""
	}
	return state[:i]
}

// DefaultMaxFlows is the default bound of open flows per connection.
const DefaultMaxFlows = 8

// ErrTooManyFlows is returned by Begin past Config.MaxFlowsPerOwner.
var ErrTooManyFlows = errors.New("this connection has too many sign-ins open; complete or let one expire (10 minutes) first")

// Manager runs sign-in flows and hands out tokens. It is safe for concurrent use.
type Manager struct {
	cfg Config

	mu      sync.Mutex
	flows   map[string]*flow // by id
	byState map[string]*flow // by state, until the state is used

	refreshMu sync.Map // server name -> *sync.Mutex: one refresh at a time per server

	// challenged holds, by server name, the scopes its 401 and 403 answers asked for (the
	// WWW-Authenticate Bearer scope), accumulated: the next sign-in asks for them (MCP
	// 2025-11-25 scope selection; a step-up keeps the scopes asked before, SEP-2350).
	challenged map[string][]string
}

// challenge records the scopes of a WWW-Authenticate header of server's resource.
func (m *Manager) challenge(server string, h http.Header) {
	cs, err := oauthex.ParseWWWAuthenticate(h.Values("WWW-Authenticate"))
	if err != nil {
		return
	}
	for _, c := range cs {
		if c.Scheme != "bearer" || c.Params["scope"] == "" {
			continue
		}
		m.mu.Lock()
		for _, sc := range strings.Fields(c.Params["scope"]) {
			if !contains(m.challenged[server], sc) {
				m.challenged[server] = append(m.challenged[server], sc)
			}
		}
		m.mu.Unlock()
	}
}

// challengedScopes returns the scopes server's resource asked for so far (nil for none).
func (m *Manager) challengedScopes(server string) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.challenged[server]...)
}

// flow is one sign-in in progress.
type flow struct {
	id, state, verifier string
	owner               any
	server              Server
	mode                Mode
	issuer              string
	issSupported        bool
	resource            string
	cfg                 *oauth2.Config
	timer               *time.Timer

	done   chan struct{} // closed once the exchange ended (result or err)
	result credstore.Info
	err    error
}

// New returns a Manager.
func New(cfg Config) (*Manager, error) {
	if cfg.Creds == nil || cfg.Resolve == nil {
		return nil, errors.New("oauth: Creds and Resolve are required")
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: 30 * time.Second}
	}
	if cfg.ClientName == "" {
		cfg.ClientName = "zidane-server"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.FlowTTL <= 0 {
		cfg.FlowTTL = FlowTTL
	}
	if cfg.MaxFlowsPerOwner <= 0 {
		cfg.MaxFlowsPerOwner = DefaultMaxFlows
	}
	cfg.PublicURL = strings.TrimRight(cfg.PublicURL, "/")
	return &Manager{cfg: cfg, flows: map[string]*flow{}, byState: map[string]*flow{}, challenged: map[string][]string{}}, nil
}

// cimdURL is the Client ID Metadata Document's address, "" without an https public URL.
func (m *Manager) cimdURL() string {
	if u, err := url.Parse(m.cfg.PublicURL); err == nil && u.Scheme == "https" && u.Host != "" {
		return m.cfg.PublicURL + ClientMetadataPath
	}
	return ""
}

// BeginResult is what Begin answers.
type BeginResult struct {
	URL    string
	Mode   Mode
	FlowID string
}

// Begin starts a sign-in to the MCP server named server for owner (the connection; Complete
// must come from the same one). redirectURI is the browser-mode callback, already checked by the
// caller against the connection's origin ("" for loopback mode). Errors say what failed:
// an unknown server, discovery, registration.
func (m *Manager) Begin(ctx context.Context, owner any, server, redirectURI string) (BeginResult, error) {
	if m.open(owner) >= m.cfg.MaxFlowsPerOwner {
		return BeginResult{}, ErrTooManyFlows
	}
	srv, err := m.cfg.Resolve(ctx, server)
	if err != nil {
		return BeginResult{}, err
	}
	srv.Name = server
	prm, err := m.discoverResource(ctx, srv.URL)
	if err != nil {
		return BeginResult{}, err
	}
	issuer := prm.AuthorizationServers[0]
	asm, err := auth.GetAuthServerMetadata(ctx, issuer, m.cfg.HTTPClient)
	if err != nil {
		return BeginResult{}, fmt.Errorf("the authorization server %s: %w", issuer, err)
	}
	if asm == nil {
		return BeginResult{}, fmt.Errorf("the authorization server %s publishes no metadata (RFC 8414 or OpenID discovery); this server cannot sign in to it", issuer)
	}
	if asm.AuthorizationEndpoint == "" || asm.TokenEndpoint == "" {
		return BeginResult{}, fmt.Errorf("the authorization server %s names no authorization or token endpoint", issuer)
	}
	if len(asm.CodeChallengeMethodsSupported) > 0 && !contains(asm.CodeChallengeMethodsSupported, "S256") {
		return BeginResult{}, fmt.Errorf("the authorization server %s does not support PKCE S256, which MCP requires", issuer)
	}

	mode, redirect := ModeLoopback, LoopbackRedirect
	if redirectURI != "" {
		mode, redirect = ModeBrowser, redirectURI
	}
	if srv.ClientID != "" && srv.RedirectURI != "" {
		mode, redirect = ModeLoopback, srv.RedirectURI // a pinned redirect stays loopback (seed "auth")
	}
	client, err := m.client(ctx, srv, asm, redirect, mode)
	if err != nil {
		return BeginResult{}, err
	}
	// The scopes: the config's, else those the resource's 401/403 asked for, else all its
	// metadata names (MCP 2025-11-25 scope selection strategy).
	scopes := srv.Scopes
	if len(scopes) == 0 {
		scopes = m.challengedScopes(server)
	}
	if len(scopes) == 0 {
		scopes = prm.ScopesSupported
	}
	if contains(asm.ScopesSupported, "offline_access") && !contains(scopes, "offline_access") {
		scopes = append(append([]string(nil), scopes...), "offline_access")
	}
	cfg := &oauth2.Config{
		ClientID: client.ClientID, ClientSecret: client.ClientSecret.Reveal(),
		Endpoint:    oauth2.Endpoint{AuthURL: asm.AuthorizationEndpoint, TokenURL: asm.TokenEndpoint, AuthStyle: authStyle(client.AuthMethod, asm)},
		RedirectURL: redirect, Scopes: scopes,
	}
	f := &flow{
		id: rand.Text(), state: m.newState(), verifier: oauth2.GenerateVerifier(), owner: owner, server: srv,
		mode: mode, issuer: asm.Issuer, issSupported: asm.AuthorizationResponseIssParameterSupported,
		resource: prm.Resource, cfg: cfg, done: make(chan struct{}),
	}
	u := cfg.AuthCodeURL(f.state, oauth2.S256ChallengeOption(f.verifier), oauth2.SetAuthURLParam("resource", f.resource))
	m.mu.Lock()
	m.flows[f.id] = f
	m.byState[f.state] = f
	// At expiry the flow ends (if it has not) and is forgotten, completed or not.
	f.timer = time.AfterFunc(m.cfg.FlowTTL, func() {
		m.finish(f, credstore.Info{}, errors.New("the sign-in expired after 10 minutes; begin again"))
		m.mu.Lock()
		delete(m.flows, f.id)
		m.mu.Unlock()
	})
	m.mu.Unlock()
	m.cfg.Logger.Info("oauth: sign-in begun", "server", server, "issuer", asm.Issuer, "mode", mode)
	return BeginResult{URL: u, Mode: mode, FlowID: f.id}, nil
}

// newState is a flow's state: random, single-use, naming its owner (Config.StateOwner).
func (m *Manager) newState() string {
	if m.cfg.StateOwner == "" {
		return rand.Text()
	}
	return m.cfg.StateOwner + StateSep + rand.Text()
}

// Holds reports whether state is an open browser flow's, here.
func (m *Manager) Holds(state string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	f := m.byState[state]
	return f != nil && f.mode == ModeBrowser
}

// Close ends every open flow (the server is stopping).
func (m *Manager) Close() {
	m.mu.Lock()
	fs := make([]*flow, 0, len(m.flows))
	for _, f := range m.flows {
		fs = append(fs, f)
		f.timer.Stop()
	}
	clear(m.flows)
	m.mu.Unlock()
	for _, f := range fs {
		m.finish(f, credstore.Info{}, errors.New("the server is stopping; begin the sign-in again once it is back"))
	}
}

// open counts owner's flows.
func (m *Manager) open(owner any) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, f := range m.flows {
		if f.owner == owner {
			n++
		}
	}
	return n
}

// discoverResource finds the MCP server's Protected Resource Metadata (RFC 9728): from the
// resource_metadata of an unauthenticated request's WWW-Authenticate, else the well-known
// address with the endpoint's path, else at the root.
func (m *Manager) discoverResource(ctx context.Context, endpoint string) (*oauthex.ProtectedResourceMetadata, error) {
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("the MCP server's url %q is not an http(s) URL", endpoint)
	}
	var tries [][2]string // metadata URL, expected resource
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, strings.NewReader(`{"jsonrpc":"2.0","id":0,"method":"ping"}`))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if resp, err := m.cfg.HTTPClient.Do(req); err == nil {
		resp.Body.Close()
		if cs, err := oauthex.ParseWWWAuthenticate(resp.Header.Values("WWW-Authenticate")); err == nil {
			for _, c := range cs {
				if rm := c.Params["resource_metadata"]; rm != "" {
					tries = append(tries, [2]string{rm, endpoint})
					break
				}
			}
		}
	}
	mu := *u
	mu.RawQuery, mu.Fragment = "", ""
	mu.Path = "/.well-known/oauth-protected-resource/" + strings.TrimLeft(u.Path, "/")
	tries = append(tries, [2]string{mu.String(), endpoint})
	mu.Path = "/.well-known/oauth-protected-resource"
	root := *u
	root.Path, root.RawQuery, root.Fragment = "", "", ""
	tries = append(tries, [2]string{mu.String(), root.String()})
	var errs []string
	for _, t := range tries {
		prm, err := oauthex.GetProtectedResourceMetadata(ctx, t[0], t[1], m.cfg.HTTPClient)
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		if prm == nil {
			continue
		}
		if len(prm.AuthorizationServers) == 0 {
			return nil, fmt.Errorf("the MCP server's protected resource metadata (%s) names no authorization server", t[0])
		}
		return prm, nil
	}
	return nil, fmt.Errorf("the MCP server at %s publishes no protected resource metadata (RFC 9728), so there is no authorization server to sign in to: %s", endpoint, strings.Join(errs, "; "))
}

// client picks the OAuth client in the specification's order: pre-registered, Client ID
// Metadata Document, stored registration for this issuer and redirect, dynamic registration.
func (m *Manager) client(ctx context.Context, srv Server, asm *oauthex.AuthServerMeta, redirect string, mode Mode) (credstore.Client, error) {
	if srv.ClientID != "" {
		sec, err := m.cfg.Creds.ClientSecret(ctx, srv.Name)
		if err != nil {
			return credstore.Client{}, err
		}
		method := "none"
		if sec.IsSet() {
			method = ""
		}
		return credstore.Client{ClientID: srv.ClientID, ClientSecret: sec, AuthMethod: method}, nil
	}
	if doc := m.cimdURL(); doc != "" && asm.ClientIDMetadataDocumentSupported && contains(m.cimdRedirects(), redirect) {
		return credstore.Client{ClientID: doc, AuthMethod: "none"}, nil
	}
	c, err := m.cfg.Creds.Client(ctx, asm.Issuer, redirect)
	if err == nil {
		return c, nil
	}
	if !errors.Is(err, credstore.ErrNotFound) {
		return credstore.Client{}, err
	}
	if asm.RegistrationEndpoint == "" {
		return credstore.Client{}, fmt.Errorf("the authorization server %s offers no dynamic client registration and the MCP server has no pre-registered client: set its oauth clientId (and clientSecret) with mcp.upsert", asm.Issuer)
	}
	appType := "native"
	if mode == ModeBrowser {
		appType = "web"
	}
	reg, err := oauthex.RegisterClient(ctx, asm.RegistrationEndpoint, &oauthex.ClientRegistrationMetadata{
		RedirectURIs: []string{redirect}, ClientName: m.cfg.ClientName, ApplicationType: appType,
		GrantTypes: []string{"authorization_code", "refresh_token"}, ResponseTypes: []string{"code"},
		TokenEndpointAuthMethod: "none",
	}, m.cfg.HTTPClient)
	if err != nil {
		return credstore.Client{}, fmt.Errorf("dynamic client registration with %s: %w", asm.Issuer, err)
	}
	c = credstore.Client{ClientID: reg.ClientID, ClientSecret: provider.NewSecret(reg.ClientSecret), AuthMethod: reg.TokenEndpointAuthMethod}
	if err := m.cfg.Creds.PutClient(ctx, asm.Issuer, redirect, c); err != nil {
		return credstore.Client{}, err
	}
	m.cfg.Logger.Info("oauth: client registered", "issuer", asm.Issuer, "redirect", redirect, "applicationType", appType)
	return c, nil
}

// authStyle is the token endpoint's client authentication for a registered method.
func authStyle(method string, asm *oauthex.AuthServerMeta) oauth2.AuthStyle {
	switch method {
	case "none", "client_secret_post":
		return oauth2.AuthStyleInParams
	case "client_secret_basic":
		return oauth2.AuthStyleInHeader
	}
	if contains(asm.TokenEndpointAuthMethodsSupported, "client_secret_post") && !contains(asm.TokenEndpointAuthMethodsSupported, "client_secret_basic") {
		return oauth2.AuthStyleInParams
	}
	return oauth2.AuthStyleInHeader
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}
