package scripted

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/zidane-server/zidane/server/agent/provider"

	"github.com/zidane-server/zidane/protocol"
)

// Script is a scripted model's turns, loaded from JSON (see the package doc for the format).
type Script struct {
	// Turns are played in order: a request plays the turn whose index is the number of assistant
	// messages in its conversation.
	Turns []Turn `json:"turns"`
	// Loop replays the turns from the first when the conversation has more assistant messages
	// than the script has turns; without it such a request gets a short "no more turns" answer.
	Loop bool `json:"loop,omitempty"`
}

// Turn is one model turn: steps played in order, then the stop reason and the usage.
type Turn struct {
	Steps []Step `json:"steps"`
	// Stop is "end_turn" (default, or "tool_use" when the turn made a call), "max_tokens" or
	// "other". "max_tokens" drops the turn's tool calls, as a cut stream does.
	Stop provider.StopReason `json:"stop,omitempty"`
	// Usage overrides the counted usage; {"none":true} reports none.
	Usage *Usage `json:"usage,omitempty"`
}

// Usage is a turn's reported usage in a script.
type Usage struct {
	Input  int64 `json:"input"`
	Output int64 `json:"output"`
	// None reports no usage (Usage.Reported=false), like a server that ignores include_usage.
	None bool `json:"none,omitempty"`
}

// Step is one thing a turn does; exactly one field is set.
type Step struct {
	// Text streams a piece of the answer.
	Text string `json:"text,omitempty"`
	// Thinking streams a piece of reasoning.
	Thinking string `json:"thinking,omitempty"`
	// Tool makes a tool call.
	Tool *ToolStep `json:"tool,omitempty"`
	// Ask makes an ask_user call with this object as its arguments (e.g. {"prompt":"Which?",
	// "options":["a","b"]}).
	Ask json.RawMessage `json:"ask,omitempty"`
	// Error fails the turn here.
	Error *ErrorStep `json:"error,omitempty"`
	// Delay pauses, e.g. "250ms" or "2s".
	Delay Duration `json:"delay,omitempty"`
}

// ToolStep is a tool call in a script.
type ToolStep struct {
	// ID is the call id; default "call_<turn>_<step>".
	ID   string `json:"id,omitempty"`
	Name string `json:"name"`
	// Arguments is a JSON object; default {}.
	Arguments json.RawMessage `json:"arguments,omitempty"`
}

// ErrorStep fails a turn with a classified *provider.Error.
type ErrorStep struct {
	// Kind is a provider.ErrorKind: "retryable", "auth", "context_too_long", "bad_request",
	// "bad_response" or "other" (default).
	Kind    provider.ErrorKind `json:"kind,omitempty"`
	Message string             `json:"message"`
	Status  int                `json:"status,omitempty"`
	// RetryAfter is the wait the "server" asks for, e.g. "2s".
	RetryAfter Duration `json:"retryAfter,omitempty"`
	// Times fails only the first Times plays of this turn (counted per provider), so a retry or
	// the next prompt gets past it; 0 fails every time.
	Times int `json:"times,omitempty"`
}

// Duration is a time.Duration written as a Go duration string ("250ms") in JSON.
type Duration time.Duration

// UnmarshalJSON reads "250ms"-style strings or a number of milliseconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		v, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("duration %q: %w", s, err)
		}
		*d = Duration(v)
		return nil
	}
	var ms float64
	if err := json.Unmarshal(b, &ms); err != nil {
		return fmt.Errorf("a duration is a string like \"250ms\" or a number of milliseconds, not %s", b)
	}
	*d = Duration(ms * float64(time.Millisecond))
	return nil
}

// String is the Go duration string, e.g. "250ms".
func (d Duration) String() string { return time.Duration(d).String() }

// MarshalJSON writes the duration as a Go duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return protocol.Marshal(time.Duration(d).String()) }

// Load reads and checks a script file.
func Load(path string) (*Script, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("scripted provider: %w", err)
	}
	s, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("scripted provider: %s: %w", path, err)
	}
	return s, nil
}

// Parse reads and checks a script: unknown fields, steps with no or several actions, tool calls
// without a name and arguments that are not JSON objects are errors.
func Parse(b []byte) (*Script, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var s Script
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("not a script: %w", err)
	}
	if len(s.Turns) == 0 {
		return nil, fmt.Errorf("the script has no turns")
	}
	for i, t := range s.Turns {
		for j, st := range t.Steps {
			if err := st.check(); err != nil {
				return nil, fmt.Errorf("turn %d step %d: %w", i+1, j+1, err)
			}
		}
		switch t.Stop {
		case "", provider.StopEndTurn, provider.StopToolUse, provider.StopMaxTokens, provider.StopOther:
		default:
			return nil, fmt.Errorf("turn %d: stop %q is not end_turn, tool_use, max_tokens or other", i+1, t.Stop)
		}
	}
	return &s, nil
}

func (st *Step) check() error {
	n := 0
	for _, set := range []bool{st.Text != "", st.Thinking != "", st.Tool != nil, len(st.Ask) > 0, st.Error != nil, st.Delay != 0} {
		if set {
			n++
		}
	}
	if n != 1 {
		return fmt.Errorf("a step sets exactly one of text, thinking, tool, ask, error, delay (this one sets %d)", n)
	}
	switch {
	case st.Tool != nil:
		if strings.TrimSpace(st.Tool.Name) == "" {
			return fmt.Errorf("a tool step needs a name")
		}
		if len(st.Tool.Arguments) > 0 && !isObject(st.Tool.Arguments) {
			return fmt.Errorf("tool %s: arguments must be a JSON object", st.Tool.Name)
		}
	case len(st.Ask) > 0:
		if !isObject(st.Ask) {
			return fmt.Errorf("ask must be a JSON object (the ask_user arguments)")
		}
	case st.Error != nil:
		switch st.Error.Kind {
		case "", provider.KindRetryable, provider.KindAuth, provider.KindContextTooLong, provider.KindBadRequest, provider.KindBadResponse, provider.KindOther:
		default:
			return fmt.Errorf("error kind %q is unknown", st.Error.Kind)
		}
	}
	return nil
}

func isObject(b json.RawMessage) bool {
	var m map[string]json.RawMessage
	return json.Unmarshal(b, &m) == nil && m != nil
}
