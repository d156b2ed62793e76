package agent

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/zidane-server/zidane/protocol"
	"github.com/zidane-server/zidane/server/agent/mcp"
	"github.com/zidane-server/zidane/server/agent/provider"
	"github.com/zidane-server/zidane/server/agent/tools"
	"github.com/zidane-server/zidane/server/store"
)

// mcpSessions keeps, per session, the MCP tools its latest turn offered (a call names one of
// them), and the session's answers on project servers (by server and config hash), so a session
// is asked once per server config: a deny leaves the server out of its later runs too.
type mcpSessions struct {
	mu      sync.Mutex
	tools   map[string]map[string]tools.MCPTool // session → agent name → tool
	decided map[string]bool                     // session, server, hash → allowed
}

// mcpOffersKey carries, in a run's context, which MCP servers the run's agent could offer a
// tool of (withMCPOffers); MCPSpecs neither starts nor asks for the others.
type mcpOffersKey struct{}

// withMCPOffers returns ctx carrying offers: whether the run would offer any tool whose name
// begins with prefix (mcp__<server>__).
func withMCPOffers(ctx context.Context, offers func(prefix string) bool) context.Context {
	return context.WithValue(ctx, mcpOffersKey{}, offers)
}

// mcpOffered reports whether the run of ctx would offer any tool of server (true without a
// filter: the tool host's direct callers).
func mcpOffered(ctx context.Context, server string) bool {
	f, ok := ctx.Value(mcpOffersKey{}).(func(string) bool)
	if !ok {
		return true
	}
	return f(strings.TrimSuffix(mcp.ToolName(server, "x"), "x"))
}

// maxMCPSessions bounds both maps; past it they start over.
const maxMCPSessions = 4096

// MCPServerTool is the approval request's tool name (and the safelist's) for starting a project
// file's MCP server; the safelist entry's prefix is the server config's SHA-256 (mcp.Hash), so a
// changed config asks again.
const MCPServerTool = "mcp-server"

// mcpListTimeout bounds starting one server and listing its tools before a turn.
const mcpListTimeout = 30 * time.Second

func (h *ToolHost) mcpTool(sessionID, name string) (tools.Tool, bool) {
	h.mcpSess.mu.Lock()
	defer h.mcpSess.mu.Unlock()
	t, ok := h.mcpSess.tools[sessionID][name]
	return t, ok
}

// MCPSpecs lists the MCP tools a session's turn offers (issue 23 items 2 and 3): the tools of
// every configured server for the session's project, each server started (or restarted) on
// first need and listed again after tools/list_changed. A server from the project's file is
// inert until approved: the first run that would offer its tools asks (approval:request naming
// the server, its command and the file), "always" stores the approval for the project keyed by
// the config's hash. In locked mode no project server is asked for. A server that fails to start
// is left out of the turn (the catalog shows why).
func (h *ToolHost) MCPSpecs(ctx context.Context, x store.Session, runID string, origin Origin) []provider.Tool {
	if h.MCP == nil {
		return nil
	}
	servers, _ := h.MCP.Servers(x.ProjectRoot)
	if len(servers) == 0 {
		h.setMCPTools(x.ID, nil)
		return nil
	}
	policy := ""
	if h.MCPPolicy != nil {
		policy = h.MCPPolicy(ctx, x.ID)
	}
	use := mcp.Use{SessionID: x.ID, ProjectRoot: x.ProjectRoot, Policy: policy}
	byName := map[string]tools.MCPTool{}
	var specs []provider.Tool
	for _, s := range servers {
		if !mcpOffered(ctx, s.Name) {
			continue // the run's agent offers none of its tools: not started, not asked for
		}
		if !h.projectServerAllowed(ctx, x, runID, origin, s) {
			continue
		}
		p := h.MCP.Proc(s, use)
		lctx, cancel := context.WithTimeout(ctx, mcpListTimeout)
		ts, err := p.Tools(lctx)
		cancel()
		if err != nil {
			h.log().Warn("mcp: server's tools not offered this turn", "server", s.Name, "err", err)
			continue
		}
		for _, t := range ts {
			mt := tools.MCPTool{Proc: p, Tool: t}
			n := mt.Name()
			if _, builtin := h.registry().Get(n); builtin {
				continue
			}
			if _, dup := byName[n]; dup {
				continue
			}
			byName[n] = mt
			sp := mt.Spec()
			specs = append(specs, provider.Tool{Name: sp.Name, Description: sp.Description, InputSchema: sp.InputSchema})
		}
	}
	h.setMCPTools(x.ID, byName)
	return specs
}

func (h *ToolHost) setMCPTools(sessionID string, m map[string]tools.MCPTool) {
	h.mcpSess.mu.Lock()
	defer h.mcpSess.mu.Unlock()
	if h.mcpSess.tools == nil || len(h.mcpSess.tools) >= maxMCPSessions {
		h.mcpSess.tools = map[string]map[string]tools.MCPTool{}
	}
	if m == nil {
		delete(h.mcpSess.tools, sessionID)
		return
	}
	h.mcpSess.tools[sessionID] = m
}

// projectServerAllowed applies the approval rule of project servers (user-file servers pass):
// one stored for the project ("always") allows it; otherwise the session's first run that would
// offer its tools asks, and the answer holds for the session's later runs while the config's
// hash is the same (a deny runs without its tools and is not asked again; a changed config asks
// again). Locked mode neither asks nor remembers.
func (h *ToolHost) projectServerAllowed(ctx context.Context, x store.Session, runID string, origin Origin, s mcp.Server) bool {
	if s.Origin != mcp.OriginProject {
		return true
	}
	key := x.ID + "\x00" + s.Name + "\x00" + s.Hash
	h.mcpSess.mu.Lock()
	d, ok := h.mcpSess.decided[key]
	h.mcpSess.mu.Unlock()
	if ok {
		return d
	}
	allowed, asked := h.askProjectServer(ctx, x, runID, origin, s)
	if asked && ctx.Err() == nil {
		h.mcpSess.mu.Lock()
		if h.mcpSess.decided == nil || len(h.mcpSess.decided) >= maxMCPSessions {
			h.mcpSess.decided = map[string]bool{}
		}
		h.mcpSess.decided[key] = allowed
		h.mcpSess.mu.Unlock()
	}
	return allowed
}

// askProjectServer answers whether project server s may start for the session: allowed by a
// stored approval (not remembered: a removed one asks again), or by the session's answer to the
// approval:request it asks (asked true).
func (h *ToolHost) askProjectServer(ctx context.Context, x store.Session, runID string, origin Origin, s mcp.Server) (allowed, asked bool) {
	storeTool := MCPServerTool + ":" + s.Name
	entries, err := h.Store.ListSafelist(ctx, x.ProjectRoot)
	if err != nil {
		h.log().Warn("mcp: the safelist could not be read; the project server stays inert", "server", s.Name, "err", err)
		return false, false
	}
	for _, e := range entries {
		if e.Tool == storeTool && e.Prefix == s.Hash {
			return true, false
		}
	}
	mode, err := h.Store.ApprovalMode(ctx, x.ID)
	if err != nil || mode == store.ModeLocked {
		return false, false
	}
	what, target := "command", s.Target()
	if s.Config.IsHTTP() {
		what = "url"
	}
	input, _ := protocol.Marshal(map[string]string{"server": s.Name, what: target, "file": s.File, "scope": s.Config.EffectiveScope(), "configSha256": s.Hash})
	req := protocol.ApprovalRequest{SessionID: x.ID, RunID: runID, CallID: MCPServerTool + ":" + s.Name, Tool: MCPServerTool, Input: input,
		Summary: fmt.Sprintf("Start MCP server %q from %s: %s", s.Name, s.File, target), Cwd: x.Cwd}
	out := h.Gate.RequestApproval(h.Gate.withParent(ctx, x), ApprovalAsk{Request: req, ProjectRoot: x.ProjectRoot, StoreTool: storeTool, StorePrefix: s.Hash, CanStore: true}, origin)
	return out.Allowed(), true
}
