package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zidane-server/zidane/server/agent"
	"github.com/zidane-server/zidane/server/agent/provider"
	"github.com/zidane-server/zidane/server/agent/tools"
	"github.com/zidane-server/zidane/server/store"
	"github.com/zidane-server/zidane/server/workspace/sandbox"
)

func TestHostInfoReportsTheSandbox(t *testing.T) {
	e := newEnv(t, nil)
	c := e.dial()
	c.hello()
	r := c.result("host.info", `{}`)
	assert.Equal(t, "linux", r["os"])
	assert.NotEmpty(t, r["kernel"])
	sb := r["sandbox"].(map[string]any)
	assert.Equal(t, "workspace-write", sb["defaultPolicy"])
	assert.Equal(t, false, sb["allowOff"])
	feats := map[string]bool{}
	for _, f := range sb["features"].([]any) {
		m := f.(map[string]any)
		feats[m["name"].(string)] = m["available"].(bool)
	}
	assert.Len(t, feats, 3)
	if feats["landlock"] && feats["namespaces"] && feats["netns"] {
		assert.Equal(t, "linux-landlock-namespaces", sb["kind"])
		assert.Equal(t, []any{"workspace-write", "workspace-write+network", "read-only"}, sb["policies"])
	}
	tools := map[string]bool{}
	for _, x := range r["tools"].([]any) {
		tools[x.(map[string]any)["name"].(string)] = true
	}
	if _, err := exec.LookPath("sh"); err == nil {
		assert.True(t, tools["sh"])
	}
	// The environment kinds (seed "host"): local runs nothing by default; sandboxed runs exec
	// under the policies the sandbox reports.
	envs := map[string]map[string]any{}
	for _, x := range r["environments"].([]any) {
		m := x.(map[string]any)
		envs[m["kind"].(string)] = m
	}
	require.Len(t, envs, 2)
	assert.Equal(t, false, envs["local"]["available"])
	assert.Equal(t, []any{}, envs["local"]["runs"])
	assert.Equal(t, []any{"exec"}, envs["sandboxed"]["runs"])
	assert.Equal(t, sb["policies"], envs["sandboxed"]["policies"])
	assert.Equal(t, len(sb["policies"].([]any)) > 0, envs["sandboxed"]["available"])
	// Cached for a minute; refresh probes again.
	again := c.result("host.info", `{}`)
	assert.Equal(t, r["probedAt"], again["probedAt"])
	fresh := c.result("host.info", `{"refresh":true}`)
	a, _ := r["probedAt"].(json.Number).Int64()
	b, _ := fresh["probedAt"].(json.Number).Int64()
	assert.GreaterOrEqual(t, b, a)
}

func TestHostInfoForcedUnsupportedRefusesPolicies(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.Sandbox.Unsupported = []sandbox.Feature{"all"} })
	c := e.dial()
	c.hello()
	r := c.result("host.info", `{}`)
	sb := r["sandbox"].(map[string]any)
	assert.Equal(t, "none", sb["kind"])
	for _, x := range r["environments"].([]any) {
		if m := x.(map[string]any); m["kind"] == "sandboxed" {
			assert.Equal(t, false, m["available"], "no policy runs: the sandboxed kind is not available")
		}
	}
	assert.Empty(t, sb["policies"])
	assert.NotEmpty(t, sb["notes"])
	id := c.newSession()

	e.token = e.mint("admin")
	a := e.dial()
	a.hello()
	m := a.call("sessions.setSandbox", fmt.Sprintf(`{"sessionId":%q,"policy":"workspace-write+network"}`, id))
	require.Equal(t, -32014, errCode(m), "%v", m)
	assert.Contains(t, m["error"].(map[string]any)["message"], "not run")

	// And a command under the server's default is refused, not run unsandboxed.
	marker := filepath.Join(t.TempDir(), "ran")
	cmd := exec.Command("/bin/touch", marker)
	_, err := e.srv.sandboxCommand(context.Background(), cmd, id, e.srv.ws.Roots(), nil)
	require.ErrorIs(t, err, sandbox.ErrUnsupported)
	assert.NoFileExists(t, marker)
}

func TestSessionsSetSandbox(t *testing.T) {
	e := newEnv(t, nil)
	c := e.dial()
	c.hello()
	id := c.newSession()
	r := c.result("sessions.getSandbox", fmt.Sprintf(`{"sessionId":%q}`, id))
	assert.Equal(t, "workspace-write", r["policy"])
	assert.Equal(t, false, r["set"])
	m := c.call("sessions.setSandbox", fmt.Sprintf(`{"sessionId":%q,"policy":"read-only"}`, id))
	assert.Equal(t, -32013, errCode(m), "a chat token cannot change the sandbox")

	e.token = e.mint("admin")
	a := e.dial()
	a.hello()
	r = a.result("sessions.setSandbox", fmt.Sprintf(`{"sessionId":%q,"policy":"read-only"}`, id))
	assert.Equal(t, "read-only", r["policy"])
	assert.Equal(t, true, r["set"])
	r = c.result("sessions.getSandbox", fmt.Sprintf(`{"sessionId":%q}`, id))
	assert.Equal(t, "read-only", r["policy"])

	m = a.call("sessions.setSandbox", fmt.Sprintf(`{"sessionId":%q,"policy":"off"}`, id))
	require.Equal(t, -32014, errCode(m))
	assert.Contains(t, m["error"].(map[string]any)["message"], "--sandbox-allow-off")
	m = a.call("sessions.setSandbox", fmt.Sprintf(`{"sessionId":%q,"policy":"bogus"}`, id))
	assert.Equal(t, -32602, errCode(m), "%v", m)
	m = a.call("sessions.setSandbox", `{"sessionId":"7d1c1b0e-5d6c-4b53-9e43-7ad8d1f1a2b3","policy":"read-only"}`)
	require.Equal(t, -32014, errCode(m))
	assert.Contains(t, m["error"].(map[string]any)["message"], "not found")
	r = c.result("sessions.getSandbox", fmt.Sprintf(`{"sessionId":%q}`, id))
	assert.Equal(t, "read-only", r["policy"], "a refused change changes nothing")

	r = a.result("sessions.setSandbox", fmt.Sprintf(`{"sessionId":%q}`, id))
	assert.Equal(t, "workspace-write", r["policy"])
	assert.Equal(t, false, r["set"])
}

// TestSessionPolicyRunsTheCommand: the server's glue runs a command under the session's policy:
// read-only refuses the workspace write that the default allows.
func TestSessionPolicyRunsTheCommand(t *testing.T) {
	e := newEnv(t, nil)
	if sup := e.srv.sandbox.Support(false); len(sup.Policies) < 3 {
		t.Skipf("this kernel cannot sandbox: %v", sup.Notes)
	}
	c := e.dial()
	c.hello()
	id := c.newSession()
	root := e.srv.ws.Roots()[0]
	touch := func(name string) (sandbox.Policy, error) {
		cmd := exec.Command("/bin/touch", filepath.Join(root, name))
		cmd.Dir = root
		p, err := e.srv.sandboxCommand(context.Background(), cmd, id, e.srv.ws.Roots(), nil)
		require.NoError(t, err)
		return p, cmd.Run()
	}
	p, err := touch("a")
	require.NoError(t, err)
	assert.Equal(t, sandbox.WorkspaceWrite, p)
	assert.FileExists(t, filepath.Join(root, "a"))

	require.NoError(t, e.srv.store.SetSessionSandbox(context.Background(), id, "read-only"))
	p, err = touch("b")
	assert.Equal(t, sandbox.ReadOnly, p)
	var ee *exec.ExitError
	require.True(t, errors.As(err, &ee), "the write is refused: %v", err)
	_, statErr := os.Stat(filepath.Join(root, "b"))
	assert.True(t, os.IsNotExist(statErr))
}

// TestTerminalsRunSandboxedWhenAsked: with Sandbox.TerminalPolicy a project terminal runs under
// it: a write outside the roots fails and its PID 1 is the sandbox's launcher.
func TestTerminalsRunSandboxedWhenAsked(t *testing.T) {
	outside := t.TempDir()
	e := newEnv(t, func(c *Config) { c.ProjectTerminals, c.Sandbox.TerminalPolicy = true, sandbox.WorkspaceWrite })
	if sup := e.srv.sandbox.Support(false); len(sup.Policies) < 3 {
		t.Skipf("this kernel cannot sandbox: %v", sup.Notes)
	}
	e.token = e.mint("admin")
	c := e.dial()
	c.hello()
	script := fmt.Sprintf(`tr '\0' ' ' < /proc/1/cmdline; echo; touch %s/x; touch in.txt && echo inside-ok; tty; echo END`, outside)
	r := c.result("terminal.start", fmt.Sprintf(`{"argv":["sh","-c",%q]}`, script))
	require.NotEmpty(t, r["terminalId"])
	out := ""
	for {
		p := c.nextSignal()
		if p.kind == "workspace:exec:exit" {
			break
		}
		m := decodeObj(t, p.raw)["params"].(map[string]any)
		if d, ok := m["data"].(string); ok {
			out += d
		}
	}
	assert.Contains(t, out, "zidane-sandbox init")
	assert.Contains(t, out, "No such file or directory", "a folder outside the roots is not in the view")
	assert.Contains(t, out, "inside-ok")
	assert.Contains(t, out, "/dev/pts/", "the terminal is the command's controlling terminal")
	assert.NoFileExists(t, filepath.Join(outside, "x"))
}

// TestExecRunsUnderTheSessionSandbox: the agent's exec tool runs its command through the server's
// sandbox under the session's policy, and its result says which policy ran it.
func TestExecRunsUnderTheSessionSandbox(t *testing.T) {
	e := newEnv(t, nil)
	if sup := e.srv.sandbox.Support(false); len(sup.Policies) < 3 {
		t.Skipf("this kernel cannot sandbox: %v", sup.Notes)
	}
	c := e.dial()
	c.hello()
	id := c.newSession()
	ctx := context.Background()
	sess, err := e.st.GetSession(ctx, id)
	require.NoError(t, err)
	root := e.srv.ws.Roots()[0]
	outside := t.TempDir()
	key, _ := tools.ParseCommand("touch x").SafelistKey()
	_, err = e.st.AddSafelist(ctx, store.SafelistEntry{ProjectRoot: sess.ProjectRoot, Tool: "exec", Prefix: key, CreatedBy: "test"}, id)
	require.NoError(t, err)
	run := func(command string) agent.HostResult {
		args, _ := json.Marshal(map[string]any{"command": command})
		return e.srv.tools.Do(ctx, agent.HostCall{Session: sess, RunID: "r", TurnID: "t",
			Call: provider.ToolCall{ID: "c", Name: "exec", Arguments: args}})
	}
	res := run("touch inside.txt")
	assert.False(t, res.IsError, res.Text)
	assert.Equal(t, "workspace-write", res.Sandbox)
	assert.FileExists(t, filepath.Join(root, "inside.txt"))

	res = run("touch " + outside + "/x")
	assert.True(t, res.IsError)
	assert.Contains(t, res.Text, "No such file or directory", "a folder outside the roots is not in the view")
	assert.Contains(t, res.Text, "[sandbox workspace-write]")
	assert.NoFileExists(t, filepath.Join(outside, "x"))

	require.NoError(t, e.st.SetSessionSandbox(ctx, id, "read-only"))
	res = run("touch again.txt")
	assert.True(t, res.IsError, res.Text)
	assert.Equal(t, "read-only", res.Sandbox)
	assert.NoFileExists(t, filepath.Join(root, "again.txt"))
}
