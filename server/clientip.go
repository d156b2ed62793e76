package server

import (
	"fmt"
	"net/http"
	"net/netip"
	"strings"
)

// ParseTrustedProxies reads --trusted-proxy values: CIDR ranges (10.0.0.0/8, ::1/128) or single
// addresses, each value one or several separated by commas.
func ParseTrustedProxies(values []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, v := range values {
		for _, part := range strings.Split(v, ",") {
			part = strings.TrimSpace(part)
			if part == "" {
				continue
			}
			if p, err := netip.ParsePrefix(part); err == nil {
				out = append(out, netip.PrefixFrom(p.Addr().Unmap(), unmappedBits(p)).Masked())
				continue
			}
			a, err := netip.ParseAddr(part)
			if err != nil {
				return nil, fmt.Errorf("--trusted-proxy %q: give a CIDR range such as 127.0.0.1/32 or 10.0.0.0/8, or one address", part)
			}
			a = a.Unmap()
			out = append(out, netip.PrefixFrom(a, a.BitLen()))
		}
	}
	return out, nil
}

// unmappedBits is a prefix's length once an IPv4-mapped IPv6 address (::ffff:10.0.0.0/104) is
// written as IPv4 (10.0.0.0/8).
func unmappedBits(p netip.Prefix) int {
	if p.Addr().Is4In6() {
		if b := p.Bits() - 96; b >= 0 {
			return b
		}
		return 0
	}
	return p.Bits()
}

// trustedProxy reports whether a is within one of the --trusted-proxy ranges.
func (s *Server) trustedProxy(a netip.Addr) bool {
	a = a.Unmap()
	for _, p := range s.cfg.TrustedProxies {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// clientIP is the address a request counts against (pairing lockouts, connections per address):
// the TCP peer, unless the peer is a trusted proxy (Config.TrustedProxies). Then it is the
// rightmost X-Forwarded-For address (or, without that header, Forwarded for=) that is not itself a
// trusted proxy: each proxy appends the address it got the request from, so everything left of
// the nearest untrusted hop is the client's to forge. Without trusted proxies the headers are
// never read.
func (s *Server) clientIP(r *http.Request) string {
	peer := remoteIP(r)
	if len(s.cfg.TrustedProxies) == 0 {
		return peer
	}
	addr, err := netip.ParseAddr(peer)
	if err != nil || !s.trustedProxy(addr) {
		return peer
	}
	addr = addr.Unmap()
	hops := forwardedFor(r.Header)
	for i := len(hops) - 1; i >= 0; i-- {
		a, ok := parseHop(hops[i])
		if !ok {
			break // "unknown", an obfuscated name: count it as the last trusted hop
		}
		if !s.trustedProxy(a) {
			return a.String()
		}
		addr = a
	}
	return addr.String()
}

// forwardedFor lists the client addresses of X-Forwarded-For, left to right (every header line in
// order); without that header, the for= parameters of Forwarded (RFC 7239).
func forwardedFor(h http.Header) []string {
	var hops []string
	for _, line := range h.Values("X-Forwarded-For") {
		for _, v := range strings.Split(line, ",") {
			if v = strings.TrimSpace(v); v != "" {
				hops = append(hops, v)
			}
		}
	}
	if len(hops) > 0 {
		return hops
	}
	for _, line := range h.Values("Forwarded") {
		for _, elem := range splitUnquoted(line, ',') {
			for _, pair := range splitUnquoted(elem, ';') {
				k, v, ok := strings.Cut(strings.TrimSpace(pair), "=")
				if ok && strings.EqualFold(strings.TrimSpace(k), "for") {
					hops = append(hops, strings.TrimSpace(v))
				}
			}
		}
	}
	return hops
}

// splitUnquoted splits s at sep outside double-quoted strings.
func splitUnquoted(s string, sep byte) []string {
	var parts []string
	quoted, start := false, 0
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '\\' && quoted:
			i++
		case s[i] == '"':
			quoted = !quoted
		case s[i] == sep && !quoted:
			parts = append(parts, s[start:i])
			start = i + 1
		}
	}
	return append(parts, s[start:])
}

// parseHop reads one forwarded address: 192.0.2.1, 192.0.2.1:4711, 2001:db8::1,
// "[2001:db8::1]:4711" (quoted or not).
func parseHop(v string) (netip.Addr, bool) {
	v = strings.Trim(strings.TrimSpace(v), `"`)
	if a, err := netip.ParseAddr(v); err == nil {
		return a.Unmap(), true
	}
	if ap, err := netip.ParseAddrPort(v); err == nil {
		return ap.Addr().Unmap(), true
	}
	if strings.HasPrefix(v, "[") && strings.HasSuffix(v, "]") {
		if a, err := netip.ParseAddr(v[1 : len(v)-1]); err == nil {
			return a.Unmap(), true
		}
	}
	return netip.Addr{}, false
}
