package main

import (
	"fmt"
	"sort"

	"github.com/dave/jennifer/jen"
)

// The fast params decoders (protocol/params_gen.go): for each method whose params the schema
// lets be read in one pass, a decodeFast method on its params type (and on the object types it
// holds) that reads the JSON straight into the type and checks the schema's bounds on the way,
// with the scanner of protocol/fastparams.go. A type holding what the scanner does not check (a
// pattern, a number, a map, a union, free JSON) gets none: its params always take DecodeParams'
// full check.

// fastEmitter decides which types get a decoder and writes them.
type fastEmitter struct {
	g    *goEmitter
	memo map[*Type]bool
}

// ok reports whether t can be read and checked by the fast decoder.
func (e *fastEmitter) ok(t *Type) bool {
	if t == nil || t.Odd || t.Pattern != "" {
		return false
	}
	if v, seen := e.memo[t]; seen {
		return v
	}
	e.memo[t] = true // a type that holds itself is read by its own method
	v := false
	switch t.K {
	case kString:
		v = t.Const == ""
	case kInt, kBool, kEnum:
		v = true
	case kArray:
		v = e.ok(t.Items)
	case kRef:
		v = t.MinLength == nil && t.MaxLength == nil && t.Minimum == nil && t.Maximum == nil && e.ok(e.g.named(t.Ref))
	case kObject:
		v = t.Name != "" && len(t.Props) <= 64
		for _, pr := range t.Props {
			v = v && e.ok(pr.T)
		}
	}
	e.memo[t] = v
	return v
}

// objects lists the object types the fast decoders of the methods' params need, by name.
func (e *fastEmitter) objects() []*Type {
	seen := map[string]*Type{}
	var walk func(t *Type)
	walk = func(t *Type) {
		switch t.K {
		case kRef:
			walk(e.g.named(t.Ref))
		case kArray:
			walk(t.Items)
		case kObject:
			if _, ok := seen[t.Name]; ok {
				return
			}
			seen[t.Name] = t
			for _, pr := range t.Props {
				walk(pr.T)
			}
		}
	}
	for _, m := range e.g.p.Methods {
		if m.Params != nil && e.ok(m.Params) {
			walk(m.Params)
		}
	}
	names := make([]string, 0, len(seen))
	for n := range seen {
		names = append(names, n)
	}
	sort.Strings(names)
	out := make([]*Type, len(names))
	for i, n := range names {
		out[i] = seen[n]
	}
	return out
}

func (g *goEmitter) emitFastParams(f *jen.File) {
	e := &fastEmitter{g: g, memo: map[*Type]bool{}}
	for _, t := range e.objects() {
		e.emitObject(f, t)
	}
}

func (e *fastEmitter) emitObject(f *jen.File, t *Type) {
	var cases []jen.Code
	var required uint64
	for i, pr := range t.Props {
		bit := uint64(1) << i
		if pr.Required {
			required |= bit
		}
		body := []jen.Code{jen.If(jen.Op("!").Id("once").Call(jen.Op("&").Id("seen"), jen.Id(fmt.Sprintf("1<<%d", i)))).Block(jen.Return(jen.False()))}
		body = append(body, e.read(pr.T, jen.Id("p").Dot(pr.GoName), e.isPtr(pr), 0)...)
		cases = append(cases, jen.Case(jen.Lit(pr.Name)).Block(body...))
	}
	cases = append(cases, jen.Default().Block(jen.Return(jen.False())))
	seenVar := jen.Var().Id("seen").Uint64()
	if len(t.Props) == 0 {
		seenVar = jen.Null()
	}
	ret := jen.Return(jen.True())
	if required != 0 {
		mask := jen.Id(fmt.Sprintf("%#x", required))
		ret = jen.Return(jen.Id("seen").Op("&").Add(mask).Op("==").Add(mask.Clone()))
	}
	f.Comment("decodeFast reads p in one pass (protocol/fastparams.go); false: leave it to DecodeParams' full check.")
	if len(t.Props) == 0 {
		f.Func().Params(jen.Id("p").Op("*").Id(t.Name)).Id("decodeFast").Params(jen.Id("s").Op("*").Id("pscan")).Bool().Block(
			jen.Return(jen.Id("s").Dot("emptyObject").Call()))
		return
	}
	f.Func().Params(jen.Id("p").Op("*").Id(t.Name)).Id("decodeFast").Params(jen.Id("s").Op("*").Id("pscan")).Bool().Block(
		jen.If(jen.Op("!").Id("s").Dot("open").Call(jen.Id("'{'"))).Block(jen.Return(jen.False())),
		seenVar,
		jen.For(jen.Id("first").Op(":=").True(), jen.Empty(), jen.Id("first").Op("=").False()).Block(
			jen.List(jen.Id("name"), jen.Id("done"), jen.Id("ok")).Op(":=").Id("s").Dot("member").Call(jen.Id("first")),
			jen.If(jen.Op("!").Id("ok")).Block(jen.Return(jen.False())),
			jen.If(jen.Id("done")).Block(jen.Break()),
			jen.Switch(jen.String().Call(jen.Id("name"))).Block(cases...),
		),
		ret,
	)
}

// isPtr reports whether the Go field of pr is a pointer (fieldType).
func (e *fastEmitter) isPtr(pr *Prop) bool {
	return !(pr.Required && !pr.T.Nullable) && pr.T.K != kArray
}

// read emits statements that read a value of type t from s into dst (a pointer to it when ptr),
// returning false from the decoder when it is not there or out of bounds.
func (e *fastEmitter) read(t *Type, dst *jen.Statement, ptr bool, depth int) []jen.Code {
	v := jen.Id(fmt.Sprintf("v%d", depth))
	fail := jen.Return(jen.False())
	assign := func(val jen.Code) []jen.Code {
		if !ptr {
			return []jen.Code{dst.Clone().Op("=").Add(val)}
		}
		if val == jen.Code(v) {
			return []jen.Code{dst.Clone().Op("=").Op("&").Add(v)} // v is the case's own variable
		}
		x := jen.Id(fmt.Sprintf("x%d", depth))
		return []jen.Code{x.Clone().Op(":=").Add(val), dst.Clone().Op("=").Op("&").Add(x)}
	}
	tt := t
	if t.K == kRef {
		tt = e.g.named(t.Ref)
		t = tt // its bounds are the named type's (ok refuses a ref with bounds of its own)
	}
	switch tt.K {
	case kString:
		cond := jen.Op("!").Id("ok")
		if t.MinLength != nil || t.MaxLength != nil {
			lo, hi := int64(0), int64(-1)
			if t.MinLength != nil {
				lo = *t.MinLength
			}
			if t.MaxLength != nil {
				hi = *t.MaxLength
			}
			cond = cond.Op("||").Op("!").Id("lenIn").Call(v, jen.Lit(int(lo)), jen.Lit(int(hi)))
		}
		out := []jen.Code{jen.List(v, jen.Id("ok")).Op(":=").Id("s").Dot("str").Call(), jen.If(cond).Block(fail)}
		return append(out, assign(v)...)
	case kEnum:
		var vals []jen.Code
		for _, ev := range tt.Enum {
			vals = append(vals, jen.Lit(ev.Value))
		}
		out := []jen.Code{
			jen.List(v, jen.Id("ok")).Op(":=").Id("s").Dot("str").Call(),
			jen.If(jen.Op("!").Id("ok")).Block(fail),
			jen.Switch(v).Block(jen.Case(vals...), jen.Default().Block(fail)),
		}
		return append(out, assign(jen.Id(tt.Name).Call(v))...)
	case kInt:
		out := []jen.Code{
			jen.List(v, jen.Id("ok")).Op(":=").Id("s").Dot("int").Call(jen.Lit(*t.Minimum), jen.Lit(*t.Maximum)),
			jen.If(jen.Op("!").Id("ok")).Block(fail),
		}
		if t.Format == "int32" {
			return append(out, assign(jen.Int().Call(v))...)
		}
		return append(out, assign(v)...)
	case kBool:
		out := []jen.Code{jen.List(v, jen.Id("ok")).Op(":=").Id("s").Dot("bool").Call(), jen.If(jen.Op("!").Id("ok")).Block(fail)}
		return append(out, assign(v)...)
	case kArray:
		item := jen.Id(fmt.Sprintf("it%d", depth))
		body := []jen.Code{
			jen.List(jen.Id("done"), jen.Id("ok")).Op(":=").Id("s").Dot("item").Call(jen.Id(fmt.Sprintf("first%d", depth))),
			jen.If(jen.Op("!").Id("ok")).Block(fail),
			jen.If(jen.Id("done")).Block(jen.Break()),
			jen.Var().Add(item).Add(e.g.goType(tt.Items)),
		}
		body = append(body, e.read(tt.Items, item.Clone(), false, depth+1)...)
		body = append(body, v.Clone().Op("=").Append(v, item))
		first := jen.Id(fmt.Sprintf("first%d", depth))
		return []jen.Code{
			jen.If(jen.Op("!").Id("s").Dot("open").Call(jen.Id("'['"))).Block(fail),
			v.Clone().Op(":=").Add(e.g.goType(tt)).Values(), // [] decodes to an empty slice, not nil
			jen.For(first.Clone().Op(":=").True(), jen.Empty(), first.Clone().Op("=").False()).Block(body...),
			dst.Clone().Op("=").Add(v),
		}
	case kObject:
		if ptr {
			return []jen.Code{
				v.Clone().Op(":=").New(jen.Id(tt.Name)),
				jen.If(jen.Op("!").Add(v).Dot("decodeFast").Call(jen.Id("s"))).Block(fail),
				dst.Clone().Op("=").Add(v),
			}
		}
		return []jen.Code{jen.If(jen.Op("!").Add(dst).Dot("decodeFast").Call(jen.Id("s"))).Block(fail)}
	}
	panic(fmt.Sprintf("fast decoder: type %v of %s is not readable", tt.K, t.Where))
}
