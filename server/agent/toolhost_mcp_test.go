package agent

import (
	"context"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zidane-server/zidane/protocol"
	"github.com/zidane-server/zidane/server/agent/defs"
	"github.com/zidane-server/zidane/server/agent/mcp"
	"github.com/zidane-server/zidane/server/agent/mcp/mcptest"
	"github.com/zidane-server/zidane/server/agent/provider"
	"github.com/zidane-server/zidane/server/store"
)

// mcpEntry is an mcps.json entry running the test binary as the Go SDK test server.
func mcpEntry(t *testing.T, extra map[string]any) map[string]any {
	cmd, env := mcptest.StdioConfig()
	e := map[string]any{"command": cmd, "env": env}
	for k, v := range extra {
		e[k] = v
	}
	return e
}

func writeMCPs(t *testing.T, path string, servers map[string]any) {
	t.Helper()
	b, err := protocol.Marshal(map[string]any{"mcpServers": servers})
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, b, 0o644))
}

// withMCP gives the fixture's host an MCP manager reading userFile.
func (f *hostFixture) withMCP(t *testing.T, userFile string) *mcp.Manager {
	m := mcp.NewManager(mcp.Options{UserFile: userFile, BackoffMin: 20 * time.Millisecond, BackoffMax: 50 * time.Millisecond})
	t.Cleanup(m.Close)
	f.host.MCP = m
	return m
}

func specNames(specs []provider.Tool) []string {
	var out []string
	for _, s := range specs {
		out = append(out, s.Name)
	}
	return out
}

// specsAsync lists a turn's MCP tools in the background (it may wait on an approval).
func (f *hostFixture) specsAsync(runID string) <-chan []provider.Tool {
	ch := make(chan []provider.Tool, 1)
	go func() { ch <- f.host.MCPSpecs(context.Background(), f.sess, runID, nil) }()
	return ch
}

func TestMCPToolsUnderApproval(t *testing.T) {
	f := newHostFixture(t)
	user := filepath.Join(f.T, "home", ".zidane", "mcps.json")
	writeMCPs(t, user, map[string]any{"gotest": mcpEntry(t, nil)})
	f.withMCP(t, user)
	specs := <-f.specsAsync("run-1")
	names := specNames(specs)
	assert.Contains(t, names, "mcp__gotest__echo")
	assert.Contains(t, names, "mcp__gotest__image")
	for _, s := range specs {
		if s.Name == "mcp__gotest__echo" {
			assert.Contains(t, string(s.InputSchema), `"text"`, "the server's input schema is the tool's")
		}
	}

	// ask mode: the call asks; the request shows the (untrusted) readOnlyHint; always stores
	// the server and the tool.
	ch := f.runAsync(context.Background(), f.call("mcp__gotest__echo", `{"text":"hi"}`))
	req := f.pendingOne(t)
	assert.Equal(t, "MCP gotest: echo (the server says read-only; not verified)", req.Summary)
	require.NotNil(t, req.AlwaysStores)
	assert.Equal(t, "mcp__gotest__echo:gotest/echo", *req.AlwaysStores)
	f.answer(t, req, protocol.ApprovalDecisionAlways)
	res := <-ch
	assert.False(t, res.IsError, res.Text)
	assert.Equal(t, "echo: hi", res.Text)
	res = f.run(t, "mcp__gotest__echo", `{"text":"again"}`)
	assert.Equal(t, "echo: again", res.Text, "the safelist entry lets it pass")

	// auto-edit still asks for MCP tools; locked refuses them without asking.
	f.setMode(t, store.ModeAutoEdit)
	ch = f.runAsync(context.Background(), f.call("mcp__gotest__image", `{}`))
	req = f.pendingOne(t)
	f.answer(t, req, protocol.ApprovalDecisionAllow)
	res = <-ch
	assert.Contains(t, res.Text, "[image image/png,")
	require.Len(t, res.Media, 1, "the image travels as media on the tool-result")
	assert.Equal(t, "image/png", res.Media[0].MimeType)
	assert.Equal(t, base64.StdEncoding.EncodeToString(mcptest.PNG), res.Media[0].Data)
	assert.Contains(t, res.Text, "embedded text")
	f.setMode(t, store.ModeLocked)
	res = f.run(t, "mcp__gotest__structured", `{"a":1,"b":2}`)
	assert.True(t, res.IsError)
	assert.Contains(t, res.Text, "locked")
	assert.Empty(t, f.gate.PendingApprovals(f.sess.ID))
}

func TestMCPServerDiesThroughTheAgent(t *testing.T) {
	f := newHostFixture(t)
	user := filepath.Join(f.T, "home", ".zidane", "mcps.json")
	writeMCPs(t, user, map[string]any{"gotest": mcpEntry(t, nil)})
	m := f.withMCP(t, user)
	<-f.specsAsync("run-1")
	f.safelist(t, "mcp__gotest__die", "gotest/die")
	f.safelist(t, "mcp__gotest__echo", "gotest/echo")
	res := f.run(t, "mcp__gotest__die", `{}`)
	assert.True(t, res.IsError)
	assert.Contains(t, res.Text, "ended during the call")
	p := m.Procs()[0]
	require.Eventually(t, func() bool { st := p.Status(); return st.State == "running" && st.Restarts == 1 }, 20*time.Second, 10*time.Millisecond)
	res = f.run(t, "mcp__gotest__echo", `{"text":"back"}`)
	assert.Equal(t, "echo: back", res.Text)
}

func TestMCPProjectServerAsksFirst(t *testing.T) {
	f := newHostFixture(t)
	f.withMCP(t, "")
	f.setMode(t, store.ModeAutoEdit)
	// The agent writes the project's mcps.json: a write into .zidane/ asks even in auto-edit.
	cmd, env := mcptest.StdioConfig()
	content, err := protocol.Marshal(map[string]any{"mcpServers": map[string]any{"proj": map[string]any{"command": cmd, "env": env}}})
	require.NoError(t, err)
	input, err := protocol.Marshal(map[string]string{"path": ".zidane/mcps.json", "content": string(content)})
	require.NoError(t, err)
	ch := f.runAsync(context.Background(), f.call("write_file", string(input)))
	req := f.pendingOne(t)
	assert.Nil(t, req.AlwaysStores, "a config folder write cannot be safelisted")
	f.answer(t, req, protocol.ApprovalDecisionAllow)
	require.False(t, (<-ch).IsError)

	// The first run that would offer its tools asks, naming the server, its command and file.
	specs := f.specsAsync("run-1")
	req = f.pendingOne(t)
	assert.Equal(t, MCPServerTool, req.Tool)
	assert.Contains(t, req.Summary, `"proj"`)
	assert.Contains(t, req.Summary, cmd)
	assert.Contains(t, req.Summary, filepath.Join(f.ws, ".zidane", "mcps.json"))
	assert.Empty(t, f.host.MCP.Procs(), "nothing runs before the answer")
	f.answer(t, req, protocol.ApprovalDecisionAlways)
	assert.Contains(t, specNames(<-specs), "mcp__proj__echo")

	// Stored for the project by the config's hash: the next run does not ask.
	assert.Contains(t, specNames(<-f.specsAsync("run-2")), "mcp__proj__echo")
	assert.Empty(t, f.gate.PendingApprovals(f.sess.ID))

	// A changed config asks again; a denial leaves the server inert for the run.
	writeMCPs(t, filepath.Join(f.ws, ".zidane", "mcps.json"), map[string]any{"proj": mcpEntry(t, map[string]any{"args": []string{"-changed"}})})
	f.host.MCP.Invalidate("")
	specs = f.specsAsync("run-3")
	req = f.pendingOne(t)
	assert.Contains(t, req.Summary, "-changed")
	f.answer(t, req, protocol.ApprovalDecisionDeny)
	assert.NotContains(t, specNames(<-specs), "mcp__proj__echo")

	// The session's later runs go on without it and are not asked again for the same config.
	assert.NotContains(t, specNames(<-f.specsAsync("run-4")), "mcp__proj__echo")
	assert.Empty(t, f.gate.PendingApprovals(f.sess.ID), "a denied config is not asked again in the session")

	// Another session of the project is asked (its first run that would offer the tools).
	other, err := f.st.CreateSession(context.Background(), store.Session{Title: "u", ProjectRoot: f.ws, Cwd: f.ws, AgentID: "build", Status: "idle"})
	require.NoError(t, err)
	otherSpecs := make(chan []provider.Tool, 1)
	go func() { otherSpecs <- f.host.MCPSpecs(context.Background(), other, "run-5", nil) }()
	require.Eventually(t, func() bool { return len(f.gate.PendingApprovals(other.ID)) == 1 }, 10*time.Second, 5*time.Millisecond)
	_, err = f.gate.Answer(context.Background(), other.ID, f.gate.PendingApprovals(other.ID)[0].RequestID, protocol.ApprovalDecisionAllow, "tester")
	require.NoError(t, err)
	assert.Contains(t, specNames(<-otherSpecs), "mcp__proj__echo")
}

// A run whose agent offers none of a project server's tools neither starts it nor asks.
func TestMCPProjectServerNotAskedWhenNotOffered(t *testing.T) {
	f := newHostFixture(t)
	f.withMCP(t, "")
	writeMCPs(t, filepath.Join(f.ws, ".zidane", "mcps.json"), map[string]any{"proj": mcpEntry(t, nil)})
	var asked []string
	ctx := withMCPOffers(context.Background(), func(prefix string) bool { asked = append(asked, prefix); return false })
	assert.Empty(t, f.host.MCPSpecs(ctx, f.sess, "run-1", nil))
	assert.Equal(t, []string{"mcp__proj__"}, asked)
	assert.Empty(t, f.gate.PendingApprovals(f.sess.ID), "nothing asked")
	assert.Empty(t, f.host.MCP.Procs(), "nothing started")

	plan := &runAgent{def: defs.Agent{Name: "p", Tools: []string{"read_file", "mcp__docs__*"}}}
	assert.False(t, plan.offersPrefix("mcp__proj__"))
	assert.True(t, plan.offersPrefix("mcp__docs__"))
	one := &runAgent{def: defs.Agent{Name: "o", Tools: []string{"mcp__proj__echo"}}}
	assert.True(t, one.offersPrefix("mcp__proj__"))
	all := &runAgent{def: defs.Agent{Name: "a", AllTools: true}, ceiling: map[string]bool{"read_file": true}}
	assert.False(t, all.offersPrefix("mcp__proj__"), "a task's ceiling bounds it")
}

func TestMCPProjectScopeHostRunsNothing(t *testing.T) {
	f := newHostFixture(t)
	f.withMCP(t, "")
	marker := filepath.Join(f.out, "ran-on-host")
	writeMCPs(t, filepath.Join(f.ws, ".zidane", "mcps.json"), map[string]any{
		"hosty":  map[string]any{"command": "sh", "args": []string{"-c", "touch " + marker}, "scope": "host"},
		"remote": map[string]any{"type": "http", "url": "http://127.0.0.1:1/mcp"},
	})
	specs := <-f.specsAsync("run-1")
	assert.Empty(t, specs)
	assert.Empty(t, f.gate.PendingApprovals(f.sess.ID), "an ignored server is not even asked for")
	assert.Empty(t, f.host.MCP.Procs())
	assert.NoFileExists(t, marker)
	_, errs := f.host.MCP.Servers(f.ws)
	var msgs []string
	for _, e := range errs {
		msgs = append(msgs, e.Error())
	}
	assert.Contains(t, strings.Join(msgs, "\n"), `server "hosty": scope "host"`)
	assert.Contains(t, strings.Join(msgs, "\n"), `server "remote": an HTTP server`)
}
