package main

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
)

// openRPCPath is where the generated OpenRPC document of the WebSocket protocol lives (embedded
// by protocol/schema_gen.go and served at GET /openrpc.json).
const openRPCPath = "protocol/openrpc_gen.json"

// openRPCVersion is the OpenRPC specification version the document follows.
const openRPCVersion = "1.3.2"

// OpenRPCFile renders the WebSocket protocol as an OpenRPC 1.3 document (issue 29): every method
// by name with its params (by-name content descriptors), result and errors, the $defs types under
// components/schemas, and the signals (server-to-client notifications, which OpenRPC cannot
// express) under x-signals. Each method carries x-scope and x-since; deprecated methods say so.
func OpenRPCFile(p *Protocol) []byte {
	var b map[string]any
	if err := json.Unmarshal(p.Bundle, &b); err != nil {
		panic(err) // the bundle is ours
	}
	refs(b)
	errs := asMap(b["errors"])
	methods := make([]any, 0, len(p.Methods))
	for _, m := range p.Methods {
		src := asMap(asMap(b["methods"])[m.Name])
		prm := asMap(src["params"])
		required, _ := prm["required"].([]any)
		params := []any{}
		props := asMap(prm["properties"])
		for _, k := range keys(props) {
			cd := map[string]any{"name": k, "schema": props[k], "required": containsAny(required, k)}
			if d, ok := asMap(props[k])["description"].(string); ok && d != "" {
				cd["description"] = d
			}
			params = append(params, cd)
		}
		meth := map[string]any{
			"name": m.Name, "summary": m.Summary, "paramStructure": "by-name", "params": params,
			"result":  map[string]any{"name": strings.ReplaceAll(m.Name, ".", "_") + "_result", "schema": src["result"]},
			"tags":    []any{map[string]any{"name": m.Group}},
			"x-scope": m.Scope, "x-since": m.Since,
		}
		if m.Description != "" {
			meth["description"] = m.Description
		}
		if m.Deprecated != "" {
			meth["deprecated"] = true
			meth["x-deprecated"] = m.Deprecated
		}
		var me []any
		for _, e := range m.Errors {
			eo := map[string]any{"code": e.Code, "message": e.Message}
			if d := asMap(errs[e.Name])["data"]; d != nil {
				eo["data"] = map[string]any{"schema": d}
			}
			me = append(me, eo)
		}
		if len(me) > 0 {
			meth["errors"] = me
		}
		methods = append(methods, meth)
	}
	doc := map[string]any{
		"openrpc": openRPCVersion,
		"info": map[string]any{
			"title":       p.Title,
			"version":     strconv.Itoa(p.Version),
			"description": p.Description + " Protocol versions " + strconv.Itoa(p.MinVersion) + "–" + strconv.Itoa(p.Version) + "; generated from schema/ (schema hash " + p.Hash + ").",
		},
		"servers": []any{map[string]any{"name": "zidane-server", "url": "ws://127.0.0.1:4380/",
			"summary": "Any path upgrades; send the token as Authorization: Bearer or the subprotocols zidane, zidane.bearer.<token>."}},
		"methods":    methods,
		"components": map[string]any{"schemas": b["$defs"]},
		"x-signals":  b["signals"],
		"x-errors":   errs,
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		panic(err)
	}
	return out.Bytes()
}

// refs points the bundle's "#/$defs/X" references at the document's components/schemas.
func refs(v any) {
	switch x := v.(type) {
	case map[string]any:
		if r, ok := x["$ref"].(string); ok {
			if n, ok := strings.CutPrefix(r, "#/$defs/"); ok {
				x["$ref"] = "#/components/schemas/" + n
			}
		}
		for _, c := range x {
			refs(c)
		}
	case []any:
		for _, c := range x {
			refs(c)
		}
	}
}
