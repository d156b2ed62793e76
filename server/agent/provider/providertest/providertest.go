// Package providertest collects what a provider streams, for tests of providers and of the
// runtime's use of them.
package providertest

import (
	"context"

	"github.com/stretchr/testify/require"

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

// Hi is a one-prompt request for model.
func Hi(model string) *provider.Request {
	return &provider.Request{Model: model, Messages: []provider.Message{{Role: provider.RoleUser, Text: "hi"}}}
}

// Run streams req (Hi("m") when nil) with a background context.
func Run(p provider.Provider, req *provider.Request) Turn {
	if req == nil {
		req = Hi("m")
	}
	return Stream(context.Background(), p, req)
}

// AsError fails t unless err is a *provider.Error, and returns it.
func AsError(t require.TestingT, err error) *provider.Error {
	if h, ok := t.(interface{ Helper() }); ok {
		h.Helper()
	}
	require.Error(t, err)
	e, ok := provider.AsError(err)
	require.True(t, ok, "a *provider.Error: %v", err)
	return e
}
