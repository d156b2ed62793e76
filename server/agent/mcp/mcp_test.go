package mcp_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http/httptest"
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
	"github.com/zidane-server/zidane/server/agent/mcp/mcptest"
	"github.com/zidane-server/zidane/server/store/storetest"
)

func TestMain(m *testing.M) {
	mcptest.ServeIfAsked()
	conformanceClientIfAsked()
	storetest.Main(m)
}

func TestMCPToolName(t *testing.T) {
	assert.Equal(t, "mcp__git_hub__search-code", mcp.ToolName("git hub", "search-code"))
	assert.Equal(t, "mcp__a_b__c_d", mcp.ToolName("a.b", "c/d"))
	long := mcp.ToolName("server", strings.Repeat("x", 80))
	full := "mcp__server__" + strings.Repeat("x", 80)
	sum := sha256.Sum256([]byte(full))
	assert.Equal(t, full[:55]+"_"+hex.EncodeToString(sum[:])[:8], long)
	assert.Len(t, long, 64)
	exact := "mcp__s__" + strings.Repeat("y", 64-8)
	assert.Equal(t, exact, mcp.ToolName("s", strings.Repeat("y", 56)), "64 characters is not over 64")
}

func TestMCPConfigMerge(t *testing.T) {
	dir := t.TempDir()
	user := filepath.Join(dir, "user.json")
	project := filepath.Join(dir, "proj", ".zidane", "mcps.json")
	require.NoError(t, os.MkdirAll(filepath.Dir(project), 0o755))
	require.NoError(t, os.WriteFile(user, []byte(`{"mcpServers":{
		"both":{"command":"user-cmd"},
		"remote":{"type":"http","url":"https://example.com/mcp","headers":{"X-A":"1"}},
		"hostly":{"command":"h","scope":"host"}}}`), 0o600))
	require.NoError(t, os.WriteFile(project, []byte(`{"mcpServers":{
		"both":{"command":"proj-cmd","args":["-x"],"env":{"K":"V"}},
		"phttp":{"type":"http","url":"http://169.254.169.254/"},
		"phost":{"command":"curl","scope":"host"},
		"loose":{"command":"x","autoApprove":["*"]},
		"noshare":{"command":"y","shared":false},
		"bad":{"args":["no command"]}}}`), 0o600))
	u, uf, uerr := mcp.LoadFile(user)
	require.Empty(t, uerr)
	p, pf, perr := mcp.LoadFile(project)
	require.Len(t, perr, 1, "the entry without a command is an error")
	servers, errs := mcp.Merge(user, u, uf, project, p, pf)
	names := map[string]mcp.Server{}
	for _, s := range servers {
		names[s.Name] = s
	}
	require.Contains(t, names, "both")
	assert.Equal(t, "proj-cmd", names["both"].Config.Command, "the project wins")
	assert.Equal(t, mcp.OriginProject, names["both"].Origin)
	assert.Equal(t, mcp.ScopeContext, names["both"].Config.EffectiveScope())
	assert.True(t, names["remote"].Config.IsHTTP())
	assert.Equal(t, mcp.ScopeHost, names["hostly"].Config.EffectiveScope(), "scope host from the user file is honoured")
	assert.False(t, names["noshare"].Config.IsShared())
	for _, n := range []string{"phttp", "phost", "loose"} {
		assert.NotContains(t, names, n, "a project file may not ask for %s", n)
	}
	var msgs []string
	for _, e := range errs {
		msgs = append(msgs, e.Error())
	}
	joined := strings.Join(msgs, "\n")
	assert.Contains(t, joined, `server "phttp": an HTTP server`)
	assert.Contains(t, joined, `server "phost": scope "host"`)
	assert.Contains(t, joined, `server "loose": field "autoApprove"`)

	h1 := mcp.Hash("both", names["both"].Config)
	c2 := names["both"].Config
	c2.Args = []string{"-y"}
	assert.NotEqual(t, h1, mcp.Hash("both", c2), "a changed config hashes differently")
	assert.Equal(t, h1, names["both"].Hash)

	_, _, jerr := mcp.ParseFile("x.json", []byte(`{not json`))
	require.Len(t, jerr, 1)
	assert.Contains(t, jerr[0].Error(), "not valid JSON")
}

func newManager(t *testing.T) *mcp.Manager {
	m := mcp.NewManager(mcp.Options{BackoffMin: 20 * time.Millisecond, BackoffMax: 50 * time.Millisecond, ConnectTimeout: 20 * time.Second})
	t.Cleanup(m.Close)
	return m
}

func stdioServer() mcp.Server {
	cmd, env := mcptest.StdioConfig()
	c := mcp.Config{Command: cmd, Env: env}
	return mcp.Server{Name: "gotest", Config: c, Origin: mcp.OriginUser, Hash: mcp.Hash("gotest", c)}
}

// exercise lists tools, calls some, reads a resource and gets a prompt.
func exercise(t *testing.T, p *mcp.Proc, version string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ts, err := p.Tools(ctx)
	require.NoError(t, err)
	var names []string
	for _, tl := range ts {
		names = append(names, tl.Name)
	}
	assert.Subset(t, names, []string{"echo", "image", "structured", "die"})
	assert.Equal(t, version, p.NegotiatedVersion())

	res, err := p.CallTool(ctx, "echo", map[string]any{"text": "hi"})
	require.NoError(t, err)
	assert.Equal(t, "echo: hi", mcp.Render(res).Text)

	res, err = p.CallTool(ctx, "image", map[string]any{})
	require.NoError(t, err)
	r := mcp.Render(res)
	require.Len(t, r.Media, 1)
	assert.Equal(t, "image/png", r.Media[0].MIMEType)
	assert.Equal(t, mcptest.PNG, r.Media[0].Data)
	assert.Contains(t, r.Text, "[resource test://embedded text/plain]\nembedded text")

	res, err = p.CallTool(ctx, "structured", map[string]any{"a": 2, "b": 3})
	require.NoError(t, err)
	assert.Contains(t, mcp.Render(res).Text, `{"total":5}`)

	rr, err := p.ReadResource(ctx, "test://hello")
	require.NoError(t, err)
	require.Len(t, rr.Contents, 1)
	assert.Equal(t, mcptest.HelloText, rr.Contents[0].Text)
	rs, err := p.Resources(ctx)
	require.NoError(t, err)
	require.Len(t, rs, 1)

	pr, err := p.GetPrompt(ctx, "greet", map[string]string{"name": "Ada"})
	require.NoError(t, err)
	require.Len(t, pr.Messages, 1)
	assert.Equal(t, "Say hello to Ada.", pr.Messages[0].Content.(*sdk.TextContent).Text)
}

func TestMCPStdioGoServer(t *testing.T) {
	m := newManager(t)
	p := m.Proc(stdioServer(), mcp.Use{SessionID: "s1", ProjectRoot: t.TempDir()})
	exercise(t, p, "2026-07-28") // stateless server/discover over stdio
	assert.Equal(t, "running", p.Status().State)
}

func TestMCPHTTPGoServer(t *testing.T) {
	srv := httptest.NewServer(mcptest.Handler())
	t.Cleanup(srv.Close)
	m := newManager(t)
	c := mcp.Config{Type: "http", URL: srv.URL}
	p := m.Proc(mcp.Server{Name: "gohttp", Config: c, Hash: mcp.Hash("gohttp", c)}, mcp.Use{})
	exercise(t, p, "2025-11-25") // the SDK's stateful HTTP handler: initialize at the fallback version
}

func TestMCPServerDiesMidCall(t *testing.T) {
	m := newManager(t)
	p := m.Proc(stdioServer(), mcp.Use{SessionID: "s1", ProjectRoot: t.TempDir()})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := p.Tools(ctx)
	require.NoError(t, err)
	_, err = p.CallTool(ctx, "die", map[string]any{})
	require.Error(t, err, "a call whose process died is an error, not a hang")
	assert.Contains(t, err.Error(), "ended during the call")
	// The supervisor starts it again after its backoff; wait on its state, not a sleep.
	require.Eventually(t, func() bool { st := p.Status(); return st.State == "running" && st.Restarts == 1 }, 20*time.Second, 10*time.Millisecond)
	st := p.Status()
	assert.Equal(t, 1, st.Restarts)
	assert.Contains(t, st.Stderr, "dying as asked", "the stderr ring keeps the dead process's output")
	res, err := p.CallTool(ctx, "echo", map[string]any{"text": "again"})
	require.NoError(t, err)
	assert.Equal(t, "echo: again", mcp.Render(res).Text)
}

func TestMCPToolsListChanged(t *testing.T) {
	m := newManager(t)
	p := m.Proc(stdioServer(), mcp.Use{SessionID: "s1", ProjectRoot: t.TempDir()})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ts, err := p.Tools(ctx)
	require.NoError(t, err)
	n := len(ts)
	changed := p.ListChanged()
	_, err = p.CallTool(ctx, "add_tool", map[string]any{"name": "late"})
	require.NoError(t, err)
	select {
	case <-changed:
	case <-ctx.Done():
		t.Fatal("no tools/list_changed")
	}
	ts, err = p.Tools(ctx)
	require.NoError(t, err)
	assert.Len(t, ts, n+1)
}

// The mcpSharing setting wins over a server's shared: it decides whether two sessions of one
// project and policy get one process or two.
func TestMCPSharingSettingWins(t *testing.T) {
	var setting *bool
	m := mcp.NewManager(mcp.Options{Sharing: func() *bool { return setting }})
	defer m.Close()
	no := false
	shared := mcp.Server{Name: "s", Config: mcp.Config{Command: "x"}}
	unshared := mcp.Server{Name: "u", Config: mcp.Config{Command: "x", Shared: &no}}
	a := mcp.Use{SessionID: "a", ProjectRoot: "/p", Policy: "workspace-write"}
	b := mcp.Use{SessionID: "b", ProjectRoot: "/p", Policy: "workspace-write"}

	assert.True(t, m.Shared(shared))
	assert.False(t, m.Shared(unshared))
	assert.Same(t, m.Proc(shared, a), m.Proc(shared, b), "absent shared: one process for the project and policy")
	assert.NotSame(t, m.Proc(unshared, a), m.Proc(unshared, b), "shared false: one per session")

	off := false
	setting = &off
	assert.False(t, m.Shared(shared))
	assert.NotSame(t, m.Proc(shared, a), m.Proc(shared, b), "mcpSharing false wins over an absent shared")

	on := true
	setting = &on
	assert.True(t, m.Shared(unshared))
	assert.Same(t, m.Proc(unshared, a), m.Proc(unshared, b), "mcpSharing true wins over shared false")
	other := mcp.Use{SessionID: "c", ProjectRoot: "/p", Policy: "read-only"}
	assert.NotSame(t, m.Proc(unshared, a), m.Proc(unshared, other), "never shared across policies")
}

type sessionMark struct{}

// TestMCPPushedElicitationGoesToItsCallOrNobody: a 2025-11-25 server's elicitation/create
// pushed on stdio does not say which call it belongs to. On one process shared by two
// sessions, with only session 1's call in progress it asks session 1; with session 2's call
// in progress too, session 2's request is refused with a reason (the tool reports it) and
// nobody else is asked; with two calls of one session in progress that session is asked.
func TestMCPPushedElicitationGoesToItsCallOrNobody(t *testing.T) {
	type ask struct {
		session string
		release chan struct{}
	}
	asks := make(chan ask, 4)
	m := mcp.NewManager(mcp.Options{ConnectTimeout: 20 * time.Second, ProtocolVersion: "2025-11-25",
		Caller: func(ctx context.Context) string { s, _ := ctx.Value(sessionMark{}).(string); return s },
		Elicit: func(ctx context.Context, _ string, _ *sdk.ElicitParams) (*sdk.ElicitResult, error) {
			a := ask{session: ctx.Value(sessionMark{}).(string), release: make(chan struct{})}
			asks <- a
			select {
			case <-a.release:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return &sdk.ElicitResult{Action: "accept", Content: map[string]any{"name": a.session}}, nil
		}})
	t.Cleanup(m.Close)
	srv, root := stdioServer(), t.TempDir()
	p := m.Proc(srv, mcp.Use{SessionID: "s1", ProjectRoot: root})
	require.Same(t, p, m.Proc(srv, mcp.Use{SessionID: "s2", ProjectRoot: root}), "one shared process")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	in := func(s string) context.Context { return context.WithValue(ctx, sessionMark{}, s) }
	call := func(s string) <-chan string {
		out := make(chan string, 1)
		go func() {
			res, err := p.CallTool(in(s), "elicit_push", map[string]any{})
			if err != nil {
				out <- "error: " + err.Error()
				return
			}
			out <- mcp.Render(res).Text
		}()
		return out
	}
	next := func() ask {
		select {
		case a := <-asks:
			return a
		case <-ctx.Done():
			t.Fatal("no elicitation reached the hook")
		}
		return ask{}
	}
	require.Equal(t, "2025-11-25", func() string { _, err := p.Tools(ctx); require.NoError(t, err); return p.NegotiatedVersion() }())

	first := call("s1")
	a1 := next()
	assert.Equal(t, "s1", a1.session, "the only call in progress is asked")
	second := <-call("s2") // s1's call is still in progress: s2's request names no call
	assert.Contains(t, second, "elicit failed")
	assert.Contains(t, second, "several tool calls from different sessions")
	close(a1.release)
	assert.Equal(t, `elicit: accept {"name":"s1"}`, <-first)
	assert.Empty(t, asks, "nobody else was asked")

	// Two calls of one session: its user is asked for each.
	third := call("s1")
	a3 := next()
	fourth := call("s1")
	a4 := next()
	assert.Equal(t, "s1", a4.session)
	close(a4.release)
	assert.Equal(t, `elicit: accept {"name":"s1"}`, <-fourth)
	close(a3.release)
	assert.Equal(t, `elicit: accept {"name":"s1"}`, <-third)
}

// A context-scope stdio server that does not connect says it ran in the session's sandbox, under
// which policy, and what to do (a fresh user's `npx -y` example waited 30 s and said only
// "context deadline exceeded"); a host-scope one says nothing of a sandbox.
func TestMCPConnectFailureNamesTheSandbox(t *testing.T) {
	m := mcp.NewManager(mcp.Options{ConnectTimeout: 5 * time.Second,
		Prepare: func(*exec.Cmd, mcp.Use) (string, error) { return "workspace-write", nil }})
	defer m.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	use := mcp.Use{SessionID: "s", ProjectRoot: t.TempDir(), Policy: "workspace-write"}

	ctxSrv := mcp.Server{Name: "fetches", Config: mcp.Config{Command: "sh", Args: []string{"-c", "echo no network >&2; exit 3"}}}
	_, err := m.Proc(ctxSrv, use).Tools(ctx)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `MCP server "fetches" did not connect`)
	assert.Contains(t, err.Error(), "runs in the session's sandbox (policy workspace-write, scope: context)")
	assert.Contains(t, err.Error(), `"scope": "host"`)

	hostSrv := mcp.Server{Name: "host", Config: mcp.Config{Command: "sh", Args: []string{"-c", "exit 3"}, Scope: mcp.ScopeHost}}
	_, err = m.Proc(hostSrv, use).Tools(ctx)
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "sandbox")
}

// TestRenderMedia: image and audio blocks, and embedded binary resources of an image or audio
// type, are media beside a line of text each; an embedded text resource or another binary type
// is text only.
func TestRenderMedia(t *testing.T) {
	res := &sdk.CallToolResult{Content: []sdk.Content{
		&sdk.TextContent{Text: "here"},
		&sdk.ImageContent{Data: mcptest.PNG, MIMEType: "image/png"},
		&sdk.AudioContent{Data: []byte("RIFF"), MIMEType: "audio/wav"},
		&sdk.EmbeddedResource{Resource: &sdk.ResourceContents{URI: "test://chart.png", MIMEType: "Image/PNG", Blob: mcptest.PNG}},
		&sdk.EmbeddedResource{Resource: &sdk.ResourceContents{URI: "test://notes", MIMEType: "text/plain", Text: "notes"}},
		&sdk.EmbeddedResource{Resource: &sdk.ResourceContents{URI: "test://x.zip", MIMEType: "application/zip", Blob: []byte("PK")}},
	}}
	r := mcp.Render(res)
	require.Len(t, r.Media, 3)
	assert.Equal(t, []string{"image/png", "audio/wav", "Image/PNG"}, []string{r.Media[0].MIMEType, r.Media[1].MIMEType, r.Media[2].MIMEType})
	assert.Equal(t, mcptest.PNG, r.Media[2].Data)
	assert.Contains(t, r.Text, "[resource test://chart.png Image/PNG, 67 bytes of binary data]")
	assert.Contains(t, r.Text, "[resource test://x.zip application/zip, 2 bytes of binary data]")
	assert.Contains(t, r.Text, "[resource test://notes text/plain]\nnotes")
}
