package mcp_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zidane-server/zidane/server/agent/mcp"
)

// everythingBin is the reference server @modelcontextprotocol/server-everything as e2e/mcp's npm
// ci installs it (scripts/bootstrap.sh --ts or --all). Missing, the test fails: it is not skipped.
func everythingBin(t *testing.T) string {
	t.Helper()
	p, err := filepath.Abs("../../../e2e/mcp/node_modules/@modelcontextprotocol/server-everything/dist/index.js")
	require.NoError(t, err)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("the reference MCP server is not installed (%v): run scripts/bootstrap.sh --ts (npm ci in e2e/mcp)", err)
	}
	return p
}

// exerciseEverything lists tools, calls echo and get-sum, lists and reads a resource, and gets
// a prompt that takes no required argument.
func exerciseEverything(t *testing.T, p *mcp.Proc) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ts, err := p.Tools(ctx)
	require.NoError(t, err)
	var names []string
	for _, tl := range ts {
		names = append(names, tl.Name)
	}
	assert.Subset(t, names, []string{"echo", "get-sum", "get-tiny-image"})
	assert.NotEmpty(t, p.NegotiatedVersion())
	t.Logf("negotiated %s", p.NegotiatedVersion())

	res, err := p.CallTool(ctx, "echo", map[string]any{"message": "hi there"})
	require.NoError(t, err)
	assert.Contains(t, mcp.Render(res).Text, "hi there")
	res, err = p.CallTool(ctx, "get-sum", map[string]any{"a": 2, "b": 40})
	require.NoError(t, err)
	assert.Contains(t, mcp.Render(res).Text, "42")
	res, err = p.CallTool(ctx, "get-tiny-image", map[string]any{})
	require.NoError(t, err)
	r := mcp.Render(res)
	require.NotEmpty(t, r.Media)
	assert.Equal(t, "image/png", r.Media[0].MIMEType)

	rs, err := p.Resources(ctx)
	require.NoError(t, err)
	require.NotEmpty(t, rs)
	rr, err := p.ReadResource(ctx, rs[0].URI)
	require.NoError(t, err)
	require.NotEmpty(t, rr.Contents)

	prs, err := p.Prompts(ctx)
	require.NoError(t, err)
	var simple *sdk.Prompt
	for _, pr := range prs {
		req := false
		for _, a := range pr.Arguments {
			req = req || a.Required
		}
		if !req {
			simple = pr
			break
		}
	}
	require.NotNil(t, simple, "a prompt without required arguments")
	gp, err := p.GetPrompt(ctx, simple.Name, nil)
	require.NoError(t, err)
	assert.NotEmpty(t, gp.Messages)
}

func TestMCPEverythingStdio(t *testing.T) {
	bin := everythingBin(t)
	m := newManager(t)
	c := mcp.Config{Command: "node", Args: []string{bin, "stdio"}}
	p := m.Proc(mcp.Server{Name: "everything", Config: c, Hash: mcp.Hash("everything", c)}, mcp.Use{ProjectRoot: t.TempDir()})
	exerciseEverything(t, p)
}

func TestMCPEverythingStreamableHTTP(t *testing.T) {
	bin := everythingBin(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	require.NoError(t, l.Close())
	cmd := exec.Command("node", bin, "streamableHttp")
	cmd.Env = append(os.Environ(), fmt.Sprintf("PORT=%d", port))
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	// Wait for its "listening" line, not a sleep.
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "listening on port") {
				ready <- sc.Text()
			}
		}
		close(ready)
	}()
	select {
	case line, ok := <-ready:
		require.True(t, ok, "the server ended before it listened")
		t.Log(line)
	case <-time.After(30 * time.Second):
		t.Fatal("the streamable HTTP server did not listen within 30 s")
	}
	m := newManager(t)
	c := mcp.Config{Type: "http", URL: fmt.Sprintf("http://127.0.0.1:%d/mcp", port)}
	p := m.Proc(mcp.Server{Name: "everything", Config: c, Hash: mcp.Hash("everything", c)}, mcp.Use{})
	exerciseEverything(t, p)
}

type ctxMark struct{}

// TestMCPEverythingElicitationAndSampling: the reference server's trigger-elicitation-request
// (a 2025-11-25 style server-to-client request, not in the call's own context) reaches the
// Elicit hook in the context of the tool call that caused it, and its answer reaches the
// server; its sampling tool is offered only when the Sample hook is set (sampling enabled).
func TestMCPEverythingElicitationAndSampling(t *testing.T) {
	bin := everythingBin(t)
	var got *sdk.ElicitParams
	var marked bool
	m := mcp.NewManager(mcp.Options{ConnectTimeout: 30 * time.Second,
		Elicit: func(ctx context.Context, server string, p *sdk.ElicitParams) (*sdk.ElicitResult, error) {
			got, marked = p, ctx.Value(ctxMark{}) == "the call"
			return &sdk.ElicitResult{Action: "accept", Content: map[string]any{"name": "Ada Lovelace"}}, nil
		}})
	t.Cleanup(m.Close)
	c := mcp.Config{Command: "node", Args: []string{bin, "stdio"}}
	p := m.Proc(mcp.Server{Name: "everything", Config: c, Hash: mcp.Hash("everything", c)}, mcp.Use{ProjectRoot: t.TempDir()})
	ctx, cancel := context.WithTimeout(context.WithValue(context.Background(), ctxMark{}, "the call"), 60*time.Second)
	defer cancel()
	ts, err := p.Tools(ctx)
	require.NoError(t, err)
	var names []string
	for _, tl := range ts {
		names = append(names, tl.Name)
	}
	require.Contains(t, names, "trigger-elicitation-request", "offered to a client that advertises elicitation")
	assert.NotContains(t, names, "trigger-sampling-request", "sampling is not advertised unless enabled")
	res, err := p.CallTool(ctx, "trigger-elicitation-request", map[string]any{})
	require.NoError(t, err)
	require.NotNil(t, got, "the hook was asked")
	assert.True(t, marked, "asked in the tool call's context")
	assert.NotNil(t, got.RequestedSchema, "a form (mode absent: form)")
	assert.Contains(t, mcp.Render(res).Text, "Ada Lovelace")
}

// TestMCPEverythingSamplingWhenEnabled: with the Sample hook set (--mcp-sampling) the client
// advertises sampling, the reference server offers trigger-sampling-request, and its
// sampling/createMessage is answered by the hook in the call's context.
func TestMCPEverythingSamplingWhenEnabled(t *testing.T) {
	bin := everythingBin(t)
	var asked string
	m := mcp.NewManager(mcp.Options{ConnectTimeout: 30 * time.Second,
		Sample: func(ctx context.Context, server string, p *sdk.CreateMessageParams) (*sdk.CreateMessageResult, error) {
			if ctx.Value(ctxMark{}) != "the call" {
				return nil, fmt.Errorf("not in the call's context")
			}
			if len(p.Messages) > 0 {
				if tc, ok := p.Messages[0].Content.(*sdk.TextContent); ok {
					asked = tc.Text
				}
			}
			return &sdk.CreateMessageResult{Content: &sdk.TextContent{Text: "four"}, Model: "test-model", Role: "assistant"}, nil
		}})
	t.Cleanup(m.Close)
	c := mcp.Config{Command: "node", Args: []string{bin, "stdio"}}
	p := m.Proc(mcp.Server{Name: "everything", Config: c, Hash: mcp.Hash("everything", c)}, mcp.Use{ProjectRoot: t.TempDir()})
	ctx, cancel := context.WithTimeout(context.WithValue(context.Background(), ctxMark{}, "the call"), 60*time.Second)
	defer cancel()
	res, err := p.CallTool(ctx, "trigger-sampling-request", map[string]any{"prompt": "2+2?"})
	require.NoError(t, err)
	assert.Contains(t, asked, "2+2?")
	assert.Contains(t, mcp.Render(res).Text, "four")
}
