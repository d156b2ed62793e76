package protocol

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
)

// DecodeErrorText says in the protocol's words what is wrong with a JSON document that
// encoding/json could not decode (err from json.Unmarshal or a json.Decoder), for a message a
// client, an operator or the model acts on: the member at fault as a JSON pointer below root
// ("body", "input", "params"; the document itself when no member is named) and the JSON type it
// must be, never the Go type the server decodes into ("protocol.SendBody", "map[string]interface
// {}"). A syntax error says where it is; other errors (a type's own UnmarshalJSON) keep their
// text without encoding/json's "json: " prefix.
func DecodeErrorText(root string, err error) string {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te):
		where := root
		if te.Field != "" {
			where += "/" + strings.ReplaceAll(te.Field, ".", "/")
		}
		return fmt.Sprintf("%s must be %s, not a JSON %s", where, JSONKind(te.Type), jsonValueKind(te.Value))
	case errors.As(err, &se):
		return fmt.Sprintf("%s is not valid JSON (%s, at byte %d)", root, strings.TrimPrefix(se.Error(), "json: "), se.Offset)
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return root + " is not valid JSON (it ends before the value does)"
	}
	return root + ": " + strings.TrimPrefix(err.Error(), "json: ")
}

// JSONKind names the JSON value that decodes into t, as a message says it: "a string", "an
// integer", "a number", "true or false", "an array", "an object" or "a JSON value".
func JSONKind(t reflect.Type) string {
	if t == nil {
		return "a JSON value"
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return "a base64 string"
		}
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return "a JSON value"
}

// jsonValueKind is encoding/json's name of the value it met ("number", "number 1e400", "bool",
// "string", "array", "object") as a message says it.
func jsonValueKind(v string) string {
	switch {
	case v == "bool":
		return "boolean"
	case strings.HasPrefix(v, "number "):
		return "number (" + strings.TrimPrefix(v, "number ") + ")"
	case v == "":
		return "value"
	}
	return v
}
