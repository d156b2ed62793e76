package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zidane-server/zidane/e2e/wirekit"
	"github.com/zidane-server/zidane/server/store/storetest"
)

// TestConformanceKit runs every server-mode scenario of the conformance kit (e2e/wirekit,
// issue 29 item 3) against the real binary: all must pass.
func TestConformanceKit(t *testing.T) {
	s := startServer(t, serverOpts{dbURL: storetest.URL(t)})
	tok := s.mintToken("kit", "chat")
	scs, err := wirekit.ServerScenarios()
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(scs), 12)
	r := &wirekit.Runner{URL: s.url(), Token: tok, Timeout: waitTimeout}
	res := r.Run(context.Background(), scs, nil)
	require.Len(t, res, len(scs))
	for _, x := range res {
		assert.Equal(t, wirekit.Pass, x.Status, "%s", x)
	}
	t.Logf("\n%s", wirekit.Names(res))
}

// rewriteProxy is a WebSocket proxy between the runner and the real server that rewrites frames:
// up sees each client→server text frame (it returns frames to answer the client with itself and
// whether to forward), down each server→client one (false drops it).
func rewriteProxy(t *testing.T, target, tok string, up func([]byte) ([][]byte, bool), down func([]byte) bool) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cl, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{"zidane"}})
		if err != nil {
			return
		}
		defer cl.CloseNow()
		cl.SetReadLimit(64 << 20)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		sv, err := wirekit.Dial(ctx, target, tok)
		if err != nil {
			return
		}
		defer sv.CloseNow()
		go func() {
			defer cancel()
			for {
				_, b, err := sv.Read(ctx)
				if err != nil {
					return
				}
				if down(b) && cl.Write(ctx, websocket.MessageText, b) != nil {
					return
				}
			}
		}()
		for {
			_, b, err := cl.Read(ctx)
			if err != nil {
				return
			}
			extra, fwd := up(b)
			for _, e := range extra {
				if cl.Write(ctx, websocket.MessageText, e) != nil {
					return
				}
			}
			if fwd && sv.Write(ctx, websocket.MessageText, b) != nil {
				return
			}
		}
	}))
	t.Cleanup(srv.Close)
	return "ws" + strings.TrimPrefix(srv.URL, "http") + "/"
}

// runnerBinary builds cmd/zidane-conformance into binDir once and returns its path.
func runnerBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(binDir, "zidane-conformance")
	runnerOnce.Do(func() {
		out, err := exec.Command("go", "build", "-o", bin, "../cmd/zidane-conformance").CombinedOutput()
		if err != nil {
			runnerErr = fmt.Errorf("go build ../cmd/zidane-conformance: %v\n%s", err, out)
		}
	})
	require.NoError(t, runnerErr)
	return bin
}

var (
	runnerOnce sync.Once
	runnerErr  error
)

// runRunner runs the zidane-conformance binary on url and returns its exit code and output.
func runRunner(t *testing.T, url, tok string, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(runnerBinary(t), append([]string{"--url", url, "--token", tok, "--timeout", "5s"}, args...)...)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode(), string(out)
	}
	require.NoError(t, err, "%s", out)
	return 0, string(out)
}

// TestConformanceKitFailsPatchedServer runs the kit through proxies that break one rule each:
// answering a notification, and dropping the signal with $seq 3. The runner must fail the
// scenarios that check those rules, naming them and the frame, and pass the others; and the
// zidane-conformance binary must print the failing scenario's name and exit 1.
func TestConformanceKitFailsPatchedServer(t *testing.T) {
	s := startServer(t, serverOpts{dbURL: storetest.URL(t)})
	tok := s.mintToken("kit-patched", "chat")
	scs, err := wirekit.ServerScenarios()
	require.NoError(t, err)
	code, out := runRunner(t, s.url(), tok, "--run", "^(notification-unanswered|seq-order)$")
	require.Equal(t, 0, code, "the unpatched server passes:\n%s", out)
	assert.Contains(t, out, "PASS notification-unanswered")
	pass := func(frame []byte) bool { return true }
	forward := func([]byte) ([][]byte, bool) { return nil, true }

	t.Run("answers a notification", func(t *testing.T) {
		answer := func(b []byte) ([][]byte, bool) {
			var m map[string]json.RawMessage
			if json.Unmarshal(b, &m) == nil && m["method"] != nil && m["id"] == nil && string(m["method"]) != `"ipc.hello"` {
				return [][]byte{[]byte(`{"jsonrpc":"2.0","id":null,"result":{}}`)}, true
			}
			return nil, true
		}
		url := rewriteProxy(t, s.url(), tok, answer, pass)
		r := &wirekit.Runner{URL: url, Token: tok, Timeout: 5 * time.Second}
		res := byName(r.Run(context.Background(), scs, nil))
		n := res["notification-unanswered"]
		assert.Equal(t, wirekit.Fail, n.Status, "%s", n)
		assert.Contains(t, n.Reason, `"id":null`, "the reason shows the frame: %s", n)
		assert.Equal(t, wirekit.Pass, res["method-not-found"].Status, "%s", res["method-not-found"])
		assert.Equal(t, wirekit.Pass, res["seq-order"].Status, "%s", res["seq-order"])

		code, out := runRunner(t, url, tok)
		assert.Equal(t, 1, code, "%s", out)
		assert.Regexp(t, `(?m)^FAIL notification-unanswered: .*"id":null`, out)
		assert.Regexp(t, `(?m)^PASS seq-order$`, out)
	})

	t.Run("skips a $seq", func(t *testing.T) {
		drop := func(b []byte) bool {
			var m struct {
				Method string `json:"method"`
				Params struct {
					Seq *int64 `json:"$seq"`
				} `json:"params"`
			}
			return json.Unmarshal(b, &m) != nil || m.Method != "ipc.signal" || m.Params.Seq == nil || *m.Params.Seq != 3
		}
		url := rewriteProxy(t, s.url(), tok, forward, drop)
		r := &wirekit.Runner{URL: url, Token: tok, Timeout: 5 * time.Second}
		res := byName(r.Run(context.Background(), scs, nil))
		for _, name := range []string{"seq-order", "resume"} {
			x := res[name]
			assert.Equal(t, wirekit.Fail, x.Status, "%s", x)
			assert.Contains(t, x.Reason, "$seq 4 follows 2", "%s", x)
		}
		assert.Equal(t, wirekit.Pass, res["notification-unanswered"].Status, "%s", res["notification-unanswered"])

		code, out := runRunner(t, url, tok, "--run", "^(seq-order|notification-unanswered)$")
		assert.Equal(t, 1, code, "%s", out)
		assert.Regexp(t, `(?m)^FAIL seq-order: .*\$seq 4 follows 2`, out)
		assert.Regexp(t, `(?m)^PASS notification-unanswered$`, out)
		assert.Contains(t, out, "1 passed, 1 failed")
	})
}

func byName(rs []wirekit.Result) map[string]wirekit.Result {
	m := map[string]wirekit.Result{}
	for _, r := range rs {
		m[r.Name] = r
	}
	return m
}

// TestConformanceKitClientMode runs the kit's client mode (the fake server of e2e/wirekit) on
// the Go client (e2e/wirekit/goclient, client.Client's resume): every client scenario passes;
// and on a client that applies what it gets but never resumes, the cut scenario fails, naming
// the signals it lost.
func TestConformanceKitClientMode(t *testing.T) {
	bin := filepath.Join(binDir, "goclient")
	build := exec.Command("go", "build", "-o", bin, "./wirekit/goclient")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "%s", out)
	scs, err := wirekit.ClientScenarios()
	require.NoError(t, err)
	require.NotEmpty(t, scs)
	r := &wirekit.ClientRunner{Command: bin, Timeout: waitTimeout}
	for _, x := range r.Run(context.Background(), scs, nil) {
		assert.Equal(t, wirekit.Pass, x.Status, "%s", x)
	}

	// A client that reconnects but never resumes (the Go client without Follow) misses the
	// signals logged during the cut.
	r = &wirekit.ClientRunner{Command: bin + " --no-resume", Timeout: 2 * time.Second}
	x := r.RunOne(context.Background(), scs[0])
	assert.Equal(t, "client/resume-after-cut", x.Name)
	assert.Equal(t, wirekit.Fail, x.Status, "%s", x)
	assert.Contains(t, x.Reason, "applied line for $seq 7", "%s", x)
}
