package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/zidane-server/zidane/protocol"
	"github.com/zidane-server/zidane/server/agent/provider"
	"github.com/zidane-server/zidane/server/agent/provider/scripted"
	"github.com/zidane-server/zidane/server/oneline"
	"github.com/zidane-server/zidane/server/store"
)

// Limits are the per-run limits (operator settings; issue 8, "Per-run limits"). Zero fields take
// the defaults. A run that hits one ends with an error event naming it.
type Limits struct {
	// MaxTurns bounds the model turns of one run; default 50.
	MaxTurns int
	// MaxWallTime bounds one run's time from its start (waiting for a run slot included);
	// default 30 min.
	MaxWallTime time.Duration
	// MaxOutputTokens bounds the tokens of one model turn's answer; default 8192. It is asked of
	// the provider (max_tokens) and enforced on what arrives: a turn whose received text, thinking
	// and tool-call arguments pass twice the tokens it asked for, counted as the runtime estimates
	// tokens (4 bytes a token, textTokens), has its stream closed and ends the run with an error
	// naming the limit. The margin keeps an answer a real tokenizer packs densely from being cut.
	MaxOutputTokens int
	// MaxTurnBytes bounds the bytes one model turn may send, text, thinking and tool-call
	// arguments as received, whatever MaxOutputTokens says; past it the stream is closed and the
	// run ends with an error naming the limit. Default 4 MiB. With MaxOutputTokens it bounds what
	// a streaming run holds in memory.
	MaxTurnBytes int
	// MaxConcurrentRuns bounds the runs that talk to a model at once, server-wide; a run past it
	// waits (its run:start and prompt already sent) until one ends. Default 8.
	MaxConcurrentRuns int
	// MaxTaskDepth is the deepest level a subagent's child session may have (the root is level
	// 0): a task call from a session at this level is refused. Default 3.
	MaxTaskDepth int
	// MaxTaskChildren bounds the child sessions one run's task calls may start. Default 8.
	MaxTaskChildren int
}

func (l *Limits) defaults() {
	if l.MaxTurns <= 0 {
		l.MaxTurns = 50
	}
	if l.MaxWallTime <= 0 {
		l.MaxWallTime = 30 * time.Minute
	}
	if l.MaxOutputTokens <= 0 {
		l.MaxOutputTokens = 8192
	}
	if l.MaxConcurrentRuns <= 0 {
		l.MaxConcurrentRuns = 8
	}
	if l.MaxTurnBytes <= 0 {
		l.MaxTurnBytes = DefaultMaxTurnBytes
	}
	if l.MaxTaskDepth <= 0 {
		l.MaxTaskDepth = 3
	}
	if l.MaxTaskChildren <= 0 {
		l.MaxTaskChildren = 8
	}
}

// DefaultMaxTurnBytes is Limits.MaxTurnBytes's default: 4 MiB.
const DefaultMaxTurnBytes = 4 << 20

// outputMargin is how many times the tokens it asked for a turn may receive, as estimated
// (Limits.MaxOutputTokens), before its stream is closed.
const outputMargin = 2

// turnBudget counts what one model turn received against its bounds (Limits.MaxOutputTokens,
// Limits.MaxTurnBytes).
type turnBudget struct {
	asked, maxOut, maxBytes int // the turn's max_tokens; the operator's --max-output-tokens; bytes
	bytes                   int // received so far
}

// pieceBytes is the size of what ev brings of the answer: text, thinking, tool-call arguments
// (counted as they arrive, so a complete call adds nothing).
func pieceBytes(ev provider.Event) int {
	switch e := ev.(type) {
	case *provider.TextDelta:
		return len(e.Text)
	case *provider.ThinkingDelta:
		return len(e.Text)
	case *provider.ToolInputDelta:
		return e.Bytes
	}
	return 0
}

// rawPerTurnByte and rawPerToken size a turn's bound on the raw response bytes (rawBytes): SSE
// framing and each chunk's JSON around a token are about 150-250 bytes with OpenAI's format.
const (
	rawPerTurnByte = 4
	rawPerToken    = 512
)

// rawBytes bounds the response bytes of the turn read from the wire, framing included
// (provider.WithBodyLimit): 4 × Limits.MaxTurnBytes, or 512 bytes a token asked for, whichever
// is larger (16 MiB by default). It catches what no event reports: keep-alives, comments, data
// lines that never form an event.
func (b *turnBudget) rawBytes() int {
	return max(rawPerTurnByte*b.maxBytes, rawPerToken*b.asked)
}

// take counts n more bytes; past a bound it returns the run's error naming it, and the piece
// that crossed it is not kept.
func (b *turnBudget) take(n int) error {
	if b.bytes+n > b.maxBytes {
		return &runError{fmt.Sprintf("The answer was cut: the model sent more than %d bytes in one turn (the operator's --max-turn-bytes), so the server closed the stream; what came before is kept.", b.maxBytes)}
	}
	if tokens := (b.bytes + n + 3) / 4; tokens > outputMargin*b.asked {
		return &runError{fmt.Sprintf("The answer was cut: the model kept streaming past the %d output tokens it was asked for (the operator's --max-output-tokens is %d; the server closes the stream at %d bytes, %d× that at 4 bytes a token); what came before is kept.", b.asked, b.maxOut, 4*outputMargin*b.asked, outputMargin)}
	}
	b.bytes += n
	return nil
}

// runError is a run's end for a reason of the runtime's own (a limit, the context window): its
// text is the error event's message.
type runError struct{ msg string }

func (e *runError) Error() string { return e.msg }

// progressInterval spaces a run's stream:progress signals: at most 4 a second.
const progressInterval = 250 * time.Millisecond

// errWallTime is the cause of a run context that hit Limits.MaxWallTime.
var errWallTime = errors.New("wall time limit")

// runModel is the run loop (DESIGN "Agent runtime"): each model turn sends the session's
// conversation so far (trimmed to the context window), streams the answer as events, runs the
// tools the model called (through the ToolGate, then the ToolRunner) and sends their results in
// the next turn, until the model answers without calling a tool or a limit ends the run. It
// returns the run's summary (from the providers' usage) and the last turn's id.
func (r *Runtime) runModel(ctx context.Context, ru *run) (protocol.RunSummary, string, error) {
	lim := r.cfg.Limits
	ag, err := r.agentOf(ru.session, ru.parent)
	if err != nil {
		return protocol.RunSummary{}, "", err
	}
	modelID := ru.session.Model
	if modelID == "" {
		modelID = ag.def.Model // the agent's default, when the session names none
	}
	prov, model, err := r.models.Resolve(ctx, modelID)
	sum := protocol.RunSummary{ModelID: model.ID}
	if err != nil {
		return sum, "", &runError{err.Error() + "; pick one with sessions.setModel."}
	}
	takesImages := provider.TakesImages(prov, model.Name)
	if names := promptImages(ru.attachments); len(names) > 0 && !takesImages {
		return sum, "", noImagesError(model.ID, names) // said in the run, before any turn (issue 24)
	}
	runner := r.tools
	if _, ok := prov.(*scripted.Provider); ok {
		runner = withLookup{runner}
	}
	prov = provider.WithRetry(prov, r.cfg.Retry)
	baseTools := runner.Tools(ru.session)
	turnTools := func() []provider.Tool {
		all := baseTools
		if tt, ok := runner.(TurnTools); ok {
			if extra := tt.TurnTools(withMCPOffers(ctx, ag.offersPrefix), ru.session, ru.id, ru.origin); len(extra) > 0 {
				all = append(baseTools[:len(baseTools):len(baseTools)], extra...)
			}
		}
		return ag.tools(all) // exactly the agent's tools (and a skill's narrowing)
	}
	tools := turnTools()
	system := r.systemPrompt(ru.session, ag, tools)
	var streamed time.Duration
	answer := &ru.answer
	lastTurn := ""
	unreported := false
	var lastProgress time.Time // the run's last stream:progress: at most 4 a second per run
	for turn := 1; ; turn++ {
		if turn > lim.MaxTurns {
			return r.summary(sum, streamed, unreported), lastTurn, &runError{fmt.Sprintf("The run stopped: it reached the limit of %d model turns per run (the operator's --max-turns).", lim.MaxTurns)}
		}
		if turn > 1 {
			tools = turnTools() // tools/list_changed takes effect between turns
		}
		hist := r.conv.history(ru.sessionID)
		msgs := hist.msgs
		maxOut := lim.MaxOutputTokens
		if w := model.ContextWindow; w > 0 {
			reserve := answerReserve(w, lim.MaxOutputTokens)
			fixed := textTokens(system) + toolsTokens(tools)
			kept, keptTokens, dropped, ok := hist.trim(w - reserve - fixed)
			if dropped > 0 {
				if n := r.autoCompact(ctx, ru, prov, model, hist); n > 0 {
					c := n
					if sum.CompactedExchanges != nil {
						c += *sum.CompactedExchanges
					}
					sum.CompactedExchanges = &c
					hist = r.conv.history(ru.sessionID)
					kept, keptTokens, dropped, ok = hist.trim(w - reserve - fixed)
				}
			}
			if !ok {
				return r.summary(sum, streamed, unreported), lastTurn, &runError{fmt.Sprintf("Context too long: the newest exchange alone does not fit %s's context window of %d tokens (with %d reserved for the answer). Start a new session, or pick a model with a larger window.", model.ID, w, reserve)}
			}
			msgs = kept
			if d := dropped; d > 0 && (sum.DroppedExchanges == nil || *sum.DroppedExchanges < d) {
				sum.DroppedExchanges = &d
			}
			maxOut = answerTokens(w, lim.MaxOutputTokens, fixed+keptTokens)
		}
		if !takesImages {
			msgs = withoutImages(msgs) // earlier prompts' images, as a note
		}
		req := &provider.Request{Model: model.Name, System: system, Messages: msgs, Tools: tools, MaxOutputTokens: maxOut}
		turnID := uuid.NewString()
		lastTurn = turnID
		var calls []provider.ToolCall
		answer.Reset() // the run's answer is its last turn's text (a task's result)
		start := time.Now()
		var first time.Time
		var tokens int64 // estimated while streaming, for stream:progress
		budget := turnBudget{asked: maxOut, maxOut: lim.MaxOutputTokens, maxBytes: lim.MaxTurnBytes}
		// The turn's own context: past a bound it is cancelled, which closes the provider's
		// stream whatever the provider does with the callback's error.
		tctx, endTurn := context.WithCancelCause(ctx)
		rawMax := budget.rawBytes()
		tctx = provider.WithBodyLimit(tctx, int64(rawMax), func() {
			endTurn(&runError{fmt.Sprintf("The answer was cut: the model's response passed %d bytes on the wire in one turn (framing included: %d× the operator's --max-turn-bytes, or %d bytes a token asked for), so the server closed the stream; what came before is kept.", rawMax, rawPerTurnByte, rawPerToken)})
		})
		res, err := prov.Stream(tctx, req, func(ev provider.Event) error {
			if err := budget.take(pieceBytes(ev)); err != nil {
				endTurn(err)
				return err
			}
			now := time.Now()
			if first.IsZero() {
				first = now
			}
			switch e := ev.(type) {
			case *provider.TextDelta:
				tokens += int64(textTokens(e.Text))
				answer.WriteString(e.Text)
				r.emit(ru, &protocol.MarkdownEvent{Text: e.Text, Streaming: true, TurnID: turnID})
			case *provider.ThinkingDelta:
				tokens += int64(textTokens(e.Text))
				r.emit(ru, &protocol.ThinkingEvent{Text: e.Text, Streaming: true, TurnID: turnID})
			case *provider.ToolCallDone:
				tokens += int64(textTokens(string(e.Call.Arguments)))
				e.Call.Arguments = protocol.UnescapeHTML(e.Call.Arguments) // B36: `<` as itself, as every frame writes it
				calls = append(calls, e.Call)
				r.emit(ru, &protocol.ToolEvent{Tool: e.Call.Name, CallID: e.Call.ID, Text: callLine(e.Call), Input: e.Call.Arguments, TurnID: turnID})
			}
			if now.Sub(lastProgress) >= progressInterval {
				lastProgress = now
				tps := 0.0 // too early to tell at the first piece
				if secs := now.Sub(first).Seconds(); secs >= 0.05 {
					tps = float64(int64(float64(tokens)/secs*10)) / 10
				}
				r.publish(&protocol.StreamProgressSignal{SessionID: ru.sessionID, RunID: ru.id, TurnID: turnID, Tokens: tokens, TokensPerSecond: tps}, ru)
			}
			return nil
		})
		if cause := context.Cause(tctx); err != nil && tctx.Err() != nil && ctx.Err() == nil {
			err = cause // a bound ended the turn: its error, whatever the provider made of it
		}
		endTurn(nil)
		end := time.Now()
		r.closeBlock(ru.sessionID)
		if err != nil {
			// A call announced before the failure gets a result, so the history stays valid.
			for _, c := range calls {
				r.emit(ru, &protocol.ToolResultEvent{Tool: c.Name, CallID: c.ID, Text: "The tool did not run: the model's turn failed.", IsError: ptr(true), TurnID: turnID})
			}
			return r.summary(sum, streamed, unreported), lastTurn, err
		}
		u := protocol.Usage{Input: res.Usage.InputTokens, Output: res.Usage.OutputTokens, ModelID: model.ID}
		if !first.IsZero() {
			u.TimeToFirstTokenMs = ptr(first.Sub(start).Milliseconds())
			u.StreamDurationMs = ptr(end.Sub(first).Milliseconds())
			streamed += end.Sub(first)
		}
		if !res.Usage.Reported {
			u.Unreported = ptr(true)
			unreported = true
		}
		r.publish(&protocol.TurnEndSignal{SessionID: ru.sessionID, RunID: ru.id, TurnID: turnID, Usage: u}, ru)
		r.storeUsage(ru, turnID, model.ID, res.Usage)
		sum.Turns++
		sum.TokensIn += u.Input
		sum.TokensOut += u.Output
		switch {
		case res.Stop == provider.StopMaxTokens:
			if maxOut < lim.MaxOutputTokens {
				return r.summary(sum, streamed, unreported), lastTurn, &runError{fmt.Sprintf("The answer was cut: it reached the %d output tokens that %s's context window of %d tokens left after the conversation (the operator's --max-output-tokens is %d). Start a new session, or pick a model with a larger window.", maxOut, model.ID, model.ContextWindow, lim.MaxOutputTokens)}
			}
			return r.summary(sum, streamed, unreported), lastTurn, &runError{fmt.Sprintf("The answer was cut: it reached the limit of %d output tokens per turn (the operator's --max-output-tokens).", lim.MaxOutputTokens)}
		case res.Stop == provider.StopToolUse && len(calls) > 0:
			for _, c := range calls {
				res := r.runTool(ctx, ru, runner, ag, tools, turnID, c)
				ev := &protocol.ToolResultEvent{Tool: c.Name, CallID: c.ID, Text: res.Text, IsError: optTrue(res.IsError), TurnID: turnID}
				if res.Diff != "" {
					ev.Diff = &res.Diff
				}
				if res.Sandbox != "" {
					ev.Sandbox = ptr(protocol.SandboxPolicy(res.Sandbox))
				}
				ev.Media = res.Media
				r.emit(ru, ev)
			}
			if err := ctx.Err(); err != nil {
				return r.summary(sum, streamed, unreported), lastTurn, err
			}
		default:
			return r.summary(sum, streamed, unreported), lastTurn, nil
		}
	}
}

// runTool asks the gate, then runs the call. A call the run's end interrupts gets a result that
// says so (runtime case R15).
func (r *Runtime) runTool(ctx context.Context, ru *run, runner ToolRunner, ag *runAgent, offered []provider.Tool, turnID string, c provider.ToolCall) ToolResult {
	tc := ToolCall{Session: ru.session, RunID: ru.id, TurnID: turnID, Origin: ru.origin, Call: c, Agent: &ag.def}
	if ctx.Err() != nil {
		return ToolResult{Text: "The tool did not run: " + r.stopReason(ctx, ru), IsError: true}
	}
	if !inTools(offered, c.Name) {
		return ag.notOffered(c.Name, offered) // a tool the model was not offered never runs
	}
	if c.Name == skillTool.Name {
		return ag.runSkill(c.Arguments)
	}
	if c.Name == taskTool.Name {
		return r.runTask(ctx, ru, ag, offered, c)
	}
	if r.cfg.Gate != nil {
		if ok, denied := r.cfg.Gate.Check(ctx, tc); !ok {
			denied.IsError = true
			return denied
		}
	}
	res := r.callTool(ctx, runner, tc)
	if ctx.Err() != nil {
		return ToolResult{Text: "The tool was stopped: " + r.stopReason(ctx, ru) + " " + res.Text, IsError: true}
	}
	return res
}

// stopReason says why ctx ended, for a tool's result.
func (r *Runtime) stopReason(ctx context.Context, ru *run) string {
	r.mu.Lock()
	cancelled := ru.cancelled
	r.mu.Unlock()
	switch {
	case cancelled:
		return "the run was cancelled by the user."
	case errors.Is(context.Cause(ctx), errWallTime):
		return "the run reached its time limit."
	default:
		return "the server stopped during the tool."
	}
}

// storeUsage queues a turn's usage row on the transcript writer: it is written with the next
// flush, at the latest with the run's end, before its run:end (no round trip per turn: the
// persistence figure of docs/benchmarks.md).
func (r *Runtime) storeUsage(ru *run, turnID, modelID string, u provider.Usage) {
	r.writer.addUsage(store.TurnUsage{SessionID: ru.sessionID, RunID: ru.id, TurnID: turnID, ModelID: modelID,
		Input: u.InputTokens, Output: u.OutputTokens, Reported: u.Reported, At: time.Now()})
}

// summary completes a run summary: tokens per second of streaming (one decimal).
func (r *Runtime) summary(sum protocol.RunSummary, streamed time.Duration, unreported bool) protocol.RunSummary {
	secs := max(streamed.Seconds(), 0.001)
	sum.TokensPerSecond = float64(int64(float64(sum.TokensOut)/secs*10)) / 10
	if unreported {
		sum.Unreported = ptr(true)
	}
	return sum
}

func inTools(ts []provider.Tool, name string) bool {
	for _, t := range ts {
		if t.Name == name {
			return true
		}
	}
	return false
}

func toolsTokens(ts []provider.Tool) int {
	n := 0
	for _, t := range ts {
		n += textTokens(t.Name) + textTokens(t.Description) + textTokens(string(t.InputSchema))
	}
	return n
}

// callLine renders a call on one line: name("value") when the arguments are one string member
// (lookup("Say hello.")), else name(arguments); each part through oneline.Cut (at 60 and 80
// characters), since the model chose all of it.
func callLine(c provider.ToolCall) string {
	var one map[string]any
	if json.Unmarshal(c.Arguments, &one) == nil && len(one) == 1 {
		for _, v := range one {
			if sv, ok := v.(string); ok {
				return oneline.Cut(c.Name, 60) + `("` + oneline.Cut(sv, 60) + `")`
			}
		}
	}
	return oneline.Cut(c.Name, 60) + "(" + oneline.Cut(string(c.Arguments), 80) + ")"
}

func ptr[T any](v T) *T { return &v }

func optTrue(b bool) *bool {
	if b {
		return ptr(true)
	}
	return nil
}
