// Package oauthtest starts the local authorization server of the OAuth tests: e2e/oauth/as.mjs,
// the MCP TypeScript SDK's example authorization server (from the npm registry, installed by
// scripts/bootstrap.sh) and an MCP server it protects, both on 127.0.0.1.
package oauthtest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/zidane-server/zidane/protocol"
)

// AS is a running as.mjs: AS is the issuer ("http://127.0.0.1:PORT/"), MCP the protected MCP
// server's endpoint ("http://127.0.0.1:PORT/mcp").
type AS struct {
	AS  string `json:"as"`
	MCP string `json:"mcp"`
}

// Start runs as.mjs until t ends.
func Start(t testing.TB) AS {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	dir := filepath.Join(filepath.Dir(file), "..", "..", "..", "e2e", "oauth")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@modelcontextprotocol", "sdk")); err != nil {
		t.Fatalf("e2e/oauth has no node_modules: run scripts/bootstrap.sh --ts (%v)", err)
	}
	cmd := exec.Command("node", "as.mjs")
	cmd.Dir = dir
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { stdin.Close(); cmd.Wait() }) // as.mjs exits when its stdin closes
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err, "as.mjs printed no addresses")
	var a AS
	require.NoError(t, json.Unmarshal([]byte(line), &a), line)
	return a
}

// Config changes the server's behaviour: "iss" ("right", "wrong" or "none": the RFC 9207 iss
// it sends), "expiresIn" (seconds an access token lives).
func (a AS) Config(t testing.TB, cfg map[string]any) {
	t.Helper()
	b, _ := protocol.Marshal(cfg)
	resp, err := http.Post(a.AS+"test/config", "application/json", bytes.NewReader(b))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
}

// Log is what the server was asked: the resource (RFC 8707) of each authorization and token
// request, and each token request's grant.
type Log struct {
	Authorize []struct{ Resource, RedirectURI string } `json:"authorize"`
	Token     []struct{ Grant, Resource string }       `json:"token"`
}

// Log reads the server's log.
func (a AS) Log(t testing.TB) Log {
	t.Helper()
	resp, err := http.Get(a.AS + "test/log")
	require.NoError(t, err)
	defer resp.Body.Close()
	var l Log
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&l))
	return l
}
