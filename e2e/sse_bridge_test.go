package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/zidane-server/zidane/e2e/ssesuite"
	"github.com/zidane-server/zidane/server/store/storetest"
)

// bridgeBuild is the Node bridge (sdk-ts/src/server and what it imports) built once per test
// binary into a temporary folder with sdk-ts's own TypeScript (tsconfig.bridge.json).
var bridgeBuild struct {
	once sync.Once
	dir  string
	err  error
}

// buildBridge compiles the bridge; sdk-ts's node_modules must be installed (scripts/bootstrap.sh).
func buildBridge(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatal("node is not on PATH: the Node bridge's test needs Node 20 (scripts/bootstrap.sh installs it)")
	}
	tsc := filepath.Join("..", "sdk-ts", "node_modules", "typescript", "bin", "tsc")
	if _, err := os.Stat(tsc); err != nil {
		t.Fatalf("%s is missing: run scripts/bootstrap.sh --all (npm ci in sdk-ts)", tsc)
	}
	bridgeBuild.once.Do(func() {
		dir, err := os.MkdirTemp("", "zidane-bridge-")
		if err != nil {
			bridgeBuild.err = err
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		out, err := exec.CommandContext(ctx, "node", tsc, "-p", filepath.Join("..", "sdk-ts", "tsconfig.bridge.json"), "--outDir", dir).CombinedOutput()
		if err != nil {
			bridgeBuild.err = fmt.Errorf("tsc -p sdk-ts/tsconfig.bridge.json: %v\n%s", err, out)
			return
		}
		// The built modules are ES modules: Node reads .js as such below a package.json saying so.
		bridgeBuild.err = os.WriteFile(filepath.Join(dir, "package.json"), []byte(`{"type":"module"}`+"\n"), 0o644)
		bridgeBuild.dir = dir
	})
	require.NoError(t, bridgeBuild.err)
	return bridgeBuild.dir
}

// bridgeProc is sdk-ts/test/sse-bridge-server.mjs: createSseHandler on node:http in front of a
// zidane-server.
type bridgeProc struct {
	addr   string
	cmd    *exec.Cmd
	stderr *syncBuf
	done   chan struct{}
}

// startBridge starts the bridge in front of s with a chat token, serving sessions in cwd, and
// waits until it listens. It is stopped at cleanup unless stop was called.
func startBridge(t *testing.T, s *serverProc, token, cwd string, env ...string) *bridgeProc {
	t.Helper()
	dist := buildBridge(t)
	cmd := exec.Command("node", filepath.Join("..", "sdk-ts", "test", "sse-bridge-server.mjs"))
	cmd.Env = append(os.Environ(), append([]string{
		"ZIDANE_URL=ws://" + s.addr, "ZIDANE_TOKEN=" + token, "BRIDGE_CWD=" + cwd, "BRIDGE_DIST=" + dist,
	}, env...)...)
	b := &bridgeProc{cmd: cmd, stderr: &syncBuf{}, done: make(chan struct{})}
	cmd.Stderr = b.stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default:
			}
		}
	}()
	go func() { _ = cmd.Wait(); close(b.done) }()
	t.Cleanup(func() {
		b.stop()
		if t.Failed() {
			t.Logf("bridge stderr:\n%s", b.stderr.String())
		}
	})
	select {
	case l := <-lines:
		port, ok := strings.CutPrefix(l, "listening ")
		require.True(t, ok, "the bridge's first line: %q (stderr %s)", l, b.stderr.String())
		b.addr = "127.0.0.1:" + port
	case <-b.done:
		t.Fatalf("the bridge exited before it listened: %s", b.stderr.String())
	case <-time.After(45 * time.Second):
		t.Fatalf("the bridge did not listen within 45 s: %s", b.stderr.String())
	}
	return b
}

func (b *bridgeProc) stop() {
	select {
	case <-b.done:
		return
	default:
	}
	_ = b.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-b.done:
	case <-time.After(10 * time.Second):
		_ = b.cmd.Process.Kill()
		<-b.done
	}
}

// TestSSEBridgeConformance runs the SSE protocol's conformance suite (e2e/ssesuite) against the
// Node bridge, createSseHandler of @zidane/sdk/server mounted on node:http with toNodeHandler, in
// front of the real binary (issue 26 item 3): the same cases as TestSSEConformance, with
// authorize refusing a bearer it does not know (401), sessionsFor keeping two users' sessions
// apart, and a restart of the server behind a new bridge answering reset epoch. The stream bound
// case does not apply: the bridge holds one WebSocket for every browser.
func TestSSEBridgeConformance(t *testing.T) {
	db := storetest.URL(t)
	s := startServer(t, serverOpts{dbURL: db, extra: sseFlags})
	bridgeEnv := []string{"BRIDGE_MAX_BODY=262144", "BRIDGE_HEARTBEAT_MS=300", "BRIDGE_STATE=" + filepath.Join(t.TempDir(), "owners.json")}
	b := startBridge(t, s, s.mintToken("bridge", "chat"), s.opts.root, bridgeEnv...)
	var n atomic.Int64
	user := func(name string) http.Header { return http.Header{"Authorization": {"Bearer user-" + name}} }
	ssesuite.Run(t, ssesuite.Target{
		BaseURL: "http://" + b.addr + "/api/chat",
		Headers: func(t *testing.T) http.Header {
			return user(fmt.Sprintf("u%d", n.Add(1)))
		},
		Unauthorized: http.Header{"Authorization": {"Bearer zds_" + strings.Repeat("A", 43)}},
		MaxBody:      262144,
		Prompt:       "Look it up.",
		Heartbeat:    300 * time.Millisecond,
		Users: func(t *testing.T) (http.Header, http.Header) {
			k := n.Add(1)
			return user(fmt.Sprintf("alice%d", k)), user(fmt.Sprintf("bob%d", k))
		},
		Restart: func(t *testing.T) string {
			b.stop()
			s.stop()
			s = startServer(t, serverOpts{dbURL: db, dataDir: s.opts.dataDir, root: s.opts.root, extra: sseFlags})
			b = startBridge(t, s, s.mintToken("bridge-2", "chat"), s.opts.root, bridgeEnv...)
			return "http://" + b.addr + "/api/chat"
		},
	})
}
