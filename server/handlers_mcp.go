package server

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/zidane-server/zidane/protocol"
	"github.com/zidane-server/zidane/server/agent"
	"github.com/zidane-server/zidane/server/agent/mcp"
	"github.com/zidane-server/zidane/server/store"
)

// The mcp and catalog groups (issue 23 item 4; schema/mcp.json, schema/catalog.json).

// Mcp implements protocol.Handlers.
func (h *handlers) Mcp() protocol.McpHandler { return mcpHandler{h.s} }

// Catalog implements protocol.Handlers.
func (h *handlers) Catalog() protocol.CatalogHandler { return catalogHandler{h.s} }

type mcpHandler struct{ s *Server }

type catalogHandler struct{ s *Server }

// mcpTests keeps each server's last mcp.test, by name and config hash (bounded).
type mcpTests struct {
	mu sync.Mutex
	m  map[string]protocol.McpTest
}

const maxMCPTests = 1024

func (t *mcpTests) get(k string) (protocol.McpTest, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	v, ok := t.m[k]
	return v, ok
}

func (t *mcpTests) put(k string, v protocol.McpTest) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil || len(t.m) >= maxMCPTests {
		t.m = map[string]protocol.McpTest{}
	}
	t.m[k] = v
}

// mcpMaxResourceBytes bounds what mcp.readResource answers.
const mcpMaxResourceBytes = 4 << 20

// callerScope is the calling connection's scope and whether it is admin.
func callerScope(ctx context.Context) (string, bool) {
	c := connFrom(ctx)
	if c == nil {
		return "", false
	}
	return string(c.scope), c.scope == protocol.ScopeAdmin
}

func needAdmin(ctx context.Context, what string) error {
	scope, admin := callerScope(ctx)
	if admin {
		return nil
	}
	return protocol.NewForbiddenError(what+" needs an admin token; a chat token may add a stdio server with scope context to a project.",
		&protocol.ForbiddenErrorData{Needed: string(protocol.ScopeAdmin), Scope: scope})
}

// mcpFile resolves a change's target file: the user's, or the project's of cwd (with its root).
func (s *Server) mcpFile(ctx context.Context, target protocol.McpTarget, cwd *string) (file, root string, err error) {
	switch target {
	case protocol.McpTargetUser:
		if err := needAdmin(ctx, "Changing the server user's mcps.json"); err != nil {
			return "", "", err
		}
		if s.mcp.UserFile() == "" {
			return "", "", protocol.NewHandlerFailedError("This server reads no user mcps.json (started with it off); use target project.")
		}
		return s.mcp.UserFile(), "", nil
	case protocol.McpTargetProject:
		if cwd == nil || *cwd == "" {
			return "", "", protocol.NewInvalidParamsError("params/cwd: target project needs cwd, a folder of the project in the workspace roots.", &protocol.InvalidParamsErrorData{Pointer: "/cwd"})
		}
		root, _, err := s.resolveCwd(*cwd)
		if err != nil {
			return "", "", err
		}
		return mcp.ProjectFile(root), root, nil
	}
	return "", "", protocol.NewInvalidParamsError(fmt.Sprintf("params/target: %q is neither user nor project.", target), &protocol.InvalidParamsErrorData{Pointer: "/target"})
}

// rewriteMCPs changes one entry of an mcps.json (entry nil removes it), keeping its other
// entries and fields, and writes it atomically: the project's through the workspace (confined to
// the roots), the user's beside itself. It reports whether the entry was there.
func (s *Server) rewriteMCPs(file, root, name string, entry json.RawMessage) (bool, error) {
	var old []byte
	var err error
	if root != "" {
		old, _, _, err = s.ws.ReadFile(root, filepath.Join(".zidane", mcp.FileName), 1<<20)
	} else {
		old, err = os.ReadFile(file)
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, protocol.NewHandlerFailedError(fmt.Sprintf("%s could not be read: %v", file, err))
	}
	doc := map[string]json.RawMessage{}
	servers := map[string]json.RawMessage{}
	if len(old) > 0 {
		if err := json.Unmarshal(old, &doc); err != nil {
			return false, protocol.NewHandlerFailedError(fmt.Sprintf("%s: %s; fix or remove it first, it is not overwritten.", file, protocol.DecodeErrorText("the file", err)))
		}
		if raw, ok := doc["mcpServers"]; ok {
			if err := json.Unmarshal(raw, &servers); err != nil {
				return false, protocol.NewHandlerFailedError(fmt.Sprintf("%s: %s; fix it first.", file, protocol.DecodeErrorText("mcpServers", err)))
			}
		}
	}
	_, had := servers[name]
	if entry == nil {
		if !had {
			return false, nil
		}
		delete(servers, name)
	} else {
		servers[name] = entry
	}
	sb, err := protocol.Marshal(servers)
	if err != nil {
		return had, err
	}
	doc["mcpServers"] = sb
	out, err := protocol.Marshal(doc)
	if err != nil {
		return had, err
	}
	if root != "" {
		if _, err := s.ws.WriteFile(root, filepath.Join(".zidane", mcp.FileName), out, 0o644); err != nil {
			return had, protocol.NewHandlerFailedError(fmt.Sprintf("%s could not be written: %v", file, err))
		}
	} else {
		if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
			return had, protocol.NewHandlerFailedError(fmt.Sprintf("%s could not be written: %v", file, err))
		}
		tmp := file + ".tmp"
		if err := os.WriteFile(tmp, out, 0o600); err != nil {
			return had, protocol.NewHandlerFailedError(fmt.Sprintf("%s could not be written: %v", file, err))
		}
		if err := os.Rename(tmp, file); err != nil {
			_ = os.Remove(tmp)
			return had, protocol.NewHandlerFailedError(fmt.Sprintf("%s could not be written: %v", file, err))
		}
	}
	s.mcp.Invalidate(file)
	s.mcp.Drop(name)
	return had, nil
}

// Upsert implements mcp.upsert.
func (h mcpHandler) Upsert(ctx context.Context, p *protocol.McpUpsertParams) (*protocol.McpUpsertResult, error) {
	entry, err := protocol.Marshal(p.Server)
	if err != nil {
		return nil, err
	}
	doc, _ := protocol.Marshal(map[string]any{"mcpServers": map[string]json.RawMessage{p.Name: entry}})
	parsed, _, perrs := mcp.ParseFile("params", doc)
	if len(perrs) > 0 {
		return nil, protocol.NewInvalidParamsError("params/server: "+perrs[0].Msg, &protocol.InvalidParamsErrorData{Pointer: "/server"})
	}
	c := parsed[p.Name]
	if c.IsHTTP() {
		if err := needAdmin(ctx, "An HTTP MCP server (reached from the host's network)"); err != nil {
			return nil, err
		}
	} else if c.EffectiveScope() == mcp.ScopeHost {
		if err := needAdmin(ctx, "A stdio MCP server with scope host (outside the sandbox)"); err != nil {
			return nil, err
		}
	}
	file, root, err := h.s.mcpFile(ctx, p.Target, p.Cwd)
	if err != nil {
		return nil, err
	}
	if p.ClientSecret != nil {
		// The secret goes to the credential store, never to the file (seed "mcp"; issue 23 §5).
		if err := needAdmin(ctx, "An OAuth client secret"); err != nil {
			return nil, err
		}
		if !c.IsHTTP() || p.Target != protocol.McpTargetUser {
			return nil, protocol.NewInvalidParamsError("params/clientSecret goes with an HTTP server of the user file (target user); a stdio or project server signs in to nothing.", &protocol.InvalidParamsErrorData{Pointer: "/clientSecret"})
		}
		if err := h.s.needCreds(); err != nil {
			return nil, err
		}
		if err := h.s.creds.PutClientSecret(ctx, p.Name, *p.ClientSecret); err != nil {
			return nil, storeErr(err, "params/name")
		}
	}
	if _, err := h.s.rewriteMCPs(file, root, p.Name, entry); err != nil {
		return nil, err
	}
	hash := mcp.Hash(p.Name, c)
	if _, admin := callerScope(ctx); admin && root != "" {
		// An admin's upsert of a project server counts as its approval.
		if _, err := h.s.store.AddSafelist(ctx, store.SafelistEntry{ProjectRoot: root, Tool: agent.MCPServerTool + ":" + p.Name, Prefix: hash, CreatedBy: actorOf(ctx)}, ""); err != nil {
			return nil, storeErr(err, "")
		}
	}
	return &protocol.McpUpsertResult{File: file, ConfigSha256: hash}, nil
}

// Remove implements mcp.remove.
func (h mcpHandler) Remove(ctx context.Context, p *protocol.McpRemoveParams) (*protocol.McpRemoveResult, error) {
	file, root, err := h.s.mcpFile(ctx, p.Target, p.Cwd)
	if err != nil {
		return nil, err
	}
	had, err := h.s.rewriteMCPs(file, root, p.Name, nil)
	if err != nil {
		return nil, err
	}
	if had && p.Target == protocol.McpTargetUser && h.s.creds != nil {
		// its pre-registered client's secret goes with it
		if err := h.s.creds.PutClientSecret(ctx, p.Name, ""); err != nil {
			return nil, storeErr(err, "params/name")
		}
	}
	return &protocol.McpRemoveResult{Removed: had}, nil
}

// mcpRoot is the project of cwd, or without it the default project (the first workspace root,
// as agents.list and a new session use): whose .zidane/mcps.json joins the user file's.
func (s *Server) mcpRoot(cwd *string) (string, error) {
	c := ""
	if cwd != nil {
		c = *cwd
	}
	root, _, err := s.resolveCwd(c)
	return root, err
}

// mcpServer finds a configured server for the project of cwd (absent: the default project) and
// applies the approval rule: a project server not yet approved is started only for an admin.
func (s *Server) mcpServer(ctx context.Context, name string, cwd *string) (mcp.Server, string, error) {
	root, err := s.mcpRoot(cwd)
	if err != nil {
		return mcp.Server{}, "", err
	}
	servers, _ := s.mcp.Servers(root)
	for _, srv := range servers {
		if srv.Name != name {
			continue
		}
		if srv.Origin == mcp.OriginProject {
			ok, err := s.mcpApproved(ctx, root, srv)
			if err != nil {
				return srv, root, storeErr(err, "")
			}
			if !ok {
				if err := needAdmin(ctx, "Starting a project's MCP server that no approval allowed yet"); err != nil {
					return srv, root, protocol.NewForbiddenError(fmt.Sprintf("The project's MCP server %q has no approval for its current config: approve it when a run asks, or call as admin.", name),
						&protocol.ForbiddenErrorData{Needed: string(protocol.ScopeAdmin), Scope: func() string { sc, _ := callerScope(ctx); return sc }()})
				}
			}
		}
		return srv, root, nil
	}
	return mcp.Server{}, root, protocol.NewInvalidParamsError(fmt.Sprintf("params/name: no MCP server %q is configured here; catalog.mcps lists them.", name), &protocol.InvalidParamsErrorData{Pointer: "/name"})
}

func (s *Server) mcpApproved(ctx context.Context, root string, srv mcp.Server) (bool, error) {
	entries, err := s.store.ListSafelist(ctx, root)
	if err != nil {
		return false, err
	}
	for _, e := range entries {
		if e.Tool == agent.MCPServerTool+":"+srv.Name && e.Prefix == srv.Hash {
			return true, nil
		}
	}
	return false, nil
}

// mcpProc is the process mcp.test and the resource methods use: the server's default sandbox
// policy, no session.
func (s *Server) mcpProc(srv mcp.Server, root string) *mcp.Proc {
	return s.mcp.Proc(srv, mcp.Use{ProjectRoot: root, Policy: string(s.cfg.Sandbox.Default)})
}

func mcpTools(srv string, ts []*sdk.Tool) []protocol.McpTool {
	out := make([]protocol.McpTool, 0, len(ts))
	for _, t := range ts {
		mt := protocol.McpTool{Name: t.Name, AgentName: mcp.ToolName(srv, t.Name)}
		if t.Description != "" {
			d := t.Description
			mt.Description = &d
		}
		if t.Annotations != nil && t.Annotations.ReadOnlyHint {
			mt.ReadOnlyHint = ptr(true)
		}
		out = append(out, mt)
	}
	return out
}

// Test implements mcp.test.
func (h mcpHandler) Test(ctx context.Context, p *protocol.McpTestParams) (*protocol.McpTest, error) {
	srv, root, err := h.s.mcpServer(ctx, p.Name, p.Cwd)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	proc := h.s.mcpProc(srv, root)
	tctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	ts, err := proc.Tools(tctx)
	cancel()
	res := protocol.McpTest{OK: err == nil, At: start.UnixMilli(), DurationMs: time.Since(start).Milliseconds(), Tools: mcpTools(srv.Name, ts)}
	if v := proc.NegotiatedVersion(); v != "" {
		res.ProtocolVersion = &v
	}
	if err != nil {
		msg := err.Error()
		res.Error = &msg
	}
	h.s.mcpTests.put(srv.Name+"\x00"+srv.Hash, res)
	return &res, nil
}

// Resources implements mcp.resources.
func (h mcpHandler) Resources(ctx context.Context, p *protocol.McpResourcesParams) (*protocol.McpResourcesResult, error) {
	srv, root, err := h.s.mcpServer(ctx, p.Name, p.Cwd)
	if err != nil {
		return nil, err
	}
	rs, err := h.s.mcpProc(srv, root).Resources(ctx)
	if err != nil {
		return nil, protocol.NewHandlerFailedError(fmt.Sprintf("MCP server %q: resources/list failed: %v", p.Name, err))
	}
	out := &protocol.McpResourcesResult{Resources: make([]protocol.McpResource, 0, len(rs))}
	for _, r := range rs {
		out.Resources = append(out.Resources, protocol.McpResource{URI: r.URI, Name: r.Name, Title: optStr(r.Title), Description: optStr(r.Description), MimeType: optStr(r.MIMEType)})
	}
	return out, nil
}

// ReadResource implements mcp.readResource.
func (h mcpHandler) ReadResource(ctx context.Context, p *protocol.McpReadResourceParams) (*protocol.McpReadResourceResult, error) {
	srv, root, err := h.s.mcpServer(ctx, p.Name, p.Cwd)
	if err != nil {
		return nil, err
	}
	rr, err := h.s.mcpProc(srv, root).ReadResource(ctx, p.URI)
	if err != nil {
		return nil, protocol.NewHandlerFailedError(fmt.Sprintf("MCP server %q: resources/read %s failed: %v", p.Name, p.URI, err))
	}
	out := &protocol.McpReadResourceResult{Contents: make([]protocol.McpResourceContents, 0, len(rr.Contents))}
	total := 0
	for _, c := range rr.Contents {
		total += len(c.Text) + len(c.Blob)
		if total > mcpMaxResourceBytes {
			return nil, protocol.NewHandlerFailedError(fmt.Sprintf("The resource %s is larger than %d bytes; read it from the tool that uses it instead.", p.URI, mcpMaxResourceBytes))
		}
		rc := protocol.McpResourceContents{URI: c.URI, MimeType: optStr(c.MIMEType)}
		if len(c.Blob) > 0 {
			b := base64.StdEncoding.EncodeToString(c.Blob)
			rc.Blob = &b
		} else {
			t := c.Text
			rc.Text = &t
		}
		out.Contents = append(out.Contents, rc)
	}
	return out, nil
}

func optStr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// Mcps implements catalog.mcps.
func (h catalogHandler) Mcps(ctx context.Context, p *protocol.CatalogMcpsParams) (*protocol.CatalogMcpsResult, error) {
	root, err := h.s.mcpRoot(p.Cwd)
	if err != nil {
		return nil, err
	}
	servers, errs := h.s.mcp.Servers(root)
	out := &protocol.CatalogMcpsResult{Servers: make([]protocol.McpRow, 0, len(servers)), Errors: make([]protocol.McpConfigError, 0, len(errs))}
	for _, e := range errs {
		out.Errors = append(out.Errors, protocol.McpConfigError{File: e.File, Server: optStr(e.Server), Message: e.Msg})
	}
	procs := h.s.mcp.Procs()
	for _, srv := range servers {
		row := protocol.McpRow{Name: srv.Name, Origin: srv.Origin, File: srv.File, Transport: "stdio", Shared: h.s.mcp.Shared(srv),
			ConfigSha256: srv.Hash, Status: protocol.McpStatusIdle, SignIn: protocol.McpSignInNone, Tools: []protocol.McpTool{}, Errors: []string{}}
		if srv.Config.IsHTTP() {
			row.Transport, row.URL, row.SignIn = "http", optStr(srv.Config.URL), protocol.McpSignInUnknown
		} else {
			row.Command = optStr(srv.Target())
			sc := protocol.McpScope(srv.Config.EffectiveScope())
			row.Scope = &sc
		}
		if srv.Origin == mcp.OriginProject {
			ok, err := h.s.mcpApproved(ctx, root, srv)
			if err != nil {
				return nil, storeErr(err, "")
			}
			row.Approved = &ok
			if !ok {
				row.Status = protocol.McpStatusInert
			}
		}
		// The process that says most: a running one, else the latest known.
		for _, pr := range procs {
			if pr.Server().Name != srv.Name || pr.Server().Hash != srv.Hash {
				continue
			}
			st := pr.Status()
			if row.Status == protocol.McpStatusRunning && st.State != "running" {
				continue
			}
			row.Status = protocol.McpStatus(st.State)
			row.Restarts, row.Stderr = st.Restarts, st.Stderr
			row.ProtocolVersion = optStr(st.ProtocolVersion)
			row.Errors = []string{}
			if st.LastError != "" {
				row.Errors = append(row.Errors, st.LastError)
			}
			if ts := pr.LastTools(); ts != nil {
				row.Tools = mcpTools(srv.Name, ts)
			}
		}
		if t, ok := h.s.mcpTests.get(srv.Name + "\x00" + srv.Hash); ok {
			row.LastTest = &t
			if len(row.Tools) == 0 {
				row.Tools = t.Tools
			}
		}
		if srv.Config.IsHTTP() && srv.Origin == mcp.OriginUser && h.s.oauth != nil {
			if in, err := h.s.oauth.SignedIn(ctx, srv.Name); err != nil {
				row.Errors = append(row.Errors, "sign-in state: "+err.Error())
			} else if in {
				row.SignIn = protocol.McpSignInSignedIn
			}
		}
		out.Servers = append(out.Servers, row)
	}
	return out, nil
}

// Models implements catalog.models: what models.list knows.
func (h catalogHandler) Models(ctx context.Context, _ *protocol.CatalogModelsParams) (*protocol.CatalogModelsResult, error) {
	r, err := modelsHandler(h).List(ctx, &protocol.ModelsListParams{})
	if err != nil {
		return nil, err
	}
	return &protocol.CatalogModelsResult{Models: r.Models, Default: r.Default}, nil
}
