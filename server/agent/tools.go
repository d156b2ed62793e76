package agent

import (
	"context"
	"encoding/json"
	"fmt"

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
}

// ToolResult is what a tool call gave back to the model.
type ToolResult struct {
	// Text is the result the model reads (and the tool-result event shows).
	Text string
	// IsError marks a failure (the tool failed, was denied, was cancelled).
	IsError bool
	// Diff is the unified diff an edit made; the tool-result event carries it ("" for none).
	Diff string
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
		return ToolResult{Text: "lookup needs {\"query\": string}: " + err.Error(), IsError: true}
	}
	return ToolResult{Text: scripted.Lookup(in.Query)}
}
