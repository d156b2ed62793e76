package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zidane-server/zidane/server/store/storetest"
)

// TestRaisedVersionKeepsPreviousClients (issue 29, seed "Compatibility": a release keeps the
// previous version in its range when it raises the current one): in a scratch copy of the repository
// the schema goes to protocolVersion 17 with minProtocolVersion 16 and marks queue.remove deprecated
// and removedIn 17; the generator runs there and the server is built from it. A v16-only client
// still attaches (negotiating 16), works, and is offered queue.remove (listed in methods and
// deprecatedMethods, dispatched); a v17 client is not (left out of methods, MethodNotFound).
func TestRaisedVersionKeepsPreviousClients(t *testing.T) {
	scratch := t.TempDir()
	ls, err := exec.Command("git", "-C", "..", "ls-files").Output()
	require.NoError(t, err)
	for _, f := range strings.Split(strings.TrimSpace(string(ls)), "\n") {
		if strings.HasPrefix(f, "sdk-ts/") || strings.HasPrefix(f, "e2e/") {
			continue // the generator writes the SDK's bindings; nothing here builds from them
		}
		b, err := os.ReadFile(filepath.Join("..", f))
		if os.IsNotExist(err) {
			continue // deleted in the work tree
		}
		require.NoError(t, err)
		require.NoError(t, os.MkdirAll(filepath.Join(scratch, filepath.Dir(f)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(scratch, f), b, 0o644))
	}
	edit := func(file, old, repl string) {
		p := filepath.Join(scratch, file)
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		require.Equal(t, 1, strings.Count(string(b), old), "%s: %q", file, old)
		require.NoError(t, os.WriteFile(p, []byte(strings.Replace(string(b), old, repl, 1)), 0o644))
	}
	edit("schema/protocol.json", `"protocolVersion": 16,`, `"protocolVersion": 17,`)
	edit("schema/queue.json", `"queue.remove": {`, `"queue.remove": {
      "deprecated": "Cancel the queued run with chat.cancel.",
      "removedIn": 17,`)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	bin := filepath.Join(t.TempDir(), "zidane-server")
	for _, args := range [][]string{{"run", "./gen"}, {"build", "-o", bin, "./cmd/zidane-server"}} {
		cmd := exec.CommandContext(ctx, "go", args...)
		cmd.Dir = scratch
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "go %v in the scratch copy: %s", args, out)
	}

	s := startServer(t, serverOpts{bin: bin, dbURL: storetest.URL(t)})
	tok := s.mintToken("v16", "chat")

	old := dial(t, s, tok)
	var h helloResult
	var extra struct {
		DeprecatedMethods []string `json:"deprecatedMethods"`
	}
	raw := old.result("ipc.hello", map[string]any{"protocolVersion": 16, "appVersion": "v16-app", "pid": os.Getpid()}, &h)
	require.NoError(t, json.Unmarshal(raw, &extra))
	assert.Equal(t, 17, h.ProtocolVersion)
	assert.Equal(t, 16, h.NegotiatedProtocolVersion, "a v16-only client attaches and speaks v16")
	assert.Contains(t, h.Methods, "queue.remove")
	assert.Equal(t, []string{"queue.remove"}, extra.DeprecatedMethods)
	sid, _ := createSession(t, old)
	var list struct {
		Sessions []struct {
			ID string `json:"id"`
		} `json:"sessions"`
	}
	old.result("sessions.list", map[string]any{}, &list)
	require.Len(t, list.Sessions, 1)
	assert.Equal(t, sid, list.Sessions[0].ID)
	f := old.call("queue.remove", map[string]any{"sessionId": sid, "runId": "7f6b2bc1-27b2-4052-a2b7-de05d2538178"})
	if f.Error != nil {
		assert.NotEqual(t, -32601, f.Error.Code, "a v16 connection is still served queue.remove: %s", f.Raw)
	}

	cur := dial(t, s, tok)
	raw = cur.result("ipc.hello", map[string]any{"protocolVersion": 17, "minProtocolVersion": 16, "appVersion": "v17-app", "pid": os.Getpid()}, &h)
	extra.DeprecatedMethods = nil
	require.NoError(t, json.Unmarshal(raw, &extra))
	assert.Equal(t, 17, h.NegotiatedProtocolVersion)
	assert.NotContains(t, h.Methods, "queue.remove")
	assert.Empty(t, extra.DeprecatedMethods)
	e := cur.callErr("queue.remove", map[string]any{"sessionId": sid, "runId": "7f6b2bc1-27b2-4052-a2b7-de05d2538178"})
	assert.Equal(t, -32601, e.Code, "removed in v17: not offered to a v17 connection")
}
