package anthropic_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zidane-server/zidane/server/agent/provider"
	"github.com/zidane-server/zidane/server/agent/provider/anthropic"
	"github.com/zidane-server/zidane/server/agent/provider/anthropic/anthropictest"
	"github.com/zidane-server/zidane/server/agent/provider/providertest"
)

const testKey = "sk-ant-test-0123456789abcdef"

var fastRetry = provider.RetryPolicy{MaxRetries: 3, BaseDelay: time.Millisecond, MaxRetryAfter: time.Minute}

func newProvider(f *anthropictest.Server) *anthropic.Provider {
	return anthropic.New(anthropic.Config{BaseURL: f.URL(), APIKey: provider.NewSecret(testKey)})
}

func run(t *testing.T, p provider.Provider, req *provider.Request) providertest.Turn {
	t.Helper()
	if req == nil {
		req = providertest.Hi("claude-x")
	}
	return providertest.Run(p, req)
}

func perr(t *testing.T, err error) *provider.Error { t.Helper(); return providertest.AsError(t, err) }

func TestTextThinkingToolUseAndUsage(t *testing.T) {
	f := anthropictest.New(t)
	f.Enqueue(anthropictest.Response{Events: []string{
		anthropictest.MessageStart(20),
		anthropictest.Ping,
		anthropictest.ThinkingStart(0), anthropictest.ThinkingDelta(0, "Read it "), anthropictest.ThinkingDelta(0, "first."), anthropictest.SignatureDelta(0, "sig"), anthropictest.BlockStop(0),
		anthropictest.TextStart(1), anthropictest.TextDelta(1, "Let me "), anthropictest.TextDelta(1, "look."), anthropictest.BlockStop(1),
		anthropictest.ToolStart(2, "toolu_1", "read_file"), anthropictest.InputDelta(2, `{"pa`), anthropictest.InputDelta(2, `th":"a.txt"}`), anthropictest.BlockStop(2),
		anthropictest.ToolStart(3, "toolu_2", "list_dir"), anthropictest.InputDelta(3, `{"path":"."}`), anthropictest.BlockStop(3),
		anthropictest.MessageDelta("tool_use", 42), anthropictest.MessageStop,
	}})
	o := run(t, newProvider(f), nil)
	require.NoError(t, o.Err)
	assert.Equal(t, "Read it first.", o.Thinking)
	assert.Equal(t, "Let me look.", o.Text)
	assert.Equal(t, []string{"thinking", "thinking", "text", "text", "tool", "tool"}, o.Kinds)
	require.Len(t, o.Calls, 2)
	assert.Equal(t, "toolu_1", o.Calls[0].ID)
	assert.JSONEq(t, `{"path":"a.txt"}`, string(o.Calls[0].Arguments))
	assert.Equal(t, "list_dir", o.Calls[1].Name)
	assert.Equal(t, provider.Result{Usage: provider.Usage{InputTokens: 20, OutputTokens: 42, Reported: true}, Stop: provider.StopToolUse}, o.Result)
}

func TestSendsTheConversation(t *testing.T) {
	f := anthropictest.New(t)
	f.Enqueue(anthropictest.Reply("Sure.", 30, 2))
	req := &provider.Request{Model: "claude-x", System: "Be brief.", Messages: []provider.Message{
		{Role: provider.RoleUser, Text: "first"},
		{Role: provider.RoleAssistant, Text: "Looking.", Thinking: "plan", ToolCalls: []provider.ToolCall{
			{ID: "toolu_1", Name: "exec", Arguments: json.RawMessage(`{"command":"sleep 60"}`)},
			{ID: "toolu_2", Name: "list_dir"}}},
		{Role: provider.RoleTool, ToolCallID: "toolu_1", Text: "cancelled by the user", IsError: true},
		{Role: provider.RoleTool, ToolCallID: "toolu_2", Text: "a.txt"},
		{Role: provider.RoleUser, Text: "continue"},
	}, Tools: []provider.Tool{{Name: "exec", Description: "Run.", InputSchema: json.RawMessage(`{"type":"object","properties":{"command":{"type":"string"}},"required":["command"],"additionalProperties":false}`)}}}
	o := run(t, newProvider(f), req)
	require.NoError(t, o.Err)
	assert.Equal(t, "Sure.", o.Text)
	r := f.StreamRequests()[0]
	assert.Equal(t, "Bearer "+testKey, r.Header.Get("Authorization"), "the SDK sends the key as a bearer token")
	assert.NotEmpty(t, r.Header.Get("Anthropic-Version"))
	assert.JSONEq(t, `{
	  "model":"claude-x","max_tokens":8192,"stream":true,
	  "system":[{"type":"text","text":"Be brief."}],
	  "messages":[
	    {"role":"user","content":[{"type":"text","text":"first"}]},
	    {"role":"assistant","content":[{"type":"text","text":"Looking."},
	      {"type":"tool_use","id":"toolu_1","name":"exec","input":{"command":"sleep 60"}},
	      {"type":"tool_use","id":"toolu_2","name":"list_dir","input":{}}]},
	    {"role":"user","content":[
	      {"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"cancelled by the user"}],"is_error":true},
	      {"type":"tool_result","tool_use_id":"toolu_2","content":[{"type":"text","text":"a.txt"}],"is_error":false},
	      {"type":"text","text":"continue"}]}],
	  "tools":[{"name":"exec","description":"Run.","input_schema":{"type":"object","properties":{"command":{"type":"string"}},"required":["command"],"additionalProperties":false}}]
	}`, string(r.Body))
}

func TestRateLimitThenSuccessAndAuth(t *testing.T) {
	f := anthropictest.New(t)
	limited := anthropictest.Error(429, "rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit")
	limited.Header = map[string]string{"Retry-After": "1"}
	f.Enqueue(limited, anthropictest.Reply("ok", 1, 1))
	o := run(t, provider.WithRetry(newProvider(f), fastRetry), nil)
	require.NoError(t, o.Err)
	assert.Equal(t, "ok", o.Text)
	rs := f.StreamRequests()
	require.Len(t, rs, 2)
	assert.GreaterOrEqual(t, rs[1].At.Sub(rs[0].At), time.Second)

	f.Enqueue(anthropictest.Error(401, "authentication_error", "invalid x-api-key"))
	p := anthropic.New(anthropic.Config{BaseURL: f.URL(), APIKey: provider.NewSecret(testKey), KeyEnv: "WORK_CLAUDE_KEY"})
	e := perr(t, run(t, provider.WithRetry(p, fastRetry), nil).Err)
	assert.Equal(t, provider.KindAuth, e.Kind)
	assert.Contains(t, e.Error(), "set WORK_CLAUDE_KEY")
	assert.NotContains(t, e.Error(), "0123456789")
}

func TestContextTooLongAndStreamCut(t *testing.T) {
	f := anthropictest.New(t)
	f.Enqueue(anthropictest.Error(400, "invalid_request_error", "prompt is too long: 212345 tokens > 200000 maximum"))
	e := perr(t, run(t, provider.WithRetry(newProvider(f), fastRetry), nil).Err)
	assert.Equal(t, provider.KindContextTooLong, e.Kind)
	assert.Len(t, f.StreamRequests(), 1)

	f.Enqueue(anthropictest.Response{Events: []string{anthropictest.MessageStart(5), anthropictest.TextStart(0), anthropictest.TextDelta(0, "Part")}, Abort: true})
	o := run(t, provider.WithRetry(newProvider(f), fastRetry), nil)
	e = perr(t, o.Err)
	assert.True(t, e.Streamed)
	assert.Equal(t, "Part", o.Text)
	assert.Len(t, f.StreamRequests(), 2, "no retry after a token")
}

func TestCancel(t *testing.T) {
	f := anthropictest.New(t)
	f.Enqueue(anthropictest.Response{Events: []string{anthropictest.MessageStart(5), anthropictest.TextStart(0), anthropictest.TextDelta(0, "Hel")}, Hold: true})
	ctx, cancel := context.WithCancel(context.Background())
	start := time.Now()
	_, err := newProvider(f).Stream(ctx, &provider.Request{Model: "claude-x"}, func(provider.Event) error { cancel(); return nil })
	assert.True(t, errors.Is(err, context.Canceled), "%v", err)
	assert.Less(t, time.Since(start), time.Second)
}

func TestModels(t *testing.T) {
	f := anthropictest.New(t)
	f.SetModels("claude-a", "claude-b")
	p := anthropic.New(anthropic.Config{BaseURL: f.URL(), APIKey: provider.NewSecret(testKey), Models: []provider.Model{{Name: "claude-b", ContextWindow: 100000}}})
	ms, err := p.Models(context.Background())
	require.NoError(t, err)
	assert.Equal(t, []provider.Model{
		{ID: "anthropic/claude-b", Provider: "anthropic", Name: "claude-b", ContextWindow: 100000},
		{ID: "anthropic/claude-a", Provider: "anthropic", Name: "claude-a", ContextWindow: 200000},
	}, ms)
}

func TestRuntimeCase_R11_ToolUseWithoutArgumentsAndInputCutByMaxTokens(t *testing.T) {
	start := `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"claude-x","stop_reason":null,"usage":{"input_tokens":20,"output_tokens":1}}}`
	blockStart := `{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_1","name":"list_dir","input":{}}}`
	emptyDelta := `{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":""}}`
	blockStop := `{"type":"content_block_stop","index":0}`
	delta := `{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":9}}`
	stop := `{"type":"message_stop"}`
	for name, evs := range map[string][]string{
		"A":  {start, blockStart, emptyDelta, blockStop, delta, stop},
		"A2": {start, blockStart, blockStop, delta, stop},
	} {
		t.Run(name, func(t *testing.T) {
			f := anthropictest.New(t)
			f.Enqueue(anthropictest.Response{Events: evs})
			o := run(t, newProvider(f), nil)
			require.NoError(t, o.Err)
			require.Len(t, o.Calls, 1)
			assert.Equal(t, provider.ToolCall{ID: "toolu_1", Name: "list_dir", Arguments: json.RawMessage(`{}`)}, o.Calls[0])
			assert.Equal(t, provider.StopToolUse, o.Result.Stop)
			assert.Equal(t, provider.Usage{InputTokens: 20, OutputTokens: 9, Reported: true}, o.Result.Usage)
		})
	}
	t.Run("B", func(t *testing.T) {
		f := anthropictest.New(t)
		f.Enqueue(anthropictest.Response{Events: []string{start,
			`{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_1","name":"exec","input":{}}}`,
			`{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"command\":\"rm -rf bu"}}`,
			`{"type":"message_delta","delta":{"stop_reason":"max_tokens"},"usage":{"output_tokens":4096}}`,
			stop}})
		o := run(t, newProvider(f), nil)
		require.NoError(t, o.Err)
		assert.Equal(t, provider.StopMaxTokens, o.Result.Stop, "the answer was cut")
		assert.Empty(t, o.Calls, "the partial command is never delivered")
	})
}

func TestRuntimeCase_R13_OverloadedErrorAsAnSSEEventAfter200(t *testing.T) {
	overloaded := `event: error` + "\n" + `data: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`
	t.Run("A before any content", func(t *testing.T) {
		f := anthropictest.New(t)
		f.Enqueue(anthropictest.Response{Events: []string{anthropictest.MessageStart(5), "event: ping\ndata: {\"type\": \"ping\"}", overloaded}, Abort: true},
			anthropictest.Reply("Hello.", 5, 2))
		o := run(t, provider.WithRetry(newProvider(f), fastRetry), nil)
		require.NoError(t, o.Err)
		assert.Equal(t, "Hello.", o.Text, "the answer once")
		assert.Len(t, f.StreamRequests(), 2)
	})
	t.Run("B after a text delta", func(t *testing.T) {
		f := anthropictest.New(t)
		f.Enqueue(anthropictest.Response{Events: []string{anthropictest.MessageStart(5), anthropictest.TextStart(0), anthropictest.TextDelta(0, "Hel"), overloaded}, Abort: true},
			anthropictest.Reply("never", 5, 2))
		o := run(t, provider.WithRetry(newProvider(f), fastRetry), nil)
		e := perr(t, o.Err)
		assert.True(t, e.Streamed)
		assert.Contains(t, e.Error(), "overloaded_error", "names the overload")
		assert.Equal(t, "Hel", o.Text)
		assert.Len(t, f.StreamRequests(), 1, "no retry")
	})
	t.Run("C HTTP 529", func(t *testing.T) {
		f := anthropictest.New(t)
		f.Enqueue(anthropictest.Response{Status: 529, Body: `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`},
			anthropictest.Reply("Hello.", 5, 2))
		o := run(t, provider.WithRetry(newProvider(f), fastRetry), nil)
		require.NoError(t, o.Err)
		assert.Equal(t, "Hello.", o.Text)
		assert.Len(t, f.StreamRequests(), 2)
	})
}

func TestFakeChecksTheHistoryAsTheAPIDoes(t *testing.T) {
	f := anthropictest.New(t)
	f.Validate(anthropictest.CheckHistory)
	r := anthropictest.Reply("ok", 1, 1)
	f.SetFallback(&r)
	call := []provider.ToolCall{{ID: "toolu_1", Name: "exec", Arguments: json.RawMessage(`{"command":"sleep 60"}`)}}
	u1 := provider.Message{Role: provider.RoleUser, Text: "a"}
	a1 := provider.Message{Role: provider.RoleAssistant, ToolCalls: call}
	t1 := provider.Message{Role: provider.RoleTool, ToolCallID: "toolu_1", Text: "cancelled by the user", IsError: true}
	u2 := provider.Message{Role: provider.RoleUser, Text: "continue"}
	require.NoError(t, run(t, newProvider(f), &provider.Request{Model: "m", Messages: []provider.Message{u1, a1, t1, u2}}).Err)
	for name, msgs := range map[string][]provider.Message{
		"tool_use without result": {u1, a1, u2},
		"result without tool_use": {u1, t1, u2},
		"assistant first":         {a1, t1, u2},
	} {
		e := perr(t, run(t, newProvider(f), &provider.Request{Model: "m", Messages: msgs}).Err)
		assert.Equal(t, provider.KindBadRequest, e.Kind, name)
		assert.Equal(t, 400, e.Status, name)
	}
}
