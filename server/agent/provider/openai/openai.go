// Package openai is the provider for OpenAI's Chat Completions streaming API and every
// compatible endpoint (vLLM, llama.cpp's server, Ollama, LM Studio, OpenRouter …), through
// github.com/openai/openai-go/v3 (issue 8; runtime cases R01–R10).
//
// The SDK's own retries are off (provider.WithRetry is the one retry layer, R10). Streams are read
// leniently, as compatible servers differ: tool-call deltas without "index", several calls at the
// same index with distinct ids, a first call at index 1 (R01, R02); "stop" after tool calls (R04);
// usage in a last chunk with no choices, or none (R05); SSE comments and retry: blocks (R06, the
// SDK's decoder); an error object inside a 200 stream (R07); reasoning in "reasoning_content" or
// "reasoning" (R08); context-overflow 400s in each server's words (R09).
package openai

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	oa "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/shared"

	"github.com/zidane-server/zidane/server/agent/provider"
)

// DefaultBaseURL is OpenAI's API.
const DefaultBaseURL = "https://api.openai.com/v1"

// DefaultKeyEnv is the environment variable that holds the key of the default "openai" provider.
const DefaultKeyEnv = "OPENAI_API_KEY"

// Config configures one OpenAI-compatible endpoint.
type Config struct {
	// Name is the provider's name in model ids ("<name>/<model>"); default "openai".
	Name string
	// BaseURL is the API root including /v1; default DefaultBaseURL.
	BaseURL string
	// APIKey is sent as a bearer token; unset sends none (local servers).
	APIKey provider.Secret
	// KeyEnv names the environment variable the key comes from, for error messages; default
	// DefaultKeyEnv. It never holds the key itself.
	KeyEnv string
	// Models are the configured models, with their context windows; Models() adds what the
	// endpoint lists.
	Models []provider.Model
	// HTTPClient, when set, sends the requests (tests); default a client without a timeout (the
	// request's context bounds it).
	HTTPClient *http.Client
	// ModelsTTL is how long the endpoint's model list is cached; default one minute.
	ModelsTTL time.Duration
}

// Provider is an OpenAI-compatible provider. Safe for concurrent use.
type Provider struct {
	cfg    Config
	client oa.Client

	models *provider.ModelList
}

// New returns a provider for cfg.
func New(cfg Config) *Provider {
	if cfg.Name == "" {
		cfg.Name = "openai"
	}
	if cfg.BaseURL == "" {
		cfg.BaseURL = DefaultBaseURL
	}
	if cfg.KeyEnv == "" {
		cfg.KeyEnv = DefaultKeyEnv
	}
	hc := cfg.HTTPClient
	if hc == nil {
		hc = &http.Client{}
	}
	bounded := *hc // a turn's response is read within the runtime's bound (provider.WithBodyLimit)
	bounded.Transport = provider.LimitBodies(hc.Transport)
	hc = &bounded
	key := cfg.APIKey.Reveal()
	opts := []option.RequestOption{
		option.WithBaseURL(strings.TrimRight(cfg.BaseURL, "/") + "/"),
		option.WithAPIKey(key),
		option.WithHTTPClient(hc),
		option.WithMaxRetries(0), // one retry layer: provider.WithRetry (R10)
		// The SDK also reads OPENAI_* variables from the environment; this endpoint gets exactly
		// its own key and nothing else of the environment (no organization, project or headers).
		option.WithMiddleware(func(r *http.Request, next option.MiddlewareNext) (*http.Response, error) {
			r.Header.Del("OpenAI-Organization")
			r.Header.Del("OpenAI-Project")
			if key == "" {
				r.Header.Del("Authorization")
			} else {
				r.Header.Set("Authorization", "Bearer "+key)
			}
			return next(r)
		}),
	}
	return &Provider{cfg: cfg, client: oa.NewClient(opts...), models: &provider.ModelList{Provider: cfg.Name, Configured: cfg.Models, TTL: cfg.ModelsTTL}}
}

// Name returns the provider's name.
func (p *Provider) Name() string { return p.cfg.Name }

// TakesImages implements provider.ImageTaker: an OpenAI-compatible model is sent images as
// image_url parts (issue 24); a server whose model takes none answers with an error the run shows.
func (p *Provider) TakesImages(string) bool { return true }

// Models returns the configured models and those the endpoint's GET /models lists (cached for
// ModelsTTL). Configured context windows win; vLLM's max_model_len and the context_length of
// OpenRouter and LM Studio fill in the others. When the listing fails, the configured models
// come back with the error.
func (p *Provider) Models(ctx context.Context) ([]provider.Model, error) {
	return p.models.Get(ctx, func(ctx context.Context) ([]provider.Model, error) {
		page, err := p.client.Models.List(ctx)
		if err != nil {
			return nil, p.classify(ctx, err, false)
		}
		listed := make([]provider.Model, 0, len(page.Data))
		for _, m := range page.Data {
			w := 0
			for _, k := range []string{"max_model_len", "context_length", "context_window"} {
				if f, ok := m.JSON.ExtraFields[k]; ok {
					var n int
					if json.Unmarshal([]byte(f.Raw()), &n) == nil && n > 0 {
						w = n
						break
					}
				}
			}
			listed = append(listed, provider.Model{Name: m.ID, ContextWindow: w})
		}
		return listed, nil
	})
}

// params builds the Chat Completions request for req.
func (p *Provider) params(req *provider.Request) oa.ChatCompletionNewParams {
	msgs := make([]oa.ChatCompletionMessageParamUnion, 0, len(req.Messages)+1)
	if req.System != "" {
		msgs = append(msgs, oa.SystemMessage(req.System))
	}
	for _, m := range req.Messages {
		switch m.Role {
		case provider.RoleUser:
			if len(m.Images) == 0 {
				msgs = append(msgs, oa.UserMessage(m.Text))
				break
			}
			// Images as image_url parts holding data: URLs (the vision input every
			// compatible server that takes images reads), after the text.
			parts := []oa.ChatCompletionContentPartUnionParam{oa.TextContentPart(m.Text)}
			for _, im := range m.Images {
				parts = append(parts, oa.ImageContentPart(oa.ChatCompletionContentPartImageImageURLParam{
					URL: "data:" + im.MediaType + ";base64," + base64.StdEncoding.EncodeToString(im.Data)}))
			}
			msgs = append(msgs, oa.UserMessage(parts))
		case provider.RoleTool:
			msgs = append(msgs, oa.ToolMessage(m.Text, m.ToolCallID))
		case provider.RoleAssistant:
			// Reasoning is not replayed: compatible servers take no thinking back, and it must
			// never become answer text (R08).
			a := oa.ChatCompletionAssistantMessageParam{}
			if m.Text != "" || len(m.ToolCalls) == 0 {
				a.Content.OfString = param.NewOpt(m.Text)
			}
			for _, c := range m.ToolCalls {
				args := string(c.Arguments)
				if args == "" {
					args = "{}"
				}
				a.ToolCalls = append(a.ToolCalls, oa.ChatCompletionMessageToolCallUnionParam{OfFunction: &oa.ChatCompletionMessageFunctionToolCallParam{
					ID: c.ID, Function: oa.ChatCompletionMessageFunctionToolCallFunctionParam{Name: c.Name, Arguments: args},
				}})
			}
			msgs = append(msgs, oa.ChatCompletionMessageParamUnion{OfAssistant: &a})
		}
	}
	params := oa.ChatCompletionNewParams{
		Model:         shared.ChatModel(req.Model),
		Messages:      msgs,
		StreamOptions: oa.ChatCompletionStreamOptionsParam{IncludeUsage: param.NewOpt(true)},
	}
	for _, t := range req.Tools {
		var schema map[string]any
		_ = json.Unmarshal(t.InputSchema, &schema)
		fd := shared.FunctionDefinitionParam{Name: t.Name, Parameters: shared.FunctionParameters(schema)}
		if t.Description != "" {
			fd.Description = param.NewOpt(t.Description)
		}
		params.Tools = append(params.Tools, oa.ChatCompletionFunctionTool(fd))
	}
	if req.MaxOutputTokens > 0 {
		// OpenAI's own API takes max_completion_tokens (its reasoning models refuse max_tokens);
		// compatible servers have long taken max_tokens and not all know the newer name.
		if p.isOpenAI() {
			params.MaxCompletionTokens = param.NewOpt(int64(req.MaxOutputTokens))
		} else {
			params.MaxTokens = param.NewOpt(int64(req.MaxOutputTokens))
		}
	}
	return params
}

func (p *Provider) isOpenAI() bool {
	u, err := url.Parse(p.cfg.BaseURL)
	return err == nil && u.Hostname() == "api.openai.com"
}

// Stream sends req and streams the answer (see the package doc for the leniencies).
func (p *Provider) Stream(ctx context.Context, req *provider.Request, on func(provider.Event) error) (provider.Result, error) {
	stream := p.client.Chat.Completions.NewStreaming(ctx, p.params(req))
	defer stream.Close()
	var (
		acc      calls
		usage    provider.Usage
		finish   string
		streamed bool
	)
	emit := func(ev provider.Event) error {
		streamed = true
		return on(ev)
	}
	for stream.Next() {
		ch := stream.Current()
		if ch.JSON.Usage.Valid() {
			usage = provider.Usage{InputTokens: ch.Usage.PromptTokens, OutputTokens: ch.Usage.CompletionTokens, Reported: true}
		}
		for _, c := range ch.Choices {
			if c.Index != 0 {
				continue // n=1: only the first choice
			}
			d := c.Delta
			if t := reasoning(d); t != "" {
				if err := emit(&provider.ThinkingDelta{Text: t}); err != nil {
					return provider.Result{}, err
				}
			}
			for _, t := range []string{d.Content, d.Refusal} {
				if t != "" {
					if err := emit(&provider.TextDelta{Text: t}); err != nil {
						return provider.Result{}, err
					}
				}
			}
			for _, tc := range d.ToolCalls {
				acc.add(tc)
				if n := len(tc.Function.Arguments); n > 0 {
					if err := on(&provider.ToolInputDelta{Bytes: n}); err != nil {
						return provider.Result{}, err
					}
				}
			}
			if c.FinishReason != "" {
				finish = c.FinishReason
			}
		}
	}
	if err := stream.Err(); err != nil {
		return provider.Result{}, p.classify(ctx, err, streamed || acc.started())
	}
	if finish == "" {
		if ctx.Err() != nil {
			return provider.Result{}, ctx.Err()
		}
		return provider.Result{}, &provider.Error{Kind: provider.KindRetryable, Provider: p.cfg.Name,
			Message: "the stream ended before the model finished its answer", Streamed: streamed || acc.started()}
	}
	res := provider.Result{Usage: usage}
	if finish == "length" {
		res.Stop = provider.StopMaxTokens // the calls of a cut turn are never delivered (R04)
		return res, nil
	}
	done, err := acc.complete(p.cfg.Name)
	if err != nil {
		return provider.Result{}, err
	}
	for _, c := range done {
		if err := emit(&provider.ToolCallDone{Call: c}); err != nil {
			return provider.Result{}, err
		}
	}
	switch {
	case len(done) > 0:
		res.Stop = provider.StopToolUse // whatever finish_reason said (R04)
	case finish == "stop" || finish == "tool_calls" || finish == "function_call":
		res.Stop = provider.StopEndTurn
	default:
		res.Stop = provider.StopOther
	}
	return res, nil
}

// reasoning reads a delta's reasoning text: "reasoning_content" (llama.cpp, DeepSeek, older
// vLLM) or "reasoning" (vLLM ≥ 0.19, Ollama, OpenRouter); the same text in both counts once
// (R08). The SDK's typed delta has neither field.
func reasoning(d oa.ChatCompletionChunkChoiceDelta) string {
	var out string
	for _, k := range []string{"reasoning_content", "reasoning"} {
		f, ok := d.JSON.ExtraFields[k]
		if !ok {
			continue
		}
		var s string
		if json.Unmarshal([]byte(f.Raw()), &s) != nil || s == "" || s == out {
			continue
		}
		out += s
	}
	return out
}

// classify turns an SDK or transport error into a *provider.Error with no secret in its text.
func (p *Provider) classify(ctx context.Context, err error, streamed bool) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	e := &provider.Error{Provider: p.cfg.Name, Streamed: streamed, Kind: provider.KindOther}
	var apiErr *oa.Error
	var se *ssestream.StreamError
	switch {
	case errors.As(err, &apiErr):
		e.Status = apiErr.StatusCode
		e.Kind = provider.ClassifyStatus(apiErr.StatusCode)
		msg, typ, code := apiErr.Message, apiErr.Type, apiErr.Code
		if raw := apiErr.RawJSON(); raw != "" {
			m2, t2, c2 := errorFields([]byte(raw))
			msg, typ, code = first(msg, m2), first(typ, t2), first(code, c2)
		}
		if msg == "" {
			msg = http.StatusText(apiErr.StatusCode)
		}
		e.Message = msg
		if apiErr.Response != nil {
			e.RetryAfter = provider.RetryAfter(apiErr.Response.Header, time.Now())
		}
		if (e.Kind == provider.KindBadRequest || e.Kind == provider.KindContextTooLong) && provider.IsContextOverflow(msg, typ, code) {
			e.Kind = provider.KindContextTooLong
		}
		if e.Kind == provider.KindAuth {
			e.EnvVar = p.cfg.KeyEnv
		}
	case errors.As(err, &se):
		// An error object inside a 200 stream (R07): {"error":{…}} as a data event, or under
		// "event: error".
		msg, typ, code := errorFields(se.Event.Data)
		e.Message = first(msg, "the server reported an error in the stream")
		switch {
		case provider.IsContextOverflow(msg, typ, code):
			e.Kind = provider.KindContextTooLong
		case isServerSide(typ, code):
			e.Kind = provider.KindRetryable
		}
	default:
		// A transport failure: refused connection, reset, a stream cut mid-body.
		e.Kind = provider.KindRetryable
		e.Message = "the connection failed: " + err.Error()
	}
	e.Message = provider.Redact(e.Message, p.cfg.APIKey.Reveal())
	return e
}

// errorFields reads message, type and code from an error object, {"error":{…}} or bare.
func errorFields(b []byte) (msg, typ, code string) {
	var w struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
	}
	if json.Unmarshal(b, &w) != nil {
		return "", "", ""
	}
	var o struct {
		Message string          `json:"message"`
		Type    string          `json:"type"`
		Code    json.RawMessage `json:"code"`
	}
	if len(w.Error) > 0 && json.Unmarshal(w.Error, &o) != nil {
		var s string
		if json.Unmarshal(w.Error, &s) == nil {
			return s, "", ""
		}
	}
	if len(w.Error) == 0 {
		o.Message = w.Message
	}
	code = strings.Trim(string(o.Code), `"`)
	if code == "null" {
		code = ""
	}
	return o.Message, o.Type, code
}

// isServerSide reports whether a streamed error is the server's trouble (retryable before the
// first token): a 5xx/429 code or a server, overload or rate-limit type.
func isServerSide(typ, code string) bool {
	if len(code) == 3 && (code[0] == '5' || code == "429") {
		return true
	}
	t := strings.ToLower(typ + " " + code)
	for _, m := range []string{"server_error", "overloaded", "rate_limit", "unavailable", "timeout"} {
		if strings.Contains(t, m) {
			return true
		}
	}
	return false
}

func first(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// calls accumulates streamed tool-call deltas (R01, R02).
type calls struct{ list []*call }

type call struct {
	id, name string
	index    int64
	hasIndex bool
	args     strings.Builder
}

func (a *calls) started() bool { return len(a.list) > 0 }

// add files one delta: a new id opens a call (even at an index already used); an id seen before
// continues its call; an id-less delta continues the last call with its index, or, without an
// index, the last call opened.
func (a *calls) add(tc oa.ChatCompletionChunkChoiceDeltaToolCall) {
	hasIndex := tc.JSON.Index.Valid()
	var c *call
	switch {
	case tc.ID != "":
		for _, x := range a.list {
			if x.id == tc.ID {
				c = x
			}
		}
	case hasIndex:
		for _, x := range a.list {
			if x.hasIndex && x.index == tc.Index {
				c = x
			}
		}
	case len(a.list) > 0:
		c = a.list[len(a.list)-1]
	}
	if c == nil {
		c = &call{id: tc.ID, index: tc.Index, hasIndex: hasIndex}
		a.list = append(a.list, c)
	}
	if c.name == "" {
		c.name = tc.Function.Name
	}
	c.args.WriteString(tc.Function.Arguments)
}

// complete returns the finished calls: empty slots (no id, name or arguments) are dropped; a
// call without a name, or whose arguments are not a JSON object, is a bad response.
func (a *calls) complete(name string) ([]provider.ToolCall, error) {
	var out []provider.ToolCall
	for _, c := range a.list {
		args := strings.TrimSpace(c.args.String())
		if c.id == "" && c.name == "" && args == "" {
			continue
		}
		if c.name == "" {
			return nil, &provider.Error{Kind: provider.KindBadResponse, Provider: name, Streamed: true,
				Message: fmt.Sprintf("the model sent a tool call without a name (id %q)", c.id)}
		}
		if args == "" {
			args = "{}"
		}
		var obj map[string]json.RawMessage
		if json.Unmarshal([]byte(args), &obj) != nil || obj == nil {
			return nil, &provider.Error{Kind: provider.KindBadResponse, Provider: name, Streamed: true,
				Message: fmt.Sprintf("the model's call of %s has arguments that are not a JSON object: %.200s", c.name, args)}
		}
		id := c.id
		if id == "" { // some servers send none: one unique within the conversation
			var b [6]byte
			_, _ = rand.Read(b[:])
			id = fmt.Sprintf("call_%x", b)
		}
		out = append(out, provider.ToolCall{ID: id, Name: c.name, Arguments: json.RawMessage(args)})
	}
	return out, nil
}
