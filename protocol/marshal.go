package protocol

import (
	"bytes"
	"encoding/json"
)

// Marshal is json.Marshal without HTML escaping: "<", ">" and "&" stay one byte each on the wire
// instead of six ("\u003c"), so a message's size follows its text. Everything the server sends
// is encoded with it (the generated MarshalJSON methods too). Invalid UTF-8 still becomes U+FFFD.
func Marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	out := b.Bytes()
	return out[:len(out)-1], nil // Encode adds a newline
}

// JSONAppender is a result that appends its own JSON encoding. EncodeResult takes those bytes as
// they are: encoding/json validates and compacts again everything a MarshalJSON method returns,
// which for bytes spliced in (already encoded and checked when first written) is work done twice.
type JSONAppender interface {
	// AppendJSON appends the value's JSON encoding, exactly as Marshal would write it, to dst.
	AppendJSON(dst []byte) ([]byte, error)
}

// UnescapeHTML returns raw JSON text with the HTML escapes encoding/json writes by default
// (`\u003c`, `\u003e`, `\u0026`, any case of hex) inside its strings replaced by the characters
// themselves, so JSON a provider or a tool produced (a tool call's arguments) reads on the wire
// and in the store as Marshal would have written it (field case B36). Everything else is kept
// byte for byte, other escapes included; raw comes back as it is (not copied) when it holds none.
// raw is expected to be valid JSON; text that is not is rewritten only where it has such escapes.
func UnescapeHTML(raw []byte) []byte {
	if !bytes.Contains(raw, []byte(`\u00`)) {
		return raw
	}
	var out []byte
	copied := 0 // raw[:copied] is in out (once out is in use)
	inString := false
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		switch {
		case !inString:
			inString = c == '"'
		case c == '"':
			inString = false
		case c == '\\' && i+1 < len(raw):
			if ch, ok := htmlEscape(raw[i+1:]); ok {
				if out == nil {
					out = make([]byte, 0, len(raw))
				}
				out = append(append(out, raw[copied:i]...), ch)
				copied = i + 6
				i += 5
				continue
			}
			i++ // skip the escaped character (\\, \", \u's first letter)
		}
	}
	if out == nil {
		return raw
	}
	return append(out, raw[copied:]...)
}

// htmlEscape reports whether esc (the text after a backslash) starts with u003c, u003e or u0026,
// and which character it stands for.
func htmlEscape(esc []byte) (byte, bool) {
	if len(esc) < 5 || esc[0] != 'u' || esc[1] != '0' || esc[2] != '0' {
		return 0, false
	}
	switch string(bytes.ToLower(esc[3:5])) {
	case "3c":
		return '<', true
	case "3e":
		return '>', true
	case "26":
		return '&', true
	}
	return 0, false
}
