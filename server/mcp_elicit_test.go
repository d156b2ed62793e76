package server

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zidane-server/zidane/protocol"
	"github.com/zidane-server/zidane/server/agent"
	"github.com/zidane-server/zidane/server/agent/mcp/mcptest"
	"github.com/zidane-server/zidane/server/agent/provider/scripted"
	"github.com/zidane-server/zidane/server/store"
)

// mcpEnv starts a server whose scripted model runs script, with the Go SDK test server in the
// user's mcps.json as "gt" (scope host: the sandbox is exec's tests' business).
func mcpEnv(t *testing.T, script string, mod func(*Config)) *testEnv {
	t.Helper()
	sc, err := scripted.Parse([]byte(script))
	require.NoError(t, err)
	models, err := agent.NewRegistry(context.Background(), "", scripted.New(scripted.Options{Script: sc}))
	require.NoError(t, err)
	e := newEnv(t, func(c *Config) {
		c.Models = models
		if mod != nil {
			mod(c)
		}
	})
	cmd, env := mcptest.StdioConfig()
	cfg := fmt.Sprintf(`{"mcpServers":{"gt":{"command":%q,"env":{%q:%q},"scope":"host"}}}`, cmd, mcptest.EnvServe, env[mcptest.EnvServe])
	require.NoError(t, os.WriteFile(e.srv.mcp.UserFile(), []byte(cfg), 0o600))
	e.srv.mcp.Invalidate("")
	return e
}

func mcpCall(id, tool, args string) string {
	return fmt.Sprintf(`{"tool":{"name":%q,"arguments":%s,"id":%q}}`, "mcp__gt__"+tool, args, id)
}

// promptAnswering is promptAllowing that also hands every interaction:request to answer (nil:
// none is expected).
func promptAnswering(t *testing.T, c, approver *testConn, sid, prompt string, answer func(req map[string]any)) map[string]toolResult {
	t.Helper()
	c.result("chat.send", fmt.Sprintf(`{"sessionId":%q,"prompt":%q}`, sid, prompt))
	out := map[string]toolResult{}
	for {
		s := c.nextSignal()
		if s.session != sid {
			continue
		}
		p := decodeObj(t, s.raw)["params"].(map[string]any)
		switch s.kind {
		case "approval:request":
			req := p["request"].(map[string]any)
			approver.result("approvals.answer", fmt.Sprintf(`{"sessionId":%q,"requestId":%q,"decision":"allow"}`, sid, req["requestId"]))
		case "interaction:request":
			require.NotNil(t, answer, "an unexpected interaction: %v", p)
			answer(p["request"].(map[string]any))
		case "event":
			ev := p["event"].(map[string]any)
			if ev["kind"] == "tool-result" {
				r := toolResult{text: ev["text"].(string)}
				r.isError, _ = ev["isError"].(bool)
				r.sandbox, _ = ev["sandbox"].(string)
				out[ev["callId"].(string)] = r
			}
		case "run:end":
			return out
		}
	}
}

// TestMCPElicitationFromASecondConnection: an MCP server's elicitations during tool calls (form
// and URL mode, the Go SDK test server over stdio) become interaction:request signals answered
// by a second connection: a form's values are checked against its requestedSchema (a wrong type,
// an unknown field and a missing required field are InvalidParams naming the field, and the
// request stays pending), accepted values reach the server, decline reaches it as decline, a
// dismissal as cancel, and a URL elicitation carries its address and answers accept when done.
func TestMCPElicitationFromASecondConnection(t *testing.T) {
	script := `{"turns":[{"steps":[` +
		mcpCall("f1", "elicit_form", `{}`) + `,` + mcpCall("f2", "elicit_form", `{}`) + `,` +
		mcpCall("u1", "elicit_url", `{}`) + `,` + mcpCall("f3", "elicit_form", `{}`) +
		`]},{"steps":[{"text":"done"}]}]}`
	e := mcpEnv(t, script, nil)
	c := e.dial()
	c.hello()
	sid := c.newSession()
	admin := e.dialAs(e.mint("admin"))
	other := e.dial() // a second chat connection answers
	other.hello()

	answer := func(req map[string]any, a string) map[string]any {
		return other.call("interactions.answer", fmt.Sprintf(`{"sessionId":%q,"requestId":%q,"answer":%s}`, sid, req["requestId"], a))
	}
	refused := func(req map[string]any, a, field string) {
		t.Helper()
		m := answer(req, a)
		require.Equal(t, protocol.CodeInvalidParams, errCode(m), "%v", m)
		msg := m["error"].(map[string]any)["message"].(string)
		assert.Contains(t, msg, field, msg)
	}
	seen := map[string]map[string]any{}
	res := promptAnswering(t, c, admin, sid, "elicit", func(req map[string]any) {
		el, ok := req["elicitation"].(map[string]any)
		require.True(t, ok, "an elicitation request: %v", req)
		assert.Equal(t, "gt", el["server"])
		assert.NotEmpty(t, req["expiresAt"])
		call := req["callId"].(string)
		seen[call] = el
		switch call {
		case "f1":
			assert.Equal(t, "form", el["mode"])
			assert.Equal(t, mcptest.FormMessage, el["message"])
			assert.Equal(t, mcptest.FormMessage, req["prompt"])
			require.Contains(t, el["requestedSchema"].(map[string]any)["properties"], "color")
			refused(req, `{"action":"accept","values":{"name":"Ada","age":"thirty"}}`, "values.age")
			refused(req, `{"action":"accept","values":{"name":"Ada","color":"mauve"}}`, "values.color")
			refused(req, `{"action":"accept","values":{"name":"Ada","nickname":"A"}}`, "values.nickname")
			refused(req, `{"action":"accept","values":{"age":30}}`, "values.name")
			refused(req, `{"choices":["x"]}`, "action")
			pending := other.result("interactions.list", fmt.Sprintf(`{"sessionId":%q}`, sid))["requests"].([]any)
			require.Len(t, pending, 1, "a refused answer leaves the request pending")
			assert.Equal(t, true, answer(req, `{"action":"accept","values":{"name":"Ada","age":30,"color":"blue","subscribe":true}}`)["result"].(map[string]any)["ok"])
		case "f2":
			assert.Equal(t, true, answer(req, `{"action":"decline"}`)["result"].(map[string]any)["ok"])
		case "u1":
			assert.Equal(t, "url", el["mode"])
			assert.Equal(t, mcptest.ElicitURL, el["url"])
			assert.Equal(t, "el-1", el["elicitationId"])
			refused(req, `{"action":"accept","values":{"x":1}}`, "values")
			assert.Equal(t, true, answer(req, `{"action":"accept"}`)["result"].(map[string]any)["ok"])
		case "f3":
			assert.Equal(t, true, answer(req, `null`)["result"].(map[string]any)["ok"])
		}
	})
	require.Len(t, seen, 4, "every call elicited")
	require.Len(t, res, 4, "%v", res)
	assert.Equal(t, `elicit: accept {"age":30,"color":"blue","name":"Ada","subscribe":true}`, res["f1"].text)
	assert.Equal(t, "elicit: decline null", res["f2"].text)
	assert.Equal(t, "elicit: accept null", res["u1"].text)
	assert.Equal(t, "elicit: cancel null", res["f3"].text)
	for id, r := range res {
		assert.False(t, r.isError, "%s: %s", id, r.text)
	}
}

// TestMCPPromptAttachesResource: an MCP prompt whose messages embed a resource and link to one
// becomes a command whose prompt carries both resources' contents as its context (the link
// read from the server when the command runs).
func TestMCPPromptAttachesResource(t *testing.T) {
	e := mcpEnv(t, `{"turns":[{"steps":[{"text":"ok"}]}]}`, nil)
	root := e.srv.ws.Roots()[0]
	_, prompt, err := e.srv.commandPrompt(t.Context(), store.Session{ProjectRoot: root}, &protocol.ChatSendParams{Command: ptr("mcp__gt__hello_resource")})
	require.NoError(t, err)
	res := "[resource test://hello (text/plain)]\n" + mcptest.HelloText
	assert.Equal(t, "Summarize the attached resource.\n\n"+res+"\n\n"+res, prompt.Text)
}

// TestMCPSamplingRefusedUnlessEnabled: by default the client advertises no sampling and a
// server's sampling request fails the call; with Config.MCPSampling (--mcp-sampling) it asks an
// approval naming the server, and once allowed runs on the session's model
// (the scripted one answers with its first turn's text), the answer reaching the server.
func TestMCPSamplingRefusedUnlessEnabled(t *testing.T) {
	script := `{"turns":[{"steps":[{"text":"Sampling now."},` + mcpCall("s1", "sample", `{"text":"What is 2+2?"}`) + `]},{"steps":[{"text":"done"}]}]}`
	off := mcpEnv(t, script, nil)
	c := off.dial()
	c.hello()
	admin := off.dialAs(off.mint("admin"))
	res := promptAllowing(t, c, admin, c.newSession(), "sample")
	require.Contains(t, res, "s1")
	assert.True(t, res["s1"].isError, res["s1"].text)
	assert.NotContains(t, res["s1"].text, "sampled")

	on := mcpEnv(t, script, func(c *Config) { c.MCPSampling = true })
	c = on.dial()
	c.hello()
	admin = on.dialAs(on.mint("admin"))
	sid := c.newSession()
	c.result("chat.send", fmt.Sprintf(`{"sessionId":%q,"prompt":"sample"}`, sid))
	var sampling []map[string]any
	var result toolResult
	for done := false; !done; {
		s := c.nextSignal()
		if s.session != sid {
			continue
		}
		p := decodeObj(t, s.raw)["params"].(map[string]any)
		switch s.kind {
		case "approval:request":
			req := p["request"].(map[string]any)
			if req["tool"] == agent.MCPSamplingTool {
				sampling = append(sampling, req)
				assert.Contains(t, req["summary"], `MCP server "gt" asks the model: What is 2+2?`)
			}
			admin.result("approvals.answer", fmt.Sprintf(`{"sessionId":%q,"requestId":%q,"decision":"allow"}`, sid, req["requestId"]))
		case "event":
			if ev := p["event"].(map[string]any); ev["kind"] == "tool-result" && ev["callId"] == "s1" {
				result.text = ev["text"].(string)
				result.isError, _ = ev["isError"].(bool)
			}
		case "run:end":
			done = true
		}
	}
	require.Len(t, sampling, 1, "the sampling request asked once")
	assert.False(t, result.isError, result.text)
	assert.Contains(t, result.text, "sampled (")
	assert.Contains(t, result.text, "[Sampling now.]")
}
