package provider

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// contextOverflowMarks are lower-case fragments of the context-overflow messages of OpenAI,
// Anthropic and the compatible servers (vLLM, llama.cpp, Ollama, LM Studio, OpenRouter); runtime
// case R09.
var contextOverflowMarks = []string{
	"context_length_exceeded",
	"maximum context length",
	"context length",
	"context window",
	"exceed_context_size",
	"exceeds the available context",
	"context size",
	"prompt is too long",
	"input is too long",
	"too many tokens",
	"reduce the length of the",
}

// IsContextOverflow reports whether an API error's text (message, type or code) says the request
// does not fit the model's context.
func IsContextOverflow(texts ...string) bool {
	for _, t := range texts {
		t = strings.ToLower(t)
		for _, m := range contextOverflowMarks {
			if strings.Contains(t, m) {
				return true
			}
		}
	}
	return false
}

// RetryAfter reads the wait a response asks for: OpenAI's retry-after-ms, then Retry-After as
// seconds (a decimal number) or as an HTTP date (relative to now). 0 when there is none or it is
// unreadable or in the past.
func RetryAfter(h http.Header, now time.Time) time.Duration {
	if h == nil {
		return 0
	}
	if v := strings.TrimSpace(h.Get("Retry-After-Ms")); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms > 0 {
			return time.Duration(ms * float64(time.Millisecond))
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		if s <= 0 {
			return 0
		}
		return time.Duration(s * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := t.Sub(now); d > 0 {
			return d
		}
	}
	return 0
}
