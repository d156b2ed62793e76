package server

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func tokenCheck(t *testing.T, e *testEnv, method, tok, origin string) (*http.Response, string) {
	req, err := http.NewRequest(method, e.hs.URL+"/zidane/token", nil)
	require.NoError(t, err)
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// TestTokenCheck: GET /zidane/token answers as the upgrade would (200 name and scope, 401 unknown
// or revoked, 403 refused origin), and carries CORS headers only for an allowlisted origin, so a
// page there can tell a refused token from a network failure (issue 7 item 11, field case B35).
func TestTokenCheck(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.AllowedOrigins = []string{"https://app.example"} })
	resp, body := tokenCheck(t, e, http.MethodGet, e.token, "")
	require.Equal(t, 200, resp.StatusCode)
	require.Contains(t, body, `"scope":"chat"`)

	resp, body = tokenCheck(t, e, http.MethodGet, "zds_"+"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "")
	require.Equal(t, 401, resp.StatusCode)
	require.Equal(t, "Unauthorized", body)
	resp, _ = tokenCheck(t, e, http.MethodGet, "", "")
	require.Equal(t, 401, resp.StatusCode)

	// An allowlisted page: CORS on the preflight and the answer.
	resp, _ = tokenCheck(t, e, http.MethodOptions, "", "https://app.example")
	require.Equal(t, 204, resp.StatusCode)
	require.Equal(t, "https://app.example", resp.Header.Get("Access-Control-Allow-Origin"))
	require.Contains(t, resp.Header.Get("Access-Control-Allow-Headers"), "Authorization")
	resp, _ = tokenCheck(t, e, http.MethodGet, e.token, "https://app.example")
	require.Equal(t, 200, resp.StatusCode)
	require.Equal(t, "https://app.example", resp.Header.Get("Access-Control-Allow-Origin"))

	// Another origin: 403 as the upgrade, and no CORS header to read it by.
	resp, body = tokenCheck(t, e, http.MethodGet, e.token, "https://evil.example")
	require.Equal(t, 403, resp.StatusCode)
	require.Equal(t, "Forbidden: origin not allowed", body)
	require.Empty(t, resp.Header.Get("Access-Control-Allow-Origin"))

	// A revoked token: 401. Revoked in the store, as another process (the operator's `token
	// revoke`) does, the server learns it from the revocation notice (the token cache: a
	// revocation through tokens.revoke is refused at once, TestTokenCacheRevocation).
	ctx := context.Background()
	toks, err := e.st.ListTokens(ctx)
	require.NoError(t, err)
	_, err = e.st.RevokeToken(ctx, toks[0].Name)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		resp, _ := tokenCheck(t, e, http.MethodGet, e.token, "")
		return resp.StatusCode == 401
	}, 2*time.Second, 5*time.Millisecond)
}
