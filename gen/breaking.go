package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
)

// releasePath is where `make release-schema` keeps the bundle of a released protocol version.
func releasePath(schemaDir string, version int) string {
	return filepath.Join(schemaDir, "releases", fmt.Sprintf("v%d.json", version))
}

// latestRelease finds the newest snapshot under schema/releases; ok is false when there is none.
func latestRelease(schemaDir string) (path string, version int, ok bool) {
	matches, _ := filepath.Glob(filepath.Join(schemaDir, "releases", "v*.json"))
	for _, m := range matches {
		var v int
		if _, err := fmt.Sscanf(filepath.Base(m), "v%d.json", &v); err == nil && v > version {
			path, version, ok = m, v, true
		}
	}
	return
}

// Breaking compares the bundle of the last release with the current one and lists every breaking
// change, each naming the element and the way forward: a removed method, signal, type, field or
// enum value; a changed type; a new required param; a field no longer required; a new element
// without since. They are allowed only when protocolVersion is raised above the release's and
// minProtocolVersion keeps the release's version in the range (seed "Compatibility": a release
// keeps the previous version in its range when it raises the current one).
func Breaking(oldBundle, newBundle []byte) ([]string, error) {
	var o, n map[string]any
	if err := json.Unmarshal(oldBundle, &o); err != nil {
		return nil, fmt.Errorf("release snapshot: %w", err)
	}
	if err := json.Unmarshal(newBundle, &n); err != nil {
		return nil, err
	}
	ov, nv, nmin := int(num(o["protocolVersion"])), int(num(n["protocolVersion"])), int(num(n["minProtocolVersion"]))
	if nv > ov && nmin <= ov {
		return removals(o, n, ov, nv), nil
	}
	if nv > ov {
		return []string{fmt.Sprintf("protocolVersion %d with minProtocolVersion %d drops the released v%d from the range: apps built against it could no longer attach; keep minProtocolVersion ≤ %d in schema/protocol.json", nv, nmin, ov, ov)}, nil
	}
	forward := fmt.Sprintf(" (released in v%d: undo it, or raise protocolVersion to %d in schema/protocol.json keeping minProtocolVersion ≤ %d so v%d clients still attach; a removed method or signal stays in the schema marked removedIn: %d)", ov, ov+1, ov, ov, ov+1)
	var out []string
	add := func(format string, args ...any) {
		msg := fmt.Sprintf(format, args...)
		if !strings.Contains(msg, "has no since") {
			msg += forward
		}
		out = append(out, msg)
	}
	om, nm := asMap(o["methods"]), asMap(n["methods"])
	for _, name := range keys(om) {
		nmeth, ok := nm[name]
		if !ok {
			add("method %s was removed", name)
			continue
		}
		ometh := asMap(om[name])
		nmth := asMap(nmeth)
		compareSchema(add, "method "+name+" params", asMap(ometh["params"]), asMap(nmth["params"]), true)
		compareSchema(add, "method "+name+" result", asMap(ometh["result"]), asMap(nmth["result"]), false)
	}
	for _, name := range keys(nm) {
		if _, ok := om[name]; !ok && asMap(nm[name])["since"] == nil {
			add("method %s is new but has no since", name)
		}
	}
	os, ns := asMap(o["signals"]), asMap(n["signals"])
	for _, k := range keys(os) {
		if _, ok := ns[k]; !ok {
			add("signal %s was removed", k)
		}
	}
	od, nd := asMap(o["$defs"]), asMap(n["$defs"])
	for _, name := range keys(od) {
		nt, ok := nd[name]
		if !ok {
			add("type %s was removed", name)
			continue
		}
		compareSchema(add, "type "+name, asMap(od[name]), asMap(nt), false)
	}
	for _, name := range keys(nd) {
		if _, ok := od[name]; !ok && asMap(nd[name])["since"] == nil && name != reservedSignalUnion {
			add("type %s is new but has no since", name)
		}
	}
	sort.Strings(out)
	return out, nil
}

// removals lists, for a raised protocolVersion nv, what still breaks v<ov> connections: a released
// method or signal deleted from the schema (it stays, marked removedIn, so they keep it), and a
// method marked removedIn that the release did not deprecate (a deprecated element stays at least
// one release).
func removals(o, n map[string]any, ov, nv int) []string {
	var out []string
	om, nm := asMap(o["methods"]), asMap(n["methods"])
	for _, name := range keys(om) {
		nmeth, ok := nm[name]
		if !ok {
			out = append(out, fmt.Sprintf("method %s was removed: released in v%d, it stays in the schema marked removedIn: %d (with its deprecated text) so v%d connections keep it; the dispatch offers it only to them", name, ov, nv, ov))
			continue
		}
		if num(asMap(nmeth)["removedIn"]) > 0 && asMap(om[name])["deprecated"] == nil {
			out = append(out, fmt.Sprintf("method %s is marked removedIn but release v%d did not deprecate it: a deprecated method stays at least one release; drop removedIn, keep deprecated, and remove it in the version after the next release", name, ov))
		}
	}
	os, ns := asMap(o["signals"]), asMap(n["signals"])
	for _, k := range keys(os) {
		if _, ok := ns[k]; !ok {
			out = append(out, fmt.Sprintf("signal %s was removed: released in v%d, it stays in the schema so v%d clients keep receiving what they know", k, ov, ov))
		}
	}
	return out
}

// compareSchema compares two schemas of the same element; params=true also refuses new required members.
func compareSchema(add func(string, ...any), where string, o, n map[string]any, params bool) {
	if !reflect.DeepEqual(o["type"], n["type"]) && o["type"] != nil {
		add("%s: type changed from %v to %v", where, o["type"], n["type"])
	}
	if !reflect.DeepEqual(o["$ref"], n["$ref"]) && o["$ref"] != nil {
		add("%s: type changed from %v to %v", where, o["$ref"], n["$ref"])
	}
	if o["format"] != nil && !reflect.DeepEqual(o["format"], n["format"]) {
		add("%s: format changed from %v to %v", where, o["format"], n["format"])
	}
	if o["const"] != nil && !reflect.DeepEqual(o["const"], n["const"]) {
		add("%s: kind changed from %v to %v", where, o["const"], n["const"])
	}
	if ov, ok := o["enum"].([]any); ok {
		nv, _ := n["enum"].([]any)
		for _, v := range ov {
			if !containsAny(nv, v) {
				add("%s: enum value %v was removed", where, v)
			}
		}
		sinces := asMap(n["x-enum-since"])
		for _, v := range nv {
			if s, _ := v.(string); !containsAny(ov, v) && sinces[s] == nil {
				add("%s: enum value %v is new but has no since (add it to x-enum-since)", where, v)
			}
		}
	}
	if ov, ok := o["oneOf"].([]any); ok {
		nv, _ := n["oneOf"].([]any)
		for _, v := range ov {
			if !containsAny(nv, v) {
				add("%s: union variant %v was removed", where, asMap(v)["$ref"])
			}
		}
	}
	if o["items"] != nil {
		compareSchema(add, where+" items", asMap(o["items"]), asMap(n["items"]), false)
	}
	op, np := asMap(o["properties"]), asMap(n["properties"])
	for _, k := range keys(op) {
		nf, ok := np[k]
		if !ok {
			add("%s: field %s was removed", where, k)
			continue
		}
		compareSchema(add, where+"."+k, asMap(op[k]), asMap(nf), false)
	}
	for _, k := range keys(np) {
		if _, ok := op[k]; !ok && asMap(np[k])["since"] == nil && asMap(np[k])["const"] == nil {
			add("%s: field %s is new but has no since", where, k)
		}
	}
	oreq, _ := o["required"].([]any)
	nreq, _ := n["required"].([]any)
	for _, r := range nreq {
		if !containsAny(oreq, r) {
			if params {
				add("%s: %v is a new required param", where, r)
			}
		}
	}
	if !params {
		for _, r := range oreq {
			if !containsAny(nreq, r) {
				add("%s: %v is no longer required (readers rely on it)", where, r)
			}
		}
	}
}

func asMap(v any) map[string]any {
	m, _ := v.(map[string]any)
	if m == nil {
		return map[string]any{}
	}
	return m
}

func num(v any) float64 { f, _ := v.(float64); return f }

func keys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func containsAny(xs []any, x any) bool {
	for _, y := range xs {
		if reflect.DeepEqual(x, y) {
			return true
		}
	}
	return false
}

// checkBreaking compares the current bundle with the newest release snapshot.
func checkBreaking(schemaDir string, bundle []byte) ([]string, string, error) {
	path, _, ok := latestRelease(schemaDir)
	if !ok {
		return nil, "", nil
	}
	old, err := os.ReadFile(path)
	if err != nil {
		return nil, path, err
	}
	out, err := Breaking(old, bundle)
	return out, path, err
}
