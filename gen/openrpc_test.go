package main

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// openRPCMeta compiles the vendored OpenRPC meta-schema (gen/testdata/openrpc/README.md).
func openRPCMeta(t *testing.T) *jsonschema.Schema {
	t.Helper()
	load := func(name string, fix func(m map[string]any)) []byte {
		raw, err := os.ReadFile("testdata/openrpc/" + name)
		require.NoError(t, err)
		var m map[string]any
		require.NoError(t, json.Unmarshal(raw, &m))
		m["$schema"] = "http://json-schema.org/draft-07/schema#"
		fix(m)
		out, err := json.Marshal(m)
		require.NoError(t, err)
		return out
	}
	c := jsonschema.NewCompiler()
	c.Draft = jsonschema.Draft7
	jst := load("json-schema-tools-meta-schema.json", func(map[string]any) {})
	for _, u := range []string{"https://meta.json-schema.tools/", "https://meta.json-schema.tools"} { // it is named both ways
		require.NoError(t, c.AddResource(u, bytes.NewReader(jst)))
	}
	require.NoError(t, c.AddResource("https://meta.open-rpc.org/", bytes.NewReader(load("openrpc-meta-schema.json", func(m map[string]any) {
		obj(m, "properties", "openrpc")["enum"] = []any{"1.3.2", "1.3.1", "1.3.0"}
	}))))
	s, err := c.Compile("https://meta.open-rpc.org/")
	require.NoError(t, err)
	return s
}

// TestOpenRPC: the generated OpenRPC document validates against the OpenRPC 1.3 meta-schema and
// holds every method of the schema with its params and result schemas, and every signal under
// x-signals (issue 29).
func TestOpenRPC(t *testing.T) {
	p, err := Load("../schema")
	require.NoError(t, err)
	raw := OpenRPCFile(p)
	var doc any
	require.NoError(t, json.Unmarshal(raw, &doc))
	meta := openRPCMeta(t)
	require.NoError(t, meta.Validate(doc))

	var d struct {
		OpenRPC string `json:"openrpc"`
		Methods []struct {
			Name   string `json:"name"`
			Params []struct {
				Name     string         `json:"name"`
				Required bool           `json:"required"`
				Schema   map[string]any `json:"schema"`
			} `json:"params"`
			Result struct {
				Schema map[string]any `json:"schema"`
			} `json:"result"`
			Errors []struct {
				Code int `json:"code"`
			} `json:"errors"`
		} `json:"methods"`
		Components struct {
			Schemas map[string]any `json:"schemas"`
		} `json:"components"`
		Signals map[string]any `json:"x-signals"`
	}
	require.NoError(t, json.Unmarshal(raw, &d))
	assert.Equal(t, "1.3.2", d.OpenRPC)
	var bundle struct {
		Methods map[string]struct {
			Params map[string]any `json:"params"`
			Result map[string]any `json:"result"`
			Errors []string       `json:"errors"`
		} `json:"methods"`
		Signals map[string]any `json:"signals"`
		Defs    map[string]any `json:"$defs"`
	}
	require.NoError(t, json.Unmarshal(p.Bundle, &bundle))
	require.Len(t, d.Methods, len(bundle.Methods))
	norm := func(v any) string { // the bundle's refs, pointed at components/schemas
		refs(v)
		b, _ := json.Marshal(v)
		return string(b)
	}
	for _, m := range d.Methods {
		want, ok := bundle.Methods[m.Name]
		require.True(t, ok, "method %s is not in the schema", m.Name)
		props := asMap(want.Params["properties"])
		required, _ := want.Params["required"].([]any)
		require.Len(t, m.Params, len(props), m.Name)
		for _, prm := range m.Params {
			assert.JSONEq(t, norm(props[prm.Name]), norm(prm.Schema), "%s param %s", m.Name, prm.Name)
			assert.Equal(t, containsAny(required, prm.Name), prm.Required, "%s param %s", m.Name, prm.Name)
		}
		assert.JSONEq(t, norm(want.Result), norm(m.Result.Schema), "%s result", m.Name)
		assert.Len(t, m.Errors, len(want.Errors), "%s errors", m.Name)
	}
	assert.Len(t, d.Components.Schemas, len(bundle.Defs))
	assert.Len(t, d.Signals, len(bundle.Signals))
	assert.Contains(t, string(raw), `"$ref": "#/components/schemas/`)
	assert.NotContains(t, string(raw), `"#/$defs/`, "every ref points into the document")

	// The meta-schema is not a formality: a method without params fails it.
	var broken map[string]any
	require.NoError(t, json.Unmarshal(raw, &broken))
	delete(broken["methods"].([]any)[0].(map[string]any), "params")
	assert.Error(t, meta.Validate(broken))
}
