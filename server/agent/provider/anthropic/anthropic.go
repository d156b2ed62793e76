// Package anthropic is the provider for Anthropic's Messages streaming API through
// github.com/anthropics/anthropic-sdk-go/v2 (issue 8; runtime cases R11, R13).
//
// It streams text and thinking blocks, assembles tool_use input from input_json_delta pieces (a
// tool with no arguments gets {}; input cut by max_tokens is never delivered, R11), reads usage
// from message_start and message_delta, and classifies overloaded_error whether it comes as an
// HTTP 529 or as an SSE error event after HTTP 200 (R13). The SDK's own retries are off and it
// reads nothing from the environment: provider.WithRetry is the one retry layer and the config
// package supplies key and base URL. Thinking is not sent back in later requests (it would need
// its signature, which the conversation does not keep).
package anthropic

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	an "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/zidane-server/zidane/server/agent/provider"
)

// DefaultBaseURL is Anthropic's API.
const DefaultBaseURL = "https://api.anthropic.com"

// DefaultKeyEnv is the environment variable that holds the key of the default provider.
const DefaultKeyEnv = "ANTHROPIC_API_KEY"

// DefaultMaxTokens is max_tokens when a request sets no limit (the API requires one).
const DefaultMaxTokens = 8192

// Config configures one Messages API endpoint.
type Config struct {
	// Name is the provider's name in model ids; default "anthropic".
	Name string
	// BaseURL is the API root (without /v1); default DefaultBaseURL.
	BaseURL string
	// APIKey is sent as the SDK sends it (a bearer token); unset sends none.
	APIKey provider.Secret
	// KeyEnv names the environment variable the key comes from, for error messages; default
	// DefaultKeyEnv.
	KeyEnv string
	// Models are the configured models, with their context windows.
	Models []provider.Model
	// MaxTokens is max_tokens when a request sets none; default DefaultMaxTokens.
	MaxTokens int
	// HTTPClient, when set, sends the requests (tests).
	HTTPClient *http.Client
	// ModelsTTL is how long the API's model list is cached; default one minute.
	ModelsTTL time.Duration
}

// Provider is a Messages API provider. Safe for concurrent use.
type Provider struct {
	cfg    Config
	client an.Client

	models *provider.ModelList
}

// New returns a provider for cfg.
func New(cfg Config) *Provider {
	if cfg.Name == "" {
		cfg.Name = "anthropic"
	}
	if cfg.BaseURL == "" {
		cfg.BaseURL = DefaultBaseURL
	}
	if cfg.KeyEnv == "" {
		cfg.KeyEnv = DefaultKeyEnv
	}
	if cfg.MaxTokens == 0 {
		cfg.MaxTokens = DefaultMaxTokens
	}
	hc := cfg.HTTPClient
	if hc == nil {
		hc = &http.Client{}
	}
	bounded := *hc // a turn's response is read within the runtime's bound (provider.WithBodyLimit)
	bounded.Transport = provider.LimitBodies(hc.Transport)
	hc = &bounded
	opts := []option.RequestOption{
		option.WithoutEnvironmentDefaults(),
		option.WithBaseURL(strings.TrimRight(cfg.BaseURL, "/") + "/"),
		option.WithHTTPClient(hc),
		option.WithMaxRetries(0), // one retry layer: provider.WithRetry (R10, R13)
		option.WithoutOpenTelemetry(),
	}
	if cfg.APIKey.IsSet() {
		opts = append(opts, option.WithAPIKey(cfg.APIKey.Reveal()))
	}
	return &Provider{cfg: cfg, client: an.NewClient(opts...), models: &provider.ModelList{Provider: cfg.Name, Configured: cfg.Models, TTL: cfg.ModelsTTL}}
}

// Name returns the provider's name.
func (p *Provider) Name() string { return p.cfg.Name }

// TakesImages implements provider.ImageTaker: Anthropic's Messages API takes PNG, JPEG, GIF and
// WebP images in user messages (issue 24).
func (p *Provider) TakesImages(string) bool { return true }

// Models returns the configured models and those GET /v1/models lists (cached for ModelsTTL),
// with the API's max_input_tokens as context window unless configured. When the listing fails,
// the configured models come back with the error.
func (p *Provider) Models(ctx context.Context) ([]provider.Model, error) {
	return p.models.Get(ctx, func(ctx context.Context) ([]provider.Model, error) {
		page, err := p.client.Models.List(ctx, an.ModelListParams{})
		if err != nil {
			return nil, p.classify(ctx, err, false)
		}
		listed := make([]provider.Model, 0, len(page.Data))
		for _, m := range page.Data {
			listed = append(listed, provider.Model{Name: m.ID, ContextWindow: int(m.MaxInputTokens)})
		}
		return listed, nil
	})
}

// params builds the Messages request: consecutive tool results and a following user text share
// one user message (results first), empty assistant messages are left out.
func (p *Provider) params(req *provider.Request) an.MessageNewParams {
	var msgs []an.MessageParam
	add := func(user bool, blocks ...an.ContentBlockParamUnion) {
		if n := len(msgs); n > 0 {
			last := &msgs[n-1]
			if user && last.OfUser != nil {
				last.OfUser.Content = append(last.OfUser.Content, blocks...)
				return
			}
			if !user && last.OfAssistant != nil {
				last.OfAssistant.Content = append(last.OfAssistant.Content, blocks...)
				return
			}
		}
		if user {
			msgs = append(msgs, an.NewUserMessage(blocks...))
		} else {
			msgs = append(msgs, an.NewAssistantMessage(blocks...))
		}
	}
	for _, m := range req.Messages {
		switch m.Role {
		case provider.RoleUser:
			// Images first, then the text: the order Anthropic's vision guide recommends.
			blocks := make([]an.ContentBlockParamUnion, 0, len(m.Images)+1)
			for _, im := range m.Images {
				blocks = append(blocks, an.NewImageBlockBase64(im.MediaType, base64.StdEncoding.EncodeToString(im.Data)))
			}
			add(true, append(blocks, an.NewTextBlock(m.Text))...)
		case provider.RoleTool:
			add(true, an.NewToolResultBlock(m.ToolCallID, m.Text, m.IsError))
		case provider.RoleAssistant:
			var blocks []an.ContentBlockParamUnion
			if m.Text != "" {
				blocks = append(blocks, an.NewTextBlock(m.Text))
			}
			for _, c := range m.ToolCalls {
				args := c.Arguments
				if len(args) == 0 {
					args = json.RawMessage(`{}`)
				}
				blocks = append(blocks, an.NewToolUseBlock(c.ID, args, c.Name))
			}
			if len(blocks) > 0 {
				add(false, blocks...)
			}
		}
	}
	maxTokens := req.MaxOutputTokens
	if maxTokens <= 0 {
		maxTokens = p.cfg.MaxTokens
	}
	params := an.MessageNewParams{Model: an.Model(req.Model), MaxTokens: int64(maxTokens), Messages: msgs}
	if req.System != "" {
		params.System = []an.TextBlockParam{{Text: req.System}}
	}
	for _, t := range req.Tools {
		var schema map[string]any
		_ = json.Unmarshal(t.InputSchema, &schema)
		in := an.ToolInputSchemaParam{ExtraFields: map[string]any{}}
		for k, v := range schema {
			switch k {
			case "type":
			case "properties":
				in.Properties = v
			case "required":
				for _, r := range asSlice(v) {
					if s, ok := r.(string); ok {
						in.Required = append(in.Required, s)
					}
				}
			default:
				in.ExtraFields[k] = v
			}
		}
		tool := an.ToolUnionParamOfTool(in, t.Name)
		if t.Description != "" {
			tool.OfTool.Description = an.String(t.Description)
		}
		params.Tools = append(params.Tools, tool)
	}
	return params
}

func asSlice(v any) []any {
	s, _ := v.([]any)
	return s
}

// block is a content block being streamed.
type block struct {
	kind, id, name string
	start, input   strings.Builder
	stopped        bool
}

// Stream sends req and streams the answer.
func (p *Provider) Stream(ctx context.Context, req *provider.Request, on func(provider.Event) error) (provider.Result, error) {
	stream := p.client.Messages.NewStreaming(ctx, p.params(req))
	defer stream.Close()
	var (
		blocks   = map[int64]*block{}
		order    []int64
		usage    provider.Usage
		stop     string
		ended    bool
		streamed bool
	)
	emit := func(ev provider.Event) error {
		streamed = true
		return on(ev)
	}
	for stream.Next() {
		ev := stream.Current()
		switch ev.Type {
		case "message_start":
			u := ev.Message.Usage
			usage = provider.Usage{InputTokens: u.InputTokens + u.CacheCreationInputTokens + u.CacheReadInputTokens, OutputTokens: u.OutputTokens, Reported: true}
		case "content_block_start":
			cb := ev.ContentBlock
			b := &block{kind: cb.Type, id: cb.ID, name: cb.Name}
			blocks[ev.Index] = b
			order = append(order, ev.Index)
			switch cb.Type {
			case "text":
				if cb.Text != "" {
					if err := emit(&provider.TextDelta{Text: cb.Text}); err != nil {
						return provider.Result{}, err
					}
				}
			case "thinking":
				if cb.Thinking != "" {
					if err := emit(&provider.ThinkingDelta{Text: cb.Thinking}); err != nil {
						return provider.Result{}, err
					}
				}
			case "tool_use":
				b.start.WriteString(cb.JSON.Input.Raw())
			}
		case "content_block_delta":
			b := blocks[ev.Index]
			d := ev.Delta
			switch d.Type {
			case "text_delta":
				if d.Text != "" {
					if err := emit(&provider.TextDelta{Text: d.Text}); err != nil {
						return provider.Result{}, err
					}
				}
			case "thinking_delta":
				if d.Thinking != "" {
					if err := emit(&provider.ThinkingDelta{Text: d.Thinking}); err != nil {
						return provider.Result{}, err
					}
				}
			case "input_json_delta":
				if b != nil {
					b.input.WriteString(d.PartialJSON)
				}
				if n := len(d.PartialJSON); n > 0 {
					if err := on(&provider.ToolInputDelta{Bytes: n}); err != nil {
						return provider.Result{}, err
					}
				}
			}
		case "content_block_stop":
			if b := blocks[ev.Index]; b != nil {
				b.stopped = true
			}
		case "message_delta":
			if ev.Delta.StopReason != "" {
				stop = string(ev.Delta.StopReason)
			}
			if ev.Usage.JSON.OutputTokens.Valid() {
				usage.OutputTokens, usage.Reported = ev.Usage.OutputTokens, true
			}
			if ev.Usage.JSON.InputTokens.Valid() && ev.Usage.InputTokens > 0 {
				usage.InputTokens = ev.Usage.InputTokens + ev.Usage.CacheCreationInputTokens + ev.Usage.CacheReadInputTokens
			}
		case "message_stop":
			ended = true
		}
	}
	started := streamed || len(order) > 0
	if err := stream.Err(); err != nil {
		return provider.Result{}, p.classify(ctx, err, started)
	}
	if !ended && stop == "" {
		if ctx.Err() != nil {
			return provider.Result{}, ctx.Err()
		}
		return provider.Result{}, &provider.Error{Kind: provider.KindRetryable, Provider: p.cfg.Name,
			Message: "the stream ended before the model finished its answer", Streamed: started}
	}
	res := provider.Result{Usage: usage}
	if stop == "max_tokens" || stop == "model_context_window_exceeded" {
		res.Stop = provider.StopMaxTokens // a cut tool input is never delivered (R11)
		return res, nil
	}
	var calls []provider.ToolCall
	for _, i := range order {
		b := blocks[i]
		if b.kind != "tool_use" {
			continue
		}
		c, err := p.call(b)
		if err != nil {
			return provider.Result{}, err
		}
		calls = append(calls, c)
	}
	for _, c := range calls {
		if err := emit(&provider.ToolCallDone{Call: c}); err != nil {
			return provider.Result{}, err
		}
	}
	switch {
	case len(calls) > 0:
		res.Stop = provider.StopToolUse
	case stop == "end_turn" || stop == "stop_sequence" || stop == "tool_use":
		res.Stop = provider.StopEndTurn
	default:
		res.Stop = provider.StopOther
	}
	return res, nil
}

// call assembles a tool_use block: the streamed input, else the start event's input, else {}
// (a tool with no arguments, R11); anything but a complete JSON object is a bad response.
func (p *Provider) call(b *block) (provider.ToolCall, error) {
	in := strings.TrimSpace(b.input.String())
	if in == "" {
		in = strings.TrimSpace(b.start.String())
	}
	if in == "" || in == "null" {
		in = "{}"
	}
	var obj map[string]json.RawMessage
	if !b.stopped || b.name == "" || json.Unmarshal([]byte(in), &obj) != nil || obj == nil {
		return provider.ToolCall{}, &provider.Error{Kind: provider.KindBadResponse, Provider: p.cfg.Name, Streamed: true,
			Message: fmt.Sprintf("the model's tool_use block %q (%s) is incomplete or its input is not a JSON object: %.200s", b.id, b.name, in)}
	}
	return provider.ToolCall{ID: b.id, Name: b.name, Arguments: json.RawMessage(in)}, nil
}

// classify turns an SDK or transport error into a *provider.Error with no secret in its text.
func (p *Provider) classify(ctx context.Context, err error, streamed bool) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	e := &provider.Error{Provider: p.cfg.Name, Streamed: streamed, Kind: provider.KindOther}
	var apiErr *an.Error
	if errors.As(err, &apiErr) {
		typ := string(apiErr.Type())
		e.Message = apiErr.Message
		if e.Message == "" {
			e.Message = first(typ, http.StatusText(apiErr.StatusCode))
		}
		if apiErr.StatusCode != http.StatusOK { // an error event after 200 has no status of its own
			e.Status = apiErr.StatusCode
			e.Kind = provider.ClassifyStatus(apiErr.StatusCode)
		}
		switch typ {
		case "overloaded_error", "api_error", "rate_limit_error", "timeout_error":
			e.Kind = provider.KindRetryable
		case "authentication_error", "permission_error":
			e.Kind = provider.KindAuth
		case "request_too_large":
			e.Kind = provider.KindContextTooLong
		}
		if typ != "" && !strings.Contains(e.Message, typ) {
			e.Message = typ + ": " + e.Message
		}
		if (e.Kind == provider.KindBadRequest || e.Kind == provider.KindOther) && provider.IsContextOverflow(apiErr.Message) {
			e.Kind = provider.KindContextTooLong
		}
		if apiErr.Response != nil && apiErr.StatusCode != http.StatusOK {
			e.RetryAfter = provider.RetryAfter(apiErr.Response.Header, time.Now())
		}
		if e.Kind == provider.KindAuth {
			e.EnvVar = p.cfg.KeyEnv
		}
	} else {
		e.Kind = provider.KindRetryable
		e.Message = "the connection failed: " + err.Error()
	}
	e.Message = provider.Redact(e.Message, p.cfg.APIKey.Reveal())
	return e
}

func first(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
