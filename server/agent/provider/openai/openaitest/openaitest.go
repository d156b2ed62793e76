// Package openaitest is a local fake of an OpenAI-compatible Chat Completions endpoint for tests:
// it streams queued responses in the real wire format (one "data: <chunk>" per event, "data:
// [DONE]" at the end) and records every request. Other packages' tests (the runtime's end-to-end
// tests) use it as the model endpoint.
//
//	f := openaitest.New(t)
//	f.Enqueue(openaitest.Reply("Hello.", 12, 3))
//	p := openai.New(openai.Config{BaseURL: f.BaseURL(), APIKey: provider.NewSecret("sk-test")})
//
// Events are written exactly as given (the forms of runtime-cases.md): a JSON chunk gets the
// fields every chunk needs but cases leave out ("id","object","created","model") when it has no
// "object"; "[DONE]" is the end marker; lines starting with "data:", "event:", "retry:" or ":" are
// raw SSE.
package openaitest

import (
	"fmt"
	"strings"
	"testing"

	"github.com/zidane-server/zidane/server/agent/provider/internal/fakeapi"
)

// Response is one queued answer: a stream of Events, or a Status with a Body (see fakeapi).
type Response = fakeapi.Response

// Request is a recorded request: Method, Path, Header, Body, At; JSON() and Decode(v).
type Request = fakeapi.Request

// Server is the fake endpoint: Enqueue, SetFallback, Validate, SetModels, Requests,
// StreamRequests, Pending, URL, Close.
type Server struct{ *fakeapi.Server }

// StreamPath is the path of a model request.
const StreamPath = "/v1/chat/completions"

// New starts a fake endpoint that t's cleanup closes.
func New(t testing.TB) *Server {
	s := Start()
	t.Cleanup(s.Close)
	return s
}

// Start starts a fake endpoint; the caller closes it.
func Start() *Server {
	return &Server{fakeapi.Start(fakeapi.API{
		StreamPath: StreamPath,
		Fill:       fill,
		ErrorBody: func(status int, msg string) string {
			return fakeapi.Compact(map[string]any{"error": map[string]any{"message": msg, "type": "invalid_request_error", "code": status}})
		},
		Models: func(ids []string) string {
			data := make([]map[string]any, len(ids))
			for i, id := range ids {
				data[i] = map[string]any{"id": id, "object": "model", "created": 1, "owned_by": "fake"}
			}
			return fakeapi.Compact(map[string]any{"object": "list", "data": data})
		},
	})}
}

// BaseURL is the URL to configure as the provider's base URL (OPENAI_BASE_URL): URL + "/v1".
func (s *Server) BaseURL() string { return s.URL() + "/v1" }

// fill adds the chunk fields the cases leave out to a chunk without "object" (not to errors).
func fill(ev string) string {
	if strings.HasPrefix(ev, `{"error"`) || strings.Contains(ev, `"object"`) {
		return ev
	}
	head := `{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m"`
	if strings.TrimSpace(ev[1:]) == "}" {
		return head + "}"
	}
	return head + "," + ev[1:]
}

// Text is a chunk with a content delta.
func Text(s string) string {
	return fmt.Sprintf(`{"choices":[{"index":0,"delta":{"content":%s},"finish_reason":null}]}`, fakeapi.Compact(s))
}

// Reasoning is a chunk with a reasoning_content delta (llama.cpp, DeepSeek).
func Reasoning(s string) string {
	return fmt.Sprintf(`{"choices":[{"index":0,"delta":{"reasoning_content":%s},"finish_reason":null}]}`, fakeapi.Compact(s))
}

// ToolCall is a chunk opening tool call index with id and name and a first piece of arguments.
func ToolCall(index int, id, name, args string) string {
	return fmt.Sprintf(`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":%d,"id":%s,"type":"function","function":{"name":%s,"arguments":%s}}]},"finish_reason":null}]}`,
		index, fakeapi.Compact(id), fakeapi.Compact(name), fakeapi.Compact(args))
}

// ToolArgs is a chunk continuing tool call index with a piece of arguments.
func ToolArgs(index int, args string) string {
	return fmt.Sprintf(`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":%d,"function":{"arguments":%s}}]},"finish_reason":null}]}`, index, fakeapi.Compact(args))
}

// Finish is the chunk carrying finish_reason ("stop", "tool_calls", "length" …).
func Finish(reason string) string {
	return fmt.Sprintf(`{"choices":[{"index":0,"delta":{},"finish_reason":%q}]}`, reason)
}

// Usage is the last chunk of a stream with stream_options.include_usage: no choices, the usage.
func Usage(in, out int64) string {
	return fmt.Sprintf(`{"choices":[],"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}}`, in, out, in+out)
}

// Done is the end-of-stream marker.
const Done = "[DONE]"

// Reply is a whole answer: text as one content chunk per word, "stop", usage, [DONE].
func Reply(text string, in, out int64) Response {
	var evs []string
	for _, w := range strings.SplitAfter(text, " ") {
		if w != "" {
			evs = append(evs, Text(w))
		}
	}
	return Response{Events: append(evs, Finish("stop"), Usage(in, out), Done)}
}

// Call is one tool call of CallReply.
type Call struct{ ID, Name, Args string }

// CallReply is a turn that calls tools: each call's arguments split in two chunks, then
// "tool_calls", usage, [DONE].
func CallReply(in, out int64, calls ...Call) Response {
	var evs []string
	for i, c := range calls {
		half := len(c.Args) / 2
		evs = append(evs, ToolCall(i, c.ID, c.Name, c.Args[:half]), ToolArgs(i, c.Args[half:]))
	}
	return Response{Events: append(evs, Finish("tool_calls"), Usage(in, out), Done)}
}

// Error is an HTTP error response with the API's error object.
func Error(status int, typ, msg string) Response {
	return Response{Status: status, Body: fakeapi.Compact(map[string]any{"error": map[string]any{"message": msg, "type": typ}})}
}
