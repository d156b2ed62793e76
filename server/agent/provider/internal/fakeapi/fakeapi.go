// Package fakeapi is the queue-driven HTTP server behind the providers' test endpoints
// (openaitest, anthropictest): each model request takes the next queued Response, every request
// is recorded, and streams are written in the Server-Sent Events framing the real APIs use.
package fakeapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Response is one scripted answer to a model request.
type Response struct {
	// Status is the HTTP status; default 200.
	Status int
	// Header is added to the response (e.g. {"Retry-After": "2"}).
	Header map[string]string
	// Body, when set, is written as is (an error object, or a raw SSE body) instead of Events.
	Body string
	// Events are written one by one, each followed by a blank line. A JSON object is sent as
	// "data: <json>" (the API's fake fills in the fields the cases leave out), "[DONE]" as
	// "data: [DONE]", and a line that already starts with "data:", "event:", "retry:", "id:" or
	// ":" is written as is.
	Events []string
	// Repeat, when set, is an event written Times times after Events, then Tail: a stream of any
	// length, made as it is written (the fake holds one event). Times 0 repeats it until the
	// client goes away.
	Repeat string
	Times  int
	Tail   []string
	// RawRepeat writes Repeat byte for byte, without the SSE framing (e.g. data lines that never
	// end an event).
	RawRepeat bool
	// Delay pauses before each event.
	Delay time.Duration
	// Abort drops the connection after the events, without ending the HTTP response (a stream
	// cut by the network); otherwise the response ends normally after them.
	Abort bool
	// Hold keeps the stream open after the events until the client goes away (cancel tests).
	Hold bool
	// Check, when set, vets the request first; an error answers 400 with its text as the API's
	// error message (and the response is not consumed).
	Check func(*Request) error
}

// Request is a recorded request.
type Request struct {
	Method, Path string
	Header       http.Header
	Body         []byte
	// At is when the request arrived.
	At time.Time
}

// JSON decodes the body into a generic map (nil when it is not a JSON object).
func (r *Request) JSON() map[string]any {
	var m map[string]any
	_ = json.Unmarshal(r.Body, &m)
	return m
}

// Decode decodes the body into v.
func (r *Request) Decode(v any) error { return json.Unmarshal(r.Body, v) }

// API adapts the server to one API's wire format.
type API struct {
	// StreamPath is the model request's path, e.g. "/v1/chat/completions".
	StreamPath string
	// Fill completes a JSON event with the fields the cases leave out (nil: as is).
	Fill func(event string) string
	// Event names a JSON event for an "event:" line before its data (nil: no event line).
	Event func(event string) string
	// ErrorBody renders an error message as the API's error object with the given status.
	ErrorBody func(status int, msg string) string
	// Models renders GET /v1/models.
	Models func(ids []string) string
}

// Server is a fake API endpoint. Safe for concurrent use.
type Server struct {
	api API
	srv *httptest.Server

	written atomic.Int64 // stream bytes written to clients

	mu       sync.Mutex
	queue    []Response
	reqs     []Request
	models   []string
	validate func(*Request) error
	fallback *Response
}

// Start starts a server for api; Close stops it.
func Start(api API) *Server {
	s := &Server{api: api, models: []string{"m"}}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

// URL is the server's root, e.g. "http://127.0.0.1:PORT".
func (s *Server) URL() string { return s.srv.URL }

// Close stops the server and its connections.
func (s *Server) Close() {
	s.srv.CloseClientConnections()
	s.srv.Close()
}

// Enqueue adds responses for the next model requests, in order.
func (s *Server) Enqueue(rs ...Response) {
	s.mu.Lock()
	s.queue = append(s.queue, rs...)
	s.mu.Unlock()
}

// SetFallback answers every model request that finds the queue empty with r (nil: a 400 error
// saying nothing was queued).
func (s *Server) SetFallback(r *Response) {
	s.mu.Lock()
	s.fallback = r
	s.mu.Unlock()
}

// Validate vets every model request before its response (e.g. that each tool result answers a
// call); an error answers 400 with its text, as the real API refuses a malformed conversation.
func (s *Server) Validate(f func(*Request) error) {
	s.mu.Lock()
	s.validate = f
	s.mu.Unlock()
}

// SetModels sets the ids GET /v1/models lists (default ["m"]).
func (s *Server) SetModels(ids ...string) {
	s.mu.Lock()
	s.models = ids
	s.mu.Unlock()
}

// Requests returns the recorded requests (model requests and model lists), oldest first.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.reqs...)
}

// StreamRequests returns the recorded model requests, oldest first.
func (s *Server) StreamRequests() []Request {
	var out []Request
	for _, r := range s.Requests() {
		if r.Path == s.api.StreamPath {
			out = append(out, r)
		}
	}
	return out
}

// Written is the number of bytes of event streams written to clients so far (what they were
// sent, whether or not they read it all).
func (s *Server) Written() int64 { return s.written.Load() }

// Pending is the number of queued responses not yet used.
func (s *Server) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.queue)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	req := Request{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body, At: time.Now()}
	s.mu.Lock()
	s.reqs = append(s.reqs, req)
	models, validate := s.models, s.validate
	s.mu.Unlock()

	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/v1/models":
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, s.api.Models(models))
		return
	case r.Method != http.MethodPost || r.URL.Path != s.api.StreamPath:
		s.fail(w, http.StatusNotFound, fmt.Sprintf("fake API: no route for %s %s", r.Method, r.URL.Path))
		return
	}
	if validate != nil {
		if err := validate(&req); err != nil {
			s.fail(w, http.StatusBadRequest, err.Error())
			return
		}
	}
	s.mu.Lock()
	var resp Response
	switch {
	case len(s.queue) > 0:
		if c := s.queue[0].Check; c != nil {
			if err := c(&req); err != nil {
				s.mu.Unlock()
				s.fail(w, http.StatusBadRequest, err.Error())
				return
			}
		}
		resp, s.queue = s.queue[0], s.queue[1:]
	case s.fallback != nil:
		resp = *s.fallback
	default:
		s.mu.Unlock()
		s.fail(w, http.StatusBadRequest, "fake API: no response queued for this request")
		return
	}
	s.mu.Unlock()
	s.write(w, r, resp)
}

func (s *Server) fail(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	io.WriteString(w, s.api.ErrorBody(status, msg))
}

func (s *Server) write(w http.ResponseWriter, r *http.Request, resp Response) {
	for k, v := range resp.Header {
		w.Header().Set(k, v)
	}
	status := resp.Status
	if status == 0 {
		status = http.StatusOK
	}
	if resp.Body != "" {
		if w.Header().Get("Content-Type") == "" {
			if status == http.StatusOK && resp.Events == nil && !strings.HasPrefix(strings.TrimSpace(resp.Body), "{") {
				w.Header().Set("Content-Type", "text/event-stream")
			} else {
				w.Header().Set("Content-Type", "application/json")
			}
		}
		w.WriteHeader(status)
		io.WriteString(w, resp.Body)
	} else {
		if w.Header().Get("Content-Type") == "" {
			w.Header().Set("Content-Type", "text/event-stream")
		}
		w.Header().Set("Cache-Control", "no-cache")
		w.WriteHeader(status)
		fl, _ := w.(http.Flusher)
		send := func(ev string) bool {
			if resp.Delay > 0 {
				select {
				case <-time.After(resp.Delay):
				case <-r.Context().Done():
					return false
				}
			}
			if !resp.RawRepeat || ev != resp.Repeat {
				ev = s.frame(ev)
			}
			n, err := io.WriteString(w, ev)
			s.written.Add(int64(n))
			if fl != nil {
				fl.Flush()
			}
			return err == nil && r.Context().Err() == nil
		}
		for _, ev := range resp.Events {
			if !send(ev) {
				return
			}
		}
		if resp.Repeat != "" {
			for i := 0; resp.Times == 0 || i < resp.Times; i++ {
				if !send(resp.Repeat) {
					return
				}
			}
			for _, ev := range resp.Tail {
				if !send(ev) {
					return
				}
			}
		}
	}
	if resp.Hold {
		<-r.Context().Done()
		return
	}
	if resp.Abort {
		panic(http.ErrAbortHandler) // net/http drops the connection without ending the response
	}
}

// frame renders one event line as its SSE block.
func (s *Server) frame(ev string) string {
	t := strings.TrimSpace(ev)
	switch {
	case t == "[DONE]":
		return "data: [DONE]\n\n"
	case strings.HasPrefix(t, "{"):
		if s.api.Fill != nil {
			t = s.api.Fill(t)
		}
		if s.api.Event != nil {
			if name := s.api.Event(t); name != "" {
				return "event: " + name + "\ndata: " + t + "\n\n"
			}
		}
		return "data: " + t + "\n\n"
	}
	for _, p := range []string{"data:", "event:", "retry:", "id:", ":"} {
		if strings.HasPrefix(t, p) {
			return strings.TrimRight(ev, "\n") + "\n\n"
		}
	}
	return "data: " + t + "\n\n"
}

// Compact returns v marshalled as compact JSON (for the helpers that build events).
func Compact(v any) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic(err)
	}
	return strings.TrimSpace(b.String())
}
