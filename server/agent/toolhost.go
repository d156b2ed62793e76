package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/zidane-server/zidane/protocol"
	"github.com/zidane-server/zidane/server/agent/defs"
	"github.com/zidane-server/zidane/server/agent/mcp"
	"github.com/zidane-server/zidane/server/agent/provider"
	"github.com/zidane-server/zidane/server/agent/tools"
	"github.com/zidane-server/zidane/server/oneline"
	"github.com/zidane-server/zidane/server/store"
	"github.com/zidane-server/zidane/server/workspace"
)

// ToolHost runs a run's tool calls (issue 9): the registry's tools against the workspace, with
// the session's approval mode, the project's safelist and the Gate's approvals and questions in
// between. The run loop hands it every complete tool call (Do) and sends the result back to the
// model. Safe for concurrent use.
type ToolHost struct {
	// WS is the confinement point every path goes through. Required.
	WS *workspace.Workspace
	// Registry holds the tools offered; nil: tools.All().
	Registry *tools.Registry
	// Config holds the tools' limits and exec's Launcher (the sandbox's seam).
	Config tools.Config
	// Gate holds the approvals and questions. Required.
	Gate *Gate
	// Store reads modes and the safelist and keeps plans. Required.
	Store *store.Store
	// Reporter publishes plans:snapshot. Required.
	Reporter Reporter
	// Logger logs; default slog.Default().
	Logger *slog.Logger
	// MCP holds the configured MCP servers and their processes (issue 23); nil: no MCP tools.
	MCP *mcp.Manager
	// MCPPolicy names a session's sandbox policy, a sharing key of scope-context MCP processes
	// (nil: "").
	MCPPolicy func(ctx context.Context, sessionID string) string

	// Sampler runs an MCP server's sampling request on the session's model (Runtime.SampleText;
	// nil: sampling is refused).
	Sampler Sampler

	plans   planCache
	mcpSess mcpSessions
}

// planCache keeps sessions' stored plans in memory: every run publishes its session's
// plans:snapshot right after run:start, before its prompt, so a read there would put a Postgres
// round trip on the chat.send → user-prompt path (issue 10). The ToolHost is the plans' only
// writer (SetPlan writes through). Bounded: past maxCachedPlans it starts over.
type planCache struct {
	mu  sync.Mutex
	m   map[string]cachedPlan
	gen uint64 // bumped by every write: a read that raced one is not cached
}

type cachedPlan struct {
	raw json.RawMessage // nil: the session has no plan
	at  time.Time
}

const maxCachedPlans = 4096

func (c *planCache) get(sessionID string) (cachedPlan, uint64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, ok := c.m[sessionID]
	return p, c.gen, ok
}

// put caches p unless a write happened since gen was read (gen 0 with write: a write).
func (c *planCache) put(sessionID string, p cachedPlan, gen uint64, write bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if write {
		c.gen++
	} else if gen != c.gen {
		return
	}
	if c.m == nil || len(c.m) >= maxCachedPlans {
		c.m = map[string]cachedPlan{}
	}
	c.m[sessionID] = p
}

// ForgetPlan drops a deleted session's cached plan.
func (h *ToolHost) ForgetPlan(sessionID string) {
	h.plans.mu.Lock()
	delete(h.plans.m, sessionID)
	h.plans.gen++
	h.plans.mu.Unlock()
}

// storedPlanOf returns the session's stored plan (nil: none) and when it was written, from the
// cache or, on a miss, from the store.
func (h *ToolHost) storedPlanOf(ctx context.Context, sessionID string) (json.RawMessage, time.Time, error) {
	p, gen, ok := h.plans.get(sessionID)
	if ok {
		return p.raw, p.at, nil
	}
	raw, at, err := h.Store.SessionPlan(ctx, sessionID)
	if err != nil {
		return nil, time.Time{}, err
	}
	h.plans.put(sessionID, cachedPlan{raw: raw, at: at}, gen, false)
	return raw, at, nil
}

// HostCall is one tool call in its run.
type HostCall struct {
	// Session is the run's session (ID, ProjectRoot, Cwd).
	Session store.Session
	// RunID and TurnID place the call.
	RunID, TurnID string
	// Origin is the run's origin (passed back with the signals).
	Origin Origin
	// Call is the model's call.
	Call provider.ToolCall
	// Agent is the run's agent definition (nil: none narrows): its approval mode and sandbox
	// policy narrow the session's (defs.Agent.Narrow).
	Agent *defs.Agent
}

// mode is the approval mode a call runs under: the session's, narrowed by the run's agent.
func (tc HostCall) mode(session string) string {
	if tc.Agent == nil {
		return session
	}
	m, _ := tc.Agent.Narrow(session, "")
	return m
}

// HostResult is a call's result.
type HostResult struct {
	// Text is what the model reads (and the tool-result event shows).
	Text string
	// IsError marks a failure: the tool failed, was refused, denied, expired or withdrawn.
	IsError bool
	// Diff is the unified diff an edit made (tool-result events carry it), "" otherwise.
	Diff string
	// Sandbox is the sandbox policy exec's command ran under (tool-result events carry it), ""
	// otherwise.
	Sandbox string
	// Media are an MCP tool's images and audio (tool-result events carry them).
	Media []protocol.ToolResultMedia
}

func (h *ToolHost) registry() *tools.Registry {
	if h.Registry == nil {
		return tools.All()
	}
	return h.Registry
}

// Specs returns the tools for a provider request.
func (h *ToolHost) Specs() []provider.Tool {
	specs := h.registry().Specs()
	out := make([]provider.Tool, 0, len(specs))
	for _, s := range specs {
		out = append(out, provider.Tool{Name: s.Name, Description: s.Description, InputSchema: s.InputSchema})
	}
	return out
}

// Result texts the model reads when a call does not run.
const (
	msgWithdrawn = "The approval request was withdrawn because the run was cancelled; the call did not run (this is not a denial by the user)."
	msgDenied    = "The user denied this call; it did not run. Do not repeat it as it is: continue another way or ask the user with ask_user."
)

// inputOf is the call's arguments, "{}" when they are empty or not JSON.
func inputOf(call provider.ToolCall) json.RawMessage {
	if len(call.Arguments) == 0 || !json.Valid(call.Arguments) {
		return json.RawMessage("{}")
	}
	return call.Arguments
}

// Do runs one call: it checks the call, applies the session's mode and the safelist, asks for
// approval when needed (waiting on the Gate), checks again at use, and runs the tool. The result
// carries the unified diff of an edit. When ctx ends (a cancel) a pending approval or question is
// withdrawn, a running exec's process group killed, and the result says so.
func (h *ToolHost) Do(ctx context.Context, c HostCall) HostResult {
	call := c.Call
	input := inputOf(call)
	tool, known := h.registry().Get(call.Name)
	if !known {
		tool, known = h.mcpTool(c.Session.ID, call.Name)
	}
	if !known {
		return HostResult{Text: fmt.Sprintf("Unknown tool %q; the tools are: %s.", call.Name, strings.Join(h.registry().Names(), ", ")), IsError: true}
	}
	env := h.env(c)
	checked, err := tool.Check(ctx, env, input)
	if err != nil {
		return HostResult{Text: err.Error(), IsError: true}
	}
	res := h.gateAndRun(ctx, c, tool, checked, env, input)
	return HostResult{Text: res.Content, IsError: res.IsError, Diff: res.Diff, Sandbox: res.Sandbox, Media: res.Media}
}

// gateAndRun applies the approval rules to a checked call and runs it when they let it.
func (h *ToolHost) gateAndRun(ctx context.Context, tc HostCall, tool tools.Tool, checked *tools.Call, env *tools.Env, input json.RawMessage) *tools.Result {
	kind := tool.Kind()
	if kind == tools.KindEdit || kind == tools.KindExec || kind == tools.KindMCP {
		mode, err := h.Store.ApprovalMode(ctx, tc.Session.ID)
		if err != nil {
			return &tools.Result{Content: "The session's approval mode could not be read (" + err.Error() + "); the call did not run. Try again.", IsError: true}
		}
		mode = tc.mode(mode)
		if mode == store.ModeLocked {
			return lockedResult(tc.Call.Name)
		}
		ask, via, err := h.mustAsk(ctx, tc, kind, mode, checked)
		if err != nil {
			return &tools.Result{Content: "The safelist could not be read (" + err.Error() + "); the call did not run. Try again.", IsError: true}
		}
		if via != nil {
			// A call the safelist let through is a decision too: recorded like one (issue 22
			// item 5), by actor "safelist", naming the entry and its author.
			detail := fmt.Sprintf("allow %s (safelist %s %s by %s)", checked.Summary, via.Tool, via.Prefix, via.CreatedBy)
			if err := h.Store.AppendAudit(ctx, "safelist", store.AuditApproval, tc.Session.ID, detail); err != nil {
				h.log().Warn("audit: a safelisted call's entry was not written", "err", err)
			}
		}
		if ask {
			out := h.Gate.RequestApproval(h.Gate.withParent(ctx, tc.Session), h.approvalAsk(tc, checked, input), tc.Origin)
			switch {
			case ctx.Err() != nil || out.Resolution == protocol.ApprovalResolutionWithdrawn:
				return &tools.Result{Content: msgWithdrawn, IsError: true}
			case out.Resolution == protocol.ApprovalResolutionExpired:
				return &tools.Result{Content: fmt.Sprintf("Nobody answered the approval request within %s; it expired and counts as a denial. The call did not run.", h.Gate.Timeout()), IsError: true}
			case !out.Allowed():
				return &tools.Result{Content: msgDenied, IsError: true}
			}
			// Checked again at use: the mode may have been locked, and the path or folder may
			// have changed while the request waited (runtime cases R19, R24).
			if mode, err := h.Store.ApprovalMode(ctx, tc.Session.ID); err != nil || tc.mode(mode) == store.ModeLocked {
				if err != nil {
					return &tools.Result{Content: "The session's approval mode could not be read; the call did not run.", IsError: true}
				}
				return lockedResult(tc.Call.Name)
			}
			if _, err := tool.Check(ctx, env, input); err != nil {
				return &tools.Result{Content: "Approved, but refused when it was about to run: " + err.Error(), IsError: true}
			}
		}
	}
	if kind == tools.KindMCP {
		ctx = h.withHostCall(ctx, tc) // the server's elicitations during the call ask this session
	}
	res, err := tool.Run(ctx, env, input)
	if res == nil {
		res = &tools.Result{IsError: true}
		if err != nil {
			res.Content = "The call was stopped: " + err.Error()
		}
	}
	return res
}

func lockedResult(name string) *tools.Result {
	return &tools.Result{Content: fmt.Sprintf("Refused: the session's approval mode is locked (read-only), so %s does not run and nobody is asked. Continue with the read-only tools, or tell the user the change needs another mode.", name), IsError: true}
}

// mustAsk applies the mode and the safelist: writes into a git folder (.git, a bare repository)
// always ask; in auto-edit edits pass; otherwise a safelist entry of the project root for the
// tool (for exec: the parsed command's key) lets the call pass; via is that entry.
func (h *ToolHost) mustAsk(ctx context.Context, tc HostCall, kind tools.Kind, mode string, c *tools.Call) (ask bool, via *store.SafelistEntry, err error) {
	if c.GitMeta || c.AskAlways {
		return true, nil, nil
	}
	if kind == tools.KindEdit && mode == store.ModeAutoEdit {
		return false, nil, nil
	}
	entries, err := h.Store.ListSafelist(ctx, tc.Session.ProjectRoot)
	if err != nil {
		return true, nil, err
	}
	for i, e := range entries {
		if e.Tool != tc.Call.Name {
			continue
		}
		if kind == tools.KindExec {
			if c.Command != nil && e.Prefix != "" && c.Command.Matches(e.Prefix) {
				return false, &entries[i], nil
			}
			continue
		}
		if c.SafelistKey != "" && e.Prefix != c.SafelistKey {
			continue // an MCP tool's entry names its server and tool
		}
		return false, &entries[i], nil
	}
	return true, nil, nil
}

// approvalAsk builds the request shown for a call, and what "always" would store.
func (h *ToolHost) approvalAsk(tc HostCall, c *tools.Call, input json.RawMessage) ApprovalAsk {
	cwd := c.Cwd
	if cwd == "" {
		cwd = tc.Session.Cwd
	}
	req := protocol.ApprovalRequest{SessionID: tc.Session.ID, RunID: tc.RunID, CallID: tc.Call.ID, Tool: tc.Call.Name,
		Input: input, Summary: oneline.Line(c.Summary), Cwd: cwd}
	if c.Diff != "" {
		req.Diff = &c.Diff
	}
	if c.GitMeta {
		req.GitMeta = ptr(true)
	}
	a := ApprovalAsk{Request: req, ProjectRoot: tc.Session.ProjectRoot, StoreTool: tc.Call.Name, CanStore: true}
	switch {
	case c.Command != nil:
		key, why := c.Command.SafelistKey()
		a.StorePrefix, a.Note, a.CanStore = key, oneline.Line(why), key != ""
	case c.GitMeta:
		a.CanStore, a.Note = false, "writes into a repository's git folder (.git or a bare repository) ask every time"
	case c.AskAlways:
		a.CanStore, a.Note = false, oneline.Line(c.AskNote)
	case c.SafelistKey != "":
		a.StorePrefix = c.SafelistKey
	}
	return a
}

// env builds the tools' environment for a call.
func (h *ToolHost) env(tc HostCall) *tools.Env {
	cfg := h.Config
	return &tools.Env{WS: h.WS, Cwd: tc.Session.Cwd, SessionID: tc.Session.ID, Config: &cfg,
		Ask: func(ctx context.Context, q tools.Question) (*tools.Answer, error) {
			req := protocol.InteractionRequest{SessionID: tc.Session.ID, RunID: tc.RunID, CallID: tc.Call.ID, Prompt: q.Prompt,
				Options: q.Options, Multiple: q.Multiple, AllowText: q.AllowText}
			a, err := h.Gate.Ask(h.Gate.withParent(ctx, tc.Session), req, tc.Origin)
			if err != nil || a == nil {
				return nil, err
			}
			out := &tools.Answer{Choices: a.Choices}
			if a.Text != nil {
				out.Text = *a.Text
			}
			return out, nil
		},
		SetPlan: func(ctx context.Context, explanation string, steps []tools.PlanStep) error {
			return h.SetPlan(ctx, tc.Session.ID, tc.RunID, tc.Origin, explanation, steps)
		},
		NarrowSandbox: func(policy string) string {
			if tc.Agent == nil {
				return policy
			}
			_, p := tc.Agent.Narrow("", policy)
			return p
		},
	}
}

// storedPlan is the JSON kept in session_plans.
type storedPlan struct {
	ID          string           `json:"id"`
	Explanation string           `json:"explanation,omitempty"`
	Steps       []tools.PlanStep `json:"steps"`
}

// SetPlan replaces the session's plan and publishes plans:snapshot (runID "" for none).
func (h *ToolHost) SetPlan(ctx context.Context, sessionID, runID string, origin Origin, explanation string, steps []tools.PlanStep) error {
	id := uuid.NewString()
	if old, _, err := h.storedPlanOf(ctx, sessionID); err == nil && old != nil {
		var p storedPlan
		if json.Unmarshal(old, &p) == nil && p.ID != "" {
			id = p.ID
		}
	}
	if steps == nil {
		steps = []tools.PlanStep{}
	}
	b, err := protocol.Marshal(storedPlan{ID: id, Explanation: explanation, Steps: steps})
	if err != nil {
		return err
	}
	at, err := h.Store.SetSessionPlan(ctx, sessionID, b)
	if err != nil {
		h.ForgetPlan(sessionID) // the stored plan is not known now
		return err
	}
	h.plans.put(sessionID, cachedPlan{raw: b, at: at}, 0, true)
	return h.PublishPlan(ctx, sessionID, runID, origin)
}

// PlanSnapshot returns the session's plans as plans.get answers them.
func (h *ToolHost) PlanSnapshot(ctx context.Context, sessionID string) (protocol.PlanSnapshot, error) {
	snap := protocol.PlanSnapshot{Plans: []protocol.Plan{}}
	raw, at, err := h.storedPlanOf(ctx, sessionID)
	if err != nil || raw == nil {
		return snap, err
	}
	var p storedPlan
	if err := json.Unmarshal(raw, &p); err != nil {
		return snap, fmt.Errorf("stored plan of session %s: %w", sessionID, err)
	}
	plan := protocol.Plan{ID: p.ID, Steps: make([]protocol.PlanStep, 0, len(p.Steps)), UpdatedAt: at.UnixMilli()}
	if p.Explanation != "" {
		plan.Explanation = &p.Explanation
	}
	for _, s := range p.Steps {
		plan.Steps = append(plan.Steps, protocol.PlanStep{Title: s.Title, Status: protocol.PlanStepStatus(s.Status)})
	}
	snap.Plans = append(snap.Plans, plan)
	snap.Active = &plan.ID
	return snap, nil
}

// PublishPlan publishes plans:snapshot for the session (at a run's start, right after run:start,
// and on every change); runID "" for none.
func (h *ToolHost) PublishPlan(ctx context.Context, sessionID, runID string, origin Origin) error {
	snap, err := h.PlanSnapshot(ctx, sessionID)
	if err != nil {
		return err
	}
	sig := &protocol.PlansSnapshotSignal{SessionID: sessionID, Snapshot: snap}
	if runID != "" {
		sig.RunID = &runID
	}
	_, err = h.Reporter.Publish(sig, origin)
	return err
}

func (h *ToolHost) log() *slog.Logger {
	if h.Logger != nil {
		return h.Logger
	}
	return slog.Default()
}
