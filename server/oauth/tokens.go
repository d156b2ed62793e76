package oauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"golang.org/x/oauth2"

	"github.com/zidane-server/zidane/server/agent/provider"
	"github.com/zidane-server/zidane/server/credstore"
)

// TokenSource returns server's token source: each Token reads the stored token (so replicas
// sharing the database and key file see each other's sign-ins and refreshes), refreshes it
// RefreshBefore its expiry when it has a refresh token, and answers ErrSignInRequired when there
// is none, it expired without a refresh token, or it was granted for another resource than the
// server's current URL (its canonical URI changed: the token is not sent elsewhere).
func (m *Manager) TokenSource(server string) oauth2.TokenSource {
	return &storedSource{m: m, server: server}
}

type storedSource struct {
	m      *Manager
	server string
}

// Token implements oauth2.TokenSource.
func (s *storedSource) Token() (*oauth2.Token, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return s.m.Token(ctx, s.server)
}

// Token is TokenSource(server).Token() under ctx.
func (m *Manager) Token(ctx context.Context, server string) (*oauth2.Token, error) {
	issuer, t, err := m.stored(ctx, server)
	if err != nil {
		return nil, err
	}
	now := m.cfg.Now()
	if t.Expiry.IsZero() || now.Add(RefreshBefore).Before(t.Expiry) {
		return oauthToken(t), nil
	}
	if !t.RefreshToken.IsSet() {
		if now.Before(t.Expiry) {
			return oauthToken(t), nil
		}
		return nil, fmt.Errorf("%w (the token from %s expired and has no refresh token)", ErrSignInRequired, issuer)
	}
	mu, _ := m.refreshMu.LoadOrStore(server, &sync.Mutex{})
	mu.(*sync.Mutex).Lock()
	defer mu.(*sync.Mutex).Unlock()
	if _, t2, err := m.stored(ctx, server); err == nil && now.Add(RefreshBefore).Before(t2.Expiry) {
		return oauthToken(t2), nil // another caller refreshed it meanwhile
	}
	nt, err := m.refresh(ctx, t)
	if err != nil {
		if now.Before(t.Expiry) {
			m.cfg.Logger.Warn("oauth: refresh failed; the current token is still valid", "server", server, "issuer", issuer, "err", err)
			return oauthToken(t), nil
		}
		return nil, fmt.Errorf("%w (refreshing the token at %s failed: %v)", ErrSignInRequired, issuer, err)
	}
	if err := m.cfg.Creds.PutToken(ctx, issuer, server, nt); err != nil {
		return nil, err
	}
	m.cfg.Logger.Info("oauth: token refreshed", "server", server, "issuer", issuer)
	return oauthToken(nt), nil
}

// SignedIn reports whether a sign-in is stored for server's current address (catalog.mcps's
// signIn): false when there is none or only one for another address.
func (m *Manager) SignedIn(ctx context.Context, server string) (bool, error) {
	_, _, err := m.stored(ctx, server)
	if errors.Is(err, ErrSignInRequired) {
		return false, nil
	}
	return err == nil, err
}

// stored finds server's token whose resource is the server's current URL.
func (m *Manager) stored(ctx context.Context, server string) (string, credstore.Token, error) {
	issuers, err := m.cfg.Creds.ServerTokens(ctx, server)
	if err != nil {
		return "", credstore.Token{}, err
	}
	if len(issuers) == 0 {
		return "", credstore.Token{}, ErrSignInRequired
	}
	srv, err := m.cfg.Resolve(ctx, server)
	if err != nil {
		return "", credstore.Token{}, err
	}
	for _, iss := range issuers {
		t, err := m.cfg.Creds.Token(ctx, iss, server)
		if err != nil {
			return "", credstore.Token{}, err
		}
		if sameResource(t.Resource, srv.URL) {
			return iss, t, nil
		}
	}
	return "", credstore.Token{}, fmt.Errorf("%w (the stored sign-in was for another address of this server)", ErrSignInRequired)
}

// sameResource reports whether a token granted for resource may go to endpoint: the resource is
// the endpoint's canonical URI, or its origin (metadata at the root).
func sameResource(resource, endpoint string) bool {
	r, err1 := url.Parse(resource)
	e, err2 := url.Parse(endpoint)
	if err1 != nil || err2 != nil || !strings.EqualFold(r.Scheme, e.Scheme) || !strings.EqualFold(r.Host, e.Host) {
		return false
	}
	rp := strings.TrimRight(r.Path, "/")
	return rp == "" || rp == strings.TrimRight(e.Path, "/")
}

func oauthToken(t credstore.Token) *oauth2.Token {
	typ := t.TokenType
	if typ == "" {
		typ = "Bearer"
	}
	return &oauth2.Token{AccessToken: t.AccessToken.Reveal(), TokenType: typ, Expiry: t.Expiry}
}

// refresh trades t's refresh token at the token endpoint of the issuer that granted it, with the
// resource parameter (RFC 8707): golang.org/x/oauth2's refresh cannot add a parameter, so this
// one request is made here.
func (m *Manager) refresh(ctx context.Context, t credstore.Token) (credstore.Token, error) {
	form := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {t.RefreshToken.Reveal()}, "resource": {t.Resource}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.TokenEndpoint, nil)
	if err != nil {
		return t, err
	}
	if oauth2.AuthStyle(t.AuthStyle) == oauth2.AuthStyleInHeader && t.ClientSecret.IsSet() {
		req.SetBasicAuth(url.QueryEscape(t.ClientID), url.QueryEscape(t.ClientSecret.Reveal()))
	} else {
		form.Set("client_id", t.ClientID)
		if t.ClientSecret.IsSet() {
			form.Set("client_secret", t.ClientSecret.Reveal())
		}
	}
	body := form.Encode()
	req.Body = io.NopCloser(strings.NewReader(body))
	req.ContentLength = int64(len(body))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	resp, err := m.cfg.HTTPClient.Do(req)
	if err != nil {
		return t, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return t, err
	}
	var r struct {
		AccessToken  string `json:"access_token"`
		TokenType    string `json:"token_type"`
		RefreshToken string `json:"refresh_token"`
		ExpiresIn    int64  `json:"expires_in"`
		Error        string `json:"error"`
		Description  string `json:"error_description"`
	}
	_ = json.Unmarshal(b, &r)
	if resp.StatusCode != http.StatusOK || r.AccessToken == "" {
		if r.Error != "" {
			return t, fmt.Errorf("%s: %s", oneLine(r.Error), oneLine(r.Description))
		}
		return t, fmt.Errorf("the token endpoint answered %s", resp.Status)
	}
	nt := t
	nt.AccessToken = provider.NewSecret(r.AccessToken)
	if r.TokenType != "" {
		nt.TokenType = r.TokenType
	}
	if r.RefreshToken != "" { // rotated
		nt.RefreshToken = provider.NewSecret(r.RefreshToken)
	}
	nt.Expiry = time.Time{}
	if r.ExpiresIn > 0 {
		nt.Expiry = m.cfg.Now().Add(time.Duration(r.ExpiresIn) * time.Second)
	}
	return nt, nil
}

// Transport returns an http.RoundTripper for requests to server's endpoint: it adds
// Authorization: Bearer with server's token (TokenSource) and sends through base
// (http.DefaultTransport when nil). A request fails with ErrSignInRequired when there is no token.
func (m *Manager) Transport(server string, base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return &oauth2.Transport{Source: m.TokenSource(server), Base: base}
}

// Handler returns an auth.OAuthHandler for the go-sdk's mcp.StreamableClientTransport
// (OAuthHandler field): its TokenSource is TokenSource(server) when a token is stored (nil, so
// no header, before), and Authorize, called on a 401 or 403, notes the scopes its
// WWW-Authenticate asks for (the next Begin asks for them) and answers ErrSignInRequired: a
// sign-in needs the user, through auth.oauth.begin.
func (m *Manager) Handler(server string) auth.OAuthHandler { return &handler{m: m, server: server} }

type handler struct {
	m      *Manager
	server string
}

func (h *handler) TokenSource(ctx context.Context) (oauth2.TokenSource, error) {
	if _, _, err := h.m.stored(ctx, h.server); errors.Is(err, ErrSignInRequired) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	return h.m.TokenSource(h.server), nil
}

func (h *handler) Authorize(ctx context.Context, _ *http.Request, resp *http.Response) error {
	if resp != nil {
		h.m.challenge(h.server, resp.Header)
	}
	if resp != nil && resp.Body != nil {
		io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
		resp.Body.Close()
	}
	return fmt.Errorf("MCP server %q: %w", h.server, ErrSignInRequired)
}
