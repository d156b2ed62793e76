package server

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zidane-server/zidane/server/agent/provider"
	"github.com/zidane-server/zidane/server/agent/provider/anthropic"
	"github.com/zidane-server/zidane/server/agent/provider/anthropic/anthropictest"
	"github.com/zidane-server/zidane/server/agent/provider/openai"
	"github.com/zidane-server/zidane/server/agent/provider/openai/openaitest"
)

// Runtime cases R14 and R15 and the small context window through the real providers: a real
// Server on Postgres over a WebSocket, the model the OpenAI-compatible or the Anthropic fake
// endpoint, which refuses (400) any conversation the real API refuses (CheckHistory).

// runEndOf waits for the run:end of runID in the session and returns its params.
func (c *testConn) runEndOf(sessionID, runID string) map[string]any {
	c.t.Helper()
	for {
		if p := c.runEnd(sessionID); p["runId"] == runID {
			return p
		}
	}
}

// lastRunSummary is the runSummary of the session's last run-summary event.
func (c *testConn) lastRunSummary(sessionID string) map[string]any {
	c.t.Helper()
	var sum map[string]any
	for _, x := range c.result("sessions.loadEvents", fmt.Sprintf(`{"sessionId":%q}`, sessionID))["events"].([]any) {
		if ev := x.(map[string]any); ev["kind"] == "run-summary" {
			sum = ev["runSummary"].(map[string]any)
		}
	}
	require.NotNil(c.t, sum, "no run-summary event")
	return sum
}

// maxTokens is the output limit a recorded OpenAI request asked for.
func maxTokens(t *testing.T, r openaitest.Request) int {
	c, err := openaitest.Chat(r)
	require.NoError(t, err)
	return max(c.MaxTokens, c.MaxCompletionTokens)
}

// TestSmallContextWindow: a model whose context window (8192) is no larger than the per-turn
// output limit (8192, the default) still answers: the budget keeps a quarter of the window for
// the answer instead of the whole limit, and the request's max tokens is what the window leaves
// after the conversation (at least that quarter, less than the window).
func TestSmallContextWindow(t *testing.T) {
	fake := openaitest.New(t)
	fake.Validate(openaitest.CheckHistory)
	p := openai.New(openai.Config{BaseURL: fake.BaseURL(), Models: []provider.Model{{ID: "openai/m", Provider: "openai", Name: "m", ContextWindow: 8192}}})
	e := newAgentEnv(t, p, nil)
	c := e.dial()
	c.hello()
	sid := c.newSession()
	fake.Enqueue(openaitest.Reply("Hello from a small model.", 900, 6))
	end := c.runEndOf(sid, c.prompt(sid, "hi"))
	require.Equal(t, true, end["ok"], "%v", end)
	reqs := fake.StreamRequests()
	require.Len(t, reqs, 1)
	n := maxTokens(t, reqs[0])
	assert.GreaterOrEqual(t, n, 8192/4, "at least the reserved quarter of the window")
	assert.Less(t, n, 8192, "the conversation takes part of the window")
	assert.LessOrEqual(t, n+len(reqs[0].Body)/5, 8192, "max tokens plus the request (≥ 5 bytes a token) fit the window")
}

// TestRuntimeCase_R14_TrimThroughTheOpenAIFake: U1 with a read_file of ≈10k tokens, U2 with two
// parallel calls, both with the results and answers the fake streamed; then, on a model with an
// 8000-token window, U3: the request the fake receives (and validates) drops the first exchange
// whole, keeps call_2 and call_3 with their results, and the run summary says 1 was dropped. A
// newest exchange that alone does not fit ends the run with "context too long" and no request.
func TestRuntimeCase_R14_TrimThroughTheOpenAIFake(t *testing.T) {
	fake := openaitest.New(t)
	fake.Validate(openaitest.CheckHistory)
	p := openai.New(openai.Config{BaseURL: fake.BaseURL(), Models: []provider.Model{
		{ID: "openai/m", Provider: "openai", Name: "m", ContextWindow: 200000},
		{ID: "openai/small", Provider: "openai", Name: "small", ContextWindow: 8000},
	}})
	e := newAgentEnv(t, p, func(c *Config) { c.RunLimits.MaxOutputTokens = 500 })
	line := strings.Repeat("0123456789", 8) + "\n"
	e.L.Write(t, "big.txt", strings.Repeat(line, 500)) // 40 KB: ≈10k tokens
	e.L.Write(t, "a.txt", "A\n")
	e.L.Write(t, "b.txt", "B\n")
	c := e.dial()
	c.hello()
	// Trimming, not compaction (TestHistoryAutoCompact): the setting off.
	e.dialAs(e.mint("admin")).result("settings.set", `{"settings":{"autoCompact":false}}`)
	sid := c.newSession()
	c.result("sessions.setModel", fmt.Sprintf(`{"sessionId":%q,"model":"openai/m"}`, sid))

	fake.Enqueue(openaitest.CallReply(10, 5, openaitest.Call{ID: "call_1", Name: "read_file", Args: `{"path":"big.txt"}`}), openaitest.Reply("A1 text", 10000, 3))
	require.Equal(t, true, c.runEndOf(sid, c.prompt(sid, "U1"))["ok"])
	fake.Enqueue(openaitest.CallReply(20, 5, openaitest.Call{ID: "call_2", Name: "read_file", Args: `{"path":"a.txt"}`}, openaitest.Call{ID: "call_3", Name: "read_file", Args: `{"path":"b.txt"}`}),
		openaitest.Reply("A2 text", 10100, 3))
	require.Equal(t, true, c.runEndOf(sid, c.prompt(sid, "U2"))["ok"])
	_, dropped := c.lastRunSummary(sid)["droppedExchanges"]
	assert.False(t, dropped, "the large window keeps everything")

	c.result("sessions.setModel", fmt.Sprintf(`{"sessionId":%q,"model":"openai/small"}`, sid))
	fake.Enqueue(openaitest.Reply("A3 text", 300, 3))
	end := c.runEndOf(sid, c.prompt(sid, "U3"))
	require.Equal(t, true, end["ok"], "the fake accepted the trimmed history: %v", end)
	reqs := fake.StreamRequests()
	require.Len(t, reqs, 5)
	last, err := openaitest.Chat(reqs[4])
	require.NoError(t, err)
	assert.Equal(t, "small", last.Model)
	var shape []string
	for _, m := range last.Messages {
		s := m.Role
		switch {
		case m.Role == "user" || (m.Role == "assistant" && m.Content != ""):
			s += ":" + m.Content
		case m.Role == "tool":
			s += ":" + m.ToolCallID
		}
		for _, tc := range m.ToolCalls {
			s += ":" + tc.ID
		}
		shape = append(shape, s)
	}
	assert.Equal(t, []string{"system", "user:U2", "assistant:call_2:call_3", "tool:call_2", "tool:call_3", "assistant:A2 text", "user:U3"}, shape,
		"the first exchange dropped whole; the parallel calls stay with their results")
	assert.NotContains(t, string(reqs[4].Body), "call_1")
	assert.Equal(t, int64(1), num(t, c.lastRunSummary(sid)["droppedExchanges"]), "the run summary says how many")
	assert.LessOrEqual(t, maxTokens(t, reqs[4]), 500)

	// The newest exchange alone does not fit: no request, a "context too long" error.
	end = c.runEndOf(sid, c.prompt(sid, strings.Repeat("too long ", 4000)))
	assert.Equal(t, false, end["ok"])
	assert.Contains(t, end["error"], "Context too long")
	assert.Len(t, fake.StreamRequests(), 5, "half an exchange is never sent")
}

// r15Fake is one API's fake for runtime case R15: its provider and its answers.
type r15Fake struct {
	name     string
	provider provider.Provider
	requests func() []openaitest.Request
	pending  func() int
	// call answers with a call of exec {"command":"sleep 60"} with id; cut streams text, then
	// opens that call and cuts the stream before it closes; reply answers text.
	call, cut func(id string)
	reply     func(text string)
}

func r15Fakes(t *testing.T) []r15Fake {
	oa := openaitest.New(t)
	oa.Validate(openaitest.CheckHistory)
	an := anthropictest.New(t)
	an.Validate(anthropictest.CheckHistory)
	args := execArgs("sleep 60")
	return []r15Fake{{
		name:     "openai",
		provider: openai.New(openai.Config{BaseURL: oa.BaseURL(), Models: []provider.Model{{ID: "openai/m", Provider: "openai", Name: "m", ContextWindow: 32000}}}),
		requests: oa.StreamRequests,
		pending:  oa.Pending,
		call: func(id string) {
			oa.Enqueue(openaitest.CallReply(10, 5, openaitest.Call{ID: id, Name: "exec", Args: args}))
		},
		cut: func(id string) {
			oa.Enqueue(openaitest.Response{Abort: true, Events: []string{openaitest.Text("Running it. "), openaitest.ToolCall(0, id, "exec", args[:10])}})
		},
		reply: func(text string) { oa.Enqueue(openaitest.Reply(text, 20, 3)) },
	}, {
		name:     "anthropic",
		provider: anthropic.New(anthropic.Config{BaseURL: an.URL(), Models: []provider.Model{{ID: "anthropic/m", Provider: "anthropic", Name: "m", ContextWindow: 32000}}}),
		requests: an.StreamRequests,
		pending:  an.Pending,
		call: func(id string) {
			an.Enqueue(anthropictest.CallReply(10, 5, anthropictest.Call{ID: id, Name: "exec", Input: args}))
		},
		cut: func(id string) {
			an.Enqueue(anthropictest.Response{Abort: true, Events: []string{anthropictest.MessageStart(10), anthropictest.TextStart(0), anthropictest.TextDelta(0, "Running it. "), anthropictest.BlockStop(0),
				anthropictest.ToolStart(1, id, "exec"), anthropictest.InputDelta(1, args[:10])}})
		},
		reply: func(text string) { an.Enqueue(anthropictest.Reply(text, 20, 3)) },
	}}
}

// TestRuntimeCase_R15_MidToolThroughTheFakes: with each fake (OpenAI-compatible, Anthropic), a
// turn calling exec "sleep 60" ends by a cancel while the command runs, a denial, an approval that
// expires, or a stream cut before the call closed; then "continue": the fake accepts the request
// (every tool call has its result; the cut call is not sent) and the answer arrives.
func TestRuntimeCase_R15_MidToolThroughTheFakes(t *testing.T) {
	for _, f := range r15Fakes(t) {
		t.Run(f.name, func(t *testing.T) {
			pt := t
			e := newAgentEnv(t, f.provider, func(c *Config) { c.ApprovalTimeout = 700 * time.Millisecond })
			c := e.dial()
			c.hello()
			for _, mode := range []string{"cancel", "deny", "expiry", "cut"} {
				t.Run(mode, func(t *testing.T) {
					c.t = t
					sid := c.newSession()
					id := "call_" + mode
					if f.name == "anthropic" {
						id = "toolu_" + mode
					}
					switch mode {
					case "cut":
						f.cut(id)
					case "cancel":
						f.call(id)
					default:
						f.call(id)
						f.reply("I will not run it.") // a denial or expiry goes back to the model
					}
					run := c.prompt(sid, "run sleep 60")
					switch mode {
					case "cancel":
						c.answer(sid, c.approval(sid), "allow")
						time.Sleep(500 * time.Millisecond)
						c.result("chat.cancel", fmt.Sprintf(`{"sessionId":%q}`, sid))
					case "deny":
						c.answer(sid, c.approval(sid), "deny")
					case "expiry":
						c.approval(sid)
					}
					end := c.runEndOf(sid, run)
					assert.Equal(t, mode == "deny" || mode == "expiry", end["ok"], "%v", end)
					require.Zero(t, f.pending(), "every queued answer was asked for")
					before := len(f.requests())
					f.reply("Continuing.")
					end = c.runEndOf(sid, c.prompt(sid, "continue"))
					require.Equal(t, true, end["ok"], "the fake accepted the history: %v", end)
					reqs := f.requests()
					require.Len(t, reqs, before+1)
					body := string(reqs[len(reqs)-1].Body)
					if mode == "cut" {
						assert.NotContains(t, body, id, "the call cut before it closed is not sent")
					} else {
						assert.Equal(t, 2, strings.Count(body, `"`+id+`"`), "the call and its result: %s", body)
					}
				})
			}
			c.t = pt
		})
	}
}
