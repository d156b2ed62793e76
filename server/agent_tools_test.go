package server

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zidane-server/zidane/server/agent"
	"github.com/zidane-server/zidane/server/agent/provider"
	"github.com/zidane-server/zidane/server/agent/provider/openai"
	"github.com/zidane-server/zidane/server/agent/provider/openai/openaitest"
	"github.com/zidane-server/zidane/server/agent/provider/scripted"
	"github.com/zidane-server/zidane/server/workspace/workspacetest"
)

// The agent's tools end to end (issue 9): a real Server on a real Postgres over a real WebSocket,
// the model played by the scripted provider's script or by the OpenAI-compatible fake endpoint,
// the workspace the runtime cases' layout.

// agentEnv is a test server whose model is p, rooted in a fresh workspacetest layout.
type agentEnv struct {
	*testEnv
	L *workspacetest.Layout
}

func newAgentEnv(t *testing.T, p provider.Provider, mod func(*Config)) *agentEnv {
	t.Helper()
	L := workspacetest.New(t)
	models, err := agent.NewRegistry(context.Background(), "", p)
	require.NoError(t, err)
	e := newEnv(t, func(c *Config) {
		c.WorkspaceRoots = []string{L.WS}
		c.Models = models
		if mod != nil {
			mod(c)
		}
	})
	return &agentEnv{testEnv: e, L: L}
}

// script builds a scripted provider playing turns; each turn is a list of steps (JSON objects).
func script(t *testing.T, turns ...[]string) provider.Provider {
	t.Helper()
	var b strings.Builder
	b.WriteString(`{"turns":[`)
	for i, steps := range turns {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"steps":[` + strings.Join(steps, ",") + `]}`)
	}
	b.WriteString(`]}`)
	s, err := scripted.Parse([]byte(b.String()))
	require.NoError(t, err, b.String())
	return scripted.New(scripted.Options{Script: s})
}

// toolStep is a script step calling tool with args (a JSON object).
func toolStep(name, args string) string {
	return fmt.Sprintf(`{"tool":{"name":%q,"arguments":%s}}`, name, args)
}

func textStep(s string) string { return fmt.Sprintf(`{"text":%q}`, s) }

func execArgs(cmd string) string {
	b, _ := json.Marshal(map[string]string{"command": cmd})
	return string(b)
}

// params decodes a signal's params.
func (s signal) params(t *testing.T) map[string]any {
	t.Helper()
	return decodeObj(t, s.raw)["params"].(map[string]any)
}

// waitSignal reads the connection's signals until one of kind for the session arrives (others are
// dropped) and returns it, failing after 10 s.
func (c *testConn) waitSignal(sessionID, kind string) signal {
	c.t.Helper()
	for {
		s := c.nextSignal()
		if s.kind == kind && (sessionID == "" || s.session == sessionID) {
			return s
		}
	}
}

// approval waits for the session's approval:request and returns the request.
func (c *testConn) approval(sessionID string) map[string]any {
	c.t.Helper()
	return c.waitSignal(sessionID, "approval:request").params(c.t)["request"].(map[string]any)
}

func (c *testConn) answer(sessionID string, req map[string]any, decision string) map[string]any {
	c.t.Helper()
	return c.result("approvals.answer", fmt.Sprintf(`{"sessionId":%q,"requestId":%q,"decision":%q}`, sessionID, req["requestId"], decision))
}

func (c *testConn) prompt(sessionID, prompt string) string {
	c.t.Helper()
	return c.result("chat.send", fmt.Sprintf(`{"sessionId":%q,"prompt":%q}`, sessionID, prompt))["runId"].(string)
}

// runEnd waits for the session's run:end and returns its params.
func (c *testConn) runEnd(sessionID string) map[string]any {
	c.t.Helper()
	return c.waitSignal(sessionID, "run:end").params(c.t)
}

// toolResults returns the tool-result events of the session's transcript, in order.
func (c *testConn) toolResults(sessionID string) []map[string]any {
	c.t.Helper()
	var out []map[string]any
	for _, x := range c.result("sessions.loadEvents", fmt.Sprintf(`{"sessionId":%q}`, sessionID))["events"].([]any) {
		if ev := x.(map[string]any); ev["kind"] == "tool-result" {
			out = append(out, ev)
		}
	}
	return out
}

// TestAgentApprovalAnsweredBySecondConnection: A prompts; B, another window, gets the request,
// allows it; every window sees approval:resolved; the file is written and its tool-result carries
// the diff; presence says attention while the run waits.
func TestAgentApprovalAnsweredBySecondConnection(t *testing.T) {
	e := newAgentEnv(t, script(t, []string{toolStep("write_file", `{"path":"notes/a.txt","content":"hello\n"}`)}, []string{textStep("Written.")}), nil)
	a := e.dial()
	a.hello()
	b := e.dial()
	b.hello()
	sid := a.newSession()
	a.prompt(sid, "write it")
	req := b.approval(sid)
	assert.Equal(t, "write_file", req["tool"])
	assert.Contains(t, req["diff"], "+hello")
	assert.Equal(t, "write_file", req["alwaysStores"])
	assert.False(t, e.L.Exists("notes/a.txt"))
	for {
		p := b.waitSignal("", "presence:changed").params(t)
		if ss := p["sessions"].([]any); len(ss) > 0 && ss[0].(map[string]any)["attention"] == true {
			break
		}
	}
	b.answer(sid, req, "allow")
	res := a.waitSignal(sid, "approval:resolved").params(t)
	assert.Equal(t, "allow", res["resolution"])
	assert.Equal(t, req["requestId"], res["requestId"])
	end := a.runEnd(sid)
	assert.Equal(t, true, end["ok"], "%v", end)
	assert.Equal(t, "hello\n", e.L.Read(t, "notes/a.txt"))
	trs := a.toolResults(sid)
	require.Len(t, trs, 1)
	assert.Contains(t, trs[0]["diff"], "+++ b/notes/a.txt")
	assert.Empty(t, a.result("approvals.list", `{}`)["requests"])
}

// TestAgentAlwaysThenSamePrefix: always on `git status` stores exec:git status; the next
// `git status --short` runs without asking, `git log` asks (denied here), and safelist.list shows
// the one entry.
func TestAgentAlwaysThenSamePrefix(t *testing.T) {
	e := newAgentEnv(t, script(t,
		[]string{toolStep("exec", execArgs("git status"))}, []string{textStep("ok")},
		[]string{toolStep("exec", execArgs("git status --short"))}, []string{toolStep("exec", execArgs("git log"))}, []string{textStep("done")},
	), nil)
	c := e.dial()
	c.hello()
	sid := c.newSession()
	c.prompt(sid, "status")
	req := c.approval(sid)
	assert.Equal(t, "exec:git status", req["alwaysStores"])
	r := c.answer(sid, req, "always")
	assert.Equal(t, "git status", r["stored"].(map[string]any)["prefix"])
	require.Equal(t, true, c.runEnd(sid)["ok"])

	c.prompt(sid, "again")
	var kinds []string
	for {
		s := c.nextSignal()
		if s.session != sid {
			continue
		}
		kinds = append(kinds, s.kind)
		if s.kind == "approval:request" {
			req = s.params(t)["request"].(map[string]any)
			break
		}
	}
	assert.Equal(t, "exec git log", req["summary"], "the first call ran without asking; the second asks")
	c.answer(sid, req, "deny")
	require.Equal(t, true, c.runEnd(sid)["ok"])
	trs := c.toolResults(sid)
	require.Len(t, trs, 3)
	assert.NotContains(t, trs[1]["text"], "denied", "git status --short ran")
	assert.Contains(t, trs[2]["text"], "denied")
	es := c.result("safelist.list", `{}`)["entries"].([]any)
	require.Len(t, es, 1)
	assert.Equal(t, "git status", es[0].(map[string]any)["prefix"])
	// The command the safelist let through is in the audit log, by actor safelist (issue 22
	// item 5), naming the entry that allowed it.
	admin := e.dialAs(e.mint("admin"))
	var byList []string
	for _, x := range admin.result("audit.list", fmt.Sprintf(`{"sessionId":%q}`, sid))["entries"].([]any) {
		if en := x.(map[string]any); en["actor"] == "safelist" && en["action"] == "approval" {
			byList = append(byList, en["detail"].(string))
		}
	}
	require.Len(t, byList, 1)
	assert.Regexp(t, `^allow exec git status --short \(safelist exec git status by .+\)$`, byList[0])
}

// TestAgentDenyThenContinues: a denied exec becomes a tool result that says so and the agent's
// next turn runs; nothing executed.
func TestAgentDenyThenContinues(t *testing.T) {
	e := newAgentEnv(t, script(t, []string{toolStep("exec", execArgs("touch pwned"))}, []string{textStep("I will not run it.")}), nil)
	c := e.dial()
	c.hello()
	sid := c.newSession()
	c.prompt(sid, "touch")
	c.answer(sid, c.approval(sid), "deny")
	end := c.runEnd(sid)
	assert.Equal(t, true, end["ok"])
	assert.False(t, e.L.Exists("pwned"))
	trs := c.toolResults(sid)
	require.Len(t, trs, 1)
	assert.Equal(t, true, trs[0]["isError"])
	assert.Contains(t, trs[0]["text"], "denied")
	var md strings.Builder
	for _, x := range c.result("sessions.loadEvents", fmt.Sprintf(`{"sessionId":%q}`, sid))["events"].([]any) {
		if ev := x.(map[string]any); ev["kind"] == "markdown" {
			md.WriteString(ev["text"].(string))
		}
	}
	assert.Contains(t, md.String(), "I will not run it.")
}

// TestAgentQuestionAnsweredAndDismissed: ask_user pushes interaction:request; one is answered,
// the next dismissed (null), and each tool result says which.
func TestAgentQuestionAnsweredAndDismissed(t *testing.T) {
	e := newAgentEnv(t, script(t,
		[]string{`{"ask":{"prompt":"Which file?","options":["a.go","b.go"]}}`},
		[]string{`{"ask":{"prompt":"Anything else?"}}`},
		[]string{textStep("Thanks.")}), nil)
	a := e.dial()
	a.hello()
	b := e.dial()
	b.hello()
	sid := a.newSession()
	a.prompt(sid, "ask me")
	q := b.waitSignal(sid, "interaction:request").params(t)["request"].(map[string]any)
	assert.Equal(t, "Which file?", q["prompt"])
	assert.Equal(t, []any{"a.go", "b.go"}, q["options"])
	lst := b.result("interactions.list", fmt.Sprintf(`{"sessionId":%q}`, sid))["requests"].([]any)
	require.Len(t, lst, 1)
	m := b.call("interactions.answer", fmt.Sprintf(`{"sessionId":%q,"requestId":%q,"answer":{"choices":["c.go"]}}`, sid, q["requestId"]))
	assert.Equal(t, -32014, errCode(m), "an option not offered is refused")
	b.result("interactions.answer", fmt.Sprintf(`{"sessionId":%q,"requestId":%q,"answer":{"choices":["b.go"]}}`, sid, q["requestId"]))
	res := a.waitSignal(sid, "interaction:resolved").params(t)
	assert.Equal(t, "answered", res["resolution"])

	q = b.waitSignal(sid, "interaction:request").params(t)["request"].(map[string]any)
	assert.Equal(t, true, q["allowText"])
	b.result("interactions.answer", fmt.Sprintf(`{"sessionId":%q,"requestId":%q,"answer":null}`, sid, q["requestId"]))
	assert.Equal(t, "dismissed", a.waitSignal(sid, "interaction:resolved").params(t)["resolution"])
	require.Equal(t, true, a.runEnd(sid)["ok"])
	trs := a.toolResults(sid)
	require.Len(t, trs, 2)
	assert.Equal(t, `The user chose "b.go".`, trs[0]["text"])
	assert.Contains(t, trs[1]["text"], "dismissed")
}

// TestAgentApprovalsListAfterReconnect: the window that saw the request drops; a new connection
// finds it with approvals.list and answers it.
func TestAgentApprovalsListAfterReconnect(t *testing.T) {
	e := newAgentEnv(t, script(t, []string{toolStep("write_file", `{"path":"x.txt","content":"x"}`)}, []string{textStep("ok")}), nil)
	a := e.dial()
	a.hello()
	sid := a.newSession()
	a.prompt(sid, "go")
	req := a.approval(sid)
	a.ws.CloseNow()

	b := e.dial()
	b.hello()
	lst := b.result("approvals.list", `{}`)["requests"].([]any)
	require.Len(t, lst, 1, "the request survives the disconnect")
	got := lst[0].(map[string]any)
	assert.Equal(t, req["requestId"], got["requestId"])
	assert.Equal(t, sid, got["sessionId"])
	b.answer(sid, got, "allow")
	require.Eventually(t, func() bool { return e.L.Exists("x.txt") }, 5*time.Second, 10*time.Millisecond)
}

// TestAgentQueueListRemove: follow-ups sent while a run waits are listed, one is removed
// (queue:changed each time), and the other runs after the first run ends.
func TestAgentQueueListRemove(t *testing.T) {
	e := newAgentEnv(t, script(t, []string{toolStep("exec", execArgs("true"))}, []string{textStep("first")}, []string{textStep("third")}), nil)
	c := e.dial()
	c.hello()
	sid := c.newSession()
	c.prompt(sid, "first")
	req := c.approval(sid)
	second := c.prompt(sid, "second")
	third := c.prompt(sid, "third")
	items := c.result("queue.list", fmt.Sprintf(`{"sessionId":%q}`, sid))["items"].([]any)
	require.Len(t, items, 2)
	assert.Equal(t, second, items[0].(map[string]any)["runId"])
	assert.Equal(t, "third", items[1].(map[string]any)["prompt"])
	assert.Equal(t, true, c.result("queue.remove", fmt.Sprintf(`{"sessionId":%q,"runId":%q}`, sid, second))["removed"])
	assert.Equal(t, false, c.result("queue.remove", fmt.Sprintf(`{"sessionId":%q,"runId":%q}`, sid, second))["removed"])
	items = c.result("queue.list", fmt.Sprintf(`{"sessionId":%q}`, sid))["items"].([]any)
	require.Len(t, items, 1)
	assert.Equal(t, third, items[0].(map[string]any)["runId"])
	var changes []int
	for len(changes) < 3 {
		changes = append(changes, len(c.waitSignal(sid, "queue:changed").params(t)["items"].([]any)))
	}
	assert.Equal(t, []int{1, 2, 1}, changes)
	c.answer(sid, req, "allow")
	ends := map[string]bool{}
	for len(ends) < 3 {
		p := c.runEnd(sid)
		ends[p["runId"].(string)] = p["ok"] == true
	}
	assert.False(t, ends[second], "the removed follow-up ends as cancelled")
	assert.True(t, ends[third], "the other one ran")
}

// TestAgentCancelDuringExec: chat.cancel during `exec sleep 60` ends the run within a second and
// leaves no process of the command behind (found by a marker in their command lines: the command
// runs in the sandbox's own PID namespace, so the pids it sees are not the host's).
func TestAgentCancelDuringExec(t *testing.T) {
	marker := fmt.Sprintf("60.%06d", time.Now().UnixNano()%1000000)
	e := newAgentEnv(t, script(t, []string{toolStep("exec", execArgs("sleep "+marker+" & echo started > pid; wait"))}), nil)
	c := e.dial()
	c.hello()
	sid := c.newSession()
	c.prompt(sid, "sleep")
	c.answer(sid, c.approval(sid), "allow")
	require.Eventually(t, func() bool {
		_, err := os.Stat(filepath.Join(e.L.WS, "pid"))
		return err == nil && markerAlive(marker)
	}, 5*time.Second*raceSlowdown, 10*time.Millisecond)
	start := time.Now()
	assert.Equal(t, true, c.result("chat.cancel", fmt.Sprintf(`{"sessionId":%q}`, sid))["cancelled"])
	end := c.runEnd(sid)
	took := time.Since(start)
	t.Logf("cancel → run:end in %s", took.Round(time.Millisecond))
	assert.Less(t, took, time.Second*raceSlowdown, "run:end within a second of the cancel (scaled under -race)")
	assert.Equal(t, false, end["ok"])
	require.Eventually(t, func() bool { return !markerAlive(marker) }, time.Second*raceSlowdown, 10*time.Millisecond, "no process left")
	trs := c.toolResults(sid)
	require.Len(t, trs, 1)
	assert.Contains(t, trs[0]["text"], "cancelled")
}

// markerAlive reports whether a live process (not a zombie) has marker in its command line.
func markerAlive(marker string) bool {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); err == nil && strings.Contains(string(b), marker) && procAlive(pid) {
			return true
		}
	}
	return false
}

// procAlive reports whether pid runs (a zombie does not count).
func procAlive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	st := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])[0]
	return st != "Z" && st != "X"
}

// TestRuntimeCase_R29_CancelWhileApprovalPending: with the OpenAI-compatible fake as the model,
// a cancel withdraws the pending request within a second (approval:resolved withdrawn, run:end
// ok:false, approvals.list empty, attention false); a late answer is refused and the command never
// runs; the stored result says withdrawn, not denied; the next chat.send runs at once; while the
// request was pending the model got no further request.
func TestRuntimeCase_R29_CancelWhileApprovalPending(t *testing.T) {
	fake := openaitest.New(t)
	fake.Enqueue(openaitest.CallReply(10, 5, openaitest.Call{ID: "call_1", Name: "exec", Args: execArgs("touch after-cancel")}))
	p := openai.New(openai.Config{BaseURL: fake.BaseURL(), Models: []provider.Model{{ID: "openai/m", Provider: "openai", Name: "m", ContextWindow: 32000}}})
	e := newAgentEnv(t, p, nil)
	a := e.dial()
	a.hello()
	b := e.dial()
	b.hello()
	sid := a.newSession()
	a.prompt(sid, "touch it")
	req := a.approval(sid)
	time.Sleep(100 * time.Millisecond)
	assert.Len(t, fake.StreamRequests(), 1, "nothing but the person resolves a pending request")
	start := time.Now()
	a.result("chat.cancel", fmt.Sprintf(`{"sessionId":%q}`, sid))
	res := b.waitSignal(sid, "approval:resolved").params(t)
	assert.Equal(t, "withdrawn", res["resolution"])
	end := b.runEnd(sid)
	assert.Less(t, time.Since(start), time.Second)
	assert.Equal(t, false, end["ok"])
	assert.Empty(t, b.result("approvals.list", `{}`)["requests"])
	m := b.call("approvals.answer", fmt.Sprintf(`{"sessionId":%q,"requestId":%q,"decision":"allow"}`, sid, req["requestId"]))
	assert.Equal(t, -32014, errCode(m), "a late answer is refused")
	for {
		p := b.waitSignal("", "presence:changed").params(t)
		ss := p["sessions"].([]any)
		if len(ss) == 0 || ss[0].(map[string]any)["attention"] == false {
			break
		}
	}
	time.Sleep(100 * time.Millisecond)
	assert.False(t, e.L.Exists("after-cancel"))
	trs := b.toolResults(sid)
	require.Len(t, trs, 1)
	assert.Contains(t, trs[0]["text"], "withdrawn")
	assert.NotContains(t, trs[0]["text"], "denied this call")

	fake.Enqueue(openaitest.Reply("Hello again.", 20, 3))
	next := b.prompt(sid, "next")
	for {
		p := b.runEnd(sid)
		if p["runId"] == next {
			assert.Equal(t, true, p["ok"], "the next prompt runs at once: %v", p)
			break
		}
	}
	reqs := fake.StreamRequests()
	require.Len(t, reqs, 2)
	body := string(reqs[1].Body)
	assert.Contains(t, body, "call_1", "the history keeps the withdrawn call with its result (R15)")
	assert.Contains(t, body, "withdrawn")
}

// TestAgentOpenAIReadEditExecAnswer: one run against the OpenAI-compatible fake: read a file, edit
// it after approval, run a command after approval, answer; the transcript and the file on disk
// are checked, and each request carries the previous results.
func TestAgentOpenAIReadEditExecAnswer(t *testing.T) {
	fake := openaitest.New(t)
	fake.Enqueue(
		openaitest.CallReply(10, 5, openaitest.Call{ID: "c1", Name: "read_file", Args: `{"path":"greet.txt"}`}),
		openaitest.CallReply(20, 5, openaitest.Call{ID: "c2", Name: "edit_file", Args: `{"path":"greet.txt","old":"hello","new":"hello, world"}`}),
		openaitest.CallReply(30, 5, openaitest.Call{ID: "c3", Name: "exec", Args: execArgs("cat greet.txt")}),
		openaitest.Reply("The file now greets the world.", 40, 7),
	)
	p := openai.New(openai.Config{BaseURL: fake.BaseURL(), Models: []provider.Model{{ID: "openai/m", Provider: "openai", Name: "m", ContextWindow: 32000}}})
	e := newAgentEnv(t, p, nil)
	e.L.Write(t, "greet.txt", "hello\n")
	c := e.dial()
	c.hello()
	sid := c.newSession()
	c.prompt(sid, "greet the world")
	req := c.approval(sid)
	assert.Equal(t, "edit_file", req["tool"])
	assert.Contains(t, req["diff"], "-hello\n+hello, world\n")
	c.answer(sid, req, "allow")
	req = c.approval(sid)
	assert.Equal(t, "exec cat greet.txt", req["summary"])
	c.answer(sid, req, "allow")
	end := c.runEnd(sid)
	require.Equal(t, true, end["ok"], "%v", end)
	assert.Equal(t, "hello, world\n", e.L.Read(t, "greet.txt"))

	var kinds []string
	var answer strings.Builder
	evs := c.result("sessions.loadEvents", fmt.Sprintf(`{"sessionId":%q}`, sid))["events"].([]any)
	for _, x := range evs {
		ev := x.(map[string]any)
		kinds = append(kinds, ev["kind"].(string))
		if ev["kind"] == "markdown" {
			answer.WriteString(ev["text"].(string))
		}
	}
	assert.Equal(t, []string{"user-prompt", "tool", "tool-result", "tool", "tool-result", "tool", "tool-result", "markdown", "run-summary"}, kinds)
	assert.Equal(t, "The file now greets the world.", answer.String())
	trs := c.toolResults(sid)
	assert.Contains(t, trs[0]["text"], "1\thello")
	assert.Contains(t, trs[1]["diff"], "+hello, world")
	assert.Contains(t, trs[2]["text"], "hello, world")

	reqs := fake.StreamRequests()
	require.Len(t, reqs, 4)
	assert.Contains(t, string(reqs[1].Body), `1\thello`, "the read's result reaches the model")
	assert.Contains(t, string(reqs[3].Body), "hello, world", "the command's output reaches the model")
	assert.Contains(t, string(reqs[0].Body), `"name":"edit_file"`, "the tools' schemas are sent")
}

// TestAgentExecHasNoSecrets: an exec of env shows none of the server's secrets (a fake provider key
// and DATABASE_URL are in the server's environment).
func TestAgentExecHasNoSecrets(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-fake-secret-R26")
	t.Setenv("ANTHROPIC_API_KEY", "sk-ant-fake-secret-R26")
	t.Setenv("MY_LLM_KEY", "sk-fake-secret-R26b")
	e := newAgentEnv(t, script(t, []string{toolStep("exec", execArgs("env; cat /proc/self/environ"))}, []string{textStep("ok")}), nil)
	c := e.dial()
	c.hello()
	sid := c.newSession()
	c.prompt(sid, "env")
	c.answer(sid, c.approval(sid), "allow")
	require.Equal(t, true, c.runEnd(sid)["ok"])
	trs := c.toolResults(sid)
	require.Len(t, trs, 1)
	out := trs[0]["text"].(string)
	assert.Contains(t, out, "PATH=")
	for _, secret := range []string{"sk-fake-secret-R26", "sk-ant-fake-secret-R26", "DATABASE_URL", "OPENAI_API_KEY", "MY_LLM_KEY"} {
		assert.NotContains(t, out, secret)
	}
	if u := os.Getenv("DATABASE_URL"); u != "" {
		assert.NotContains(t, out, u)
	}
}
