package protocol

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"sync"
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
// It reports whether it deleted anything.
func pruneToKnown(v any, dst any) bool {
	return prune(v, reflect.TypeOf(dst))
}

var rawMessageType = reflect.TypeOf(json.RawMessage(nil))

// jsonFields caches each struct type's JSON member names and their types.
var jsonFields sync.Map // reflect.Type → map[string]reflect.Type

func fieldsOf(t reflect.Type) map[string]reflect.Type {
	if f, ok := jsonFields.Load(t); ok {
		return f.(map[string]reflect.Type)
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
	jsonFields.Store(t, fields)
	return fields
}

// prune deletes the members dst's type does not name exactly, and reports whether it did.
func prune(v any, t reflect.Type) bool {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t == rawMessageType {
		return false
	}
	changed := false
	switch t.Kind() {
	case reflect.Struct:
		obj, ok := v.(map[string]any)
		if !ok {
			return false
		}
		fields := fieldsOf(t)
		for k, sub := range obj {
			ft, ok := fields[k]
			if !ok {
				delete(obj, k)
				changed = true
				continue
			}
			changed = prune(sub, ft) || changed
		}
	case reflect.Slice, reflect.Array:
		if arr, ok := v.([]any); ok {
			for _, it := range arr {
				changed = prune(it, t.Elem()) || changed
			}
		}
	case reflect.Map:
		if obj, ok := v.(map[string]any); ok {
			for _, it := range obj {
				changed = prune(it, t.Elem()) || changed
			}
		}
	}
	return changed
}
