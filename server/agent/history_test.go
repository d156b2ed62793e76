package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zidane-server/zidane/protocol"
	"github.com/zidane-server/zidane/server/agent/provider"
)

// validHistory is the check every fake endpoint of runtime cases R14/R15 makes: the first message
// is the user's; each tool message answers a call of the nearest preceding assistant message;
// every call has exactly one result before the next user or assistant message.
func validHistory(t *testing.T, msgs []provider.Message) {
	t.Helper()
	if len(msgs) == 0 {
		return
	}
	require.Equal(t, provider.RoleUser, msgs[0].Role, "the first message is the user's")
	var open map[string]bool
	closeOpen := func(at int) {
		for id := range open {
			t.Fatalf("message %d: call %s has no result before it", at, id)
		}
		open = nil
	}
	for i, m := range msgs {
		switch m.Role {
		case provider.RoleUser:
			closeOpen(i)
		case provider.RoleAssistant:
			closeOpen(i)
			assert.True(t, m.Text != "" || len(m.ToolCalls) > 0, "message %d: an empty assistant message", i)
			open = map[string]bool{}
			for _, c := range m.ToolCalls {
				open[c.ID] = true
				assert.True(t, json.Valid(c.Arguments) && strings.HasPrefix(string(c.Arguments), "{"), "call %s: arguments %s", c.ID, c.Arguments)
			}
		case provider.RoleTool:
			require.True(t, open[m.ToolCallID], "message %d: result %s answers no call of the preceding assistant message", i, m.ToolCallID)
			delete(open, m.ToolCallID)
		}
	}
	closeOpen(len(msgs))
}

func userPrompt(text string) protocol.StreamEvent {
	return &protocol.UserPromptEvent{Text: text, TurnID: "u-" + text}
}
func md(turn, text string) protocol.StreamEvent {
	return &protocol.MarkdownEvent{Text: text, TurnID: turn}
}
func call(turn, id, name, args string) protocol.StreamEvent {
	return &protocol.ToolEvent{Tool: name, CallID: id, Text: name, Input: json.RawMessage(args), TurnID: turn}
}
func result(turn, id, name, text string) protocol.StreamEvent {
	return &protocol.ToolResultEvent{Tool: name, CallID: id, Text: text, TurnID: turn}
}

// TestHistoryFromTranscript: a transcript becomes user, assistant (text, thinking and calls of
// one turn) and tool messages in order; summaries and errors are not sent.
func TestHistoryFromTranscript(t *testing.T) {
	evs := []protocol.StreamEvent{
		userPrompt("U1"),
		&protocol.ThinkingEvent{Text: "hm", TurnID: "a1"},
		md("a1", "Let me look."),
		call("a1", "call_1", "read_file", `{"path":"a"}`),
		result("a1", "call_1", "read_file", "contents"),
		md("a2", "It says contents."),
		&protocol.RunSummaryEvent{Text: "s", TurnID: "a2"},
		userPrompt("U2"),
	}
	msgs := historyFrom(evs)
	validHistory(t, msgs)
	require.Len(t, msgs, 5)
	assert.Equal(t, provider.Message{Role: provider.RoleUser, Text: "U1"}, msgs[0])
	assert.Equal(t, "Let me look.", msgs[1].Text)
	assert.Equal(t, "hm", msgs[1].Thinking)
	assert.Equal(t, []provider.ToolCall{{ID: "call_1", Name: "read_file", Arguments: json.RawMessage(`{"path":"a"}`)}}, msgs[1].ToolCalls)
	assert.Equal(t, provider.Message{Role: provider.RoleTool, ToolCallID: "call_1", ToolName: "read_file", Text: "contents"}, msgs[2])
	assert.Equal(t, provider.Message{Role: provider.RoleAssistant, Text: "It says contents."}, msgs[3])
	assert.Equal(t, provider.Message{Role: provider.RoleUser, Text: "U2"}, msgs[4])
}

// TestRuntimeCase_R15_InterruptedToolLeavesValidHistory: a run that ended mid-tool (a crash
// left the call without a result; a cut stream left thinking only; a result with no call; a
// dropped prompt) still gives a history every provider accepts, and the new prompt is last.
func TestRuntimeCase_R15_InterruptedToolLeavesValidHistory(t *testing.T) {
	cases := map[string][]protocol.StreamEvent{
		"crash during the tool": {
			userPrompt("U1"), call("a1", "toolu_1", "exec", `{"command":"sleep 60"}`),
			&protocol.ErrorEvent{Message: InterruptedMessage},
			userPrompt("continue"),
		},
		"cancel: the tool's result says so": {
			userPrompt("U1"), md("a1", "Running it."), call("a1", "toolu_1", "exec", `{"command":"sleep 60"}`),
			&protocol.ToolResultEvent{Tool: "exec", CallID: "toolu_1", Text: "The tool was stopped: the run was cancelled by the user.", IsError: ptr(true), TurnID: "a1"},
			&protocol.ErrorEvent{Message: "The run was cancelled."},
			userPrompt("continue"),
		},
		"stream cut before the call closed": {
			userPrompt("U1"), &protocol.ThinkingEvent{Text: "I will run", TurnID: "a1"},
			&protocol.ErrorEvent{Message: "cut"},
			userPrompt("continue"),
		},
		"two calls, one result": {
			userPrompt("U1"), call("a1", "c2", "read", `{}`), call("a1", "c3", "read", `{}`),
			result("a1", "c3", "read", "ok"),
			userPrompt("continue"),
		},
		"orphan result and bad input": {
			userPrompt("U1"), result("a0", "ghost", "read", "?"), call("a1", "c1", "read", `"not an object"`),
			result("a1", "c1", "read", "ok"), result("a1", "c1", "read", "twice"),
			userPrompt("continue"),
		},
		"dropped follow-up": {
			userPrompt("U1"), md("a1", "Hi."),
			userPrompt("queued then cancelled"), &protocol.ErrorEvent{Message: "The queued prompt was cancelled."},
			userPrompt("continue"),
		},
	}
	for name, evs := range cases {
		t.Run(name, func(t *testing.T) {
			msgs := historyFrom(evs)
			validHistory(t, msgs)
			last := msgs[len(msgs)-1]
			assert.Equal(t, provider.Message{Role: provider.RoleUser, Text: "continue"}, last)
			for _, m := range msgs {
				assert.NotEqual(t, "queued then cancelled", m.Text, "a prompt that never ran is not sent")
			}
		})
	}
	msgs := historyFrom(cases["crash during the tool"])
	require.Len(t, msgs, 4)
	assert.Equal(t, provider.Message{Role: provider.RoleTool, ToolCallID: "toolu_1", ToolName: "exec", Text: resultMissing, IsError: true}, msgs[2])
}

// TestRuntimeCase_R14_TrimDropsWholeExchanges: the history of case R14 trimmed to fit drops the
// oldest exchange whole, keeps the parallel calls with their results, says how many it dropped,
// and refuses when the newest exchange alone does not fit.
func TestRuntimeCase_R14_TrimDropsWholeExchanges(t *testing.T) {
	big := strings.Repeat("x", 1000) // ≈250 tokens
	evs := []protocol.StreamEvent{
		userPrompt("U1"), call("a1", "call_1", "read_file", `{"path":"big"}`), result("a1", "call_1", "read_file", big), md("a1b", "A1 text"),
		userPrompt("U2"), call("a2", "call_2", "read", `{}`), call("a2", "call_3", "read", `{}`),
		result("a2", "call_2", "read", "T2"), result("a2", "call_3", "read", "T3"), md("a2b", "A2 text"),
		userPrompt("U3"),
	}
	msgs := historyFrom(evs)
	validHistory(t, msgs)
	total := 0
	for _, m := range msgs {
		total += estimateTokens(m)
	}
	kept, dropped, ok := trimHistory(msgs, total)
	require.True(t, ok)
	assert.Zero(t, dropped)
	assert.Equal(t, msgs, kept)

	kept, dropped, ok = trimHistory(msgs, total-10)
	require.True(t, ok)
	assert.Equal(t, 1, dropped)
	validHistory(t, kept)
	assert.Equal(t, "U2", kept[0].Text)
	assert.Len(t, kept[1].ToolCalls, 2, "the parallel calls stay together")

	kept, dropped, ok = trimHistory(msgs, 5)
	assert.False(t, ok, "the newest exchange alone does not fit")
	assert.Nil(t, kept)
	assert.Equal(t, 2, dropped)
}

// TestAnswerReserve: trimming keeps the per-turn output limit free for the answer, but at most a
// quarter of the window (an 8k window with 8k max output still holds a conversation); the
// request's max tokens is what the window leaves after the prompt, within [reserve, maxOut].
func TestAnswerReserve(t *testing.T) {
	assert.Equal(t, 8192, answerReserve(200000, 8192), "a large window reserves the whole limit")
	assert.Equal(t, 2048, answerReserve(8192, 8192), "a small window reserves a quarter")
	assert.Equal(t, 1000, answerReserve(8192, 1000))
	assert.Equal(t, 8192, answerTokens(200000, 8192, 50000), "at most the limit")
	assert.Equal(t, 8192-3000, answerTokens(8192, 8192, 3000), "what the window leaves")
	assert.Equal(t, 2048, answerTokens(8192, 8192, 8000), "never below the reserve")
}

// conversations.history rebuilds only what follows the last user prompt it saw; after every event
// of a session mixing answered, failed, unanswered and streamed exchanges it equals historyFrom of
// the whole transcript, its token sums and exchange starts are what a fresh count gives, and its
// trim agrees at budgets across its whole range with one pass over the whole history
// (trimByPass).
func TestHistoryIncrementalEqualsWhole(t *testing.T) {
	cs := newConversations()
	require.NoError(t, cs.load(t.Context(), "s", func(context.Context) ([]protocol.StreamEvent, error) { return nil, nil }, func(string) bool { return true }))
	isErr := true
	var evs []protocol.StreamEvent
	for i := range 40 {
		turn := fmt.Sprintf("t%d", i)
		call := fmt.Sprintf("c%d", i)
		evs = append(evs, &protocol.UserPromptEvent{Text: fmt.Sprintf("prompt %d", i), TurnID: turn})
		switch i % 5 {
		case 0: // answered, with a tool call and its result
			evs = append(evs,
				&protocol.MarkdownEvent{Text: "let me look", Streaming: true, TurnID: turn},
				&protocol.ToolEvent{Tool: "lookup", CallID: call, Input: json.RawMessage(`{"q":"x"}`), TurnID: turn},
				&protocol.ToolResultEvent{Tool: "lookup", CallID: call, Text: "found"},
				&protocol.MarkdownEvent{Text: "done", TurnID: turn + "b"})
		case 1: // failed before any answer: dropped once the next prompt comes
			evs = append(evs, &protocol.ErrorEvent{Message: "boom"})
		case 2: // a call never answered
			evs = append(evs, &protocol.ToolEvent{Tool: "lookup", CallID: call, Input: json.RawMessage(`not json`), TurnID: turn})
		case 3: // an error result and an orphan result
			evs = append(evs,
				&protocol.ToolEvent{Tool: "exec", CallID: call, Input: json.RawMessage(`{}`), TurnID: turn},
				&protocol.ToolResultEvent{Tool: "exec", CallID: call, Text: "denied", IsError: &isErr},
				&protocol.ToolResultEvent{Tool: "exec", CallID: "nobody", Text: "orphan"})
		case 4: // thinking and text, still streaming when the next prompt comes
			evs = append(evs, &protocol.ThinkingEvent{Text: "hmm", Streaming: true, TurnID: turn},
				&protocol.MarkdownEvent{Text: "partial", Streaming: true, TurnID: turn})
		}
	}
	for i, ev := range evs {
		cs.add("s", ev)
		if i%3 == 0 {
			cs.closeBlock("s")
		}
		requireCountedAgrees(t, historyFrom(cs.snapshot("s")), cs.history("s"), fmt.Sprintf("after event %d", i), nil)
	}
}

// requireCountedAgrees checks h, a counted history handed out for the transcript whose whole
// provider history is whole: the same messages, the token sums and exchange starts a fresh count
// gives, and trim agreeing with one pass (trimByPass) at budgets across the whole range (and
// below and above it), plus more(total) when more is not nil.
func requireCountedAgrees(t testing.TB, whole []provider.Message, h countedHistory, what string, more func(total int) []int) {
	if len(whole) == 0 {
		require.Empty(t, h.msgs, what)
	} else {
		require.Equal(t, whole, h.msgs, what)
	}
	var fresh countedHistory
	fresh.add(whole...)
	require.Equal(t, fresh.cum, h.cum, "%s: token sums", what)
	require.Equal(t, fresh.starts, h.starts, "%s: exchange starts", what)
	total := fresh.cum[len(whole)]
	budgets := []int{-1 << 40, -7, -1, total - 1, total, total + 1, 1 << 40}
	for budget := 0; budget <= total; budget += max(1, total/60) {
		budgets = append(budgets, budget)
	}
	if more != nil {
		budgets = append(budgets, more(total)...)
	}
	for _, budget := range budgets {
		kept, tokens, dropped, ok := h.trim(budget)
		wantKept, wantDropped, wantOK := trimByPass(whole, budget)
		require.Equal(t, wantOK, ok, "%s, budget %d", what, budget)
		require.Equal(t, wantDropped, dropped, "%s, budget %d", what, budget)
		if len(wantKept) == 0 {
			require.Empty(t, kept, "%s, budget %d", what, budget)
		} else {
			require.Equal(t, wantKept, kept, "%s, budget %d", what, budget)
		}
		want := 0
		for _, m := range kept {
			want += estimateTokens(m)
		}
		require.Equal(t, want, tokens, "%s, budget %d", what, budget)
		if ok {
			require.LessOrEqual(t, tokens, max(budget, 0), "%s, budget %d", what, budget)
		}
	}
}

// trimByPass is trimming as one pass over the whole history does it: the reference the counted
// history's binary search must agree with.
func trimByPass(msgs []provider.Message, budget int) (kept []provider.Message, dropped int, ok bool) {
	var starts []int
	total := 0
	for i, m := range msgs {
		if m.Role == provider.RoleUser || i == 0 {
			starts = append(starts, i)
		}
		total += estimateTokens(m)
	}
	for len(starts) > 0 && total > budget {
		if len(starts) == 1 {
			return nil, dropped, false
		}
		for _, m := range msgs[starts[0]:starts[1]] {
			total -= estimateTokens(m)
		}
		starts = starts[1:]
		dropped++
	}
	if len(starts) == 0 {
		return nil, dropped, len(msgs) == 0
	}
	return msgs[starts[0]:], dropped, true
}

// trimHistory is countedHistory.trim of msgs.
func trimHistory(msgs []provider.Message, budget int) (kept []provider.Message, dropped int, ok bool) {
	var h countedHistory
	h.add(msgs...)
	kept, _, dropped, ok = h.trim(budget)
	return kept, dropped, ok
}
