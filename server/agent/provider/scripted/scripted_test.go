package scripted

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zidane-server/zidane/server/agent/provider"
)

// turnOut is what one Stream call produced.
type turnOut struct {
	text, thinking string
	pieces         []string
	calls          []provider.ToolCall
	kinds          []string
	res            provider.Result
	err            error
}

func stream(t *testing.T, p provider.Provider, req *provider.Request) turnOut {
	t.Helper()
	var o turnOut
	o.res, o.err = p.Stream(context.Background(), req, func(ev provider.Event) error {
		switch e := ev.(type) {
		case *provider.TextDelta:
			o.text += e.Text
			o.pieces = append(o.pieces, e.Text)
			o.kinds = append(o.kinds, "text")
		case *provider.ThinkingDelta:
			o.thinking += e.Text
			o.kinds = append(o.kinds, "thinking")
		case *provider.ToolCallDone:
			o.calls = append(o.calls, e.Call)
			o.kinds = append(o.kinds, "tool")
		}
		return nil
	})
	return o
}

func TestClassicExchangeAndHistory(t *testing.T) {
	p := New(Options{})
	msgs := []provider.Message{{Role: provider.RoleUser, Text: "What is Go?"}}
	o := stream(t, p, &provider.Request{Model: ModelName, Messages: msgs, Tools: []provider.Tool{LookupTool}})
	require.NoError(t, o.err)
	assert.Equal(t, []string{"Hello! ", "Let me ", "look that up."}, o.pieces, "the pieces of the classic greeting")
	require.Len(t, o.calls, 1)
	assert.Equal(t, "lookup", o.calls[0].Name)
	assert.JSONEq(t, `{"query":"What is Go?"}`, string(o.calls[0].Arguments))
	assert.Equal(t, provider.StopToolUse, o.res.Stop)
	assert.True(t, o.res.Usage.Reported)
	assert.Positive(t, o.res.Usage.InputTokens)

	result := Lookup("What is Go?")
	assert.Equal(t, `3 word(s) in "What is Go?"; the scripted agent is ready.`, result)
	msgs = append(msgs,
		provider.Message{Role: provider.RoleAssistant, Text: o.text, ToolCalls: o.calls},
		provider.Message{Role: provider.RoleTool, ToolCallID: o.calls[0].ID, ToolName: "lookup", Text: result})
	o2 := stream(t, p, &provider.Request{Model: ModelName, Messages: msgs})
	require.NoError(t, o2.err)
	assert.Equal(t, "The lookup found: "+result, o2.text)
	assert.Equal(t, provider.StopEndTurn, o2.res.Stop)
	assert.Empty(t, o2.calls)
	assert.Greater(t, o2.res.Usage.InputTokens, o.res.Usage.InputTokens, "it reads the whole conversation")

	// A second prompt knows the first.
	msgs = append(msgs, provider.Message{Role: provider.RoleAssistant, Text: o2.text}, provider.Message{Role: provider.RoleUser, Text: "And Rust?"})
	o3 := stream(t, p, &provider.Request{Model: ModelName, Messages: msgs})
	require.NoError(t, o3.err)
	assert.Equal(t, `Hello again! Before, you asked: "What is Go?". Let me look that up.`, o3.text)
	require.Len(t, o3.calls, 1)
	assert.JSONEq(t, `{"query":"And Rust?"}`, string(o3.calls[0].Arguments))
	assert.NotEqual(t, o.calls[0].ID, o3.calls[0].ID, "call ids are unique within a conversation")
}

func TestScriptFileDrivesTurns(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.json")
	require.NoError(t, os.WriteFile(path, []byte(`{"turns":[
	  {"steps":[{"thinking":"Plan it."},{"text":"Writing "},{"delay":"1ms"},{"text":"it."},
	            {"tool":{"name":"write_file","arguments":{"path":"a.txt","content":"x"},"id":"call_w"}},
	            {"ask":{"prompt":"Which?","options":["a","b"]}}]},
	  {"steps":[{"error":{"kind":"retryable","status":429,"message":"Rate limit","retryAfter":"2s","times":1}},{"text":"Done."}],
	   "usage":{"input":120,"output":4}},
	  {"steps":[{"text":"cut"},{"tool":{"name":"exec","arguments":{"command":"rm"}}}],"stop":"max_tokens","usage":{"none":true}}
	]}`), 0o600))
	s, err := Load(path)
	require.NoError(t, err)
	p := New(Options{Script: s})

	o := stream(t, p, &provider.Request{Messages: []provider.Message{{Role: provider.RoleUser, Text: "go"}}})
	require.NoError(t, o.err)
	assert.Equal(t, []string{"thinking", "text", "text", "tool", "tool"}, o.kinds)
	assert.Equal(t, "Plan it.", o.thinking)
	assert.Equal(t, "write_file", o.calls[0].Name)
	assert.Equal(t, "call_w", o.calls[0].ID)
	assert.Equal(t, "ask_user", o.calls[1].Name)
	assert.JSONEq(t, `{"prompt":"Which?","options":["a","b"]}`, string(o.calls[1].Arguments))
	assert.Equal(t, provider.StopToolUse, o.res.Stop)

	msgs := []provider.Message{{Role: provider.RoleUser, Text: "go"}, {Role: provider.RoleAssistant, ToolCalls: o.calls},
		{Role: provider.RoleTool, ToolCallID: "call_w", Text: "ok"}, {Role: provider.RoleTool, ToolCallID: o.calls[1].ID, Text: "a"}}
	o = stream(t, p, &provider.Request{Messages: msgs})
	pe, ok := provider.AsError(o.err)
	require.True(t, ok, "%v", o.err)
	assert.Equal(t, provider.KindRetryable, pe.Kind)
	assert.Equal(t, 2*time.Second, pe.RetryAfter)
	assert.False(t, pe.Streamed)
	o = stream(t, p, &provider.Request{Messages: msgs})
	require.NoError(t, o.err, "times:1 fails only the first play")
	assert.Equal(t, "Done.", o.text)
	assert.Equal(t, provider.Usage{InputTokens: 120, OutputTokens: 4, Reported: true}, o.res.Usage)

	msgs = append(msgs, provider.Message{Role: provider.RoleAssistant, Text: "Done."}, provider.Message{Role: provider.RoleUser, Text: "more"})
	o = stream(t, p, &provider.Request{Messages: msgs})
	require.NoError(t, o.err)
	assert.Equal(t, provider.StopMaxTokens, o.res.Stop)
	assert.Empty(t, o.calls, "a cut turn delivers no call")
	assert.False(t, o.res.Usage.Reported)

	msgs = append(msgs, provider.Message{Role: provider.RoleAssistant, Text: "cut"}, provider.Message{Role: provider.RoleUser, Text: "again"})
	o = stream(t, p, &provider.Request{Messages: msgs})
	require.NoError(t, o.err)
	assert.Equal(t, "The script has no turn 4.", o.text)
}

func TestScriptErrorAfterTextIsStreamed(t *testing.T) {
	s, err := Parse([]byte(`{"turns":[{"steps":[{"text":"Hel"},{"error":{"kind":"retryable","message":"Overloaded"}}]}]}`))
	require.NoError(t, err)
	o := stream(t, provider.WithRetry(New(Options{Script: s}), provider.DefaultRetry), &provider.Request{})
	pe, ok := provider.AsError(o.err)
	require.True(t, ok)
	assert.True(t, pe.Streamed)
	assert.Equal(t, "Hel", o.text, "not retried after a token")
}

func TestScriptRejectsBadScripts(t *testing.T) {
	for name, src := range map[string]string{
		"empty":          `{"turns":[]}`,
		"two actions":    `{"turns":[{"steps":[{"text":"a","thinking":"b"}]}]}`,
		"no action":      `{"turns":[{"steps":[{}]}]}`,
		"nameless tool":  `{"turns":[{"steps":[{"tool":{"arguments":{}}}]}]}`,
		"array args":     `{"turns":[{"steps":[{"tool":{"name":"x","arguments":[1]}}]}]}`,
		"unknown field":  `{"turns":[{"steps":[{"txt":"a"}]}]}`,
		"bad stop":       `{"turns":[{"steps":[{"text":"a"}],"stop":"done"}]}`,
		"bad kind":       `{"turns":[{"steps":[{"error":{"kind":"nope","message":"x"}}]}]}`,
		"bad delay":      `{"turns":[{"steps":[{"delay":"soon"}]}]}`,
		"ask not object": `{"turns":[{"steps":[{"ask":"which?"}]}]}`,
	} {
		_, err := Parse([]byte(src))
		assert.Error(t, err, name)
	}
}

func TestStepDelayAndCancel(t *testing.T) {
	p := New(Options{StepDelay: 50 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	_, err := p.Stream(ctx, &provider.Request{Messages: []provider.Message{{Role: provider.RoleUser, Text: "hi"}}}, func(provider.Event) error {
		n++
		cancel()
		return nil
	})
	assert.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, 1, n)
}

func TestModels(t *testing.T) {
	ms, err := New(Options{}).Models(context.Background())
	require.NoError(t, err)
	b, _ := json.Marshal(ms)
	assert.JSONEq(t, `[{"ID":"scripted/scripted","Provider":"scripted","Name":"scripted","ContextWindow":32768}]`, string(b))
}
