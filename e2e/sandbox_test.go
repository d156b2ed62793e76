package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zidane-server/zidane/protocol"
	"github.com/zidane-server/zidane/server/store/storetest"
)

// TestSandboxFlagsReachTheServer: the binary's sandbox flags are in force: host.info reports the
// default policy and off allowed, and a feature forced unsupported leaves its policies out.
func TestSandboxFlagsReachTheServer(t *testing.T) {
	s := startServer(t, serverOpts{dbURL: storetest.URL(t), extra: []string{"--sandbox", "read-only", "--sandbox-allow-off",
		"--sandbox-unsupported", "netns", "--sandbox-processes", "77"}})
	c := dial(t, s, s.mintToken("sb-chat", "chat"))
	c.hello()
	var info protocol.HostInfo
	c.result("host.info", map[string]any{}, &info)
	assert.Equal(t, protocol.SandboxPolicyReadOnly, info.Sandbox.DefaultPolicy)
	assert.True(t, info.Sandbox.AllowOff)
	assert.EqualValues(t, 77, info.Sandbox.Limits.Processes)
	assert.NotContains(t, info.Sandbox.Policies, protocol.SandboxPolicyWorkspaceWrite)
	assert.NotContains(t, info.Sandbox.Policies, protocol.SandboxPolicyReadOnly)
	assert.Contains(t, info.Sandbox.Policies, protocol.SandboxPolicyOff)
}

// execScript writes a scripted provider config whose one model (demo/scripted) runs each command
// with exec in its own turn, and returns the --config flag pair.
func execScript(t *testing.T, commands ...string) []string {
	t.Helper()
	dir := t.TempDir()
	var turns []string
	for i, c := range commands {
		turns = append(turns, fmt.Sprintf(`{"steps":[{"tool":{"name":"exec","arguments":{"command":%q},"id":"c%d"}}]}`, c, i+1),
			`{"steps":[{"text":"done"}]}`)
	}
	script := `{"turns":[` + strings.Join(turns, ",") + `]}`
	require.NoError(t, os.WriteFile(filepath.Join(dir, "script.json"), []byte(script), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{"providers":[{"name":"demo","kind":"scripted","script":"script.json"}]}`), 0o644))
	return []string{"--config", filepath.Join(dir, "config.json")}
}

// runAllowing sends prompt to sid on the scripted model, allows every approval it asks, and
// returns the text of the run's tool results in order and how many approvals were asked.
func runAllowing(t *testing.T, c *wsConn, sid, prompt string) (results []string, asked int) {
	t.Helper()
	var r struct {
		RunID string `json:"runId"`
	}
	c.result("chat.send", map[string]any{"sessionId": sid, "prompt": prompt, "model": "demo/scripted"}, &r)
	id := 9000
	for {
		f := c.next(waitTimeout)
		if f.Method != "ipc.signal" {
			continue
		}
		var s struct {
			Kind    string `json:"kind"`
			RunID   string `json:"runId"`
			Request struct {
				RequestID string `json:"requestId"`
			} `json:"request"`
			Event struct {
				Kind string `json:"kind"`
				Text string `json:"text"`
			} `json:"event"`
		}
		require.NoError(t, json.Unmarshal(f.Params, &s))
		switch {
		case s.Kind == "approval:request":
			asked++
			id++
			c.send(map[string]any{"jsonrpc": "2.0", "id": id, "method": "approvals.answer",
				"params": map[string]any{"sessionId": sid, "requestId": s.Request.RequestID, "decision": "allow"}})
		case s.Kind == "event" && s.Event.Kind == "tool-result":
			results = append(results, s.Event.Text)
		case s.Kind == "run:end" && s.RunID == r.RunID:
			return results, asked
		}
	}
}

// TestFieldCase_T05_InheritedDescriptorsStayOut: the server started with two descriptors open
// without close-on-exec (a secret in a hidden folder for reading, a log outside the roots for
// appending), as `zidane-server start 3<key.txt 4>>outside.log` would: a sandboxed command has
// descriptors 0, 1 and 2 only, cannot read the secret through the descriptor, and writes nothing
// to the log.
func TestFieldCase_T05_InheritedDescriptorsStayOut(t *testing.T) {
	outside := t.TempDir()
	secretDir := filepath.Join(outside, "secret")
	require.NoError(t, os.Mkdir(secretDir, 0o700))
	key := filepath.Join(secretDir, "key.txt")
	require.NoError(t, os.WriteFile(key, []byte("TOPSECRET"), 0o600))
	logPath := filepath.Join(outside, "outside.log")
	require.NoError(t, os.WriteFile(logPath, nil, 0o644))
	rd, err := os.Open(key)
	require.NoError(t, err)
	defer rd.Close()
	wr, err := os.OpenFile(logPath, os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	defer wr.Close()

	cmd := `echo FDS; ls /proc/$$/fd; echo "key: $(cat ` + key + `)"; echo "via fd3: $(cat <&3)"; echo WRITTEN-FROM-SANDBOX >&4; echo end`
	extra := append(execScript(t, cmd, cmd), "--sandbox-hide", secretDir, "--sandbox-allow-off")
	s := startServer(t, serverOpts{dbURL: storetest.URL(t), extra: extra, files: []*os.File{rd, wr}})
	c := dial(t, s, s.mintToken("t05", "chat"))
	c.hello()
	var info protocol.HostInfo
	c.result("host.info", map[string]any{}, &info)
	if !slices.Contains(info.Sandbox.Policies, protocol.SandboxPolicyWorkspaceWrite) {
		t.Skipf("this kernel cannot sandbox: %v", info.Sandbox.Notes)
	}
	sid, _ := createSession(t, c)
	res, _ := runAllowing(t, c, sid, "look")
	require.Len(t, res, 1)
	out := res[0]
	assert.Contains(t, out, "FDS\n0\n1\n2\n", out)
	assert.NotContains(t, out, "FDS\n0\n1\n2\n3", out)
	assert.NotContains(t, out, "TOPSECRET")
	assert.Contains(t, out, "end")
	b, err := os.ReadFile(logPath)
	require.NoError(t, err)
	assert.Empty(t, string(b), "nothing written outside the roots")

	// Variant: under off (no sandbox, the operator allowed it) the command has the server's
	// rights, yet the descriptors the server inherited still do not reach it (the server marks
	// them close-on-exec at start).
	admin := dial(t, s, s.mintToken("t05-admin", "admin"))
	admin.hello()
	admin.result("sessions.setSandbox", map[string]any{"sessionId": sid, "policy": "off"}, nil)
	res, _ = runAllowing(t, c, sid, "again")
	require.Len(t, res, 1)
	out = res[0]
	assert.Contains(t, out, "FDS\n0\n1\n2\n", out)
	assert.NotContains(t, out, "FDS\n0\n1\n2\n3", out)
	assert.NotContains(t, out, "via fd3: TOPSECRET")
	b, err = os.ReadFile(logPath)
	require.NoError(t, err)
	assert.Empty(t, string(b))
}
