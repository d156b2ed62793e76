package main

import (
	"fmt"
	"sort"
	"strings"
)

const maxSafeInt = 9007199254740991

// reservedSignalUnion is the union of every signal, built by the generator;
// "#/$defs/Signal" names it from any file.
const reservedSignalUnion = "Signal"

func (l *loader) build(fileNames []string) {
	p := l.p
	root := p.files["protocol.json"]
	p.Title = root.getStr("title")
	p.Description = root.getStr("description")
	p.Version = root.getInt("protocolVersion")
	p.MinVersion = root.getInt("minProtocolVersion")
	if p.MinVersion > p.Version {
		l.fail("schema/protocol.json#/minProtocolVersion", "minProtocolVersion %d is above protocolVersion %d", p.MinVersion, p.Version)
	}
	scopes := root.get("scopes")
	for _, k := range scopes.keys {
		s := scopes.vals[k]
		p.Scopes = append(p.Scopes, &Scope{Name: k, Description: s.getStr("description"), Includes: s.strings("includes")})
		l.claim("Scope"+goName(k), "schema/protocol.json#/scopes/"+k)
	}
	for _, s := range p.Scopes {
		for _, inc := range s.Includes {
			if l.scope(inc) == nil {
				l.fail("schema/protocol.json#/scopes/"+s.Name+"/includes", "unknown scope %q", inc)
			}
		}
	}

	// Register every $defs name first so refs resolve in any order.
	for _, fn := range fileNames {
		if fn == "protocol.json" {
			continue
		}
		defs := p.files[fn].get("$defs")
		l.defsOf[fn] = map[string]bool{}
		if defs == nil {
			continue
		}
		for _, name := range defs.keys {
			l.defsOf[fn][name] = true
			if name == reservedSignalUnion {
				l.fail("schema/"+fn+"#/$defs/"+name, "the name %s is reserved for the union of all signals; rename the type", name)
			}
		}
	}
	seenDef := map[string]string{}
	for _, fn := range fileNames {
		for name := range l.defsOf[fn] {
			if prev, ok := seenDef[name]; ok {
				l.fail("schema/"+fn+"#/$defs/"+name, "type %s is also defined in schema/%s; type names are global", name, prev)
			}
			seenDef[name] = fn
		}
	}

	errs := root.get("errors")
	codes := map[int]string{}
	for _, k := range errs.keys {
		e := errs.vals[k]
		where := "schema/protocol.json#/errors/" + k
		d := &ErrorDef{Name: k, Code: e.getInt("code"), Message: e.getStr("message"), Description: e.getStr("description"), Since: e.getInt("since"), Deprecated: e.getStr("deprecated")}
		if prev, ok := codes[d.Code]; ok {
			l.fail(where, "code %d is also used by %s", d.Code, prev)
		}
		codes[d.Code] = k
		if dn := e.get("data"); dn != nil {
			d.Data = l.typ(dn, "protocol.json", where+"/data", k+"ErrorData", true)
		}
		l.claim("Code"+k, where)
		l.claim("New"+k+"Error", where)
		p.Errors = append(p.Errors, d)
	}

	for _, fn := range fileNames {
		if fn == "protocol.json" {
			continue
		}
		f := p.files[fn]
		g := &Group{Name: f.getStr("group"), Description: f.getStr("description"), File: fn}
		if fn != g.Name+".json" {
			l.fail("schema/"+fn+"#/group", "group %q must live in schema/%s.json", g.Name, g.Name)
		}
		if defs := f.get("$defs"); defs != nil {
			for _, name := range defs.keys {
				t := l.typ(defs.vals[name], fn, "schema/"+fn+"#/$defs/"+name, name, true)
				_ = t
			}
		}
		if ms := f.get("methods"); ms != nil {
			for _, name := range ms.keys {
				m := l.method(g, fn, name, ms.vals[name])
				g.Methods = append(g.Methods, m)
				p.Methods = append(p.Methods, m)
			}
		}
		if ss := f.get("signals"); ss != nil {
			for _, k := range ss.keys {
				s := l.signal(g, fn, k, ss.vals[k])
				g.Signals = append(g.Signals, s)
				p.Signals = append(p.Signals, s)
			}
		}
		l.claim(goName(g.Name)+"Handler", "schema/"+fn)
		p.Groups = append(p.Groups, g)
	}
	// The HTTP section, once every method is known (its routes name them).
	for _, g := range p.Groups {
		if h := p.files[g.File].get("http"); h != nil {
			l.httpAPI(g, g.File, h)
		}
	}
	sort.Slice(p.Methods, func(i, j int) bool { return p.Methods[i].Name < p.Methods[j].Name })

	// The union of all signals.
	sig := &Type{K: kUnion, Name: reservedSignalUnion, Since: p.MinVersion, Description: "Every ipc.signal kind. Readers ignore unknown kinds.", Where: "signals"}
	for _, s := range p.Signals {
		sig.Variants = append(sig.Variants, s.Type.Name)
		s.Type.Unions = append(s.Type.Unions, reservedSignalUnion)
	}
	p.Types[reservedSignalUnion] = sig
	l.claim(reservedSignalUnion, "signals")
	l.checkSequencedScopes(p.Signals)

	l.checkRefs()
	l.checkUnions()
}

func (l *loader) scope(name string) *Scope {
	for _, s := range l.p.Scopes {
		if s.Name == name {
			return s
		}
	}
	return nil
}

func (l *loader) method(g *Group, fn, name string, n *node) *Method {
	where := "schema/" + fn + "#/methods/" + name
	m := &Method{Name: name, Group: g.Name, Summary: n.getStr("summary"), Description: n.getStr("description"), Scope: n.getStr("scope"), Since: n.getInt("since"), Deprecated: n.getStr("deprecated"), Experimental: n.getStr("stability") == "experimental"}
	if name != "$/"+strings.TrimPrefix(name, "$/") || strings.HasPrefix(name, "$/") {
		// $/ methods belong to whichever group lists them.
	} else if !strings.HasPrefix(name, g.Name+".") {
		l.fail(where, "method %q must start with its group name %q", name, g.Name+".")
	}
	m.GoName = goName(name)
	if x := n.getStr("x-go-name"); x != "" {
		if x == m.GoName {
			l.fail(where+"/x-go-name", "x-go-name %q equals the mechanical name; remove it", x)
		}
		m.GoName = x
	}
	m.HandlerName = goName(strings.TrimPrefix(name, g.Name+"."))
	if strings.HasPrefix(name, "$/") {
		m.HandlerName = m.GoName
	}
	if l.scope(m.Scope) == nil {
		l.fail(where+"/scope", "unknown scope %q; scopes are defined in schema/protocol.json", m.Scope)
	}
	if m.Since > l.p.Version {
		l.fail(where+"/since", "since %d is above protocolVersion %d", m.Since, l.p.Version)
	}
	if m.RemovedIn = n.getInt("removedIn"); m.RemovedIn != 0 {
		switch {
		case m.RemovedIn <= m.Since:
			l.fail(where+"/removedIn", "removedIn %d is not after since %d", m.RemovedIn, m.Since)
		case m.RemovedIn > l.p.Version:
			l.fail(where+"/removedIn", "removedIn %d is above protocolVersion %d; raise protocolVersion to %d in schema/protocol.json", m.RemovedIn, l.p.Version, m.RemovedIn)
		case m.RemovedIn <= l.p.MinVersion:
			l.fail(where+"/removedIn", "removedIn %d is not above minProtocolVersion %d: no connection can negotiate a version that has it; delete the method from the schema", m.RemovedIn, l.p.MinVersion)
		case m.Deprecated == "":
			l.fail(where+"/removedIn", "a removed method keeps its deprecated text (what to use instead)")
		}
	}
	l.claim("Method"+m.GoName, where)
	l.claim(goName(g.Name)+"Handler."+m.HandlerName, where)
	m.Params = l.typ(n.get("params"), fn, where+"/params", m.GoName+"Params", true)
	if pt := l.resolve(m.Params); pt != nil && pt.K != kObject {
		l.fail(where+"/params", "params must be an object type")
	}
	m.Result = l.typ(n.get("result"), fn, where+"/result", m.GoName+"Result", true)
	if a := n.get("x-audit"); a != nil {
		m.Audited, m.AuditParams = true, n.strings("x-audit")
		props := n.get("params").get("properties")
		for i, pn := range m.AuditParams {
			if props == nil || props.get(pn) == nil {
				l.fail(fmt.Sprintf("%s/x-audit/%d", where, i), "x-audit names %q, which is not a param of %s", pn, name)
			}
		}
	}
	m.Resource = n.getStr("x-resource")
	for _, en := range n.strings("errors") {
		var found *ErrorDef
		for _, e := range l.p.Errors {
			if e.Name == en {
				found = e
			}
		}
		if found == nil {
			l.fail(where+"/errors", "unknown error %q; errors are defined in schema/protocol.json#/errors", en)
			continue
		}
		m.Errors = append(m.Errors, found)
	}
	return m
}

func (l *loader) signal(g *Group, fn, k string, n *node) *Signal {
	where := "schema/" + fn + "#/signals/" + k
	s := &Signal{Kind: k, Group: g.Name, Summary: n.getStr("summary"), Description: n.getStr("description"), Since: n.getInt("since"), Deprecated: n.getStr("deprecated"), Experimental: n.getStr("stability") == "experimental", Session: n.getBool("session"), Scopes: n.strings("scopes"), Delivery: n.getStr("delivery"), Ephemeral: n.getBool("ephemeral")}
	for i, sc := range s.Scopes {
		if l.scope(sc) == nil {
			l.fail(fmt.Sprintf("%s/scopes/%d", where, i), "unknown scope %q; scopes are defined in schema/protocol.json", sc)
		}
	}
	// A signal's body is an object type whose kind is the signal kind.
	obj := objNode()
	obj.set("type", strNode("object"))
	desc := s.Summary
	if s.Description != "" {
		desc += " " + s.Description
	}
	obj.set("description", strNode(desc))
	obj.set("since", numNode(int64(s.Since)))
	props := objNode()
	props.set("kind", &node{kind: 'o', keys: []string{"const"}, vals: map[string]*node{"const": strNode(k)}})
	if pn := n.get("properties"); pn != nil {
		for _, pk := range pn.keys {
			props.set(pk, pn.vals[pk])
		}
	}
	obj.set("properties", props)
	req := arrNode(strNode("kind"))
	for _, r := range n.strings("required") {
		req.items = append(req.items, strNode(r))
	}
	obj.set("required", req)
	if s.Deprecated != "" {
		obj.set("deprecated", strNode(s.Deprecated))
	}
	name := goName(k) + "Signal"
	if x := n.getStr("x-go-name"); x != "" {
		name = x
	}
	if s.Session {
		for _, f := range []string{"sessionId"} {
			if !contains(n.strings("required"), f) {
				l.fail(where, "a session signal must require %q", f)
			}
		}
	}
	s.Type = l.typ(obj, fn, where, name, true)
	l.signalNodes = append(l.signalNodes, [2]any{name, obj})
	s.Type.IsSignal = true
	s.Type.Kind = k
	s.Type.Experimental = s.Experimental
	l.claim("Signal"+goName(k), where)
	return s
}

// checkSequencedScopes enforces that every sequenced signal (session, delivery all, not ephemeral)
// has the same scopes: $seq numbers one stream per session, and a reader that received only some
// of it would see holes it cannot tell from lost signals.
func (l *loader) checkSequencedScopes(sigs []*Signal) {
	var first *Signal
	for _, s := range sigs {
		if !s.Sequenced() {
			continue
		}
		if first == nil {
			first = s
			continue
		}
		a, b := append([]string(nil), first.Scopes...), append([]string(nil), s.Scopes...)
		sort.Strings(a)
		sort.Strings(b)
		if strings.Join(a, ",") != strings.Join(b, ",") {
			l.fail("schema/"+s.Group+".json#/signals/"+s.Kind+"/scopes", "a sequenced signal (session, delivery all, not ephemeral) must have the same scopes as %q (%s): the $seq of a session is one stream; make it ephemeral or give it another delivery to narrow its audience", first.Kind, strings.Join(first.Scopes, ", "))
		}
	}
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// typ builds a Type from a schema node. name is the Go name an object, enum or union
// defined here gets; named=true registers it in p.Types.
func (l *loader) typ(n *node, fn, where, name string, named bool) *Type {
	if n == nil {
		l.fail(where, "missing type")
		return &Type{K: kAny}
	}
	t := &Type{Description: n.getStr("description"), Deprecated: n.getStr("deprecated"), Since: n.getInt("since"), Format: n.getStr("format"), Where: where, Experimental: n.getStr("stability") == "experimental"}
	t.bounds(n)
	if x := n.getStr("x-go-name"); x != "" {
		switch {
		case isPropertyPath(where):
			// A member's x-go-name renames its Go field; the caller applied it.
		case isDefsEntry(where) || isSignalPath(where):
			if x == name {
				l.fail(where+"/x-go-name", "x-go-name %q equals the mechanical name; remove it", x)
			}
			name = x
		default:
			l.fail(where+"/x-go-name", "x-go-name has no effect here: it renames a $defs type, a signal, a method or a member; remove it")
		}
	}
	tv := n.get("type")
	var typeName string
	if tv != nil {
		if tv.kind == 's' {
			typeName = tv.str
		} else {
			for _, it := range tv.items {
				if it.str == "null" {
					t.Nullable = true
				} else {
					typeName = it.str
				}
			}
		}
	}
	register := func() {
		if named {
			t.Name = name
			l.claim(name, where)
			l.p.Types[name] = t
		}
	}
	switch {
	case n.has("$ref"):
		t.K = kRef
		t.Ref = l.refName(n.getStr("$ref"), fn, where)
		if n.has("type") || n.has("properties") || n.has("oneOf") || n.has("enum") {
			l.fail(where, "$ref cannot be combined with type, properties, oneOf or enum")
		}
		if named && strings.Contains(where, "/$defs/") {
			l.fail(where, "a $defs entry cannot be a bare $ref; use the referenced type directly")
		}
		return t
	case n.has("oneOf"):
		t.K = kUnion
		for i, v := range n.get("oneOf").items {
			ref := v.getStr("$ref")
			if ref == "" || len(v.keys) != 1 {
				l.fail(fmt.Sprintf("%s/oneOf/%d", where, i), "union variants must be plain {\"$ref\": ...} to named object types with a required kind const")
				continue
			}
			t.Variants = append(t.Variants, l.refName(ref, fn, fmt.Sprintf("%s/oneOf/%d", where, i)))
		}
		if !named || !strings.Contains(where, "/$defs/") {
			l.fail(where, "a union (oneOf) must be a named type under $defs")
		}
		register()
		return t
	case n.has("enum"):
		t.K = kEnum
		if typeName != "string" {
			l.fail(where, "enums must be of type string")
		}
		names := n.get("x-enum-names")
		used := map[string]string{}
		for _, v := range n.get("enum").items {
			ev := EnumValue{Value: v.str, GoName: goName(v.str)}
			if names != nil && names.has(v.str) {
				ev.GoName = names.getStr(v.str)
			}
			if ev.GoName == "" {
				l.fail(where+"/enum", "enum value %q has no letters or digits to name a constant; give it a name in x-enum-names", v.str)
				continue
			}
			if prev, ok := used[ev.GoName]; ok {
				l.fail(where+"/enum", "enum values %q and %q both map to the identifier %s%s; give one a name in x-enum-names", prev, v.str, name, ev.GoName)
				continue
			}
			used[ev.GoName] = v.str
			t.Enum = append(t.Enum, ev)
		}
		if names != nil {
			for _, k := range names.keys {
				if !contains(n.strings("enum"), k) {
					l.fail(where+"/x-enum-names", "x-enum-names names %q, which is not an enum value; remove it", k)
				}
			}
		}
		if sinces := n.get("x-enum-since"); sinces != nil {
			for _, k := range sinces.keys {
				if !contains(n.strings("enum"), k) {
					l.fail(where+"/x-enum-since", "x-enum-since names %q, which is not an enum value; remove it", k)
				}
			}
		}
		for i := range t.Enum {
			t.Enum[i].Since = t.Since
			if v := n.get("x-enum-since").get(t.Enum[i].Value); v != nil {
				since, _ := v.num.Int64()
				t.Enum[i].Since = int(since)
				if int(since) < t.Since {
					l.fail(where+"/x-enum-since", "enum value %q says since %d, before its type (since %d)", t.Enum[i].Value, since, t.Since)
				}
				if int(since) > l.p.Version {
					l.fail(where+"/x-enum-since", "enum value %q says since %d, above protocolVersion %d", t.Enum[i].Value, since, l.p.Version)
				}
			}
		}
		register()
		for _, ev := range t.Enum {
			if named {
				l.claim(name+ev.GoName, where)
			}
		}
		return t
	case n.has("const"):
		t.K = kString
		t.Const = n.getStr("const")
		return t
	case n.getBool("x-any"):
		t.K = kAny
		return t
	}
	switch typeName {
	case "object":
		if ap := n.get("additionalProperties"); ap != nil && ap.kind == 'o' {
			if n.has("properties") {
				l.fail(where, "an object has either properties or additionalProperties (a map), not both")
			}
			t.K = kMap
			t.Items = l.typ(ap, fn, where+"/additionalProperties", name+"Value", false)
			return t
		}
		t.K = kObject
		req := n.strings("required")
		props := n.get("properties")
		if props != nil {
			for _, k := range props.keys {
				pw := where + "/properties/" + k
				pn := props.vals[k]
				gn := goName(k)
				if x := pn.getStr("x-go-name"); x != "" {
					if x == gn {
						l.fail(pw+"/x-go-name", "x-go-name %q equals the mechanical name; remove it", x)
					}
					gn = x
				}
				if gn == "" {
					l.fail(pw, "member %q has no letters or digits to name a field", k)
				}
				pt := l.typ(pn, fn, pw, name+gn, isInlineNamed(pn))
				if pt.Since == 0 && pt.Const == "" {
					l.fail(pw, "missing since: every field says the protocol version it arrived in")
				}
				for _, other := range t.Props {
					if other.GoName == gn {
						l.fail(pw, "members %q and %q both map to the Go field %s; set x-go-name on one", other.Name, k, gn)
					}
				}
				if pt.Nullable && !contains(req, k) {
					l.fail(pw, "member %q is optional and nullable: absent and null would be two states Go cannot tell apart; make it required and nullable, or optional", k)
				}
				t.Props = append(t.Props, &Prop{Name: k, GoName: gn, T: pt, Required: contains(req, k)})
			}
		}
		for _, r := range req {
			if props == nil || !props.has(r) {
				l.fail(where+"/required", "required member %q is not in properties", r)
			}
		}
		register()
		return t
	case "string":
		t.K = kString
	case "integer":
		t.K = kInt
		switch t.Format {
		case "int32", "int53":
		case "int64":
			l.fail(where, "integer format int64 can exceed 2^53-1, which TypeScript cannot hold; use int53, or a string with pattern ^[0-9]+$")
		case "":
			l.fail(where, "integer without a format; say int32 or int53")
		default:
			l.fail(where, "integer format %q; say int32 or int53", t.Format)
		}
		if mx := n.get("maximum"); mx != nil {
			if f, _ := mx.num.Float64(); f > maxSafeInt {
				l.fail(where+"/maximum", "maximum above 2^53-1; carry such numbers as strings")
			}
		}
	case "number":
		t.K = kNumber
	case "boolean":
		t.K = kBool
	case "array":
		t.K = kArray
		t.Items = l.typ(n.get("items"), fn, where+"/items", name+"Item", isInlineNamed(n.get("items")))
		if t.Items.Since == 0 {
			t.Items.Since = t.Since
		}
	default:
		l.fail(where, "a type needs one of type, $ref, oneOf, enum, const or x-any")
		t.K = kAny
	}
	return t
}

// bounds reads the validation keywords of n that the fast params decoder checks (Type.Minimum).
func (t *Type) bounds(n *node) {
	num := func(k string) *int64 {
		v := n.get(k)
		if v == nil {
			return nil
		}
		i, err := v.num.Int64()
		if err != nil {
			t.Odd = true
			return nil
		}
		return &i
	}
	t.MinLength, t.MaxLength = num("minLength"), num("maxLength")
	t.Minimum, t.Maximum = num("minimum"), num("maximum")
	t.Pattern = n.getStr("pattern")
	lo, hi := int64(0), int64(0)
	switch t.Format {
	case "int53":
		lo, hi = -maxSafeInt, maxSafeInt
	case "int32":
		lo, hi = -1<<31, 1<<31-1
	}
	if hi != 0 && t.Minimum == nil {
		t.Minimum = &lo
	}
	if hi != 0 && t.Maximum == nil {
		t.Maximum = &hi
	}
}

// isPropertyPath reports whether where is an object member (…/properties/<name>).
func isPropertyPath(where string) bool {
	i := strings.LastIndex(where, "/properties/")
	return i >= 0 && !strings.Contains(where[i+len("/properties/"):], "/")
}

// isDefsEntry reports whether where is a $defs entry itself (…#/$defs/<Name>).
func isDefsEntry(where string) bool {
	i := strings.LastIndex(where, "#/$defs/")
	return i >= 0 && !strings.Contains(where[i+len("#/$defs/"):], "/")
}

// isSignalPath reports whether where is a signal entry itself (…#/signals/<kind>).
func isSignalPath(where string) bool {
	i := strings.LastIndex(where, "#/signals/")
	return i >= 0 && !strings.Contains(where[i+len("#/signals/"):], "/")
}

// isInlineNamed reports whether an inline schema defines a struct or enum that needs a Go name.
func isInlineNamed(n *node) bool {
	if n == nil {
		return false
	}
	if n.has("enum") {
		return true
	}
	if n.getStr("type") == "object" && !n.has("additionalProperties") {
		return true
	}
	if tv := n.get("type"); tv != nil && tv.kind == 'a' {
		for _, it := range tv.items {
			if it.str == "object" && !n.has("additionalProperties") {
				return true
			}
		}
	}
	return false
}

func (l *loader) refName(ref, fn, where string) string {
	file := fn
	i := strings.Index(ref, "#/$defs/")
	if i < 0 {
		l.fail(where, "$ref %q must look like #/$defs/Name or file.json#/$defs/Name", ref)
		return ""
	}
	if i > 0 {
		file = ref[:i]
	}
	name := ref[i+len("#/$defs/"):]
	if name == reservedSignalUnion && !l.defsOf[file][name] {
		return name
	}
	if _, ok := l.p.files[file]; !ok {
		l.fail(where, "$ref %q points into schema/%s, which does not exist", ref, file)
		return name
	}
	if !l.defsOf[file][name] {
		l.fail(where, "dangling $ref %q: schema/%s has no $defs/%s", ref, file, name)
	}
	return name
}

// resolve follows a ref to its named type.
func (l *loader) resolve(t *Type) *Type {
	for i := 0; t != nil && t.K == kRef && i < 10; i++ {
		t = l.p.Types[t.Ref]
	}
	return t
}

func (l *loader) checkRefs() {
	// Every kRef target must exist (dangling refs were reported already); nothing more.
}

func (l *loader) checkUnions() {
	for _, name := range sortedKeys(l.p.Types) {
		t := l.p.Types[name]
		if t.K != kUnion {
			continue
		}
		kinds := map[string]string{}
		for _, vn := range t.Variants {
			v := l.p.Types[vn]
			if v == nil {
				continue
			}
			if v.K != kObject {
				l.fail(t.Where, "union variant %s is not an object", vn)
				continue
			}
			var k string
			for _, pr := range v.Props {
				if pr.Name == "kind" && pr.T.Const != "" && pr.Required {
					k = pr.T.Const
				}
			}
			if k == "" {
				l.fail(v.Where, "union variant %s of %s needs a required member \"kind\" with a const value", vn, name)
				continue
			}
			if prev, ok := kinds[k]; ok {
				l.fail(t.Where, "variants %s and %s share the kind %q; kinds must be distinct", prev, vn, k)
				continue
			}
			kinds[k] = vn
			v.Kind = k
			if !contains(v.Unions, name) {
				v.Unions = append(v.Unions, name)
			}
		}
	}
	for _, name := range sortedKeys(l.p.Types) {
		if v := l.p.Types[name]; len(v.Unions) > 1 {
			l.fail(v.Where, "type %s is a variant of several unions (%s); a type belongs to at most one union", name, strings.Join(v.Unions, ", "))
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
