package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/zidane-server/zidane/protocol"
	"github.com/zidane-server/zidane/server/store"
	"github.com/zidane-server/zidane/server/store/storetest"
)

// testEnv is a real Server on a real Postgres (storetest), served by httptest over real TCP.
type testEnv struct {
	t     *testing.T
	srv   *Server
	st    *store.Store
	hs    *httptest.Server
	token string // a chat-scoped token
	wsURL string
}

var tokenSeq atomic.Int64

// newEnv starts a server; mod may adjust the Config (limits, step delay) before New.
func newEnv(t *testing.T, mod func(*Config)) *testEnv {
	t.Helper()
	return newEnvStore(t, storetest.New(t), mod)
}

// newEnvOn starts a second server on e's database (a restart, as far as the store is concerned).
func newEnvOn(t *testing.T, e *testEnv) *testEnv {
	t.Helper()
	return newEnvStore(t, e.st, nil)
}

// newEnvStore is newEnv on a given store.
func newEnvStore(t *testing.T, st *store.Store, mod func(*Config)) *testEnv {
	t.Helper()
	cfg := Config{
		WorkspaceRoots: []string{t.TempDir()},
		Logger:         testLogger(),
		MCPUserFile:    filepath.Join(t.TempDir(), "mcps.json"), // never the operator's own
	}
	if mod != nil {
		mod(&cfg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := New(ctx, cfg, st)
	require.NoError(t, err)
	hs := httptest.NewServer(s)
	e := &testEnv{t: t, srv: s, st: st, hs: hs, wsURL: "ws" + strings.TrimPrefix(hs.URL, "http")}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		s.Shutdown(ctx)
		hs.Close()
	})
	e.token = e.mint("chat")
	return e
}

// mint creates a token of the given scope and returns its plaintext.
func (e *testEnv) mint(scope string) string {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tok, _, err := e.st.CreateToken(ctx, fmt.Sprintf("t%d", tokenSeq.Add(1)), scope)
	require.NoError(e.t, err)
	return tok
}

// testConn is a coder/websocket client connection with a background reader that queues every
// frame, so a test can wait for frames with a timeout without the library closing the socket.
type testConn struct {
	t      *testing.T
	ws     *websocket.Conn
	mu     sync.Mutex
	frames [][]byte
	err    error // the reader's terminal error
	wake   chan struct{}
	done   chan struct{}
	nextID atomic.Int64
	once   sync.Once
	// skipped holds the ipc.signal frames nextAnswer passed over, for runSignals.
	skipped [][]byte
	// methods maps request ids to methods, for the contract check of results.
	methods sync.Map
	// noContract skips the contract check of received frames (set before startReader): a reader
	// that must drain megabytes within the server's 5 s close handshake, under -race.
	noContract bool
}

// contract validates every result, signal and error the server sends in these tests strictly
// against the schema (issue: contract tests): a member the schema lacks, or a missing required
// one, fails the test that received it.
var contract = func() *protocol.Contract {
	c, err := protocol.NewContract()
	if err != nil {
		panic(err)
	}
	return c
}()

func (c *testConn) checkContract(b []byte) {
	err := contract.CheckFrame(b, func(id json.RawMessage) string {
		m, _ := c.methods.LoadAndDelete(string(id))
		s, _ := m.(string)
		return s
	})
	if err != nil {
		c.t.Errorf("contract: %v", err)
	}
}

// dial connects with Authorization: Bearer and starts the reader.
func (e *testEnv) dial() *testConn {
	c := e.dialNoRead()
	c.startReader()
	return c
}

// dialNoRead connects but does not read until startReader is called (slow-consumer tests).
func (e *testEnv) dialNoRead() *testConn {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ws, resp, err := websocket.Dial(ctx, e.wsURL, &websocket.DialOptions{
		HTTPHeader: http.Header{"Authorization": {"Bearer " + e.token}},
	})
	require.NoError(e.t, err)
	require.Equal(e.t, http.StatusSwitchingProtocols, resp.StatusCode)
	ws.SetReadLimit(64 << 20)
	c := &testConn{t: e.t, ws: ws, wake: make(chan struct{}, 1), done: make(chan struct{})}
	e.t.Cleanup(func() { ws.CloseNow() })
	return c
}

// dialSmallBuffer is dialNoRead with a tiny TCP receive buffer, so a client that does not read
// makes the server's writes block soon.
func (e *testEnv) dialSmallBuffer() *testConn {
	e.t.Helper()
	// Set before connect, so the window scale fits and autotuning is off (a buffer set after
	// connect, below one MSS, stalls loopback TCP on zero-window probes).
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 256<<10)
		})
		if err != nil {
			return err
		}
		return serr
	}}
	tr := &http.Transport{DialContext: d.DialContext}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, e.wsURL, &websocket.DialOptions{
		HTTPClient: &http.Client{Transport: tr},
		HTTPHeader: http.Header{"Authorization": {"Bearer " + e.token}},
	})
	require.NoError(e.t, err)
	ws.SetReadLimit(64 << 20)
	c := &testConn{t: e.t, ws: ws, wake: make(chan struct{}, 1), done: make(chan struct{})}
	e.t.Cleanup(func() { ws.CloseNow() })
	return c
}

func (c *testConn) startReader() {
	c.once.Do(func() {
		go func() {
			defer close(c.done)
			for {
				_, data, err := c.ws.Read(context.Background())
				c.mu.Lock()
				if err != nil {
					c.err = err
					c.mu.Unlock()
					c.notify()
					return
				}
				c.frames = append(c.frames, data)
				c.mu.Unlock()
				if !c.noContract {
					c.checkContract(data)
				}
				c.notify()
			}
		}()
	})
}

func (c *testConn) notify() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// send writes one text frame.
func (c *testConn) send(raw string) {
	c.t.Helper()
	var req struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	if json.Unmarshal([]byte(raw), &req) == nil && req.ID != nil && protocol.LookupMethod(req.Method) != nil {
		c.methods.Store(string(req.ID), req.Method)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	require.NoError(c.t, c.ws.Write(ctx, websocket.MessageText, []byte(raw)))
}

// tryNext returns the next frame, or nil and the reader's error when none arrives within d.
func (c *testConn) tryNext(d time.Duration) ([]byte, error) {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	for {
		c.mu.Lock()
		if len(c.frames) > 0 {
			f := c.frames[0]
			c.frames = c.frames[1:]
			c.mu.Unlock()
			return f, nil
		}
		err := c.err
		c.mu.Unlock()
		if err != nil {
			return nil, err
		}
		select {
		case <-c.wake:
		case <-deadline.C:
			return nil, nil
		}
	}
}

// next reads one frame (any kind) within 10 s (times raceSlowdown).
func (c *testConn) next() []byte {
	c.t.Helper()
	d := 10 * time.Second * raceSlowdown
	f, err := c.tryNext(d)
	require.NoError(c.t, err, "connection ended while waiting for a frame")
	require.NotNil(c.t, f, "no frame within %v", d)
	return f
}

// nextAnswer reads frames until one that is not an ipc.signal notification.
func (c *testConn) nextAnswer() []byte {
	c.t.Helper()
	for {
		f := c.next()
		if !isSignalFrame(f) {
			return f
		}
		c.skipped = append(c.skipped, f)
	}
}

// nextSignal returns the next ipc.signal frame, first from those nextAnswer passed over.
func (c *testConn) nextSignal() signal {
	c.t.Helper()
	if len(c.skipped) > 0 {
		f := c.skipped[0]
		c.skipped = c.skipped[1:]
		return parseSignal(c.t, f)
	}
	for {
		f := c.next()
		if isSignalFrame(f) {
			return parseSignal(c.t, f)
		}
		c.t.Fatalf("unexpected answer while waiting for signals: %s", f)
	}
}

// runSignals returns the session's numbered signals up to and including its run:end (ephemeral
// ones, which carry no $seq, are left out).
func (c *testConn) runSignals(sessionID string) []signal {
	c.t.Helper()
	var out []signal
	for {
		s := c.nextSignal()
		if s.session != sessionID || s.seq == 0 { // another session's, or ephemeral (stream:progress)
			continue
		}
		out = append(out, s)
		if s.kind == "run:end" {
			return out
		}
	}
}

func isSignalFrame(f []byte) bool {
	return bytes.HasPrefix(f, []byte(`{"jsonrpc":"2.0","method":"ipc.signal"`))
}

// expectNothing asserts that no frame (other than ipc.signal) arrives within d.
func (c *testConn) expectNothing(d time.Duration) {
	c.t.Helper()
	end := time.Now().Add(d)
	for {
		left := time.Until(end)
		if left <= 0 {
			return
		}
		f, err := c.tryNext(left)
		require.NoError(c.t, err)
		if f != nil && !isSignalFrame(f) {
			c.t.Fatalf("expected no answer, got %s", f)
		}
		if f == nil {
			return
		}
	}
}

// closeStatus waits for the connection to end and returns the close code the server sent
// (-1 when it ended without a close frame).
func (c *testConn) closeStatus(d time.Duration) websocket.StatusCode {
	c.t.Helper()
	c.startReader()
	select {
	case <-c.done:
	case <-time.After(d):
		c.t.Fatalf("connection still open after %v", d)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return websocket.CloseStatus(c.err)
}

const helloParams = `{"protocolVersion":16,"appVersion":"test"}`

// hello performs the handshake and returns its result.
func (c *testConn) hello() map[string]any {
	c.t.Helper()
	c.send(`{"jsonrpc":"2.0","id":"hello","method":"ipc.hello","params":` + helloParams + `}`)
	m := decodeObj(c.t, c.nextAnswer())
	require.Nil(c.t, m["error"], "hello failed: %v", m["error"])
	require.Equal(c.t, "hello", m["id"])
	return m["result"].(map[string]any)
}

// call sends a request with a fresh numeric id and returns the decoded answer to it; signals
// arriving meanwhile are skipped.
func (c *testConn) call(method, params string) map[string]any {
	c.t.Helper()
	id := c.nextID.Add(1) + 100000
	c.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`, id, method, params))
	for {
		m := decodeObj(c.t, c.nextAnswer())
		if n, ok := m["id"].(json.Number); ok && n.String() == fmt.Sprint(id) {
			return m
		}
		c.t.Fatalf("unexpected answer while waiting for id %d: %v", id, m)
	}
}

// result calls and requires a result.
func (c *testConn) result(method, params string) map[string]any {
	c.t.Helper()
	m := c.call(method, params)
	require.Nil(c.t, m["error"], "%s failed: %v", method, m["error"])
	r, _ := m["result"].(map[string]any)
	return r
}

// decodeObj decodes one JSON object strictly (numbers kept as json.Number).
func decodeObj(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	require.NoError(t, dec.Decode(&m), "not a JSON object: %s", b)
	return m
}

// decodeArr decodes a JSON array of objects.
func decodeArr(t *testing.T, b []byte) []map[string]any {
	t.Helper()
	var a []map[string]any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	require.NoError(t, dec.Decode(&a), "not a JSON array of objects: %s", b)
	return a
}

// errCode returns error.code of a response, or 0 when it has none.
func errCode(m map[string]any) int {
	e, ok := m["error"].(map[string]any)
	if !ok {
		return 0
	}
	n, _ := e["code"].(json.Number).Int64()
	return int(n)
}

// requireError asserts an error response with the code and the raw id (as JSON text).
func requireError(t *testing.T, m map[string]any, code int, id string) {
	t.Helper()
	require.Equal(t, code, errCode(m), "answer: %v", m)
	_, hasResult := m["result"]
	require.False(t, hasResult, "an error response must not carry result: %v", m)
	requireID(t, m, id)
}

// requireID asserts the id member is present and equals id (JSON text: null, 5, "x").
func requireID(t *testing.T, m map[string]any, id string) {
	t.Helper()
	v, ok := m["id"]
	require.True(t, ok, "the id member must be present: %v", m)
	b, _ := json.Marshal(v)
	require.Equal(t, id, string(b), "id of %v", m)
}

// newSession creates a session and returns its id.
func (c *testConn) newSession() string {
	c.t.Helper()
	r := c.result("sessions.create", `{}`)
	return r["id"].(string)
}

// signal is one decoded ipc.signal.
type signal struct {
	kind, session string
	seq           int64
	raw           []byte
}

func parseSignal(t *testing.T, f []byte) signal {
	t.Helper()
	m := decodeObj(t, f)
	p := m["params"].(map[string]any)
	s := signal{raw: f}
	s.kind, _ = p["kind"].(string)
	s.session, _ = p["sessionId"].(string)
	if n, ok := p["$seq"].(json.Number); ok {
		s.seq, _ = n.Int64()
	}
	return s
}

// testLogger discards logs unless ZIDANE_TEST_LOG is set.
func testLogger() *slog.Logger {
	if os.Getenv("ZIDANE_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}
