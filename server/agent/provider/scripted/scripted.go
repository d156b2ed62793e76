// Package scripted is the deterministic, offline provider: the default when no model is
// configured, and the one tests and demos drive.
//
// Without a script it plays the server's classic exchange, reading the conversation: to a user
// prompt it streams a greeting in pieces ("Hello! ", "Let me ", "look that up."; from the second
// prompt of a conversation on, the greeting quotes the previous prompt) and calls the `lookup`
// tool with {"query": <prompt>}; to the lookup's result it streams "The lookup ", "found: " and the
// result. Lookup and LookupTool are that tool, for the runtime to offer.
//
// With a script (Options.Script, or Load of a JSON file) it plays the script's turns instead: a
// request plays the turn whose index is the number of assistant messages in its conversation.
// The format (docs/scripted-provider.md):
//
//	{
//	  "loop": false,                                  // replay from turn 1 when the turns run out
//	  "turns": [
//	    {"steps": [
//	      {"thinking": "The user wants a file."},      // a piece of reasoning
//	      {"text": "Let me "}, {"text": "write it."},  // pieces of the answer
//	      {"delay": "200ms"},                          // a pause (or a number of ms)
//	      {"tool": {"name": "write_file", "arguments": {"path": "a.txt", "content": "x"}, "id": "call_1"}},
//	      {"ask": {"prompt": "Which one?", "options": ["a", "b"]}}  // an ask_user call
//	    ]},
//	    {"steps": [{"error": {"kind": "retryable", "status": 429, "message": "Rate limit", "retryAfter": "1s", "times": 1}},
//	               {"text": "Done."}],
//	     "usage": {"input": 120, "output": 4}}        // or {"none": true}; default: counted words
//	  ]
//	}
//
// A turn with a tool or ask step stops with tool_use, else with "stop" (default end_turn;
// "max_tokens" drops the turn's calls as a cut stream would). An error step fails the turn at that
// point (Streamed when something came before it); with "times": N only the first N plays of that
// turn fail. Tool calls are delivered after the turn's last step, as real providers do.
package scripted

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/zidane-server/zidane/server/agent/provider"

	"github.com/zidane-server/zidane/protocol"
)

// ModelName is the scripted provider's one model.
const ModelName = "scripted"

// Options configures a scripted provider.
type Options struct {
	// Name is the provider's name; default "scripted".
	Name string
	// StepDelay pauses before each streamed event (demos and tests watch a run with it).
	StepDelay time.Duration
	// Script replaces the classic exchange; nil plays the classic one.
	Script *Script
	// ContextWindow is the model's advertised window; default 32768.
	ContextWindow int
}

// Provider is the scripted provider. Safe for concurrent use.
type Provider struct {
	opts  Options
	mu    sync.Mutex
	plays map[int]int // turn index → times played, for ErrorStep.Times
}

// New returns a scripted provider.
func New(opts Options) *Provider {
	if opts.Name == "" {
		opts.Name = "scripted"
	}
	if opts.ContextWindow == 0 {
		opts.ContextWindow = 32768
	}
	return &Provider{opts: opts, plays: map[int]int{}}
}

// Name returns the provider's name.
func (p *Provider) Name() string { return p.opts.Name }

// Models returns the one model, "<name>/scripted".
func (p *Provider) Models(context.Context) ([]provider.Model, error) {
	return []provider.Model{{ID: p.opts.Name + "/" + ModelName, Provider: p.opts.Name, Name: ModelName, ContextWindow: p.opts.ContextWindow}}, nil
}

// LookupTool is the classic exchange's one tool.
var LookupTool = provider.Tool{
	Name:        "lookup",
	Description: "Look a query up (scripted and offline: reports the query's word count).",
	InputSchema: json.RawMessage(`{"type":"object","properties":{"query":{"type":"string","description":"what to look up"}},"required":["query"],"additionalProperties":false}`),
}

// Lookup is LookupTool's implementation: deterministic and offline.
func Lookup(query string) string {
	n := len(strings.Fields(query))
	return fmt.Sprintf("%d word(s) in %q; the scripted agent is ready.", n, truncate(query, 80))
}

// Stream plays one turn for req.
func (p *Provider) Stream(ctx context.Context, req *provider.Request, on func(provider.Event) error) (provider.Result, error) {
	if err := ctx.Err(); err != nil {
		return provider.Result{}, err
	}
	turn := p.classic(req)
	idx := assistantTurns(req.Messages)
	if s := p.opts.Script; s != nil {
		switch {
		case idx < len(s.Turns):
			turn = s.Turns[idx]
		case s.Loop:
			idx %= len(s.Turns)
			turn = s.Turns[idx]
		default:
			turn = Turn{Steps: []Step{{Text: fmt.Sprintf("The script has no turn %d.", idx+1)}}}
		}
	}
	p.mu.Lock()
	p.plays[idx]++
	play := p.plays[idx]
	p.mu.Unlock()
	return p.play(ctx, req, idx, play, turn, on)
}

func (p *Provider) play(ctx context.Context, req *provider.Request, idx, play int, t Turn, on func(provider.Event) error) (provider.Result, error) {
	var calls []provider.ToolCall
	var out int64
	streamed := false
	emit := func(ev provider.Event) error {
		if err := p.pause(ctx, p.opts.StepDelay); err != nil {
			return err
		}
		streamed = true
		return on(ev)
	}
	for j, st := range t.Steps {
		switch {
		case st.Text != "":
			out += tokens(st.Text)
			if err := emit(&provider.TextDelta{Text: st.Text}); err != nil {
				return provider.Result{}, err
			}
		case st.Thinking != "":
			out += tokens(st.Thinking)
			if err := emit(&provider.ThinkingDelta{Text: st.Thinking}); err != nil {
				return provider.Result{}, err
			}
		case st.Tool != nil || len(st.Ask) > 0:
			c := provider.ToolCall{ID: fmt.Sprintf("call_%d_%d", idx+1, j+1), Name: "ask_user", Arguments: st.Ask}
			if st.Tool != nil {
				c.Name, c.Arguments = st.Tool.Name, st.Tool.Arguments
				if st.Tool.ID != "" {
					c.ID = st.Tool.ID
				}
			}
			if len(c.Arguments) == 0 {
				c.Arguments = json.RawMessage(`{}`)
			}
			out += tokens(string(c.Arguments))
			calls = append(calls, c)
		case st.Delay != 0:
			if err := p.pause(ctx, time.Duration(st.Delay)); err != nil {
				return provider.Result{}, err
			}
		case st.Error != nil:
			if st.Error.Times > 0 && play > st.Error.Times {
				continue
			}
			kind := st.Error.Kind
			if kind == "" {
				kind = provider.KindOther
			}
			return provider.Result{}, &provider.Error{Kind: kind, Provider: p.opts.Name, Status: st.Error.Status,
				RetryAfter: time.Duration(st.Error.RetryAfter), Message: st.Error.Message, Streamed: streamed}
		}
	}
	stop := t.Stop
	switch {
	case stop == provider.StopMaxTokens:
		calls = nil
	case len(calls) > 0:
		stop = provider.StopToolUse
	case stop == "" || stop == provider.StopToolUse:
		stop = provider.StopEndTurn
	}
	for _, c := range calls {
		if err := emit(&provider.ToolCallDone{Call: c}); err != nil {
			return provider.Result{}, err
		}
	}
	u := provider.Usage{InputTokens: inputTokens(req), OutputTokens: out, Reported: true}
	if t.Usage != nil {
		u = provider.Usage{InputTokens: t.Usage.Input, OutputTokens: t.Usage.Output, Reported: !t.Usage.None}
		if t.Usage.None {
			u.InputTokens, u.OutputTokens = 0, 0
		}
	}
	return provider.Result{Usage: u, Stop: stop}, nil
}

// classic is the default exchange's turn for req (see the package doc).
func (p *Provider) classic(req *provider.Request) Turn {
	var last *provider.Message
	if n := len(req.Messages); n > 0 {
		last = &req.Messages[n-1]
	}
	if last != nil && last.Role == provider.RoleTool {
		if last.IsError {
			return Turn{Steps: []Step{{Text: "The " + last.ToolName + " "}, {Text: "failed: "}, {Text: last.Text}}}
		}
		return Turn{Steps: []Step{{Text: "The lookup "}, {Text: "found: "}, {Text: last.Text}}}
	}
	prompt := ""
	if last != nil {
		prompt = last.Text
	}
	steps := []Step{{Text: "Hello! "}}
	if prev := previousPrompt(req.Messages); prev != "" {
		steps = []Step{{Text: "Hello again! "}, {Text: fmt.Sprintf("Before, you asked: %q. ", truncate(prev, 60))}}
	}
	args, _ := protocol.Marshal(map[string]string{"query": prompt})
	id := fmt.Sprintf("call_lookup_%d", len(req.Messages))
	steps = append(steps, Step{Text: "Let me "}, Step{Text: "look that up."}, Step{Tool: &ToolStep{ID: id, Name: LookupTool.Name, Arguments: args}})
	return Turn{Steps: steps}
}

// previousPrompt is the text of the user message before the last one, "" when there is none.
func previousPrompt(ms []provider.Message) string {
	seen := 0
	for i := len(ms) - 1; i >= 0; i-- {
		if ms[i].Role == provider.RoleUser {
			if seen++; seen == 2 {
				return ms[i].Text
			}
		}
	}
	return ""
}

func assistantTurns(ms []provider.Message) int {
	n := 0
	for _, m := range ms {
		if m.Role == provider.RoleAssistant {
			n++
		}
	}
	return n
}

// inputTokens counts the request the way the scripted model "reads" it: words plus one per
// message, plus 8 for the frame.
func inputTokens(req *provider.Request) int64 {
	n := tokens(req.System) + 8
	for _, m := range req.Messages {
		n += tokens(m.Text)
		for _, c := range m.ToolCalls {
			n += tokens(string(c.Arguments))
		}
	}
	return n
}

// tokens counts s's words (as len(strings.Fields(s))) plus one, without allocating: the scripted
// model counts its whole input every turn, which showed in the run's CPU profile.
func tokens(s string) int64 {
	n, in := int64(1), false
	for i := 0; i < len(s); {
		var space bool
		if b := s[i]; b < utf8.RuneSelf {
			space = asciiSpace[b]
			i++
		} else {
			r, size := utf8.DecodeRuneInString(s[i:])
			space = unicode.IsSpace(r)
			i += size
		}
		if !space && !in {
			n++
		}
		in = !space
	}
	return n
}

// asciiSpace is unicode.IsSpace for ASCII bytes.
var asciiSpace = [utf8.RuneSelf]bool{'\t': true, '\n': true, '\v': true, '\f': true, '\r': true, ' ': true}

func (p *Provider) pause(ctx context.Context, d time.Duration) error { return provider.Sleep(ctx, d) }

func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}
