package server

import (
	"net/http"
)

// serveTokenCheck answers GET /zidane/token exactly as a WebSocket upgrade with the same
// credentials would be answered (issue 7 item 11): 200 with the token's name and scope, 401 for
// no, an unknown or a revoked token, 403 for a refused origin, 503 while the database is down or
// the server drains. A browser cannot read the status of a refused upgrade, so clients ask here
// to tell a refused token from a network failure (field case B35). For origins on the allowlist
// it answers the CORS preflight and carries the CORS headers, so such a page can read the answer.
func (s *Server) serveTokenCheck(w http.ResponseWriter, r *http.Request) {
	origin := r.Header.Get("Origin")
	allowed := s.originAllowed(r)
	if origin != "" && allowed {
		h := w.Header()
		h.Set("Access-Control-Allow-Origin", origin)
		h.Add("Vary", "Origin")
		h.Set("Access-Control-Allow-Headers", "Authorization")
		h.Set("Access-Control-Allow-Methods", "GET, OPTIONS")
		h.Set("Access-Control-Max-Age", "600")
	}
	w.Header().Set("Cache-Control", "no-store")
	switch r.Method {
	case http.MethodOptions:
		if !allowed {
			plainText(w, http.StatusForbidden, "Forbidden: origin not allowed")
			return
		}
		w.WriteHeader(http.StatusNoContent)
		return
	case http.MethodGet:
	default:
		w.Header().Set("Allow", "GET, OPTIONS")
		plainText(w, http.StatusMethodNotAllowed, "Method Not Allowed")
		return
	}
	if s.draining.Load() {
		w.Header().Set("Retry-After", "5")
		plainText(w, http.StatusServiceUnavailable, "Service Unavailable: the server is shutting down")
		return
	}
	if !allowed {
		plainText(w, http.StatusForbidden, "Forbidden: origin not allowed")
		return
	}
	tok, status := s.authenticate(r)
	if status != 0 {
		refuseAuth(w, status, "Unauthorized")
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"name": tok.Name, "scope": tok.Scope})
}
