package protocol

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"
)

// fastAgrees checks the fast params decoder against the full check for one input: whatever the
// fast path accepts, the full check accepts too, into the same value. It reports whether the
// fast path took the input.
func fastAgrees(t *testing.T, m *MethodSpec, raw []byte) bool {
	t.Helper()
	fp, ok := m.NewParams().(fastParams)
	if !ok {
		return false
	}
	raw = bytes.TrimSpace(raw)
	s := pscan{b: raw}
	if !fp.decodeFast(&s) || !s.atEnd() {
		return false
	}
	full := m.NewParams()
	if len(raw) == 0 || raw[0] != '{' {
		t.Fatalf("%s: the fast path took %q, which is not an object", m.Name, raw)
	}
	if err := decodeParamsFull(m.Name, raw, full); err != nil {
		t.Fatalf("%s: the fast path took %s, which the full check refuses: %v", m.Name, raw, err)
	}
	if !reflect.DeepEqual(fp, full) {
		a, _ := json.Marshal(fp)
		b, _ := json.Marshal(full)
		t.Fatalf("%s: %s decodes to\n fast %s\n full %s", m.Name, raw, a, b)
	}
	return true
}

// schemaNode is a node of the bundled schema.
type schemaNode = map[string]any

func bundledSchema(t testing.TB) schemaNode {
	var doc schemaNode
	if err := json.Unmarshal(BundledSchema, &doc); err != nil {
		t.Fatal(err)
	}
	return doc
}

// resolve follows a node's $ref within the bundle.
func resolve(doc, n schemaNode) schemaNode {
	for n["$ref"] != nil {
		name := strings.TrimPrefix(n["$ref"].(string), "#/$defs/")
		n = doc["$defs"].(schemaNode)[name].(schemaNode)
	}
	return n
}

// instance makes a value n accepts: every member, strings of the least length, integers at the
// least bound or 0.
func instance(doc, n schemaNode, depth int) any {
	n = resolve(doc, n)
	if e, ok := n["enum"].([]any); ok {
		return e[len(e)-1]
	}
	if c, ok := n["const"]; ok {
		return c
	}
	if n["x-any"] == true {
		return map[string]any{"free": []any{1, "two"}}
	}
	if one, ok := n["oneOf"].([]any); ok {
		return instance(doc, one[0].(schemaNode), depth)
	}
	typ := n["type"]
	if l, ok := typ.([]any); ok {
		for _, x := range l {
			if x != "null" {
				typ = x
			}
		}
	}
	switch typ {
	case "string":
		if n["pattern"] != nil {
			return "ab"
		}
		min := 1
		if v, ok := n["minLength"].(float64); ok && v > 1 {
			min = int(v)
		}
		return strings.Repeat("é", min)
	case "integer":
		if v, ok := n["minimum"].(float64); ok && v > 0 {
			return int64(v)
		}
		return 0
	case "number":
		return 1.5
	case "boolean":
		return true
	case "array":
		if depth > 4 {
			return []any{}
		}
		return []any{instance(doc, n["items"].(schemaNode), depth+1)}
	case "object":
		out := map[string]any{}
		if ap, ok := n["additionalProperties"].(schemaNode); ok {
			out["k"] = instance(doc, ap, depth+1)
			return out
		}
		props, _ := n["properties"].(schemaNode)
		for k, p := range props {
			if depth < 4 {
				out[k] = instance(doc, p.(schemaNode), depth+1)
			}
		}
		return out
	}
	return nil
}

// variants are inputs around a valid instance: each member dropped, null, of the wrong type,
// at and past its bounds, written with escapes, repeated, renamed; members unknown; odd numbers
// and whitespace.
func variants(doc, params schemaNode, base map[string]any) [][]byte {
	enc := func(v any) []byte { b, _ := json.Marshal(v); return b }
	with := func(k string, v any) []byte {
		m := map[string]any{}
		for a, b := range base {
			m[a] = b
		}
		if v == nil {
			delete(m, k)
		} else {
			m[k] = v
		}
		return enc(m)
	}
	raw := func(k, lit string) []byte { // base with member k written as the literal lit
		b := with(k, nil)
		if len(b) <= 2 {
			return []byte(fmt.Sprintf(`{%q:%s}`, k, lit))
		}
		return append([]byte(fmt.Sprintf(`{%q:%s,`, k, lit)), b[1:]...)
	}
	out := [][]byte{enc(base), []byte(`{}`), []byte(" { } "), []byte(`{"zzUnknown":1}`), append(enc(base), ' ')}
	props, _ := params["properties"].(schemaNode)
	keys := make([]string, 0, len(props))
	for k := range props {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		n := resolve(doc, props[k].(schemaNode))
		out = append(out, with(k, nil), raw(k, "null"), raw(k, `"x"`), raw(k, "7"), raw(k, "true"), raw(k, "[]"), raw(k, "{}"),
			raw(k, "1.0"), raw(k, "1e2"), raw(k, "-0"), raw(k, "01"), raw(k, "9007199254740993"), raw(k, "-1"),
			raw(k, `"a\nb\t\"\\\/\u00e9\ud83d\ude00"`), raw(k, `"\ud800"`), raw(k, `"a\u0000b"`), raw(k, `""`),
			[]byte(strings.Replace(string(enc(base)), `"`+k+`"`, `"`+strings.ToUpper(k[:1])+k[1:]+`"`, 1)),
			[]byte(strings.Replace(string(enc(base)), `"`+k+`":`, `"`+k+`":`+string(enc(base[k]))+`,"`+k+`":`, 1)),
			[]byte(strings.Replace(string(enc(base)), `"`+k+`"`, `"\u00`+fmt.Sprintf("%x", k[0])+k[1:]+`"`, 1)),
			[]byte(strings.ReplaceAll(string(enc(base)), ":", " :\n\t ")),
		)
		if v, ok := n["maxLength"].(float64); ok && v < 5000 {
			out = append(out, with(k, strings.Repeat("é", int(v))), with(k, strings.Repeat("é", int(v)+1)), with(k, strings.Repeat("a", int(v)+1)))
		}
		if v, ok := n["minLength"].(float64); ok && v > 0 {
			out = append(out, with(k, strings.Repeat("x", int(v)-1)))
		}
		if v, ok := n["maximum"].(float64); ok {
			out = append(out, raw(k, fmt.Sprint(int64(v))), raw(k, fmt.Sprint(int64(v)+1)))
		}
		if v, ok := n["minimum"].(float64); ok {
			out = append(out, raw(k, fmt.Sprint(int64(v))), raw(k, fmt.Sprint(int64(v)-1)))
		}
		if e, ok := n["enum"].([]any); ok {
			for _, x := range e {
				out = append(out, with(k, x))
			}
			out = append(out, with(k, strings.ToUpper(fmt.Sprint(e[0]))))
		}
		if n["type"] == "array" {
			out = append(out, raw(k, "[ ]"), raw(k, "[1,]"), raw(k, `["a" "b"]`))
			if it, ok := base[k].([]any); ok && len(it) > 0 {
				out = append(out, with(k, []any{it[0], it[0], it[0]}), with(k, []any{it[0], nil}))
			}
		}
	}
	return out
}

// corpus is every method's valid params (first) and the variants around them.
func corpus(tb testing.TB) map[*MethodSpec][][]byte {
	doc := bundledSchema(tb)
	methods := doc["methods"].(schemaNode)
	out := map[*MethodSpec][][]byte{}
	for _, m := range Methods() {
		params := resolve(doc, methods[m.Name].(schemaNode)["params"].(schemaNode))
		base, _ := instance(doc, params, 0).(map[string]any)
		out[m] = variants(doc, params, base)
	}
	return out
}

// TestFastParamsAgree: for every method, valid params and variants around them decode the same
// through the fast path and the full check, or the fast path leaves them to the full check; and
// the fast path takes the valid params of every method it has a decoder for.
func TestFastParamsAgree(t *testing.T) {
	fast, took := 0, 0
	for m, inputs := range corpus(t) {
		_, has := m.NewParams().(fastParams)
		if has {
			fast++
		}
		for i, raw := range inputs {
			ok := fastAgrees(t, m, raw)
			if i == 0 && has {
				if !ok {
					t.Errorf("%s: the fast path left valid params to the full check: %s", m.Name, raw)
				}
				took++
			}
		}
	}
	t.Logf("%d of %d methods have a fast params decoder; it took their valid params %d times", fast, len(Methods()), took)
	if fast < len(Methods())*3/4 {
		t.Fatalf("only %d of %d methods have a fast params decoder", fast, len(Methods()))
	}
}

// FuzzFastParamsAgree holds the fast path to the full check on arbitrary input (go test -fuzz).
func FuzzFastParamsAgree(f *testing.F) {
	for m, inputs := range corpus(f) {
		for _, raw := range inputs {
			f.Add(m.Name, raw)
		}
	}
	f.Fuzz(func(t *testing.T, method string, raw []byte) {
		if m := LookupMethod(method); m != nil {
			fastAgrees(t, m, raw)
		}
	})
}

// BenchmarkDecodeParams: chat.send's params through DecodeParams (the fast path) against the
// full check alone (what DecodeParams did before the fast path), same input, same run.
func BenchmarkDecodeParams(b *testing.B) {
	raw := json.RawMessage(`{"sessionId":"7f6b2bc1-27b2-4052-a2b7-de05d2538178","prompt":"Summarise the README.\nThen list the open issues, \"oldest first\".","model":"scripted/scripted"}`)
	for _, c := range []struct {
		name   string
		decode func(string, json.RawMessage, any) error
	}{{"fast", DecodeParams}, {"full", decodeParamsFull}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				var p ChatSendParams
				if err := c.decode(MethodChatSend, raw, &p); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
