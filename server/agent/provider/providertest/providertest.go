// Package providertest collects what a provider streams, for tests of providers and of the
// runtime's use of them.
package providertest

import (
	"context"

	"github.com/zidane-server/zidane/server/agent/provider"
)

// Turn is what one Stream call produced.
type Turn struct {
	// Text and Thinking are the concatenated deltas; Pieces the text deltas one by one.
	Text, Thinking string
	Pieces         []string
	// Kinds is the order of the events: "text", "thinking", "tool".
	Kinds []string
	// Calls are the delivered tool calls.
	Calls  []provider.ToolCall
	Result provider.Result
	Err    error
}

// Stream runs one turn of p and collects it.
func Stream(ctx context.Context, p provider.Provider, req *provider.Request) Turn {
	var o Turn
	o.Result, o.Err = p.Stream(ctx, req, func(ev provider.Event) error {
		switch e := ev.(type) {
		case *provider.TextDelta:
			o.Text += e.Text
			o.Pieces = append(o.Pieces, e.Text)
			o.Kinds = append(o.Kinds, "text")
		case *provider.ThinkingDelta:
			o.Thinking += e.Text
			o.Kinds = append(o.Kinds, "thinking")
		case *provider.ToolCallDone:
			o.Calls = append(o.Calls, e.Call)
			o.Kinds = append(o.Kinds, "tool")
		}
		return nil
	})
	return o
}
