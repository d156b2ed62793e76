package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/mail"
	"net/url"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/zidane-server/zidane/protocol"
	"github.com/zidane-server/zidane/server/oneline"
)

// InvalidAnswer is an answer that does not fit its request (a form value of the wrong type, a
// missing required field, an action an elicitation does not take): Message names the field and
// what to send. The transport answers it as InvalidParams.
type InvalidAnswer struct {
	// Message says what is wrong and what to send.
	Message string
	// Pointer is the JSON pointer into interactions.answer's params of the offending member.
	Pointer string
}

func (e *InvalidAnswer) Error() string { return e.Message }

// hostCallKey carries, in an MCP tool call's context, the HostCall that made it: an MCP
// server's elicitation or sampling request during the call is asked in its session and run.
type hostCallKey struct{}

func (h *ToolHost) withHostCall(ctx context.Context, tc HostCall) context.Context {
	return context.WithValue(h.Gate.withParent(ctx, tc.Session), hostCallKey{}, tc)
}

func hostCallOf(ctx context.Context) (HostCall, bool) {
	tc, ok := ctx.Value(hostCallKey{}).(HostCall)
	return tc, ok
}

// CallSession is the id of the session whose MCP tool call ctx belongs to ("" outside one): the
// mcp manager's Options.Caller, so an MCP server's request that does not name its call is
// asked only when the calls in progress on the process are all one session's.
func (h *ToolHost) CallSession(ctx context.Context) string {
	if tc, ok := hostCallOf(ctx); ok {
		return tc.Session.ID
	}
	return ""
}

// Elicit answers an MCP server's elicitation/create during one of the agent's tool calls (issue
// 23 item 2; mcp.ElicitFunc): the request becomes an interaction:request with `elicitation` in
// the call's session (and its parent's, for a subagent), answered with interactions.answer.
// accept returns the form's checked values (or, in URL mode, that the person is done), decline
// "decline"; a dismissal, the run's cancel, the server's cancel or the expiry (the gate's
// timeout) "cancel". ctx must carry the call (ToolHost.Do sets it): outside a call the request
// has nobody to ask and is an error.
func (h *ToolHost) Elicit(ctx context.Context, server string, p *sdk.ElicitParams) (*sdk.ElicitResult, error) {
	tc, ok := hostCallOf(ctx)
	if !ok {
		return nil, fmt.Errorf("no session waits on a tool call of MCP server %q; an elicitation is answered only during a call", server)
	}
	if p == nil {
		return nil, fmt.Errorf("elicitation/create without params")
	}
	el := &protocol.Elicitation{Server: server, Message: oneline.Line(p.Message), Mode: protocol.ElicitationModeForm}
	if p.Mode == "url" || (p.Mode == "" && p.URL != "") {
		el.Mode = protocol.ElicitationModeURL
		u, err := url.Parse(p.URL)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return nil, fmt.Errorf("URL elicitation needs an http(s) address, got %q", p.URL)
		}
		el.URL = &p.URL
		if p.ElicitationID != "" {
			el.ElicitationID = &p.ElicitationID
		}
	} else {
		raw, err := protocol.Marshal(p.RequestedSchema)
		if err != nil {
			return nil, fmt.Errorf("requestedSchema: %w", err)
		}
		if _, err := parseForm(raw); err != nil {
			return nil, err
		}
		el.RequestedSchema = raw
	}
	req := protocol.InteractionRequest{SessionID: tc.Session.ID, RunID: tc.RunID, CallID: tc.Call.ID, Prompt: el.Message,
		Options: []string{}, Elicitation: el}
	o, _ := h.Gate.ask(ctx, req, tc.Origin, h.Gate.Timeout())
	if o.res != protocol.InteractionResolutionAnswered || o.answer == nil || o.answer.Action == nil {
		return &sdk.ElicitResult{Action: "cancel"}, nil
	}
	if *o.answer.Action == protocol.ElicitationActionDecline {
		return &sdk.ElicitResult{Action: "decline"}, nil
	}
	out := &sdk.ElicitResult{Action: "accept"}
	if el.Mode == protocol.ElicitationModeForm {
		out.Content = map[string]any{}
		if len(o.answer.Values) > 0 {
			if err := json.Unmarshal(o.answer.Values, &out.Content); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// formField is one field of an elicitation form (MCP 2025-11-25 PrimitiveSchemaDefinition).
type formField struct {
	Type      string                   `json:"type"`
	Enum      []string                 `json:"enum"`
	OneOf     []struct{ Const string } `json:"oneOf"`
	Format    string                   `json:"format"`
	MinLength *int                     `json:"minLength"`
	MaxLength *int                     `json:"maxLength"`
	Minimum   *float64                 `json:"minimum"`
	Maximum   *float64                 `json:"maximum"`
	MinItems  *int                     `json:"minItems"`
	MaxItems  *int                     `json:"maxItems"`
	Items     *struct {
		Enum  []string                 `json:"enum"`
		AnyOf []struct{ Const string } `json:"anyOf"`
	} `json:"items"`
	Default json.RawMessage `json:"default"`
}

// form is an elicitation's requestedSchema.
type form struct {
	Type       string               `json:"type"`
	Properties map[string]formField `json:"properties"`
	Required   []string             `json:"required"`
}

func parseForm(raw json.RawMessage) (form, error) {
	var f form
	if len(raw) == 0 || string(raw) == "null" {
		return f, nil
	}
	if err := json.Unmarshal(raw, &f); err != nil {
		return f, fmt.Errorf("requestedSchema is not an elicitation form (an object of primitive fields): %s", protocol.DecodeErrorText("requestedSchema", err))
	}
	if f.Type != "" && f.Type != "object" {
		return f, fmt.Errorf("requestedSchema must be of type object, got %q", f.Type)
	}
	return f, nil
}

// choices are the values a string field (or an array's items) may take; nil: any.
func (f formField) choices() []string {
	if len(f.Enum) > 0 {
		return f.Enum
	}
	if len(f.OneOf) > 0 {
		out := make([]string, 0, len(f.OneOf))
		for _, o := range f.OneOf {
			out = append(out, o.Const)
		}
		return out
	}
	return nil
}

func (f formField) itemChoices() []string {
	if f.Items == nil {
		return nil
	}
	if len(f.Items.Enum) > 0 {
		return f.Items.Enum
	}
	out := make([]string, 0, len(f.Items.AnyOf))
	for _, o := range f.Items.AnyOf {
		out = append(out, o.Const)
	}
	return out
}

// fitsElicitation checks an elicitation's answer: accept with the form's values (every value a
// field of the form, of its type and within its bounds, every required field present) or, in
// URL mode, with no values; decline with no values; nil cancels. It returns the answer to
// record (choices [] for the signal).
func fitsElicitation(el protocol.Elicitation, a *protocol.InteractionAnswer) (*protocol.InteractionAnswer, error) {
	if a == nil {
		return nil, nil
	}
	if a.Action == nil || !a.Action.IsKnown() {
		return nil, &InvalidAnswer{Pointer: "/answer/action", Message: "answer.action: an elicitation takes action \"accept\" (with the form's values, or done with the URL) or \"decline\"; a null answer cancels it."}
	}
	if len(a.Choices) > 0 || (a.Text != nil && *a.Text != "") {
		return nil, &InvalidAnswer{Pointer: "/answer", Message: "answer: an elicitation takes action and values, not choices or text."}
	}
	out := &protocol.InteractionAnswer{Choices: []string{}, Action: a.Action}
	hasValues := len(a.Values) > 0 && string(a.Values) != "null"
	if *a.Action == protocol.ElicitationActionDecline || el.Mode == protocol.ElicitationModeURL {
		if hasValues {
			return nil, &InvalidAnswer{Pointer: "/answer/values", Message: fmt.Sprintf("answer.values: a %s takes no values; send the action alone.", map[bool]string{true: "decline", false: "URL elicitation"}[*a.Action == protocol.ElicitationActionDecline])}
		}
		return out, nil
	}
	f, err := parseForm(el.RequestedSchema)
	if err != nil {
		return nil, &InvalidAnswer{Pointer: "/answer/values", Message: err.Error()}
	}
	values := map[string]json.RawMessage{}
	if hasValues {
		if err := json.Unmarshal(a.Values, &values); err != nil {
			return nil, &InvalidAnswer{Pointer: "/answer/values", Message: "answer.values must be an object of the form's fields."}
		}
	}
	names := make([]string, 0, len(values))
	for k := range values {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		fd, ok := f.Properties[k]
		if !ok {
			return nil, &InvalidAnswer{Pointer: "/answer/values/" + k, Message: fmt.Sprintf("answer.values.%s: the form has no such field (its fields: %s).", k, strings.Join(fieldNames(f), ", "))}
		}
		if err := fd.check(values[k]); err != "" {
			return nil, &InvalidAnswer{Pointer: "/answer/values/" + k, Message: fmt.Sprintf("answer.values.%s: %s", k, err)}
		}
	}
	for _, k := range f.Required {
		if _, ok := values[k]; !ok {
			return nil, &InvalidAnswer{Pointer: "/answer/values/" + k, Message: fmt.Sprintf("answer.values.%s: this field is required; fill it in or decline.", k)}
		}
	}
	b, err := protocol.Marshal(values)
	if err != nil {
		return nil, err
	}
	out.Values = b
	return out, nil
}

func fieldNames(f form) []string {
	out := make([]string, 0, len(f.Properties))
	for k := range f.Properties {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// check returns what is wrong with v for the field ("" fits).
func (f formField) check(v json.RawMessage) string {
	v = bytes.TrimSpace(v)
	switch f.Type {
	case "string", "":
		var s string
		if json.Unmarshal(v, &s) != nil || (len(v) > 0 && v[0] != '"') {
			return "must be a string."
		}
		if c := f.choices(); c != nil && !slices.Contains(c, s) {
			return fmt.Sprintf("%q is not one of %s.", s, strings.Join(quoted(c), ", "))
		}
		n := utf8.RuneCountInString(s)
		if f.MinLength != nil && n < *f.MinLength {
			return fmt.Sprintf("must be at least %d characters.", *f.MinLength)
		}
		if f.MaxLength != nil && n > *f.MaxLength {
			return fmt.Sprintf("must be at most %d characters.", *f.MaxLength)
		}
		if msg := checkFormat(f.Format, s); msg != "" {
			return msg
		}
	case "number", "integer":
		var x float64
		if len(v) == 0 || (v[0] != '-' && (v[0] < '0' || v[0] > '9')) || json.Unmarshal(v, &x) != nil {
			return fmt.Sprintf("must be a%s %s.", map[bool]string{true: "n", false: ""}[f.Type == "integer"], f.Type)
		}
		if f.Type == "integer" && x != math.Trunc(x) {
			return "must be an integer."
		}
		if f.Minimum != nil && x < *f.Minimum {
			return fmt.Sprintf("%v is below the minimum %v.", x, *f.Minimum)
		}
		if f.Maximum != nil && x > *f.Maximum {
			return fmt.Sprintf("%v is above the maximum %v.", x, *f.Maximum)
		}
	case "boolean":
		if string(v) != "true" && string(v) != "false" {
			return "must be true or false."
		}
	case "array":
		var xs []string
		if json.Unmarshal(v, &xs) != nil || len(v) == 0 || v[0] != '[' {
			return "must be an array of strings."
		}
		c := f.itemChoices()
		for _, x := range xs {
			if len(c) > 0 && !slices.Contains(c, x) {
				return fmt.Sprintf("%q is not one of %s.", x, strings.Join(quoted(c), ", "))
			}
		}
		if f.MinItems != nil && len(xs) < *f.MinItems {
			return fmt.Sprintf("choose at least %d.", *f.MinItems)
		}
		if f.MaxItems != nil && len(xs) > *f.MaxItems {
			return fmt.Sprintf("choose at most %d.", *f.MaxItems)
		}
	default:
		return fmt.Sprintf("the form's field type %q is not one an elicitation may ask for.", f.Type)
	}
	return ""
}

func checkFormat(format, s string) string {
	switch format {
	case "email":
		if a, err := mail.ParseAddress(s); err != nil || a.Address != s {
			return fmt.Sprintf("%q is not an email address.", s)
		}
	case "uri":
		if u, err := url.Parse(s); err != nil || u.Scheme == "" {
			return fmt.Sprintf("%q is not an absolute URI.", s)
		}
	case "date":
		if _, err := time.Parse(time.DateOnly, s); err != nil {
			return fmt.Sprintf("%q is not a date (YYYY-MM-DD).", s)
		}
	case "date-time":
		if _, err := time.Parse(time.RFC3339, s); err != nil {
			return fmt.Sprintf("%q is not a date-time (RFC 3339).", s)
		}
	}
	return ""
}

func quoted(xs []string) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = fmt.Sprintf("%q", x)
	}
	return out
}
