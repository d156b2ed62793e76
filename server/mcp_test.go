package server

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zidane-server/zidane/protocol"
	"github.com/zidane-server/zidane/server/agent"
	"github.com/zidane-server/zidane/server/agent/mcp"
	"github.com/zidane-server/zidane/server/agent/mcp/mcptest"
	"github.com/zidane-server/zidane/server/agent/provider/scripted"
	"github.com/zidane-server/zidane/server/store"
)

// copyTestBinary puts this test binary (the Go SDK test server behind mcptest.EnvServe) into
// dir, where a sandboxed process can run it (the sandbox's /tmp is its own).
func copyTestBinary(t *testing.T, dir string) string {
	t.Helper()
	exe, _ := mcptest.StdioConfig()
	src, err := os.Open(exe)
	require.NoError(t, err)
	defer src.Close()
	require.NoError(t, os.MkdirAll(dir, 0o755))
	dst := filepath.Join(dir, "mcptest")
	f, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	require.NoError(t, err)
	_, err = io.Copy(f, src)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	return dst
}

// TestMCPGroups: mcp.upsert (who may write what), catalog.mcps rows, mcp.test, mcp.resources,
// mcp.readResource and mcp.remove, over a real WebSocket against the Go SDK test server.
func TestMCPGroups(t *testing.T) {
	e := newEnv(t, nil)
	root := e.srv.ws.Roots()[0]
	chat := e.dial()
	chat.hello()
	admin := e.dialAs(e.mint("admin"))
	cmd, env := mcptest.StdioConfig()
	server := func(extra string) string {
		return fmt.Sprintf(`{"command":%q,"env":{%q:%q}%s}`, cmd, mcptest.EnvServe, env[mcptest.EnvServe], extra)
	}

	// Who may write what.
	m := chat.call("mcp.upsert", `{"name":"u","target":"user","server":`+server("")+`}`)
	assert.Equal(t, protocol.CodeForbidden, errCode(m), "the user file needs admin")
	m = chat.call("mcp.upsert", fmt.Sprintf(`{"name":"h","target":"project","cwd":%q,"server":%s}`, root, server(`,"scope":"host"`)))
	assert.Equal(t, protocol.CodeForbidden, errCode(m), "scope host needs admin")
	m = chat.call("mcp.upsert", fmt.Sprintf(`{"name":"w","target":"project","cwd":%q,"server":{"type":"http","url":"http://127.0.0.1:1/"}}`, root))
	assert.Equal(t, protocol.CodeForbidden, errCode(m), "an HTTP server needs admin")
	m = chat.call("mcp.upsert", `{"name":"x","target":"project","server":`+server("")+`}`)
	assert.Equal(t, protocol.CodeInvalidParams, errCode(m), "target project needs cwd")
	m = chat.call("mcp.upsert", `{"name":"x","target":"user","server":{"args":["no command"]}}`)
	assert.Equal(t, protocol.CodeInvalidParams, errCode(m))

	r := admin.result("mcp.upsert", `{"name":"gotest","target":"user","server":`+server(`,"scope":"host"`)+`}`)
	assert.Equal(t, e.srv.mcp.UserFile(), r["file"])
	r = chat.result("mcp.upsert", fmt.Sprintf(`{"name":"proj","target":"project","cwd":%q,"server":%s}`, root, server("")))
	assert.Equal(t, filepath.Join(root, ".zidane", "mcps.json"), r["file"])
	b, err := os.ReadFile(filepath.Join(root, ".zidane", "mcps.json"))
	require.NoError(t, err)
	assert.Contains(t, string(b), `"proj"`)

	rows := func() map[string]map[string]any {
		res := chat.result("catalog.mcps", fmt.Sprintf(`{"cwd":%q}`, root))
		out := map[string]map[string]any{}
		for _, x := range res["servers"].([]any) {
			row := x.(map[string]any)
			out[row["name"].(string)] = row
		}
		return out
	}
	cat := rows()
	require.Contains(t, cat, "gotest")
	require.Contains(t, cat, "proj")
	assert.Equal(t, "user", cat["gotest"]["origin"])
	assert.Equal(t, "host", cat["gotest"]["scope"])
	assert.Equal(t, "idle", cat["gotest"]["status"])
	assert.Equal(t, "none", cat["gotest"]["signIn"])
	assert.Equal(t, "project", cat["proj"]["origin"])
	assert.Equal(t, "context", cat["proj"]["scope"])
	assert.Equal(t, true, cat["proj"]["shared"])
	assert.Equal(t, false, cat["proj"]["approved"])
	assert.Equal(t, "inert", cat["proj"]["status"])

	// A chat token cannot start an unapproved project server; the user's server tests.
	m = chat.call("mcp.test", fmt.Sprintf(`{"name":"proj","cwd":%q}`, root))
	assert.Equal(t, protocol.CodeForbidden, errCode(m))
	// Without cwd, catalog.mcps and mcp.test mean the default project (the first root), as
	// agents.list does: the project's server is listed and found (and still needs its approval).
	var noCwd []string
	for _, x := range chat.result("catalog.mcps", `{}`)["servers"].([]any) {
		noCwd = append(noCwd, x.(map[string]any)["name"].(string))
	}
	assert.Equal(t, []string{"gotest", "proj"}, noCwd)
	m = chat.call("mcp.test", `{"name":"proj"}`)
	assert.Equal(t, protocol.CodeForbidden, errCode(m), "found in the default project, not yet approved")
	test := chat.result("mcp.test", `{"name":"gotest"}`)
	assert.Equal(t, true, test["ok"], "%v", test)
	assert.Equal(t, "2026-07-28", test["protocolVersion"])
	var tools []string
	for _, x := range test["tools"].([]any) {
		tools = append(tools, x.(map[string]any)["agentName"].(string))
	}
	assert.Contains(t, tools, "mcp__gotest__echo")
	cat = rows()
	assert.Equal(t, "running", cat["gotest"]["status"])
	require.NotNil(t, cat["gotest"]["lastTest"])
	assert.NotEmpty(t, cat["gotest"]["tools"])

	// Its prompts are commands mcp__<server>__<prompt>; a command fills the prompt's arguments.
	var greet map[string]any
	for _, x := range chat.result("commands.list", `{}`)["commands"].([]any) {
		if c := x.(map[string]any); c["name"] == "mcp__gotest__greet" {
			greet = c
		}
	}
	require.NotNil(t, greet, "commands.list offers the MCP prompt")
	assert.Equal(t, "mcp", greet["kind"])
	assert.Equal(t, "<name>", greet["argumentHint"])
	_, prompt, err := e.srv.commandPrompt(t.Context(), store.Session{ProjectRoot: root}, &protocol.ChatSendParams{Command: ptr("mcp__gotest__greet"), Arguments: ptr("Ada")})
	require.NoError(t, err)
	assert.Equal(t, "Say hello to Ada.", prompt.Text)
	_, _, err = e.srv.commandPrompt(t.Context(), store.Session{ProjectRoot: root}, &protocol.ChatSendParams{Command: ptr("mcp__gotest__greet")})
	assert.ErrorContains(t, err, `needs the argument "name"`)

	res := chat.result("mcp.resources", `{"name":"gotest"}`)
	require.Len(t, res["resources"], 1)
	rr := chat.result("mcp.readResource", `{"name":"gotest","uri":"test://hello"}`)
	assert.Equal(t, mcptest.HelloText, rr["contents"].([]any)[0].(map[string]any)["text"])
	m = chat.call("mcp.test", `{"name":"nope"}`)
	assert.Equal(t, protocol.CodeInvalidParams, errCode(m))

	// An admin's upsert of a project server counts as approved.
	admin.result("mcp.upsert", fmt.Sprintf(`{"name":"proj","target":"project","cwd":%q,"server":%s}`, root, server(`,"shared":false`)))
	cat = rows()
	assert.Equal(t, true, cat["proj"]["approved"])
	assert.Equal(t, false, cat["proj"]["shared"])

	// The mcpSharing setting wins over the config's shared (both ways); unset, the config's applies.
	m = chat.call("settings.set", `{"settings":{"mcpSharing":true}}`)
	assert.Equal(t, protocol.CodeForbidden, errCode(m), "settings need admin")
	admin.result("settings.set", `{"settings":{"mcpSharing":true}}`)
	assert.Equal(t, true, rows()["proj"]["shared"], "mcpSharing true wins over shared false")
	admin.result("settings.set", `{"settings":{"mcpSharing":false}}`)
	assert.Equal(t, false, rows()["gotest"]["shared"], "mcpSharing false wins over an absent shared")
	var projSrv mcp.Server
	servers, _ := e.srv.mcp.Servers(root)
	for _, x := range servers {
		if x.Name == "proj" {
			projSrv = x
		}
	}
	require.Equal(t, "proj", projSrv.Name)
	assert.NotSame(t, e.srv.mcp.Proc(projSrv, mcp.Use{SessionID: "a", ProjectRoot: root, Policy: "workspace-write"}),
		e.srv.mcp.Proc(projSrv, mcp.Use{SessionID: "b", ProjectRoot: root, Policy: "workspace-write"}), "one process per session")

	// A project file's scope host entry is listed as an error, not as a server.
	require.NoError(t, os.WriteFile(filepath.Join(root, ".zidane", "mcps.json"), []byte(`{"mcpServers":{"evil":{"command":"sh","scope":"host"}}}`), 0o644))
	e.srv.mcp.Invalidate("")
	all := chat.result("catalog.mcps", fmt.Sprintf(`{"cwd":%q}`, root))
	assert.Contains(t, fmt.Sprint(all["errors"]), `scope "host"`)
	assert.Contains(t, fmt.Sprint(chat.result("catalog.mcps", `{}`)["errors"]), `scope "host"`, "the default project's file's errors too")
	assert.NotContains(t, rows(), "evil")

	assert.Equal(t, true, admin.result("mcp.remove", `{"name":"gotest","target":"user"}`)["removed"])
	assert.Equal(t, false, admin.result("mcp.remove", `{"name":"gotest","target":"user"}`)["removed"])
	assert.NotContains(t, rows(), "gotest")
	m = chat.call("mcp.remove", `{"name":"gotest","target":"user"}`)
	assert.Equal(t, protocol.CodeForbidden, errCode(m))

	models := chat.result("catalog.models", `{}`)
	assert.NotEmpty(t, models["models"])
	assert.NotEmpty(t, models["default"])
}

// TestMCPContextServerUnderTheSandbox: a scope-context stdio server runs in its session's sandbox
// exactly like exec: under workspace-write it reads the workspace but not the data dir, and it
// cannot reach a loopback listener of the test. Its tool calls go through approvals.
func TestMCPContextServerUnderTheSandbox(t *testing.T) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	dataDir := t.TempDir()
	secret := filepath.Join(dataDir, "secret.txt")
	require.NoError(t, os.WriteFile(secret, []byte("the-data-dir-secret"), 0o600))
	tool := func(id, name, args string) string {
		return fmt.Sprintf(`{"tool":{"name":%q,"arguments":%s,"id":%q}}`, name, args, id)
	}
	var root string
	script := func() string {
		return `{"turns":[{"steps":[` +
			tool("r1", "mcp__sbx__readfile", fmt.Sprintf(`{"path":%q}`, secret)) + `,` +
			tool("r2", "mcp__sbx__dial", fmt.Sprintf(`{"addr":%q}`, ln.Addr().String())) + `,` +
			tool("r3", "mcp__sbx__readfile", fmt.Sprintf(`{"path":%q}`, filepath.Join(root, "inside.txt"))) +
			`]},{"steps":[{"text":"done"}]}]}`
	}
	wsRoot := t.TempDir()
	root, err = filepath.EvalSymlinks(wsRoot)
	require.NoError(t, err)
	sc, err := scripted.Parse([]byte(script()))
	require.NoError(t, err)
	models, err := agent.NewRegistry(context.Background(), "", scripted.New(scripted.Options{Script: sc}))
	require.NoError(t, err)
	e := newEnv(t, func(c *Config) { c.Models = models; c.DataDir = dataDir; c.WorkspaceRoots = []string{root} })
	if sup := e.srv.sandbox.Support(false); len(sup.Policies) < 3 {
		t.Skipf("this kernel cannot sandbox: %v", sup.Notes)
	}
	require.NoError(t, os.WriteFile(filepath.Join(root, "inside.txt"), []byte("workspace text"), 0o644))
	bin := copyTestBinary(t, filepath.Join(root, "bin"))
	cfg := fmt.Sprintf(`{"mcpServers":{"sbx":{"command":%q,"env":{%q:"1"}}}}`, bin, mcptest.EnvServe)
	require.NoError(t, os.WriteFile(e.srv.mcp.UserFile(), []byte(cfg), 0o600))
	e.srv.mcp.Invalidate("")

	c := e.dial()
	c.hello()
	sid := c.newSession()
	admin := e.dialAs(e.mint("admin"))
	res := promptAllowing(t, c, admin, sid, "work")
	require.Len(t, res, 3, "%v", res)
	assert.True(t, res["r1"].isError, res["r1"].text)
	assert.NotContains(t, res["r1"].text, "the-data-dir-secret")
	assert.True(t, res["r2"].isError, res["r2"].text)
	assert.Contains(t, res["r2"].text, "dial failed")
	assert.False(t, res["r3"].isError, res["r3"].text)
	assert.Equal(t, "read: workspace text", res["r3"].text)
	assert.True(t, strings.HasPrefix(e.srv.mcp.Procs()[0].Status().Policy, "workspace-write"), e.srv.mcp.Procs()[0].Status().Policy)
}

// TestMCPConfigReloadsOnChange: a change to the user's mcps.json reaches catalog.mcps through
// the server's one watcher, with no call to reload it.
func TestMCPConfigReloadsOnChange(t *testing.T) {
	e := newEnv(t, nil)
	chat := e.dial()
	chat.hello()
	names := func() []string {
		var out []string
		for _, x := range chat.result("catalog.mcps", `{}`)["servers"].([]any) {
			out = append(out, x.(map[string]any)["name"].(string))
		}
		return out
	}
	require.Empty(t, names())
	changed := e.srv.mcp.Changed() // before the write: its event cannot be missed
	require.NoError(t, os.WriteFile(e.srv.mcp.UserFile(), []byte(`{"mcpServers":{"fresh":{"command":"true"}}}`), 0o600))
	select {
	case <-changed:
	case <-time.After(10 * time.Second):
		t.Fatal("the watcher did not report the change within 10 s")
	}
	require.Eventually(t, func() bool { return slices.Contains(names(), "fresh") }, 10*time.Second, 20*time.Millisecond)
}
