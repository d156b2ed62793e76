package agent

import (
	"context"
	"errors"
	"fmt"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/zidane-server/zidane/protocol"
	"github.com/zidane-server/zidane/server/agent/provider"
	"github.com/zidane-server/zidane/server/oneline"
	"github.com/zidane-server/zidane/server/store"
)

// MCPSamplingTool is the approval request's tool name for an MCP server's sampling request.
const MCPSamplingTool = "mcp-sampling"

// maxSampleTokens bounds what one sampling request may ask of the model.
const maxSampleTokens = 4096

// Sampler runs one sampling request on a session's model: the system prompt and messages as
// given, at most maxTokens of output; it answers the text and the model's id.
type Sampler func(ctx context.Context, x store.Session, system string, msgs []provider.Message, maxTokens int) (text, model string, err error)

// Sample answers an MCP server's sampling/createMessage during one of the agent's tool calls
// (issue 23 item 2; mcp.SampleFunc, set only when the operator enabled sampling, --mcp-sampling):
// refused in locked mode, otherwise asked every time (approval:request, tool mcp-sampling, naming
// the server and the request; "always" stores nothing), then run on the session's model
// (ToolHost.Sampler). A denial, an expiry or a withdrawal is an error the server receives.
func (h *ToolHost) Sample(ctx context.Context, server string, p *sdk.CreateMessageParams) (*sdk.CreateMessageResult, error) {
	tc, ok := hostCallOf(ctx)
	if !ok || h.Sampler == nil {
		return nil, fmt.Errorf("no session waits on a tool call of MCP server %q; sampling is answered only during a call", server)
	}
	if p == nil || len(p.Messages) == 0 {
		return nil, errors.New("sampling/createMessage needs messages")
	}
	mode, err := h.Store.ApprovalMode(ctx, tc.Session.ID)
	if err != nil {
		return nil, fmt.Errorf("the session's approval mode could not be read: %w", err)
	}
	if tc.mode(mode) == store.ModeLocked {
		return nil, errors.New("refused: the session's approval mode is locked, so no sampling request runs")
	}
	var msgs []provider.Message
	var first string
	for _, m := range p.Messages {
		t, ok := m.Content.(*sdk.TextContent)
		if !ok {
			return nil, fmt.Errorf("sampling: only text messages are taken (got %T)", m.Content)
		}
		role := provider.RoleUser
		if m.Role == "assistant" {
			role = provider.RoleAssistant
		}
		if first == "" {
			first = t.Text
		}
		msgs = append(msgs, provider.Message{Role: role, Text: t.Text})
	}
	input, _ := protocol.Marshal(map[string]any{"server": server, "systemPrompt": p.SystemPrompt, "messages": p.Messages, "maxTokens": p.MaxTokens})
	req := protocol.ApprovalRequest{SessionID: tc.Session.ID, RunID: tc.RunID, CallID: tc.Call.ID, Tool: MCPSamplingTool, Input: input,
		Summary: oneline.Line(fmt.Sprintf("MCP server %q asks the model: %s", server, first)), Cwd: tc.Session.Cwd}
	out := h.Gate.RequestApproval(ctx, ApprovalAsk{Request: req, ProjectRoot: tc.Session.ProjectRoot, StoreTool: MCPSamplingTool,
		Note: "each sampling request asks"}, tc.Origin)
	if !out.Allowed() {
		return nil, fmt.Errorf("the user did not allow the sampling request (%s)", out.Resolution)
	}
	max := int(p.MaxTokens)
	if max <= 0 || max > maxSampleTokens {
		max = maxSampleTokens
	}
	text, model, err := h.Sampler(ctx, tc.Session, p.SystemPrompt, msgs, max)
	if err != nil {
		return nil, err
	}
	return &sdk.CreateMessageResult{Content: &sdk.TextContent{Text: text}, Model: model, Role: "assistant", StopReason: "endTurn"}, nil
}

// SampleText runs a sampling request on the session's model (a Sampler): no tools, the text
// streamed collected. Usage is not recorded against the session's runs.
func (r *Runtime) SampleText(ctx context.Context, x store.Session, system string, msgs []provider.Message, maxTokens int) (string, string, error) {
	prov, model, err := r.models.Resolve(ctx, x.Model)
	if err != nil {
		return "", "", err
	}
	prov = provider.WithRetry(prov, r.cfg.Retry)
	var b strings.Builder
	_, err = prov.Stream(ctx, &provider.Request{Model: model.Name, System: system, Messages: msgs, MaxOutputTokens: maxTokens}, func(ev provider.Event) error {
		if e, ok := ev.(*provider.TextDelta); ok {
			if b.Len()+len(e.Text) > 8*maxTokens*outputMargin {
				return errors.New("the sampled answer passed its bound")
			}
			b.WriteString(e.Text)
		}
		return nil
	})
	if err != nil {
		return "", "", fmt.Errorf("the model %s could not answer the sampling request: %w", model.ID, err)
	}
	return b.String(), model.ID, nil
}
