package openai_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zidane-server/zidane/server/agent/provider"
	"github.com/zidane-server/zidane/server/agent/provider/openai"
	"github.com/zidane-server/zidane/server/agent/provider/openai/openaitest"
	"github.com/zidane-server/zidane/server/agent/provider/providertest"
)

const testKey = "sk-test-0123456789abcdef"

func newProvider(f *openaitest.Server) *openai.Provider {
	return openai.New(openai.Config{BaseURL: f.BaseURL(), APIKey: provider.NewSecret(testKey)})
}

func run(t *testing.T, p provider.Provider, req *provider.Request) providertest.Turn {
	t.Helper()
	if req == nil {
		req = providertest.Hi("m")
	}
	return providertest.Run(p, req)
}

func perr(t *testing.T, err error) *provider.Error { t.Helper(); return providertest.AsError(t, err) }

func assertCalls(t *testing.T, got []provider.ToolCall, want ...string) {
	t.Helper()
	var s []string
	for _, c := range got {
		var v any
		require.NoError(t, json.Unmarshal(c.Arguments, &v), "arguments are JSON: %s", c.Arguments)
		b, _ := json.Marshal(v)
		s = append(s, c.ID+" "+c.Name+" "+string(b))
	}
	assert.Equal(t, want, s)
}

func TestStreamsTextUsageAndSendsTheConversation(t *testing.T) {
	f := openaitest.New(t)
	f.Enqueue(openaitest.Reply("Hello there, friend.", 12, 3))
	req := &provider.Request{
		Model: "gpt-x", System: "Be brief.", MaxOutputTokens: 256,
		Messages: []provider.Message{
			{Role: provider.RoleUser, Text: "first"},
			{Role: provider.RoleAssistant, Text: "Looking.", Thinking: "secret plan", ToolCalls: []provider.ToolCall{{ID: "call_1", Name: "lookup", Arguments: json.RawMessage(`{"query":"first"}`)}}},
			{Role: provider.RoleTool, ToolCallID: "call_1", ToolName: "lookup", Text: "1 word"},
			{Role: provider.RoleAssistant, Text: "Found 1 word."},
			{Role: provider.RoleUser, Text: "second"},
		},
		Tools: []provider.Tool{{Name: "lookup", Description: "Look up.", InputSchema: json.RawMessage(`{"type":"object","properties":{"query":{"type":"string"}}}`)}},
	}
	o := run(t, newProvider(f), req)
	require.NoError(t, o.Err)
	assert.Equal(t, "Hello there, friend.", o.Text)
	assert.Equal(t, provider.Result{Usage: provider.Usage{InputTokens: 12, OutputTokens: 3, Reported: true}, Stop: provider.StopEndTurn}, o.Result)

	reqs := f.StreamRequests()
	require.Len(t, reqs, 1)
	assert.Equal(t, "Bearer "+testKey, reqs[0].Header.Get("Authorization"))
	assert.JSONEq(t, `{
	  "model":"gpt-x","stream":true,"stream_options":{"include_usage":true},"max_tokens":256,
	  "messages":[
	    {"role":"system","content":"Be brief."},
	    {"role":"user","content":"first"},
	    {"role":"assistant","content":"Looking.","tool_calls":[{"id":"call_1","type":"function","function":{"name":"lookup","arguments":"{\"query\":\"first\"}"}}]},
	    {"role":"tool","content":"1 word","tool_call_id":"call_1"},
	    {"role":"assistant","content":"Found 1 word."},
	    {"role":"user","content":"second"}],
	  "tools":[{"type":"function","function":{"name":"lookup","description":"Look up.","parameters":{"type":"object","properties":{"query":{"type":"string"}}}}}]
	}`, string(reqs[0].Body), "the whole conversation; reasoning is not replayed")
}

func TestSplitArgumentsAndTwoCallsInOneTurn(t *testing.T) {
	f := openaitest.New(t)
	f.Enqueue(openaitest.Response{Events: []string{
		openaitest.Text("Let me look."),
		openaitest.ToolCall(0, "call_a", "read_file", `{"pa`),
		openaitest.ToolArgs(0, `th":"a`),
		openaitest.ToolArgs(0, `.txt"}`),
		openaitest.ToolCall(1, "call_b", "list_dir", ``),
		openaitest.ToolArgs(1, `{"path":`),
		openaitest.ToolArgs(1, `"."}`),
		openaitest.Finish("tool_calls"), openaitest.Usage(30, 20), openaitest.Done,
	}})
	o := run(t, newProvider(f), nil)
	require.NoError(t, o.Err)
	assert.Equal(t, []string{"text", "tool", "tool"}, o.Kinds)
	assertCalls(t, o.Calls, `call_a read_file {"path":"a.txt"}`, `call_b list_dir {"path":"."}`)
	assert.Equal(t, provider.StopToolUse, o.Result.Stop)
}

func TestReasoningTextAndTheDoneMarker(t *testing.T) {
	f := openaitest.New(t)
	f.Enqueue(openaitest.Response{Events: []string{
		openaitest.Reasoning("Think "), openaitest.Reasoning("first."), openaitest.Text("Answer."),
		openaitest.Finish("stop"), openaitest.Done,
		openaitest.Text(" never read: after [DONE]"),
	}})
	o := run(t, newProvider(f), nil)
	require.NoError(t, o.Err)
	assert.Equal(t, "Think first.", o.Thinking)
	assert.Equal(t, "Answer.", o.Text, "nothing after [DONE] is read")
	assert.Equal(t, []string{"thinking", "thinking", "text"}, o.Kinds)
	assert.False(t, o.Result.Usage.Reported)
}

func TestRateLimitWithRetryAfterThenSuccess(t *testing.T) {
	f := openaitest.New(t)
	limited := openaitest.Error(429, "rate_limit_error", "Rate limit reached")
	limited.Header = map[string]string{"Retry-After": "1"}
	f.Enqueue(limited, openaitest.Reply("ok", 1, 1))
	p := provider.WithRetry(newProvider(f), provider.RetryPolicy{MaxRetries: 3, BaseDelay: time.Millisecond, MaxRetryAfter: time.Minute})
	o := run(t, p, nil)
	require.NoError(t, o.Err)
	assert.Equal(t, "ok", o.Text)
	reqs := f.StreamRequests()
	require.Len(t, reqs, 2, "no SDK retries on top")
	assert.GreaterOrEqual(t, reqs[1].At.Sub(reqs[0].At), time.Second)
}

func TestTwoServerErrorsThenSuccess(t *testing.T) {
	f := openaitest.New(t)
	f.Enqueue(openaitest.Error(500, "server_error", "boom"), openaitest.Error(502, "server_error", "bad gateway"), openaitest.Reply("fine", 1, 1))
	p := provider.WithRetry(newProvider(f), provider.RetryPolicy{MaxRetries: 3, BaseDelay: time.Millisecond})
	o := run(t, p, nil)
	require.NoError(t, o.Err)
	assert.Equal(t, "fine", o.Text)
	assert.Len(t, f.StreamRequests(), 3)
}

func TestStreamCutMidAnswer(t *testing.T) {
	f := openaitest.New(t)
	f.Enqueue(openaitest.Response{Events: []string{openaitest.Text("Part "), openaitest.Text("of it")}, Abort: true})
	p := provider.WithRetry(newProvider(f), provider.RetryPolicy{MaxRetries: 3, BaseDelay: time.Millisecond})
	o := run(t, p, nil)
	e := perr(t, o.Err)
	assert.True(t, e.Streamed)
	assert.Equal(t, "Part of it", o.Text)
	assert.Len(t, f.StreamRequests(), 1, "no retry after a token")

	// A stream that ends cleanly but without a finish_reason is cut too.
	f.Enqueue(openaitest.Response{Events: []string{openaitest.Text("Part")}})
	o = run(t, newProvider(f), nil)
	e = perr(t, o.Err)
	assert.True(t, e.Streamed)
	assert.Contains(t, e.Error(), "ended before the model finished")
}

func TestUnauthorizedNamesTheEnvVarAndNeverTheKey(t *testing.T) {
	f := openaitest.New(t)
	f.Enqueue(openaitest.Error(401, "invalid_request_error", "Incorrect API key provided: "+testKey+". You can find your API key at https://platform.openai.com/account/api-keys."))
	p := openai.New(openai.Config{BaseURL: f.BaseURL(), APIKey: provider.NewSecret(testKey), KeyEnv: "MY_LLM_KEY"})
	o := run(t, provider.WithRetry(p, provider.DefaultRetry), nil)
	e := perr(t, o.Err)
	assert.Equal(t, provider.KindAuth, e.Kind)
	assert.Equal(t, 401, e.Status)
	assert.Equal(t, "MY_LLM_KEY", e.EnvVar)
	assert.Contains(t, e.Error(), "set MY_LLM_KEY")
	assert.NotContains(t, e.Error(), "0123456789", "the key never reaches an error")
	assert.Len(t, f.StreamRequests(), 1)

	// A masked echo of a key is removed as well.
	f.Enqueue(openaitest.Error(401, "invalid_request_error", "Incorrect API key provided: sk-proj-abc*****************xyz1."))
	e = perr(t, run(t, p, nil).Err)
	assert.NotContains(t, e.Error(), "sk-proj")
}

func TestFinishReasonLengthIsMaxTokens(t *testing.T) {
	f := openaitest.New(t)
	f.Enqueue(openaitest.Response{Events: []string{openaitest.Text("A long"), openaitest.Finish("length"), openaitest.Usage(5, 2), openaitest.Done}})
	o := run(t, newProvider(f), nil)
	require.NoError(t, o.Err)
	assert.Equal(t, provider.StopMaxTokens, o.Result.Stop)
	assert.Equal(t, "A long", o.Text)
}

func TestNoKeySendsNoAuthorization(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-from-the-environment-xyz")
	t.Setenv("OPENAI_ORG_ID", "org-secret")
	f := openaitest.New(t)
	f.Enqueue(openaitest.Reply("ok", 1, 1))
	o := run(t, openai.New(openai.Config{Name: "local", BaseURL: f.BaseURL()}), nil)
	require.NoError(t, o.Err)
	h := f.StreamRequests()[0].Header
	assert.Empty(t, h.Get("Authorization"), "a keyless endpoint never gets OPENAI_API_KEY")
	assert.Empty(t, h.Get("OpenAI-Organization"))
}

func TestCancelEndsTheStream(t *testing.T) {
	f := openaitest.New(t)
	f.Enqueue(openaitest.Response{Events: []string{openaitest.Text("Hel")}, Hold: true})
	ctx, cancel := context.WithCancel(context.Background())
	start := time.Now()
	_, err := newProvider(f).Stream(ctx, &provider.Request{Model: "m"}, func(provider.Event) error { cancel(); return nil })
	assert.True(t, errors.Is(err, context.Canceled), "%v", err)
	assert.Less(t, time.Since(start), time.Second)
}

func TestModelsListedAndCachedAMinute(t *testing.T) {
	f := openaitest.New(t)
	f.SetModels("llama-3", "qwen")
	p := openai.New(openai.Config{Name: "local", BaseURL: f.BaseURL(), Models: []provider.Model{{Name: "qwen", ContextWindow: 32768}}})
	ms, err := p.Models(context.Background())
	require.NoError(t, err)
	assert.Equal(t, []provider.Model{
		{ID: "local/qwen", Provider: "local", Name: "qwen", ContextWindow: 32768},
		{ID: "local/llama-3", Provider: "local", Name: "llama-3"},
	}, ms)
	_, err = p.Models(context.Background())
	require.NoError(t, err)
	n := 0
	for _, r := range f.Requests() {
		if r.Method == http.MethodGet {
			n++
			assert.Equal(t, "/v1/models", r.Path)
		}
	}
	assert.Equal(t, 1, n, "the second call is served from the cache")
}

func TestModelsFailureKeepsTheConfiguredOnes(t *testing.T) {
	p := openai.New(openai.Config{Name: "down", BaseURL: "http://127.0.0.1:1/v1", Models: []provider.Model{{Name: "m", ContextWindow: 8192}}})
	ms, err := p.Models(context.Background())
	require.Error(t, err)
	assert.Equal(t, []provider.Model{{ID: "down/m", Provider: "down", Name: "m", ContextWindow: 8192}}, ms)
	assert.False(t, strings.Contains(err.Error(), testKey))
}

func TestFakeChecksTheHistory(t *testing.T) {
	f := openaitest.New(t)
	f.Validate(openaitest.CheckHistory)
	f.SetFallback(ptr(openaitest.Reply("ok", 1, 1)))
	call := []provider.ToolCall{{ID: "call_1", Name: "exec", Arguments: json.RawMessage(`{}`)}}
	good := []provider.Message{{Role: provider.RoleUser, Text: "a"}, {Role: provider.RoleAssistant, ToolCalls: call},
		{Role: provider.RoleTool, ToolCallID: "call_1", Text: "cancelled by the user", IsError: true}, {Role: provider.RoleUser, Text: "continue"}}
	require.NoError(t, run(t, newProvider(f), &provider.Request{Model: "m", Messages: good}).Err)
	for name, msgs := range map[string][]provider.Message{
		"call without result":  {good[0], good[1], good[3]},
		"result without call":  {good[0], good[2], good[3]},
		"assistant first":      {{Role: provider.RoleAssistant, Text: "hi"}, good[3]},
		"result after a user":  {good[0], good[1], good[3], good[2]},
		"last call unanswered": {good[0], good[1]},
	} {
		e := perr(t, run(t, newProvider(f), &provider.Request{Model: "m", Messages: msgs}).Err)
		assert.Equal(t, provider.KindBadRequest, e.Kind, name)
	}
}

func ptr[T any](v T) *T { return &v }
