package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"

	"github.com/zidane-server/zidane/protocol"
	"github.com/zidane-server/zidane/server/sse"
	"github.com/zidane-server/zidane/server/store"
)

// The SSE protocol v1 (server/sse, schema/sse.json; issue 26) runs on this transport's tokens,
// dispatcher, hub and bounds: sseBackend is the sse.Backend the Server hands it.

// sseCallerKey carries the token of an SSE request into its handlers (actorOf, audit).
type sseCallerKey struct{}

// sseBackend implements sse.Backend over the Server.
type sseBackend struct{ s *Server }

var _ sse.Backend = sseBackend{}

// checkSSEBasePath refuses a base path the SSE routes cannot be mounted under.
func checkSSEBasePath(p string) error {
	if p == "" {
		return nil
	}
	bad := !strings.HasPrefix(p, "/") || strings.HasSuffix(p, "/") || strings.ContainsAny(p, "?#{} ") || strings.Contains(p, "//")
	if !bad {
		for _, taken := range []string{"/zidane", "/healthz", "/health", "/version", "/protocol.json", "/openrpc.json", "/metrics", "/debug"} {
			if p == taken || strings.HasPrefix(p, taken+"/") {
				bad = true
			}
		}
	}
	if bad {
		return fmt.Errorf("--sse-base-path %q: give a path such as /api/chat (a leading slash, no trailing one, not under /zidane, /debug or the server's own answers), or \"\" to turn the SSE protocol off", p)
	}
	return nil
}

// SSEBasePath is where the SSE protocol's routes are mounted ("" when it is off): the web app's
// fallback must never answer below it.
func (s *Server) SSEBasePath() string { return s.cfg.SSEBasePath }

// Authenticate implements sse.Backend: the same bearer tokens as the WebSocket.
func (b sseBackend) Authenticate(r *http.Request) (sse.Caller, int) {
	tok, status := b.s.authenticate(r)
	if status != 0 {
		return sse.Caller{}, status
	}
	return sse.Caller{Scope: protocol.Scope(tok.Scope), Handle: tok}, 0
}

// OriginAllowed implements sse.Backend: the WebSocket's rule (the server's own origin, or one on
// ZIDANE_SERVER_ALLOWED_ORIGINS; no Origin at all is a non-browser client).
func (b sseBackend) OriginAllowed(r *http.Request) bool { return b.s.originAllowed(r) }

// Draining implements sse.Backend.
func (b sseBackend) Draining() bool { return b.s.draining.Load() }

func tokenOf(c sse.Caller) store.Token {
	tok, _ := c.Handle.(store.Token)
	return tok
}

// Call implements sse.Backend: the generated dispatcher with the token's scope, bounded by the
// request timeout, and the audit entry of an audited method, as a WebSocket request gets. The
// handler's afterAnswer hooks run as the call returns, just before the HTTP answer is written: no
// method an SSE route calls has one whose order against its answer matters (they start clones
// and terminals, and sign a WebSocket out).
func (b sseBackend) Call(ctx context.Context, c sse.Caller, method string, params []byte) (any, error) {
	tok := tokenOf(c)
	rc := newReqCtx(context.WithValue(ctx, sseCallerKey{}, tok), b.s.cfg.Limits.RequestTimeout)
	defer rc.end()
	res, err := protocol.Dispatch(rc, b.s.handlers, c.Scope, method, params)
	if m := protocol.LookupMethod(method); m != nil && m.Audited {
		b.s.auditCallBy(tok.Name, m, params, err)
	}
	b.s.metrics.observe(method, err)
	for _, hook := range rc.hooks {
		hook()
	}
	return res, err
}

// Session implements sse.Backend.
func (b sseBackend) Session(ctx context.Context, c sse.Caller, id string) error {
	if _, ok := b.s.sessions.get(id); ok {
		return nil
	}
	_, err := b.s.store.GetSession(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return sse.ErrNoSession
	}
	if err != nil {
		return storeErr(err, "")
	}
	return nil
}

// sseStream is one open SSE stream: it ends when its token is revoked or expires, or the server
// shuts down.
type sseStream struct {
	tokenID string
	cancel  context.CancelFunc
}

// sseStreams are the open SSE streams.
type sseStreams struct {
	mu sync.Mutex
	m  map[*sseStream]struct{}
}

// Open implements sse.Backend: the stream counts against the token's and the address's
// connection bounds, and ends with its token or the server.
func (b sseBackend) Open(c sse.Caller, r *http.Request) (context.Context, func(), error) {
	tok := tokenOf(c)
	rel, err := b.s.bounds.acquire(tok.ID, b.s.clientIP(r))
	if err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithCancel(b.s.baseCtx)
	if tok.ExpiresAt != nil { // a paired token's life (pair --ttl-token) ends the stream too
		var cancelDeadline context.CancelFunc
		ctx, cancelDeadline = context.WithDeadline(ctx, *tok.ExpiresAt)
		inner := cancel
		cancel = func() { cancelDeadline(); inner() }
	}
	st := &sseStream{tokenID: tok.ID, cancel: cancel}
	b.s.streams.mu.Lock()
	if b.s.streams.m == nil {
		b.s.streams.m = map[*sseStream]struct{}{}
	}
	b.s.streams.m[st] = struct{}{}
	b.s.streams.mu.Unlock()
	return ctx, func() {
		cancel()
		b.s.streams.mu.Lock()
		delete(b.s.streams.m, st)
		b.s.streams.mu.Unlock()
		rel()
	}, nil
}

// endStreams ends the open SSE streams of a token ("" for every one).
func (s *Server) endStreams(tokenID string) {
	s.streams.mu.Lock()
	defer s.streams.mu.Unlock()
	for st := range s.streams.m {
		if tokenID == "" || st.tokenID == tokenID {
			st.cancel()
		}
	}
}

// Subscribe implements sse.Backend on the hub.
func (b sseBackend) Subscribe(c sse.Caller, sessionID string, at *sse.Position, push func([]byte) bool) sse.Subscription {
	return b.s.hub.tapSession(sessionID, c.Scope, at, push)
}

// connBounds counts the WebSocket connections and SSE streams per token and per address
// (Limits.MaxConnsPerToken, Limits.MaxConnsPerAddress).
type connBounds struct {
	mu            sync.Mutex
	tok, addr     map[string]int
	maxTok, maxIP int
}

func newConnBounds(maxTok, maxIP int) *connBounds {
	return &connBounds{tok: map[string]int{}, addr: map[string]int{}, maxTok: maxTok, maxIP: maxIP}
}

// acquire counts one more connection of the token and address, or says which bound it is past.
// The release it returns is idempotent.
func (b *connBounds) acquire(tokenID, addr string) (func(), error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.tok[tokenID] >= b.maxTok {
		return nil, fmt.Errorf("this token has %d connections and streams open, the most one token may (--max-conns-per-token); close some", b.tok[tokenID])
	}
	if b.addr[addr] >= b.maxIP {
		return nil, fmt.Errorf("this address has %d connections and streams open, the most one address may (--max-conns-per-address); close some", b.addr[addr])
	}
	b.tok[tokenID]++
	b.addr[addr]++
	var once sync.Once
	return func() {
		once.Do(func() {
			b.mu.Lock()
			if b.tok[tokenID]--; b.tok[tokenID] <= 0 {
				delete(b.tok, tokenID)
			}
			if b.addr[addr]--; b.addr[addr] <= 0 {
				delete(b.addr, addr)
			}
			b.mu.Unlock()
		})
	}, nil
}
