package openai_test

// The provider-side runtime cases of ../shared/cases/runtime-cases.md for the OpenAI-compatible
// provider, each against the case's exact chunks.

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zidane-server/zidane/server/agent/provider"
	"github.com/zidane-server/zidane/server/agent/provider/openai/openaitest"
)

func TestRuntimeCase_R01_ToolCallDeltasWithoutIndex(t *testing.T) {
	f := openaitest.New(t)
	f.Enqueue(openaitest.Response{Events: []string{
		`{"choices":[{"index":0,"delta":{"role":"assistant","tool_calls":[{"id":"call_a","type":"function","function":{"name":"read_file","arguments":"{\"path\":"}}]},"finish_reason":null}]}`,
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"function":{"arguments":"\"a.txt\"}"}}]},"finish_reason":null}]}`,
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"id":"call_b","type":"function","function":{"name":"list_dir","arguments":"{\"path\":\".\"}"}}]},"finish_reason":null}]}`,
		`{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`,
		`[DONE]`,
	}})
	o := run(t, newProvider(f), nil)
	require.NoError(t, o.Err)
	assertCalls(t, o.Calls, `call_a read_file {"path":"a.txt"}`, `call_b list_dir {"path":"."}`)
	assert.Equal(t, provider.StopToolUse, o.Result.Stop)
}

func TestRuntimeCase_R02_EveryCallAtIndexZeroOrFirstAtIndexOne(t *testing.T) {
	t.Run("A both at index 0", func(t *testing.T) {
		f := openaitest.New(t)
		f.Enqueue(openaitest.Response{Events: []string{
			`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"write_file","arguments":"{\"path\":\"hello.py\",\"content\":\"print(1)\\n\"}"}}]},"finish_reason":null}]}`,
			`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_2","type":"function","function":{"name":"write_file","arguments":"{\"path\":\"world.py\",\"content\":\"print(2)\\n\"}"}}]},"finish_reason":null}]}`,
			`{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`,
			`[DONE]`,
		}})
		o := run(t, newProvider(f), nil)
		require.NoError(t, o.Err)
		assertCalls(t, o.Calls, `call_1 write_file {"content":"print(1)\n","path":"hello.py"}`, `call_2 write_file {"content":"print(2)\n","path":"world.py"}`)
	})
	t.Run("B first call at index 1 after text", func(t *testing.T) {
		f := openaitest.New(t)
		f.Enqueue(openaitest.Response{Events: []string{
			`{"choices":[{"index":0,"delta":{"content":"Let me look."},"finish_reason":null}]}`,
			`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_x","type":"function","function":{"name":"list_dir","arguments":"{\"path\":"}}]},"finish_reason":null}]}`,
			`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":"\".\"}"}}]},"finish_reason":null}]}`,
			`{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`,
			`[DONE]`,
		}})
		o := run(t, newProvider(f), nil)
		require.NoError(t, o.Err)
		assert.Equal(t, "Let me look.", o.Text)
		assertCalls(t, o.Calls, `call_x list_dir {"path":"."}`)
	})
	t.Run("B' a complete but nameless slot is a bad response", func(t *testing.T) {
		f := openaitest.New(t)
		f.Enqueue(openaitest.Response{Events: []string{
			`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{}"}}]},"finish_reason":null}]}`,
			`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_x","type":"function","function":{"name":"list_dir","arguments":"{}"}}]},"finish_reason":null}]}`,
			`{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`,
			`[DONE]`,
		}})
		o := run(t, newProvider(f), nil)
		e := perr(t, o.Err)
		assert.Equal(t, provider.KindBadResponse, e.Kind)
		assert.Empty(t, o.Calls, "nothing is dispatched")
	})
}

func TestRuntimeCase_R04_StopAfterToolCalls(t *testing.T) {
	call := `{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"list_dir","arguments":"{\"path\":\".\"}"}}]},"finish_reason":null}]}`
	t.Run("stop after the call", func(t *testing.T) {
		f := openaitest.New(t)
		f.Enqueue(openaitest.Response{Events: []string{call, `{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`, `[DONE]`}})
		o := run(t, newProvider(f), nil)
		require.NoError(t, o.Err)
		assertCalls(t, o.Calls, `call_1 list_dir {"path":"."}`)
		assert.Equal(t, provider.StopToolUse, o.Result.Stop)
	})
	t.Run("call and tool_calls in the same chunk", func(t *testing.T) {
		f := openaitest.New(t)
		f.Enqueue(openaitest.Response{Events: []string{
			`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"list_dir","arguments":"{\"path\":\".\"}"}}]},"finish_reason":"tool_calls"}]}`,
			`[DONE]`}})
		o := run(t, newProvider(f), nil)
		require.NoError(t, o.Err)
		assertCalls(t, o.Calls, `call_1 list_dir {"path":"."}`)
		assert.Equal(t, provider.StopToolUse, o.Result.Stop)
	})
	t.Run("length wins and the half call is not delivered", func(t *testing.T) {
		f := openaitest.New(t)
		f.Enqueue(openaitest.Response{Events: []string{
			`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"list_dir","arguments":"{\"path\":"}}]},"finish_reason":null}]}`,
			`{"choices":[{"index":0,"delta":{},"finish_reason":"length"}]}`,
			`[DONE]`}})
		o := run(t, newProvider(f), nil)
		require.NoError(t, o.Err)
		assert.Equal(t, provider.StopMaxTokens, o.Result.Stop)
		assert.Empty(t, o.Calls)
	})
}

func TestRuntimeCase_R05_UsageInAChunkWithoutChoices(t *testing.T) {
	hi := `{"choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":null}],"usage":null}`
	stop := `{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":null}`
	for name, tc := range map[string]struct {
		events []string
		usage  provider.Usage
	}{
		"choices empty": {[]string{hi, stop, `{"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":3,"total_tokens":15}}`, `[DONE]`},
			provider.Usage{InputTokens: 12, OutputTokens: 3, Reported: true}},
		"choices null": {[]string{hi, stop, `{"choices":null,"usage":{"prompt_tokens":12,"completion_tokens":3,"total_tokens":15}}`, `[DONE]`},
			provider.Usage{InputTokens: 12, OutputTokens: 3, Reported: true}},
		"usage on the finish chunk": {[]string{hi, `{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":12,"completion_tokens":3,"total_tokens":15}}`, `[DONE]`},
			provider.Usage{InputTokens: 12, OutputTokens: 3, Reported: true}},
		"no usage at all": {[]string{hi, stop, `[DONE]`}, provider.Usage{}},
	} {
		t.Run(name, func(t *testing.T) {
			f := openaitest.New(t)
			f.Enqueue(openaitest.Response{Events: tc.events})
			o := run(t, newProvider(f), nil)
			require.NoError(t, o.Err)
			assert.Equal(t, "hi", o.Text)
			assert.Equal(t, tc.usage, o.Result.Usage)
			var body struct {
				StreamOptions map[string]any `json:"stream_options"`
			}
			req := f.StreamRequests()[0]
			require.NoError(t, req.Decode(&body))
			assert.Equal(t, map[string]any{"include_usage": true}, body.StreamOptions)
		})
	}
}

func TestRuntimeCase_R06_CommentsAndRetryBlocksBeforeData(t *testing.T) {
	f := openaitest.New(t)
	f.Enqueue(openaitest.Response{Body: ": OPENROUTER PROCESSING\n\n" +
		"retry: 3000\n\n" +
		`data:{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"ok"},"finish_reason":null}]}` + "\n\n" +
		`data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n" +
		"data: [DONE]\n\n"})
	o := run(t, newProvider(f), nil)
	require.NoError(t, o.Err)
	assert.Equal(t, "ok", o.Text)
	assert.Equal(t, provider.StopEndTurn, o.Result.Stop)
}

func TestRuntimeCase_R07_ErrorObjectInsideA200Stream(t *testing.T) {
	for name, ev := range map[string]string{
		"data event":  `{"error":{"message":"Internal server error","type":"server_error","code":500}}`,
		"event error": "event: error\n" + `data: {"error":{"message":"Internal server error","type":"server_error","code":500}}`,
	} {
		t.Run(name, func(t *testing.T) {
			f := openaitest.New(t)
			f.Enqueue(openaitest.Response{Events: []string{`{"choices":[{"index":0,"delta":{"content":"Part"},"finish_reason":null}]}`, ev}, Abort: true})
			o := run(t, provider.WithRetry(newProvider(f), provider.RetryPolicy{MaxRetries: 3, BaseDelay: time.Millisecond}), nil)
			e := perr(t, o.Err)
			assert.Contains(t, e.Error(), "Internal server error", "the server's message")
			assert.True(t, e.Streamed)
			assert.Equal(t, "Part", o.Text)
			assert.Len(t, f.StreamRequests(), 1, "no retry: a token was already streamed")
		})
	}
}

func TestRuntimeCase_R08_ReasoningContentOrReasoning(t *testing.T) {
	rest := []string{`{"choices":[{"index":0,"delta":{"content":"Done."}}]}`, `{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`, `[DONE]`}
	for name, first := range map[string]string{
		"A reasoning_content": `{"choices":[{"index":0,"delta":{"reasoning_content":"Check the file first."}}]}`,
		"B reasoning":         `{"choices":[{"index":0,"delta":{"reasoning":"Check the file first.","content":""}}]}`,
		"C both":              `{"choices":[{"index":0,"delta":{"reasoning_content":"Check the file first.","reasoning":"Check the file first."}}]}`,
	} {
		t.Run(name, func(t *testing.T) {
			f := openaitest.New(t)
			f.Enqueue(openaitest.Response{Events: append([]string{first}, rest...)})
			o := run(t, newProvider(f), nil)
			require.NoError(t, o.Err)
			assert.Equal(t, []string{"thinking", "text"}, o.Kinds, "one thinking piece; content \"\" opens no text")
			assert.Equal(t, "Check the file first.", o.Thinking)
			assert.Equal(t, "Done.", o.Text)
		})
	}
	t.Run("not replayed as content", func(t *testing.T) {
		f := openaitest.New(t)
		f.Enqueue(openaitest.Reply("ok", 1, 1))
		o := run(t, newProvider(f), &provider.Request{Model: "m", Messages: []provider.Message{
			{Role: provider.RoleUser, Text: "a"}, {Role: provider.RoleAssistant, Thinking: "Check the file first.", Text: "Done."}, {Role: provider.RoleUser, Text: "b"}}})
		require.NoError(t, o.Err)
		assert.NotContains(t, string(f.StreamRequests()[0].Body), "Check the file first.")
	})
}

func TestRuntimeCase_R09_ContextOverflow400s(t *testing.T) {
	for i, body := range []string{
		`{"error":{"message":"This model's maximum context length is 8192 tokens. However, you requested 1024 output tokens and your prompt contains at least 7169 input tokens, for a total of at least 8193 tokens. Please reduce the length of the input prompt or the number of requested output tokens.","type":"BadRequestError","param":"input_tokens","code":400}}`,
		`{"error":{"code":400,"message":"request (9000 tokens) exceeds the available context size (8192 tokens), try increasing it","type":"exceed_context_size_error"}}`,
		`{"error":{"message":"Your input exceeds the context window of this model.","type":"invalid_request_error","code":"context_length_exceeded"}}`,
	} {
		f := openaitest.New(t)
		f.Enqueue(openaitest.Response{Status: 400, Body: body}, openaitest.Reply("never", 1, 1))
		o := run(t, provider.WithRetry(newProvider(f), provider.RetryPolicy{MaxRetries: 3, BaseDelay: time.Millisecond}), nil)
		e := perr(t, o.Err)
		assert.Equal(t, provider.KindContextTooLong, e.Kind, "body %d", i+1)
		assert.Contains(t, e.Error(), "context too long")
		assert.Len(t, f.StreamRequests(), 1, "body %d: exactly one request", i+1)
	}
}

func TestRuntimeCase_R10_RetryAfterAndOneRetryLayer(t *testing.T) {
	limited := func(h map[string]string) openaitest.Response {
		r := openaitest.Response{Status: 429, Header: h, Body: `{"error":{"message":"Rate limit reached","type":"rate_limit_error"}}`}
		return r
	}
	pol := provider.RetryPolicy{MaxRetries: 3, BaseDelay: 10 * time.Millisecond, MaxDelay: 40 * time.Millisecond, MaxRetryAfter: 60 * time.Second}
	gaps := func(f *openaitest.Server) []time.Duration {
		rs := f.StreamRequests()
		var g []time.Duration
		for i := 1; i < len(rs); i++ {
			g = append(g, rs[i].At.Sub(rs[i-1].At))
		}
		return g
	}
	t.Run("Retry-After 2 twice", func(t *testing.T) {
		t.Parallel()
		f := openaitest.New(t)
		f.Enqueue(limited(map[string]string{"Retry-After": "2"}), limited(map[string]string{"Retry-After": "2"}), openaitest.Reply("answer", 1, 1))
		o := run(t, provider.WithRetry(newProvider(f), pol), nil)
		require.NoError(t, o.Err)
		assert.Equal(t, "answer", o.Text, "the answer once")
		g := gaps(f)
		require.Len(t, g, 2, "exactly 3 requests")
		for _, d := range g {
			assert.GreaterOrEqual(t, d, 2*time.Second)
		}
	})
	t.Run("Retry-After as an HTTP date", func(t *testing.T) {
		t.Parallel()
		f := openaitest.New(t)
		f.Enqueue(limited(map[string]string{"Retry-After": time.Now().Add(2 * time.Second).UTC().Format(http.TimeFormat)}), openaitest.Reply("answer", 1, 1))
		o := run(t, provider.WithRetry(newProvider(f), pol), nil)
		require.NoError(t, o.Err)
		g := gaps(f)
		require.Len(t, g, 1)
		assert.GreaterOrEqual(t, g[0], time.Second, "an HTTP date has second precision")
	})
	t.Run("retry-after-ms", func(t *testing.T) {
		t.Parallel()
		f := openaitest.New(t)
		f.Enqueue(limited(map[string]string{"retry-after-ms": "1500"}), openaitest.Reply("answer", 1, 1))
		o := run(t, provider.WithRetry(newProvider(f), pol), nil)
		require.NoError(t, o.Err)
		g := gaps(f)
		require.Len(t, g, 1)
		assert.GreaterOrEqual(t, g[0], 1500*time.Millisecond)
	})
	t.Run("Retry-After 3600 fails at once naming the wait", func(t *testing.T) {
		t.Parallel()
		f := openaitest.New(t)
		f.Enqueue(limited(map[string]string{"Retry-After": "3600"}), openaitest.Reply("never", 1, 1))
		start := time.Now()
		o := run(t, provider.WithRetry(newProvider(f), pol), nil)
		e := perr(t, o.Err)
		assert.Less(t, time.Since(start), time.Second)
		assert.Contains(t, e.Error(), "1h0m0s")
		assert.Len(t, f.StreamRequests(), 1)
	})
	t.Run("four 500s", func(t *testing.T) {
		t.Parallel()
		f := openaitest.New(t)
		for range 4 {
			f.Enqueue(openaitest.Error(500, "server_error", "The server had an error"))
		}
		f.Enqueue(openaitest.Reply("never", 1, 1))
		o := run(t, provider.WithRetry(newProvider(f), pol), nil)
		e := perr(t, o.Err)
		assert.Equal(t, 500, e.Status)
		assert.Len(t, f.StreamRequests(), 4, "1 + 3: the SDK does not retry on its own")
	})
}
