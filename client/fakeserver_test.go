package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/zidane-server/zidane/client/clienttest"
)

// fakeServer is a scripted WebSocket peer for the client cases (the "FS" of
// shared/cases/client-cases.md): it answers ipc.hello and $/ping itself, hands every other
// request to the test's handler, records every frame it receives per connection, and can push
// any signal at any point. Tests put a clienttest.Proxy in front of it to cut connections.
type fakeServer struct {
	t  *testing.T
	hs *httptest.Server

	mu      sync.Mutex
	hostID  string
	epoch   string
	conns   []*fsConn
	handler func(c *fsConn, req fsRequest)
	pingLag time.Duration
	// closeBeforeHello, when set, closes every new connection with this status instead of
	// answering ipc.hello.
	closeBeforeHello websocket.StatusCode
	nAccepted        int
	newConn          chan *fsConn
}

type fsRequest struct {
	ID     json.RawMessage
	Method string
	Params json.RawMessage
}

type fsConn struct {
	s       *fakeServer
	ws      *websocket.Conn
	mu      sync.Mutex
	methods []string // every request's method, in order
	reqs    []fsRequest
	gotReq  chan fsRequest
	closed  chan struct{}
}

func newFakeServer(t *testing.T) *fakeServer {
	s := &fakeServer{t: t, hostID: "host-1", epoch: "epoch-1", newConn: make(chan *fsConn, 64)}
	s.hs = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.hs.Close)
	return s
}

func (s *fakeServer) addr() string { return strings.TrimPrefix(s.hs.URL, "http://") }

func (s *fakeServer) url() string { return "ws://" + s.addr() + "/" }

// proxy starts a cut proxy in front of the server.
func (s *fakeServer) proxy() *clienttest.Proxy { return clienttest.Start(s.t, s.addr()) }

func (s *fakeServer) set(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f()
}

func (s *fakeServer) serve(w http.ResponseWriter, r *http.Request) {
	ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{"zidane"}})
	if err != nil {
		return
	}
	c := &fsConn{s: s, ws: ws, gotReq: make(chan fsRequest, 1024), closed: make(chan struct{})}
	s.mu.Lock()
	s.nAccepted++
	refuse := s.closeBeforeHello
	if refuse == 0 {
		s.conns = append(s.conns, c)
	}
	s.mu.Unlock()
	if refuse != 0 {
		ws.Close(refuse, "refused before hello")
		return
	}
	s.newConn <- c
	defer close(c.closed)
	defer ws.CloseNow()
	for {
		_, b, err := ws.Read(context.Background())
		if err != nil {
			return
		}
		var req fsRequest
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
		}
		if json.Unmarshal(b, &m) != nil {
			continue
		}
		req = fsRequest{ID: m.ID, Method: m.Method, Params: m.Params}
		c.mu.Lock()
		c.methods = append(c.methods, m.Method)
		c.reqs = append(c.reqs, req)
		c.mu.Unlock()
		s.mu.Lock()
		host, epoch, h, lag := s.hostID, s.epoch, s.handler, s.pingLag
		s.mu.Unlock()
		switch m.Method {
		case "ipc.hello":
			c.answer(req.ID, fmt.Sprintf(`{"protocolVersion":16,"minProtocolVersion":16,"negotiatedProtocolVersion":16,"appVersion":"fs","pid":1,"startedAt":1,"buildId":"b","codeVersion":"c","hostId":%q,"hostKind":"server","hostName":"fs","signalEpoch":%q,"methods":[],"adminCommands":{"token":"t","pair":"p"}}`, host, epoch))
			continue
		case "$/ping":
			if lag > 0 {
				go func() {
					select {
					case <-time.After(lag):
						c.answer(req.ID, `{}`)
					case <-c.closed: // ends with its connection (goleak)
					}
				}()
			} else {
				c.answer(req.ID, `{}`)
			}
			continue
		}
		c.gotReq <- req
		if h != nil {
			go h(c, req)
		}
	}
}

func (s *fakeServer) accepted() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.nAccepted
}

func websocketStatus(code int) websocket.StatusCode { return websocket.StatusCode(code) }

// conn waits for the next accepted connection.
func (s *fakeServer) conn(t *testing.T) *fsConn {
	t.Helper()
	select {
	case c := <-s.newConn:
		return c
	case <-time.After(10 * time.Second):
		t.Fatal("no connection reached the fake server")
	}
	return nil
}

func (c *fsConn) write(s string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c.ws.Write(ctx, websocket.MessageText, []byte(s))
}

func (c *fsConn) answer(id json.RawMessage, result string) {
	c.write(`{"jsonrpc":"2.0","id":` + string(id) + `,"result":` + result + `}`)
}

// push sends an ipc.signal with params.
func (c *fsConn) push(params string) {
	c.write(`{"jsonrpc":"2.0","method":"ipc.signal","params":` + params + `}`)
}

// req waits for the next request other than ipc.hello and $/ping.
func (c *fsConn) req(t *testing.T) fsRequest {
	t.Helper()
	select {
	case r := <-c.gotReq:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("no request reached the fake server")
	}
	return fsRequest{}
}

func (c *fsConn) seen() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.methods...)
}

// md is an event signal of session sid with $seq seq carrying a streamed markdown piece.
func md(sid string, seq int64, text string) string {
	return fmt.Sprintf(`{"kind":"event","sessionId":%q,"event":{"kind":"markdown","text":%q,"streaming":true,"turnId":"t1"},"$seq":%d}`, sid, text, seq)
}

// replayed is md without $seq, as a sessions.resume answer carries it.
func replayed(sid string, seq int64, text string) string {
	return fmt.Sprintf(`{"seq":%d,"signal":{"kind":"event","sessionId":%q,"event":{"kind":"markdown","text":%q,"streaming":true,"turnId":"t1"}}}`, seq, sid, text)
}

// resumeOK is a sessions.resume answer replaying seqs from..to of sid ("" when from > to).
func resumeOK(sid string, from, to int64) string {
	var parts []string
	for i := from; i <= to; i++ {
		parts = append(parts, replayed(sid, i, fmt.Sprintf("%d ", i)))
	}
	return `{"ok":true,"signals":[` + strings.Join(parts, ",") + `]}`
}

// collector reads a client's signal stream in the background.
type collector struct {
	mu     sync.Mutex
	events []SignalEvent
	done   chan struct{}
}

func collect(c *Client) *collector {
	k := &collector{done: make(chan struct{})}
	go func() {
		defer close(k.done)
		for ev := range c.Signals() {
			k.mu.Lock()
			k.events = append(k.events, ev)
			k.mu.Unlock()
		}
	}()
	return k
}

// seqs returns the $seq of every delivered signal of sid, in order.
func (k *collector) seqs(sid string) []int64 {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []int64
	for _, ev := range k.events {
		if ev.SessionID == sid && ev.Reload == nil {
			out = append(out, ev.Seq)
		}
	}
	return out
}

func (k *collector) all() []SignalEvent {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]SignalEvent(nil), k.events...)
}

// waitSeqs waits until sid's delivered seqs number n.
func (k *collector) waitSeqs(t *testing.T, sid string, n int) []int64 {
	t.Helper()
	require.Eventually(t, func() bool { return len(k.seqs(sid)) >= n }, 10*time.Second, 5*time.Millisecond, "seqs of %s: %v", sid, k.seqs(sid))
	return k.seqs(sid)
}

func span(from, to int64) []int64 {
	var out []int64
	for i := from; i <= to; i++ {
		out = append(out, i)
	}
	return out
}

// fast are test options: short backoff, no jitter.
func fast() Options {
	return Options{Token: "zds_test", Backoff: Backoff{Min: 10 * time.Millisecond, Max: 80 * time.Millisecond}, ConnectTimeout: 2 * time.Second}
}

// states records a client's state changes.
type states struct {
	mu  sync.Mutex
	all []StateChange
}

func (s *states) record(ch StateChange) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.all = append(s.all, ch)
}

func (s *states) list() []StateChange {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]StateChange(nil), s.all...)
}

func (s *states) count(st State) int {
	n := 0
	for _, ch := range s.list() {
		if ch.State == st {
			n++
		}
	}
	return n
}
