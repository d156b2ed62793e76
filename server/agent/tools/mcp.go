package tools

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/zidane-server/zidane/protocol"
	"github.com/zidane-server/zidane/server/agent/mcp"
)

// MCPTool is one tool of an MCP server as the agent's tool mcp__<server>__<tool> (issue 23 item
// 2): its input schema is the server's, every call goes through approvals (KindMCP), and its
// result (text, images and audio, embedded resources, structured content) is rendered to text
// capped like exec's output.
type MCPTool struct {
	// Proc is the server's supervised connection.
	Proc *mcp.Proc
	// Tool is the tool as the server last listed it.
	Tool *sdk.Tool
}

// Name is the agent's name of the tool.
func (t MCPTool) Name() string { return mcp.ToolName(t.Proc.Server().Name, t.Tool.Name) }

// ReadOnlyHint reports the server's readOnlyHint annotation (shown, never trusted).
func (t MCPTool) ReadOnlyHint() bool {
	return t.Tool.Annotations != nil && t.Tool.Annotations.ReadOnlyHint
}

// Spec implements Tool.
func (t MCPTool) Spec() Spec {
	schema := json.RawMessage(`{"type":"object"}`)
	if t.Tool.InputSchema != nil {
		if b, err := protocol.Marshal(t.Tool.InputSchema); err == nil && len(b) > 0 && b[0] == '{' {
			schema = json.RawMessage(strings.TrimSpace(string(b)))
		}
	}
	desc := t.Tool.Description
	if desc == "" {
		desc = t.Tool.Title
	}
	desc = fmt.Sprintf("[MCP server %s, tool %s] %s", t.Proc.Server().Name, t.Tool.Name, desc)
	return Spec{Name: t.Name(), Description: desc, InputSchema: schema}
}

// Kind implements Tool.
func (MCPTool) Kind() Kind { return KindMCP }

// Check implements Tool: the input must be a JSON object; the summary names the server and the
// tool, and says when the server calls it read-only (which changes nothing about asking).
func (t MCPTool) Check(_ context.Context, _ *Env, input json.RawMessage) (*Call, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(input, &obj); err != nil {
		return nil, failf("%s: the input must be a JSON object for the tool's schema (%s).", t.Name(), protocol.DecodeErrorText("input", err))
	}
	srv := t.Proc.Server()
	sum := fmt.Sprintf("MCP %s: %s", srv.Name, t.Tool.Name)
	if t.ReadOnlyHint() {
		sum += " (the server says read-only; not verified)"
	}
	return &Call{Summary: sum, SafelistKey: srv.Name + "/" + t.Tool.Name}, nil
}

// Run implements Tool: a failed connection or a process that died during the call is an error
// result (the supervisor restarts the process), never a hang past ctx.
func (t MCPTool) Run(ctx context.Context, env *Env, input json.RawMessage) (*Result, error) {
	res, err := t.Proc.CallTool(ctx, t.Tool.Name, input)
	if err != nil {
		if ctx.Err() != nil {
			return &Result{Content: "The MCP call was stopped: " + ctx.Err().Error(), IsError: true}, ctx.Err()
		}
		return &Result{Content: err.Error(), IsError: true}, nil
	}
	r := mcp.Render(res)
	var media []protocol.ToolResultMedia
	total, dropped := 0, 0
	for _, m := range r.Media {
		n := base64.StdEncoding.EncodedLen(len(m.Data))
		if total+n > MaxMediaBytes {
			dropped++
			continue
		}
		total += n
		media = append(media, protocol.ToolResultMedia{MimeType: m.MIMEType, Data: base64.StdEncoding.EncodeToString(m.Data)})
	}
	h := newHeadTail(env.cfg().OutputMaxBytes)
	_, _ = h.Write([]byte(r.Text))
	text, cut := h.String()
	if dropped > 0 {
		text += fmt.Sprintf("\n[%d media block(s) left out: the result's media are kept up to %d bytes]", dropped, MaxMediaBytes)
	}
	return &Result{Content: text, IsError: r.IsError, Truncated: cut, Media: media}, nil
}

// MaxMediaBytes bounds the base64 media one tool result carries (1 MiB).
const MaxMediaBytes = 1 << 20
