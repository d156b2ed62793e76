package server

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zidane-server/zidane/server/agent/provider"
	"github.com/zidane-server/zidane/server/agent/provider/openai"
	"github.com/zidane-server/zidane/server/agent/provider/openai/openaitest"
)

// Agents, skills and commands end to end (issue 27 items 1–3): definitions in the project's
// .zidane/ folders, a real server and WebSocket, the model played by the OpenAI-compatible fake
// endpoint, whose recorded requests show what the model was offered.

func newFakeAgentEnv(t *testing.T, replies ...openaitest.Response) (*agentEnv, *openaitest.Server) {
	t.Helper()
	fake := openaitest.New(t)
	fake.Enqueue(replies...)
	p := openai.New(openai.Config{BaseURL: fake.BaseURL(), Models: []provider.Model{{ID: "openai/m", Provider: "openai", Name: "m", ContextWindow: 32000}}})
	return newAgentEnv(t, p, nil), fake
}

// requestTools lists the tool names a recorded model request offered.
func requestTools(t *testing.T, r openaitest.Request) []string {
	var body struct {
		Tools []struct {
			Function struct{ Name string } `json:"function"`
		} `json:"tools"`
	}
	require.NoError(t, r.Decode(&body))
	var out []string
	for _, x := range body.Tools {
		out = append(out, x.Function.Name)
	}
	return out
}

// requestMessages returns a recorded request's messages as role: content lines.
func requestMessages(t *testing.T, r openaitest.Request) []string {
	var body struct {
		Messages []struct {
			Role    string `json:"role"`
			Content any    `json:"content"`
		} `json:"messages"`
	}
	require.NoError(t, r.Decode(&body))
	var out []string
	for _, m := range body.Messages {
		out = append(out, fmt.Sprintf("%s: %v", m.Role, m.Content))
	}
	return out
}

func TestAgentProjectDefinitionRestrictsTools(t *testing.T) {
	e, fake := newFakeAgentEnv(t,
		openaitest.CallReply(10, 5, openaitest.Call{ID: "c1", Name: "write_file", Args: `{"path":"x.txt","content":"no"}`}),
		openaitest.Reply("Done reading.", 20, 5))
	e.L.Write(t, ".zidane/agents/reader.md", "---\ndescription: Reads only\ntools: read_file, grep\napprovalMode: auto-edit\n---\nYou only read.\n")
	c := e.dial()
	c.hello()
	sid := c.newSession()

	list := c.result("agents.list", fmt.Sprintf(`{"sessionId":%q}`, sid))
	var reader map[string]any
	for _, a := range list["agents"].([]any) {
		if a.(map[string]any)["id"] == "reader" {
			reader = a.(map[string]any)
		}
	}
	require.NotNil(t, reader, "%v", list)
	assert.Equal(t, "project", reader["origin"])
	require.Len(t, reader["problems"], 1, "the looser approval mode is listed as an error")
	assert.Contains(t, reader["problems"].([]any)[0], "looser")

	bad := c.call("sessions.setAgent", fmt.Sprintf(`{"sessionId":%q,"agentId":"nobody"}`, sid))
	assert.Equal(t, -32602, errCode(bad))
	assert.Contains(t, fmt.Sprint(bad["error"]), "agents.list")
	x := c.result("sessions.setAgent", fmt.Sprintf(`{"sessionId":%q,"agentId":"reader"}`, sid))
	assert.Equal(t, "reader", x["agentId"])

	c.prompt(sid, "change x")
	end := c.runEnd(sid)
	require.Equal(t, true, end["ok"], "%v", end)
	reqs := fake.StreamRequests()
	require.Len(t, reqs, 2)
	assert.ElementsMatch(t, []string{"read_file", "grep"}, requestTools(t, reqs[0]), "the model is offered exactly the definition's tools")
	assert.True(t, strings.HasPrefix(requestMessages(t, reqs[0])[0], "system: You only read."), "the definition's body is the system prompt")
	res := c.toolResults(sid)
	require.Len(t, res, 1)
	assert.Equal(t, true, res[0]["isError"])
	assert.Contains(t, res[0]["text"], "not offered")
	assert.False(t, e.L.Exists("x.txt"))
	// auto-edit from a project file was ignored: the session stays in ask, so nothing passes silently.
	assert.Equal(t, "ask", c.result("approvals.getMode", fmt.Sprintf(`{"sessionId":%q}`, sid))["mode"])
}

func TestAgentPlanCannotWrite(t *testing.T) {
	e, fake := newFakeAgentEnv(t,
		openaitest.CallReply(10, 5, openaitest.Call{ID: "c1", Name: "write_file", Args: `{"path":"x.txt","content":"no"}`}),
		openaitest.CallReply(10, 5, openaitest.Call{ID: "c2", Name: "exec", Args: execArgs("touch y.txt")}),
		openaitest.Reply("Here is the plan.", 20, 5))
	c := e.dial()
	c.hello()
	sid := c.newSession()
	admin := e.dialAs(e.mint("admin"))
	admin.result("approvals.setMode", fmt.Sprintf(`{"sessionId":%q,"mode":"auto-edit"}`, sid)) // plan narrows even this
	c.result("sessions.setAgent", fmt.Sprintf(`{"sessionId":%q,"agentId":"plan"}`, sid))
	c.prompt(sid, "make a plan")
	end := c.runEnd(sid)
	require.Equal(t, true, end["ok"], "%v", end)
	tools := requestTools(t, fake.StreamRequests()[0])
	assert.NotContains(t, tools, "write_file")
	assert.NotContains(t, tools, "edit_file")
	assert.NotContains(t, tools, "exec")
	assert.Contains(t, tools, "read_file")
	for _, r := range c.toolResults(sid) {
		assert.Equal(t, true, r["isError"], "%v", r)
	}
	assert.False(t, e.L.Exists("x.txt"))
	assert.False(t, e.L.Exists("y.txt"))
}

func TestAgentSkillListedAndLoaded(t *testing.T) {
	e, fake := newFakeAgentEnv(t,
		openaitest.CallReply(10, 5, openaitest.Call{ID: "c1", Name: "skill", Args: `{"name":"deploy"}`}),
		openaitest.CallReply(10, 5, openaitest.Call{ID: "c2", Name: "skill", Args: `{"name":"deploy","file":"steps/check.sh"}`}),
		openaitest.Reply("Deployed.", 20, 5))
	e.L.Write(t, ".zidane/skills/deploy/SKILL.md", "---\nname: deploy\ndescription: Ship the service to staging\n---\nRun the checks, then push.\n")
	e.L.Write(t, ".zidane/skills/deploy/steps/check.sh", "make check\n")
	e.L.Write(t, ".claude/skills/broken/SKILL.md", "---\nname: broken\n---\nno description\n")
	c := e.dial()
	c.hello()
	sid := c.newSession()
	skills := c.result("skills.list", `{}`)
	require.Len(t, skills["skills"], 1)
	require.Len(t, skills["problems"], 1, "the broken SKILL.md is listed with its error")
	got := c.result("skills.get", `{"name":"deploy"}`)
	assert.Equal(t, "Run the checks, then push.", got["body"])
	assert.Equal(t, []any{"steps/check.sh"}, got["files"])

	c.prompt(sid, "deploy it")
	end := c.runEnd(sid)
	require.Equal(t, true, end["ok"], "%v", end)
	reqs := fake.StreamRequests()
	assert.Contains(t, requestTools(t, reqs[0]), "skill")
	assert.Contains(t, requestMessages(t, reqs[0])[0], "- deploy: Ship the service to staging", "the system prompt lists the skill")
	res := c.toolResults(sid)
	require.Len(t, res, 2)
	assert.Contains(t, res[0]["text"], "Run the checks, then push.")
	assert.Contains(t, res[0]["text"], "steps/check.sh")
	assert.Equal(t, "make check\n", res[1]["text"])
}

func TestAgentCommandExpands(t *testing.T) {
	e, fake := newFakeAgentEnv(t, openaitest.Reply("Reviewed.", 20, 5))
	e.L.Write(t, ".zidane/commands/review.md", "---\ndescription: Review a file\nargument-hint: <file> [focus]\n---\nReview $1 with a focus on $2.\nAll: $ARGUMENTS\n")
	e.L.Write(t, ".zidane/commands/broken.md", "---\ndescription: [\n---\nx\n")
	c := e.dial()
	c.hello()
	sid := c.newSession()
	cmds := c.result("commands.list", `{}`)
	var names []string
	for _, x := range cmds["commands"].([]any) {
		names = append(names, x.(map[string]any)["name"].(string))
	}
	assert.Equal(t, []string{"review"}, names)
	require.Len(t, cmds["problems"], 1, "the broken file is listed with its error")

	m := c.call("chat.send", fmt.Sprintf(`{"sessionId":%q,"command":"nope"}`, sid))
	assert.Equal(t, -32602, errCode(m))
	assert.Contains(t, fmt.Sprint(m["error"]), "commands.list")
	m = c.call("chat.send", fmt.Sprintf(`{"sessionId":%q,"command":"review","arguments":"\"open"}`, sid))
	assert.Equal(t, -32602, errCode(m))
	assert.Contains(t, fmt.Sprint(m["error"]), "not closed")
	m = c.call("chat.send", fmt.Sprintf(`{"sessionId":%q}`, sid))
	assert.Equal(t, -32602, errCode(m), "neither a prompt nor a command")

	c.result("chat.send", fmt.Sprintf(`{"sessionId":%q,"command":"review","arguments":"main.go 'error handling'"}`, sid))
	end := c.runEnd(sid)
	require.Equal(t, true, end["ok"], "%v", end)
	msgs := requestMessages(t, fake.StreamRequests()[0])
	assert.Equal(t, "user: Review main.go with a focus on error handling.\nAll: main.go 'error handling'", msgs[len(msgs)-1])
	evs := c.result("sessions.loadEvents", fmt.Sprintf(`{"sessionId":%q}`, sid))["events"].([]any)
	up := evs[0].(map[string]any)
	assert.Equal(t, "user-prompt", up["kind"])
	assert.Equal(t, "review", up["command"])
	assert.Equal(t, "main.go 'error handling'", up["arguments"])
}
