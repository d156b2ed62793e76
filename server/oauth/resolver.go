package oauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// FileResolver resolves MCP servers from the server user's mcps.json at path (the format other
// hosts use: {"mcpServers": {"<name>": {"type": "http", "url": …, "oauth": {"clientId": …,
// "redirectUri": …, "scopes": […]}}}}), read at each call. Only that file is read: a project's
// mcps.json is written by whoever wrote the repository, so it names no server to sign in to
// (issue 23 §3). It is the stand-in until the MCP client (server/agent/mcp) resolves its merged
// configuration through Config.Resolve.
func FileResolver(path string) Resolver {
	return func(_ context.Context, name string) (Server, error) {
		b, err := os.ReadFile(path)
		if errors.Is(err, fs.ErrNotExist) {
			return Server{}, fmt.Errorf("no MCP server named %q: %s does not exist (add the server with mcp.upsert)", name, path)
		}
		if err != nil {
			return Server{}, err
		}
		var f struct {
			MCPServers map[string]struct {
				Type  string `json:"type"`
				URL   string `json:"url"`
				OAuth *struct {
					ClientID    string   `json:"clientId"`
					RedirectURI string   `json:"redirectUri"`
					Scopes      []string `json:"scopes"`
				} `json:"oauth"`
			} `json:"mcpServers"`
		}
		if err := json.Unmarshal(b, &f); err != nil {
			return Server{}, fmt.Errorf("%s: %w", path, err)
		}
		e, ok := f.MCPServers[name]
		if !ok {
			return Server{}, fmt.Errorf("no MCP server named %q in %s", name, path)
		}
		if e.URL == "" || (e.Type != "" && e.Type != "http" && e.Type != "streamable-http") {
			return Server{}, fmt.Errorf("MCP server %q is not an HTTP server: only those sign in with OAuth", name)
		}
		s := Server{Name: name, URL: e.URL}
		if e.OAuth != nil {
			s.ClientID, s.RedirectURI, s.Scopes = e.OAuth.ClientID, e.OAuth.RedirectURI, e.OAuth.Scopes
		}
		return s, nil
	}
}
