package protocol

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
)

// findDuplicate scans a JSON value and returns the JSON pointer of the first object that holds a
// member name twice, and that name; name is "" when there is none or the JSON is malformed.
func findDuplicate(raw []byte) (ptr, name string) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	ptr, name, _ = scanValue(dec, "")
	return ptr, name
}

// scanValue consumes one value from dec; it reports the first duplicate member below path.
func scanValue(dec *json.Decoder, path string) (string, string, bool) {
	tok, err := dec.Token()
	if err != nil {
		return "", "", false
	}
	d, ok := tok.(json.Delim)
	if !ok {
		return "", "", true
	}
	switch d {
	case '{':
		seen := map[string]bool{}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return "", "", false
			}
			k, _ := kt.(string)
			if seen[k] {
				return path, k, false
			}
			seen[k] = true
			if p, n, ok := scanValue(dec, path+"/"+escapePointer(k)); n != "" || !ok {
				return p, n, ok
			}
		}
	case '[':
		for i := 0; dec.More(); i++ {
			if p, n, ok := scanValue(dec, path+"/"+strconv.Itoa(i)); n != "" || !ok {
				return p, n, ok
			}
		}
	}
	_, err = dec.Token() // the closing delimiter
	return "", "", err == nil
}

func escapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// pruneToKnown deletes, in place, every object member of v whose name is not exactly the JSON
// name of a field of dst's Go type, so encoding/json's case-insensitive matching can never map
// "SessionID" onto "sessionId". Members of interface-typed (union) and RawMessage fields are kept.
func pruneToKnown(v any, dst any) {
	prune(v, reflect.TypeOf(dst))
}

var rawMessageType = reflect.TypeOf(json.RawMessage(nil))

func prune(v any, t reflect.Type) {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t == rawMessageType {
		return
	}
	switch t.Kind() {
	case reflect.Struct:
		obj, ok := v.(map[string]any)
		if !ok {
			return
		}
		fields := map[string]reflect.Type{}
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			name := strings.Split(f.Tag.Get("json"), ",")[0]
			if name == "" || name == "-" {
				continue
			}
			fields[name] = f.Type
		}
		for k, sub := range obj {
			ft, ok := fields[k]
			if !ok {
				delete(obj, k)
				continue
			}
			prune(sub, ft)
		}
	case reflect.Slice, reflect.Array:
		if arr, ok := v.([]any); ok {
			for _, it := range arr {
				prune(it, t.Elem())
			}
		}
	case reflect.Map:
		if obj, ok := v.(map[string]any); ok {
			for _, it := range obj {
				prune(it, t.Elem())
			}
		}
	}
}
