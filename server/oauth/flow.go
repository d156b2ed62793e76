package oauth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"golang.org/x/oauth2"

	"github.com/zidane-server/zidane/protocol"
	"github.com/zidane-server/zidane/server/agent/provider"
	"github.com/zidane-server/zidane/server/credstore"
)

// ErrUnknownFlow is returned for a flow id that is unknown, finished or expired.
var ErrUnknownFlow = errors.New("no such sign-in: it is unknown, finished or expired; begin again with auth.oauth.begin")

// ErrOtherConnection is returned when a flow is completed from another connection.
var ErrOtherConnection = errors.New("this sign-in was begun on another connection; complete it there, or begin again")

// Complete finishes the flow flowID for owner. Browser mode: input is "", and it waits for the
// callback's exchange (or ctx, or the flow's expiry). Loopback mode: input is the pasted address
// of the page that failed to load. It answers the stored token's description.
func (m *Manager) Complete(ctx context.Context, owner any, flowID, input string) (credstore.Info, error) {
	m.mu.Lock()
	f := m.flows[flowID]
	m.mu.Unlock()
	if f == nil {
		return credstore.Info{}, ErrUnknownFlow
	}
	if f.owner != owner {
		return credstore.Info{}, ErrOtherConnection
	}
	if input != "" {
		q, err := pastedQuery(input)
		if err != nil {
			return credstore.Info{}, err
		}
		if !m.takeState(f, q.Get("state")) {
			return credstore.Info{}, errors.New("the pasted address's state is not this sign-in's (or was already used); paste the address the sign-in ended on, or begin again")
		}
		m.exchange(f, q)
	} else if f.mode == ModeLoopback {
		return credstore.Info{}, errors.New("this sign-in is in loopback mode: pass input, the address of the page that failed to load after signing in")
	}
	select {
	case <-f.done:
	case <-ctx.Done():
		return credstore.Info{}, fmt.Errorf("still waiting for the sign-in (%w); call auth.oauth.complete again", ctx.Err())
	}
	m.mu.Lock()
	delete(m.flows, f.id)
	m.mu.Unlock()
	return f.result, f.err
}

// pastedQuery reads the query of a pasted redirect address.
func pastedQuery(input string) (url.Values, error) {
	u, err := url.Parse(input)
	if err != nil || u.RawQuery == "" {
		return nil, errors.New("input is not the address of the page the sign-in ended on (it has no code and state); copy the whole address from the browser's address bar")
	}
	return u.Query(), nil
}

// takeState reports whether state is f's and unused, and uses it up.
func (m *Manager) takeState(f *flow, state string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if state == "" || m.byState[state] != f {
		return false
	}
	delete(m.byState, state)
	return true
}

// DropOwner forgets the flows of owner (its connection ended).
func (m *Manager) DropOwner(owner any) {
	m.mu.Lock()
	var fs []*flow
	for _, f := range m.flows {
		if f.owner == owner {
			fs = append(fs, f)
		}
	}
	m.mu.Unlock()
	for _, f := range fs {
		m.finish(f, credstore.Info{}, errors.New("the connection that began the sign-in closed"))
		m.mu.Lock()
		delete(m.flows, f.id)
		m.mu.Unlock()
	}
}

// finish ends f once with res or err; the state can no longer be used.
func (m *Manager) finish(f *flow, res credstore.Info, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	select {
	case <-f.done:
		return
	default:
	}
	if m.byState[f.state] == f {
		delete(m.byState, f.state)
	}
	f.result, f.err = res, err
	close(f.done)
}

// exchange checks the authorization response q (error, iss) and trades its code for tokens.
func (m *Manager) exchange(f *flow, q url.Values) {
	if e := q.Get("error"); e != "" {
		msg := "the authorization server refused the sign-in: " + oneLine(e)
		if d := q.Get("error_description"); d != "" {
			msg += " (" + oneLine(d) + ")"
		}
		m.finish(f, credstore.Info{}, errors.New(msg))
		return
	}
	iss := q.Get("iss")
	switch {
	case f.issSupported && iss == "":
		m.finish(f, credstore.Info{}, fmt.Errorf("the authorization response has no iss though %s says it sends one (RFC 9207); the sign-in was refused", f.issuer))
		return
	case iss != "" && iss != f.issuer:
		m.finish(f, credstore.Info{}, fmt.Errorf("the authorization response came from issuer %q, not %q (RFC 9207): a mix-up, the sign-in was refused", oneLine(iss), f.issuer))
		return
	}
	code := q.Get("code")
	if code == "" {
		m.finish(f, credstore.Info{}, errors.New("the authorization response has no code; begin again"))
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ctx = context.WithValue(ctx, oauth2.HTTPClient, m.cfg.HTTPClient)
	tok, err := f.cfg.Exchange(ctx, code, oauth2.VerifierOption(f.verifier), oauth2.SetAuthURLParam("resource", f.resource))
	if err != nil {
		m.finish(f, credstore.Info{}, fmt.Errorf("the token exchange with %s failed: %s", f.issuer, tokenErr(err)))
		return
	}
	t := credstore.Token{
		AccessToken: provider.NewSecret(tok.AccessToken), RefreshToken: provider.NewSecret(tok.RefreshToken),
		TokenType: tok.TokenType, Expiry: tok.Expiry, TokenEndpoint: f.cfg.Endpoint.TokenURL,
		ClientID: f.cfg.ClientID, ClientSecret: provider.NewSecret(f.cfg.ClientSecret), AuthStyle: int(f.cfg.Endpoint.AuthStyle),
		Resource: f.resource, Scopes: f.cfg.Scopes,
	}
	if err := m.cfg.Creds.PutToken(ctx, f.issuer, f.server.Name, t); err != nil {
		m.finish(f, credstore.Info{}, fmt.Errorf("store the token: %w", err))
		return
	}
	m.cfg.Logger.Info("oauth: signed in", "server", f.server.Name, "issuer", f.issuer)
	info := credstore.Info{Kind: credstore.KindMCPToken, Key: credstore.TokenKey(f.issuer, f.server.Name), UpdatedAt: m.cfg.Now(),
		Meta: credstore.Meta{Server: f.server.Name, Issuer: f.issuer, Fields: tokenFields(t)}}
	if !t.Expiry.IsZero() {
		info.Meta.ExpiresAt = t.Expiry.UnixMilli()
	}
	m.finish(f, info, nil)
}

func tokenFields(t credstore.Token) []string {
	if t.RefreshToken.IsSet() {
		return []string{"accessToken", "refreshToken"}
	}
	return []string{"accessToken"}
}

// tokenErr is an oauth2 error without the response body (which may echo what was sent).
func tokenErr(err error) string {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) {
		if re.ErrorCode != "" {
			s := re.ErrorCode
			if re.ErrorDescription != "" {
				s += ": " + re.ErrorDescription
			}
			return oneLine(s)
		}
		if re.Response != nil {
			return re.Response.Status
		}
	}
	return oneLine(err.Error())
}

// oneLine bounds and flattens text from the network for an error message.
func oneLine(s string) string {
	b := []rune(s)
	if len(b) > 200 {
		b = append(b[:200], '…')
	}
	for i, r := range b {
		if r < 0x20 || r == 0x7f {
			b[i] = ' '
		}
	}
	return string(b)
}

// The callback page says only whether it worked: it reflects nothing of its query.
const (
	pageOK     = "<!doctype html><meta charset=utf-8><title>Signed in</title><p>Signed in. You can close this tab and return to the app.</p>\n"
	pageFailed = "<!doctype html><meta charset=utf-8><title>Sign-in failed</title><p>The sign-in did not complete. Return to the app to see why, and try again.</p>\n"
	// PageGone is the callback page of an unknown, expired or used state.
	PageGone = "<!doctype html><meta charset=utf-8><title>Sign-in not found</title><p>This sign-in is unknown, expired or already used. Begin again in the app.</p>\n"
)

// CallbackHandler serves GET /zidane/oauth/callback: it matches the code to its flow by state
// (single-use), exchanges it, and shows a page that reflects nothing from the query, with
// Cache-Control: no-store and Referrer-Policy: no-referrer.
func (m *Manager) CallbackHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !CallbackHeaders(w, r) {
			return
		}
		status, page := m.Callback(r.URL.Query())
		w.WriteHeader(status)
		w.Write([]byte(page))
	})
}

// CallbackHeaders sets the callback page's headers and answers 405 to anything but GET (false:
// the response is written).
func CallbackHeaders(w http.ResponseWriter, r *http.Request) bool {
	h := w.Header()
	h.Set("Cache-Control", "no-store")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", "default-src 'none'; frame-ancestors 'none'")
	h.Set("Content-Type", "text/html; charset=utf-8")
	if r.Method != http.MethodGet {
		h.Set("Allow", http.MethodGet)
		w.WriteHeader(http.StatusMethodNotAllowed)
		return false
	}
	return true
}

// Callback ends the browser flow whose state q holds with q's code (or error) and answers the
// page's status and body, which reflect nothing of q. A state of no open browser flow here is
// 400 with PageGone.
func (m *Manager) Callback(q url.Values) (int, string) {
	m.mu.Lock()
	f := m.byState[q.Get("state")]
	m.mu.Unlock()
	if f == nil || f.mode != ModeBrowser || !m.takeState(f, q.Get("state")) {
		return http.StatusBadRequest, PageGone
	}
	m.exchange(f, q)
	if f.err != nil {
		return http.StatusBadRequest, pageFailed
	}
	return http.StatusOK, pageOK
}

// cimdRedirects are the redirect URIs the Client ID Metadata Document lists: the public URL's
// callback alone (a web client), so a loopback flow registers instead.
func (m *Manager) cimdRedirects() []string {
	return []string{m.cfg.PublicURL + CallbackPath}
}

// ClientMetadataHandler serves the Client ID Metadata Document at /zidane/oauth/client.json when
// the server has an https public URL (404 otherwise): its client_id is its own address.
func (m *Manager) ClientMetadataHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		doc := m.cimdURL()
		if doc == "" {
			http.NotFound(w, r)
			return
		}
		b, _ := protocol.Marshal(map[string]any{
			"client_id": doc, "client_name": m.cfg.ClientName, "client_uri": m.cfg.PublicURL,
			"redirect_uris": m.cimdRedirects(), "grant_types": []string{"authorization_code", "refresh_token"},
			"response_types": []string{"code"}, "token_endpoint_auth_method": "none", "application_type": "web",
		})
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "public, max-age=3600")
		w.Write(b)
	})
}
