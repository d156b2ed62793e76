package agent

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/zidane-server/zidane/protocol"
	"github.com/zidane-server/zidane/server/agent/defs"
	"github.com/zidane-server/zidane/server/agent/provider"
	"github.com/zidane-server/zidane/server/agent/provider/scripted"
	"github.com/zidane-server/zidane/server/store"
)

// ToolCall is one tool call a run asks its ToolRunner to execute: the call as the model made it,
// and the run it belongs to.
type ToolCall struct {
	// Session is the session's state when its run started (cwd, project root, model).
	Session store.Session
	// RunID and TurnID name the run and the model turn that made the call.
	RunID, TurnID string
	// Origin is the run's Origin (the connection that sent the prompt), for approvals.
	Origin Origin
	// Call is the model's call: id, tool name and arguments (a JSON object).
	Call provider.ToolCall
	// Agent is the run's agent definition; it narrows the session's approval mode and sandbox.
	Agent *defs.Agent
}

// ToolResult is what a tool call gave back to the model.
type ToolResult struct {
	// Text is the result the model reads (and the tool-result event shows).
	Text string
	// IsError marks a failure (the tool failed, was denied, was cancelled).
	IsError bool
	// Diff is the unified diff an edit made ("" otherwise); the tool-result event carries it.
	Diff string
	// Sandbox is the sandbox policy exec's command ran under ("" otherwise); the tool-result
	// event carries it.
	Sandbox string
	// Media are an MCP tool's images and audio; the tool-result event carries them.
	Media []protocol.ToolResultMedia
}

// ToolRunner is the run loop's seam to the tools (server/agent/tools implements the real ones).
type ToolRunner interface {
	// Tools lists the tools offered to the model in session x, with their input JSON Schemas.
	Tools(x store.Session) []provider.Tool
	// Run executes one call and returns its result; an unknown tool or bad arguments are an
	// error result, never a panic. It must return soon after ctx ends (cancel, shutdown, the wall
	// time limit); the run then records the result it returned.
	Run(ctx context.Context, c ToolCall) ToolResult
}

// ToolGate is the hook point before a call runs (approvals): Check blocks until the call may run
// (ok) or must not (ok false, with a result the model gets, e.g. "denied by the user"). A gate
// that waits for a person must end its wait when ctx ends.
type ToolGate interface {
	Check(ctx context.Context, c ToolCall) (ok bool, denied ToolResult)
}

// RunStarter is an optional interface of a ToolRunner: RunStarted is called right after a run's
// run:start (and before its prompt), e.g. to publish the session's plans:snapshot in the seed's
// run order.
type RunStarter interface {
	RunStarted(ctx context.Context, sessionID, runID string, origin Origin)
}

// TurnTools is an optional interface of a ToolRunner: tools listed again before each model turn
// of a run (MCP servers' tools, which a server may change between turns), appended to Tools'.
// It may ask approvals (through the run's ctx and origin).
type TurnTools interface {
	TurnTools(ctx context.Context, x store.Session, runID string, origin Origin) []provider.Tool
}

// HostTools is the ToolRunner over a ToolHost: the workspace's tools behind the session's
// approval mode, the safelist and the Gate.
type HostTools struct{ Host *ToolHost }

// Tools implements ToolRunner.
func (h HostTools) Tools(store.Session) []provider.Tool { return h.Host.Specs() }

// Run implements ToolRunner.
func (h HostTools) Run(ctx context.Context, c ToolCall) ToolResult {
	res := h.Host.Do(ctx, HostCall{Session: c.Session, RunID: c.RunID, TurnID: c.TurnID, Origin: c.Origin, Call: c.Call, Agent: c.Agent})
	return ToolResult{Text: res.Text, IsError: res.IsError, Diff: res.Diff, Sandbox: res.Sandbox, Media: res.Media}
}

// RunStarted implements RunStarter: the session's plans:snapshot follows run:start.
func (h HostTools) RunStarted(ctx context.Context, sessionID, runID string, origin Origin) {
	if err := h.Host.PublishPlan(ctx, sessionID, runID, origin); err != nil && h.Host.Logger != nil {
		h.Host.Logger.Warn("plans:snapshot not sent", "session", sessionID, "err", err)
	}
}

// TurnTools implements TurnTools: the MCP servers' tools.
func (h HostTools) TurnTools(ctx context.Context, x store.Session, runID string, origin Origin) []provider.Tool {
	return h.Host.MCPSpecs(ctx, x, runID, origin)
}

// withLookup offers the scripted exchange's lookup tool besides base's tools (the scripted
// provider's classic exchange calls it); base runs every other call.
type withLookup struct{ base ToolRunner }

// Tools implements ToolRunner.
func (w withLookup) Tools(x store.Session) []provider.Tool {
	ts := w.base.Tools(x)
	for _, t := range ts {
		if t.Name == scripted.LookupTool.Name {
			return ts
		}
	}
	return append(ts[:len(ts):len(ts)], scripted.LookupTool)
}

// TurnTools implements TurnTools when base does.
func (w withLookup) TurnTools(ctx context.Context, x store.Session, runID string, origin Origin) []provider.Tool {
	if tt, ok := w.base.(TurnTools); ok {
		return tt.TurnTools(ctx, x, runID, origin)
	}
	return nil
}

// Run implements ToolRunner.
func (w withLookup) Run(ctx context.Context, c ToolCall) ToolResult {
	if c.Call.Name == scripted.LookupTool.Name {
		for _, t := range w.base.Tools(c.Session) {
			if t.Name == c.Call.Name {
				return w.base.Run(ctx, c)
			}
		}
		return LookupTools{}.Run(ctx, c)
	}
	return w.base.Run(ctx, c)
}

// LookupTools is the ToolRunner of the scripted provider's classic exchange: the one offline
// `lookup` tool. It is the default when Config.Tools is nil.
type LookupTools struct{}

// Tools implements ToolRunner.
func (LookupTools) Tools(store.Session) []provider.Tool { return []provider.Tool{scripted.LookupTool} }

// Run implements ToolRunner.
func (LookupTools) Run(_ context.Context, c ToolCall) ToolResult {
	if c.Call.Name != scripted.LookupTool.Name {
		return ToolResult{Text: fmt.Sprintf("There is no tool %q; the tools are: lookup.", c.Call.Name), IsError: true}
	}
	var in struct {
		Query string `json:"query"`
	}
	if err := json.Unmarshal(c.Call.Arguments, &in); err != nil {
		return ToolResult{Text: "lookup needs {\"query\": string}: " + protocol.DecodeErrorText("input", err), IsError: true}
	}
	return ToolResult{Text: scripted.Lookup(in.Query)}
}
