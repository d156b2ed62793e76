// Package protocol holds zidane's wire types: the handwritten JSON-RPC 2.0 core in this file,
// and the generated method, signal and error tables in the *_gen.go files.
//
// # JSON-RPC 2.0 framing
//
// zidane speaks JSON-RPC 2.0 over one WebSocket, one JSON value per text frame.
// [DecodeFrame] turns one frame into a [Frame] of [Item]s; the Encode* functions build the
// frames the server sends. The decoder is strict (RFC 8259 plus JSON-RPC 2.0) and never panics.
// These choices are fixed and pinned by tests named after the field cases (TestFieldCase_B01_…):
//
//   - Batches are supported (JSON-RPC 2.0 §6). A frame that is a JSON array is a batch; each
//     element is decoded on its own, so [1,2,3] gives three -32600 items. An empty batch []
//     is one -32600 item answered as a single object, not as an array (B01, JR §7).
//   - Order of checks on a frame: bytes that are not valid UTF-8 → -32700 (the transport is
//     expected to have closed with 1007 already, B16); a leading UTF-8 byte order mark →
//     -32700 (RFC 8259 §8.1 lets us refuse it, B08); nesting deeper than [MaxDepth] = 64
//     containers, counted over the whole frame including the batch array → -32600
//     "Invalid Request: nesting deeper than 64 levels" with id null. The depth is found by a
//     byte scan before any decoding, so a million-deep frame costs one linear pass (B11).
//   - The frame must hold exactly one JSON value; anything but whitespace after it, an empty
//     frame, or any RFC 8259 syntax error → -32700 with id null, and nothing in the frame is
//     executed (B08).
//   - A top-level value (or batch element) that is not an object → -32600 with id null.
//   - Duplicate member names at the top level of a request object (after unescaping, so
//     "\u0069d" is "id") → -32600. When "id" is the duplicated member the answer carries
//     id null, otherwise the id is echoed.
//   - "id" must be a string, a number (integer or not; its raw bytes are kept and echoed
//     unchanged) or null. An object, array or boolean id → -32600 with id null.
//     "id":null is a request and is answered (with id null); an absent id makes a
//     notification (B04).
//   - "jsonrpc" must be the string "2.0" exactly; missing or anything else → -32600 echoing
//     the id (B06).
//   - "method" must be a string; missing or not a string → -32600 echoing the id (B03).
//   - "params", when present, must be an object or an array; null or a primitive → -32600
//     echoing the id (B09). Arrays are accepted here; dispatch answers by-position params
//     with -32602 because zidane defines by-name params only. Params are kept raw and
//     byte-for-byte unchanged, escaped lone surrogates included (B16(c)); what to do with
//     them is the params decoder's (and store's) policy, not the framing layer's.
//   - Members other than jsonrpc, id, method and params are ignored.
//   - Notifications are never answered, even when they are invalid (JR §4.1, B04): an object
//     without an "id" member that has "jsonrpc":"2.0" and a string "method" is recognised as
//     a notification, and an error found in it is reported with a nil [Item.ErrID], meaning
//     "do not answer". Anything that cannot be recognised as a request at all (for example
//     {"foo":"bar"} or {"jsonrpc":"2.0","method":1}) is answered with id null (JR §7).
//
// The encoders always produce valid JSON and valid UTF-8: the id member of a response is
// always present (null when unknown), invalid UTF-8 is replaced by U+FFFD, and an all-
// notification batch encodes to nothing at all (JR §6, B02).
package protocol

import (
	"bytes"
	"encoding/json"
	"strconv"
	"sync"
	"unicode/utf8"
)

// MaxDepth is the deepest nesting of JSON objects and arrays that [DecodeFrame] accepts,
// counted over the whole frame (a batch array is level 1, its request objects level 2).
// Deeper frames are answered with -32600 and id null.
const MaxDepth = 64

// MaxBatch is the most members a batch array may hold. [DecodeFrame] stops at the first member
// past it and answers the whole frame with one -32600 (id null), so none of it runs: every
// member's answer must fit, with the others', in one message, and a frame of a million tiny
// members (`[1,1,…]`) would otherwise cost a million answers.
const MaxBatch = 1000

// Standard JSON-RPC 2.0 codes used by the framing layer. The exported names live in the
// generated errors_gen.go.
const (
	codeParseError     = -32700
	codeInvalidRequest = -32600
	codeInternalError  = -32603
)

// Messages of the errors DecodeFrame reports. Tests pin them.
const (
	msgParse       = "Parse error: the frame must hold exactly one JSON value (RFC 8259)."
	msgDepth       = "Invalid Request: nesting deeper than 64 levels"
	msgEmptyBatch  = "Invalid Request: an empty batch is not a request."
	msgBatchSize   = "Invalid Request: a batch holds at most 1000 requests; send fewer per batch."
	msgNotObject   = `Invalid Request: a request must be a JSON object with "jsonrpc":"2.0" and a string "method".`
	msgJSONRPC     = `Invalid Request: "jsonrpc" must be the string "2.0".`
	msgMethod      = `Invalid Request: "method" must be a string.`
	msgParams      = "Invalid Request: params must be an object (every method takes named params), or left out."
	msgIDType      = `Invalid Request: "id" must be a string, a number or null.`
	msgDupPrefix   = "Invalid Request: duplicate member "
	msgBadResult   = "Internal error: the server produced a result that is not valid JSON."
	msgNilError    = "Internal error"
	maxNameInError = 64
)

// ID is a request id's raw JSON (a string, number or null); nil means absent (a notification).
type ID = json.RawMessage

// Request is one decoded JSON-RPC 2.0 request or notification.
type Request struct {
	ID     ID              // nil for a notification; []byte("null") for "id":null
	Method string          // the method name, unescaped
	Params json.RawMessage // nil when absent; otherwise an object or array, raw
}

// IsNotification reports whether the request has no "id" member and so must not be answered.
func (r *Request) IsNotification() bool { return r != nil && r.ID == nil }

// Error is a JSON-RPC error object; it implements error.
type Error struct {
	Code    int    `json:"code"`           // a JSON-RPC error code, e.g. -32600
	Message string `json:"message"`        // what is wrong and what to do
	Data    any    `json:"data,omitempty"` // optional detail, marshalled with encoding/json
}

// Error returns "jsonrpc error <code>: <message>".
func (e *Error) Error() string {
	if e == nil {
		return "jsonrpc error: <nil>"
	}
	return "jsonrpc error " + strconv.Itoa(e.Code) + ": " + e.Message
}

// Item is one element of a decoded frame: either a valid Request, or an Err to answer with ErrID.
//
// Exactly one of Req and Err is set. When Err is set, ErrID is the id to put in the error
// response: the request's raw id if it could be read, else []byte("null"). ErrID is nil only
// when the element was recognisably a notification (no "id" member, "jsonrpc":"2.0" and a
// string "method"): such an error must not be answered at all (JR §4.1, field case B04).
type Item struct {
	Req   *Request
	Err   *Error
	ErrID ID // id to put in the error response: the request's id if readable, else null; nil = notification, do not answer
}

// Frame is one decoded text frame.
type Frame struct {
	Batch bool   // the frame was a JSON array
	Items []Item // for a non-batch frame exactly one item; for an empty batch exactly one Err item (-32600, id null) and Batch=false so the answer is a single object (JR §6/§7)
}

// DecodeFrame decodes one text frame strictly (RFC 8259, JSON-RPC 2.0). It never panics.
//
// The returned raw ids and params are copies: data may be reused after the call. See the
// package documentation for the exact rules and their order.
func DecodeFrame(data []byte) Frame {
	if !utf8.Valid(data) {
		return parseErrorFrame(invalidUTF8Offset(data), "invalid UTF-8; a text frame must be UTF-8")
	}
	if bytes.HasPrefix(data, utf8BOM) {
		return parseErrorFrame(0, "a UTF-8 byte order mark is not allowed before the value")
	}
	if tooDeep(data) {
		return depthErrorFrame()
	}
	s := scanner{data: data}
	s.ws()
	if s.pos == len(data) {
		return parseErrorFrame(s.pos, "the frame holds no JSON value")
	}
	if data[s.pos] == '[' {
		return s.batch()
	}
	var rs reqScan
	if !s.element(0, &rs) {
		return s.failedFrame()
	}
	s.ws()
	if s.pos != len(data) {
		s.fail("data after the JSON value; send one JSON value per frame")
		return s.failedFrame()
	}
	o := owner{src: data}
	return Frame{Items: []Item{rs.item(&o)}}
}

var utf8BOM = []byte{0xEF, 0xBB, 0xBF}

// batch decodes a frame whose first non-space byte is '['.
func (s *scanner) batch() Frame {
	s.pos++ // '['
	s.ws()
	var scans []reqScan
	if s.pos < len(s.data) && s.data[s.pos] == ']' {
		s.pos++
	} else {
		for {
			s.ws()
			if len(scans) == MaxBatch {
				return Frame{Items: []Item{{Err: &Error{Code: codeInvalidRequest, Message: msgBatchSize}, ErrID: nullID()}}}
			}
			scans = append(scans, reqScan{})
			if !s.element(1, &scans[len(scans)-1]) {
				return s.failedFrame()
			}
			s.ws()
			if s.pos >= len(s.data) {
				s.fail("unexpected end of the frame inside the batch array")
				return s.failedFrame()
			}
			c := s.data[s.pos]
			s.pos++
			if c == ']' {
				break
			}
			if c != ',' {
				s.pos--
				s.fail("expected ',' or ']' in the batch array")
				return s.failedFrame()
			}
		}
	}
	s.ws()
	if s.pos != len(s.data) {
		s.fail("data after the JSON value; send one JSON value per frame")
		return s.failedFrame()
	}
	if len(scans) == 0 {
		return Frame{Items: []Item{{Err: &Error{Code: codeInvalidRequest, Message: msgEmptyBatch}, ErrID: nullID()}}}
	}
	o := owner{src: s.data}
	items := make([]Item, len(scans))
	for i := range scans {
		items[i] = scans[i].item(&o)
	}
	return Frame{Batch: true, Items: items}
}

func nullID() ID { return ID("null") }

func parseErrorFrame(offset int, reason string) Frame {
	return Frame{Items: []Item{{
		Err:   &Error{Code: codeParseError, Message: msgParse, Data: "byte " + strconv.Itoa(offset) + ": " + reason},
		ErrID: nullID(),
	}}}
}

func depthErrorFrame() Frame {
	return Frame{Items: []Item{{Err: &Error{Code: codeInvalidRequest, Message: msgDepth}, ErrID: nullID()}}}
}

func invalidUTF8Offset(data []byte) int {
	for i := 0; i < len(data); {
		r, n := utf8.DecodeRune(data[i:])
		if r == utf8.RuneError && n <= 1 {
			return i
		}
		i += n
	}
	return len(data)
}

// tooDeep reports whether data nests more than MaxDepth objects/arrays. It only tracks
// strings (so brackets inside them do not count) and never decodes anything.
func tooDeep(data []byte) bool {
	depth := 0
	inString := false
	for i := 0; i < len(data); i++ {
		c := data[i]
		if inString {
			if c == '\\' {
				i++
			} else if c == '"' {
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case '{', '[':
			depth++
			if depth > MaxDepth {
				return true
			}
		case '}', ']':
			depth--
		}
	}
	return false
}

// owner hands out capped copies of spans of the frame, copying the frame at most once.
type owner struct {
	src, own []byte
}

func (o *owner) raw(sp span) []byte {
	if o.own == nil {
		o.own = bytes.Clone(o.src)
	}
	return o.own[sp.start:sp.end:sp.end]
}

type span struct{ start, end int }

// member records the first occurrence of a known request member.
type member struct {
	span
	present bool
	escaped bool // a string value containing backslash escapes
}

// reqScan is what the scanner records about the top level of one request candidate.
type reqScan struct {
	isObject bool
	jsonrpc  member
	id       member
	method   member
	params   member
	idDup    bool
	dupName  string // first duplicated member name other than "id"
	src      []byte
}

const linearNames = 8

// addName records a top-level member name of the request object being scanned and reports
// whether it was seen before. Names are compared after unescaping; a few are compared
// linearly (no allocation), many go into a map.
func (s *scanner) addName(name []byte) bool {
	if s.nameSet != nil {
		if _, ok := s.nameSet[string(name)]; ok {
			return true
		}
		s.nameSet[string(name)] = struct{}{}
		return false
	}
	for _, n := range s.names {
		if bytes.Equal(n, name) {
			return true
		}
	}
	if len(s.names) == cap(s.names) {
		s.nameSet = make(map[string]struct{}, 2*len(s.names)+1)
		for _, n := range s.names {
			s.nameSet[string(n)] = struct{}{}
		}
		s.nameSet[string(name)] = struct{}{}
		return false
	}
	s.names = append(s.names, name)
	return false
}

// record notes one top-level member of a request object.
func (rs *reqScan) record(name []byte, value span, valueEscaped, dup bool) {
	var m *member
	switch string(name) {
	case "jsonrpc":
		m = &rs.jsonrpc
	case "id":
		m = &rs.id
		if dup {
			rs.idDup = true
		}
	case "method":
		m = &rs.method
	case "params":
		m = &rs.params
	}
	if dup {
		if m != &rs.id && rs.dupName == "" {
			rs.dupName = string(name)
		}
		return
	}
	if m != nil {
		*m = member{span: value, present: true, escaped: valueEscaped}
	}
}

func (rs *reqScan) first(m member) byte { return rs.src[m.start] }

// stringValue returns the unescaped value of a string member.
func (rs *reqScan) stringValue(m member) string {
	raw := rs.src[m.start:m.end]
	if !m.escaped {
		return string(raw[1 : len(raw)-1])
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "" // unreachable: the scanner validated the string
	}
	return s
}

func invalid(msg string) *Error { return &Error{Code: codeInvalidRequest, Message: msg} }

// item turns a validated request candidate into an Item.
func (rs *reqScan) item(o *owner) Item {
	if !rs.isObject {
		return Item{Err: invalid(msgNotObject), ErrID: nullID()}
	}
	if rs.idDup {
		return Item{Err: invalid(msgDupPrefix + `"id".`), ErrID: nullID()}
	}
	var id ID
	if rs.id.present {
		switch rs.first(rs.id) {
		case '{', '[', 't', 'f':
			return Item{Err: invalid(msgIDType), ErrID: nullID()}
		}
		id = o.raw(rs.id.span)
	}
	jsonrpcOK := rs.jsonrpc.present && rs.first(rs.jsonrpc) == '"' && rs.stringValue(rs.jsonrpc) == "2.0"
	methodOK := rs.method.present && rs.first(rs.method) == '"'
	errID := id
	if id == nil && !(jsonrpcOK && methodOK) {
		errID = nullID() // not recognisable as a notification: answer with id null
	}
	switch {
	case rs.dupName != "":
		return Item{Err: invalid(msgDupPrefix + quoteName(rs.dupName) + "."), ErrID: errID}
	case !jsonrpcOK:
		return Item{Err: invalid(msgJSONRPC), ErrID: errID}
	case !methodOK:
		return Item{Err: invalid(msgMethod), ErrID: errID}
	}
	req := &Request{ID: id, Method: rs.stringValue(rs.method)}
	if rs.params.present {
		if c := rs.first(rs.params); c != '{' && c != '[' {
			return Item{Err: invalid(msgParams), ErrID: errID}
		}
		req.Params = o.raw(rs.params.span)
	}
	return Item{Req: req}
}

func quoteName(name string) string {
	if len(name) > maxNameInError {
		cut := maxNameInError
		for cut > 0 && !utf8.RuneStart(name[cut]) {
			cut--
		}
		name = name[:cut] + "…"
	}
	return strconv.Quote(name)
}

// scanner is a strict RFC 8259 recursive-descent validator. Recursion is bounded by MaxDepth.
type scanner struct {
	data   []byte
	pos    int
	err    string
	errPos int
	deep   bool // the defensive depth check tripped

	// Member names of the request object being scanned, for duplicate detection.
	nameBuf [linearNames][]byte
	names   [][]byte
	nameSet map[string]struct{}
}

func (s *scanner) fail(reason string) bool {
	if s.err == "" {
		s.err = reason
		s.errPos = s.pos
	}
	return false
}

func (s *scanner) failedFrame() Frame {
	if s.deep {
		return depthErrorFrame()
	}
	return parseErrorFrame(s.errPos, s.err)
}

func (s *scanner) ws() { s.pos = skipWS(s.data, s.pos) }

// skipWS returns the index of the first byte at or after i in b that is not JSON whitespace.
func skipWS(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// element scans one request candidate enclosed by depth containers, recording its members.
func (s *scanner) element(depth int, rs *reqScan) bool {
	rs.src = s.data
	s.names, s.nameSet = s.nameBuf[:0], nil
	if s.pos < len(s.data) && s.data[s.pos] == '{' {
		rs.isObject = true
		return s.object(depth+1, rs)
	}
	return s.value(depth)
}

// value scans one value enclosed by depth containers.
func (s *scanner) value(depth int) bool {
	if s.pos >= len(s.data) {
		return s.fail("unexpected end of the frame; a value was expected")
	}
	switch c := s.data[s.pos]; c {
	case '{':
		return s.object(depth+1, nil)
	case '[':
		return s.array(depth + 1)
	case '"':
		_, ok := s.str()
		return ok
	case 't':
		return s.literal("true")
	case 'f':
		return s.literal("false")
	case 'n':
		return s.literal("null")
	default:
		if c == '-' || (c >= '0' && c <= '9') {
			return s.number()
		}
		return s.fail("unexpected character " + strconv.QuoteRune(rune(c)) + "; a value was expected")
	}
}

func (s *scanner) literal(lit string) bool {
	if !bytes.HasPrefix(s.data[s.pos:], []byte(lit)) {
		return s.fail("invalid literal; expected " + lit)
	}
	s.pos += len(lit)
	return true
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func (s *scanner) digits() bool {
	if s.pos >= len(s.data) || !isDigit(s.data[s.pos]) {
		return s.fail("invalid number; a digit was expected")
	}
	for s.pos < len(s.data) && isDigit(s.data[s.pos]) {
		s.pos++
	}
	return true
}

func (s *scanner) number() bool {
	if s.data[s.pos] == '-' {
		s.pos++
	}
	if s.pos < len(s.data) && s.data[s.pos] == '0' {
		s.pos++
	} else if !s.digits() {
		return false
	}
	if s.pos < len(s.data) && s.data[s.pos] == '.' {
		s.pos++
		if !s.digits() {
			return false
		}
	}
	if s.pos < len(s.data) && (s.data[s.pos] == 'e' || s.data[s.pos] == 'E') {
		s.pos++
		if s.pos < len(s.data) && (s.data[s.pos] == '+' || s.data[s.pos] == '-') {
			s.pos++
		}
		if !s.digits() {
			return false
		}
	}
	return true
}

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

// str scans a string starting at the opening quote and reports whether it holds escapes.
func (s *scanner) str() (escaped, ok bool) {
	d := s.data
	for i := s.pos + 1; i < len(d); {
		c := d[i]
		switch {
		case c == '"':
			s.pos = i + 1
			return escaped, true
		case c == '\\':
			escaped = true
			if i+1 >= len(d) {
				s.pos = i
				return false, s.fail("unterminated escape in string")
			}
			switch d[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(d) || !isHex(d[i+2]) || !isHex(d[i+3]) || !isHex(d[i+4]) || !isHex(d[i+5]) {
					s.pos = i
					return false, s.fail(`invalid \u escape in string`)
				}
				i += 6
			default:
				s.pos = i
				return false, s.fail("invalid escape in string")
			}
		case c < 0x20:
			s.pos = i
			return false, s.fail("control character in string; escape it")
		default:
			i++
		}
	}
	s.pos = len(d)
	return false, s.fail("unterminated string")
}

// object scans an object that is the depth-th nested container; rs, if not nil, records its
// top-level members.
func (s *scanner) object(depth int, rs *reqScan) bool {
	if depth > MaxDepth {
		s.deep = true
		return s.fail("nesting too deep")
	}
	s.pos++ // '{'
	s.ws()
	if s.pos < len(s.data) && s.data[s.pos] == '}' {
		s.pos++
		return true
	}
	for {
		if s.pos >= len(s.data) || s.data[s.pos] != '"' {
			return s.fail("a member name (a string) was expected")
		}
		kstart := s.pos
		kesc, ok := s.str()
		if !ok {
			return false
		}
		kend := s.pos
		s.ws()
		if s.pos >= len(s.data) || s.data[s.pos] != ':' {
			return s.fail("':' was expected after the member name")
		}
		s.pos++
		s.ws()
		vstart := s.pos
		vesc := false
		if rs != nil && s.pos < len(s.data) && s.data[s.pos] == '"' {
			if vesc, ok = s.str(); !ok {
				return false
			}
		} else if !s.value(depth) {
			return false
		}
		if rs != nil {
			name := memberName(s.data[kstart:kend], kesc)
			rs.record(name, span{vstart, s.pos}, vesc, s.addName(name))
		}
		s.ws()
		if s.pos >= len(s.data) {
			return s.fail("unexpected end of the frame inside an object")
		}
		switch s.data[s.pos] {
		case ',':
			s.pos++
			s.ws()
		case '}':
			s.pos++
			return true
		default:
			return s.fail("',' or '}' was expected in an object")
		}
	}
}

// memberName returns the unescaped name of a validated, quoted member name.
func memberName(quoted []byte, escaped bool) []byte {
	if !escaped {
		return quoted[1 : len(quoted)-1]
	}
	var name string
	if err := json.Unmarshal(quoted, &name); err != nil {
		return quoted // unreachable: the scanner validated the string
	}
	return []byte(name)
}

// array scans an array that is the depth-th nested container.
func (s *scanner) array(depth int) bool {
	if depth > MaxDepth {
		s.deep = true
		return s.fail("nesting too deep")
	}
	s.pos++ // '['
	s.ws()
	if s.pos < len(s.data) && s.data[s.pos] == ']' {
		s.pos++
		return true
	}
	for {
		if !s.value(depth) {
			return false
		}
		s.ws()
		if s.pos >= len(s.data) {
			return s.fail("unexpected end of the frame inside an array")
		}
		switch s.data[s.pos] {
		case ',':
			s.pos++
			s.ws()
		case ']':
			s.pos++
			return true
		default:
			return s.fail("',' or ']' was expected in an array")
		}
	}
}

// ---- encoding ----

const responsePrefix = `{"jsonrpc":"2.0","id":`

// EncodeResult returns the bytes of {"jsonrpc":"2.0","id":<id>,"result":<result>}; result is marshalled with encoding/json (nil result → null).
//
// A nil or malformed id is written as null. Invalid UTF-8 that encoding/json passes through
// (inside a json.RawMessage) is replaced by U+FFFD. The error is json.Marshal's.
func EncodeResult(id ID, result any) ([]byte, error) {
	if a, ok := result.(JSONAppender); ok {
		head := appendResultHead(make([]byte, 0, 512), id)
		b, err := a.AppendJSON(head)
		if err != nil {
			return nil, err
		}
		if res := b[len(head):]; !utf8.Valid(res) {
			return appendResult(id, validUTF8(res)), nil
		}
		return append(b, '}'), nil
	}
	// The result is encoded after the frame's head in a pooled buffer and copied out once, at
	// its size: one allocation per answer instead of the encoder, its growing buffer and a copy
	// into the frame (a third of the allocations of a daemon.info round trip's server side).
	e := resultEncoders.Get().(*resultEncoder)
	defer e.release()
	e.buf.Write(appendResultHead(e.buf.AvailableBuffer(), id))
	head := e.buf.Len()
	if err := e.enc.Encode(result); err != nil {
		return nil, err
	}
	b := e.buf.Bytes()
	b = b[:len(b)-1] // Encode adds a newline
	if res := b[head:]; !utf8.Valid(res) {
		return appendResult(id, validUTF8(res)), nil
	}
	frame := make([]byte, len(b)+1)
	copy(frame, b)
	frame[len(b)] = '}'
	return frame, nil
}

// appendResultHead appends a result frame's head, up to the result's value.
func appendResultHead(dst []byte, id ID) []byte {
	dst = append(dst, responsePrefix...)
	dst = appendID(dst, id)
	return append(dst, `,"result":`...)
}

// resultEncoder is EncodeResult's pooled buffer and its encoder (no HTML escaping, as Marshal).
type resultEncoder struct {
	buf bytes.Buffer
	enc *json.Encoder
}

var resultEncoders = sync.Pool{New: func() any {
	e := &resultEncoder{}
	e.enc = json.NewEncoder(&e.buf)
	e.enc.SetEscapeHTML(false)
	return e
}}

// release gives the encoder back to the pool, unless a large answer grew its buffer.
func (e *resultEncoder) release() {
	if e.buf.Cap() > 64<<10 {
		return
	}
	e.buf.Reset()
	resultEncoders.Put(e)
}

// EncodeResultRaw is EncodeResult for an already-encoded result.
//
// A nil or empty result is written as null and invalid UTF-8 is replaced by U+FFFD. If result
// is not valid JSON the client gets a -32603 error response for id instead, so the frame stays
// valid JSON.
func EncodeResultRaw(id ID, result json.RawMessage) []byte {
	if len(result) == 0 {
		return appendResult(id, []byte("null"))
	}
	result = validUTF8(result)
	if !json.Valid(result) {
		return EncodeError(id, &Error{Code: codeInternalError, Message: msgBadResult})
	}
	return appendResult(id, result)
}

func appendResult(id ID, result []byte) []byte {
	buf := appendResultHead(make([]byte, 0, len(responsePrefix)+len(id)+len(result)+12), id)
	buf = append(buf, result...)
	return append(buf, '}')
}

// EncodeError returns {"jsonrpc":"2.0","id":<id or null>,"error":{...}} — the id member is ALWAYS present (null when id is nil).
//
// A malformed id (not a JSON string, number or null) is also written as null. A nil e is sent
// as -32603 "Internal error". If e.Data cannot be marshalled it is left out. Invalid UTF-8 in
// the message or data is replaced by U+FFFD.
func EncodeError(id ID, e *Error) []byte {
	if e == nil {
		e = &Error{Code: codeInternalError, Message: msgNilError}
	}
	obj, err := Marshal(e)
	if err != nil {
		obj, _ = Marshal(&Error{Code: e.Code, Message: e.Message}) // int and string always marshal
	}
	obj = validUTF8(obj)
	buf := make([]byte, 0, len(responsePrefix)+len(id)+len(obj)+12)
	buf = append(buf, responsePrefix...)
	buf = appendID(buf, id)
	buf = append(buf, `,"error":`...)
	buf = append(buf, obj...)
	return append(buf, '}')
}

// appendID appends id if it is a valid JSON string, number or null, else null.
func appendID(buf []byte, id ID) []byte {
	if !validID(id) {
		return append(buf, "null"...)
	}
	return append(buf, id...)
}

func validID(id ID) bool {
	if len(id) == 0 || !utf8.Valid(id) {
		return false
	}
	switch c := id[0]; {
	case c == '"' || c == '-' || c == 'n' || isDigit(c):
	default:
		return false
	}
	s := scanner{data: id}
	return s.value(0) && s.pos == len(id)
}

// EncodeNotification returns {"jsonrpc":"2.0","method":<method>,"params":<params>}.
//
// Nil, empty or null params are sent as {} (zidane's methods and signals always take an
// object). Invalid UTF-8 in method or params is replaced by U+FFFD. If params is not a JSON
// object or array the result is nil: there is nothing valid to send.
func EncodeNotification(method string, params json.RawMessage) []byte {
	params = trimWS(params)
	if len(params) == 0 || string(params) == "null" {
		params = []byte("{}")
	}
	params = validUTF8(params)
	if (params[0] != '{' && params[0] != '[') || !json.Valid(params) {
		return nil
	}
	m, _ := Marshal(method) // a string always marshals
	buf := make([]byte, 0, len(m)+len(params)+40)
	buf = append(buf, `{"jsonrpc":"2.0","method":`...)
	buf = append(buf, m...)
	buf = append(buf, `,"params":`...)
	buf = append(buf, params...)
	return append(buf, '}')
}

// EncodeBatch joins already-encoded responses into a JSON array; returns nil for zero responses (JR §6: send nothing).
//
// Empty entries are skipped, so a batch whose every entry is empty also returns nil. The
// entries must come from EncodeResult, EncodeResultRaw or EncodeError.
func EncodeBatch(responses [][]byte) []byte {
	n, size := 0, 2
	for _, r := range responses {
		if len(r) > 0 {
			n++
			size += len(r) + 1
		}
	}
	if n == 0 {
		return nil
	}
	buf := make([]byte, 0, size)
	buf = append(buf, '[')
	for _, r := range responses {
		if len(r) == 0 {
			continue
		}
		if len(buf) > 1 {
			buf = append(buf, ',')
		}
		buf = append(buf, r...)
	}
	return append(buf, ']')
}

// trimWS trims JSON whitespace (RFC 8259 §2) from both ends of b.
func trimWS(b []byte) []byte {
	return bytes.Trim(b, " \t\r\n")
}

// validUTF8 returns b, or a copy of b with each run of invalid UTF-8 replaced by U+FFFD.
func validUTF8(b []byte) []byte {
	if utf8.Valid(b) {
		return b
	}
	return bytes.ToValidUTF8(b, []byte("\uFFFD"))
}
