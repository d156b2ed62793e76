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
