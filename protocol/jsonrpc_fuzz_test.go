package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"unicode/utf8"
)

// fuzzSeeds are the repro inputs of field cases B01–B16 and the JSON-RPC 2.0 §7 examples.
var fuzzSeeds = []string{
	// B01
	`[]`, `[1]`, `[1,2,3]`, `[{"jsonrpc":"2.0","id":1,"method":"test.echo","params":{}}]`,
	// B02
	`[{"jsonrpc":"2.0","method":"test.echo","params":{"a":1}},{"jsonrpc":"2.0","method":"test.echo","params":{"a":2}}]`,
	`{"jsonrpc":"2.0","id":9,"method":"test.echo","params":{}}`,
	`[{"jsonrpc":"2.0","id":1,"method":"test.echo","params":{}},{"jsonrpc":"2.0","method":"test.echo","params":{}},{"jsonrpc":"2.0","method":"no.such.method"},{"foo":"bar"}]`,
	// B03
	`{"jsonrpc":"2.0","method":"test.echo","params":`,
	`{"jsonrpc":"2.0","method":1,"params":{},"id":5}`,
	`{"jsonrpc":"2.0","params":[1],"id":6}`,
	// B04
	`{"jsonrpc":"2.0","method":"no.such.method"}`,
	`{"jsonrpc":"2.0","method":"test.echo","params":"x"}`,
	`{"jsonrpc":"2.0","id":10,"method":"test.echo","params":{}}`,
	`{"jsonrpc":"2.0","method":"test.echo","params":{}}`,
	`{"jsonrpc":"2.0","id":null,"method":"test.echo","params":{}}`,
	// B06
	`{"id":1,"method":"test.echo","params":{}}`,
	`{"jsonrpc":"1.0","id":2,"method":"test.echo","params":{}}`,
	`{"jsonrpc":2.0,"id":3,"method":"test.echo","params":{}}`,
	`{"jsonrpc":"2.0 ","id":4,"method":"test.echo","params":{}}`,
	// B08
	`{"jsonrpc":"2.0","id":1,"method":"test.echo","params":{}} {"jsonrpc":"2.0","id":2,"method":"test.echo","params":{}}`,
	`{"jsonrpc":"2.0","id":3,"method":"test.echo","params":{}}garbage`,
	"{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"test.echo\",\"params\":{}}\n",
	"\xEF\xBB\xBF{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"test.echo\",\"params\":{}}",
	// B09
	`{"jsonrpc":"2.0","id":1,"method":"test.echo","params":null}`,
	`{"jsonrpc":"2.0","id":2,"method":"test.echo","params":"x"}`,
	`{"jsonrpc":"2.0","id":3,"method":"test.echo","params":42}`,
	`{"jsonrpc":"2.0","id":4,"method":"test.echo","params":[{"a":1}]}`,
	`{"jsonrpc":"2.0","id":5,"method":"test.echo"}`,
	// B11
	`{"jsonrpc":"2.0","id":2,"method":"test.echo","params":{"a":` + nested(100, "") + `}}`,
	`{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":` + nested(62, "") + `}}`,
	`{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":` + nested(63, "") + `}}`,
	// B16
	"{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"test.echo\",\"params\":{\"s\":\"\xff\"}}",
	`{"jsonrpc":"2.0","id":3,"method":"test.echo","params":{"s":"\ud800"}}`,
	// JSON-RPC 2.0 §7
	`{"jsonrpc": "2.0", "method": "subtract", "params": [42, 23], "id": 1}`,
	`{"jsonrpc": "2.0", "method": "subtract", "params": {"subtrahend": 23, "minuend": 42}, "id": 3}`,
	`{"jsonrpc": "2.0", "method": "update", "params": [1,2,3,4,5]}`,
	`{"jsonrpc": "2.0", "method": "foobar"}`,
	`{"jsonrpc": "2.0", "method": "foobar", "id": "1"}`,
	`{"jsonrpc": "2.0", "method": "foobar, "params": "bar", "baz]`,
	`{"jsonrpc": "2.0", "method": 1, "params": "bar"}`,
	`[{"jsonrpc": "2.0", "method": "sum", "params": [1,2,4], "id": "1"},{"jsonrpc": "2.0", "method"]`,
	`[{"jsonrpc": "2.0", "method": "sum", "params": [1,2,4], "id": "1"},{"jsonrpc": "2.0", "method": "notify_hello", "params": [7]},{"jsonrpc": "2.0", "method": "subtract", "params": [42,23], "id": "2"},{"foo": "boo"},{"jsonrpc": "2.0", "method": "foo.get", "params": {"name": "myself"}, "id": "5"},{"jsonrpc": "2.0", "method": "get_data", "id": "9"}]`,
	`[{"jsonrpc": "2.0", "method": "notify_sum", "params": [1,2,4]},{"jsonrpc": "2.0", "method": "notify_hello", "params": [7]}]`,
	// ids, duplicates, escapes
	`{"jsonrpc":"2.0","id":{"a":1},"method":"m"}`,
	`{"jsonrpc":"2.0","id":true,"method":"m"}`,
	`{"jsonrpc":"2.0","id":1,"\u0069d":2,"method":"m"}`,
	`{"jsonrpc":"2\u002e0","id":-1.5e3,"method":"te\u0073t","params":{"x":1,"x":2}}`,
	`{"jsonrpc":"2.0","id":1,"method":"a","foo":1,"foo":2}`,
	`{"jsonrpc":"2.0","method":"a","method":"b"}`,
}

// jsonDepth returns the deepest container nesting of valid JSON, using encoding/json's tokenizer
// as an independent reference.
func jsonDepth(data []byte) (int, bool) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber() // numbers beyond float64 are valid JSON
	depth, deepest := 0, 0
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return deepest, true
		}
		if err != nil {
			return 0, false
		}
		if d, ok := tok.(json.Delim); ok {
			switch d {
			case '{', '[':
				depth++
				deepest = max(deepest, depth)
			default:
				depth--
			}
		}
	}
}

func FuzzDecodeFrame(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		orig := bytes.Clone(data)
		frame := DecodeFrame(data)
		if !bytes.Equal(orig, data) {
			t.Fatal("DecodeFrame modified its input")
		}
		if len(frame.Items) == 0 {
			t.Fatal("no items")
		}
		if !frame.Batch && len(frame.Items) != 1 {
			t.Fatalf("non-batch frame with %d items", len(frame.Items))
		}

		// Differential check of the strict scanner against encoding/json.
		isParseErr := !frame.Batch && frame.Items[0].Err != nil && frame.Items[0].Err.Code == codeParseError
		isDeepErr := !frame.Batch && frame.Items[0].Err != nil && frame.Items[0].Err.Message == msgDepth
		valid := utf8.Valid(data) && json.Valid(data) && !bytes.HasPrefix(data, utf8BOM)
		if valid {
			depth, ok := jsonDepth(data)
			if !ok {
				t.Fatal("encoding/json tokenizer rejects what json.Valid accepts")
			}
			if isDeepErr != (depth > MaxDepth) {
				t.Fatalf("depth %d but depth error = %v", depth, isDeepErr)
			}
			if isParseErr {
				t.Fatalf("valid JSON reported as parse error: %v", frame.Items[0].Err.Data)
			}
		} else if !isParseErr && !(isDeepErr && tooDeep(data)) {
			t.Fatalf("invalid JSON not reported as a parse error: %+v", frame.Items[0])
		}

		// What encoding/json sees in a single request object, for comparison.
		var ref map[string]json.RawMessage
		if valid && !frame.Batch && json.Unmarshal(data, &ref) != nil {
			ref = nil
		}

		for i, it := range frame.Items {
			if (it.Req == nil) == (it.Err == nil) {
				t.Fatalf("item %d: exactly one of Req and Err must be set: %+v", i, it)
			}
			if it.Err != nil {
				out := EncodeError(it.ErrID, it.Err)
				if !json.Valid(out) || !utf8.Valid(out) {
					t.Fatalf("item %d: EncodeError produced invalid output %q", i, out)
				}
				var resp struct {
					ID json.RawMessage `json:"id"`
				}
				if err := json.Unmarshal(out, &resp); err != nil {
					t.Fatal(err)
				}
				wantID := it.ErrID
				if wantID == nil {
					wantID = ID("null")
				}
				if !bytes.Equal(resp.ID, wantID) {
					t.Fatalf("item %d: response id %s, want %s", i, resp.ID, wantID)
				}
				if it.ErrID != nil && !validID(it.ErrID) {
					t.Fatalf("item %d: ErrID %q is not a valid id", i, it.ErrID)
				}
				continue
			}
			r := it.Req
			if it.ErrID != nil {
				t.Fatalf("item %d: ErrID set on a request", i)
			}
			if !utf8.ValidString(r.Method) {
				t.Fatalf("item %d: method is not valid UTF-8", i)
			}
			if r.ID != nil && !validID(r.ID) {
				t.Fatalf("item %d: invalid id %q", i, r.ID)
			}
			if r.Params != nil && ((r.Params[0] != '{' && r.Params[0] != '[') || !json.Valid(r.Params)) {
				t.Fatalf("item %d: invalid params %q", i, r.Params)
			}
			if out := EncodeResultRaw(r.ID, r.Params); !json.Valid(out) {
				t.Fatalf("item %d: EncodeResultRaw produced invalid JSON %q", i, out)
			}
			if ref != nil {
				var method string
				if err := json.Unmarshal(ref["method"], &method); err != nil || method != r.Method {
					t.Fatalf("method %q, encoding/json sees %q (%v)", r.Method, method, err)
				}
				if !bytes.Equal(ref["id"], r.ID) || !bytes.Equal(ref["params"], r.Params) {
					t.Fatalf("id/params %q/%q, encoding/json sees %q/%q", r.ID, r.Params, ref["id"], ref["params"])
				}
			}
			// What we send decodes back to the same call.
			if n := EncodeNotification(r.Method, r.Params); n != nil {
				back := DecodeFrame(n)
				if back.Items[0].Req == nil || back.Items[0].Req.Method != strings.ToValidUTF8(r.Method, "\uFFFD") {
					t.Fatalf("notification round trip failed: %q → %+v", n, back.Items[0])
				}
			}
		}
	})
}

// benchRequest is a typical request frame.
var benchRequest = []byte(`{"jsonrpc":"2.0","id":42,"method":"sessions.prompt","params":{"sessionId":"5b0e7e2c-2f0b-4c47-9d43-7a1c9b0c6d11","text":"Summarise the last three commits and list the files they touched.","attachments":[{"kind":"file","path":"README.md"}]}}`)

// benchBatch is a batch of ten such requests.
var benchBatch = []byte("[" + strings.TrimSuffix(strings.Repeat(string(benchRequest)+",", 10), ",") + "]")

// plainRequest is the baseline: what a non-strict decoder would unmarshal into.
type plainRequest struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params"`
}

// BenchmarkDecodeFrame compares DecodeFrame with a plain json.Unmarshal into a struct (the
// baseline, which checks none of the JSON-RPC rules) on the same inputs.
func BenchmarkDecodeFrame(b *testing.B) {
	b.Run("request/DecodeFrame", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(benchRequest)))
		for b.Loop() {
			if f := DecodeFrame(benchRequest); f.Items[0].Req == nil {
				b.Fatal(f.Items[0].Err)
			}
		}
	})
	b.Run("request/Unmarshal-baseline", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(benchRequest)))
		for b.Loop() {
			var r plainRequest
			if err := json.Unmarshal(benchRequest, &r); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("batch10/DecodeFrame", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(benchBatch)))
		for b.Loop() {
			if f := DecodeFrame(benchBatch); len(f.Items) != 10 {
				b.Fatal(f.Items[0].Err)
			}
		}
	})
	b.Run("batch10/Unmarshal-baseline", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(benchBatch)))
		for b.Loop() {
			var r []plainRequest
			if err := json.Unmarshal(benchBatch, &r); err != nil {
				b.Fatal(err)
			}
		}
	})
}
