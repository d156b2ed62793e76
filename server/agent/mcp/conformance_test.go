package mcp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/zidane-server/zidane/server/agent/mcp"
	"github.com/zidane-server/zidane/server/credstore"
	"github.com/zidane-server/zidane/server/oauth"
	"github.com/zidane-server/zidane/server/store"
	"github.com/zidane-server/zidane/server/store/storetest"
)

// The official MCP conformance suite for clients (issue 23: "@modelcontextprotocol/conformance
// ... run in make test for both protocol versions"). TestMCPConformanceClient runs the npm
// package's CLI (e2e/conformance, installed by scripts/bootstrap.sh) in client mode for the
// scenarios each protocol revision requires of a client (--requirements); the client under test
// is this test binary run again with envConformanceClient set (conformanceClientIfAsked), which
// connects through this package's Manager and Proc exactly as the agent does, and in the auth
// scenarios signs in through server/oauth (loopback mode) as auth.oauth.begin/complete do. The CLI compares
// the results with conformance-baseline-<version>.yml (expected failures, each with its reason):
// a failure not in it, or a baseline entry that passes, fails the run.

// envConformanceClient makes the test binary act as the conformance suite's client under test.
const envConformanceClient = "ZIDANE_CONFORMANCE_CLIENT"

// envConformanceKeyDir names the folder of the client under test's credential key (its auth
// scenarios keep their tokens in the test's database, sealed as the server seals them).
const envConformanceKeyDir = "ZIDANE_CONFORMANCE_KEY_DIR"

// conformanceServer is the client under test's name for its scenario's server: one per process,
// since the suite runs scenarios at once on one credential store and a scenario's stored client
// secret or tokens must not be another's.
var conformanceServer = fmt.Sprintf("conformance-%d", os.Getpid())

// conformanceVersions are the protocol revisions the suite is run for.
var conformanceVersions = []string{"2026-07-28", "2025-11-25"}

// conformanceClientIfAsked runs one conformance scenario as the client under test and exits
// when envConformanceClient is "1": the scenario is $MCP_CONFORMANCE_SCENARIO, the server's URL
// the last argument, the protocol version $MCP_CONFORMANCE_PROTOCOL_VERSION.
func conformanceClientIfAsked() {
	if os.Getenv(envConformanceClient) != "1" {
		return
	}
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "conformance client: the server URL is missing")
		os.Exit(2)
	}
	url := os.Args[len(os.Args)-1]
	if err := runConformanceScenario(os.Getenv("MCP_CONFORMANCE_SCENARIO"), url, os.Getenv("MCP_CONFORMANCE_PROTOCOL_VERSION")); err != nil {
		fmt.Fprintln(os.Stderr, "conformance client:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// runConformanceScenario does what scenario asks of a client, through mcp.Manager: connect,
// list the tools, and call what the scenario's server expects to be called.
func runConformanceScenario(scenario, url, version string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Second)
	defer cancel()
	opts := mcp.Options{ProtocolVersion: version, BackoffMin: time.Millisecond, BackoffMax: time.Millisecond,
		// Elicitation as the agent offers it (form and URL modes); the person here accepts the
		// form as offered, so the SDK fills in its defaults (SEP-1034).
		Elicit: func(context.Context, string, *sdk.ElicitParams) (*sdk.ElicitResult, error) {
			return &sdk.ElicitResult{Action: "accept", Content: map[string]any{}}, nil
		}}
	var om *oauth.Manager
	if strings.HasPrefix(scenario, "auth/") {
		var err error
		if om, err = conformanceOAuth(ctx, url); err != nil {
			return err
		}
		opts.OAuth = func(name string) auth.OAuthHandler { return om.Handler(name) }
	}
	m := mcp.NewManager(opts)
	defer m.Close()
	srv := mcp.Server{Name: conformanceServer, Config: mcp.Config{Type: "http", URL: url}, Origin: mcp.OriginUser}
	p := m.Proc(srv, mcp.Use{})
	tools, err := p.Tools(ctx)
	// (The connect error carries the handler's words, not its error value.)
	if err != nil && om != nil && strings.Contains(err.Error(), oauth.ErrSignInRequired.Error()) {
		// Sign in as auth.oauth.begin/complete do in loopback mode: the suite's authorization
		// server redirects at once, and the address it redirects to is the "pasted" one.
		if err := conformanceSignIn(ctx, om); err != nil {
			return fmt.Errorf("sign-in: %w", err)
		}
		tools, err = p.Tools(ctx)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "conformance client: %s at %s: %d tools\n", scenario, p.NegotiatedVersion(), len(tools))
	find := func(name string) *sdk.Tool {
		for _, t := range tools {
			if t.Name == name {
				return t
			}
		}
		return nil
	}
	switch scenario {
	case "json-schema-ref-no-deref", "request-metadata":
		// Listing is the whole scenario (a network $ref in a schema is never fetched).
		return nil
	case "json-schema-2020-12-preservation":
		focal := find("json_schema_2020_12_tool")
		if focal == nil {
			return fmt.Errorf("tool json_schema_2020_12_tool not listed")
		}
		_, err := p.CallTool(ctx, "json_schema_echo", map[string]any{"schema": focal.InputSchema})
		return err
	}
	// Every other scenario: the calls the runner names in $MCP_CONFORMANCE_CONTEXT's toolCalls,
	// else each listed tool with the arguments the suite's reference client sends ({a: 2, b:
	// 3}). A refused call is the scenario's business (some are meant to be), so it is logged.
	calls := conformanceToolCalls()
	if calls == nil {
		for _, t := range tools {
			calls = append(calls, conformanceCall{Name: t.Name, Arguments: map[string]any{"a": 2, "b": 3}})
		}
	}
	for _, c := range calls {
		_, err := p.CallTool(ctx, c.Name, c.Arguments)
		if err != nil && om != nil && strings.Contains(err.Error(), oauth.ErrSignInRequired.Error()) {
			// A step-up (a 403 asking for more scopes): the person signs in again, as the
			// catalog's Sign in does, and the call is made again.
			if err := conformanceSignIn(ctx, om); err != nil {
				return fmt.Errorf("sign-in again: %w", err)
			}
			_, err = p.CallTool(ctx, c.Name, c.Arguments)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "conformance client: tools/call %s: %v\n", c.Name, err)
		}
	}
	if scenario == "http-standard-headers" {
		// Resources and prompts too, so the referee sees their Mcp-Method and Mcp-Name headers.
		if rs, err := p.Resources(ctx); err == nil && len(rs) > 0 {
			_, _ = p.ReadResource(ctx, rs[0].URI)
		}
		if ps, err := p.Prompts(ctx); err == nil && len(ps) > 0 {
			_, _ = p.GetPrompt(ctx, ps[0].Name, map[string]string{})
		}
	}
	return nil
}

// conformanceOAuth is server/oauth's Manager over a credential store in $DATABASE_URL (the test's
// database), resolving the one server conformanceServer at url.
func conformanceOAuth(ctx context.Context, url string) (*oauth.Manager, error) {
	db, err := store.Open(ctx, os.Getenv("DATABASE_URL"), store.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		return nil, err
	}
	key, err := credstore.LoadKey(filepath.Join(os.Getenv(envConformanceKeyDir), credstore.KeyFileName))
	if err != nil {
		return nil, err
	}
	creds, err := credstore.New(db, key)
	if err != nil {
		return nil, err
	}
	srv := oauth.Server{URL: url}
	// A scenario that hands out a pre-registered client (auth/pre-registration's client_id and
	// client_secret): the person configures it as an admin's mcp.upsert does, the client id in
	// the server's config and the secret in the credential store.
	var pre struct {
		ClientID     string `json:"client_id"`
		ClientSecret string `json:"client_secret"`
	}
	_ = json.Unmarshal([]byte(os.Getenv("MCP_CONFORMANCE_CONTEXT")), &pre)
	if pre.ClientID != "" {
		srv.ClientID = pre.ClientID
		if err := creds.PutClientSecret(ctx, conformanceServer, pre.ClientSecret); err != nil {
			return nil, err
		}
	}
	return oauth.New(oauth.Config{Creds: creds, Resolve: func(context.Context, string) (oauth.Server, error) {
		return srv, nil
	}})
}

// conformanceSignIn runs one loopback-mode sign-in: Begin, the authorization URL fetched without
// following its redirect, and Complete with the address it redirected to.
func conformanceSignIn(ctx context.Context, om *oauth.Manager) error {
	owner := new(int)
	b, err := om.Begin(ctx, owner, conformanceServer, "")
	if err != nil {
		return err
	}
	hc := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.URL, nil)
	if err != nil {
		return err
	}
	res, err := hc.Do(req)
	if err != nil {
		return err
	}
	_ = res.Body.Close()
	loc := res.Header.Get("Location")
	if loc == "" {
		return fmt.Errorf("the authorization endpoint answered %s without a redirect", res.Status)
	}
	_, err = om.Complete(ctx, owner, b.FlowID, loc)
	return err
}

// conformanceCall is one tools/call the runner asks for.
type conformanceCall struct {
	Name      string         `json:"name"`
	Arguments map[string]any `json:"arguments"`
}

// conformanceToolCalls reads toolCalls from $MCP_CONFORMANCE_CONTEXT (nil when absent).
func conformanceToolCalls() []conformanceCall {
	var c struct {
		ToolCalls []conformanceCall `json:"toolCalls"`
	}
	_ = json.Unmarshal([]byte(os.Getenv("MCP_CONFORMANCE_CONTEXT")), &c)
	return c.ToolCalls
}

// conformanceDir is e2e/conformance, where scripts/bootstrap.sh installs the suite.
func conformanceDir(t *testing.T) string {
	t.Helper()
	d, err := filepath.Abs("../../../e2e/conformance")
	require.NoError(t, err)
	if _, err := os.Stat(filepath.Join(d, "node_modules/@modelcontextprotocol/conformance/dist/index.js")); err != nil {
		t.Fatalf("the MCP conformance suite is not installed (%v): run scripts/bootstrap.sh --ts (npm ci in e2e/conformance)", err)
	}
	return d
}

func TestMCPConformanceClient(t *testing.T) {
	dir := conformanceDir(t)
	exe, err := os.Executable()
	require.NoError(t, err)
	// One database for every auth scenario's credential store (their issuers differ), migrated
	// here once.
	dbURL := storetest.URL(t)
	db, err := store.Open(context.Background(), dbURL, store.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	db.Close()
	keyDir := t.TempDir()
	for _, v := range conformanceVersions {
		t.Run(v, func(t *testing.T) {
			t.Parallel()
			out := t.TempDir()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, "node", "--import", filepath.Join(dir, "node20.mjs"),
				filepath.Join(dir, "node_modules/@modelcontextprotocol/conformance/dist/index.js"),
				"client", "--command", exe, "--requirements", v, "--timeout", "20000",
				"--expected-failures", filepath.Join(dir, "baseline-"+v+".yml"), "-o", out)
			cmd.Dir = out
			cmd.Env = append(os.Environ(), envConformanceClient+"=1", "DATABASE_URL="+dbURL, envConformanceKeyDir+"="+keyDir)
			var buf bytes.Buffer
			cmd.Stdout, cmd.Stderr = &buf, &buf
			start := time.Now()
			err := cmd.Run()
			t.Logf("conformance %s in %s:\n%s", v, time.Since(start).Round(time.Millisecond), tail(buf.String(), 6000))
			require.NoError(t, err, "the conformance suite found a failure not in baseline-%s.yml, or a baseline entry that now passes (fix it, or update the baseline with its reason)", v)
			require.Contains(t, buf.String(), "SUITE SUMMARY", "the suite ran")
		})
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return strings.TrimSpace(s)
}
