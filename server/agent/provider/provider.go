// Package provider is the model-provider contract of the agent runtime (issue 8, DESIGN "Agent
// runtime"): one Request (model, system prompt, the conversation, the tools' JSON Schemas, limits)
// streams back text, thinking and complete tool calls through a callback, and ends with a Result
// (usage and stop reason) or a classified *Error.
//
// Implementations live in sub-packages (scripted, openai, anthropic); config builds the registry
// that resolves "provider/model" ids. This package imports nothing of the transport and nothing
// outside the standard library.
package provider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Request is one model turn: everything a provider sends to its API.
type Request struct {
	// Model is the model's name without the "provider/" prefix, e.g. "gpt-4.1".
	Model string
	// System is the system prompt ("" for none).
	System string
	// Messages is the conversation so far, oldest first. Every assistant tool call has a tool
	// message answering it before the next user message (the runtime guarantees it).
	Messages []Message
	// Tools are the tools the model may call.
	Tools []Tool
	// MaxOutputTokens caps the answer's tokens; 0 means the provider's default.
	MaxOutputTokens int
}

// Role is a message's author.
type Role string

// The roles of a conversation.
const (
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleTool      Role = "tool"
)

// Message is one entry of the conversation.
type Message struct {
	Role Role
	// Text is the user's text, the assistant's text, or a tool result's content.
	Text string
	// Thinking is the assistant's reasoning (assistant only). Providers that cannot take it back
	// drop it; none replays it as answer text.
	Thinking string
	// ToolCalls are the calls the assistant made in this message (assistant only).
	ToolCalls []ToolCall
	// ToolCallID is the call this result answers (tool only).
	ToolCallID string
	// ToolName is the called tool's name (tool only).
	ToolName string
	// IsError marks a tool result that reports a failure (tool only).
	IsError bool
	// Images are the images the user attached (user only; issue 24). The runtime sends them only
	// to a provider that TakesImages; text files arrive inside Text.
	Images []Image
}

// Image is an image attached to a user message: its bytes, decoded.
type Image struct {
	Name string
	// MediaType is image/png, image/jpeg, image/gif or image/webp.
	MediaType string
	Data      []byte
}

// ImageTaker is implemented by providers whose models take images in user messages.
type ImageTaker interface {
	// TakesImages reports whether the named model (without "provider/") takes images.
	TakesImages(model string) bool
}

// TakesImages reports whether p's model takes images: p implements ImageTaker and says so.
func TakesImages(p Provider, model string) bool {
	it, ok := p.(ImageTaker)
	return ok && it.TakesImages(model)
}

// ToolCall is one complete call of a tool by the model.
type ToolCall struct {
	// ID is the provider's call id, e.g. "call_abc" or "toolu_01…".
	ID string
	// Name is the tool's name.
	Name string
	// Arguments is a JSON object; "{}" when the model sent none.
	Arguments json.RawMessage
}

// Tool is a tool offered to the model.
type Tool struct {
	Name        string
	Description string
	// InputSchema is the JSON Schema of the arguments (an object schema).
	InputSchema json.RawMessage
}

// Usage is a turn's token count as the provider reported it.
type Usage struct {
	InputTokens  int64
	OutputTokens int64
	// Reported is false when the provider sent no usage; the counts are then 0 and must not be
	// presented as the provider's.
	Reported bool
}

// Event is one piece of a streamed turn: *TextDelta, *ThinkingDelta, *ToolInputDelta or
// *ToolCallDone.
type Event interface{ isEvent() }

// TextDelta is a piece of the answer text. Never empty.
type TextDelta struct{ Text string }

// ThinkingDelta is a piece of the model's reasoning. Never empty.
type ThinkingDelta struct{ Text string }

// ToolInputDelta reports a piece of a tool call's arguments as it arrives: Bytes is its length.
// The call itself comes whole as a ToolCallDone; the runtime counts these pieces against its
// per-turn limits, so arguments that never end are cut like text that never ends. Never 0.
type ToolInputDelta struct{ Bytes int }

// ToolCallDone is one complete tool call, arguments assembled and checked to be a JSON object.
// Calls are delivered after the model's stop reason is known, in the order the model made them;
// a call cut by the output limit is never delivered.
type ToolCallDone struct{ Call ToolCall }

func (*TextDelta) isEvent()      {}
func (*ThinkingDelta) isEvent()  {}
func (*ToolInputDelta) isEvent() {}
func (*ToolCallDone) isEvent()   {}

// StopReason says why a turn ended.
type StopReason string

// The stop reasons.
const (
	// StopEndTurn: the answer is complete.
	StopEndTurn StopReason = "end_turn"
	// StopToolUse: the model called one or more tools (whatever finish reason the server sent,
	// as soon as at least one complete call arrived); run them and send another request.
	StopToolUse StopReason = "tool_use"
	// StopMaxTokens: the output limit cut the answer. An error for the run: the answer was cut,
	// and no tool call of that turn was delivered.
	StopMaxTokens StopReason = "max_tokens"
	// StopOther: any other reason the server gave (e.g. a content filter).
	StopOther StopReason = "other"
)

// Result ends a successful turn.
type Result struct {
	Usage Usage
	Stop  StopReason
}

// Provider is a model API.
type Provider interface {
	// Name is the provider's name: "openai", "anthropic", "scripted", or a configured name.
	Name() string
	// Stream sends req and calls on for each event, in order, from the calling goroutine. An
	// error returned by on ends the stream and is returned as is. Errors of the API are *Error;
	// a cancelled ctx gives an error for which errors.Is(err, ctx.Err()) holds.
	Stream(ctx context.Context, req *Request, on func(Event) error) (Result, error)
	// Models lists the models the provider offers.
	Models(ctx context.Context) ([]Model, error)
}

// Model is a model a provider offers.
type Model struct {
	// ID is "provider/model", the form clients use.
	ID string
	// Provider is the provider's name; Name the model's name at the provider.
	Provider, Name string
	// ContextWindow is the model's context in tokens; 0 when unknown.
	ContextWindow int
}

// ErrorKind classifies a provider failure.
type ErrorKind string

// The error kinds.
const (
	// KindRetryable: 408, 409, 429, 5xx, 529, overloaded: the same request may succeed later.
	KindRetryable ErrorKind = "retryable"
	// KindAuth: 401/403: the key is missing, wrong or not allowed (EnvVar names the variable).
	KindAuth ErrorKind = "auth"
	// KindContextTooLong: the conversation plus the requested output exceeds the model's context.
	KindContextTooLong ErrorKind = "context_too_long"
	// KindBadRequest: the API refused the request (400, 404, 422 …).
	KindBadRequest ErrorKind = "bad_request"
	// KindBadResponse: the API answered something unusable (e.g. a tool call without a name, or
	// arguments that are not a JSON object).
	KindBadResponse ErrorKind = "bad_response"
	// KindOther: anything else (a connection that failed, a stream cut short …).
	KindOther ErrorKind = "other"
)

// Error is a classified provider failure. Its text never contains an API key.
type Error struct {
	Kind ErrorKind
	// Provider is the provider's name, for the message.
	Provider string
	// Status is the HTTP status, 0 when there was none (a stream that failed after 200).
	Status int
	// RetryAfter is the wait the server asked for (Retry-After, retry-after-ms); 0 when none.
	RetryAfter time.Duration
	// Message is the server's message, or ours.
	Message string
	// EnvVar is, for KindAuth, the environment variable that holds (or should hold) the key.
	EnvVar string
	// Streamed is true when the failure came after the first streamed event: the turn cannot be
	// retried without repeating output.
	Streamed bool
}

// Error returns one line: the provider, the status, the server's message, and what to do.
func (e *Error) Error() string {
	s := e.Provider
	if s == "" {
		s = "provider"
	}
	if e.Status != 0 {
		s += fmt.Sprintf(" (HTTP %d)", e.Status)
	}
	s += ": "
	switch e.Kind {
	case KindAuth:
		s += "authentication failed: " + e.Message
		if e.EnvVar != "" {
			s += "; set " + e.EnvVar + " to a valid API key"
		}
		return s
	case KindContextTooLong:
		return s + "context too long: " + e.Message
	case KindRetryable:
		s += "temporarily unavailable: " + e.Message
	default:
		s += e.Message
	}
	if e.Streamed {
		s += " (the answer was cut: the stream failed after it had started)"
	}
	return s
}

// AsError returns err's *Error, if it has one.
func AsError(err error) (*Error, bool) {
	var e *Error
	if errors.As(err, &e) {
		return e, true
	}
	return nil, false
}

// ClassifyStatus maps an HTTP status to a kind: 401/403 auth, 408/409/429/5xx/529 retryable,
// 413 context too long, other 4xx bad request.
func ClassifyStatus(status int) ErrorKind {
	switch {
	case status == 401 || status == 403:
		return KindAuth
	case status == 408 || status == 409 || status == 429 || status >= 500:
		return KindRetryable
	case status == 413:
		return KindContextTooLong
	case status >= 400:
		return KindBadRequest
	}
	return KindOther
}
