package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/zidane-server/zidane/server/agent"
	"github.com/zidane-server/zidane/server/agent/mcp/mcptest"
	"github.com/zidane-server/zidane/server/agent/provider"
	"github.com/zidane-server/zidane/server/store"
	"github.com/zidane-server/zidane/server/store/storetest"
)

// BenchmarkFigMCPCall: one MCP tool call (the Go SDK test server's echo, over stdio) through the
// agent's tool host with its approval pre-allowed by a safelist entry (the session's mode and
// the safelist read from Postgres, the safelisted call's audit entry written, the result
// rendered and capped), against the same call made directly with the Go SDK's client on its own
// process of the same server, back to back in one process (issue 23). Reports ns/op.
func BenchmarkFigMCPCall(b *testing.B) {
	ctx := context.Background()
	st := storetest.New(b)
	root := b.TempDir()
	cmd, env := mcptest.StdioConfig()
	userFile := filepath.Join(b.TempDir(), "mcps.json")
	cfg, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{"bench": map[string]any{"command": cmd, "env": env, "scope": "host"}}})
	if err := os.WriteFile(userFile, cfg, 0o600); err != nil {
		b.Fatal(err)
	}
	s, err := New(ctx, Config{WorkspaceRoots: []string{root}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), MCPUserFile: userFile}, st)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Shutdown(context.Background()) })
	root = s.ws.Roots()[0]
	sess, err := st.CreateSession(ctx, store.Session{Title: "bench", ProjectRoot: root, Cwd: root, AgentID: "build", Status: "idle"})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := st.AddSafelist(ctx, store.SafelistEntry{ProjectRoot: root, Tool: "mcp__bench__echo", Prefix: "bench/echo", CreatedBy: "bench"}, sess.ID); err != nil {
		b.Fatal(err)
	}
	if specs := s.tools.MCPSpecs(ctx, sess, "bench-run", nil); len(specs) == 0 {
		b.Fatal("the bench server offered no tools")
	}
	call := agent.HostCall{Session: sess, RunID: "bench-run", TurnID: "bench-turn",
		Call: provider.ToolCall{ID: "c1", Name: "mcp__bench__echo", Arguments: json.RawMessage(`{"text":"hi"}`)}}
	b.Run("echo/agent", func(b *testing.B) {
		for b.Loop() {
			if r := s.tools.Do(ctx, call); r.IsError || r.Text != "echo: hi" {
				b.Fatalf("the call through the agent failed: %+v", r)
			}
		}
	})
	b.Run("echo/sdk-baseline", func(b *testing.B) {
		c := exec.Command(cmd)
		c.Env = append(os.Environ(), fmt.Sprintf("%s=%s", mcptest.EnvServe, env[mcptest.EnvServe]))
		cs, err := sdk.NewClient(&sdk.Implementation{Name: "bench", Version: "1"}, nil).Connect(ctx, &sdk.CommandTransport{Command: c}, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer cs.Close()
		for b.Loop() {
			res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hi"}})
			if err != nil || res.IsError {
				b.Fatalf("the direct call failed: %v", err)
			}
		}
	})
}
