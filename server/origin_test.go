package server

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestOriginRules: an origin is exactly scheme://host[:port]; the allowlist and the server's own
// origin match with default ports filled in (adversarial review: userinfo, "?" and "#" passed).
func TestOriginRules(t *testing.T) {
	s := &Server{cfg: Config{AllowedOrigins: []string{"https://app.example", "http://localhost:5173"}, AllowedHosts: []string{"srv.local"}}}
	for origin, want := range map[string]bool{
		"":                         true, // no Origin: not a browser
		"https://app.example":      true,
		"https://app.example:443":  true,
		"HTTPS://APP.EXAMPLE":      false, // not in the exact form a browser sends
		"http://app.example":       false,
		"https://app.example.evil": false,
		"http://localhost:5173":    true,
		"http://localhost:5174":    false,
		"http://evil@app.example":  false,
		"https://app.example?":     false,
		"https://app.example#x":    false,
		"https://app.example/":     false,
		"null":                     false,
		"file://":                  false,
		"http://srv.local":         true, // the server's own origin (Host srv.local:80, a listed host)
		"http://srv.local:80":      true,
		"https://srv.local":        false, // another scheme than the server's
	} {
		r := httptest.NewRequest(http.MethodGet, "http://srv.local/", nil)
		r.Host = "srv.local:80"
		if origin != "" {
			r.Header.Set("Origin", origin)
		}
		assert.Equal(t, want, s.originAllowed(r), "Origin %q", origin)
	}
}

// TestSameOriginNeedsValidatedHost: the server's own origin counts only for a Host it vouches
// for: a rebinding page's Origin and Host agree, so an unlisted name is no proof (issue 7 item 4).
func TestSameOriginNeedsValidatedHost(t *testing.T) {
	s := &Server{cfg: Config{}}
	for host, want := range map[string]bool{
		"evil.example:4380": false, // a name nobody listed
		"192.168.1.5:4380":  true,  // an IP literal: no name to rebind
		"[::1]:4380":        true,
	} {
		r := httptest.NewRequest(http.MethodGet, "http://"+host+"/", nil)
		r.Host = host
		r.Header.Set("Origin", "http://"+host)
		assert.Equal(t, want, s.originAllowed(r), "Host %q", host)
	}
}
