package main

import (
	"bytes"
	"strings"
)

// bundle builds the one-file schema served at GET /protocol.json and embedded in protocol/:
// every $defs entry of every file under one $defs (refs rewritten to #/$defs/Name), the
// synthesized signal types and the Signal union, the methods with their params and result
// schemas, the signals and the errors registry. int53 integers get explicit bounds so any
// JSON Schema validator enforces them.
func bundle(p *Protocol, fileNames []string, signalNodes [][2]any) []byte {
	root := p.files["protocol.json"]
	b := objNode()
	b.set("$schema", strNode("https://json-schema.org/draft/2020-12/schema"))
	b.set("$id", strNode("https://zidane.dev/protocol.json"))
	b.set("title", strNode(p.Title))
	b.set("description", strNode(p.Description))
	b.set("protocolVersion", numNode(int64(p.Version)))
	b.set("minProtocolVersion", numNode(int64(p.MinVersion)))
	b.set("schemaHash", strNode(p.Hash))
	b.set("scopes", root.get("scopes").clone())
	errs := root.get("errors").clone()
	for _, k := range errs.keys {
		if d := errs.vals[k].get("data"); d != nil {
			rewrite(d)
		}
	}
	b.set("errors", errs)

	methods := objNode()
	for _, m := range p.Methods {
		src := p.files[m.Group+".json"].get("methods").get(m.Name).clone()
		rewrite(src)
		src.set("group", strNode(m.Group))
		methods.set(m.Name, src)
	}
	b.set("methods", methods)

	signals := objNode()
	defs := objNode()
	for _, fn := range fileNames {
		if fn == "protocol.json" {
			continue
		}
		if d := p.files[fn].get("$defs"); d != nil {
			for _, k := range d.keys {
				c := d.vals[k].clone()
				rewrite(c)
				defs.set(k, c)
			}
		}
	}
	union := objNode()
	union.set("description", strNode("Every ipc.signal kind. Readers ignore unknown kinds."))
	var variants []*node
	for _, sn := range signalNodes {
		name := sn[0].(string)
		c := sn[1].(*node).clone()
		rewrite(c)
		defs.set(name, c)
		ref := objNode()
		ref.set("$ref", strNode("#/$defs/"+name))
		variants = append(variants, ref)
	}
	union.set("oneOf", arrNode(variants...))
	defs.set(reservedSignalUnion, union)
	for _, s := range p.Signals {
		e := objNode()
		e.set("group", strNode(s.Group))
		e.set("summary", strNode(s.Summary))
		if s.Description != "" {
			e.set("description", strNode(s.Description))
		}
		e.set("since", numNode(int64(s.Since)))
		e.set("session", &node{kind: 'b', b: s.Session})
		sc := arrNode()
		for _, x := range s.Scopes {
			sc.items = append(sc.items, strNode(x))
		}
		e.set("scopes", sc)
		e.set("delivery", strNode(s.Delivery))
		if s.Ephemeral {
			e.set("ephemeral", &node{kind: 'b', b: true})
		}
		ref := objNode()
		ref.set("$ref", strNode("#/$defs/"+s.Type.Name))
		e.set("schema", ref)
		signals.set(s.Kind, e)
	}
	b.set("signals", signals)
	b.set("$defs", defs)
	var buf bytes.Buffer
	b.write(&buf, "")
	buf.WriteByte('\n')
	return buf.Bytes()
}

// rewrite makes cross-file refs local and bounds int32 and int53 integers, in place.
func rewrite(n *node) {
	switch n.kind {
	case 'o':
		if r := n.get("$ref"); r != nil && r.kind == 's' {
			if i := strings.Index(r.str, "#/$defs/"); i > 0 {
				r.str = r.str[i:]
			}
		}
		lo, hi := int64(0), int64(0)
		switch n.getStr("format") {
		case "int53":
			lo, hi = -maxSafeInt, maxSafeInt
		case "int32":
			lo, hi = -1<<31, 1<<31-1
		}
		if hi != 0 {
			if !n.has("minimum") {
				n.set("minimum", numNode(lo))
			}
			if !n.has("maximum") {
				n.set("maximum", numNode(hi))
			}
		}
		for _, k := range n.keys {
			rewrite(n.vals[k])
		}
	case 'a':
		for _, it := range n.items {
			rewrite(it)
		}
	}
}
