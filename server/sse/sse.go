// Package sse serves the client seed's SSE protocol v1 ("Your server, over HTTP and SSE", "SSE
// protocol"; issue 26) as defined in schema/sse.json: JSON routes relative to a base path that call
// the same JSON-RPC methods as the WebSocket, and one text/event-stream per watched session that
// carries the same session signals with the same $seq. It knows nothing of WebSockets: the
// transport (package server) hands it a Backend for authentication, calls, bounds and the
// session signals, and mounts the Handler under --sse-base-path.
package sse

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/zidane-server/zidane/protocol"
)

// Caller is who a request came from, once the Backend authenticated it.
type Caller struct {
	// Scope is the caller's token scope (routes need chat, which admin includes).
	Scope protocol.Scope
	// Handle is the Backend's own value for the caller (its token), passed back on every call.
	Handle any
}

// Position is a stream position: a server process's signalEpoch and a session's $seq in it.
type Position struct {
	Epoch string
	Seq   int64
}

// String is the record id form, "<epoch>:<seq>".
func (p Position) String() string { return p.Epoch + ":" + strconv.FormatInt(p.Seq, 10) }

// ParsePosition reads a record id ("<epoch>:<seq>"); ok is false for anything else.
func ParsePosition(s string) (p Position, ok bool) {
	i := strings.LastIndexByte(s, ':')
	if i <= 0 {
		return p, false
	}
	seq, err := strconv.ParseInt(s[i+1:], 10, 64)
	if err != nil || seq < 0 || s[i+1] == '+' {
		return p, false
	}
	return Position{Epoch: s[:i], Seq: seq}, true
}

// ErrNoSession is Backend.Session's answer for a session that does not exist.
var ErrNoSession = errors.New("no such session")

// Subscription is what Backend.Subscribe answers: the records to write first (the replay after
// the position asked for), or a reset reason when the stream cannot resume from it.
type Subscription struct {
	// Replay are encoded records (Record) in $seq order.
	Replay [][]byte
	// Reset is "epoch" or "gap" when the stream cannot resume; the stream starts now then.
	Reset protocol.ResumeFailure
	// Cancel ends the subscription; no push follows its return.
	Cancel func()
}

// Backend is what the transport gives the SSE protocol: package server implements it over the
// same tokens, dispatcher, hub and bounds as the WebSocket.
type Backend interface {
	// Authenticate reads Authorization: Bearer; a status (401, 503) refuses.
	Authenticate(r *http.Request) (Caller, int)
	// OriginAllowed reports whether a request's Origin (absent: a non-browser client) is this
	// server's own or one the operator allowed.
	OriginAllowed(r *http.Request) bool
	// Call runs a JSON-RPC method for c exactly as a WebSocket request: scope, params validation,
	// audit entry. The result is the method's generated result type.
	Call(ctx context.Context, c Caller, method string, params []byte) (any, error)
	// Session reports ErrNoSession for a session that does not exist.
	Session(ctx context.Context, c Caller, sessionID string) error
	// Open counts a stream against c's per-token and per-address bounds (an error refuses it,
	// saying which bound) and answers a context that ends when the stream must end (the token was
	// revoked, the server shuts down) and the release to call when it ends.
	Open(c Caller, r *http.Request) (ctx context.Context, release func(), err error)
	// Subscribe starts delivering the session's records that c's scope receives to push, from
	// after at (nil: from now). push never blocks; false from push means the stream is too slow
	// and ends (the client resumes).
	Subscribe(c Caller, sessionID string, at *Position, push func(rec []byte) bool) Subscription
	// Draining reports a server shutting down (new requests get 503).
	Draining() bool
}

// Config configures a Handler. Zero fields take the defaults.
type Config struct {
	// BasePath is where the routes are mounted ("/api/chat"); required, no trailing slash.
	BasePath string
	// MaxBodyBytes bounds a request body (the server's message limit); past it 413. Default 16 MiB.
	MaxBodyBytes int64
	// Heartbeat is how often an idle stream writes a comment line; default 15 s.
	Heartbeat time.Duration
	// QueueRecords and QueueBytes bound one stream's records waiting to be written; past either
	// the stream ends and the client resumes with Last-Event-ID. Defaults 8192 and 64 MiB.
	QueueRecords, QueueBytes int
	// WriteTimeout bounds one write of a stream; default 10 s.
	WriteTimeout time.Duration
	// BodyTimeout bounds the read of a POST's body, from when its handler starts: a client that
	// sends the headers and withholds the body gets 408 and the connection closes. Default 60 s.
	BodyTimeout time.Duration
	// Logger logs; default slog.Default().
	Logger *slog.Logger
}

// Handler serves the SSE protocol under Config.BasePath.
type Handler struct {
	cfg Config
	b   Backend
}

// New returns the handler of the SSE protocol over b.
func New(cfg Config, b Backend) *Handler {
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = 16 << 20
	}
	if cfg.Heartbeat <= 0 {
		cfg.Heartbeat = 15 * time.Second
	}
	if cfg.QueueRecords <= 0 {
		cfg.QueueRecords = 8192
	}
	if cfg.QueueBytes <= 0 {
		cfg.QueueBytes = 64 << 20
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = 10 * time.Second
	}
	if cfg.BodyTimeout <= 0 {
		cfg.BodyTimeout = 60 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	cfg.BasePath = strings.TrimRight(cfg.BasePath, "/")
	return &Handler{cfg: cfg, b: b}
}

// Match reports whether path is the base path or below it (the web app's fallback must never
// answer these: a page asking the API gets the API's answer, 404 included).
func (h *Handler) Match(path string) bool {
	return path == h.cfg.BasePath || strings.HasPrefix(path, h.cfg.BasePath+"/")
}

// Record encodes one stream record: `id: <epoch>:<seq>` (omitted when seq is 0), `event: kind`
// and data, which must be one line of JSON (protocol.Marshal escapes every line break inside
// strings), then the blank line that ends a record.
func Record(epoch string, seq int64, kind string, data []byte) []byte {
	var b bytes.Buffer
	b.Grow(len(data) + len(kind) + len(epoch) + 40)
	if seq > 0 {
		b.WriteString("id: ")
		b.WriteString(epoch)
		b.WriteByte(':')
		b.WriteString(strconv.FormatInt(seq, 10))
		b.WriteByte('\n')
	}
	b.WriteString("event: ")
	b.WriteString(kind)
	b.WriteString("\ndata: ")
	b.Write(data)
	b.WriteString("\n\n")
	return b.Bytes()
}

// route is one matched route.
type route struct {
	spec      protocol.SSERoute
	sessionID string
}

// match finds the route of a path below the base path, and the path's session id. ok false: no
// route has this path; allowed names the method of a route with the path but another method.
func match(rel, method string) (rt route, allowed string, ok bool) {
	segs := strings.Split(strings.TrimPrefix(rel, "/"), "/")
	for _, spec := range protocol.SSERoutes {
		ps := strings.Split(strings.TrimPrefix(spec.Path, "/"), "/")
		if len(ps) != len(segs) {
			continue
		}
		var sid string
		same := true
		for i, p := range ps {
			if strings.HasPrefix(p, "{") {
				if segs[i] == "" {
					same = false
					break
				}
				sid = segs[i]
			} else if p != segs[i] {
				same = false
				break
			}
		}
		if !same {
			continue
		}
		if spec.Method != method {
			if allowed == "" {
				allowed = spec.Method
			} else if !strings.Contains(allowed, spec.Method) {
				allowed += ", " + spec.Method
			}
			continue
		}
		return route{spec: spec, sessionID: sid}, "", true
	}
	return route{}, allowed, false
}

// ServeHTTP answers one request of the SSE protocol.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	hd.Set(protocol.SSEProtocolHeader, strconv.Itoa(protocol.SSEProtocolVersion))
	hd.Set("Cache-Control", "no-store")
	hd.Set("X-Content-Type-Options", "nosniff")
	// Cross-site first: a sign-in cookie must not turn into a request from another site.
	if strings.EqualFold(r.Header.Get("Sec-Fetch-Site"), "cross-site") {
		refuse(w, http.StatusForbidden, 0, "Forbidden: a cross-site request (Sec-Fetch-Site: cross-site). The SSE protocol answers its own origin only; serve the page from this server's origin or proxy the requests.")
		return
	}
	if !h.b.OriginAllowed(r) {
		refuse(w, http.StatusForbidden, 0, "Forbidden: origin "+strconv.Quote(r.Header.Get("Origin"))+" not allowed. The SSE protocol sends no CORS headers, so a page reaches it from its own origin only: serve the page from this server, or proxy the requests from the page's origin and have the operator list that origin with --allowed-origin (ZIDANE_SERVER_ALLOWED_ORIGINS; the proxy passes the browser's Origin on).")
		return
	}
	if h.b.Draining() {
		hd.Set("Retry-After", "5")
		refuse(w, http.StatusServiceUnavailable, 0, "Service Unavailable: the server is shutting down; try again shortly.")
		return
	}
	rt, allowed, ok := match(strings.TrimPrefix(r.URL.Path, h.cfg.BasePath), r.Method)
	if !ok {
		if allowed != "" {
			hd.Set("Allow", allowed)
			refuse(w, http.StatusMethodNotAllowed, 0, "Method Not Allowed: "+r.URL.Path+" answers "+allowed+".")
			return
		}
		refuse(w, http.StatusNotFound, 0, "Not found: no route of the SSE protocol at "+r.URL.Path+"; the routes are in GET /zidane/sse/openapi.json.")
		return
	}
	caller, status := h.b.Authenticate(r)
	if status != 0 {
		msg := "Unauthorized: send Authorization: Bearer <token> with a chat or admin token."
		if status == http.StatusServiceUnavailable {
			msg = "Service Unavailable: the database is not reachable; try again shortly."
		}
		refuse(w, status, 0, msg)
		return
	}
	if !caller.Scope.Allows(rt.spec.Scope) {
		refuse(w, http.StatusForbidden, int(protocol.CodeForbidden), "Forbidden: "+rt.spec.OperationID+" needs a "+string(rt.spec.Scope)+" token; this token has scope "+string(caller.Scope)+".")
		return
	}
	var body []byte
	if r.Method == http.MethodPost {
		var ok bool
		if body, ok = h.readBody(w, r); !ok {
			return
		}
	}
	ctx := r.Context()
	if rt.sessionID != "" {
		if err := h.b.Session(ctx, caller, rt.sessionID); err != nil {
			if errors.Is(err, ErrNoSession) {
				refuse(w, http.StatusNotFound, 0, "Not found: no session "+strconv.Quote(rt.sessionID)+"; list them with GET "+h.cfg.BasePath+"/sessions.")
				return
			}
			h.callFailed(w, err)
			return
		}
	}
	switch rt.spec.OperationID {
	case protocol.SSEOperationListSessions:
		h.listSessions(w, r, caller)
	case protocol.SSEOperationCreateSession:
		h.createSession(w, r, caller, body)
	case protocol.SSEOperationHydrate:
		h.hydrate(w, r, caller, rt.sessionID)
	case protocol.SSEOperationStream:
		h.stream(w, r, caller, rt.sessionID)
	case protocol.SSEOperationSend:
		h.send(w, r, caller, rt.sessionID, body)
	case protocol.SSEOperationAnswer:
		h.answer(w, r, caller, rt.sessionID, body)
	case protocol.SSEOperationCancel:
		h.cancel(w, r, caller, rt.sessionID, body)
	default:
		refuse(w, http.StatusNotFound, 0, "Not found: "+rt.spec.OperationID+" is not served by this build.")
	}
}

// readBody checks a POST's media type and size and reads it; false: refused.
func (h *Handler) readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "application/json" {
		refuse(w, http.StatusUnsupportedMediaType, 0, "Unsupported Media Type: a POST of the SSE protocol sends Content-Type: application/json.")
		return nil, false
	}
	if r.ContentLength > h.cfg.MaxBodyBytes {
		refuse(w, http.StatusRequestEntityTooLarge, 0, "Content Too Large: the body is "+strconv.FormatInt(r.ContentLength, 10)+" bytes, over the server's "+strconv.FormatInt(h.cfg.MaxBodyBytes, 10)+"-byte message limit.")
		return nil, false
	}
	// The server's ReadHeaderTimeout ended with the headers: without a deadline a withheld body
	// held the connection for ever (these requests count against no connection bound).
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(h.cfg.BodyTimeout))
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.cfg.MaxBodyBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		switch {
		case errors.As(err, &mbe):
			refuse(w, http.StatusRequestEntityTooLarge, 0, "Content Too Large: the body is over the server's "+strconv.FormatInt(h.cfg.MaxBodyBytes, 10)+"-byte message limit.")
		case errors.Is(err, os.ErrDeadlineExceeded):
			w.Header().Set("Connection", "close")
			refuse(w, http.StatusRequestTimeout, 0, "Request Timeout: the body did not arrive within "+h.cfg.BodyTimeout.String()+"; send it at once.")
		default:
			refuse(w, http.StatusBadRequest, 0, "Bad Request: the body could not be read: "+err.Error())
		}
		return nil, false
	}
	if len(bytes.TrimSpace(b)) == 0 {
		b = []byte("{}")
	}
	return b, true
}

// refuse answers an ErrorBody.
func refuse(w http.ResponseWriter, status, code int, msg string) {
	e := protocol.ErrorBody{Status: status, Message: msg}
	if code != 0 {
		e.Code = &code
	}
	writeJSON(w, status, &e)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := protocol.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"status":500,"message":"The server could not encode its answer."}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

// callFailed answers a method's error with the status it means.
func (h *Handler) callFailed(w http.ResponseWriter, err error) {
	var e *protocol.Error
	if !errors.As(err, &e) {
		h.cfg.Logger.Error("sse: call failed", "err", err)
		refuse(w, http.StatusInternalServerError, 0, "The server failed: "+err.Error())
		return
	}
	status := http.StatusConflict
	switch e.Code {
	case protocol.CodeInvalidParams, protocol.CodeParseError, protocol.CodeInvalidRequest:
		status = http.StatusBadRequest
	case protocol.CodeForbidden, protocol.CodeWrongConnectionKind:
		status = http.StatusForbidden
	case protocol.CodeResponseTooLarge:
		status = http.StatusRequestEntityTooLarge
	case protocol.CodeInternalError:
		status = http.StatusInternalServerError
	}
	refuse(w, status, int(e.Code), e.Message)
}

// call runs method with params (any value, encoded) and answers its error; ok false: answered.
func (h *Handler) call(w http.ResponseWriter, r *http.Request, c Caller, method string, params any) (any, bool) {
	raw, err := protocol.Marshal(params)
	if err != nil {
		refuse(w, http.StatusInternalServerError, 0, "The server could not encode the call.")
		return nil, false
	}
	res, err := h.b.Call(r.Context(), c, method, raw)
	if err != nil {
		h.callFailed(w, err)
		return nil, false
	}
	return res, true
}

// streamWriter is one open stream's queue: the hub pushes encoded records without blocking, the
// request's goroutine writes them.
type streamWriter struct {
	mu      sync.Mutex
	queue   [][]byte
	bytes   int
	over    bool
	kick    chan struct{}
	maxRecs int
	maxB    int
}

func (s *streamWriter) push(rec []byte) bool {
	s.mu.Lock()
	if s.over {
		s.mu.Unlock()
		return false
	}
	if len(s.queue) >= s.maxRecs || s.bytes+len(rec) > s.maxB {
		s.over = true
		s.queue, s.bytes = nil, 0
		s.mu.Unlock()
		s.signal()
		return false
	}
	s.queue = append(s.queue, rec)
	s.bytes += len(rec)
	s.mu.Unlock()
	s.signal()
	return true
}

func (s *streamWriter) signal() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// take returns what is queued, and whether the stream overflowed.
func (s *streamWriter) take() ([][]byte, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.queue
	s.queue, s.bytes = nil, 0
	return q, s.over
}

// heartbeat is the comment line an idle stream writes.
var heartbeat = []byte(": ping\n\n")

// stream serves GET …/sessions/{id}/stream.
func (h *Handler) stream(w http.ResponseWriter, r *http.Request, c Caller, sessionID string) {
	ctx, release, err := h.b.Open(c, r)
	if err != nil {
		refuse(w, http.StatusTooManyRequests, 0, "Too Many Requests: "+err.Error())
		return
	}
	defer release()
	var at *Position
	reset := protocol.ResumeFailure("")
	if last := strings.TrimSpace(r.Header.Get("Last-Event-ID")); last != "" {
		if p, ok := ParsePosition(last); ok {
			at = &p
		} else {
			// Not "<epoch>:<seq>": no position of this server process, so the client hydrates
			// again, as after a restart (documented in schema/sse.json's stream route).
			reset = protocol.ResumeFailureEpoch
		}
	}
	sw := &streamWriter{kick: make(chan struct{}, 1), maxRecs: h.cfg.QueueRecords, maxB: h.cfg.QueueBytes}
	sub := h.b.Subscribe(c, sessionID, at, sw.push)
	defer sub.Cancel()
	if sub.Reset != "" {
		reset = sub.Reset
	}
	hd := w.Header()
	hd.Set("Content-Type", "text/event-stream")
	hd.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	var first [][]byte
	if reset != "" {
		data, _ := protocol.Marshal(&protocol.StreamReset{Reason: reset})
		first = append(first, Record("", 0, "reset", data))
	} else {
		first = sub.Replay
	}
	if !h.write(rc, w, first, true) {
		return
	}
	tick := time.NewTicker(h.cfg.Heartbeat)
	defer tick.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-ctx.Done():
			return
		case <-tick.C:
			if !h.write(rc, w, [][]byte{heartbeat}, true) {
				return
			}
		case <-sw.kick:
			recs, over := sw.take()
			if !h.write(rc, w, recs, true) || over {
				return // a slow reader: it resumes with Last-Event-ID
			}
			tick.Reset(h.cfg.Heartbeat)
		}
	}
}

// write writes records and flushes; false: the stream is gone.
func (h *Handler) write(rc *http.ResponseController, w http.ResponseWriter, recs [][]byte, flush bool) bool {
	_ = rc.SetWriteDeadline(time.Now().Add(h.cfg.WriteTimeout))
	for _, rec := range recs {
		if _, err := w.Write(rec); err != nil {
			return false
		}
	}
	if flush {
		if err := rc.Flush(); err != nil {
			return false
		}
	}
	return true
}
