package mcp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/zidane-server/zidane/server/agent/mcp"
)

// The official MCP conformance suite for clients (issue 23: "@modelcontextprotocol/conformance
// ... run in make test for both protocol versions"). TestMCPConformanceClient runs the npm
// package's CLI (e2e/conformance, installed by scripts/bootstrap.sh) in client mode for the
// scenarios each protocol revision requires of a client (--requirements); the client under test
// is this test binary run again with envConformanceClient set (conformanceClientIfAsked), which
// connects through this package's Manager and Proc exactly as the agent does. The CLI compares
// the results with conformance-baseline-<version>.yml (expected failures, each with its reason):
// a failure not in it, or a baseline entry that passes, fails the run.

// envConformanceClient makes the test binary act as the conformance suite's client under test.
const envConformanceClient = "ZIDANE_CONFORMANCE_CLIENT"

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
	m := mcp.NewManager(mcp.Options{ProtocolVersion: version, BackoffMin: time.Millisecond})
	defer m.Close()
	srv := mcp.Server{Name: "conformance", Config: mcp.Config{Type: "http", URL: url}, Origin: mcp.OriginUser}
	p := m.Proc(srv, mcp.Use{})
	tools, err := p.Tools(ctx)
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
		if _, err := p.CallTool(ctx, c.Name, c.Arguments); err != nil {
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
			cmd.Env = append(os.Environ(), envConformanceClient+"=1")
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
