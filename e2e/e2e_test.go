// Package e2e tests the real zidane-server and zidane binaries end to end: it builds them once,
// starts the server as a subprocess against a real PostgreSQL, and talks to it over plain HTTP
// and a real WebSocket with raw JSON-RPC frames (github.com/coder/websocket directly), asserting
// the answers the protocol seed (shared/seeds/000_…) shows. The client's own tests
// (client_test.go, cli_test.go) drive the Go client and the zidane CLI against the real server
// through a cut proxy (client/clienttest).
package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zidane-server/zidane/protocol"
	"github.com/zidane-server/zidane/server/store/storetest"
)

var (
	binDir    string
	serverBin string
	cliBin    string
)

const (
	protoVersion = 16
	waitTimeout  = 20 * time.Second
)

var uuidRE = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "zidane-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	binDir = dir
	serverBin = filepath.Join(dir, "zidane-server")
	cliBin = filepath.Join(dir, "zidane")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	build := exec.CommandContext(ctx, "go", "build", "-o", dir+string(filepath.Separator), "../cmd/zidane-server", "../cmd/zidane")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: go build:", err)
		return 1
	}
	code := m.Run()
	storetest.Shutdown()
	return code
}

// ---------------------------------------------------------------------------------------------
// Server subprocess

// syncBuf is a goroutine-safe bytes.Buffer for a subprocess's output.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type serverOpts struct {
	bin     string // "" = the binary TestMain built
	dbURL   string // "" = managed Postgres under dataDir
	dataDir string // "" = a fresh temp dir
	root    string // "" = a fresh temp dir; "-" = no --workspace-root flag
	noDBEnv bool   // remove DATABASE_URL from the environment
	extra   []string
	env     []string // added to the server's environment (KEY=value)
	// homeEnv names the data dir as ZIDANE_SERVER_HOME instead of --data-dir.
	homeEnv bool
	// tlsCA, when set, is the CA of the certificate passed in extra (--tls-cert): the health
	// check speaks https and trusts it.
	tlsCA *x509.CertPool
	// files are passed to the server as descriptors 3, 4, … (as a shell's `exec 9<file` would).
	files []*os.File
}

type serverProc struct {
	t       *testing.T
	opts    serverOpts
	addr    string
	cmd     *exec.Cmd
	stdout  *syncBuf
	stderr  *syncBuf
	done    chan struct{}
	waitErr error
	stopped bool
	// adminTok is an admin token scrape minted for GET /metrics, once.
	adminTok string
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

func env(noDBEnv bool, extra ...string) []string {
	var out []string
	for _, kv := range os.Environ() {
		if noDBEnv && strings.HasPrefix(kv, "DATABASE_URL=") {
			continue
		}
		if strings.HasPrefix(kv, "ZIDANE_") {
			continue
		}
		out = append(out, kv)
	}
	return append(out, extra...)
}

// startServer starts zidane-server and waits for GET /healthz == "ok". It is stopped (SIGTERM,
// exit 0 within 20 s asserted) at cleanup unless stop was called.
func startServer(t *testing.T, o serverOpts) *serverProc {
	t.Helper()
	if o.dbURL == "" && !o.noDBEnv {
		t.Fatal("startServer: pass dbURL (a fresh database) or noDBEnv (the managed default); never the environment's DATABASE_URL")
	}
	if o.dataDir == "" {
		o.dataDir = t.TempDir()
	}
	if o.root == "" {
		r, err := filepath.EvalSymlinks(t.TempDir())
		require.NoError(t, err)
		o.root = r
	}
	s := &serverProc{t: t, opts: o, addr: freeAddr(t), stdout: &syncBuf{}, stderr: &syncBuf{}, done: make(chan struct{})}
	args := []string{"start", "--listen", s.addr, "--data-dir", o.dataDir}
	if o.homeEnv {
		args = args[:len(args)-2]
		o.env = append(o.env, "ZIDANE_SERVER_HOME="+o.dataDir)
	}
	if o.dbURL != "" {
		args = append(args, "--database-url", o.dbURL)
	}
	if o.root != "-" {
		args = append(args, "--workspace-root", o.root)
	}
	args = append(args, o.extra...)
	bin := serverBin
	if o.bin != "" {
		bin = o.bin
	}
	s.cmd = exec.Command(bin, args...)
	s.cmd.Env = env(o.noDBEnv, o.env...)
	s.cmd.Stdout, s.cmd.Stderr = s.stdout, s.stderr
	s.cmd.ExtraFiles = o.files
	require.NoError(t, s.cmd.Start())
	go func() { s.waitErr = s.cmd.Wait(); close(s.done) }()
	t.Cleanup(func() {
		if !s.stopped {
			s.stop()
		}
		if t.Failed() {
			t.Logf("zidane-server %s stdout:\n%s", s.addr, s.stdout.String())
			t.Logf("zidane-server %s stderr:\n%s", s.addr, s.stderr.String())
		}
	})
	deadline := time.Now().Add(45 * time.Second)
	hc := &http.Client{Timeout: 2 * time.Second}
	scheme := "http"
	if o.tlsCA != nil {
		scheme = "https"
		hc.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: o.tlsCA}}
	}
	for {
		select {
		case <-s.done:
			s.stopped = true
			t.Fatalf("zidane-server exited before it was healthy: %v\nstderr:\n%s", s.waitErr, s.stderr.String())
		default:
		}
		resp, err := hc.Get(scheme + "://" + s.addr + "/healthz")
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 && string(b) == "ok" {
				return s
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("zidane-server not healthy on %s within 45 s (last err %v)", s.addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stop sends SIGTERM and asserts exit code 0 within 20 s.
func (s *serverProc) stop() {
	t := s.t
	t.Helper()
	s.stopped = true
	select {
	case <-s.done:
		t.Errorf("zidane-server exited on its own: %v", s.waitErr)
		return
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
		assert.NoError(t, s.waitErr, "zidane-server should exit 0 on SIGTERM")
	case <-time.After(waitTimeout):
		_ = s.cmd.Process.Kill()
		<-s.done
		t.Errorf("zidane-server did not exit within %s of SIGTERM", waitTimeout)
	}
}

func (s *serverProc) url() string { return "ws://" + s.addr + "/" }

// mintToken runs `zidane-server token create` against the server's database.
func (s *serverProc) mintToken(name, scope string) string {
	t := s.t
	t.Helper()
	args := []string{"token", "create", "--name", name, "--scope", scope}
	if s.opts.dbURL != "" {
		args = append(args, "--database-url", s.opts.dbURL)
	} else {
		args = append(args, "--data-dir", s.opts.dataDir)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, serverBin, args...)
	cmd.Env = env(s.opts.noDBEnv)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	require.NoError(t, cmd.Run(), "token create: %s", errb.String())
	tok := strings.TrimSpace(out.String())
	require.True(t, strings.HasPrefix(tok, "zds_"), "token %q", tok)
	require.NotContains(t, tok, "\n")
	return tok
}

// ---------------------------------------------------------------------------------------------
// Raw JSON-RPC over WebSocket

type rpcError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data"`
}

type frame struct {
	Raw    []byte
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  *rpcError       `json:"error"`
}

type wsConn struct {
	t       *testing.T
	ws      *websocket.Conn
	frames  chan []byte
	backlog [][]byte
	nextID  int
	readErr error // written by the reader goroutine before it closes frames: read it only after that

	mu      sync.Mutex
	methods map[string]string // request id → method, for the contract check of answers
}

// contract validates, strictly against the schema, every result, signal and error the server
// sends on every test connection (a member the schema lacks, or a missing required one, fails).
var contract = func() *protocol.Contract {
	c, err := protocol.NewContract()
	if err != nil {
		panic(err)
	}
	return c
}()

func (c *wsConn) checkContract(b []byte) {
	err := contract.CheckFrame(b, func(id json.RawMessage) string {
		c.mu.Lock()
		defer c.mu.Unlock()
		m := c.methods[string(id)]
		delete(c.methods, string(id))
		return m
	})
	if err != nil {
		c.t.Errorf("contract: %v", err)
	}
}

func dialOpts(tok string) *websocket.DialOptions {
	return &websocket.DialOptions{Subprotocols: []string{"zidane", "zidane.bearer." + tok}}
}

func dial(t *testing.T, s *serverProc, tok string) *wsConn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ws, resp, err := websocket.Dial(ctx, s.url(), dialOpts(tok))
	require.NoError(t, err)
	require.Equal(t, http.StatusSwitchingProtocols, resp.StatusCode)
	return wrap(t, ws)
}

func wrap(t *testing.T, ws *websocket.Conn) *wsConn {
	ws.SetReadLimit(32 << 20)
	c := &wsConn{t: t, ws: ws, frames: make(chan []byte, 4096), nextID: 100, methods: map[string]string{}}
	go func() {
		defer close(c.frames)
		for {
			_, b, err := ws.Read(context.Background())
			if err != nil {
				c.readErr = err
				return
			}
			c.checkContract(b)
			c.frames <- b
		}
	}()
	t.Cleanup(func() { _ = ws.CloseNow() })
	return c
}

func (c *wsConn) sendRaw(s string) {
	c.t.Helper()
	var req struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	if json.Unmarshal([]byte(s), &req) == nil && req.ID != nil {
		c.mu.Lock()
		c.methods[string(req.ID)] = req.Method
		c.mu.Unlock()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(c.t, c.ws.Write(ctx, websocket.MessageText, []byte(s)))
}

func (c *wsConn) send(v any) {
	c.t.Helper()
	b, err := json.Marshal(v)
	require.NoError(c.t, err)
	c.sendRaw(string(b))
}

func parseFrame(t *testing.T, b []byte) frame {
	t.Helper()
	var f frame
	require.NoError(t, json.Unmarshal(b, &f), "frame %s", b)
	f.Raw = b
	return f
}

// next returns the next frame (held ones first), failing the test after d.
func (c *wsConn) next(d time.Duration) frame {
	c.t.Helper()
	if len(c.backlog) > 0 {
		b := c.backlog[0]
		c.backlog = c.backlog[1:]
		return parseFrame(c.t, b)
	}
	select {
	case b, ok := <-c.frames:
		if !ok {
			c.t.Fatalf("connection closed while waiting for a frame: %v", c.readErr)
		}
		return parseFrame(c.t, b)
	case <-time.After(d):
		c.t.Fatalf("no frame within %s", d)
	}
	return frame{}
}

// callID sends a request with the given id and waits for its answer; frames in between are held
// for next.
func (c *wsConn) callID(id int, method string, params any) frame {
	c.t.Helper()
	req := map[string]any{"jsonrpc": "2.0", "id": id, "method": method}
	if params != nil {
		req["params"] = params
	}
	c.send(req)
	want := strconv.Itoa(id)
	var held [][]byte
	deadline := time.After(waitTimeout)
	for {
		var b []byte
		select {
		case x, ok := <-c.frames:
			if !ok {
				c.t.Fatalf("connection closed while waiting for the answer to %s: %v", method, c.readErr)
			}
			b = x
		case <-deadline:
			c.t.Fatalf("no answer to %s within %s", method, waitTimeout)
		}
		f := parseFrame(c.t, b)
		if string(f.ID) == want && f.Method == "" {
			c.backlog = append(c.backlog, held...)
			return f
		}
		held = append(held, b)
	}
}

func (c *wsConn) call(method string, params any) frame {
	c.t.Helper()
	c.nextID++
	return c.callID(c.nextID, method, params)
}

// result calls and decodes a successful result into out (may be nil); it returns the raw result.
func (c *wsConn) result(method string, params any, out any) json.RawMessage {
	c.t.Helper()
	f := c.call(method, params)
	require.Nil(c.t, f.Error, "%s failed: %s", method, f.Raw)
	require.NotEmpty(c.t, f.Result, "%s: %s", method, f.Raw)
	if out != nil {
		require.NoError(c.t, json.Unmarshal(f.Result, out), "%s: %s", method, f.Result)
	}
	return f.Result
}

func (c *wsConn) callErr(method string, params any) *rpcError {
	c.t.Helper()
	f := c.call(method, params)
	require.NotNil(c.t, f.Error, "%s should fail: %s", method, f.Raw)
	require.Empty(c.t, f.Result)
	return f.Error
}

type helloResult struct {
	ProtocolVersion           int      `json:"protocolVersion"`
	NegotiatedProtocolVersion int      `json:"negotiatedProtocolVersion"`
	HostKind                  string   `json:"hostKind"`
	HostID                    string   `json:"hostId"`
	SignalEpoch               string   `json:"signalEpoch"`
	Methods                   []string `json:"methods"`
}

func (c *wsConn) hello() helloResult {
	c.t.Helper()
	var h helloResult
	c.result("ipc.hello", map[string]any{"protocolVersion": protoVersion, "appVersion": "e2e", "pid": os.Getpid()}, &h)
	return h
}

// signal is one ipc.signal's params.
type signal struct {
	Raw       json.RawMessage
	Kind      string          `json:"kind"`
	SessionID string          `json:"sessionId"`
	RunID     string          `json:"runId"`
	OK        *bool           `json:"ok"`
	Seq       *int64          `json:"$seq"`
	Event     json.RawMessage `json:"event"`
	Usage     *struct {
		Input   *int64  `json:"input"`
		Output  *int64  `json:"output"`
		ModelID *string `json:"modelId"`
	} `json:"usage"`
}

func (s signal) eventKind() string {
	var e struct {
		Kind string `json:"kind"`
	}
	_ = json.Unmarshal(s.Event, &e)
	return e.Kind
}

// firstKey returns the first member name of a JSON object.
func firstKey(t *testing.T, obj json.RawMessage) string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(obj))
	tok, err := dec.Token()
	require.NoError(t, err)
	require.Equal(t, json.Delim('{'), tok)
	k, err := dec.Token()
	require.NoError(t, err)
	return k.(string)
}

// collectRun reads ipc.signal frames until run:end of runID; it returns them in wire order.
func (c *wsConn) collectRun(runID string) []signal {
	c.t.Helper()
	var out []signal
	deadline := time.Now().Add(waitTimeout)
	for {
		f := c.next(time.Until(deadline))
		if f.Method != "ipc.signal" {
			c.t.Fatalf("unexpected frame while collecting signals: %s", f.Raw)
		}
		var s signal
		require.NoError(c.t, json.Unmarshal(f.Params, &s))
		s.Raw = f.Params
		assert.Equal(c.t, "kind", firstKey(c.t, f.Params), "kind must be the first member: %s", f.Params)
		out = append(out, s)
		if s.Kind == "run:end" && s.RunID == runID {
			return out
		}
	}
}

func createSession(t *testing.T, c *wsConn) (id, cwd string) {
	t.Helper()
	var sess struct {
		ID  string `json:"id"`
		Cwd string `json:"cwd"`
	}
	c.result("sessions.create", map[string]any{"cwd": ""}, &sess)
	require.Regexp(t, uuidRE, sess.ID)
	return sess.ID, sess.Cwd
}

func sendPrompt(t *testing.T, c *wsConn, sid, prompt string) string {
	t.Helper()
	var r struct {
		RunID string `json:"runId"`
	}
	c.result("chat.send", map[string]any{"sessionId": sid, "prompt": prompt}, &r)
	require.Regexp(t, uuidRE, r.RunID)
	return r.RunID
}

// ---------------------------------------------------------------------------------------------
// 1. HTTP on the same port

func upgradeReq(t *testing.T, s *serverProc, hdr map[string]string) (int, string, http.Header) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://"+s.addr+"/", nil)
	require.NoError(t, err)
	req.Header.Set("Upgrade", "websocket")
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
	req.Header.Set("Sec-WebSocket-Version", "13")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

func TestHTTP(t *testing.T) {
	s := startServer(t, serverOpts{dbURL: storetest.URL(t)})
	tok := s.mintToken("http", "chat")
	hc := &http.Client{Timeout: 5 * time.Second}

	resp, err := hc.Get("http://" + s.addr + "/healthz")
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, 200, resp.StatusCode)
	assert.Equal(t, "ok", string(b))

	// http.Error appends "\n"; the seed shows the body without it. Compare the text.
	body := func(s string) string { return s } // refusal bodies are exact: no trailing newline

	code, bd, _ := upgradeReq(t, s, nil)
	assert.Equal(t, 401, code, "no token")
	assert.Equal(t, "Unauthorized", body(bd))

	code, bd, _ = upgradeReq(t, s, map[string]string{"Sec-WebSocket-Protocol": "zidane, zidane.bearer.zds_unknown"})
	assert.Equal(t, 401, code, "unknown token")
	assert.Equal(t, "Unauthorized", body(bd))

	code, bd, _ = upgradeReq(t, s, map[string]string{"Origin": "https://evil.example", "Sec-WebSocket-Protocol": "zidane, zidane.bearer." + tok})
	assert.Equal(t, 403, code, "browser origin")
	assert.Equal(t, "Forbidden: origin not allowed", body(bd))

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// Authorization: Bearer.
	ws, r, err := websocket.Dial(ctx, s.url(), &websocket.DialOptions{
		HTTPHeader: http.Header{"Authorization": {"Bearer " + tok}}, Subprotocols: []string{"zidane"},
	})
	require.NoError(t, err)
	assert.Equal(t, 101, r.StatusCode)
	assert.Equal(t, "zidane", ws.Subprotocol())
	ws.CloseNow()
	// Bearer without any subprotocol offered: still accepted.
	ws, r, err = websocket.Dial(ctx, s.url(), &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + tok}}})
	require.NoError(t, err)
	assert.Equal(t, 101, r.StatusCode)
	ws.CloseNow()
	// Subprotocols.
	ws, r, err = websocket.Dial(ctx, s.url(), dialOpts(tok))
	require.NoError(t, err)
	assert.Equal(t, 101, r.StatusCode)
	assert.Equal(t, "zidane", ws.Subprotocol())
	assert.Equal(t, []string{"zidane"}, r.Header.Values("Sec-WebSocket-Protocol"))
	for k, vs := range r.Header {
		for _, v := range vs {
			assert.NotContains(t, v, tok, "header %s echoes the token", k)
		}
	}
	c := wrap(t, ws)
	h := c.hello()
	assert.Equal(t, protoVersion, h.NegotiatedProtocolVersion)

	resp, err = hc.Get("http://" + s.addr + "/protocol.json")
	require.NoError(t, err)
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, 200, resp.StatusCode)
	var pj map[string]any
	require.NoError(t, json.Unmarshal(b, &pj), "protocol.json: %.200s", b)
	assert.EqualValues(t, protoVersion, pj["protocolVersion"])

	// The SSE protocol's OpenAPI document, like /protocol.json without a token (issue 26).
	resp, err = hc.Get("http://" + s.addr + "/zidane/sse/openapi.json")
	require.NoError(t, err)
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, 200, resp.StatusCode)
	var oa map[string]any
	require.NoError(t, json.Unmarshal(b, &oa), "openapi.json: %.200s", b)
	assert.Equal(t, "3.1.0", oa["openapi"])

	resp, err = hc.Get("http://" + s.addr + "/version")
	require.NoError(t, err)
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, 200, resp.StatusCode)
	var ver map[string]any
	require.NoError(t, json.Unmarshal(b, &ver), "/version: %s", b)
	assert.EqualValues(t, protoVersion, ver["protocolVersion"])
	assert.NotEmpty(t, ver["appVersion"])
}

// ---------------------------------------------------------------------------------------------
// 2. Before hello; 3. hello

func TestHandshake(t *testing.T) {
	s := startServer(t, serverOpts{dbURL: storetest.URL(t)})
	tok := s.mintToken("hs", "chat")

	t.Run("before hello", func(t *testing.T) {
		c := dial(t, s, tok)
		f := c.callID(2, "sessions.list", map[string]any{})
		require.NotNil(t, f.Error, "%s", f.Raw)
		assert.Equal(t, -32011, f.Error.Code)
		assert.Equal(t, "Handshake required: send ipc.hello first.", f.Error.Message)
		assert.Equal(t, "2", string(f.ID))

		f = c.call("$/ping", map[string]any{})
		assert.Nil(t, f.Error, "%s", f.Raw)
		assert.NotEmpty(t, f.Result)
		var sd struct {
			Accepted *bool `json:"accepted"`
		}
		c.result("daemon.shutdown", map[string]any{}, &sd)
		if assert.NotNil(t, sd.Accepted) {
			assert.False(t, *sd.Accepted, "daemon.shutdown does nothing on a server")
		}
		var info struct {
			HostID   string `json:"hostId"`
			HostKind string `json:"hostKind"`
			Proto    int    `json:"protocolVersion"`
		}
		c.result("daemon.info", map[string]any{}, &info)
		assert.Equal(t, "server", info.HostKind)
		assert.Regexp(t, uuidRE, info.HostID)
		assert.Equal(t, protoVersion, info.Proto)

		// A notification gets no answer, even the one that would be -32011.
		c.sendRaw(`{"jsonrpc":"2.0","method":"sessions.list","params":{}}`)
		c.sendRaw(`{"jsonrpc":"2.0","method":"$/ping","params":{}}`)
		c.sendRaw(`{"jsonrpc":"2.0","id":77,"method":"$/ping","params":{}}`)
		f = c.next(5 * time.Second)
		assert.Equal(t, "77", string(f.ID), "the notifications must not be answered: %s", f.Raw)
	})

	t.Run("hello", func(t *testing.T) {
		c := dial(t, s, tok)
		f := c.callID(3, "ipc.hello", map[string]any{"protocolVersion": protoVersion, "appVersion": "e2e", "pid": 4242})
		require.Nil(t, f.Error, "%s", f.Raw)
		var h helloResult
		require.NoError(t, json.Unmarshal(f.Result, &h))
		assert.Equal(t, protoVersion, h.ProtocolVersion)
		assert.Equal(t, protoVersion, h.NegotiatedProtocolVersion)
		assert.Equal(t, "server", h.HostKind)
		assert.Regexp(t, uuidRE, h.SignalEpoch)
		assert.Regexp(t, uuidRE, h.HostID)
		for _, m := range []string{"chat.send", "sessions.create", "sessions.list", "sessions.loadEvents", "sessions.resume", "ipc.hello", "$/ping"} {
			assert.Contains(t, h.Methods, m)
		}
		assert.True(t, sort.StringsAreSorted(h.Methods), "methods sorted: %v", h.Methods)
		assert.NotContains(t, h.Methods, "machine.register", "a chat connection cannot call it")

		// Second hello on the same connection.
		f = c.call("ipc.hello", map[string]any{"protocolVersion": protoVersion})
		require.NotNil(t, f.Error, "second hello must fail: %s", f.Raw)
		assert.Empty(t, f.Result)

		// After hello, calls work.
		var list struct {
			Sessions []json.RawMessage `json:"sessions"`
		}
		c.result("sessions.list", map[string]any{}, &list)
		assert.NotNil(t, list.Sessions)
	})

	t.Run("machine token", func(t *testing.T) {
		c := dial(t, s, s.mintToken("hs-machine", "machine"))
		h := c.hello()
		assert.Contains(t, h.Methods, "machine.register")
		assert.NotContains(t, h.Methods, "chat.send", "a machine connection cannot call it")
		assert.True(t, sort.StringsAreSorted(h.Methods), "methods sorted: %v", h.Methods)
		e := c.callErr("sessions.list", map[string]any{})
		assert.Equal(t, -32040, e.Code)
	})

	t.Run("version mismatch", func(t *testing.T) {
		c := dial(t, s, tok)
		f := c.callID(2, "ipc.hello", map[string]any{"protocolVersion": 12, "appVersion": "docs", "pid": 4242})
		require.NotNil(t, f.Error, "%s", f.Raw)
		assert.Equal(t, -32010, f.Error.Code)
		assert.Equal(t, "Protocol version mismatch: the server speaks v16, the client v12. Upgrade the client.", f.Error.Message)
		var data struct {
			Daemon *struct {
				HostID   string `json:"hostId"`
				HostKind string `json:"hostKind"`
				Proto    int    `json:"protocolVersion"`
			} `json:"daemon"`
		}
		require.NoError(t, json.Unmarshal(f.Error.Data, &data), "%s", f.Raw)
		require.NotNil(t, data.Daemon, "data.daemon: %s", f.Raw)
		assert.Regexp(t, uuidRE, data.Daemon.HostID)
		assert.Equal(t, "server", data.Daemon.HostKind)
		assert.Equal(t, protoVersion, data.Daemon.Proto)
		// Still before the handshake.
		e := c.callErr("sessions.list", map[string]any{})
		assert.Equal(t, -32011, e.Code)
	})
}

// ---------------------------------------------------------------------------------------------
// 4. Errors worded as the seed

func TestErrors(t *testing.T) {
	s := startServer(t, serverOpts{dbURL: storetest.URL(t)})
	tok := s.mintToken("errs", "chat")
	c := dial(t, s, tok)
	c.hello()

	f := c.callID(11, "sessions.nope", map[string]any{})
	require.NotNil(t, f.Error, "%s", f.Raw)
	assert.Equal(t, -32601, f.Error.Code)
	assert.Equal(t, `Unknown method "sessions.nope".`, f.Error.Message)

	f = c.callID(12, "sessions.list", []any{})
	require.NotNil(t, f.Error, "%s", f.Raw)
	assert.Equal(t, -32602, f.Error.Code)
	assert.Equal(t, "params must be an object.", f.Error.Message)

	f = c.callID(13, "chat.send", map[string]any{"sessionId": "no-such-session", "prompt": "Say hello."})
	require.NotNil(t, f.Error, "%s", f.Raw)
	assert.Equal(t, -32014, f.Error.Code)
	assert.Equal(t, `Session "no-such-session" not found. Create the session before sending a prompt.`, f.Error.Message)

	f = c.callID(15, "machine.register", map[string]any{"name": "box"})
	require.NotNil(t, f.Error, "%s", f.Raw)
	assert.Equal(t, -32040, f.Error.Code)
	assert.Equal(t, `"machine.register" needs a machine connection (a machine-scoped token); this is a client connection.`, f.Error.Message)

	// Parse error: id null, present.
	c.sendRaw(`{"jsonrpc":"2.0","id":14,"method":`)
	f = c.next(5 * time.Second)
	require.NotNil(t, f.Error, "%s", f.Raw)
	assert.Equal(t, -32700, f.Error.Code)
	assert.Contains(t, string(f.Raw), `"id":null`)
	assert.Equal(t, "null", string(f.ID))

	// A notification with an unknown method gets no answer.
	c.sendRaw(`{"jsonrpc":"2.0","method":"sessions.nope","params":{}}`)
	c.sendRaw(`{"jsonrpc":"2.0","id":15,"method":"$/ping","params":{}}`)
	f = c.next(5 * time.Second)
	assert.Equal(t, "15", string(f.ID), "the notification must not be answered: %s", f.Raw)
	assert.Nil(t, f.Error)
}

// ---------------------------------------------------------------------------------------------
// 5. Chat signals on two connections; 7. resume

func assertRunSignals(t *testing.T, sigs []signal, sid, runID string, firstSeq int64) {
	t.Helper()
	var sess []signal
	presence := 0
	for _, s := range sigs {
		if spec := protocol.LookupSignal(s.Kind); spec != nil && spec.Ephemeral && s.Kind != "presence:changed" {
			// A passing state (session:updated, stream:progress): no $seq, outside the sequence.
			assert.Nil(t, s.Seq, "%s carries no $seq: %s", s.Kind, s.Raw)
			assert.NotContains(t, string(s.Raw), `"$seq"`)
			continue
		}
		if s.Kind == "presence:changed" {
			presence++
			assert.Nil(t, s.Seq, "presence:changed carries no $seq: %s", s.Raw)
			assert.NotContains(t, string(s.Raw), `"$seq"`)
			continue
		}
		require.Equal(t, sid, s.SessionID, "session signal: %s", s.Raw)
		sess = append(sess, s)
	}
	assert.Positive(t, presence, "presence:changed arrives during a run")
	for i, s := range sess {
		require.NotNil(t, s.Seq, "session signal without $seq: %s", s.Raw)
		assert.Equal(t, firstSeq+int64(i), *s.Seq, "$seq without gaps at %d: %s", i, s.Raw)
	}
	names := make([]string, len(sess))
	for i, s := range sess {
		names[i] = s.Kind
		if s.Kind == "event" {
			names[i] = "event:" + s.eventKind()
		}
	}
	require.GreaterOrEqual(t, len(names), 6, "%v", names)
	assert.Equal(t, "run:start", names[0], "%v", names)
	assert.Equal(t, runID, sess[0].RunID)
	// The seed's run order: run:start, plans:snapshot, the prompt.
	assert.Equal(t, []string{"run:start", "plans:snapshot", "event:user-prompt"}, names[:3], "%v", names)
	last := sess[len(sess)-1]
	assert.Equal(t, "run:end", last.Kind)
	require.NotNil(t, last.OK)
	assert.True(t, *last.OK, "run:end ok: %s", last.Raw)
	assert.Equal(t, "event:run-summary", names[len(names)-2], "%v", names)

	idx := func(name string, from int) int {
		for i := from; i < len(names); i++ {
			if names[i] == name {
				return i
			}
		}
		return -1
	}
	md := idx("event:markdown", 3)
	tool := idx("event:tool", 3)
	res := idx("event:tool-result", 3)
	te := idx("turn:end", 3)
	// The model turn ends (turn:end, with its usage) when its stream ends; the tool runs after it.
	require.True(t, md > 1 && tool > md && te > tool && res > te, "order markdown < tool < turn:end < tool-result: %v", names)
	// The markdown arrives as several streamed pieces.
	pieces := 0
	for i := 2; i < tool; i++ {
		if names[i] == "event:markdown" {
			pieces++
			var e struct {
				Streaming bool `json:"streaming"`
			}
			require.NoError(t, json.Unmarshal(sess[i].Event, &e))
			assert.True(t, e.Streaming, "%s", sess[i].Raw)
		}
	}
	assert.GreaterOrEqual(t, pieces, 2, "streamed pieces: %v", names)
	turnEnds := 0
	for _, s := range sess {
		if s.Kind == "turn:end" {
			turnEnds++
			require.NotNil(t, s.Usage, "%s", s.Raw)
			assert.NotNil(t, s.Usage.Input, "%s", s.Raw)
			assert.NotNil(t, s.Usage.Output, "%s", s.Raw)
			if assert.NotNil(t, s.Usage.ModelID, "%s", s.Raw) {
				assert.NotEmpty(t, *s.Usage.ModelID)
			}
		}
	}
	assert.GreaterOrEqual(t, turnEnds, 1)
	assert.Less(t, idx("turn:end", 2), len(names)-2)
}

func TestChatSignalsAndResume(t *testing.T) {
	s := startServer(t, serverOpts{dbURL: storetest.URL(t)})
	tok := s.mintToken("chat", "chat")
	a := dial(t, s, tok)
	b := dial(t, s, tok)
	idle := dial(t, s, tok) // never says hello: gets no signals
	h := a.hello()
	hb := b.hello()
	assert.Equal(t, h.SignalEpoch, hb.SignalEpoch)

	sid, cwd := createSession(t, a)
	assert.Equal(t, s.opts.root, cwd, "cwd \"\" is the first workspace root")

	runID := sendPrompt(t, a, sid, "Say hello.")
	sa := a.collectRun(runID)
	sb := b.collectRun(runID)
	assertRunSignals(t, sa, sid, runID, 1)
	assertRunSignals(t, sb, sid, runID, 1)

	seqs := func(sigs []signal) []string {
		var out []string
		for _, s := range sigs {
			if s.Seq != nil {
				out = append(out, string(s.Raw))
			}
		}
		return out
	}
	assert.Equal(t, seqs(sa), seqs(sb), "both connections get the same session signals, byte for byte")
	lastSeq := *sa[len(sa)-1].Seq
	require.Greater(t, lastSeq, int64(4))

	// The connection without a handshake got no signal: its next frame answers its ping.
	idle.sendRaw(`{"jsonrpc":"2.0","id":1,"method":"$/ping","params":{}}`)
	f := idle.next(5 * time.Second)
	assert.Equal(t, "1", string(f.ID), "a connection before ipc.hello gets no signals: %s", f.Raw)

	// 7. resume
	var rr resumeResult
	a.result("sessions.resume", map[string]any{"sessionId": sid, "epoch": h.SignalEpoch, "afterSeq": 3}, &rr)
	require.True(t, rr.OK)
	require.Len(t, rr.Signals, int(lastSeq-3))
	live := map[int64]string{}
	for _, x := range sa {
		if x.Seq != nil {
			live[*x.Seq] = strings.Replace(string(x.Raw), `,"$seq":`+strconv.FormatInt(*x.Seq, 10), "", 1)
		}
	}
	for i, x := range rr.Signals {
		assert.Equal(t, int64(4+i), x.Seq)
		assert.NotContains(t, string(x.Signal), `"$seq"`)
		assert.Equal(t, "kind", firstKey(t, x.Signal))
		assert.JSONEq(t, live[x.Seq], string(x.Signal), "replayed seq %d equals the live signal", x.Seq)
	}

	raw := a.result("sessions.resume", map[string]any{"sessionId": sid, "epoch": h.SignalEpoch, "afterSeq": lastSeq}, nil)
	assert.JSONEq(t, `{"ok":true,"signals":[]}`, string(raw))

	raw = a.result("sessions.resume", map[string]any{"sessionId": sid, "epoch": "other", "afterSeq": 3}, nil)
	assert.JSONEq(t, `{"ok":false,"reason":"epoch"}`, string(raw))

	e := a.callErr("sessions.resume", map[string]any{"sessionId": sid, "epoch": h.SignalEpoch, "afterSeq": lastSeq + 5})
	assert.Equal(t, -32602, e.Code)

	// A second prompt continues $seq without a gap.
	run2 := sendPrompt(t, b, sid, "Again.")
	s2a := a.collectRun(run2)
	s2b := b.collectRun(run2)
	assertRunSignals(t, s2a, sid, run2, lastSeq+1)
	assertRunSignals(t, s2b, sid, run2, lastSeq+1)
}

// ---------------------------------------------------------------------------------------------
// 6. loadEvents paging

type page struct {
	Events []json.RawMessage `json:"events"`
	Start  *int              `json:"start"`
	Exact  bool              `json:"exact"`
	Cursor *int              `json:"cursor"`
}

func eventKinds(t *testing.T, evs []json.RawMessage) []string {
	t.Helper()
	out := make([]string, len(evs))
	for i, e := range evs {
		var k struct {
			Kind string `json:"kind"`
		}
		require.NoError(t, json.Unmarshal(e, &k))
		out[i] = k.Kind
	}
	return out
}

func turnOf(t *testing.T, e json.RawMessage) string {
	var k struct {
		TurnID string `json:"turnId"`
	}
	require.NoError(t, json.Unmarshal(e, &k))
	return k.TurnID
}

func TestLoadEventsPaging(t *testing.T) {
	s := startServer(t, serverOpts{dbURL: storetest.URL(t)})
	tok := s.mintToken("page", "chat")
	c := dial(t, s, tok)
	c.hello()
	sid, _ := createSession(t, c)
	run1 := sendPrompt(t, c, sid, "Say hello.")
	c.collectRun(run1)
	run2 := sendPrompt(t, c, sid, "Say it again.")
	c.collectRun(run2)

	var all page
	raw := c.result("sessions.loadEvents", map[string]any{"sessionId": sid}, &all)
	assert.NotContains(t, string(raw), `"cursor"`)
	require.NotNil(t, all.Start)
	assert.Equal(t, 0, *all.Start)
	assert.True(t, all.Exact)
	oneRun := []string{"user-prompt", "markdown", "tool", "tool-result", "markdown", "run-summary"}
	assert.Equal(t, append(append([]string{}, oneRun...), oneRun...), eventKinds(t, all.Events))
	for _, e := range all.Events {
		var m struct {
			Kind      string `json:"kind"`
			Text      string `json:"text"`
			Streaming *bool  `json:"streaming"`
		}
		require.NoError(t, json.Unmarshal(e, &m))
		if m.Kind == "markdown" {
			if assert.NotNil(t, m.Streaming, "%s", e) {
				assert.False(t, *m.Streaming, "merged markdown has streaming:false: %s", e)
			}
		}
	}
	var md0 struct {
		Text string `json:"text"`
	}
	require.NoError(t, json.Unmarshal(all.Events[1], &md0))
	assert.Equal(t, "Hello! Let me look that up.", md0.Text)
	var up struct {
		Text string `json:"text"`
	}
	require.NoError(t, json.Unmarshal(all.Events[6], &up))
	assert.Equal(t, "Say it again.", up.Text)

	// Turns are runs of one turnId.
	var turns [][]json.RawMessage
	for i, e := range all.Events {
		if i == 0 || turnOf(t, e) != turnOf(t, all.Events[i-1]) {
			turns = append(turns, nil)
		}
		turns[len(turns)-1] = append(turns[len(turns)-1], e)
	}
	require.GreaterOrEqual(t, len(turns), 4, "several turns")
	startOf := func(k int) int {
		n := 0
		for _, tr := range turns[:k] {
			n += len(tr)
		}
		return n
	}
	eq := func(want []json.RawMessage, got []json.RawMessage) {
		t.Helper()
		require.Len(t, got, len(want))
		for i := range want {
			assert.JSONEq(t, string(want[i]), string(got[i]))
		}
	}

	// The last turn.
	n := len(turns)
	var p page
	c.result("sessions.loadEvents", map[string]any{"sessionId": sid, "limit": 1}, &p)
	eq(turns[n-1], p.Events)
	require.NotNil(t, p.Start)
	assert.Equal(t, startOf(n-1), *p.Start)
	require.NotNil(t, p.Cursor, "a page without the first turn has a cursor")
	assert.True(t, p.Exact)

	// Walk back one turn at a time to the first.
	for k := n - 2; k >= 0; k-- {
		before := *p.Cursor
		p = page{}
		raw := c.result("sessions.loadEvents", map[string]any{"sessionId": sid, "limit": 1, "before": before}, &p)
		eq(turns[k], p.Events)
		require.NotNil(t, p.Start)
		assert.Equal(t, startOf(k), *p.Start, "start of turn %d", k)
		if k > 0 {
			require.NotNil(t, p.Cursor, "page of turn %d has a cursor: %s", k, raw)
		} else {
			assert.Nil(t, p.Cursor, "the page holding the first turn has no cursor: %s", raw)
			assert.NotContains(t, string(raw), `"cursor"`)
		}
	}

	// A limit covering everything: the whole transcript, no cursor.
	p = page{}
	raw = c.result("sessions.loadEvents", map[string]any{"sessionId": sid, "limit": 1000}, &p)
	eq(all.Events, p.Events)
	assert.NotContains(t, string(raw), `"cursor"`)
}

// ---------------------------------------------------------------------------------------------
// 8. Restart on the same database

func TestRestart(t *testing.T) {
	db := storetest.URL(t)
	root, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	data := t.TempDir()
	s1 := startServer(t, serverOpts{dbURL: db, root: root, dataDir: data})
	tok := s1.mintToken("restart", "chat")
	c := dial(t, s1, tok)
	h1 := c.hello()
	sid, _ := createSession(t, c)
	run := sendPrompt(t, c, sid, "Say hello.")
	c.collectRun(run)
	var p1 struct {
		Events json.RawMessage `json:"events"`
	}
	c.result("sessions.loadEvents", map[string]any{"sessionId": sid}, &p1)
	_ = c.ws.Close(websocket.StatusNormalClosure, "")
	s1.stop()
	require.False(t, t.Failed(), "first server must stop cleanly")

	s2 := startServer(t, serverOpts{dbURL: db, root: root, dataDir: data})
	c2 := dial(t, s2, tok)
	h2 := c2.hello()
	assert.Equal(t, h1.HostID, h2.HostID, "hostId survives a restart")
	assert.NotEqual(t, h1.SignalEpoch, h2.SignalEpoch, "signalEpoch names the process")

	var list struct {
		Sessions []struct {
			ID string `json:"id"`
		} `json:"sessions"`
	}
	c2.result("sessions.list", map[string]any{}, &list)
	var ids []string
	for _, x := range list.Sessions {
		ids = append(ids, x.ID)
	}
	assert.Contains(t, ids, sid)

	var p2 struct {
		Events json.RawMessage `json:"events"`
	}
	c2.result("sessions.loadEvents", map[string]any{"sessionId": sid}, &p2)
	assert.Equal(t, string(p1.Events), string(p2.Events), "transcript is byte-identical after restart")

	raw := c2.result("sessions.resume", map[string]any{"sessionId": sid, "epoch": h1.SignalEpoch, "afterSeq": 3}, nil)
	assert.JSONEq(t, `{"ok":false,"reason":"epoch"}`, string(raw))
}

// ---------------------------------------------------------------------------------------------
// 9. The headless CLI

func runCLI(t *testing.T, s *serverProc, tok string, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, cliBin, args...)
	cmd.Env = env(false, "ZIDANE_URL="+s.url(), "ZIDANE_TOKEN="+tok)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	require.NoError(t, ctx.Err(), "zidane timed out; stderr: %s", errb.String())
	code := 0
	if err != nil {
		var ee *exec.ExitError
		require.True(t, errors.As(err, &ee), "run zidane: %v", err)
		code = ee.ExitCode()
	}
	return code, out.String(), errb.String()
}

func TestCLI(t *testing.T) {
	s := startServer(t, serverOpts{dbURL: storetest.URL(t)})
	tok := s.mintToken("cli", "chat")

	code, out, errs := runCLI(t, s, tok, "-c", "Say hello.")
	assert.Equal(t, 0, code, "stderr: %s", errs)
	assert.Contains(t, out, "Hello! Let me look that up.")
	assert.Contains(t, out, "The lookup found:")

	code, out, errs = runCLI(t, s, tok, "-c", "Say hello.", "--json")
	assert.Equal(t, 0, code, "stderr: %s", errs)
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	require.NotEmpty(t, lines)
	kinds := map[string]bool{}
	for _, l := range lines {
		var m map[string]json.RawMessage
		if !assert.NoError(t, json.Unmarshal([]byte(l), &m), "line %q", l) {
			continue
		}
		k, ok := m["kind"]
		if assert.True(t, ok, "line without kind: %s", l) {
			var ks string
			_ = json.Unmarshal(k, &ks)
			kinds[ks] = true
		}
	}
	assert.True(t, kinds["run:start"] && kinds["event"] && kinds["run:end"], "kinds %v", kinds)

	code, out, errs = runCLI(t, s, "zds_bad", "-c", "Say hello.")
	assert.NotEqual(t, 0, code)
	assert.Contains(t, errs, "401")
	assert.Empty(t, out)
}

// ---------------------------------------------------------------------------------------------
// 10. The managed default

func TestManagedDefault(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a managed Postgres")
	}
	data, err := os.MkdirTemp("/tmp", "zd")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(data) })
	s := startServer(t, serverOpts{dataDir: data, root: "-", noDBEnv: true})
	tok := s.mintToken("managed", "chat") // while the server runs
	c := dial(t, s, tok)
	h := c.hello()
	assert.Equal(t, protoVersion, h.NegotiatedProtocolVersion)
	sid, _ := createSession(t, c)
	assert.Regexp(t, uuidRE, sid)
	_ = c.ws.Close(websocket.StatusNormalClosure, "")

	// The managed Postgres runs under the data dir, as an unprivileged user when we are root.
	out, err := exec.Command("pgrep", "-f", data).Output()
	require.NoError(t, err, "pgrep should find the managed postgres under %s", data)
	var pids []string
	for _, pid := range strings.Fields(string(out)) {
		if pid != strconv.Itoa(s.cmd.Process.Pid) { // the server's own command line names the dir
			pids = append(pids, pid)
		}
	}
	require.NotEmpty(t, pids, "a managed postgres runs under %s", data)
	if os.Geteuid() == 0 {
		for _, pid := range pids {
			u, err := exec.Command("ps", "-o", "user=", "-p", pid).Output()
			if err == nil && strings.TrimSpace(string(u)) != "" {
				assert.NotEqual(t, "root", strings.TrimSpace(string(u)), "postgres pid %s runs as root", pid)
			}
		}
	}

	// Local discovery: with no ZIDANE_URL, zidane reads <data-dir>/daemon.json (mode 0600).
	fi, err := os.Stat(filepath.Join(data, "daemon.json"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cli := exec.CommandContext(ctx, cliBin, "-c", "Say hello.")
	cli.Env = env(true, "ZIDANE_SERVER_HOME="+data)
	outb, err := cli.CombinedOutput()
	require.NoError(t, err, "%s", outb)
	assert.Contains(t, string(outb), "The lookup found:")

	s.stop()
	out, _ = exec.Command("pgrep", "-af", data).Output()
	assert.Empty(t, strings.TrimSpace(string(out)), "no process left for the data dir")
	_, err = os.Stat(filepath.Join(data, "daemon.json"))
	assert.True(t, os.IsNotExist(err), "daemon.json is removed on clean exit")
	cli = exec.CommandContext(ctx, cliBin, "-c", "Say hello.")
	cli.Env = env(true, "ZIDANE_SERVER_HOME="+data)
	outb, err = cli.CombinedOutput()
	assert.Error(t, err)
	assert.Contains(t, string(outb), "no running zidane-server found")
}
