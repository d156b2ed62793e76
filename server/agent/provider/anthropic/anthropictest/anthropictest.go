// Package anthropictest is a local fake of Anthropic's Messages API for tests: it streams queued
// responses in the real wire format ("event: <type>" + "data: <json>" per event) and records every
// request. Other packages' tests use it as the model endpoint.
//
//	f := anthropictest.New(t)
//	f.Enqueue(anthropictest.Reply("Hello.", 12, 3))
//	p := anthropic.New(anthropic.Config{BaseURL: f.URL(), APIKey: provider.NewSecret("sk-ant-test")})
//
// Events are written as given: a JSON object is sent as "event: <its type>" + "data: <json>"; lines
// that already start with "event:", "data:" or ":" are raw SSE.
package anthropictest

import (
	"encoding/json"
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
// StreamRequests, Pending, URL (the base URL to configure), Close.
type Server struct{ *fakeapi.Server }

// StreamPath is the path of a model request.
const StreamPath = "/v1/messages"

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
		Fill:       nil,
		Event:      eventName,
		ErrorBody: func(status int, msg string) string {
			typ := "invalid_request_error"
			switch status {
			case 401:
				typ = "authentication_error"
			case 404:
				typ = "not_found_error"
			}
			return ErrorBody(typ, msg)
		},
		Models: func(ids []string) string {
			data := make([]map[string]any, len(ids))
			for i, id := range ids {
				data[i] = map[string]any{"type": "model", "id": id, "display_name": id, "created_at": "2026-01-01T00:00:00Z", "max_input_tokens": 200000}
			}
			first, last := "", ""
			if len(ids) > 0 {
				first, last = ids[0], ids[len(ids)-1]
			}
			return fakeapi.Compact(map[string]any{"data": data, "has_more": false, "first_id": first, "last_id": last})
		},
	})}
}

// eventName is a JSON event's "type", for its "event:" line.
func eventName(ev string) string {
	var t struct {
		Type string `json:"type"`
	}
	_ = json.Unmarshal([]byte(ev), &t)
	return t.Type
}

// ErrorBody is the API's error object.
func ErrorBody(typ, msg string) string {
	return fakeapi.Compact(map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": msg}})
}

// Error is an HTTP error response with the API's error object.
func Error(status int, typ, msg string) Response {
	return Response{Status: status, Body: ErrorBody(typ, msg)}
}

// MessageStart opens a message with the input usage.
func MessageStart(in int64) string {
	return fmt.Sprintf(`{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"claude-x","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":%d,"output_tokens":1}}}`, in)
}

// Ping is the keep-alive event.
const Ping = `{"type":"ping"}`

// TextStart opens text block index.
func TextStart(index int) string {
	return fmt.Sprintf(`{"type":"content_block_start","index":%d,"content_block":{"type":"text","text":""}}`, index)
}

// TextDelta is a piece of text block index.
func TextDelta(index int, s string) string {
	return fmt.Sprintf(`{"type":"content_block_delta","index":%d,"delta":{"type":"text_delta","text":%s}}`, index, fakeapi.Compact(s))
}

// ThinkingStart opens thinking block index.
func ThinkingStart(index int) string {
	return fmt.Sprintf(`{"type":"content_block_start","index":%d,"content_block":{"type":"thinking","thinking":"","signature":""}}`, index)
}

// ThinkingDelta is a piece of thinking block index.
func ThinkingDelta(index int, s string) string {
	return fmt.Sprintf(`{"type":"content_block_delta","index":%d,"delta":{"type":"thinking_delta","thinking":%s}}`, index, fakeapi.Compact(s))
}

// SignatureDelta ends a thinking block's content with its signature.
func SignatureDelta(index int, sig string) string {
	return fmt.Sprintf(`{"type":"content_block_delta","index":%d,"delta":{"type":"signature_delta","signature":%q}}`, index, sig)
}

// ToolStart opens tool_use block index.
func ToolStart(index int, id, name string) string {
	return fmt.Sprintf(`{"type":"content_block_start","index":%d,"content_block":{"type":"tool_use","id":%q,"name":%q,"input":{}}}`, index, id, name)
}

// InputDelta is a piece of a tool_use block's input JSON.
func InputDelta(index int, partial string) string {
	return fmt.Sprintf(`{"type":"content_block_delta","index":%d,"delta":{"type":"input_json_delta","partial_json":%s}}`, index, fakeapi.Compact(partial))
}

// BlockStop closes block index.
func BlockStop(index int) string {
	return fmt.Sprintf(`{"type":"content_block_stop","index":%d}`, index)
}

// MessageDelta carries the stop reason and the output usage.
func MessageDelta(stop string, out int64) string {
	return fmt.Sprintf(`{"type":"message_delta","delta":{"stop_reason":%q,"stop_sequence":null},"usage":{"output_tokens":%d}}`, stop, out)
}

// MessageStop ends the message.
const MessageStop = `{"type":"message_stop"}`

// StreamError is an "event: error" block (e.g. overloaded_error after HTTP 200).
func StreamError(typ, msg string) string { return "event: error\ndata: " + ErrorBody(typ, msg) }

// Reply is a whole answer: text as one delta per word, end_turn, the usage.
func Reply(text string, in, out int64) Response {
	evs := []string{MessageStart(in), TextStart(0)}
	for _, w := range strings.SplitAfter(text, " ") {
		if w != "" {
			evs = append(evs, TextDelta(0, w))
		}
	}
	return Response{Events: append(evs, BlockStop(0), MessageDelta("end_turn", out), MessageStop)}
}

// Call is one tool call of CallReply.
type Call struct{ ID, Name, Input string }

// CallReply is a turn that calls tools: each input split in two deltas, then tool_use.
func CallReply(in, out int64, calls ...Call) Response {
	evs := []string{MessageStart(in)}
	for i, c := range calls {
		half := len(c.Input) / 2
		evs = append(evs, ToolStart(i, c.ID, c.Name), InputDelta(i, c.Input[:half]), InputDelta(i, c.Input[half:]), BlockStop(i))
	}
	return Response{Events: append(evs, MessageDelta("tool_use", out), MessageStop)}
}
