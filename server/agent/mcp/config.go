// Package mcp is the agent's Model Context Protocol client (issue 23), on the official Go SDK
// (github.com/modelcontextprotocol/go-sdk): the servers of the server user's ~/.zidane/mcps.json
// and of a project's <project>/.zidane/mcps.json (Config, Load, Merge), their supervised
// processes and connections (Manager, Proc), and their tools as the agent's tools
// (mcp__<server>__<tool>, ToolName).
//
// # Protocol versions
//
// The SDK (v1.8.0) speaks 2026-07-28 and 2025-11-25, 2025-06-18, 2025-03-26 and 2024-11-05.
// Connect first tries the stateless 2026-07-28 handshake (SEP-2575 server/discover, then
// subscriptions/listen for list_changed notifications); a server that does not answer it gets the
// legacy initialize handshake at 2025-11-25, and the server's answer picks the version from there.
// What the SDK does of 2026-07-28: server/discover, per-request _meta protocol version and client
// info, multi round-trip requests (its MultiRoundTrip middleware, on by default, answers a
// server's input-required result through the client's elicitation and sampling handlers and
// retries the call), subscriptions/listen for list_changed, the deprecations of SEP-2577
// (sampling, roots, logging still work). What it does not: keepalive pings (its KeepAlive is for
// versions before 2026-07-28 only), and no client-side session resumption across a restarted
// stdio process (a restarted process is a new session here). This client advertises no roots,
// elicitation or sampling capability yet (issue 23 leaves elicitation for later), so a server's
// input-required round trip or elicitation request is refused by the SDK as unsupported.
// NegotiatedVersion reports what a connection settled on.
//
// The package imports nothing of the transport; the agent (server/agent) turns its tools into
// tool calls under approvals.
package mcp

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/zidane-server/zidane/protocol"
)

// Scope values: where a stdio server's process runs.
const (
	// ScopeContext (the default) runs the process inside the session's sandbox, under its policy.
	ScopeContext = "context"
	// ScopeHost runs it as the server's user, outside the sandbox (user file or admin only).
	ScopeHost = "host"
)

// Origin values: which file a server came from.
const (
	// OriginUser is the server user's ~/.zidane/mcps.json.
	OriginUser = "user"
	// OriginProject is <project>/.zidane/mcps.json (written by the agent or a clone's author).
	OriginProject = "project"
)

// FileName is the config file's name under a .zidane folder.
const FileName = "mcps.json"

// Config is one server's entry in mcps.json, in the format other hosts use (Claude Code, Cursor):
// {"command", "args", "env"} for stdio, {"type": "http", "url", "headers"} for streamable HTTP,
// plus this server's own fields scope and shared.
type Config struct {
	// Type is "stdio" (the default when command is set) or "http" (also "streamable-http").
	Type string `json:"type,omitempty"`
	// Command and Args are the stdio process's argv; Env adds to its environment.
	Command string            `json:"command,omitempty"`
	Args    []string          `json:"args,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	// URL and Headers reach a streamable HTTP server.
	URL     string            `json:"url,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
	// Scope is where a stdio process runs: ScopeContext (default) or ScopeHost.
	Scope string `json:"scope,omitempty"`
	// Shared: absent or true, one process serves the sessions of one project and policy; false,
	// one per session.
	Shared *bool `json:"shared,omitempty"`
}

// IsHTTP reports whether c is a streamable HTTP server.
func (c Config) IsHTTP() bool {
	t := strings.ToLower(c.Type)
	return t == "http" || t == "streamable-http" || t == "streamablehttp" || (t == "" && c.Command == "" && c.URL != "")
}

// EffectiveScope is c's scope with the default applied.
func (c Config) EffectiveScope() string {
	if c.Scope == "" {
		return ScopeContext
	}
	return c.Scope
}

// IsShared reports whether the process is shared (an absent shared means shared).
func (c Config) IsShared() bool { return c.Shared == nil || *c.Shared }

// Hash is the SHA-256 (hex) of the server's name and config in canonical JSON: what a project
// server's stored approval is keyed by, so a changed config asks again.
func Hash(name string, c Config) string {
	b, _ := protocol.Marshal(struct {
		Name   string `json:"name"`
		Config Config `json:"config"`
	}{name, c})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// Server is one configured server after merging.
type Server struct {
	// Name is its key in mcpServers.
	Name string
	// Config is its entry, with what a project file may not set removed.
	Config Config
	// Origin is OriginUser or OriginProject; File is the file it came from.
	Origin, File string
	// Hash is Hash(Name, Config).
	Hash string
}

// Target is what the process runs: the command line or the URL, for approvals and the catalog.
func (s Server) Target() string {
	if s.Config.IsHTTP() {
		return s.Config.URL
	}
	return strings.TrimSpace(s.Config.Command + " " + strings.Join(s.Config.Args, " "))
}

// ConfigError is a problem with one file or one server entry; the catalog lists them.
type ConfigError struct {
	// File is the config file; Server the entry ("" for the whole file).
	File, Server string
	// Msg says what is wrong and what happens (e.g. "ignored").
	Msg string
}

func (e ConfigError) Error() string {
	if e.Server == "" {
		return e.File + ": " + e.Msg
	}
	return fmt.Sprintf("%s: server %q: %s", e.File, e.Server, e.Msg)
}

// File is the document of an mcps.json.
type File struct {
	// MCPServers holds the entries by name.
	MCPServers map[string]json.RawMessage `json:"mcpServers"`
}

// knownFields are the entry fields this server reads; guardFields are fields other hosts use to
// skip approvals or widen a sandbox, which a project file may never set (and which this server
// does not honour from any file).
var (
	knownFields = map[string]bool{"type": true, "command": true, "args": true, "env": true, "url": true, "headers": true,
		"scope": true, "shared": true, "description": true, "cwd": true, "disabled": true}
	guardFields = map[string]bool{"autoApprove": true, "alwaysAllow": true, "trust": true, "sandbox": true, "network": true,
		"policy": true, "approved": true, "allowedTools": true, "dangerouslySkipPermissions": true}
)

// IsKnownField reports whether an mcps.json entry field is one this server reads (the Claude
// Code import copies those and leaves the rest out).
func IsKnownField(name string) bool { return knownFields[name] }

// LoadFile reads one mcps.json. A missing file is no servers and no error; a file that is not
// valid JSON is one ConfigError and no servers. Entries come back sorted by name.
func LoadFile(path string) (map[string]Config, map[string]map[string]bool, []ConfigError) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, []ConfigError{{File: path, Msg: "not read: " + err.Error()}}
	}
	return ParseFile(path, b)
}

// ParseFile parses an mcps.json's bytes (path names it in errors): the entries, each entry's
// fields as written (for the guard checks), and the problems found.
func ParseFile(path string, b []byte) (map[string]Config, map[string]map[string]bool, []ConfigError) {
	var f File
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, nil, []ConfigError{{File: path, Msg: protocol.DecodeErrorText("the file", err) + "; no server of this file runs until it is fixed"}}
	}
	out := map[string]Config{}
	fields := map[string]map[string]bool{}
	var errs []ConfigError
	for _, name := range sortedKeys(f.MCPServers) {
		raw := f.MCPServers[name]
		var c Config
		dec := json.NewDecoder(bytes.NewReader(raw))
		if err := dec.Decode(&c); err != nil {
			errs = append(errs, ConfigError{File: path, Server: name, Msg: "not a valid entry (" + protocol.DecodeErrorText("the entry", err) + "); ignored"})
			continue
		}
		var m map[string]json.RawMessage
		_ = json.Unmarshal(raw, &m)
		fs := map[string]bool{}
		for k := range m {
			fs[k] = true
		}
		if string(m["disabled"]) == "true" {
			continue
		}
		if msg := validName(name); msg != "" {
			errs = append(errs, ConfigError{File: path, Server: name, Msg: msg + "; ignored"})
			continue
		}
		if !c.IsHTTP() && c.Command == "" {
			errs = append(errs, ConfigError{File: path, Server: name, Msg: `has neither "command" (stdio) nor "type": "http" with "url"; ignored`})
			continue
		}
		if s := c.Scope; s != "" && s != ScopeContext && s != ScopeHost {
			errs = append(errs, ConfigError{File: path, Server: name, Msg: fmt.Sprintf("scope %q is neither %q nor %q; ignored", s, ScopeContext, ScopeHost)})
			continue
		}
		out[name] = c
		fields[name] = fs
	}
	return out, fields, errs
}

func validName(name string) string {
	if name == "" || len(name) > 128 {
		return "a server's name must be 1 to 128 characters"
	}
	for _, r := range name {
		if r < 0x20 || r == 0x7f {
			return "a server's name may not hold control characters"
		}
	}
	return ""
}

// Merge merges the user file's servers with the project file's, the project's winning by name.
// From a project file (written by the agent or by whoever wrote a cloned repository), scope host,
// HTTP servers (reached from the host's network) and any guard-loosening field are not honoured:
// such an entry is ignored and listed as an error. Servers come back sorted by name.
func Merge(userFile string, user map[string]Config, userFields map[string]map[string]bool,
	projectFile string, project map[string]Config, projectFields map[string]map[string]bool) ([]Server, []ConfigError) {
	by := map[string]Server{}
	var errs []ConfigError
	for name, c := range user {
		for _, f := range sortedKeys(userFields[name]) {
			if guardFields[f] {
				errs = append(errs, ConfigError{File: userFile, Server: name, Msg: fmt.Sprintf("field %q is not honoured by this server (every call asks under the session's approval mode)", f)})
			}
		}
		by[name] = Server{Name: name, Config: c, Origin: OriginUser, File: userFile, Hash: Hash(name, c)}
	}
	for _, name := range sortedKeys(project) {
		c := project[name]
		var bad []string
		if c.IsHTTP() {
			bad = append(bad, "an HTTP server (reached from the host's network) is honoured only from the server user's file or an admin's mcp.upsert")
		}
		if c.EffectiveScope() == ScopeHost {
			bad = append(bad, `scope "host" (outside the sandbox) is honoured only from the server user's file or an admin's mcp.upsert`)
		}
		for _, f := range sortedKeys(projectFields[name]) {
			if guardFields[f] {
				bad = append(bad, fmt.Sprintf("field %q would loosen a guard, which a project file may not", f))
			}
		}
		if len(bad) > 0 {
			errs = append(errs, ConfigError{File: projectFile, Server: name, Msg: strings.Join(bad, "; ") + "; ignored"})
			continue
		}
		by[name] = Server{Name: name, Config: c, Origin: OriginProject, File: projectFile, Hash: Hash(name, c)}
	}
	out := make([]Server, 0, len(by))
	for _, n := range sortedKeys(by) {
		out = append(out, by[n])
	}
	return out, errs
}

// UserFile is the server user's mcps.json under home.
func UserFile(home string) string { return filepath.Join(home, ".zidane", FileName) }

// ProjectFile is the project's mcps.json.
func ProjectFile(projectRoot string) string { return filepath.Join(projectRoot, ".zidane", FileName) }

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
