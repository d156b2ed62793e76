package agent

import (
	"bytes"
	"encoding/json"
	"sort"

	"github.com/zidane-server/zidane/protocol"
	"github.com/zidane-server/zidane/server/agent/provider"
)

// Synthetic results of tool calls that have none in the transcript (runtime case R15): the
// history sent to a provider answers every call.
const (
	resultMissing = "The tool call has no result: the run ended before the tool finished (it was cancelled, or the server stopped during the tool)."
)

// historyFrom builds the conversation a provider gets from a session's transcript events (closed
// blocks, in order). Each user-prompt starts an exchange; the markdown, thinking and tool events
// of one model turn (turnId) become one assistant message, and each tool-result a tool message
// right after it. The result is always a history a provider accepts (runtime case R15):
//   - every tool call has exactly one result before the next assistant or user message; a call
//     whose result is missing (a crash, a cut stream) gets a synthetic error result;
//   - a result whose call is not in the preceding assistant message is left out;
//   - an assistant message with neither text nor calls (only thinking, or nothing) is left out;
//   - a prompt that was never answered (dropped from the queue, failed before the model said
//     anything, interrupted by a crash) is left out with its error, except the last one, which is
//     the prompt being answered.
func historyFrom(events []protocol.StreamEvent) []provider.Message {
	return buildHistory(events, false)
}

// historyPrefix is historyFrom of the events before a user prompt: the last exchange ends as the
// next prompt ends it, so historyPrefix(e[:k]) followed by historyFrom(e[k:]) is historyFrom(e)
// when e[k] is a user prompt (conversations.history keeps it between turns).
func historyPrefix(events []protocol.StreamEvent) []provider.Message {
	return buildHistory(events, true)
}

func buildHistory(events []protocol.StreamEvent, prefix bool) []provider.Message {
	var out []provider.Message
	asst := -1      // index in out of the current assistant message
	turn := ""      // its turnId
	open := []int{} // indexes of the current assistant message's calls without a result yet
	answered := map[string]bool{}
	exchangeStart := -1 // index in out of the current exchange's user message
	failed := false     // the current exchange had an error event

	closeCalls := func() {
		if asst < 0 {
			return
		}
		for _, ci := range open {
			c := out[asst].ToolCalls[ci]
			if !answered[c.ID] {
				out = append(out, provider.Message{Role: provider.RoleTool, ToolCallID: c.ID, ToolName: c.Name, Text: resultMissing, IsError: true})
			}
		}
		open = open[:0]
		answered = map[string]bool{}
		if m := out[asst]; m.Text == "" && len(m.ToolCalls) == 0 {
			out = append(out[:asst], out[asst+1:]...)
		}
		asst, turn = -1, ""
	}
	endExchange := func() {
		closeCalls()
		// A prompt with nothing after it and an error was never answered.
		if exchangeStart >= 0 && exchangeStart == len(out)-1 && failed {
			out = out[:exchangeStart]
		}
	}
	assistant := func(turnID string) *provider.Message {
		if asst < 0 || turnID != turn || len(out)-1 != asst {
			// A new turn, or content after a result: a new assistant message.
			closeCalls()
			out = append(out, provider.Message{Role: provider.RoleAssistant})
			asst, turn = len(out)-1, turnID
		}
		return &out[asst]
	}
	for _, ev := range events {
		switch e := ev.(type) {
		case *protocol.UserPromptEvent:
			endExchange()
			out = append(out, userMessage(e))
			exchangeStart, failed = len(out)-1, false
		case *protocol.MarkdownEvent:
			m := assistant(e.TurnID)
			m.Text += e.Text
		case *protocol.ThinkingEvent:
			m := assistant(e.TurnID)
			m.Thinking += e.Text
		case *protocol.ToolEvent:
			m := assistant(e.TurnID)
			args := json.RawMessage(e.Input)
			if !isJSONObject(args) {
				args = json.RawMessage(`{}`)
			}
			m.ToolCalls = append(m.ToolCalls, provider.ToolCall{ID: e.CallID, Name: e.Tool, Arguments: args})
			open = append(open, len(m.ToolCalls)-1)
		case *protocol.ToolResultEvent:
			if asst < 0 || answered[e.CallID] || !hasCall(out[asst].ToolCalls, e.CallID) {
				continue // an orphan result
			}
			answered[e.CallID] = true
			out = append(out, provider.Message{Role: provider.RoleTool, ToolCallID: e.CallID, ToolName: e.Tool, Text: e.Text, IsError: e.IsError != nil && *e.IsError})
		case *protocol.ErrorEvent:
			failed = true
		case *protocol.CompactionEvent:
			// The summary stands in for every exchange before the one the compaction is in,
			// which stays as it is.
			closeCalls()
			var kept []provider.Message
			if exchangeStart >= 0 {
				kept = append(kept, out[exchangeStart:]...)
			}
			out = append(out[:0], compactionMessage(e))
			if exchangeStart >= 0 {
				exchangeStart = len(out)
			}
			out = append(out, kept...)
		}
	}
	if prefix {
		endExchange()
	} else {
		closeCalls()
	}
	return out
}

// compactionPrefix opens the user message a compaction's summary is sent as.
const compactionPrefix = "Summary of the conversation so far (it stands in for the earlier exchanges, which are no longer sent):\n\n"

// compactionMessage is the message a compaction's summary is sent as: a user message, first in
// the history.
func compactionMessage(e *protocol.CompactionEvent) provider.Message {
	return provider.Message{Role: provider.RoleUser, Text: compactionPrefix + e.Text}
}

func hasCall(calls []provider.ToolCall, id string) bool {
	for _, c := range calls {
		if c.ID == id {
			return true
		}
	}
	return false
}

// isJSONObject reports whether b is one valid JSON object (json.Valid allocates nothing: history
// is rebuilt every turn, and decoding every call's arguments showed in the run's CPU profile).
func isJSONObject(b []byte) bool {
	b = bytes.TrimLeft(b, " \t\r\n")
	return len(b) > 0 && b[0] == '{' && json.Valid(b)
}

// estimateTokens is a conservative count of a message's tokens for fitting the context window:
// a token per 4 bytes (rounded up) plus a few for the message's frame.
// imageTokenBytes is what an image counts in estimateTokens, in bytes of text (4 a token): about
// 1600 tokens, what a model bills a picture of about a megapixel.
const imageTokenBytes = 1600 * 4

func estimateTokens(m provider.Message) int {
	n := len(m.Text) + len(m.Thinking) + len(m.ToolName) + len(m.ToolCallID) + len(m.Images)*imageTokenBytes
	for _, c := range m.ToolCalls {
		n += len(c.ID) + len(c.Name) + len(c.Arguments)
	}
	return (n+3)/4 + 6
}

// answerShare is the part of a model's context window that trimming always keeps free for the
// answer when the per-turn output limit is larger: 1/answerShare of the window.
const answerShare = 4

// answerReserve is the room trimming keeps for the answer in a context window of window tokens:
// the per-turn output limit maxOut, but at most a quarter of the window, so a model whose window
// is not much larger than maxOut (an 8k window with 8k max output) still gets a conversation.
func answerReserve(window, maxOut int) int {
	return max(1, min(maxOut, window/answerShare))
}

// answerTokens is the max_tokens of a request whose prompt is estimated at prompt tokens: what
// the window leaves after the prompt, at most maxOut and at least the reserve (trimming made the
// prompt fit window minus the reserve).
func answerTokens(window, maxOut, prompt int) int {
	return max(answerReserve(window, maxOut), min(maxOut, window-prompt))
}

// textTokens estimates a text's tokens like estimateTokens.
func textTokens(s string) int { return (len(s) + 3) / 4 }

// countedHistory is a provider history that keeps, as it grows, its messages' estimated tokens
// summed (cum[i] estimates msgs[:i]) and the index of each exchange's first message (a user
// message, or the first message), so trimming a long session's history is a binary search: a
// pass over the whole history per turn cost a run 0.2 ms at 1500 runs of a session (the run's CPU
// profile in docs/benchmarks.md, slow-consumer and chat.send figures).
type countedHistory struct {
	msgs   []provider.Message
	cum    []int // len(msgs)+1 once a message was added
	starts []int
}

// add appends msgs, counting them.
func (h *countedHistory) add(msgs ...provider.Message) {
	if len(h.cum) == 0 {
		h.cum = append(h.cum, 0)
	}
	for _, m := range msgs {
		if m.Role == provider.RoleUser || len(h.msgs) == 0 {
			h.starts = append(h.starts, len(h.msgs))
		}
		h.cum = append(h.cum, h.cum[len(h.msgs)]+estimateTokens(m))
		h.msgs = append(h.msgs, m)
	}
}

// head returns the history's first n messages, sharing its arrays.
func (h countedHistory) head(n int) countedHistory {
	k := sort.SearchInts(h.starts, n)
	return countedHistory{msgs: h.msgs[:n], cum: h.cum[:min(len(h.cum), n+1)], starts: h.starts[:k]}
}

// trim drops the oldest exchanges (a user message and everything up to the next one) whole until
// the rest fits budget tokens, so a tool call never loses its result (runtime case R14). It
// returns the messages kept, their estimated tokens and how many exchanges it dropped; ok is false
// when even the newest exchange alone does not fit.
func (h countedHistory) trim(budget int) (kept []provider.Message, tokens, dropped int, ok bool) {
	n := len(h.msgs)
	if n == 0 {
		return nil, 0, 0, true
	}
	total := h.cum[n]
	k := sort.Search(len(h.starts), func(k int) bool { return total-h.cum[h.starts[k]] <= budget })
	if k == len(h.starts) {
		return nil, 0, len(h.starts) - 1, false
	}
	first := h.starts[k]
	return h.msgs[first:], total - h.cum[first], k, true
}
