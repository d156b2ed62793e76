package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v5"
)

// Contract validates what a server sends against the schema, strictly: every object is closed
// (a member the schema lacks fails, as does a missing required one). Tests wrap their connections
// with it so a handler cannot drift from the schema unnoticed. Receivers in production stay open.
type Contract struct {
	mu       sync.Mutex
	compiler *jsonschema.Compiler
	cache    map[string]*jsonschema.Schema
}

const strictURL = "https://zidane.dev/protocol.strict.json"

// NewContract compiles the strict variant of the bundled schema.
func NewContract() (*Contract, error) {
	var doc map[string]any
	if err := json.Unmarshal(BundledSchema, &doc); err != nil {
		return nil, err
	}
	closeObjects(doc)
	// Session signals carry $seq on the wire.
	defs, _ := doc["$defs"].(map[string]any)
	for _, s := range signalTable {
		if !s.Session {
			continue
		}
		for _, d := range defs {
			dm, _ := d.(map[string]any)
			props, _ := dm["properties"].(map[string]any)
			kind, _ := props["kind"].(map[string]any)
			if kind != nil && kind["const"] == s.Kind {
				props["$seq"] = map[string]any{"type": "integer", "minimum": 1}
			}
		}
	}
	doc["$id"] = strictURL
	b, err := Marshal(doc)
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.Draft = jsonschema.Draft2020
	if err := c.AddResource(strictURL, bytes.NewReader(b)); err != nil {
		return nil, err
	}
	return &Contract{compiler: c, cache: map[string]*jsonschema.Schema{}}, nil
}

func closeObjects(v any) {
	switch x := v.(type) {
	case map[string]any:
		if _, ok := x["properties"]; ok {
			if _, set := x["additionalProperties"]; !set {
				x["additionalProperties"] = false
			}
		}
		for _, c := range x {
			closeObjects(c)
		}
	case []any:
		for _, c := range x {
			closeObjects(c)
		}
	}
}

func (c *Contract) schema(ptr string) (*jsonschema.Schema, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s, ok := c.cache[ptr]; ok {
		return s, nil
	}
	s, err := c.compiler.Compile(strictURL + "#" + ptr)
	if err != nil {
		return nil, err
	}
	c.cache[ptr] = s
	return s, nil
}

func pointerEscape(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

func validateAt(s *jsonschema.Schema, raw []byte) error {
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return err
	}
	if err := s.Validate(v); err != nil {
		var ve *jsonschema.ValidationError
		if errors.As(err, &ve) {
			var msgs []string
			for _, l := range contractLeaves(ve) {
				msgs = append(msgs, fmt.Sprintf("%s: %s", l.InstanceLocation, l.Message))
			}
			return errors.New(strings.Join(msgs, "; "))
		}
		return err
	}
	return nil
}

func contractLeaves(ve *jsonschema.ValidationError) []*jsonschema.ValidationError {
	if len(ve.Causes) == 0 {
		return []*jsonschema.ValidationError{ve}
	}
	var out []*jsonschema.ValidationError
	for _, c := range ve.Causes {
		out = append(out, contractLeaves(c)...)
	}
	return out
}

// CheckResult validates a method's result.
func (c *Contract) CheckResult(method string, result []byte) error {
	if LookupMethod(method) == nil {
		return fmt.Errorf("unknown method %q", method)
	}
	s, err := c.schema("/methods/" + pointerEscape(method) + "/result")
	if err != nil {
		return err
	}
	if err := validateAt(s, result); err != nil {
		return fmt.Errorf("result of %s breaks the schema: %w", method, err)
	}
	return nil
}

// CheckSignal validates ipc.signal params (with $seq on session signals).
func (c *Contract) CheckSignal(params []byte) error {
	s, err := c.schema("/$defs/Signal")
	if err != nil {
		return err
	}
	if err := validateAt(s, params); err != nil {
		return fmt.Errorf("signal breaks the schema: %w (%s)", err, params)
	}
	return nil
}

// CheckError validates an error object: a registry code's data must match the registry's schema.
func (c *Contract) CheckError(e *Error) error {
	name := ""
	for n, code := range errorNames() {
		if code == e.Code {
			name = n
		}
	}
	if name == "" || e.Data == nil {
		return nil
	}
	s, err := c.schema("/errors/" + name + "/data")
	if err != nil {
		return nil // the error has no data schema
	}
	b, _ := Marshal(e.Data)
	if err := validateAt(s, b); err != nil {
		return fmt.Errorf("data of error %d breaks the schema: %w", e.Code, err)
	}
	return nil
}

func errorNames() map[string]int {
	var doc struct {
		Errors map[string]struct {
			Code int `json:"code"`
		} `json:"errors"`
	}
	_ = json.Unmarshal(BundledSchema, &doc)
	out := map[string]int{}
	for n, e := range doc.Errors {
		out[n] = e.Code
	}
	return out
}

// CheckFrame validates one frame a server sent: an ipc.signal's params, an error's data, or a
// result (when method, given the answer's raw id, names the request's method; "" skips it).
// Frames that are not one JSON object (batch answers) are not checked here.
func (c *Contract) CheckFrame(frame []byte, method func(id json.RawMessage) string) error {
	var f struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
		Result json.RawMessage `json:"result"`
		Error  *Error          `json:"error"`
	}
	if json.Unmarshal(frame, &f) != nil {
		return nil
	}
	switch {
	case f.Method == "ipc.signal":
		return c.CheckSignal(f.Params)
	case f.Error != nil:
		method(f.ID) // forget the request
		return c.CheckError(f.Error)
	case f.Result != nil:
		if m := method(f.ID); m != "" {
			return c.CheckResult(m, f.Result)
		}
	}
	return nil
}
