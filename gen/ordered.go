package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
)

// node is a JSON value that keeps the order of object members, so generated
// fields follow the schema's order.
type node struct {
	kind  byte // 'o' object, 'a' array, 's' string, 'n' number, 'b' bool, 'z' null
	keys  []string
	vals  map[string]*node
	items []*node
	str   string
	num   json.Number
	b     bool
}

func parseOrdered(data []byte) (*node, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	n, err := readNode(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("trailing data after the JSON value")
	}
	return n, nil
}

func readNode(dec *json.Decoder) (*node, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			n := &node{kind: 'o', vals: map[string]*node{}}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				k := kt.(string)
				if _, dup := n.vals[k]; dup {
					return nil, fmt.Errorf("duplicate member %q", k)
				}
				v, err := readNode(dec)
				if err != nil {
					return nil, err
				}
				n.keys = append(n.keys, k)
				n.vals[k] = v
			}
			_, err := dec.Token()
			return n, err
		case '[':
			n := &node{kind: 'a'}
			for dec.More() {
				v, err := readNode(dec)
				if err != nil {
					return nil, err
				}
				n.items = append(n.items, v)
			}
			_, err := dec.Token()
			return n, err
		}
	case string:
		return &node{kind: 's', str: t}, nil
	case json.Number:
		return &node{kind: 'n', num: t}, nil
	case bool:
		return &node{kind: 'b', b: t}, nil
	case nil:
		return &node{kind: 'z'}, nil
	}
	return nil, fmt.Errorf("unexpected token %v", tok)
}

func (n *node) get(k string) *node {
	if n == nil || n.kind != 'o' {
		return nil
	}
	return n.vals[k]
}

func (n *node) has(k string) bool { return n.get(k) != nil }

func (n *node) getStr(k string) string {
	if v := n.get(k); v != nil && v.kind == 's' {
		return v.str
	}
	return ""
}

func (n *node) getInt(k string) int {
	if v := n.get(k); v != nil && v.kind == 'n' {
		i, _ := v.num.Int64()
		return int(i)
	}
	return 0
}

func (n *node) getBool(k string) bool {
	v := n.get(k)
	return v != nil && v.kind == 'b' && v.b
}

func (n *node) strings(k string) []string {
	v := n.get(k)
	if v == nil {
		return nil
	}
	var out []string
	for _, it := range v.items {
		out = append(out, it.str)
	}
	return out
}

// write encodes the node as indented JSON with members in their original order.
func (n *node) write(buf *bytes.Buffer, indent string) {
	switch n.kind {
	case 'o':
		if len(n.keys) == 0 {
			buf.WriteString("{}")
			return
		}
		buf.WriteString("{\n")
		for i, k := range n.keys {
			buf.WriteString(indent + "  ")
			writeJSONString(buf, k)
			buf.WriteString(": ")
			n.vals[k].write(buf, indent+"  ")
			if i < len(n.keys)-1 {
				buf.WriteByte(',')
			}
			buf.WriteByte('\n')
		}
		buf.WriteString(indent + "}")
	case 'a':
		if len(n.items) == 0 {
			buf.WriteString("[]")
			return
		}
		buf.WriteString("[\n")
		for i, it := range n.items {
			buf.WriteString(indent + "  ")
			it.write(buf, indent+"  ")
			if i < len(n.items)-1 {
				buf.WriteByte(',')
			}
			buf.WriteByte('\n')
		}
		buf.WriteString(indent + "]")
	case 's':
		writeJSONString(buf, n.str)
	case 'n':
		buf.WriteString(n.num.String())
	case 'b':
		if n.b {
			buf.WriteString("true")
		} else {
			buf.WriteString("false")
		}
	default:
		buf.WriteString("null")
	}
}

func writeJSONString(buf *bytes.Buffer, s string) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // `<`, `>` and `&` as themselves, as protocol.Marshal writes them
	_ = enc.Encode(s)        // a string always encodes
	buf.Write(bytes.TrimSuffix(b.Bytes(), []byte("\n")))
}

// clone copies a node deeply.
func (n *node) clone() *node {
	if n == nil {
		return nil
	}
	c := *n
	if n.vals != nil {
		c.keys = append([]string(nil), n.keys...)
		c.vals = make(map[string]*node, len(n.vals))
		for k, v := range n.vals {
			c.vals[k] = v.clone()
		}
	}
	if n.items != nil {
		c.items = make([]*node, len(n.items))
		for i, v := range n.items {
			c.items[i] = v.clone()
		}
	}
	return &c
}

func (n *node) set(k string, v *node) {
	if _, ok := n.vals[k]; !ok {
		n.keys = append(n.keys, k)
	}
	n.vals[k] = v
}

func (n *node) del(k string) {
	if _, ok := n.vals[k]; !ok {
		return
	}
	delete(n.vals, k)
	for i, kk := range n.keys {
		if kk == k {
			n.keys = append(n.keys[:i], n.keys[i+1:]...)
			break
		}
	}
}

func strNode(s string) *node    { return &node{kind: 's', str: s} }
func numNode(i int64) *node     { return &node{kind: 'n', num: json.Number(fmt.Sprint(i))} }
func objNode() *node            { return &node{kind: 'o', vals: map[string]*node{}} }
func arrNode(xs ...*node) *node { return &node{kind: 'a', items: xs} }
