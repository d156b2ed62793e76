package server

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zidane-server/zidane/server/agent"
	"github.com/zidane-server/zidane/server/agent/provider/scripted"
	"github.com/zidane-server/zidane/server/workspace/sandbox"
)

// toolResult is a tool-result event as a client sees it.
type toolResult struct {
	text    string
	isError bool
	sandbox string
}

// promptAllowing sends prompt to sid on c and answers every approval request with allow from a
// second connection, until the run ends; it returns the run's tool results by call id.
func promptAllowing(t *testing.T, c, approver *testConn, sid, prompt string) map[string]toolResult {
	t.Helper()
	return promptAnswering(t, c, approver, sid, prompt, nil)
}

// TestAgentExecUnderTheSessionSandbox: end to end through the agent (scripted model, approvals
// allowed, a real WebSocket): under workspace-write a touch inside the workspace works, a touch
// outside the roots fails and leaves nothing, and a TCP connect to a loopback listener of the test
// fails; under workspace-write+network (set by an admin) the connect works; under read-only the
// workspace write fails. Each tool-result says which policy ran the command.
func TestAgentExecUnderTheSessionSandbox(t *testing.T) {
	outside := t.TempDir()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = conn.Write([]byte("pong\n"))
			conn.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	connect := fmt.Sprintf("exec 3<>/dev/tcp/127.0.0.1/%d && head -1 <&3", port)
	tool := func(id, command string) string {
		return fmt.Sprintf(`{"tool":{"name":"exec","arguments":{"command":%q},"id":%q}}`, command, id)
	}
	script := `{"turns":[` +
		`{"steps":[` + tool("c1", "touch inside.txt") + `,` + tool("c2", "touch "+outside+"/x") + `,` + tool("c3", connect) + `]},` +
		`{"steps":[{"text":"done"}]},` +
		`{"steps":[` + tool("c4", connect) + `]},` +
		`{"steps":[{"text":"done"}]},` +
		`{"steps":[` + tool("c5", "touch ro.txt") + `]},` +
		`{"steps":[{"text":"done"}]}]}`
	sc, err := scripted.Parse([]byte(script))
	require.NoError(t, err)
	models, err := agent.NewRegistry(context.Background(), "", scripted.New(scripted.Options{Script: sc}))
	require.NoError(t, err)
	e := newEnv(t, func(c *Config) { c.Models = models })
	if sup := e.srv.sandbox.Support(false); len(sup.Policies) < 3 {
		t.Skipf("this kernel cannot sandbox: %v", sup.Notes)
	}
	root := e.srv.ws.Roots()[0]
	c := e.dial()
	c.hello()
	sid := c.newSession()
	e.token = e.mint("admin")
	admin := e.dial()
	admin.hello()

	res := promptAllowing(t, c, admin, sid, "work")
	require.Len(t, res, 3, "%v", res)
	assert.False(t, res["c1"].isError, res["c1"].text)
	assert.FileExists(t, filepath.Join(root, "inside.txt"))
	assert.True(t, res["c2"].isError)
	assert.Contains(t, res["c2"].text, "No such file or directory", "a folder outside the roots is not in the view")
	assert.NoFileExists(t, filepath.Join(outside, "x"))
	assert.True(t, res["c3"].isError)
	assert.Contains(t, res["c3"].text, "Connection refused")
	for _, id := range []string{"c1", "c2", "c3"} {
		assert.Equal(t, "workspace-write", res[id].sandbox, id)
	}

	admin.result("sessions.setSandbox", fmt.Sprintf(`{"sessionId":%q,"policy":"workspace-write+network"}`, sid))
	res = promptAllowing(t, c, admin, sid, "connect")
	assert.False(t, res["c4"].isError, res["c4"].text)
	assert.Contains(t, res["c4"].text, "pong")
	assert.Equal(t, "workspace-write+network", res["c4"].sandbox)

	admin.result("sessions.setSandbox", fmt.Sprintf(`{"sessionId":%q,"policy":"read-only"}`, sid))
	res = promptAllowing(t, c, admin, sid, "write")
	assert.True(t, res["c5"].isError)
	assert.Contains(t, res["c5"].text, "Read-only file system")
	assert.Equal(t, "read-only", res["c5"].sandbox)
	_, err = os.Stat(filepath.Join(root, "ro.txt"))
	assert.True(t, os.IsNotExist(err))
}

// TestExecTheSandboxRefusesIsRefusedBeforeApproval (issue 21 item 6): where the session's policy
// cannot run (here every kernel feature forced unsupported), an exec is refused at once, naming
// the policy and what is missing, and nobody is asked to approve it; nothing runs.
func TestExecTheSandboxRefusesIsRefusedBeforeApproval(t *testing.T) {
	outside := t.TempDir()
	marker := filepath.Join(outside, "ran")
	script := `{"turns":[{"steps":[{"tool":{"name":"exec","arguments":{"command":"touch ` + marker + `"},"id":"c1"}}]},{"steps":[{"text":"done"}]}]}`
	sc, err := scripted.Parse([]byte(script))
	require.NoError(t, err)
	models, err := agent.NewRegistry(context.Background(), "", scripted.New(scripted.Options{Script: sc}))
	require.NoError(t, err)
	e := newEnv(t, func(c *Config) {
		c.Models = models
		c.Sandbox.Unsupported = []sandbox.Feature{"all"}
	})
	c := e.dial()
	c.hello()
	sid := c.newSession()
	c.result("chat.send", fmt.Sprintf(`{"sessionId":%q,"prompt":"go"}`, sid))
	var result map[string]any
	for {
		s := c.nextSignal()
		if s.session != sid {
			continue
		}
		p := decodeObj(t, s.raw)["params"].(map[string]any)
		require.NotEqual(t, "approval:request", s.kind, "a command the sandbox refuses is not put to the user")
		if ev, ok := p["event"].(map[string]any); ok && ev["kind"] == "tool-result" {
			result = ev
		}
		if s.kind == "run:end" {
			break
		}
	}
	require.NotNil(t, result)
	assert.Equal(t, true, result["isError"])
	assert.Contains(t, result["text"], "workspace-write needs")
	assert.Contains(t, result["text"], "the command was not run")
	assert.NoFileExists(t, marker)
}
