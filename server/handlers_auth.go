package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/zidane-server/zidane/protocol"
	"github.com/zidane-server/zidane/server/agent"
	"github.com/zidane-server/zidane/server/agent/provider"
	"github.com/zidane-server/zidane/server/agent/provider/anthropic"
	"github.com/zidane-server/zidane/server/agent/provider/config"
	"github.com/zidane-server/zidane/server/agent/provider/openai"
	"github.com/zidane-server/zidane/server/agent/provider/scripted"
	"github.com/zidane-server/zidane/server/credstore"
	"github.com/zidane-server/zidane/server/oauth"
)

// The auth and onboarding groups (schema/auth.json, schema/onboarding.json; issue 23 §5, §6).
type (
	authHandler       struct{ s *Server }
	onboardingHandler struct{ s *Server }
)

// Auth returns the auth group's handler.
func (h *handlers) Auth() protocol.AuthHandler { return authHandler{h.s} }

// Onboarding returns the onboarding group's handler.
func (h *handlers) Onboarding() protocol.OnboardingHandler { return onboardingHandler{h.s} }

// Credentials is the server's credential store, nil when it has none (no key file): the MCP
// client stores mcp.upsert's clientSecret with Credentials().PutClientSecret.
func (s *Server) Credentials() *credstore.Store { return s.creds }

// OAuth is the server's MCP sign-in manager, nil without a credential store: the MCP client
// takes each HTTP server's token from OAuth().Handler(name) or OAuth().Transport(name, nil).
func (s *Server) OAuth() *oauth.Manager { return s.oauth }

// newCredentials opens the credential store and the sign-in manager when the server has a key
// file (Config.CredentialKeyFile, else <DataDir>/credential.key).
func (s *Server) newCredentials(ctx context.Context) error {
	path := s.cfg.CredentialKeyFile
	if path == "" && s.cfg.DataDir != "" {
		path = filepath.Join(s.cfg.DataDir, credstore.KeyFileName)
	}
	if path == "" {
		return nil
	}
	key, err := credstore.LoadKey(path)
	if err != nil {
		return err
	}
	if s.creds, err = credstore.New(s.store, key); err != nil {
		return err
	}
	resolve := s.cfg.MCPServers
	if resolve == nil {
		resolve = oauth.FileResolver(s.mcpUserFile()) // the user file alone: a project's names no server to sign in to
	}
	s.oauth, err = oauth.New(oauth.Config{
		Creds: s.creds, Resolve: resolve, HTTPClient: s.cfg.OAuthHTTPClient, PublicURL: s.cfg.PublicURL,
		Logger: s.log, MaxFlowsPerOwner: maxOAuthFlowsPerConn, StateOwner: s.cfg.ReplicaID,
	})
	return err
}

// maxOAuthFlowsPerConn bounds a connection's open sign-ins (x-resource oauth-flow).
const maxOAuthFlowsPerConn = oauth.DefaultMaxFlows

// storedModels is the agent's model registry with the stored provider credentials on top
// (auth.configure): without a credential store, the configured one as it is.
func (s *Server) storedModels(ctx context.Context) agent.Models {
	base := s.cfg.Models
	if s.creds == nil {
		return base
	}
	if base == nil {
		r, err := agent.NewRegistry(ctx, "", scripted.New(scripted.Options{StepDelay: s.cfg.StepDelay}))
		if err != nil {
			return nil // the runtime makes its own
		}
		base = r
	}
	return &config.Stored{Base: base, Lookup: func(ctx context.Context, name string) (config.StoredCredential, bool, error) {
		p, err := s.creds.Provider(ctx, name)
		if errors.Is(err, credstore.ErrNotFound) {
			return config.StoredCredential{}, false, nil
		}
		if err != nil {
			return config.StoredCredential{}, false, err
		}
		infos, err := s.creds.List(ctx, credstore.KindProvider)
		if err != nil {
			return config.StoredCredential{}, false, err
		}
		var v time.Time
		for _, i := range infos {
			if i.Key == name {
				v = i.UpdatedAt
			}
		}
		return config.StoredCredential{APIKey: p.APIKey, BaseURL: p.BaseURL, Version: v}, true, nil
	}}
}

// connOrigin is the origin the upgrade request reached the server by, already checked by
// originAllowed: its Origin header, else (a client that is no browser) http(s)://Host when the
// Host is one the server vouches for; "" when neither.
func (s *Server) connOrigin(r *http.Request) string {
	if o := r.Header.Get("Origin"); o != "" {
		return o
	}
	if !s.hostValidated(r) {
		return ""
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

var errNoCredentialStore = protocol.NewHandlerFailedError("This server has no credential store: start it with --data-dir (the key is kept there) or --credential-key-file.")

// needCreds answers errNoCredentialStore when the server has no credential store.
func (s *Server) needCreds() error {
	if s.creds == nil {
		return errNoCredentialStore
	}
	return nil
}

// OauthBegin implements auth.oauth.begin: redirectUri must be this connection's origin plus
// /zidane/oauth/callback (seed "auth"; issue 23 §5).
func (h authHandler) OauthBegin(ctx context.Context, p *protocol.AuthOauthBeginParams) (*protocol.AuthOauthBeginResult, error) {
	if err := h.s.needCreds(); err != nil {
		return nil, err
	}
	c := connFrom(ctx)
	redirect := ""
	if p.RedirectURI != nil {
		redirect = *p.RedirectURI
		if c == nil || !sameCallback(redirect, c.origin) {
			want := "<origin>" + oauth.CallbackPath
			if c != nil && c.origin != "" {
				want = c.origin + oauth.CallbackPath
			}
			return nil, protocol.NewInvalidParamsError(fmt.Sprintf("params/redirectUri must be %s, the origin this connection reached the server by; leave it out to sign in in loopback mode.", want), &protocol.InvalidParamsErrorData{Pointer: "/redirectUri"})
		}
	}
	b, err := h.s.oauth.Begin(ctx, c, p.Server, redirect)
	if err != nil {
		return nil, protocol.NewHandlerFailedError("Sign-in to MCP server " + quoteName(p.Server) + " could not begin: " + err.Error())
	}
	return &protocol.AuthOauthBeginResult{URL: b.URL, Mode: protocol.OAuthMode(b.Mode), FlowID: b.FlowID}, nil
}

// sameCallback reports whether redirect is exactly origin + /zidane/oauth/callback (the
// default port written or not, the host's case aside), with no query or fragment.
func sameCallback(redirect, origin string) bool {
	if origin == "" {
		return false
	}
	ru, err1 := url.Parse(redirect)
	ou, err2 := url.Parse(origin)
	if err1 != nil || err2 != nil || ru.User != nil || ru.RawQuery != "" || ru.Fragment != "" || ru.Opaque != "" {
		return false
	}
	return ru.Path == oauth.CallbackPath && normalizeOrigin(ru) == normalizeOrigin(ou)
}

func quoteName(s string) string { return fmt.Sprintf("%q", s) }

// OauthComplete implements auth.oauth.complete.
func (h authHandler) OauthComplete(ctx context.Context, p *protocol.AuthOauthCompleteParams) (*protocol.CredentialInfo, error) {
	if err := h.s.needCreds(); err != nil {
		return nil, err
	}
	input := ""
	if p.Input != nil {
		input = *p.Input
	}
	info, err := h.s.oauth.Complete(ctx, connFrom(ctx), p.FlowID, input)
	if err != nil {
		return nil, protocol.NewHandlerFailedError("The sign-in did not complete: " + err.Error())
	}
	out := credentialOut(info)
	return &out, nil
}

// Remove implements auth.remove: one credential by id, or all.
func (h authHandler) Remove(ctx context.Context, p *protocol.AuthRemoveParams) (*protocol.AuthRemoveResult, error) {
	if err := h.s.needCreds(); err != nil {
		return nil, err
	}
	all := p.All != nil && *p.All
	switch {
	case all && p.ID != nil:
		return nil, protocol.NewInvalidParamsError("params: give id or all: true, not both.", &protocol.InvalidParamsErrorData{Pointer: "/all"})
	case all:
		n, err := h.s.creds.DeleteAll(ctx)
		if err != nil {
			return nil, storeErr(err, "params")
		}
		return &protocol.AuthRemoveResult{Removed: n}, nil
	case p.ID == nil:
		return nil, protocol.NewInvalidParamsError("params: give id (from auth.list) to drop one credential, or all: true to drop every one.", &protocol.InvalidParamsErrorData{Pointer: "/id"})
	}
	kind, key, ok := credstore.SplitID(*p.ID)
	if !ok {
		return nil, protocol.NewInvalidParamsError("params/id is not a credential id; take one from auth.list.", &protocol.InvalidParamsErrorData{Pointer: "/id"})
	}
	if err := h.s.creds.Delete(ctx, kind, key); errors.Is(err, credstore.ErrNotFound) {
		return nil, protocol.NewHandlerFailedError("No credential " + quoteName(*p.ID) + " is stored; auth.list shows what is.")
	} else if err != nil {
		return nil, storeErr(err, "params/id")
	}
	return &protocol.AuthRemoveResult{Removed: 1}, nil
}

// List implements auth.list: descriptions, never secrets.
func (h authHandler) List(ctx context.Context, _ *protocol.AuthListParams) (*protocol.AuthListResult, error) {
	out := &protocol.AuthListResult{Credentials: []protocol.CredentialInfo{}}
	if h.s.creds == nil {
		return out, nil
	}
	infos, err := h.s.creds.List(ctx, "")
	if err != nil {
		return nil, storeErr(err, "params")
	}
	for _, i := range infos {
		out.Credentials = append(out.Credentials, credentialOut(i))
	}
	return out, nil
}

func credentialOut(i credstore.Info) protocol.CredentialInfo {
	c := protocol.CredentialInfo{ID: i.ID(), Kind: i.Kind, UpdatedAt: ms(i.UpdatedAt), Fields: i.Meta.Fields}
	if i.Meta.Server != "" {
		c.Server = ptr(i.Meta.Server)
	}
	if i.Meta.Issuer != "" {
		c.Issuer = ptr(i.Meta.Issuer)
	}
	if i.Meta.Provider != "" {
		c.Provider = ptr(i.Meta.Provider)
	}
	if i.Meta.ExpiresAt > 0 {
		c.ExpiresAt = ptr(i.Meta.ExpiresAt)
	}
	return c
}

// Configure implements auth.configure: a provider's key and base URL into the store, used from
// the provider's next request (config.Stored).
func (h authHandler) Configure(ctx context.Context, p *protocol.AuthConfigureParams) (*protocol.CredentialInfo, error) {
	if err := h.s.needCreds(); err != nil {
		return nil, err
	}
	if _, ok := config.KnownProviders[p.Provider]; !ok {
		return nil, protocol.NewInvalidParamsError(fmt.Sprintf("params/provider %q is not a provider this server can set up; onboarding.providers lists them (openai, anthropic).", p.Provider), &protocol.InvalidParamsErrorData{Pointer: "/provider"})
	}
	cur, err := h.s.creds.Provider(ctx, p.Provider)
	if err != nil && !errors.Is(err, credstore.ErrNotFound) {
		return nil, protocol.NewHandlerFailedError("The stored credential of " + quoteName(p.Provider) + " cannot be read: " + err.Error())
	}
	if p.APIKey != nil {
		cur.APIKey = provider.NewSecret(strings.TrimSpace(*p.APIKey))
	}
	if p.BaseURL != nil {
		b := strings.TrimSpace(*p.BaseURL)
		if b != "" {
			if u, err := url.Parse(b); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
				return nil, protocol.NewInvalidParamsError("params/baseUrl must be an http(s) URL without credentials in it, e.g. https://api.openai.com/v1.", &protocol.InvalidParamsErrorData{Pointer: "/baseUrl"})
			}
		}
		cur.BaseURL = b
	}
	if err := h.s.creds.PutProvider(ctx, p.Provider, cur); err != nil {
		return nil, storeErr(err, "params")
	}
	out := protocol.CredentialInfo{ID: credstore.KindProvider + ":" + p.Provider, Kind: credstore.KindProvider, Provider: ptr(p.Provider), UpdatedAt: ms(time.Now()), Fields: []string{}}
	if cur.APIKey.IsSet() {
		out.Fields = append(out.Fields, "apiKey")
	}
	if cur.BaseURL != "" {
		out.Fields = append(out.Fields, "baseUrl")
	}
	return &out, nil
}

// serveOAuthCallback is GET /zidane/oauth/callback (seed "HTTP on the same port").
func (s *Server) serveOAuthCallback(w http.ResponseWriter, r *http.Request) {
	if s.oauth == nil {
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("Referrer-Policy", "no-referrer")
		plainText(w, http.StatusNotFound, "Not found: this server has no credential store.")
		return
	}
	if !oauth.CallbackHeaders(w, r) {
		return
	}
	q := r.URL.Query()
	state := q.Get("state")
	status, page := 0, ""
	if owner := oauth.StateOwnerOf(state); owner != "" && owner != s.cfg.ReplicaID && !s.oauth.Holds(state) {
		// A load balancer sent the browser here; the flow is the replica's that began it.
		status, page = s.forwardOAuthCallback(r.Context(), owner, r.URL.RawQuery)
	} else {
		status, page = s.oauth.Callback(q)
	}
	w.WriteHeader(status)
	w.Write([]byte(page))
}

// oauthCallbackCall is the replica call of a sign-in's callback: the page's query as received.
const oauthCallbackCall = "oauth.callback"

// oauthCallbackReply is what the replica holding the flow answers: the page to show.
type oauthCallbackReply struct {
	Status int    `json:"status"`
	Page   string `json:"page"`
}

// pageOtherReplica is the callback page when the replica holding the sign-in does not answer.
const pageOtherReplica = "<!doctype html><meta charset=utf-8><title>Sign-in not finished</title><p>The server that began this sign-in did not answer. Return to the app and begin again.</p>\n"

// forwardOAuthCallback passes a callback to the replica owner that began its flow (issue 25:
// no sticky sessions) and answers the page it answers.
func (s *Server) forwardOAuthCallback(ctx context.Context, owner, rawQuery string) (int, string) {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	params, _ := protocol.Marshal(map[string]string{"query": rawQuery})
	body, err := protocol.Marshal(replicaCall{Method: oauthCallbackCall, Params: params, Actor: "oauth-callback"})
	if err == nil {
		var b []byte
		if b, err = s.replica.Call(ctx, owner, body); err == nil {
			var rep replicaReply
			var out oauthCallbackReply
			if err = json.Unmarshal(b, &rep); err == nil && rep.Error == nil && json.Unmarshal(rep.Result, &out) == nil && out.Status != 0 {
				return out.Status, out.Page
			}
		}
	}
	s.log.Warn("oauth: the replica holding a sign-in did not answer its callback", "replica", owner, "err", err)
	return http.StatusBadGateway, pageOtherReplica
}

// serveOAuthClientMetadata is GET /zidane/oauth/client.json, the Client ID Metadata Document
// (only with an https --public-url).
func (s *Server) serveOAuthClientMetadata(w http.ResponseWriter, r *http.Request) {
	if s.oauth == nil || !onlyGet(w, r) {
		if s.oauth == nil {
			http.NotFound(w, r)
		}
		return
	}
	s.oauth.ClientMetadataHandler().ServeHTTP(w, r)
}

// knownProvider is a provider onboarding.providers lists.
type knownProvider struct {
	name, kind, label, keyEnv, baseEnv, baseDefault string
}

var knownProviders = []knownProvider{
	{"openai", config.KindOpenAI, "OpenAI (or any OpenAI-compatible endpoint)", openai.DefaultKeyEnv, "OPENAI_BASE_URL", openai.DefaultBaseURL},
	{"anthropic", config.KindAnthropic, "Anthropic", anthropic.DefaultKeyEnv, "ANTHROPIC_BASE_URL", anthropic.DefaultBaseURL},
}

// localModelServers are the usual loopback addresses of local model servers: Ollama, LM
// Studio, llama.cpp's server and vLLM (each OpenAI-compatible under /v1).
var localModelServers = []string{"127.0.0.1:11434", "127.0.0.1:1234", "127.0.0.1:8080", "127.0.0.1:8000"}

// Providers implements onboarding.providers.
func (h onboardingHandler) Providers(ctx context.Context, _ *protocol.OnboardingProvidersParams) (*protocol.OnboardingProvidersResult, error) {
	configured := map[string]bool{}
	if ms, err := h.s.runs.Models().List(ctx); err == nil {
		for _, m := range ms {
			configured[m.Provider] = true
		}
	}
	listening := probeLocal(ctx, localModelServers)
	out := &protocol.OnboardingProvidersResult{Providers: []protocol.OnboardingProvider{}}
	for _, k := range knownProviders {
		p := protocol.OnboardingProvider{
			Name: k.name, Kind: k.kind, Label: k.label, Configured: configured[k.name], Found: []string{},
			Fields: []protocol.OnboardingField{
				{Name: "apiKey", Label: "API key", Secret: true, Required: k.kind == config.KindAnthropic, Env: ptr(k.keyEnv)},
				{Name: "baseUrl", Label: "Base URL", Env: ptr(k.baseEnv), Default: ptr(k.baseDefault)},
			},
		}
		for _, env := range []string{k.keyEnv, k.baseEnv} {
			if v, ok := os.LookupEnv(env); ok && strings.TrimSpace(v) != "" {
				p.Found = append(p.Found, "env:"+env)
			}
		}
		if h.s.creds != nil {
			if infos, err := h.s.creds.List(ctx, credstore.KindProvider); err == nil {
				for _, i := range infos {
					if i.Key == k.name {
						for _, f := range i.Meta.Fields {
							p.Found = append(p.Found, "stored:"+f)
						}
					}
				}
			}
		}
		if k.kind == config.KindOpenAI {
			for _, a := range listening {
				p.Found = append(p.Found, "listening:http://"+a)
			}
		}
		out.Providers = append(out.Providers, p)
	}
	return out, nil
}

// probeLocal answers which of addrs answer GET /v1/models with 200 (an OpenAI-compatible model
// server), each asked for at most 500 ms, all at once, in addrs' order.
func probeLocal(ctx context.Context, addrs []string) []string {
	ok := make([]bool, len(addrs))
	done := make(chan struct{}, len(addrs))
	client := &http.Client{Timeout: 500 * time.Millisecond, Transport: &http.Transport{Proxy: nil, DialContext: (&net.Dialer{Timeout: 300 * time.Millisecond}).DialContext}}
	for i, a := range addrs {
		go func() {
			defer func() { done <- struct{}{} }()
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+a+"/v1/models", nil)
			if err != nil {
				return
			}
			if resp, err := client.Do(req); err == nil {
				resp.Body.Close()
				ok[i] = resp.StatusCode == http.StatusOK
			}
		}()
	}
	for range addrs {
		<-done
	}
	client.CloseIdleConnections()
	var out []string
	for i, a := range addrs {
		if ok[i] {
			out = append(out, a)
		}
	}
	return out
}
