package sse

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/zidane-server/zidane/protocol"
)

func TestParsePosition(t *testing.T) {
	p, ok := ParsePosition("0b4e-epoch:42")
	assert.True(t, ok)
	assert.Equal(t, Position{Epoch: "0b4e-epoch", Seq: 42}, p)
	assert.Equal(t, "0b4e-epoch:42", p.String())
	p, ok = ParsePosition("a:b:7") // the last colon separates: an epoch may hold one
	assert.True(t, ok)
	assert.Equal(t, Position{Epoch: "a:b", Seq: 7}, p)
	for _, bad := range []string{"", "42", ":42", "e:", "e:-1", "e:+1", "e:1.5", "e:x", "e:99999999999999999999"} {
		_, ok := ParsePosition(bad)
		assert.False(t, ok, "%q", bad)
	}
}

func TestRecord(t *testing.T) {
	assert.Equal(t, "id: ep:3\nevent: run:start\ndata: {\"kind\":\"run:start\",\"$seq\":3}\n\n",
		string(Record("ep", 3, "run:start", []byte(`{"kind":"run:start","$seq":3}`))))
	assert.Equal(t, "event: reset\ndata: {\"reason\":\"gap\"}\n\n", string(Record("ep", 0, "reset", []byte(`{"reason":"gap"}`))),
		"a record of a signal without $seq carries no id")
}

func TestMatch(t *testing.T) {
	rt, _, ok := match("/sessions/abc/send", "POST")
	assert.True(t, ok)
	assert.Equal(t, protocol.SSEOperationSend, rt.spec.OperationID)
	assert.Equal(t, "abc", rt.sessionID)
	rt, _, ok = match("/sessions", "GET")
	assert.True(t, ok)
	assert.Equal(t, protocol.SSEOperationListSessions, rt.spec.OperationID)
	_, allowed, ok := match("/sessions", "DELETE")
	assert.False(t, ok)
	assert.Equal(t, "GET, POST", allowed)
	_, allowed, ok = match("/sessions//stream", "GET")
	assert.False(t, ok, "an empty session id is no route")
	assert.Empty(t, allowed)
	_, _, ok = match("/nothing", "GET")
	assert.False(t, ok)
	// Every route of the schema is served by a case of ServeHTTP.
	for _, r := range protocol.SSERoutes {
		path := r.Path
		if r.Path != "/sessions" {
			path = "/sessions/x" + r.Path[len("/sessions/{sessionId}"):]
		}
		got, _, ok := match(path, r.Method)
		assert.True(t, ok, r.OperationID)
		assert.Equal(t, r.OperationID, got.spec.OperationID)
	}
}

func TestStreamWriterBounds(t *testing.T) {
	s := &streamWriter{kick: make(chan struct{}, 1), maxRecs: 2, maxB: 10}
	assert.True(t, s.push([]byte("abcd")))
	assert.True(t, s.push([]byte("efgh")))
	assert.False(t, s.push([]byte("i")), "past the record bound the stream ends")
	q, over := s.take()
	assert.Empty(t, q, "an overflowed stream writes nothing more: the client resumes")
	assert.True(t, over)
	s = &streamWriter{kick: make(chan struct{}, 1), maxRecs: 10, maxB: 6}
	assert.True(t, s.push([]byte("abcd")))
	assert.False(t, s.push([]byte("efg")), "past the byte bound too")
}

// originRefused is a Backend that allows no Origin; a request it refuses touches nothing else.
type originRefused struct{ Backend }

func (originRefused) OriginAllowed(*http.Request) bool { return false }

// TestOriginRefusalSaysWhatToDo: another site's Origin gets 403 naming the origin and the one
// way a proxied page gets in (the allowlist), with the protocol's headers.
func TestOriginRefusalSaysWhatToDo(t *testing.T) {
	h := New(Config{BasePath: "/api/chat"}, originRefused{})
	req := httptest.NewRequest("POST", "/api/chat/sessions", strings.NewReader(`{}`))
	req.Header.Set("Origin", "https://app.example.com")
	req.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	assert.Equal(t, 403, w.Code)
	assert.Equal(t, "1", w.Header().Get(protocol.SSEProtocolHeader))
	assert.Contains(t, w.Body.String(), `\"https://app.example.com\" not allowed`)
	assert.Contains(t, w.Body.String(), "--allowed-origin")
}
