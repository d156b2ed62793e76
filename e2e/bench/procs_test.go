// Package bench measures zidane-server from outside, over loopback, against a raw coder/websocket
// baseline measured in the same run (issue "Close to the wire"). Each figure is a benchmark whose
// sub-benchmarks are "<case>/server" and "<case>/<name>-baseline", run back to back; `make bench`
// runs them five times and scripts/benchtable prints the ratios against their targets.
//
// The server is the real binary on a real Postgres; the baseline is this test binary re-executed as
// a raw WebSocket server (raw_test.go). Both run in processes of their own, so CPU time and memory
// are read from /proc for each alike.
package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/zidane-server/zidane/server/store/storetest"
)

var serverBin string

func TestMain(m *testing.M) {
	if os.Getenv("ZIDANE_BENCH_RAW") == "1" {
		rawMain()
		return
	}
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "zidane-bench-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	serverBin = filepath.Join(dir, "zidane-server")
	build := exec.Command("go", "build", "-o", serverBin, "../../cmd/zidane-server")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench: go build:", err)
		return 1
	}
	code := m.Run()
	storetest.Shutdown()
	return code
}

// proc is a subprocess under measurement.
type proc struct {
	cmd  *exec.Cmd
	addr string
	out  bytes.Buffer
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

// cpu is the process's user+system CPU time so far.
func (p *proc) cpu(tb testing.TB) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.pid()))
	if err != nil {
		tb.Fatal(err)
	}
	// Fields after the command name (which is in parentheses and may hold spaces).
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * time.Second / 100 // USER_HZ is 100 on Linux
}

// rssKiB is the process's resident set.
func (p *proc) rssKiB(tb testing.TB) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.pid()))
	if err != nil {
		tb.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "VmRSS:") {
			n, _ := strconv.ParseInt(strings.Fields(line)[1], 10, 64)
			return n
		}
	}
	tb.Fatal("no VmRSS")
	return 0
}

func (p *proc) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		_ = p.cmd.Process.Kill()
		<-done
	}
}

// startRaw starts the baseline server.
func startRaw(tb testing.TB) *proc {
	tb.Helper()
	p := &proc{cmd: exec.Command(os.Args[0], "-test.run=^$")}
	p.cmd.Env = append(os.Environ(), "ZIDANE_BENCH_RAW=1", "GOMAXPROCS="+os.Getenv("GOMAXPROCS"))
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	p.cmd.Stderr = &p.out
	if err := p.cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		tb.Fatalf("raw server: %v: %s", err, p.out.String())
	}
	p.addr = strings.TrimSpace(line)
	tb.Cleanup(p.stop)
	return p
}

// server is the real binary on a fresh database, with a chat and an admin token.
type server struct {
	*proc
	dbURL       string
	chat, admin string
}

func freeAddr(tb testing.TB) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func startServer(tb testing.TB, extra ...string) *server {
	tb.Helper()
	return startServerOn(tb, storetest.URL(tb), tb.TempDir(), extra...)
}

// startServerOn starts a server on the database dbURL with the workspace root root (replicas
// share both).
func startServerOn(tb testing.TB, dbURL, root string, extra ...string) *server {
	tb.Helper()
	s := &server{proc: &proc{addr: freeAddr(tb)}, dbURL: dbURL}
	data := tb.TempDir()
	args := append([]string{"start", "--listen", s.addr, "--data-dir", data, "--database-url", s.dbURL, "--workspace-root", root}, extra...)
	s.cmd = exec.Command(serverBin, args...)
	s.cmd.Env = cleanEnv()
	s.cmd.Stdout, s.cmd.Stderr = io.Discard, &s.out
	if err := s.cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(s.stop)
	deadline := time.Now().Add(45 * time.Second)
	for {
		resp, err := http.Get("http://" + s.addr + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			tb.Fatalf("server not healthy: %v\n%s", err, s.out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	s.chat = s.mint(tb, "chat")
	s.admin = s.mint(tb, "admin")
	return s
}

func cleanEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "ZIDANE_") && !strings.HasPrefix(kv, "DATABASE_URL=") {
			out = append(out, kv)
		}
	}
	return out
}

var mintSeq int

func (s *server) mint(tb testing.TB, scope string) string {
	tb.Helper()
	mintSeq++
	cmd := exec.Command(serverBin, "token", "create", "--name", fmt.Sprintf("bench-%s-%d", scope, mintSeq), "--scope", scope, "--database-url", s.dbURL)
	cmd.Env = cleanEnv()
	out, err := cmd.Output()
	if err != nil {
		tb.Fatalf("token create: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// goroutines reads go_goroutines from the server's /metrics (admin token).
func (s *server) goroutines(tb testing.TB) int { return s.metric(tb, "go_goroutines") }

// fds is the server's open file descriptors, as it counts them itself (process_open_fds): a
// non-dumpable server's /proc/<pid>/fd is root's, unreadable to a non-root user running this.
func (s *server) fds(tb testing.TB) int { return s.metric(tb, "process_open_fds") }

// metric is one unlabelled gauge of the server's /metrics.
func (s *server) metric(tb testing.TB, name string) int {
	req, _ := http.NewRequest("GET", "http://"+s.addr+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+s.admin)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			n, _ := strconv.ParseFloat(v, 64)
			return int(n)
		}
	}
	tb.Fatalf("no %s in /metrics (status %d)", name, resp.StatusCode)
	return 0
}

func rawGoroutines(tb testing.TB, p *proc) int {
	resp, err := http.Get("http://" + p.addr + "/stats")
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	var st struct{ Goroutines int }
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		tb.Fatal(err)
	}
	return st.Goroutines
}

// client is one WebSocket connection used by a figure; it reads in the caller's goroutine.
type client struct {
	ws *websocket.Conn
	id int
}

func dialWS(tb testing.TB, url, token string) *client {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	opts := &websocket.DialOptions{Subprotocols: []string{"zidane"}}
	if token != "" {
		opts.Subprotocols = append(opts.Subprotocols, "zidane.bearer."+token)
	}
	ws, _, err := websocket.Dial(ctx, url, opts)
	if err != nil {
		tb.Fatalf("dial %s: %v", url, err)
	}
	ws.SetReadLimit(64 << 20)
	return &client{ws: ws}
}

func (c *client) write(tb testing.TB, b []byte) {
	if err := c.ws.Write(context.Background(), websocket.MessageText, b); err != nil {
		tb.Fatal(err)
	}
}

func (c *client) read(tb testing.TB) []byte {
	_, b, err := c.ws.Read(context.Background())
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// call sends a request and returns its answer's result, skipping signals.
func (c *client) call(tb testing.TB, method, params string) json.RawMessage {
	tb.Helper()
	c.id++
	c.write(tb, []byte(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`, c.id, method, params)))
	want := []byte(fmt.Sprintf(`"id":%d,`, c.id))
	for {
		b := c.read(tb)
		if bytes.Contains(b, want) && !bytes.Contains(b, []byte(`"method":"ipc.signal"`)) {
			var m struct {
				Result json.RawMessage
				Error  json.RawMessage
			}
			if err := json.Unmarshal(b, &m); err != nil || m.Error != nil {
				tb.Fatalf("%s: %s", method, b)
			}
			return m.Result
		}
	}
}

// callHead is call for a large answer: it checks the answer's head (a result for this request)
// and returns the whole frame undecoded, so that the client's cost is reading it, as the raw
// baseline's is (decoding a 2000-signal answer took the test client about 4 ms, more than
// a third of the resume figure's candidate time).
func (c *client) callHead(tb testing.TB, method, params string) []byte {
	tb.Helper()
	c.id++
	c.write(tb, []byte(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`, c.id, method, params)))
	head := []byte(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":`, c.id))
	for {
		b := c.read(tb)
		if bytes.HasPrefix(b, head) {
			return b
		}
		if !bytes.HasPrefix(b, []byte(`{"jsonrpc":"2.0","method":"ipc.signal"`)) {
			tb.Fatalf("%s: %.300s", method, b)
		}
	}
}

func (s *server) dial(tb testing.TB) *client {
	c := dialWS(tb, "ws://"+s.addr+"/", s.chat)
	c.call(tb, "ipc.hello", `{"protocolVersion":16,"appVersion":"bench"}`)
	return c
}

func (c *client) close() { _ = c.ws.CloseNow() }

// closeAll closes clients in parallel.
func closeAll(cs []*client) {
	var wg sync.WaitGroup
	for _, c := range cs {
		wg.Add(1)
		go func() { defer wg.Done(); c.close() }()
	}
	wg.Wait()
}

// profile starts the server's CPU profile when BENCH_CPUPROFILE names a file, and returns the
// function that stops it and writes the file (GET /debug/pprof/profile with the admin token).
func (s *server) profile(tb testing.TB) func() {
	file := os.Getenv("BENCH_CPUPROFILE")
	if file == "" {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		req, _ := http.NewRequest("GET", "http://"+s.addr+"/debug/pprof/profile?seconds=10", nil)
		req.Header.Set("Authorization", "Bearer "+s.admin)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			tb.Error(err)
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			tb.Errorf("profile: %d %s", resp.StatusCode, b)
			return
		}
		_ = os.WriteFile(file, b, 0o644)
	}()
	return func() { <-done }
}
