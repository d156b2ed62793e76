package openaitest

import (
	"encoding/json"
	"fmt"
)

// ChatRequest is a decoded Chat Completions request, for assertions.
type ChatRequest struct {
	Model               string          `json:"model"`
	Messages            []ChatMessage   `json:"messages"`
	Tools               []ChatTool      `json:"tools"`
	Stream              bool            `json:"stream"`
	StreamOptions       map[string]any  `json:"stream_options"`
	MaxTokens           int             `json:"max_tokens"`
	MaxCompletionTokens int             `json:"max_completion_tokens"`
	Raw                 json.RawMessage `json:"-"`
}

// ChatMessage is one message of a request. Content is its text: the string the provider sends,
// or the text parts of a content array (a user message with images), whose parts are in Parts.
type ChatMessage struct {
	Role       string         `json:"role"`
	Content    string         `json:"content"`
	Parts      []ChatPart     `json:"-"`
	ToolCalls  []ChatToolCall `json:"tool_calls"`
	ToolCallID string         `json:"tool_call_id"`
}

// ChatPart is one part of a content array: {"type":"text","text"} or
// {"type":"image_url","image_url":{"url"}}.
type ChatPart struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	ImageURL struct {
		URL string `json:"url"`
	} `json:"image_url"`
}

// UnmarshalJSON takes content as a string or as an array of parts.
func (m *ChatMessage) UnmarshalJSON(b []byte) error {
	type plain ChatMessage
	var raw struct {
		plain
		Content json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	*m = ChatMessage(raw.plain)
	if len(raw.Content) == 0 || raw.Content[0] != '[' {
		if len(raw.Content) > 0 && string(raw.Content) != "null" {
			return json.Unmarshal(raw.Content, &m.Content)
		}
		return nil
	}
	if err := json.Unmarshal(raw.Content, &m.Parts); err != nil {
		return err
	}
	for _, p := range m.Parts {
		if p.Type == "text" {
			m.Content += p.Text
		}
	}
	return nil
}

// ChatToolCall is an assistant message's tool call.
type ChatToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// ChatTool is an offered tool.
type ChatTool struct {
	Type     string `json:"type"`
	Function struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
	} `json:"function"`
}

// Chat decodes a recorded model request.
func Chat(r Request) (ChatRequest, error) {
	var c ChatRequest
	if err := r.Decode(&c); err != nil {
		return c, fmt.Errorf("openaitest: not a chat request: %w", err)
	}
	c.Raw = r.Body
	return c, nil
}

// CheckHistory refuses a conversation the real API refuses (use with Server.Validate; runtime
// cases R14, R15): the first message after the system prompt is the user's; each tool message
// answers a call of the nearest preceding assistant message; each call has its result before the
// next user or assistant message.
func CheckHistory(r *Request) error {
	c, err := Chat(*r)
	if err != nil {
		return err
	}
	open := map[string]bool{}  // calls of the last assistant message without a result yet
	calls := map[string]bool{} // calls of the last assistant message
	seenFirst := false
	for i, m := range c.Messages {
		if m.Role == "system" || m.Role == "developer" {
			continue
		}
		if !seenFirst {
			seenFirst = true
			if m.Role != "user" {
				return fmt.Errorf("messages[%d]: the first message after the system prompt must be the user's, not %q", i, m.Role)
			}
		}
		switch m.Role {
		case "tool":
			if !calls[m.ToolCallID] {
				return fmt.Errorf("messages[%d]: messages with role 'tool' must be a response to a preceding message with 'tool_calls' (tool_call_id %q)", i, m.ToolCallID)
			}
			delete(open, m.ToolCallID)
		case "user", "assistant":
			for id := range open {
				return fmt.Errorf("messages[%d]: an assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'; missing %q", i, id)
			}
			calls = map[string]bool{}
			for _, tc := range m.ToolCalls {
				calls[tc.ID], open[tc.ID] = true, true
			}
		}
	}
	for id := range open {
		return fmt.Errorf("the last assistant message's tool call %q has no tool message", id)
	}
	return nil
}
