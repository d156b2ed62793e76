package protocol

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// FuzzDispatchParams drives every method's params decoding (schema validation, duplicate
// detection, exact member names) with arbitrary bytes: it must never panic, and a failure must be
// a *Error with InvalidParams, naming a JSON pointer in its data.
func FuzzDispatchParams(f *testing.F) {
	for _, s := range []string{
		`{}`, `[]`, `null`, `"x"`, `42`, `{"sessionId":"s","prompt":"p"}`, `{"sessionId":1}`,
		`{"protocolVersion":16}`, `{"protocolVersion":"16"}`, `{"protocolVersion":16,"protocolVersion":17}`,
		`{"sessionId":"s","epoch":"e","afterSeq":9007199254740993}`, `{"SessionId":"s","sessionId":"t"}`,
		`{"a":{"b":{"c":[1,2,{"d":null}]}}}`, `{"prompt":"a\u0000b","sessionId":"\ud800"}`, `{"limit":1e400}`,
	} {
		for _, m := range Methods() {
			f.Add(m.Name, []byte(s))
		}
	}
	f.Fuzz(func(t *testing.T, method string, raw []byte) {
		m := LookupMethod(method)
		if m == nil {
			return
		}
		p := m.NewParams()
		err := DecodeParams(method, raw, p)
		if err == nil {
			// Whatever decoded must encode again.
			if _, err := json.Marshal(p); err != nil {
				t.Fatalf("decoded params do not encode: %v", err)
			}
			return
		}
		var e *Error
		if !errors.As(err, &e) {
			t.Fatalf("not a JSON-RPC error: %v", err)
		}
		if e.Code != CodeInvalidParams {
			t.Fatalf("code %d for %q: %s", e.Code, raw, e.Message)
		}
		if _, ok := e.Data.(*InvalidParamsErrorData); !ok {
			t.Fatalf("InvalidParams without a pointer: %#v", e.Data)
		}
	})
}

// TestDispatchChecks pins the dispatcher's order of checks with a handler-free call path.
func TestDispatchChecks(t *testing.T) {
	ctx := context.Background()
	_, err := Dispatch(ctx, nil, ScopeChat, "sessions.nope", nil)
	requireCode(t, err, CodeMethodNotFound, `Unknown method "sessions.nope".`)
	_, err = Dispatch(ctx, nil, ScopeChat, MethodMachineRegister, nil)
	requireCode(t, err, CodeWrongConnectionKind, `"machine.register" needs a machine connection (a machine-scoped token); this is a client connection.`)
	_, err = Dispatch(ctx, nil, ScopeMachine, MethodSessionsList, nil)
	requireCode(t, err, CodeWrongConnectionKind, `"sessions.list" needs a client connection (a chat or admin token); this is a machine connection.`)
	_, err = Dispatch(ctx, nil, ScopeChat, MethodTokensList, nil)
	requireCode(t, err, CodeForbidden, `"tokens.list" needs an admin token; this connection's token has scope chat.`)
	_, err = Dispatch(ctx, nil, ScopeChat, MethodSessionsGet, json.RawMessage(`{"sessionId":5}`))
	requireCode(t, err, CodeInvalidParams, "params/sessionId: expected string, but got number.")
	_, err = Dispatch(ctx, nil, ScopeChat, MethodSessionsGet, json.RawMessage(`{"sessionId":"a","sessionId":"b"}`))
	requireCode(t, err, CodeInvalidParams, `params: duplicate member "sessionId"; send each member once.`)
	_, err = Dispatch(ctx, nil, ScopeChat, MethodSessionsGet, json.RawMessage(`{"SessionId":"a"}`))
	requireCode(t, err, CodeInvalidParams, "params: missing properties: 'sessionId'.")
	_, err = Dispatch(ctx, nil, ScopeChat, MethodSessionsGet, json.RawMessage(`[1]`))
	requireCode(t, err, CodeInvalidParams, "params must be an object.")
}

func requireCode(t *testing.T, err error, code int, msg string) {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("want error %d, got %v", code, err)
	}
	if e.Code != code || e.Message != msg {
		t.Fatalf("want %d %q, got %d %q", code, msg, e.Code, e.Message)
	}
}

// TestIntegralNumbers: 16.0 and 1.6e1 are integers to JSON Schema and decode as 16; an int32
// member refuses 2^31 with its pointer (adversarial review).
func TestIntegralNumbers(t *testing.T) {
	for _, raw := range []string{`{"protocolVersion":16.0}`, `{"protocolVersion":1.6e1}`, `{"protocolVersion":16}`,
		`{"protocolVersion":16.0,"zz":1}`, `{"zz":1,"protocolVersion":1.6e1}`} { // an unknown member dropped too (a break-it helper's report)
		var p IPCHelloParams
		if err := DecodeParams(MethodIPCHello, json.RawMessage(raw), &p); err != nil || p.ProtocolVersion != 16 {
			t.Fatalf("%s: %v %+v", raw, err, p)
		}
	}
	var p IPCHelloParams
	err := DecodeParams(MethodIPCHello, json.RawMessage(`{"protocolVersion":2147483648}`), &p)
	var e *Error
	if !errors.As(err, &e) || e.Code != CodeInvalidParams || e.Message != "params/protocolVersion: must be <= 2147483647 but found 2147483648." {
		t.Fatalf("2^31: %v", err)
	}
	err = DecodeParams(MethodIPCHello, json.RawMessage(`{"protocolVersion":16.5}`), &p)
	requireCode(t, err, CodeInvalidParams, "params/protocolVersion: expected integer, but got number.")
	err = DecodeParams(MethodIPCHello, json.RawMessage(`{"protocolVersion":1e400}`), &p)
	if !errors.As(err, &e) || e.Code != CodeInvalidParams || strings.Contains(e.Message, "Go") {
		t.Fatalf("1e400: %v", err)
	}
}

// TestParamsValueBound: params with more values than MaxParamsValues are refused before the full
// check decodes them (a break-it helper sent 5 million `{}` in an unknown member: 6 s, 400 MB);
// values inside strings do not count.
func TestParamsValueBound(t *testing.T) {
	big := `{"sessionId":"s","prompt":"p","junk":[` + strings.Repeat(`{},`, MaxParamsValues) + `{}]}`
	var p ChatSendParams
	err := DecodeParams(MethodChatSend, json.RawMessage(big), &p)
	requireCode(t, err, CodeInvalidParams, "params: more than 100000 JSON values (unknown members count too); send fewer.")
	text := `{"sessionId":"s","prompt":"` + strings.Repeat(`{},[\",`, MaxParamsValues) + `","junk":[1,2]}`
	if err := DecodeParams(MethodChatSend, json.RawMessage(text), &p); err != nil {
		t.Fatalf("a prompt full of braces and commas: %v", err)
	}
}
