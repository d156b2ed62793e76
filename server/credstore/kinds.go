package credstore

import (
	"context"
	"errors"
	"time"

	"github.com/zidane-server/zidane/server/agent/provider"
)

// Token is an MCP server's OAuth token (KindMCPToken), with what refreshing it needs: the token
// endpoint of the issuer that granted it (a refresh never goes to another authorization server),
// the client it was granted to and the resource (RFC 8707) it is for.
type Token struct {
	AccessToken  provider.Secret `json:"accessToken"`
	RefreshToken provider.Secret `json:"refreshToken,omitzero"`
	TokenType    string          `json:"tokenType,omitempty"`
	// Expiry is when the access token expires; zero when the server said nothing.
	Expiry time.Time `json:"expiry,omitzero"`
	// TokenEndpoint is the issuer's token endpoint, from its metadata.
	TokenEndpoint string `json:"tokenEndpoint"`
	// ClientID and ClientSecret are the client the token was granted to.
	ClientID     string          `json:"clientId"`
	ClientSecret provider.Secret `json:"clientSecret,omitzero"`
	// AuthStyle is the token endpoint's client authentication (golang.org/x/oauth2 AuthStyle).
	AuthStyle int `json:"authStyle,omitempty"`
	// Resource is the MCP server's canonical URI (RFC 8707 resource parameter).
	Resource string `json:"resource"`
	// Scopes are the scopes asked for.
	Scopes []string `json:"scopes,omitempty"`
}

// Client is an OAuth client registered with an issuer for one redirect URI (KindMCPClient).
type Client struct {
	ClientID     string          `json:"clientId"`
	ClientSecret provider.Secret `json:"clientSecret,omitzero"`
	// AuthMethod is the registered token_endpoint_auth_method.
	AuthMethod string `json:"authMethod,omitempty"`
}

// Provider is a provider's stored API key and base URL (KindProvider).
type Provider struct {
	APIKey  provider.Secret `json:"apiKey,omitzero"`
	BaseURL string          `json:"baseUrl,omitempty"`
}

// sealedSecret is how a lone secret is sealed.
type sealedSecret struct {
	V string `json:"v"`
}

// The sealed forms: provider.Secret's own MarshalJSON hides the value (so a Token logged or
// marshalled by mistake shows [redacted]), hence these mirrors with plain strings, used only
// between the cipher and the typed values.
type sealedToken struct {
	AccessToken   string    `json:"accessToken"`
	RefreshToken  string    `json:"refreshToken,omitempty"`
	TokenType     string    `json:"tokenType,omitempty"`
	Expiry        time.Time `json:"expiry,omitzero"`
	TokenEndpoint string    `json:"tokenEndpoint"`
	ClientID      string    `json:"clientId"`
	ClientSecret  string    `json:"clientSecret,omitempty"`
	AuthStyle     int       `json:"authStyle,omitempty"`
	Resource      string    `json:"resource"`
	Scopes        []string  `json:"scopes,omitempty"`
}

type sealedClient struct {
	ClientID     string `json:"clientId"`
	ClientSecret string `json:"clientSecret,omitempty"`
	AuthMethod   string `json:"authMethod,omitempty"`
}

type sealedProvider struct {
	APIKey  string `json:"apiKey,omitempty"`
	BaseURL string `json:"baseUrl,omitempty"`
}

// PutToken stores server's token from issuer.
func (s *Store) PutToken(ctx context.Context, issuer, server string, t Token) error {
	fields := []string{"accessToken"}
	if t.RefreshToken.IsSet() {
		fields = append(fields, "refreshToken")
	}
	var exp int64
	if !t.Expiry.IsZero() {
		exp = t.Expiry.UnixMilli()
	}
	return s.Put(ctx, KindMCPToken, TokenKey(issuer, server), sealedToken{
		AccessToken: t.AccessToken.Reveal(), RefreshToken: t.RefreshToken.Reveal(), TokenType: t.TokenType,
		Expiry: t.Expiry, TokenEndpoint: t.TokenEndpoint, ClientID: t.ClientID, ClientSecret: t.ClientSecret.Reveal(),
		AuthStyle: t.AuthStyle, Resource: t.Resource, Scopes: t.Scopes,
	}, Meta{Server: server, Issuer: issuer, Fields: fields, ExpiresAt: exp})
}

// Token returns server's token from issuer; ErrNotFound when none is stored.
func (s *Store) Token(ctx context.Context, issuer, server string) (Token, error) {
	var v sealedToken
	if _, err := s.Get(ctx, KindMCPToken, TokenKey(issuer, server), &v); err != nil {
		return Token{}, err
	}
	return Token{
		AccessToken: provider.NewSecret(v.AccessToken), RefreshToken: provider.NewSecret(v.RefreshToken), TokenType: v.TokenType,
		Expiry: v.Expiry, TokenEndpoint: v.TokenEndpoint, ClientID: v.ClientID, ClientSecret: provider.NewSecret(v.ClientSecret),
		AuthStyle: v.AuthStyle, Resource: v.Resource, Scopes: v.Scopes,
	}, nil
}

// ServerTokens returns the issuers server holds a token from.
func (s *Store) ServerTokens(ctx context.Context, server string) ([]string, error) {
	infos, err := s.List(ctx, KindMCPToken)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, i := range infos {
		if i.Meta.Server == server {
			out = append(out, i.Meta.Issuer)
		}
	}
	return out, nil
}

// PutClient stores a client registered with issuer for redirect.
func (s *Store) PutClient(ctx context.Context, issuer, redirect string, c Client) error {
	fields := []string{"clientId"}
	if c.ClientSecret.IsSet() {
		fields = append(fields, "clientSecret")
	}
	return s.Put(ctx, KindMCPClient, ClientKey(issuer, redirect), sealedClient{ClientID: c.ClientID, ClientSecret: c.ClientSecret.Reveal(), AuthMethod: c.AuthMethod},
		Meta{Issuer: issuer, Fields: fields})
}

// Client returns the client registered with issuer for redirect; ErrNotFound when none is.
func (s *Store) Client(ctx context.Context, issuer, redirect string) (Client, error) {
	var v sealedClient
	if _, err := s.Get(ctx, KindMCPClient, ClientKey(issuer, redirect), &v); err != nil {
		return Client{}, err
	}
	return Client{ClientID: v.ClientID, ClientSecret: provider.NewSecret(v.ClientSecret), AuthMethod: v.AuthMethod}, nil
}

// PutProvider stores name's API key and base URL; with both empty it drops the credential.
func (s *Store) PutProvider(ctx context.Context, name string, p Provider) error {
	if !p.APIKey.IsSet() && p.BaseURL == "" {
		if err := s.Delete(ctx, KindProvider, name); err != nil && !errors.Is(err, ErrNotFound) {
			return err
		}
		return nil
	}
	var fields []string
	if p.APIKey.IsSet() {
		fields = append(fields, "apiKey")
	}
	if p.BaseURL != "" {
		fields = append(fields, "baseUrl")
	}
	return s.Put(ctx, KindProvider, name, sealedProvider{APIKey: p.APIKey.Reveal(), BaseURL: p.BaseURL}, Meta{Provider: name, Fields: fields})
}

// Provider returns name's stored key and base URL; ErrNotFound when none are stored.
func (s *Store) Provider(ctx context.Context, name string) (Provider, error) {
	var v sealedProvider
	if _, err := s.Get(ctx, KindProvider, name, &v); err != nil {
		return Provider{}, err
	}
	return Provider{APIKey: provider.NewSecret(v.APIKey), BaseURL: v.BaseURL}, nil
}

// TokenKey is the key of an MCP token: the issuer and the MCP server.
func TokenKey(issuer, server string) string { return issuer + " " + server }

// ClientKey is the key of a client registration: the issuer and the redirect URI.
func ClientKey(issuer, redirect string) string { return issuer + " " + redirect }

// PutClientSecret stores the secret of server's pre-registered OAuth client: mcp.upsert's
// clientSecret (seed "mcp"). The MCP client package calls it; the secret never goes to mcps.json.
// An empty secret drops a stored one.
func (s *Store) PutClientSecret(ctx context.Context, server, secret string) error {
	if secret == "" {
		if err := s.Delete(ctx, KindMCPClientSecret, server); err != nil && !errors.Is(err, ErrNotFound) {
			return err
		}
		return nil
	}
	return s.Put(ctx, KindMCPClientSecret, server, sealedSecret{V: secret}, Meta{Server: server, Fields: []string{"clientSecret"}})
}

// ClientSecret returns server's pre-registered client secret; "" and no error when none is stored.
func (s *Store) ClientSecret(ctx context.Context, server string) (provider.Secret, error) {
	var v sealedSecret
	if _, err := s.Get(ctx, KindMCPClientSecret, server, &v); errors.Is(err, ErrNotFound) {
		return provider.Secret{}, nil
	} else if err != nil {
		return provider.Secret{}, err
	}
	return provider.NewSecret(v.V), nil
}
