package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/zidane-server/zidane/protocol"
	"github.com/zidane-server/zidane/server/oneline"
	"github.com/zidane-server/zidane/server/store"
)

// Pairing limits: after pairSlowAfter wrong codes from one address (an IPv6 address's /64,
// pairKey) within pairWindow each further answer is delayed by a second more (at most
// pairMaxDelay); at pairBlockAfter the address gets 429 until pairBlockFor has passed.
const (
	pairWindow     = 10 * time.Minute
	pairSlowAfter  = 3
	pairMaxDelay   = 5 * time.Second
	pairBlockAfter = 10
	pairBlockFor   = 15 * time.Minute
	pairMaxTracked = 10000
	pairBodyLimit  = 4 << 10
	// pairBodyTimeout bounds the read of a pairing request's body: the endpoint needs no token, so
	// a client that sends the headers and then trickles (or withholds) the body must not hold its
	// connection and goroutine for ever (the server's ReadHeaderTimeout covers only the headers).
	pairBodyTimeout = 10 * time.Second
)

type pairAttempts struct {
	fails        int
	inflight     int // attempts being checked now: they count before their answer is known
	first        time.Time
	blockedUntil time.Time
}

// pairLimiter counts wrong pairing codes per remote address.
type pairLimiter struct {
	mu   sync.Mutex
	byIP map[string]*pairAttempts
	now  func() time.Time
	unit time.Duration // the delay step: a second (tests shorten it)
	// bodyTimeout is how long a request's body may take to arrive: pairBodyTimeout (tests
	// shorten it).
	bodyTimeout time.Duration
}

func newPairLimiter() *pairLimiter {
	return &pairLimiter{byIP: map[string]*pairAttempts{}, now: time.Now, unit: time.Second, bodyTimeout: pairBodyTimeout}
}

// begin reserves an attempt for the address. It returns how long the address is blocked (0 and
// ok when it may try). Attempts in flight count as failures until they end, so parallel guesses
// cannot get past the limit before their answers are known.
func (l *pairLimiter) begin(ip string) (retry time.Duration, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	a := l.byIP[ip]
	if a != nil {
		if d := a.blockedUntil.Sub(now); d > 0 {
			return d, false
		}
		if now.Sub(a.first) > pairWindow && a.inflight == 0 {
			a.fails, a.first = 0, now
		}
		if a.fails+a.inflight >= pairBlockAfter {
			return pairBlockFor, false
		}
	} else {
		if len(l.byIP) >= pairMaxTracked {
			for k, v := range l.byIP { // drop an entry that is idle and not blocked
				if v.inflight == 0 && v.blockedUntil.Before(now) {
					delete(l.byIP, k)
					break
				}
			}
		}
		a = &pairAttempts{first: now}
		l.byIP[ip] = a
	}
	a.inflight++
	return 0, true
}

// check returns how long the address is still blocked (0 when it may try).
func (l *pairLimiter) check(ip string) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	a := l.byIP[ip]
	if a == nil {
		return 0
	}
	if d := a.blockedUntil.Sub(l.now()); d > 0 {
		return d
	}
	return 0
}

// fail records a wrong code (ending an attempt begun with begin) and returns the delay to apply
// before answering.
func (l *pairLimiter) fail(ip string) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	a := l.byIP[ip]
	if a == nil {
		a = &pairAttempts{first: now}
		l.byIP[ip] = a
	}
	if a.inflight > 0 {
		a.inflight--
	}
	a.fails++
	if a.fails >= pairBlockAfter {
		a.blockedUntil = now.Add(pairBlockFor)
	}
	if a.fails <= pairSlowAfter {
		return 0
	}
	d := time.Duration(a.fails-pairSlowAfter) * l.unit
	if d > pairMaxDelay*l.unit/time.Second {
		d = pairMaxDelay * l.unit / time.Second
	}
	return d
}

// done ends an attempt that was not a wrong code: a success forgets the address's failures.
func (l *pairLimiter) done(ip string, success bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	a := l.byIP[ip]
	if a == nil {
		return
	}
	if a.inflight > 0 {
		a.inflight--
	}
	if success || (a.fails == 0 && a.inflight == 0) {
		delete(l.byIP, ip)
	}
}

type pairRequest struct {
	Code string `json:"code"`
	Name string `json:"name"`
}

// decodePairRequest reads {"code","name"} strictly: one object, exact member names, no duplicate
// or unknown members, string values, nothing after it.
func decodePairRequest(r io.Reader) (pairRequest, error) {
	var req pairRequest
	dec := json.NewDecoder(r)
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return req, errors.New("not an object")
	}
	seen := map[string]bool{}
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return req, errors.New("not valid JSON")
		}
		k, _ := kt.(string)
		if seen[k] {
			return req, fmt.Errorf("duplicate member %q", k)
		}
		seen[k] = true
		if k != "code" && k != "name" {
			return req, fmt.Errorf("unknown member %q", k)
		}
		var v string
		if err := dec.Decode(&v); err != nil {
			return req, fmt.Errorf("member %q must be a string", k)
		}
		if k == "code" {
			req.Code = v
		} else {
			req.Name = v
		}
	}
	if _, err := dec.Token(); err != nil {
		return req, errors.New("not valid JSON")
	}
	if _, err := dec.Token(); err != io.EOF {
		return req, errors.New("data after the object")
	}
	return req, nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	b, _ := protocol.Marshal(v) // maps of strings always marshal
	w.Write(append(b, '\n'))
}

func pairError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg})
}

// servePair implements POST /zidane/pair {code, name} → {token, scope} (seed "HTTP on the same
// port"): single-use codes, stored hashed, expiring; wrong codes from one address are slowed,
// then refused with 429.
func (s *Server) servePair(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		pairError(w, http.StatusMethodNotAllowed, "POST a JSON body {\"code\": \"XXXX-XXXX\", \"name\": \"my-laptop\"}.")
		return
	}
	if !s.originAllowed(r) {
		plainText(w, http.StatusForbidden, "Forbidden: origin not allowed")
		return
	}
	addr := s.clientIP(r) // behind a --trusted-proxy: the browser's address, not the proxy's
	ip := pairKey(addr)
	d, ok := s.pairs.begin(ip)
	if !ok {
		w.Header().Set("Retry-After", strconv.Itoa(int(d.Seconds())+1))
		pairError(w, http.StatusTooManyRequests, "Too many wrong pairing codes from this address; try again later.")
		return
	}
	success, failed := false, false
	defer func() {
		if !failed {
			s.pairs.done(ip, success)
		}
	}()
	// A deadline for the body (the server's ReadHeaderTimeout ended with the headers): without it
	// a client that never finishes its body holds the connection open indefinitely, and any number
	// of them, needing no token, exhaust the server's file descriptors.
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(s.pairs.bodyTimeout))
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, pairBodyLimit))
	if mbe := (*http.MaxBytesError)(nil); errors.As(err, &mbe) {
		pairError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("The body is over %d KiB; send only {\"code\": \"XXXX-XXXX\", \"name\": \"my-laptop\"}.", pairBodyLimit>>10))
		return
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		w.Header().Set("Connection", "close")
		pairError(w, http.StatusRequestTimeout, fmt.Sprintf("The body did not arrive within %s; send the whole {\"code\": \"XXXX-XXXX\", \"name\": \"my-laptop\"} at once.", s.pairs.bodyTimeout))
		return
	}
	if err != nil {
		pairError(w, http.StatusBadRequest, "The body could not be read ("+err.Error()+"); send {\"code\": \"XXXX-XXXX\", \"name\": \"my-laptop\"} again.")
		return
	}
	req, err := decodePairRequest(bytes.NewReader(body))
	if err != nil {
		pairError(w, http.StatusBadRequest, "The body must be one JSON object {\"code\": \"XXXX-XXXX\", \"name\": \"my-laptop\"}: "+err.Error()+".")
		return
	}
	req.Name = strings.TrimSpace(req.Name)
	if req.Code == "" || req.Name == "" || utf8.RuneCountInString(req.Name) > 200 {
		pairError(w, http.StatusBadRequest, "Both code and name are required (name: at most 200 characters).")
		return
	}
	if problem := oneline.Problem("a token name", req.Name); problem != "" {
		pairError(w, http.StatusBadRequest, "The name is refused: "+problem+".")
		return
	}
	if len(store.NormalizePairCode(req.Code)) != store.PairCodeLength {
		failed = true
		s.pairFailed(w, ip)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	plain, tok, err := s.store.RedeemPairingCode(ctx, req.Code, req.Name)
	switch {
	case errors.Is(err, store.ErrNotFound):
		failed = true
		s.pairFailed(w, ip)
	case errors.Is(err, store.ErrPairingUsed):
		// The code is real but spent (a parallel redemption won, B30): the same answer as a wrong
		// code, without counting a wrong guess against the address.
		pairError(w, http.StatusUnauthorized, pairRefusal)
	case errors.Is(err, store.ErrNameTaken):
		pairError(w, http.StatusConflict, fmt.Sprintf("A token named %q exists; pick another name.", req.Name))
	case errors.Is(err, store.ErrInvalidText):
		pairError(w, http.StatusBadRequest, "The name must be valid UTF-8 without NUL characters.")
	case err != nil:
		s.log.Warn("pairing failed", "err", err)
		pairError(w, http.StatusServiceUnavailable, "The database is unavailable; try again shortly.")
	default:
		success = true
		s.log.Info("paired", "token", tok.Name, "scope", tok.Scope, "from", addr)
		writeJSON(w, http.StatusOK, map[string]string{"token": plain, "scope": tok.Scope})
	}
}

func (s *Server) pairFailed(w http.ResponseWriter, ip string) {
	if d := s.pairs.fail(ip); d > 0 {
		time.Sleep(d)
	}
	pairError(w, http.StatusUnauthorized, pairRefusal)
}

// pairRefusal answers a code that cannot be redeemed, whatever the reason.
const pairRefusal = "Unknown, used or expired pairing code. Ask the operator for a new one (zidane-server pair)."

// pairKey is the address the pairing lockout counts wrong codes against: an IPv4 address
// itself, an IPv6 address's /64. One IPv6 host is usually given a whole /64 (SLAAC, privacy
// addresses), so counting each address apart let it take 10 guesses from each of 2^64 addresses
// and never be slowed or refused.
func pairKey(ip string) string {
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return ip
	}
	a = a.Unmap()
	if a.Is4() {
		return a.String()
	}
	p, _ := a.Prefix(64) // an IPv6 address always has a /64
	return p.String()
}

// remoteIP is the request's TCP peer address (clientIP reads a trusted proxy's headers).
func remoteIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}
