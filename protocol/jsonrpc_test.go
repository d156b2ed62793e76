package protocol

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// noAnswer is the wantItem.errID of an error item that must not be answered (a notification).
const noAnswer = ""

// wantItem describes one expected Item. For a request: req is set. For an error: code, msg
// and errID (the raw id, or noAnswer for a nil ErrID).
type wantItem struct {
	req   *wantReq
	code  int
	msg   string
	errID string
}

type wantReq struct {
	id     string // "" = absent (notification)
	method string
	params string // "" = absent
}

func req(id, method, params string) wantItem {
	return wantItem{req: &wantReq{id: id, method: method, params: params}}
}

func errItem(code int, msg, errID string) wantItem {
	return wantItem{code: code, msg: msg, errID: errID}
}

func invalidReq(msg, errID string) wantItem { return errItem(codeInvalidRequest, msg, errID) }

var parseErr = errItem(codeParseError, msgParse, "null")

type frameCase struct {
	name  string
	in    string
	batch bool
	items []wantItem
}

func single(name, in string, item wantItem) frameCase {
	return frameCase{name: name, in: in, items: []wantItem{item}}
}

func batchOf(name, in string, items ...wantItem) frameCase {
	return frameCase{name: name, in: in, batch: true, items: items}
}

func checkFrame(t *testing.T, in string, batch bool, want []wantItem) Frame {
	t.Helper()
	f := DecodeFrame([]byte(in))
	assert.Equal(t, batch, f.Batch, "Batch")
	require.Len(t, f.Items, len(want), "Items")
	for i, w := range want {
		got := f.Items[i]
		if w.req != nil {
			require.Nil(t, got.Err, "item %d: unexpected error", i)
			require.NotNil(t, got.Req, "item %d", i)
			assert.Nil(t, got.ErrID, "item %d: ErrID of a request", i)
			if w.req.id == "" {
				assert.Nil(t, got.Req.ID, "item %d: ID", i)
				assert.True(t, got.Req.IsNotification(), "item %d: IsNotification", i)
			} else {
				assert.Equal(t, w.req.id, string(got.Req.ID), "item %d: ID", i)
				assert.False(t, got.Req.IsNotification(), "item %d: IsNotification", i)
			}
			assert.Equal(t, w.req.method, got.Req.Method, "item %d: Method", i)
			if w.req.params == "" {
				assert.Nil(t, got.Req.Params, "item %d: Params", i)
			} else {
				assert.Equal(t, w.req.params, string(got.Req.Params), "item %d: Params", i)
			}
			continue
		}
		require.Nil(t, got.Req, "item %d: unexpected request", i)
		require.NotNil(t, got.Err, "item %d", i)
		assert.Equal(t, w.code, got.Err.Code, "item %d: code", i)
		assert.Equal(t, w.msg, got.Err.Message, "item %d: message", i)
		if w.errID == noAnswer {
			assert.Nil(t, got.ErrID, "item %d: ErrID must be nil (notification, no answer)", i)
		} else {
			assert.Equal(t, w.errID, string(got.ErrID), "item %d: ErrID", i)
		}
	}
	return f
}

func runFrameCases(t *testing.T, cases []frameCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			checkFrame(t, tc.in, tc.batch, tc.items)
		})
	}
}

func TestFieldCase_B01_EmptyBatch(t *testing.T) {
	emptyBatch := invalidReq(msgEmptyBatch, "null")
	runFrameCases(t, []frameCase{
		single("empty", `[]`, emptyBatch),
		single("spaces inside", "[ \t\r\n]", emptyBatch),
		single("spaces around", " \n[]\n ", emptyBatch),
	})
	f := DecodeFrame([]byte(`[]`))
	assert.JSONEq(t, `{"jsonrpc":"2.0","error":{"code":-32600,"message":"Invalid Request: an empty batch is not a request."},"id":null}`,
		string(EncodeError(f.Items[0].ErrID, f.Items[0].Err)))
	assert.Equal(t, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: an empty batch is not a request."}}`,
		string(EncodeError(f.Items[0].ErrID, f.Items[0].Err)))
}

func TestFieldCase_B01_BatchOfNonObjects(t *testing.T) {
	notObj := invalidReq(msgNotObject, "null")
	runFrameCases(t, []frameCase{
		batchOf("one number", `[1]`, notObj),
		batchOf("three numbers", `[1,2,3]`, notObj, notObj, notObj),
		batchOf("mixed scalars and containers", `["x", null, true, [], [{"jsonrpc":"2.0","id":1,"method":"m"}]]`,
			notObj, notObj, notObj, notObj, notObj),
		batchOf("one valid request", `[{"jsonrpc":"2.0","id":1,"method":"test.echo","params":{}}]`,
			req("1", "test.echo", "{}")),
	})

	f := DecodeFrame([]byte(`[1,2,3]`))
	var responses [][]byte
	for _, it := range f.Items {
		responses = append(responses, EncodeError(it.ErrID, it.Err))
	}
	one := `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: a request must be a JSON object with \"jsonrpc\":\"2.0\" and a string \"method\"."}}`
	assert.Equal(t, "["+one+","+one+","+one+"]", string(EncodeBatch(responses)))

	f = DecodeFrame([]byte(`[{"jsonrpc":"2.0","id":1,"method":"test.echo","params":{}}]`))
	require.True(t, f.Batch)
	res := EncodeResultRaw(f.Items[0].Req.ID, f.Items[0].Req.Params)
	assert.Equal(t, `[{"jsonrpc":"2.0","id":1,"result":{}}]`, string(EncodeBatch([][]byte{res})),
		"a one-element batch is still answered with an array")
}

func TestFieldCase_B02_AllNotificationBatch(t *testing.T) {
	runFrameCases(t, []frameCase{
		batchOf("two notifications",
			`[{"jsonrpc":"2.0","method":"test.echo","params":{"a":1}},
			  {"jsonrpc":"2.0","method":"test.echo","params":{"a":2}}]`,
			req("", "test.echo", `{"a":1}`), req("", "test.echo", `{"a":2}`)),
		single("probe after it", `{"jsonrpc":"2.0","id":9,"method":"test.echo","params":{}}`,
			req("9", "test.echo", "{}")),
	})
	// Nothing to answer → no frame at all.
	assert.Nil(t, EncodeBatch(nil))
	assert.Nil(t, EncodeBatch([][]byte{}))
}

func TestFieldCase_B02_MixedBatch(t *testing.T) {
	in := `[{"jsonrpc":"2.0","id":1,"method":"test.echo","params":{}},
	   {"jsonrpc":"2.0","method":"test.echo","params":{}},
	   {"jsonrpc":"2.0","method":"no.such.method"},
	   {"foo":"bar"}]`
	f := checkFrame(t, in, true, []wantItem{
		req("1", "test.echo", "{}"),
		req("", "test.echo", "{}"),
		req("", "no.such.method", ""),
		invalidReq(msgJSONRPC, "null"),
	})
	// What a dispatcher does: answer requests and answerable errors, skip notifications.
	var responses [][]byte
	for _, it := range f.Items {
		switch {
		case it.Req != nil && !it.Req.IsNotification():
			responses = append(responses, EncodeResultRaw(it.Req.ID, it.Req.Params))
		case it.Err != nil && it.ErrID != nil:
			responses = append(responses, EncodeError(it.ErrID, it.Err))
		}
	}
	assert.Equal(t, `[{"jsonrpc":"2.0","id":1,"result":{}},`+
		`{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: \"jsonrpc\" must be the string \"2.0\"."}}]`,
		string(EncodeBatch(responses)))
}

func TestFieldCase_B03_IDNullOrEcho(t *testing.T) {
	runFrameCases(t, []frameCase{
		single("truncated JSON", `{"jsonrpc":"2.0","method":"test.echo","params":`, parseErr),
		single("method not a string", `{"jsonrpc":"2.0","method":1,"params":{},"id":5}`, invalidReq(msgMethod, "5")),
		single("no method", `{"jsonrpc":"2.0","params":[1],"id":6}`, invalidReq(msgMethod, "6")),
	})
	f := DecodeFrame([]byte(`{"jsonrpc":"2.0","method":"test.echo","params":`))
	got := EncodeError(f.Items[0].ErrID, f.Items[0].Err)
	assert.Equal(t, `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error: the frame must hold exactly one JSON value (RFC 8259).","data":"byte 47: unexpected end of the frame; a value was expected"}}`,
		string(got))
	var m map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(got, &m))
	assert.Contains(t, m, "id", "the id member must be present")
	assert.NotContains(t, m, "result")

	f = DecodeFrame([]byte(`{"jsonrpc":"2.0","method":1,"params":{},"id":5}`))
	assert.Equal(t, `{"jsonrpc":"2.0","id":5,"error":{"code":-32600,"message":"Invalid Request: \"method\" must be a string."}}`,
		string(EncodeError(f.Items[0].ErrID, f.Items[0].Err)))
}

func TestFieldCase_B04_Notifications(t *testing.T) {
	runFrameCases(t, []frameCase{
		single("unknown method notification", `{"jsonrpc":"2.0","method":"no.such.method"}`,
			req("", "no.such.method", "")),
		single("invalid params notification is not answered", `{"jsonrpc":"2.0","method":"test.echo","params":"x"}`,
			invalidReq(msgParams, noAnswer)),
		single("probe", `{"jsonrpc":"2.0","id":10,"method":"test.echo","params":{}}`,
			req("10", "test.echo", "{}")),
		single("notification before hello", `{"jsonrpc":"2.0","method":"test.echo","params":{}}`,
			req("", "test.echo", "{}")),
		single("id null is a request", `{"jsonrpc":"2.0","id":null,"method":"test.echo","params":{}}`,
			req("null", "test.echo", "{}")),
		batchOf("invalid notification inside a batch", `[{"jsonrpc":"2.0","method":"a","params":null},{"jsonrpc":"2.0","method":"b","params":1}]`,
			invalidReq(msgParams, noAnswer), invalidReq(msgParams, noAnswer)),
		single("id null with an error is answered with null", `{"jsonrpc":"2.0","id":null,"method":"m","params":1}`,
			invalidReq(msgParams, "null")),
	})
	f := DecodeFrame([]byte(`{"jsonrpc":"2.0","id":null,"method":"test.echo","params":{}}`))
	b, err := EncodeResult(f.Items[0].Req.ID, map[string]int{})
	require.NoError(t, err)
	assert.Equal(t, `{"jsonrpc":"2.0","id":null,"result":{}}`, string(b))
}

func TestFieldCase_B06_JSONRPCVersion(t *testing.T) {
	runFrameCases(t, []frameCase{
		single("missing", `{"id":1,"method":"test.echo","params":{}}`, invalidReq(msgJSONRPC, "1")),
		single("1.0", `{"jsonrpc":"1.0","id":2,"method":"test.echo","params":{}}`, invalidReq(msgJSONRPC, "2")),
		single("number 2.0", `{"jsonrpc":2.0,"id":3,"method":"test.echo","params":{}}`, invalidReq(msgJSONRPC, "3")),
		single("trailing space", `{"jsonrpc":"2.0 ","id":4,"method":"test.echo","params":{}}`, invalidReq(msgJSONRPC, "4")),
		single("null", `{"jsonrpc":null,"id":"a","method":"m"}`, invalidReq(msgJSONRPC, `"a"`)),
		single("escaped 2.0 is the same string", `{"jsonrpc":"2\u002e0","id":5,"method":"m"}`, req("5", "m", "")),
		single("no jsonrpc and no id", `{"method":"m"}`, invalidReq(msgJSONRPC, "null")),
	})
	f := DecodeFrame([]byte(`{"jsonrpc":"1.0","id":2,"method":"test.echo","params":{}}`))
	assert.Equal(t, `{"jsonrpc":"2.0","id":2,"error":{"code":-32600,"message":"Invalid Request: \"jsonrpc\" must be the string \"2.0\"."}}`,
		string(EncodeError(f.Items[0].ErrID, f.Items[0].Err)))
}

func TestFieldCase_B08_TrailingData(t *testing.T) {
	runFrameCases(t, []frameCase{
		single("two values", `{"jsonrpc":"2.0","id":1,"method":"test.echo","params":{}} {"jsonrpc":"2.0","id":2,"method":"test.echo","params":{}}`, parseErr),
		single("garbage", `{"jsonrpc":"2.0","id":3,"method":"test.echo","params":{}}garbage`, parseErr),
		single("trailing newline", "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"test.echo\",\"params\":{}}\n", req("4", "test.echo", "{}")),
		single("leading BOM", "\xEF\xBB\xBF{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"test.echo\",\"params\":{}}", parseErr),
		single("batch then garbage", `[{"jsonrpc":"2.0","id":1,"method":"m"}] x`, parseErr),
		single("two batches", `[] []`, parseErr),
		single("closing bracket too many", `{"jsonrpc":"2.0","id":1,"method":"m"}}`, parseErr),
		single("NUL after value", "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\"}\x00", parseErr),
		single("non-JSON whitespace after value", "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\"}\u00a0", parseErr),
		single("all JSON whitespace around", " \t\r\n{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\"} \t\r\n", req("1", "m", "")),
	})
	f := DecodeFrame([]byte(`{"jsonrpc":"2.0","id":3,"method":"test.echo","params":{}}garbage`))
	assert.Equal(t, `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error: the frame must hold exactly one JSON value (RFC 8259).","data":"byte 57: data after the JSON value; send one JSON value per frame"}}`,
		string(EncodeError(f.Items[0].ErrID, f.Items[0].Err)))
}

func TestFieldCase_B09_Params(t *testing.T) {
	runFrameCases(t, []frameCase{
		single("null", `{"jsonrpc":"2.0","id":1,"method":"test.echo","params":null}`, invalidReq(msgParams, "1")),
		single("string", `{"jsonrpc":"2.0","id":2,"method":"test.echo","params":"x"}`, invalidReq(msgParams, "2")),
		single("number", `{"jsonrpc":"2.0","id":3,"method":"test.echo","params":42}`, invalidReq(msgParams, "3")),
		single("array (dispatch answers -32602)", `{"jsonrpc":"2.0","id":4,"method":"test.echo","params":[{"a":1}]}`,
			req("4", "test.echo", `[{"a":1}]`)),
		single("omitted", `{"jsonrpc":"2.0","id":5,"method":"test.echo"}`, req("5", "test.echo", "")),
		single("boolean", `{"jsonrpc":"2.0","id":6,"method":"test.echo","params":true}`, invalidReq(msgParams, "6")),
		single("raw bytes kept", `{"jsonrpc":"2.0","id":7,"method":"m","params": { "b" : [ 1 , 2.50 ] , "a":"\u00e9" } }`,
			req("7", "m", `{ "b" : [ 1 , 2.50 ] , "a":"\u00e9" }`)),
	})
	f := DecodeFrame([]byte(`{"jsonrpc":"2.0","id":1,"method":"test.echo","params":null}`))
	assert.Equal(t, `{"jsonrpc":"2.0","id":1,"error":{"code":-32600,"message":"Invalid Request: params must be an object (every method takes named params), or left out."}}`,
		string(EncodeError(f.Items[0].ErrID, f.Items[0].Err)))
}

func nested(depth int, inner string) string {
	return strings.Repeat("[", depth) + inner + strings.Repeat("]", depth)
}

func TestFieldCase_B11_Depth(t *testing.T) {
	deep := invalidReq(msgDepth, "null")
	params20k := `{"a":` + nested(20000, "") + `}`
	runFrameCases(t, []frameCase{
		single("params nested 20000 deep", `{"jsonrpc":"2.0","id":2,"method":"test.echo","params":`+params20k+`}`, deep),
		// The request object is level 1, params level 2, so 62 arrays inside params make 64.
		single("exactly 64 levels", `{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":`+nested(62, "")+`}}`,
			req("1", "m", `{"a":`+nested(62, "")+`}`)),
		single("65 levels", `{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":`+nested(63, "")+`}}`, deep),
		single("the batch array counts", `[{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":`+nested(62, "")+`}}]`, deep),
		batchOf("64 levels in a batch", `[{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":`+nested(61, "")+`}}]`,
			req("1", "m", `{"a":`+nested(61, "")+`}`)),
		single("brackets inside strings do not count", `{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":"`+strings.Repeat(`[{\"`, 100)+`"}}`,
			req("1", "m", `{"a":"`+strings.Repeat(`[{\"`, 100)+`"}`)),
		single("deep and unterminated", strings.Repeat("[", 100), deep),
		single("deep objects", strings.Repeat(`{"a":`, 65)+"1"+strings.Repeat("}", 65), deep),
	})

	t.Run("a million levels is refused quickly", func(t *testing.T) {
		in := []byte(nested(1_000_000, ""))
		start := time.Now()
		f := DecodeFrame(in)
		elapsed := time.Since(start)
		require.Len(t, f.Items, 1)
		assert.False(t, f.Batch)
		assert.Equal(t, codeInvalidRequest, f.Items[0].Err.Code)
		assert.Equal(t, msgDepth, f.Items[0].Err.Message)
		assert.Equal(t, "null", string(f.Items[0].ErrID))
		assert.Less(t, elapsed, 2*time.Second)
	})
	f := DecodeFrame([]byte(nested(100, "")))
	assert.Equal(t, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: nesting deeper than 64 levels"}}`,
		string(EncodeError(f.Items[0].ErrID, f.Items[0].Err)))
}

func TestFieldCase_B16_TextOnly(t *testing.T) {
	runFrameCases(t, []frameCase{
		single("(b) invalid UTF-8 in a string", "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"test.echo\",\"params\":{\"s\":\"\xff\"}}", parseErr),
		single("(b) invalid UTF-8 outside strings", "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"m\"}\xc3", parseErr),
		// (c) is valid UTF-8 and valid JSON: framing accepts it and keeps the escape byte for byte.
		single("(c) escaped lone surrogate", `{"jsonrpc":"2.0","id":3,"method":"test.echo","params":{"s":"\ud800"}}`,
			req("3", "test.echo", `{"s":"\ud800"}`)),
		single("valid multi-byte UTF-8", `{"jsonrpc":"2.0","id":4,"method":"test.echo","params":{"s":"😀é"}}`,
			req("4", "test.echo", `{"s":"😀é"}`)),
	})
	f := DecodeFrame([]byte("{\"s\":\"\xff\"}"))
	assert.Equal(t, "byte 6: invalid UTF-8; a text frame must be UTF-8", f.Items[0].Err.Data)
}

// JSON-RPC 2.0 specification §7, the examples about decoding.
func TestJSONRPCSpec_Section7(t *testing.T) {
	notObj := invalidReq(msgNotObject, "null")
	runFrameCases(t, []frameCase{
		single("positional params", `{"jsonrpc": "2.0", "method": "subtract", "params": [42, 23], "id": 1}`,
			req("1", "subtract", "[42, 23]")),
		single("named params", `{"jsonrpc": "2.0", "method": "subtract", "params": {"subtrahend": 23, "minuend": 42}, "id": 3}`,
			req("3", "subtract", `{"subtrahend": 23, "minuend": 42}`)),
		single("notification", `{"jsonrpc": "2.0", "method": "update", "params": [1,2,3,4,5]}`,
			req("", "update", "[1,2,3,4,5]")),
		single("notification without params", `{"jsonrpc": "2.0", "method": "foobar"}`, req("", "foobar", "")),
		single("non-existent method", `{"jsonrpc": "2.0", "method": "foobar", "id": "1"}`, req(`"1"`, "foobar", "")),
		single("invalid JSON", `{"jsonrpc": "2.0", "method": "foobar, "params": "bar", "baz]`, parseErr),
		single("invalid Request object", `{"jsonrpc": "2.0", "method": 1, "params": "bar"}`, invalidReq(msgMethod, "null")),
		single("batch, invalid JSON", `[
  {"jsonrpc": "2.0", "method": "sum", "params": [1,2,4], "id": "1"},
  {"jsonrpc": "2.0", "method"
]`, parseErr),
		single("empty Array", `[]`, invalidReq(msgEmptyBatch, "null")),
		batchOf("invalid batch but not empty", `[1]`, notObj),
		batchOf("invalid batch", `[1,2,3]`, notObj, notObj, notObj),
		batchOf("batch", `[
        {"jsonrpc": "2.0", "method": "sum", "params": [1,2,4], "id": "1"},
        {"jsonrpc": "2.0", "method": "notify_hello", "params": [7]},
        {"jsonrpc": "2.0", "method": "subtract", "params": [42,23], "id": "2"},
        {"foo": "boo"},
        {"jsonrpc": "2.0", "method": "foo.get", "params": {"name": "myself"}, "id": "5"},
        {"jsonrpc": "2.0", "method": "get_data", "id": "9"} 
    ]`,
			req(`"1"`, "sum", "[1,2,4]"),
			req("", "notify_hello", "[7]"),
			req(`"2"`, "subtract", "[42,23]"),
			invalidReq(msgJSONRPC, "null"),
			req(`"5"`, "foo.get", `{"name": "myself"}`),
			req(`"9"`, "get_data", "")),
		batchOf("batch, all notifications", `[
        {"jsonrpc": "2.0", "method": "notify_sum", "params": [1,2,4]},
        {"jsonrpc": "2.0", "method": "notify_hello", "params": [7]}
    ]`,
			req("", "notify_sum", "[1,2,4]"), req("", "notify_hello", "[7]")),
	})
}

func TestDecodeFrame_IDs(t *testing.T) {
	runFrameCases(t, []frameCase{
		single("string", `{"jsonrpc":"2.0","id":"abc","method":"m"}`, req(`"abc"`, "m", "")),
		single("escaped string kept raw", `{"jsonrpc":"2.0","id":"a\"b\u00e9","method":"m"}`, req(`"a\"b\u00e9"`, "m", "")),
		single("integer", `{"jsonrpc":"2.0","id":42,"method":"m"}`, req("42", "m", "")),
		single("negative zero", `{"jsonrpc":"2.0","id":-0,"method":"m"}`, req("-0", "m", "")),
		single("fraction", `{"jsonrpc":"2.0","id":1.50,"method":"m"}`, req("1.50", "m", "")),
		single("beyond float64", `{"jsonrpc":"2.0","id":1e400,"method":"m"}`, req("1e400", "m", "")),
		single("beyond 2^64", `{"jsonrpc":"2.0","id":123456789012345678901234567890,"method":"m"}`,
			req("123456789012345678901234567890", "m", "")),
		single("null", `{"jsonrpc":"2.0","id":null,"method":"m"}`, req("null", "m", "")),
		single("object", `{"jsonrpc":"2.0","id":{"a":1},"method":"m"}`, invalidReq(msgIDType, "null")),
		single("array", `{"jsonrpc":"2.0","id":[1],"method":"m"}`, invalidReq(msgIDType, "null")),
		single("true", `{"jsonrpc":"2.0","id":true,"method":"m"}`, invalidReq(msgIDType, "null")),
		single("false", `{"jsonrpc":"2.0","id":false,"method":"m"}`, invalidReq(msgIDType, "null")),
		single("duplicate id", `{"jsonrpc":"2.0","id":1,"id":2,"method":"m"}`, invalidReq(`Invalid Request: duplicate member "id".`, "null")),
		single("duplicate id spelled with an escape", `{"jsonrpc":"2.0","id":1,"\u0069d":2,"method":"m"}`,
			invalidReq(`Invalid Request: duplicate member "id".`, "null")),
		single("escaped member name is the same member", `{"\u006aSONRPC":1,"jsonrp\u0063":"2.0","\u0069d":7,"method":"m"}`,
			req("7", "m", "")),
		single("id after an error", `{"jsonrpc":"2.0","method":7,"id":"late"}`, invalidReq(msgMethod, `"late"`)),
	})
}

func TestDecodeFrame_DuplicateMembers(t *testing.T) {
	many := `{"jsonrpc":"2.0","id":1,"method":"m"`
	for i := 0; i < 40; i++ {
		many += `,"k` + strings.Repeat("x", i) + `":0`
	}
	runFrameCases(t, []frameCase{
		single("method", `{"jsonrpc":"2.0","id":1,"method":"a","method":"b"}`, invalidReq(`Invalid Request: duplicate member "method".`, "1")),
		single("jsonrpc", `{"jsonrpc":"2.0","jsonrpc":"2.0","id":"x","method":"a"}`, invalidReq(`Invalid Request: duplicate member "jsonrpc".`, `"x"`)),
		single("params", `{"jsonrpc":"2.0","id":1,"method":"a","params":{},"params":[]}`, invalidReq(`Invalid Request: duplicate member "params".`, "1")),
		single("unknown member", `{"jsonrpc":"2.0","id":1,"method":"a","foo":1,"foo":2}`, invalidReq(`Invalid Request: duplicate member "foo".`, "1")),
		single("in a notification: not answered", `{"jsonrpc":"2.0","method":"a","method":"b"}`, invalidReq(`Invalid Request: duplicate member "method".`, noAnswer)),
		single("inside params is fine", `{"jsonrpc":"2.0","id":1,"method":"a","params":{"x":1,"x":2}}`, req("1", "a", `{"x":1,"x":2}`)),
		single("many members, no duplicate", many+"}", req("1", "m", "")),
		single("many members, late duplicate", many+`,"kxxx":1}`, invalidReq(`Invalid Request: duplicate member "kxxx".`, "1")),
		single("long duplicate name is shortened", `{"jsonrpc":"2.0","id":1,"method":"a","`+strings.Repeat("é", 40)+`":1,"`+strings.Repeat("é", 40)+`":2}`,
			invalidReq(`Invalid Request: duplicate member "`+strings.Repeat("é", 32)+`…".`, "1")),
	})
}

func TestDecodeFrame_NotRequests(t *testing.T) {
	notObj := invalidReq(msgNotObject, "null")
	runFrameCases(t, []frameCase{
		single("number", `1`, notObj),
		single("string", `"x"`, notObj),
		single("null", `null`, notObj),
		single("true", ` true `, notObj),
		single("empty object", `{}`, invalidReq(msgJSONRPC, "null")),
		single("only an id", `{"id":3}`, invalidReq(msgJSONRPC, "3")),
		single("method missing in a 2.0 notification", `{"jsonrpc":"2.0"}`, invalidReq(msgMethod, "null")),
		single("unknown members ignored", `{"jsonrpc":"2.0","id":1,"method":"m","result":1,"error":{},"x":[]}`, req("1", "m", "")),
		single("escaped method", `{"jsonrpc":"2.0","id":1,"method":"te\u0073t.\"echo\""}`, req("1", `test."echo"`, "")),
		single("empty method", `{"jsonrpc":"2.0","id":1,"method":""}`, req("1", "", "")),
	})
}

func TestDecodeFrame_ParseErrors(t *testing.T) {
	inputs := map[string]string{
		"empty":                  "",
		"only whitespace":        " \t\r\n",
		"open object":            `{`,
		"missing colon":          `{"a" 1}`,
		"missing value":          `{"a":}`,
		"trailing comma object":  `{"a":1,}`,
		"trailing comma array":   `[1,]`,
		"leading comma":          `[,1]`,
		"unquoted key":           `{a:1}`,
		"single quotes":          `{'a':1}`,
		"leading zero":           `01`,
		"plus sign":              `+1`,
		"bare dot":               `.5`,
		"dot without digits":     `1.`,
		"exponent without digit": `1e+`,
		"NaN":                    `NaN`,
		"Infinity":               `[-Infinity]`,
		"short literal":          `nul`,
		"capital literal":        `True`,
		"control char in string": "\"a\x01b\"",
		"tab in string":          "\"a\tb\"",
		"bad escape":             `"\q"`,
		"short unicode escape":   `"\u12"`,
		"non-hex unicode escape": `"\u12g4"`,
		"unterminated string":    `"abc`,
		"unterminated escape":    `"abc\`,
		"hex number":             `0x10`,
		"comment":                `{"a":1} // c`,
		"form feed whitespace":   "\f{}",
		"batch missing comma":    `[{} {}]`,
		"batch unterminated":     `[{"jsonrpc":"2.0","id":1,"method":"m"}`,
		"object missing comma":   `{"a":1 "b":2}`,
		"key not a string":       `{1:2}`,
		"lone minus":             `-`,
		"minus then letter":      `-a`,
	}
	for name, in := range inputs {
		t.Run(name, func(t *testing.T) {
			f := checkFrame(t, in, false, []wantItem{parseErr})
			assert.False(t, json.Valid([]byte(in)), "encoding/json agrees it is not JSON")
			data, ok := f.Items[0].Err.Data.(string)
			require.True(t, ok, "parse errors carry a detail string")
			assert.True(t, strings.HasPrefix(data, "byte "), data)
		})
	}
}

func TestDecodeFrame_CopiesInput(t *testing.T) {
	in := []byte(`[{"jsonrpc":"2.0","id":"a","method":"m","params":[1]},{"jsonrpc":"2.0","id":2,"method":"n","params":{}}]`)
	f := DecodeFrame(in)
	require.Len(t, f.Items, 2)
	for i := range in {
		in[i] = 'X'
	}
	assert.Equal(t, `"a"`, string(f.Items[0].Req.ID))
	assert.Equal(t, "[1]", string(f.Items[0].Req.Params))
	// Appending to one raw slice must not overwrite the next item's bytes.
	_ = append(f.Items[0].Req.Params, "junkjunkjunk"...)
	_ = append(f.Items[0].Req.ID, "junkjunkjunk"...)
	assert.Equal(t, "2", string(f.Items[1].Req.ID))
	assert.Equal(t, "{}", string(f.Items[1].Req.Params))
}

func TestRequest_IsNotification(t *testing.T) {
	assert.True(t, (&Request{Method: "m"}).IsNotification())
	assert.False(t, (&Request{ID: ID("null"), Method: "m"}).IsNotification())
	assert.False(t, (&Request{ID: ID("1"), Method: "m"}).IsNotification())
	var r *Request
	assert.False(t, r.IsNotification())
}

func TestError_Error(t *testing.T) {
	var err error = &Error{Code: -32601, Message: "Method not found"}
	assert.Equal(t, "jsonrpc error -32601: Method not found", err.Error())
	var nilErr *Error
	assert.Equal(t, "jsonrpc error: <nil>", nilErr.Error())
}

func TestEncodeResult(t *testing.T) {
	cases := []struct {
		name   string
		id     ID
		result any
		want   string
	}{
		{"nil result", ID("1"), nil, `{"jsonrpc":"2.0","id":1,"result":null}`},
		{"struct", ID(`"a"`), struct {
			OK bool `json:"ok"`
		}{true}, `{"jsonrpc":"2.0","id":"a","result":{"ok":true}}`},
		{"nil id", nil, 1, `{"jsonrpc":"2.0","id":null,"result":1}`},
		{"malformed id", ID("{}"), 1, `{"jsonrpc":"2.0","id":null,"result":1}`},
		{"invalid UTF-8 string", ID("1"), "a\xffb", `{"jsonrpc":"2.0","id":1,"result":"a\ufffdb"}`},
		{"invalid UTF-8 raw message", ID("1"), json.RawMessage("\"a\xffb\""), "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":\"a\uFFFDb\"}"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := EncodeResult(tc.id, tc.result)
			require.NoError(t, err)
			assert.Equal(t, tc.want, string(got))
			assert.True(t, json.Valid(got))
			assert.True(t, utf8.Valid(got))
		})
	}
	_, err := EncodeResult(ID("1"), make(chan int))
	assert.Error(t, err)
}

func TestEncodeResultRaw(t *testing.T) {
	cases := []struct {
		name   string
		id     ID
		result json.RawMessage
		want   string
	}{
		{"nil", ID("1"), nil, `{"jsonrpc":"2.0","id":1,"result":null}`},
		{"object", ID("1"), json.RawMessage(`{"a":[1,2]}`), `{"jsonrpc":"2.0","id":1,"result":{"a":[1,2]}}`},
		{"invalid UTF-8 repaired", ID("1"), json.RawMessage("\"\xff\""), "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":\"\uFFFD\"}"},
		{"not JSON becomes an internal error", ID("7"), json.RawMessage(`{"a":`),
			`{"jsonrpc":"2.0","id":7,"error":{"code":-32603,"message":"Internal error: the server produced a result that is not valid JSON."}}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := EncodeResultRaw(tc.id, tc.result)
			assert.Equal(t, tc.want, string(got))
			assert.True(t, json.Valid(got))
		})
	}
}

func TestEncodeError(t *testing.T) {
	cases := []struct {
		name string
		id   ID
		err  *Error
		want string
	}{
		{"nil id", nil, &Error{Code: -32601, Message: "Method not found"},
			`{"jsonrpc":"2.0","id":null,"error":{"code":-32601,"message":"Method not found"}}`},
		{"string id with data", ID(`"x"`), &Error{Code: -32602, Message: "Invalid params", Data: map[string]string{"pointer": "/a"}},
			`{"jsonrpc":"2.0","id":"x","error":{"code":-32602,"message":"Invalid params","data":{"pointer":"/a"}}}`},
		{"malformed id", ID(`1 2`), &Error{Code: 1, Message: "m"},
			`{"jsonrpc":"2.0","id":null,"error":{"code":1,"message":"m"}}`},
		{"id with invalid UTF-8", ID("\"\xff\""), &Error{Code: 1, Message: "m"},
			`{"jsonrpc":"2.0","id":null,"error":{"code":1,"message":"m"}}`},
		{"data that cannot be marshalled is dropped", ID("1"), &Error{Code: 1, Message: "m", Data: make(chan int)},
			`{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"m"}}`},
		{"invalid UTF-8 in message", ID("1"), &Error{Code: 1, Message: "a\xff"},
			`{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"a\ufffd"}}`},
		{"invalid UTF-8 in raw data", ID("1"), &Error{Code: 1, Message: "m", Data: json.RawMessage("\"\xff\"")},
			"{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":1,\"message\":\"m\",\"data\":\"\uFFFD\"}}"},
		{"nil error", ID("1"), nil,
			`{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"Internal error"}}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := EncodeError(tc.id, tc.err)
			assert.Equal(t, tc.want, string(got))
			assert.True(t, json.Valid(got))
			assert.True(t, utf8.Valid(got))
		})
	}
}

func TestEncodeNotification(t *testing.T) {
	cases := []struct {
		name   string
		method string
		params json.RawMessage
		want   string // "" = nil
	}{
		{"object", "ipc.signal", json.RawMessage(`{"kind":"x","$seq":1}`), `{"jsonrpc":"2.0","method":"ipc.signal","params":{"kind":"x","$seq":1}}`},
		{"array", "m", json.RawMessage(`[1]`), `{"jsonrpc":"2.0","method":"m","params":[1]}`},
		{"nil params", "m", nil, `{"jsonrpc":"2.0","method":"m","params":{}}`},
		{"null params", "m", json.RawMessage(`null`), `{"jsonrpc":"2.0","method":"m","params":{}}`},
		{"surrounding whitespace", "m", json.RawMessage(" {} \n"), `{"jsonrpc":"2.0","method":"m","params":{}}`},
		{"method needing escapes", "a\"b\xff", json.RawMessage(`{}`), `{"jsonrpc":"2.0","method":"a\"b\ufffd","params":{}}`},
		{"invalid UTF-8 in params", "m", json.RawMessage("{\"s\":\"\xff\"}"), "{\"jsonrpc\":\"2.0\",\"method\":\"m\",\"params\":{\"s\":\"\uFFFD\"}}"},
		{"primitive params", "m", json.RawMessage(`"x"`), ""},
		{"broken params", "m", json.RawMessage(`{"a":`), ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := EncodeNotification(tc.method, tc.params)
			if tc.want == "" {
				assert.Nil(t, got)
				return
			}
			assert.Equal(t, tc.want, string(got))
			assert.True(t, json.Valid(got))
			// What we send decodes as a notification.
			f := DecodeFrame(got)
			require.NotNil(t, f.Items[0].Req)
			assert.True(t, f.Items[0].Req.IsNotification())
		})
	}
}

func TestEncodeBatch(t *testing.T) {
	a := EncodeError(nil, &Error{Code: 1, Message: "a"})
	b := EncodeResultRaw(ID("2"), json.RawMessage(`true`))
	assert.Nil(t, EncodeBatch(nil))
	assert.Nil(t, EncodeBatch([][]byte{nil, {}}))
	assert.Equal(t, "["+string(a)+"]", string(EncodeBatch([][]byte{a})))
	got := EncodeBatch([][]byte{a, nil, b})
	assert.Equal(t, "["+string(a)+","+string(b)+"]", string(got))
	assert.True(t, json.Valid(got))
}
