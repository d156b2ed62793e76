package server

import (
	"context"
	"crypto/subtle"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"time"

	"github.com/zidane-server/zidane/server/store"
)

func syscallEADDRINUSE() error { return syscall.EADDRINUSE }

const bearerProto = "zidane.bearer."

// originAllowed applies the Origin rules (seed "Connect"; field case B14): no Origin header
// (non-browser client) passes; "null" and unlisted origins are refused; an allowlisted origin
// must match scheme, host and port exactly; the server's own origin (Origin host equals Host)
// is allowed.
func (s *Server) originAllowed(r *http.Request) bool {
	origins := r.Header.Values("Origin")
	if len(origins) == 0 {
		return true
	}
	if len(origins) > 1 {
		return false
	}
	o := origins[0]
	if o == "null" || o == "" {
		return false
	}
	u, err := url.Parse(o)
	// An origin is exactly scheme://host[:port] (RFC 6454): no userinfo, path, query or fragment.
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") || o != u.Scheme+"://"+u.Host {
		return false
	}
	norm := normalizeOrigin(u)
	for _, a := range s.cfg.AllowedOrigins {
		if au, err := url.Parse(strings.TrimSpace(a)); err == nil && normalizeOrigin(au) == norm {
			return true
		}
	}
	// Same origin: the page was served by this server at the host the browser used, and that
	// Host is one the server vouches for (a rebinding page's Host equals its Origin too).
	if !s.hostValidated(r) {
		return false
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	self, err := url.Parse(scheme + "://" + r.Host)
	return err == nil && normalizeOrigin(u) == normalizeOrigin(self)
}

func normalizeOrigin(u *url.URL) string {
	host := strings.ToLower(u.Hostname())
	port := u.Port()
	if port == "" {
		if u.Scheme == "https" {
			port = "443"
		} else {
			port = "80"
		}
	}
	return strings.ToLower(u.Scheme) + "://" + host + ":" + port
}

// authenticate finds the token in Authorization: Bearer or in the subprotocol
// zidane.bearer.<token> (offered beside "zidane"), and looks it up: in the token cache
// (tokencache.go, which also keeps the store's refusals), else in the store. It returns 401 for a
// missing, unknown or conflicting token, and 503 when the database cannot answer.
func (s *Server) authenticate(r *http.Request) (store.Token, int) {
	var header, proto string
	if len(r.Header.Values("Authorization")) > 1 {
		return store.Token{}, http.StatusUnauthorized // ambiguous credentials
	}
	if h := r.Header.Get("Authorization"); h != "" {
		const p = "Bearer "
		if len(h) <= len(p) || !strings.EqualFold(h[:len(p)], p) {
			return store.Token{}, http.StatusUnauthorized
		}
		header = strings.TrimSpace(h[len(p):])
	}
	offeredZidane := false
	for _, v := range r.Header.Values("Sec-WebSocket-Protocol") {
		for _, p := range strings.Split(v, ",") {
			p = strings.TrimSpace(p)
			switch {
			case p == "zidane":
				offeredZidane = true
			case strings.HasPrefix(p, bearerProto):
				if proto != "" && proto != p[len(bearerProto):] {
					return store.Token{}, http.StatusUnauthorized
				}
				proto = p[len(bearerProto):]
			}
		}
	}
	if proto != "" && !offeredZidane {
		// A browser would abort an upgrade answered without a subprotocol (field case B14 b).
		return store.Token{}, http.StatusUnauthorized
	}
	tok := header
	if proto != "" {
		if header != "" && subtle.ConstantTimeCompare([]byte(header), []byte(proto)) != 1 {
			return store.Token{}, http.StatusUnauthorized // conflicting credentials (B14 e)
		}
		tok = proto
	}
	if !plausibleToken(tok) {
		// Empty, oversized or not RFC 7230 token characters: no token we mint looks like that
		// (field case B14 f), so refuse without a database round trip.
		return store.Token{}, http.StatusUnauthorized
	}
	key, now := tokenKey(tok), time.Now()
	if t, ok := s.tokens.get(key, now); ok {
		return t, 0
	}
	if s.tokens.wasRefused(key, now) {
		return store.Token{}, http.StatusUnauthorized
	}
	gen := s.tokens.begin()
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	t, err := s.store.LookupToken(ctx, tok)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			s.tokens.refuse(key, now, s.cfg.TokenRecheck)
			return store.Token{}, http.StatusUnauthorized
		}
		s.log.Warn("token lookup failed", "err", err)
		return store.Token{}, http.StatusServiceUnavailable
	}
	s.tokens.put(key, t, gen, now, s.cfg.TokenRecheck)
	return t, 0
}

// refuseAuth answers a request that authenticate refused with status: 503 when the token could
// not be checked (the database), else status with msg as the body (the upgrade's and the token
// check's are exactly "Unauthorized", the seed's captured answers).
func refuseAuth(w http.ResponseWriter, status int, msg string) {
	if status == http.StatusServiceUnavailable {
		msg = "Service Unavailable: the database is not reachable; try again shortly"
	}
	plainText(w, status, msg)
}

// maxTokenLen bounds a presented token; minted tokens are "zds_" + 43 characters.
const maxTokenLen = 256

// plausibleToken reports whether tok could be a token: 1..maxTokenLen characters, all RFC 7230
// tchar (so it can travel in Sec-WebSocket-Protocol, which browsers enforce).
func plausibleToken(tok string) bool {
	if tok == "" || len(tok) > maxTokenLen {
		return false
	}
	for i := 0; i < len(tok); i++ {
		c := tok[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}
