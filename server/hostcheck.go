package server

import (
	"net"
	"net/http"
	"strings"
)

// The DNS-rebinding defence (issue 7 item 4; docs/security.md "Host check"). A page on
// evil.example whose name a rebinding DNS server points at 127.0.0.1 reaches a loopback server
// with Host: evil.example:<port>. A request that arrived on a loopback address must therefore
// name a loopback host (localhost, *.localhost, 127.0.0.0/8, ::1; any port), or a host the
// operator listed (--allowed-host); anything else is 403 on every path but /healthz and
// /health. Requests on the unix socket are local by construction and exempt.

// localAddr is the server-side address the request arrived on (nil when unknown).
func localAddr(r *http.Request) net.Addr {
	a, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	return a
}

// viaUnixSocket reports a request that came in on the unix socket.
func viaUnixSocket(r *http.Request) bool {
	if _, ok := localAddr(r).(*net.UnixAddr); ok {
		return true
	}
	return r.RemoteAddr == "@" // what net/http reports for a unix peer
}

// loopbackPort is the port of the loopback address the request arrived on, or "" when it did not
// arrive on a loopback address.
func loopbackPort(r *http.Request) string {
	ta, ok := localAddr(r).(*net.TCPAddr)
	if !ok || !ta.IP.IsLoopback() {
		return ""
	}
	_, port, _ := net.SplitHostPort(ta.String())
	return port
}

// splitHost splits a Host header into a lower-case name (brackets removed) and a port ("" when
// absent).
func splitHost(h string) (name, port string) {
	if n, p, err := net.SplitHostPort(h); err == nil {
		return strings.ToLower(n), p
	}
	return strings.ToLower(strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")), ""
}

func isLoopbackName(name string) bool {
	if name == "localhost" || strings.HasSuffix(name, ".localhost") {
		return true
	}
	ip := net.ParseIP(name)
	return ip != nil && ip.IsLoopback()
}

// hostListed reports a Host the operator allowed with --allowed-host: an entry "name" allows the
// name on any port, "name:port" only on that port.
func (s *Server) hostListed(name, port string) bool {
	for _, a := range s.cfg.AllowedHosts {
		an, ap := splitHost(strings.TrimSpace(a))
		if an == name && (ap == "" || ap == port) {
			return true
		}
	}
	return false
}

// hostAllowed applies the DNS-rebinding defence: false for a request that arrived on a loopback
// address with a Host that is neither a loopback name or address nor listed.
func (s *Server) hostAllowed(r *http.Request) bool {
	if viaUnixSocket(r) {
		return true
	}
	lport := loopbackPort(r)
	if lport == "" {
		return true // not a loopback listener: the operator exposed it on purpose
	}
	name, port := splitHost(r.Host)
	// Any port: a loopback name can only come from a page that is itself local, and tunnels and
	// local proxies (ssh -L 8080:localhost:4380) forward from another port.
	return isLoopbackName(name) || s.hostListed(name, port)
}

// hostValidated reports a Host a same-origin check may trust: one hostAllowed checked on a
// loopback address, an IP literal (no name to rebind), or one the operator listed. On a
// non-loopback listener any other name could be a rebinding page's.
func (s *Server) hostValidated(r *http.Request) bool {
	if viaUnixSocket(r) {
		return true
	}
	if loopbackPort(r) != "" {
		return s.hostAllowed(r)
	}
	name, port := splitHost(r.Host)
	return net.ParseIP(name) != nil || s.hostListed(name, port)
}
