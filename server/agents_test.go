package server

import (
	"fmt"
	"os"
	"path/filepath"
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

// A project agent's looser approvalMode or sandbox is ignored, so agents.list and agents.get
// show the values in force (the session's; a tighter one as written), with a problem saying what
// was ignored (issue 27; they used to show the ignored value as written).
func TestAgentListShowsTheGuardsInForce(t *testing.T) {
	e, _ := newFakeAgentEnv(t)
	e.L.Write(t, ".zidane/agents/loose.md", "---\ndescription: Asks for more\napprovalMode: auto-edit\nsandbox: off\n---\nLoose.\n")
	e.L.Write(t, ".zidane/agents/tight.md", "---\ndescription: Asks for less\napprovalMode: locked\nsandbox: read-only\n---\nTight.\n")
	c := e.dial()
	c.hello()
	sid := c.newSession()
	policy := c.result("sessions.getSandbox", fmt.Sprintf(`{"sessionId":%q}`, sid))["policy"].(string)
	require.NotEqual(t, "off", policy)
	byID := func(list map[string]any) map[string]map[string]any {
		out := map[string]map[string]any{}
		for _, a := range list["agents"].([]any) {
			out[a.(map[string]any)["id"].(string)] = a.(map[string]any)
		}
		return out
	}
	check := func(what string, loose, tight map[string]any) {
		assert.Equal(t, "ask", loose["approvalMode"], "%s: the session's mode is the one in force", what)
		assert.Equal(t, policy, loose["sandbox"], "%s: the session's policy is the one in force", what)
		problems := fmt.Sprint(loose["problems"])
		assert.Contains(t, problems, `approvalMode "auto-edit"`, what)
		assert.Contains(t, problems, `sandbox "off"`, what)
		assert.Contains(t, problems, "ignored", what)
		assert.Equal(t, "locked", tight["approvalMode"], "%s: a tighter mode is in force as written", what)
		assert.Equal(t, "read-only", tight["sandbox"], what)
		assert.Empty(t, tight["problems"], what)
	}
	agents := byID(c.result("agents.list", fmt.Sprintf(`{"sessionId":%q}`, sid)))
	check("agents.list with the session", agents["loose"], agents["tight"])
	agents = byID(c.result("agents.list", `{}`))
	check("agents.list", agents["loose"], agents["tight"])
	check("agents.get", c.result("agents.get", `{"agentId":"loose"}`), c.result("agents.get", `{"agentId":"tight"}`))
}

// A link under the project's .zidane/{agents,skills,commands} (a file, a skill folder, or the
// folder itself) that points outside the project is listed as a problem saying so and never
// followed; a link that stays inside is followed (issue 27; such links used to vanish silently or
// be read).
func TestDefinitionLinksOutOfTheProjectAreListed(t *testing.T) {
	e, _ := newFakeAgentEnv(t)
	out := func(name, content string) string {
		p := filepath.Join(e.L.Out, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
		return p
	}
	out("skill/SKILL.md", "---\ndescription: From outside\n---\nOutside skill.\n")
	out("commands/hi.md", "---\ndescription: From outside\n---\nSay hi.\n")
	e.L.Write(t, "shared/alias.md", "---\ndescription: Linked from inside\n---\nInside.\n")
	e.L.Write(t, ".zidane/agents/plain.md", "---\ndescription: Plain\n---\nPlain.\n")
	e.L.Write(t, ".zidane/skills/.keep", "")
	e.L.Link(t, out("agents/evil.md", "---\ndescription: From outside\n---\nOutside agent.\n"), ".zidane/agents/evil.md")
	e.L.Link(t, "../../shared/alias.md", ".zidane/agents/alias.md")
	e.L.Link(t, "../../../out/skill", ".zidane/skills/ext")
	e.L.Link(t, filepath.Join(e.L.Out, "commands"), ".zidane/commands")
	c := e.dial()
	c.hello()

	outside := func(list map[string]any, rel string) {
		t.Helper()
		var msg string
		for _, p := range list["problems"].([]any) {
			if p.(map[string]any)["path"] == filepath.Join(e.L.WS, rel) {
				msg = p.(map[string]any)["message"].(string)
			}
		}
		assert.Contains(t, msg, "points outside the project; ignored", "%s: %v", rel, list["problems"])
	}
	ids := func(list map[string]any, key, field string) []string {
		var out []string
		for _, x := range list[key].([]any) {
			out = append(out, x.(map[string]any)[field].(string))
		}
		return out
	}
	agents := c.result("agents.list", `{}`)
	outside(agents, ".zidane/agents/evil.md")
	assert.ElementsMatch(t, []string{"build", "plan", "plain", "alias"}, ids(agents, "agents", "id"), "the link inside the project is followed")
	skills := c.result("skills.list", `{}`)
	outside(skills, ".zidane/skills/ext")
	assert.Empty(t, skills["skills"])
	cmds := c.result("commands.list", `{}`)
	outside(cmds, ".zidane/commands")
	assert.NotContains(t, ids(cmds, "commands", "name"), "hi")
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
	// A command file naming an agent cannot move a plan session to it (a looser one).
	e.L.Write(t, ".zidane/commands/escape.md", "---\nagent: build\n---\nWrite everything.\n")
	other := c.newSession()
	c.result("sessions.setAgent", fmt.Sprintf(`{"sessionId":%q,"agentId":"plan"}`, other))
	m = c.call("chat.send", fmt.Sprintf(`{"sessionId":%q,"command":"escape"}`, other))
	assert.Equal(t, -32014, errCode(m), "%v", m)
	assert.Contains(t, fmt.Sprint(m["error"]), "sessions.setAgent")

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

// subagentEnv is a fake-model server whose project defines lead (may hand work out) and helper.
func subagentEnv(t *testing.T, mod func(*Config), leadFront string, replies ...openaitest.Response) (*agentEnv, *openaitest.Server) {
	t.Helper()
	fake := openaitest.New(t)
	fake.Enqueue(replies...)
	p := openai.New(openai.Config{BaseURL: fake.BaseURL(), Models: []provider.Model{{ID: "openai/m", Provider: "openai", Name: "m", ContextWindow: 32000}}})
	e := newAgentEnv(t, p, mod)
	e.L.Write(t, ".zidane/agents/lead.md", "---\n"+leadFront+"---\nYou lead.\n")
	e.L.Write(t, ".zidane/agents/helper.md", "---\ntools: write_file, read_file, task\n---\nYou help.\n")
	return e, fake
}

func taskCall(id, agentName, prompt string) openaitest.Call {
	return openaitest.Call{ID: id, Name: "task", Args: fmt.Sprintf(`{"agent":%q,"prompt":%q,"description":"notes"}`, agentName, prompt)}
}

func TestSubagentRunsInAChildSession(t *testing.T) {
	e, _ := subagentEnv(t, func(c *Config) { c.RunLimits.MaxConcurrentRuns = 1 }, "tools: task, read_file, write_file\n",
		openaitest.CallReply(10, 5, taskCall("t1", "helper", "Write notes.txt saying hi.")),
		openaitest.CallReply(10, 5, openaitest.Call{ID: "w1", Name: "write_file", Args: `{"path":"notes.txt","content":"hi\n"}`}),
		openaitest.Reply("Wrote notes.txt.", 10, 5),
		openaitest.Reply("The helper wrote the notes.", 10, 5))
	a := e.dial()
	a.hello()
	b := e.dial()
	b.hello()
	sid := a.newSession()
	a.result("sessions.setAgent", fmt.Sprintf(`{"sessionId":%q,"agentId":"lead"}`, sid))
	a.prompt(sid, "get the notes written")

	// The child's approval is signalled on the parent, naming the child, and answered there.
	sig := a.waitSignal(sid, "approval:request").params(t)
	child, _ := sig["childSessionId"].(string)
	require.NotEmpty(t, child, "%v", sig)
	req := sig["request"].(map[string]any)
	assert.Equal(t, child, req["sessionId"])
	assert.Equal(t, sid, req["parentSessionId"])
	assert.Equal(t, "write_file", req["tool"])
	pending := a.result("approvals.list", fmt.Sprintf(`{"sessionId":%q}`, sid))["requests"].([]any)
	require.Len(t, pending, 1, "the parent's list holds its child's request")
	// A second connection watches the child live.
	b.waitSignal(child, "run:start")
	a.answer(sid, req, "allow")
	childEnd := b.waitSignal(child, "run:end").params(t)
	assert.Equal(t, true, childEnd["ok"], "%v", childEnd)
	end := a.runEnd(sid)
	require.Equal(t, true, end["ok"], "%v", end)

	assert.Equal(t, "hi\n", e.L.Read(t, "notes.txt"))
	res := a.toolResults(sid)
	require.Len(t, res, 1)
	assert.Contains(t, res[0]["text"], "Wrote notes.txt.", "the child's answer is the task's result")
	assert.Contains(t, res[0]["text"], child)
	kids := b.result("orchestration.list", fmt.Sprintf(`{"sessionId":%q}`, sid))["children"].([]any)
	require.Len(t, kids, 1)
	k := kids[0].(map[string]any)
	assert.Equal(t, child, k["id"])
	assert.Equal(t, sid, k["parentSessionId"])
	assert.Equal(t, end["runId"], k["parentRunId"])
	assert.Equal(t, "helper", k["agentId"])
	evs := b.result("sessions.loadEvents", fmt.Sprintf(`{"sessionId":%q}`, child))["events"].([]any)
	assert.Equal(t, "Write notes.txt saying hi.", evs[0].(map[string]any)["text"], "the child's transcript is its own")
}

func TestSubagentCancelledWithItsParent(t *testing.T) {
	e, _ := subagentEnv(t, nil, "tools: task, write_file\n",
		openaitest.CallReply(10, 5, taskCall("t1", "helper", "Write x.")),
		openaitest.CallReply(10, 5, openaitest.Call{ID: "w1", Name: "write_file", Args: `{"path":"x.txt","content":"x"}`}))
	a := e.dial()
	a.hello()
	sid := a.newSession()
	a.result("sessions.setAgent", fmt.Sprintf(`{"sessionId":%q,"agentId":"lead"}`, sid))
	a.prompt(sid, "go")
	child := a.waitSignal(sid, "approval:request").params(t)["childSessionId"].(string)
	a.result("chat.cancel", fmt.Sprintf(`{"sessionId":%q}`, sid))
	childEnd := a.waitSignal(child, "run:end").params(t)
	assert.Equal(t, false, childEnd["ok"])
	assert.Equal(t, true, childEnd["interrupted"], "the child's run is cancelled with its parent's")
	end := a.runEnd(sid)
	assert.Equal(t, false, end["ok"])
	assert.False(t, e.L.Exists("x.txt"))
	assert.Empty(t, a.result("approvals.list", `{}`)["requests"])
}

func TestSubagentNeverHoldsMoreThanItsParent(t *testing.T) {
	// lead may not write and is locked; helper names write_file: the child is not offered it; at
	// --max-task-depth 1 the child's own task call is refused.
	e, fake := subagentEnv(t, func(c *Config) { c.RunLimits.MaxTaskDepth = 1 }, "tools: task, read_file\napprovalMode: locked\n",
		openaitest.CallReply(10, 5, taskCall("t1", "helper", "Write x.")),
		openaitest.CallReply(10, 5, openaitest.Call{ID: "w1", Name: "write_file", Args: `{"path":"x.txt","content":"x"}`}),
		openaitest.CallReply(10, 5, taskCall("t2", "helper", "Go deeper.")),
		openaitest.Reply("Could not.", 10, 5),
		openaitest.Reply("Done.", 10, 5))
	a := e.dial()
	a.hello()
	sid := a.newSession()
	a.result("sessions.setAgent", fmt.Sprintf(`{"sessionId":%q,"agentId":"lead"}`, sid))
	a.prompt(sid, "go")
	end := a.runEnd(sid)
	require.Equal(t, true, end["ok"], "%v", end)
	reqs := fake.StreamRequests()
	require.Len(t, reqs, 5)
	assert.ElementsMatch(t, []string{"read_file", "task"}, requestTools(t, reqs[1]), "helper's write_file is not the parent's: the child does not get it")
	assert.False(t, e.L.Exists("x.txt"))
	kids := a.result("orchestration.list", fmt.Sprintf(`{"sessionId":%q}`, sid))["children"].([]any)
	require.Len(t, kids, 1)
	child := kids[0].(map[string]any)["id"].(string)
	res := a.toolResults(child)
	require.Len(t, res, 2)
	assert.Contains(t, res[0]["text"], "not offered")
	assert.Contains(t, res[1]["text"], "deepest allowed", "a task call from the deepest level is refused")
}

func TestClaudeImportScopesAndFlag(t *testing.T) {
	home := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(home, ".claude", "commands"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(home, ".claude", "commands", "fix.md"), []byte("Fix $ARGUMENTS.\n"), 0o644))
	for _, allow := range []bool{false, true} {
		e := newEnv(t, func(c *Config) { c.UserHome, c.AllowRemoteInstalls = home, allow })
		chat := e.dial()
		hello := chat.hello()
		assert.Equal(t, allow, hello["remoteInstalls"] == true)
		assert.Equal(t, true, chat.result("claudeImport.detect", `{}`)["found"])
		assert.Equal(t, -32013, errCode(chat.call("claudeImport.preview", `{}`)), "preview needs admin")
		admin := e.dialAs(e.mint("admin"))
		items := admin.result("claudeImport.preview", `{}`)["items"].([]any)
		require.Len(t, items, 1)
		m := admin.call("claudeImport.run", `{}`)
		if !allow {
			assert.Equal(t, -32014, errCode(m), "%v", m)
			assert.Contains(t, fmt.Sprint(m["error"]), "--allow-remote-installs")
			continue
		}
		require.Nil(t, m["error"], "%v", m)
		assert.Equal(t, true, m["result"].(map[string]any)["items"].([]any)[0].(map[string]any)["done"])
		_, err := os.Stat(filepath.Join(home, ".zidane", "commands", "fix.md"))
		assert.NoError(t, err)
	}
}

func TestSubagentGrandchildApprovalReachesTheRoot(t *testing.T) {
	// lead → helper → helper: the grandchild's write asks, and the request is signalled on its
	// parent and on the root (each copy naming the grandchild), listed and answered at the root.
	e, _ := subagentEnv(t, nil, "tools: task, write_file\n",
		openaitest.CallReply(10, 5, taskCall("t1", "helper", "Delegate the notes.")),
		openaitest.CallReply(10, 5, taskCall("t2", "helper", "Write notes.txt.")),
		openaitest.CallReply(10, 5, openaitest.Call{ID: "w1", Name: "write_file", Args: `{"path":"notes.txt","content":"deep\n"}`}),
		openaitest.Reply("Wrote it.", 10, 5),
		openaitest.Reply("My helper wrote it.", 10, 5),
		openaitest.Reply("Done.", 10, 5))
	a := e.dial()
	a.hello()
	sid := a.newSession()
	a.result("sessions.setAgent", fmt.Sprintf(`{"sessionId":%q,"agentId":"lead"}`, sid))
	a.prompt(sid, "notes, two levels down")

	// The request is signalled in the asking session, then in each ancestor up to the root.
	copies := map[string]map[string]any{}
	for copies[sid] == nil {
		s := a.waitSignal("", "approval:request")
		copies[s.session] = s.params(t)
	}
	require.Len(t, copies, 3, "the grandchild, its parent and the root each get the request")
	sig := copies[sid]
	grandchild, _ := sig["childSessionId"].(string)
	req := sig["request"].(map[string]any)
	require.Equal(t, grandchild, req["sessionId"], "the root's copy names the session that asks")
	child, _ := req["parentSessionId"].(string)
	require.NotEmpty(t, child)
	require.NotEqual(t, sid, child, "the request's parent is the middle session, not the root")
	require.Contains(t, copies, child)
	assert.Equal(t, grandchild, copies[child]["childSessionId"], "the middle session is told too, naming the grandchild")
	assert.Nil(t, copies[grandchild]["childSessionId"], "the asking session's own signal names no child")
	for _, s := range []string{sid, child, grandchild} {
		pending := a.result("approvals.list", fmt.Sprintf(`{"sessionId":%q}`, s))["requests"].([]any)
		require.Len(t, pending, 1, "session %s lists the grandchild's request", s)
	}
	a.answer(sid, req, "allow")
	resolved := a.waitSignal(sid, "approval:resolved").params(t)
	assert.Equal(t, grandchild, resolved["childSessionId"])
	end := a.runEnd(sid)
	require.Equal(t, true, end["ok"], "%v", end)
	assert.Equal(t, "deep\n", e.L.Read(t, "notes.txt"))
	assert.Empty(t, a.result("approvals.list", `{}`)["requests"])
}

// nextDefsSignal returns the next agents:changed, skills:changed or commands:changed signal.
func nextDefsSignal(c *testConn) signal {
	c.t.Helper()
	for {
		s := c.nextSignal()
		switch s.kind {
		case "agents:changed", "skills:changed", "commands:changed":
			return s
		}
	}
}

func TestDefinitionsChangedSignals(t *testing.T) {
	e, _ := newFakeAgentEnv(t)
	a := e.dial()
	a.hello()
	b := e.dial()
	b.hello()
	require.Empty(t, a.result("commands.list", `{}`)["commands"], "the project is watched from its first listing")

	// A new command file: commands:changed, to every chat connection, naming the project.
	e.L.Write(t, ".zidane/commands/review.md", "---\ndescription: Review a file\n---\nReview $1.\n")
	for _, c := range []*testConn{a, b} {
		s := nextDefsSignal(c)
		require.Equal(t, "commands:changed", s.kind)
		root, _ := s.params(t)["projectRoot"].(string)
		require.NotEmpty(t, root)
		cmds := c.result("commands.list", fmt.Sprintf(`{"cwd":%q}`, root))["commands"].([]any)
		require.Len(t, cmds, 1)
		assert.Equal(t, "review", cmds[0].(map[string]any)["name"])
	}

	// A skill moves two lists (skills are commands too); an agent file only the agents.
	e.L.Write(t, ".zidane/skills/notes/SKILL.md", "---\nname: notes\ndescription: Keep notes\n---\nWrite notes.\n")
	got := map[string]bool{nextDefsSignal(a).kind: true, nextDefsSignal(a).kind: true}
	assert.Equal(t, map[string]bool{"skills:changed": true, "commands:changed": true}, got)
	// Editing a skill's SKILL.md (inside its own folder) is seen too.
	e.L.Write(t, ".zidane/skills/notes/SKILL.md", "---\nname: notes\ndescription: Keep short notes\n---\nWrite notes.\n")
	got = map[string]bool{nextDefsSignal(a).kind: true, nextDefsSignal(a).kind: true}
	assert.Equal(t, map[string]bool{"skills:changed": true, "commands:changed": true}, got)
	e.L.Write(t, ".zidane/agents/lead.md", "---\ntools: read_file\n---\nLead.\n")
	assert.Equal(t, "agents:changed", nextDefsSignal(a).kind)
	// A broken file is a change of the list's problems.
	e.L.Write(t, ".zidane/agents/broken.md", "---\ntools: [\n---\n")
	assert.Equal(t, "agents:changed", nextDefsSignal(a).kind)
	problems := a.result("agents.list", `{}`)["problems"].([]any)
	assert.Len(t, problems, 1)
}
