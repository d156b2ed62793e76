package protocol

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v5"
)

// LookupMethod returns the spec of a method, or nil when the schema has no such method.
func LookupMethod(name string) *MethodSpec {
	lo, hi := 0, len(methodTable)
	for lo < hi {
		mid := (lo + hi) / 2
		if methodTable[mid].Name < name {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	if lo < len(methodTable) && methodTable[lo].Name == name {
		return methodTable[lo]
	}
	return nil
}

// Methods returns every method spec, sorted by name. The slice is shared: do not modify it.
func Methods() []*MethodSpec { return methodTable }

// MethodsFor returns the names of the methods a connection of scope s may call at the current
// ProtocolVersion, sorted.
func MethodsFor(s Scope) []string { return MethodsAt(s, ProtocolVersion) }

// OfferedAt reports whether a connection that negotiated protocol version v may call m: every
// method but one removed in v or earlier (removedIn, issue 29).
func (m *MethodSpec) OfferedAt(v int) bool { return m.RemovedIn == 0 || v < m.RemovedIn }

// MethodsAt returns the names of the methods a connection of scope s that negotiated protocol
// version v may call, sorted (ipc.hello's methods).
func MethodsAt(s Scope, v int) []string {
	out := make([]string, 0, len(methodTable))
	for _, m := range methodTable {
		if s.Allows(m.Scope) && m.OfferedAt(v) {
			out = append(out, m.Name)
		}
	}
	return out
}

// DeprecatedMethodsAt returns, sorted, the deprecated methods among MethodsAt(s, v): what the
// connection may still call but should move off (ipc.hello's deprecatedMethods).
func DeprecatedMethodsAt(s Scope, v int) []string {
	var out []string
	for _, m := range methodTable {
		if m.Deprecated && s.Allows(m.Scope) && m.OfferedAt(v) {
			out = append(out, m.Name)
		}
	}
	return out
}

// LookupSignal returns the spec of a signal kind, or nil.
func LookupSignal(kind string) *SignalSpec {
	return signalIndex()[kind]
}

// Signals returns every signal spec in schema order. The slice is shared: do not modify it.
func Signals() []*SignalSpec { return signalTable }

func article(word string) string {
	if word != "" && strings.ContainsRune("aeiou", rune(word[0])) {
		return "an"
	}
	return "a"
}

func errNotOffered(method string) error {
	return NewMethodNotFoundError(fmt.Sprintf("Unknown method %q.", method))
}

// Dispatch runs one request for a connection of the given scope: it finds the method
// (MethodNotFound), checks the connection kind (WrongConnectionKind when a client calls a
// machine-only method or a machine calls a client method), checks the scope (Forbidden, naming
// the scope needed), decodes and validates
// the params against the schema (InvalidParams with the JSON pointer in the message and
// data.pointer), then calls the handler. A handler error that is not an *Error becomes
// HandlerFailed with its text.
func Dispatch(ctx context.Context, h Handlers, scope Scope, method string, params json.RawMessage) (any, error) {
	return DispatchAt(ctx, h, scope, ProtocolVersion, method, params)
}

// DispatchAt is Dispatch for a connection that negotiated protocol version version: a method
// removed in that version or earlier is MethodNotFound (removedIn, issue 29).
func DispatchAt(ctx context.Context, h Handlers, scope Scope, version int, method string, params json.RawMessage) (any, error) {
	m := LookupMethod(method)
	if m == nil || !m.OfferedAt(version) {
		return nil, errNotOffered(method)
	}
	if m.Scope != ScopeNone && (m.Scope == ScopeMachine) != (scope == ScopeMachine) {
		if m.Scope == ScopeMachine {
			return nil, NewWrongConnectionKindError(fmt.Sprintf("%q needs a machine connection (a machine-scoped token); this is a client connection.", method))
		}
		return nil, NewWrongConnectionKindError(fmt.Sprintf("%q needs a client connection (a chat or admin token); this is a machine connection.", method))
	}
	if !scope.Allows(m.Scope) {
		return nil, NewForbiddenError(fmt.Sprintf("%q needs %s %s token; this connection's token has scope %s.", method, article(string(m.Scope)), m.Scope, scope), &ForbiddenErrorData{Needed: string(m.Scope), Scope: string(scope)})
	}
	p := m.NewParams()
	if err := DecodeParams(method, params, p); err != nil {
		return nil, err
	}
	res, err := m.call(ctx, h, p)
	if err != nil {
		var e *Error
		if errors.As(err, &e) {
			return nil, e
		}
		return nil, NewHandlerFailedError(err.Error())
	}
	return res, nil
}

// paramsCheck is a method's compiled params schema.
type paramsCheck struct {
	schema *jsonschema.Schema
	// emptyOK: {} is valid params, so an empty object needs no validation or decoding.
	emptyOK bool
}

var (
	// checks maps a method name to its *paramsCheck; compiled on first use, then read without a
	// lock (the hot path of every request: a global lock here serialised all connections).
	checks    sync.Map
	compileMu sync.Mutex
	compiler  *jsonschema.Compiler
)

// paramsValidator compiles (once) the params schema of a method from the bundled schema.
func paramsValidator(method string) (*paramsCheck, error) {
	if c, ok := checks.Load(method); ok {
		return c.(*paramsCheck), nil
	}
	compileMu.Lock()
	defer compileMu.Unlock()
	if c, ok := checks.Load(method); ok {
		return c.(*paramsCheck), nil
	}
	if compiler == nil {
		c := jsonschema.NewCompiler()
		c.Draft = jsonschema.Draft2020
		if err := c.AddResource("https://zidane.dev/protocol.json", bytes.NewReader(BundledSchema)); err != nil {
			return nil, err
		}
		compiler = c
	}
	ptr := "https://zidane.dev/protocol.json#/methods/" + strings.ReplaceAll(strings.ReplaceAll(method, "~", "~0"), "/", "~1") + "/params"
	s, err := compiler.Compile(ptr)
	if err != nil {
		return nil, err
	}
	c := &paramsCheck{schema: s, emptyOK: s.Validate(map[string]any{}) == nil}
	checks.Store(method, c)
	return c, nil
}

// isEmptyObject reports whether raw is {} (with any whitespace inside).
func isEmptyObject(raw []byte) bool {
	return len(raw) >= 2 && raw[0] == '{' && raw[len(raw)-1] == '}' && len(bytes.TrimSpace(raw[1:len(raw)-1])) == 0
}

// DecodeParams validates raw params against the method's schema and decodes them into dst.
// Absent params are {}. Params must be an object: an array answers InvalidParams ("params must be
// an object."). Member names match exactly (encoding/json alone would match them case-insensitively);
// unknown members are ignored; duplicate members and wrong types answer InvalidParams naming the
// JSON pointer. Params that the generated fast decoder reads (protocol/fastparams.go: most valid
// params) are decoded and checked in one pass; everything else takes the full check.
func DecodeParams(method string, raw json.RawMessage, dst any) error {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		raw = json.RawMessage("{}")
	}
	if raw[0] != '{' {
		return NewInvalidParamsError("params must be an object.", &InvalidParamsErrorData{Pointer: ""})
	}
	if f, ok := dst.(fastParams); ok {
		s := pscan{b: raw}
		if f.decodeFast(&s) && s.atEnd() {
			return nil
		}
		reflect.ValueOf(dst).Elem().SetZero() // what the fast path wrote; the full check decodes anew
	}
	return decodeParamsFull(method, raw, dst)
}

// MaxParamsValues bounds the JSON values (objects, arrays, members, items) one request's params
// may hold when they take the full check; no method needs nearly as many.
const MaxParamsValues = 100_000

// countValues counts raw's values at least (an opening brace or bracket, a comma, outside
// strings), in one pass over the bytes, without decoding.
func countValues(raw []byte) int {
	n, inStr := 1, false
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		switch {
		case inStr:
			if c == '\\' {
				i++
			} else if c == '"' {
				inStr = false
			}
		case c == '"':
			inStr = true
		case c == '{', c == '[', c == ',':
			n++
		}
	}
	return n
}

// decodeParamsFull is DecodeParams' full check: the duplicate scan, the schema validator and
// encoding/json, for params outside the fast path's subset and for every error's message.
func decodeParamsFull(method string, raw json.RawMessage, dst any) error {
	if n := countValues(raw); n > MaxParamsValues {
		// The checks below decode every value (unknown members too) into Go maps and slices:
		// 5 million `{}` took 6 s and 400 MB (a break-it helper's report).
		return NewInvalidParamsError(fmt.Sprintf("params: more than %d JSON values (unknown members count too); send fewer.", MaxParamsValues), &InvalidParamsErrorData{Pointer: ""})
	}
	v, err := paramsValidator(method)
	if err != nil {
		return NewInternalError("params schema of " + method + " does not compile: " + err.Error())
	}
	if v.emptyOK && isEmptyObject(raw) {
		return nil // the zero value of dst is what {} decodes to
	}
	if ptr, dup := findDuplicate(raw); dup != "" {
		return NewInvalidParamsError(fmt.Sprintf("params%s: duplicate member %q; send each member once.", ptr, dup), &InvalidParamsErrorData{Pointer: ptr})
	}
	var doc any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		return NewInvalidParamsError("params must be an object.", &InvalidParamsErrorData{})
	}
	if err := v.schema.Validate(doc); err != nil {
		var ve *jsonschema.ValidationError
		if errors.As(err, &ve) {
			leaf := firstLeaf(ve)
			ptr := leaf.InstanceLocation
			where := "params" + ptr
			return NewInvalidParamsError(fmt.Sprintf("%s: %s.", where, plainNumbers(leaf.Message)), &InvalidParamsErrorData{Pointer: ptr})
		}
		return NewInvalidParamsError(err.Error(), &InvalidParamsErrorData{})
	}
	clean := []byte(raw)
	pruned := pruneToKnown(doc, dst)
	if rewritten := rewriteIntegral(doc); pruned || rewritten { // both run: neither may short-circuit the other
		// Members were dropped or numbers rewritten: decode the cleaned document. Otherwise the
		// raw params already hold exactly what dst should get, and are decoded once more only.
		if clean, err = Marshal(doc); err != nil {
			return NewInternalError(err.Error())
		}
	}
	if err := json.Unmarshal(clean, dst); err != nil {
		// The schema check passed, so this is a value Go cannot hold; name the member, not Go.
		ptr := ""
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			ptr = "/" + strings.ReplaceAll(te.Field, ".", "/")
		}
		return NewInvalidParamsError(fmt.Sprintf("params%s: the value is out of range for this member.", ptr), &InvalidParamsErrorData{Pointer: ptr})
	}
	return nil
}

var expNumber = regexp.MustCompile(`-?[0-9]+(\.[0-9]+)?e[+-]?[0-9]+`)

// plainNumbers writes the validator's exponent numbers (2.147483647e+09) as integers where they
// are integers, so a message says "must be <= 2147483647".
func plainNumbers(msg string) string {
	return expNumber.ReplaceAllStringFunc(msg, func(n string) string {
		if f, ok := new(big.Float).SetString(n); ok && f.IsInt() {
			if i, acc := f.Int64(); acc == big.Exact {
				return strconv.FormatInt(i, 10)
			}
		}
		return n
	})
}

// rewriteIntegral rewrites, in place, numbers with an integer value written as 16.0 or 1.6e1
// (integers to JSON Schema) as plain integers, so they decode into Go integer fields. It reports
// whether it changed anything.
func rewriteIntegral(v any) bool {
	changed := false
	switch x := v.(type) {
	case map[string]any:
		for k, c := range x {
			if n, ok := c.(json.Number); ok {
				if i, ok := integral(n); ok {
					x[k], changed = i, true
				}
				continue
			}
			changed = rewriteIntegral(c) || changed
		}
	case []any:
		for i, c := range x {
			if n, ok := c.(json.Number); ok {
				if v, ok := integral(n); ok {
					x[i], changed = v, true
				}
				continue
			}
			changed = rewriteIntegral(c) || changed
		}
	}
	return changed
}

// integral returns n as a plain integer when it is written as 16.0 or 1.6e1.
func integral(n json.Number) (json.Number, bool) {
	s := string(n)
	if strings.ContainsAny(s, ".eE") {
		if f, ok := new(big.Float).SetString(s); ok && f.IsInt() {
			if i, acc := f.Int64(); acc == big.Exact {
				return json.Number(strconv.FormatInt(i, 10)), true
			}
		}
	}
	return "", false
}

func firstLeaf(ve *jsonschema.ValidationError) *jsonschema.ValidationError {
	for len(ve.Causes) > 0 {
		// Prefer the deepest location: it names the member at fault.
		best := ve.Causes[0]
		for _, c := range ve.Causes[1:] {
			if len(c.InstanceLocation) > len(best.InstanceLocation) {
				best = c
			}
		}
		ve = best
	}
	return ve
}
