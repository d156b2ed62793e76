package server

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zidane-server/zidane/server/agent/provider"
	"github.com/zidane-server/zidane/server/agent/provider/openai"
	"github.com/zidane-server/zidane/server/agent/provider/openai/openaitest"
)

// Issue 28, "History": fork, rollback, restore and compaction over a real WebSocket, the model
// the OpenAI-compatible fake endpoint, whose record of requests shows what the model was sent.

// historyEnv is a server whose model is the fake endpoint (window 200k, or as given).
func historyEnv(t *testing.T, window int) (*agentEnv, *openaitest.Server, *testConn) {
	t.Helper()
	fake := openaitest.New(t)
	fake.Validate(openaitest.CheckHistory)
	p := openai.New(openai.Config{BaseURL: fake.BaseURL(), Models: []provider.Model{{ID: "openai/m", Provider: "openai", Name: "m", ContextWindow: window}}})
	e := newAgentEnv(t, p, nil)
	c := e.dial()
	c.hello()
	return e, fake, c
}

// ask sends prompt, has the fake answer reply, and waits for the run's successful end.
func (c *testConn) ask(fake *openaitest.Server, sid, prompt, reply string) {
	c.t.Helper()
	fake.Enqueue(openaitest.Reply(reply, 10, 3))
	end := c.runEndOf(sid, c.prompt(sid, prompt))
	require.Equal(c.t, true, end["ok"], "%v", end)
}

// events is the session's whole transcript.
func (c *testConn) events(sid string) []map[string]any {
	c.t.Helper()
	var out []map[string]any
	for _, x := range c.result("sessions.loadEvents", fmt.Sprintf(`{"sessionId":%q}`, sid))["events"].([]any) {
		out = append(out, x.(map[string]any))
	}
	return out
}

// promptTurn is the turnId of the session's user prompt with text.
func (c *testConn) promptTurn(sid, text string) string {
	c.t.Helper()
	for _, ev := range c.events(sid) {
		if ev["kind"] == "user-prompt" && ev["text"] == text {
			return ev["turnId"].(string)
		}
	}
	c.t.Fatalf("no prompt %q in %s", text, sid)
	return ""
}

// sent is the user and assistant texts of the fake's last request, in order.
func sent(t *testing.T, fake *openaitest.Server) []string {
	t.Helper()
	reqs := fake.StreamRequests()
	require.NotEmpty(t, reqs)
	chat, err := openaitest.Chat(reqs[len(reqs)-1])
	require.NoError(t, err)
	var out []string
	for _, m := range chat.Messages {
		if m.Role == "user" || m.Role == "assistant" {
			out = append(out, m.Role+":"+m.Content)
		}
	}
	return out
}

// TestHistoryForkContinuesBoth: a fork at the first exchange holds that exchange, names its
// source, and both sessions go on independently: each next request holds its own line only.
func TestHistoryForkContinuesBoth(t *testing.T) {
	_, fake, c := historyEnv(t, 200000)
	sid := c.newSession()
	c.ask(fake, sid, "U1", "A1")
	c.ask(fake, sid, "U2", "A2")

	fork := c.result("history.fork", fmt.Sprintf(`{"sessionId":%q,"turnId":%q}`, sid, c.promptTurn(sid, "U1")))
	fid := fork["id"].(string)
	assert.Equal(t, sid, fork["forkedFrom"])
	assert.Equal(t, "Fork of U1", fork["title"])
	var kinds []string
	for _, ev := range c.events(fid) {
		kinds = append(kinds, ev["kind"].(string))
	}
	assert.Equal(t, []string{"user-prompt", "markdown", "run-summary"}, kinds)

	c.ask(fake, fid, "F3", "FA3")
	assert.Equal(t, []string{"user:U1", "assistant:A1", "user:F3"}, sent(t, fake), "the fork's line")
	c.ask(fake, sid, "U3", "A3")
	assert.Equal(t, []string{"user:U1", "assistant:A1", "user:U2", "assistant:A2", "user:U3"}, sent(t, fake), "the source's line, without the fork's")
	assert.Len(t, c.events(fid), 6, "the source's prompt did not reach the fork")

	m := c.call("history.fork", fmt.Sprintf(`{"sessionId":%q,"turnId":"nope"}`, sid))
	assert.Contains(t, m["error"].(map[string]any)["message"], `Turn "nope" is not in session`)
}

// TestHistoryRollbackRestore: a rollback drops the later exchanges from the transcript and from
// the next request; a watcher gets session:reset and, reloading, the transcript a fresh load
// has; a restore within the window brings them back as they were; a rollback is refused while a
// run goes on; after a new prompt the dropped line cannot come back in its place.
func TestHistoryRollbackRestore(t *testing.T) {
	e, fake, c := historyEnv(t, 200000)
	sid := c.newSession()
	c.ask(fake, sid, "U1", "A1")
	c.ask(fake, sid, "U2", "A2")
	c.ask(fake, sid, "U3", "A3")
	before := c.events(sid)

	w := e.dial() // a watcher of the session
	w.hello()
	w.result("sessions.loadEvents", fmt.Sprintf(`{"sessionId":%q}`, sid))

	rb := c.result("history.rollback", fmt.Sprintf(`{"sessionId":%q,"turnId":%q}`, sid, c.promptTurn(sid, "U1")))
	assert.Equal(t, int64(2), num(t, rb["dropped"]))
	assert.Equal(t, int64(6), num(t, rb["droppedEvents"]))
	restoreID := rb["restoreId"].(string)
	reset := w.waitSignal(sid, "session:reset")
	assert.NotZero(t, reset.seq, "numbered like any session signal")
	assert.Equal(t, "rollback", reset.params(t)["reason"])
	reload := w.result("sessions.loadEvents", fmt.Sprintf(`{"sessionId":%q}`, sid))
	assert.GreaterOrEqual(t, num(t, reload["$seq"]), reset.seq, "the reload's watermark covers the reset")
	fresh := c.events(sid)
	require.Len(t, fresh, 3)
	got, _ := json.Marshal(reload["events"])
	want, _ := json.Marshal(fresh)
	assert.JSONEq(t, string(want), string(got), "the watcher ends with what a fresh load has")

	// A resume from before the reset returns it.
	res := w.result("sessions.resume", fmt.Sprintf(`{"sessionId":%q,"epoch":%q,"afterSeq":%d}`, sid, reload["signalEpoch"], reset.seq-1))
	require.Equal(t, true, res["ok"])
	sigs := res["signals"].([]any)
	require.NotEmpty(t, sigs)
	assert.Equal(t, "session:reset", sigs[0].(map[string]any)["signal"].(map[string]any)["kind"])

	// Restore within the window: the transcript as it was.
	r := c.result("history.restore", fmt.Sprintf(`{"sessionId":%q,"restoreId":%q}`, sid, restoreID))
	assert.Equal(t, int64(2), num(t, r["restored"]))
	assert.Equal(t, "restore", w.waitSignal(sid, "session:reset").params(t)["reason"])
	got, _ = json.Marshal(c.events(sid))
	want, _ = json.Marshal(before)
	assert.JSONEq(t, string(want), string(got))
	m := c.call("history.restore", fmt.Sprintf(`{"sessionId":%q,"restoreId":%q}`, sid, restoreID))
	assert.Contains(t, m["error"].(map[string]any)["message"], "names no rollback", "a restoreId works once")

	// Rollback, then a prompt: its request holds no dropped turn.
	rb = c.result("history.rollback", fmt.Sprintf(`{"sessionId":%q,"turnId":%q}`, sid, c.promptTurn(sid, "U1")))
	c.ask(fake, sid, "U4", "A4")
	assert.Equal(t, []string{"user:U1", "assistant:A1", "user:U4"}, sent(t, fake))
	body := string(fake.StreamRequests()[len(fake.StreamRequests())-1].Body)
	assert.NotContains(t, body, "U2")
	assert.NotContains(t, body, "A3")
	m = c.call("history.restore", fmt.Sprintf(`{"sessionId":%q,"restoreId":%q}`, sid, rb["restoreId"]))
	assert.Contains(t, m["error"].(map[string]any)["message"], "changed since the rollback")

	// Refused while a run goes on.
	fake.Enqueue(openaitest.Response{Events: []string{openaitest.Text("thinking ")}, Hold: true})
	run := c.prompt(sid, "U5")
	m = c.call("history.rollback", fmt.Sprintf(`{"sessionId":%q,"turnId":%q}`, sid, c.promptTurn(sid, "U1")))
	assert.Contains(t, m["error"].(map[string]any)["message"], "has a run or queued prompts")
	c.result("chat.cancel", fmt.Sprintf(`{"sessionId":%q}`, sid))
	c.runEndOf(sid, run)
	var prompts []string
	for _, ev := range c.events(sid) {
		if ev["kind"] == "user-prompt" {
			prompts = append(prompts, ev["text"].(string))
		}
	}
	assert.Equal(t, []string{"U1", "U4", "U5"}, prompts, "nothing was dropped")
}

// TestHistoryCompact: history.compact has the model summarize every exchange but the last; the
// next request sends the summary instead of them and is smaller by about what they weighed; the
// transcript keeps every event and pages exactly.
func TestHistoryCompact(t *testing.T) {
	e, fake, c := historyEnv(t, 200000)
	sid := c.newSession()
	big := strings.Repeat("old words ", 2000) // 20 kB
	c.ask(fake, sid, "U1", "A1 "+big)
	c.ask(fake, sid, "U2", "A2")
	c.ask(fake, sid, "U3", "A3")
	full := len(fake.StreamRequests()[2].Body)

	w := e.dial()
	w.hello()
	fake.Enqueue(openaitest.Reply("SUMMARY of U1 and U2", 5000, 10))
	res := c.result("history.compact", fmt.Sprintf(`{"sessionId":%q}`, sid))
	assert.Equal(t, int64(2), num(t, res["compacted"]))
	assert.Less(t, num(t, res["tokensAfter"]), num(t, res["tokensBefore"])-4000)
	assert.Equal(t, "compact", w.waitSignal(sid, "session:reset").params(t)["reason"])
	summarize := sent(t, fake)
	assert.Equal(t, "user:U1", summarize[0])
	assert.Contains(t, summarize[len(summarize)-1], "Summarize the conversation above")
	assert.NotContains(t, strings.Join(summarize, "\n"), "U3", "the last exchange is not summarized")

	c.ask(fake, sid, "U4", "A4")
	got := sent(t, fake)
	require.Len(t, got, 4)
	assert.Contains(t, got[0], "SUMMARY of U1 and U2")
	assert.Equal(t, []string{"user:U3", "assistant:A3", "user:U4"}, got[1:])
	last := len(fake.StreamRequests()[len(fake.StreamRequests())-1].Body)
	assert.Greater(t, full-last, len(big)-len(compactionText("SUMMARY of U1 and U2")), "smaller by what was summarized, less the summary")

	// The transcript keeps everything, the compaction marked, and pages exactly.
	evs := c.events(sid)
	var kinds []string
	for _, ev := range evs {
		kinds = append(kinds, ev["kind"].(string))
	}
	assert.Contains(t, kinds, "compaction")
	assert.Equal(t, 4, strings.Count(strings.Join(kinds, " "), "user-prompt"))
	var paged []any
	before := ""
	for {
		p := c.result("sessions.loadEvents", fmt.Sprintf(`{"sessionId":%q,"limit":1%s}`, sid, before))
		paged = append(p["events"].([]any), paged...)
		cur, ok := p["cursor"]
		if !ok {
			break
		}
		before = fmt.Sprintf(`,"before":%s`, cur)
	}
	a, _ := json.Marshal(paged)
	b, _ := json.Marshal(evs)
	assert.JSONEq(t, string(b), string(a), "the pages put together are the transcript")

	// Nothing older than the last exchange: refused.
	other := c.newSession()
	c.ask(fake, other, "only", "one")
	m := c.call("history.compact", fmt.Sprintf(`{"sessionId":%q}`, other))
	assert.Contains(t, m["error"].(map[string]any)["message"], "nothing to compact")
}

// TestHistoryAutoCompact: on a model whose window cannot hold the conversation, the run
// compacts the older exchanges instead of leaving them out, and its summary says so.
func TestHistoryAutoCompact(t *testing.T) {
	_, fake, c := historyEnv(t, 8000)
	sid := c.newSession()
	c.ask(fake, sid, "U1", "A1 "+strings.Repeat("0123456789 ", 1800)) // ≈5k tokens
	fake.Enqueue(openaitest.Reply("SUMMARY-AUTO", 100, 5), openaitest.Reply("A2", 100, 3))
	end := c.runEndOf(sid, c.prompt(sid, "U2"))
	require.Equal(t, true, end["ok"], "%v", end)
	assert.Equal(t, []string{"user:" + compactionText("SUMMARY-AUTO"), "user:U2"}, sent(t, fake))
	sum := c.lastRunSummary(sid)
	assert.Equal(t, int64(1), num(t, sum["compactedExchanges"]))
	_, dropped := sum["droppedExchanges"]
	assert.False(t, dropped, "nothing left out")
}

// compactionText is the user message a compaction's summary is sent as.
func compactionText(summary string) string {
	return "Summary of the conversation so far (it stands in for the earlier exchanges, which are no longer sent):\n\n" + summary
}

// TestHistoryPrompts: the project's prompts newest first, a prompt sent twice once (at its
// newest), bounded by limit.
func TestHistoryPrompts(t *testing.T) {
	_, fake, c := historyEnv(t, 200000)
	a, b := c.newSession(), c.newSession()
	c.ask(fake, a, "first", "1")
	c.ask(fake, b, "second", "2")
	c.ask(fake, a, "first", "3")
	c.ask(fake, b, "third", "4")
	var texts []string
	for _, p := range c.result("history.prompts", `{"cwd":""}`)["prompts"].([]any) {
		texts = append(texts, p.(map[string]any)["text"].(string))
	}
	assert.Equal(t, []string{"third", "first", "second"}, texts)
	assert.Len(t, c.result("history.prompts", `{"cwd":"","limit":2}`)["prompts"], 2)
	m := c.call("history.prompts", `{"cwd":"/etc"}`)
	assert.Contains(t, m["error"].(map[string]any)["message"], "outside the workspace roots")
}

// TestSearchOverTheWire (issue 28, "Search"): a word of a tool result finds its session at the
// result's turn, highlighted; an archived session only when asked; a machine token nothing.
func TestSearchOverTheWire(t *testing.T) {
	e, fake, c := historyEnv(t, 200000)
	e.L.Write(t, "notes.txt", "the quokka configuration lives here\n")
	sid := c.newSession()
	fake.Enqueue(openaitest.CallReply(10, 5, openaitest.Call{ID: "call_1", Name: "read_file", Args: `{"path":"notes.txt"}`}), openaitest.Reply("Read it.", 10, 3))
	require.Equal(t, true, c.runEndOf(sid, c.prompt(sid, "read my notes"))["ok"])
	old := c.newSession()
	c.ask(fake, old, "a quokka question", "answer")
	c.result("sessions.archive", fmt.Sprintf(`{"sessionId":%q,"archived":true}`, old))

	res := c.result("search.sessions", `{"query":"quokka"}`)["results"].([]any)
	require.Len(t, res, 1, "the archived session only when asked")
	hit := res[0].(map[string]any)
	assert.Equal(t, sid, hit["session"].(map[string]any)["id"])
	assert.Equal(t, "tool-result", hit["kind"])
	var resultTurn string
	for _, ev := range c.events(sid) {
		if ev["kind"] == "tool-result" {
			resultTurn = ev["turnId"].(string)
		}
	}
	assert.Equal(t, resultTurn, hit["turnId"])
	snippet := hit["snippet"].(string)
	h := hit["highlights"].([]any)[0].(map[string]any)
	start, n := num(t, h["start"]), num(t, h["length"])
	assert.Equal(t, "quokka", snippet[start:start+n])
	assert.Len(t, c.result("search.sessions", `{"query":"quokka","archived":true}`)["results"], 2)

	m := c.call("search.sessions", `{"query":"quokka","cursor":"nope"}`)
	assert.Equal(t, -32602, errCode(m))
	machine := e.dialAs(e.mint("machine"))
	m = machine.call("search.sessions", `{"query":"quokka"}`)
	assert.NotZero(t, errCode(m), "a machine token sees nothing: %v", m)
	assert.Nil(t, m["result"])
}

// A NUL character in a param of search.sessions, history.prompts or completions.query is
// InvalidParams naming that param (a NUL in search.sessions' cwd was reported on /query), and a
// query of only -words, which would match every session, is InvalidParams saying a query needs a
// word to look for (issue 28).
func TestSearchParamErrorsNameTheParam(t *testing.T) {
	e, fake, c := historyEnv(t, 200000)
	sid := c.newSession()
	c.ask(fake, sid, "the quokka question", "answer")
	cases := []struct{ method, params, pointer string }{
		{"search.sessions", `{"query":"quo\u0000kka"}`, "/query"},
		{"search.sessions", `{"query":"quokka","cwd":"` + e.L.WS + `\u0000x"}`, "/cwd"},
		{"search.sessions", `{"query":"quokka","cursor":"o1\u0000"}`, "/cursor"},
		{"history.prompts", `{"cwd":"` + e.L.WS + `\u0000x"}`, "/cwd"},
		{"completions.query", `{"cwd":"` + e.L.WS + `\u0000x","text":"#quo","position":4}`, "/cwd"},
		{"completions.query", `{"cwd":"` + e.L.WS + `","text":"#quo\u0000","position":5}`, "/text"},
	}
	for _, tc := range cases {
		m := c.call(tc.method, tc.params)
		require.Equal(t, -32602, errCode(m), "%s %s: %v", tc.method, tc.params, m)
		er := m["error"].(map[string]any)
		assert.True(t, strings.HasPrefix(er["message"].(string), "params"+tc.pointer+":"), "%s %s: %v", tc.method, tc.params, er)
		assert.Equal(t, tc.pointer, er["data"].(map[string]any)["pointer"], "%s %s", tc.method, tc.params)
	}

	for _, q := range []string{"-quokka", "-foo -bar", `-"quokka question" or -answer`} {
		m := c.call("search.sessions", fmt.Sprintf(`{"query":%q}`, q))
		require.Equal(t, -32602, errCode(m), "%s: %v", q, m)
		assert.Contains(t, fmt.Sprint(m["error"]), "a query needs at least one word to look for", q)
	}
	assert.Len(t, c.result("search.sessions", `{"query":"quokka -nothing"}`)["results"], 1, "a word with a -word still searches")
}

// TestCompletionsOverTheWire (issue 28, "Completions"): `@` finds files and folders fuzzily,
// the base name first, never a .gitignored one, and follows a file created later (the shared
// watcher); `/` offers the commands at the start only; `#` the sessions by title; chat.send's
// mentions reach the model as read_file results through the workspace's confinement.
func TestCompletionsOverTheWire(t *testing.T) {
	e, fake, c := historyEnv(t, 200000)
	e.L.Write(t, "src/main.go", "package main // MENTIONED-CONTENT\n")
	e.L.Write(t, "src/util/mainly.go", "package util\n")
	e.L.Write(t, "docs/readme.md", "docs\n")
	e.L.Write(t, ".gitignore", "build/\n")
	e.L.Write(t, "build/main.go", "package main\n")
	complete := func(text string) map[string]any {
		t.Helper()
		return c.result("completions.query", fmt.Sprintf(`{"cwd":"","text":%q,"position":%d}`, text, len(text)))
	}
	labels := func(r map[string]any) []string {
		var out []string
		for _, x := range r["items"].([]any) {
			out = append(out, x.(map[string]any)["label"].(string))
		}
		return out
	}
	r := complete("look at @main")
	assert.Equal(t, "@", r["trigger"])
	got := labels(r)
	require.NotEmpty(t, got)
	assert.Equal(t, "src/main.go", got[0], "the base name first: %v", got)
	assert.Contains(t, got, "src/util/mainly.go")
	assert.NotContains(t, got, "build/main.go", "ignored by .gitignore")
	item := r["items"].([]any)[0].(map[string]any)
	assert.Equal(t, "@src/main.go ", item["insertText"])
	assert.Equal(t, int64(8), num(t, item["range"].(map[string]any)["start"]))
	assert.Equal(t, int64(5), num(t, item["range"].(map[string]any)["length"]))
	assert.Equal(t, "src/util/", labels(complete("@utl"))[0]+"/", "a folder by a fuzzy query")
	assert.Empty(t, labels(complete("plain words")), "no trigger, no items")

	// A file made later is found once the watcher saw it.
	e.L.Write(t, "src/fresh_thing.go", "package main\n")
	require.Eventually(t, func() bool {
		g := labels(complete("@fresh_th"))
		return len(g) > 0 && g[0] == "src/fresh_thing.go"
	}, 10*time.Second, 20*time.Millisecond)

	assert.Equal(t, "/", complete("/")["trigger"])
	assert.Empty(t, labels(complete("text /")), "a command only starts the prompt")

	sid := c.newSession()
	c.result("sessions.rename", fmt.Sprintf(`{"sessionId":%q,"title":"Kittiwake refactor"}`, sid))
	r = complete("see #kittiw")
	require.NotEmpty(t, r["items"])
	assert.Equal(t, sid, r["items"].([]any)[0].(map[string]any)["sessionId"])

	// Mentions: the model reads them as read_file results; a path outside is a failed result.
	fake.Enqueue(openaitest.Reply("Seen.", 10, 3))
	run := c.result("chat.send", fmt.Sprintf(`{"sessionId":%q,"prompt":"explain","mentions":[{"path":"src/main.go"},{"path":"/etc/passwd"}]}`, sid))["runId"].(string)
	require.Equal(t, true, c.runEndOf(sid, run)["ok"])
	body := string(fake.StreamRequests()[len(fake.StreamRequests())-1].Body)
	assert.Contains(t, body, "MENTIONED-CONTENT")
	assert.NotContains(t, body, "root:x:0:0")
	var results []string
	for _, ev := range c.events(sid) {
		if ev["kind"] == "tool-result" {
			results = append(results, fmt.Sprint(ev["isError"]))
		}
	}
	assert.Equal(t, []string{"<nil>", "true"}, results, "the second mention is refused by the confinement")
}
