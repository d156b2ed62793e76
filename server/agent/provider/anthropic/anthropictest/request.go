package anthropictest

import (
	"encoding/json"
	"fmt"
)

// MessagesRequest is a decoded Messages request, for assertions.
type MessagesRequest struct {
	Model     string `json:"model"`
	MaxTokens int    `json:"max_tokens"`
	Stream    bool   `json:"stream"`
	System    []struct {
		Text string `json:"text"`
	} `json:"system"`
	Messages []Message `json:"messages"`
	Tools    []struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		InputSchema json.RawMessage `json:"input_schema"`
	} `json:"tools"`
}

// Message is one message of a request.
type Message struct {
	Role    string  `json:"role"`
	Content []Block `json:"content"`
}

// Block is a content block of a message.
type Block struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	IsError   bool            `json:"is_error"`
	Content   json.RawMessage `json:"content"`
	// Source is an image block's {"type":"base64","media_type","data"}.
	Source *struct {
		Type      string `json:"type"`
		MediaType string `json:"media_type"`
		Data      string `json:"data"`
	} `json:"source"`
}

// Messages decodes a recorded model request.
func Messages(r Request) (MessagesRequest, error) {
	var m MessagesRequest
	if err := r.Decode(&m); err != nil {
		return m, fmt.Errorf("anthropictest: not a messages request: %w", err)
	}
	return m, nil
}

// CheckHistory refuses a conversation as the real API does (use with Server.Validate; runtime
// cases R14, R15): the first message is the user's; roles alternate; nothing but tool_use follows
// a tool_use in an assistant message; the next user message starts with a tool_result for every
// tool_use of the assistant message before it; every tool_result answers a tool_use of the
// assistant message right before it.
func CheckHistory(r *Request) error {
	m, err := Messages(*r)
	if err != nil {
		return err
	}
	var uses map[string]bool // tool_use ids of the previous assistant message
	for i, msg := range m.Messages {
		if i == 0 && msg.Role != "user" {
			return fmt.Errorf("messages.0: the first message must use the \"user\" role")
		}
		if i > 0 && msg.Role == m.Messages[i-1].Role {
			return fmt.Errorf("messages.%d: roles must alternate between \"user\" and \"assistant\"", i)
		}
		switch msg.Role {
		case "assistant":
			uses = map[string]bool{}
			for j, b := range msg.Content {
				if b.Type == "tool_use" {
					uses[b.ID] = true
				} else if len(uses) > 0 {
					return fmt.Errorf("messages.%d.content.%d: content cannot follow a `tool_use` block in the same message", i, j)
				}
			}
		case "user":
			answered := map[string]bool{}
			results := true
			for j, b := range msg.Content {
				if b.Type != "tool_result" {
					results = false
					continue
				}
				if !results {
					return fmt.Errorf("messages.%d.content.%d: `tool_result` blocks must come first in the message", i, j)
				}
				if !uses[b.ToolUseID] {
					return fmt.Errorf("messages.%d.content.%d: unexpected `tool_use_id` found in `tool_result` blocks: %s. Each `tool_result` block must have a corresponding `tool_use` block in the previous message.", i, j, b.ToolUseID)
				}
				answered[b.ToolUseID] = true
			}
			for id := range uses {
				if !answered[id] {
					return fmt.Errorf("messages.%d: `tool_use` ids were found without `tool_result` blocks immediately after: %s. Each `tool_use` block must have a corresponding `tool_result` block in the next message.", i, id)
				}
			}
			uses = nil
		}
	}
	if len(m.Messages) > 0 && m.Messages[len(m.Messages)-1].Role != "user" {
		return fmt.Errorf("the last message must use the \"user\" role")
	}
	return nil
}
