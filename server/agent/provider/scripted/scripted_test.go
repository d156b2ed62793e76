package scripted

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zidane-server/zidane/server/agent/provider"
	"github.com/zidane-server/zidane/server/agent/provider/providertest"
)

func stream(t *testing.T, p provider.Provider, req *provider.Request) providertest.Turn {
	t.Helper()
	return providertest.Stream(context.Background(), p, req)
}

func TestClassicExchangeAndHistory(t *testing.T) {
	p := New(Options{})
	msgs := []provider.Message{{Role: provider.RoleUser, Text: "What is Go?"}}
	o := stream(t, p, &provider.Request{Model: ModelName, Messages: msgs, Tools: []provider.Tool{LookupTool}})
	require.NoError(t, o.Err)
	assert.Equal(t, []string{"Hello! ", "Let me ", "look that up."}, o.Pieces, "the pieces of the classic greeting")
	require.Len(t, o.Calls, 1)
	assert.Equal(t, "lookup", o.Calls[0].Name)
	assert.JSONEq(t, `{"query":"What is Go?"}`, string(o.Calls[0].Arguments))
	assert.Equal(t, provider.StopToolUse, o.Result.Stop)
	assert.True(t, o.Result.Usage.Reported)
	assert.Positive(t, o.Result.Usage.InputTokens)

	result := Lookup("What is Go?")
	assert.Equal(t, `3 word(s) in "What is Go?"; the scripted agent is ready.`, result)
	msgs = append(msgs,
		provider.Message{Role: provider.RoleAssistant, Text: o.Text, ToolCalls: o.Calls},
		provider.Message{Role: provider.RoleTool, ToolCallID: o.Calls[0].ID, ToolName: "lookup", Text: result})
	o2 := stream(t, p, &provider.Request{Model: ModelName, Messages: msgs})
	require.NoError(t, o2.Err)
	assert.Equal(t, "The lookup found: "+result, o2.Text)
	assert.Equal(t, provider.StopEndTurn, o2.Result.Stop)
	assert.Empty(t, o2.Calls)
	assert.Greater(t, o2.Result.Usage.InputTokens, o.Result.Usage.InputTokens, "it reads the whole conversation")

	// A second prompt knows the first.
	msgs = append(msgs, provider.Message{Role: provider.RoleAssistant, Text: o2.Text}, provider.Message{Role: provider.RoleUser, Text: "And Rust?"})
	o3 := stream(t, p, &provider.Request{Model: ModelName, Messages: msgs})
	require.NoError(t, o3.Err)
	assert.Equal(t, `Hello again! Before, you asked: "What is Go?". Let me look that up.`, o3.Text)
	require.Len(t, o3.Calls, 1)
	assert.JSONEq(t, `{"query":"And Rust?"}`, string(o3.Calls[0].Arguments))
	assert.NotEqual(t, o.Calls[0].ID, o3.Calls[0].ID, "call ids are unique within a conversation")
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
	require.NoError(t, o.Err)
	assert.Equal(t, []string{"thinking", "text", "text", "tool", "tool"}, o.Kinds)
	assert.Equal(t, "Plan it.", o.Thinking)
	assert.Equal(t, "write_file", o.Calls[0].Name)
	assert.Equal(t, "call_w", o.Calls[0].ID)
	assert.Equal(t, "ask_user", o.Calls[1].Name)
	assert.JSONEq(t, `{"prompt":"Which?","options":["a","b"]}`, string(o.Calls[1].Arguments))
	assert.Equal(t, provider.StopToolUse, o.Result.Stop)

	msgs := []provider.Message{{Role: provider.RoleUser, Text: "go"}, {Role: provider.RoleAssistant, ToolCalls: o.Calls},
		{Role: provider.RoleTool, ToolCallID: "call_w", Text: "ok"}, {Role: provider.RoleTool, ToolCallID: o.Calls[1].ID, Text: "a"}}
	o = stream(t, p, &provider.Request{Messages: msgs})
	pe, ok := provider.AsError(o.Err)
	require.True(t, ok, "%v", o.Err)
	assert.Equal(t, provider.KindRetryable, pe.Kind)
	assert.Equal(t, 2*time.Second, pe.RetryAfter)
	assert.False(t, pe.Streamed)
	o = stream(t, p, &provider.Request{Messages: msgs})
	require.NoError(t, o.Err, "times:1 fails only the first play")
	assert.Equal(t, "Done.", o.Text)
	assert.Equal(t, provider.Usage{InputTokens: 120, OutputTokens: 4, Reported: true}, o.Result.Usage)

	msgs = append(msgs, provider.Message{Role: provider.RoleAssistant, Text: "Done."}, provider.Message{Role: provider.RoleUser, Text: "more"})
	o = stream(t, p, &provider.Request{Messages: msgs})
	require.NoError(t, o.Err)
	assert.Equal(t, provider.StopMaxTokens, o.Result.Stop)
	assert.Empty(t, o.Calls, "a cut turn delivers no call")
	assert.False(t, o.Result.Usage.Reported)

	msgs = append(msgs, provider.Message{Role: provider.RoleAssistant, Text: "cut"}, provider.Message{Role: provider.RoleUser, Text: "again"})
	o = stream(t, p, &provider.Request{Messages: msgs})
	require.NoError(t, o.Err)
	assert.Equal(t, "The script has no turn 4.", o.Text)
}

func TestScriptErrorAfterTextIsStreamed(t *testing.T) {
	s, err := Parse([]byte(`{"turns":[{"steps":[{"text":"Hel"},{"error":{"kind":"retryable","message":"Overloaded"}}]}]}`))
	require.NoError(t, err)
	o := stream(t, provider.WithRetry(New(Options{Script: s}), provider.DefaultRetry), &provider.Request{})
	pe, ok := provider.AsError(o.Err)
	require.True(t, ok)
	assert.True(t, pe.Streamed)
	assert.Equal(t, "Hel", o.Text, "not retried after a token")
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

func TestTokensCountsFields(t *testing.T) {
	for _, s := range []string{"", " ", "a", " a  b ", "a\u00a0b\u2003c\td\ne", "héllo wörld", "\u3000x\u3000"} {
		if got, want := tokens(s), int64(len(strings.Fields(s)))+1; got != want {
			t.Errorf("tokens(%q) = %d, want %d", s, got, want)
		}
	}
}
