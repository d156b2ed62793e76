package main

import (
	"fmt"
	"sort"
	"strings"

	"github.com/dave/jennifer/jen"
)

func (g *goEmitter) resultType(m *Method) string {
	if m.Result.K == kRef {
		return m.Result.Ref
	}
	return m.Result.Name
}

func (g *goEmitter) paramsType(m *Method) string {
	if m.Params.K == kRef {
		return m.Params.Ref
	}
	return m.Params.Name
}

func methodDoc(m *Method) string {
	d := m.Summary
	if m.Description != "" {
		d += " " + m.Description
	}
	return d
}

func (g *goEmitter) emitMethods(f *jen.File) {
	p := g.p
	f.Comment("ProtocolVersion is the newest protocol version this build speaks.")
	f.Const().Id("ProtocolVersion").Op("=").Lit(p.Version)
	f.Comment("MinProtocolVersion is the oldest protocol version this build speaks.")
	f.Const().Id("MinProtocolVersion").Op("=").Lit(p.MinVersion)
	f.Comment("SchemaHash is the SHA-256 of the schema files this code was generated from.")
	f.Const().Id("SchemaHash").Op("=").Lit(p.Hash)

	// Scopes.
	f.Comment("Scope is a token's scope, or the scope a method needs (schema/protocol.json#/scopes).")
	f.Type().Id("Scope").String()
	var sc []jen.Code
	for _, s := range p.Scopes {
		sc = append(sc, jen.Comment(fmt.Sprintf("Scope%s: %s", goName(s.Name), s.Description)))
		sc = append(sc, jen.Id("Scope"+goName(s.Name)).Id("Scope").Op("=").Lit(s.Name))
	}
	f.Const().Defs(sc...)
	var allowCases []jen.Code
	var known []jen.Code
	for _, s := range p.Scopes {
		known = append(known, jen.Id("Scope"+goName(s.Name)))
		allowed := []jen.Code{jen.Id("Scope" + goName(s.Name))}
		for _, inc := range s.Includes {
			allowed = append(allowed, jen.Id("Scope"+goName(inc)))
		}
		allowCases = append(allowCases, jen.Case(jen.Id("Scope"+goName(s.Name))).Block(
			jen.Switch(jen.Id("needed")).Block(jen.Case(allowed...).Block(jen.Return(jen.True()))),
		))
	}
	f.Comment("Allows reports whether a connection of scope s may call a method that needs scope needed.")
	f.Func().Params(jen.Id("s").Id("Scope")).Id("Allows").Params(jen.Id("needed").Id("Scope")).Bool().Block(
		jen.Switch(jen.Id("s")).Block(allowCases...),
		jen.Return(jen.False()),
	)
	f.Comment("IsKnown reports whether s is a scope of this build.")
	f.Func().Params(jen.Id("s").Id("Scope")).Id("IsKnown").Params().Bool().Block(
		jen.Switch(jen.Id("s")).Block(jen.Case(known...).Block(jen.Return(jen.True()))),
		jen.Return(jen.False()),
	)
	f.Comment("Scopes lists every scope in schema order.")
	f.Var().Id("Scopes").Op("=").Index().Id("Scope").Values(known...)

	// Method names.
	var consts []jen.Code
	for _, m := range p.Methods {
		consts = append(consts, jen.Comment(fmt.Sprintf("Method%s is %q: %s", m.GoName, m.Name, m.Summary)))
		consts = append(consts, jen.Id("Method"+m.GoName).Op("=").Lit(m.Name))
	}
	f.Const().Defs(consts...)

	// Handler interfaces.
	var accessors []jen.Code
	var expAccessors []jen.Code
	for _, gr := range p.Groups {
		if len(gr.Methods) == 0 {
			continue
		}
		var stable, exp []jen.Code
		for _, m := range gr.Methods {
			sig := []jen.Code{}
			sig = append(sig, doc(m.HandlerName+" implements "+fmt.Sprintf("%q", m.Name)+" (scope "+m.Scope+"). "+methodDoc(m), m.Since, m.Deprecated, m.Experimental)...)
			sig = append(sig, jen.Id(m.HandlerName).Params(jen.Id("ctx").Qual("context", "Context"), jen.Id("params").Op("*").Id(g.paramsType(m))).Params(jen.Op("*").Id(g.resultType(m)), jen.Error()))
			if m.Experimental {
				exp = append(exp, sig...)
			} else {
				stable = append(stable, sig...)
			}
		}
		hn := goName(gr.Name) + "Handler"
		f.Comment(fmt.Sprintf("%s serves the %s methods (schema/%s). %s", hn, gr.Name, gr.File, gr.Description))
		f.Comment("An error that is a *Error goes to the client as is; any other error becomes HandlerFailed with its text.")
		f.Type().Id(hn).Interface(stable...)
		accessors = append(accessors, jen.Comment(fmt.Sprintf("%s returns the handler of the %s group.", goName(gr.Name), gr.Name)), jen.Id(goName(gr.Name)).Params().Id(hn))
		if len(exp) > 0 {
			ehn := goName(gr.Name) + "ExperimentalHandler"
			f.Comment(fmt.Sprintf("%s serves the experimental %s methods; a server that does not implement it answers them MethodNotFound.", ehn, gr.Name))
			f.Type().Id(ehn).Interface(exp...)
			expAccessors = append(expAccessors, jen.Comment(fmt.Sprintf("%sExperimental returns the experimental handler of the %s group.", goName(gr.Name), gr.Name)), jen.Id(goName(gr.Name)+"Experimental").Params().Id(ehn))
		}
	}
	f.Comment("Handlers is what a server implements: one handler per method group. A server asserts it at compile time")
	f.Comment("(var _ protocol.Handlers = ...), so a method added to the schema without a handler fails the build.")
	f.Type().Id("Handlers").Interface(accessors...)
	if len(expAccessors) > 0 {
		f.Comment("ExperimentalHandlers is implemented by servers that offer the experimental methods.")
		f.Type().Id("ExperimentalHandlers").Interface(expAccessors...)
	}

	// Method table.
	f.Comment("MethodSpec describes one method: its scope and versioning from the schema, and how to call its handler.")
	f.Type().Id("MethodSpec").Struct(
		jen.Comment("Name is the wire name."), jen.Id("Name").String(),
		jen.Comment("Group is the method group (the schema file)."), jen.Id("Group").String(),
		jen.Comment("Scope is the scope a connection needs to call it."), jen.Id("Scope").Id("Scope"),
		jen.Comment("Since is the protocol version the method arrived in."), jen.Id("Since").Int(),
		jen.Comment("Deprecated is true when the schema deprecates the method."), jen.Id("Deprecated").Bool(),
		jen.Comment("RemovedIn is the protocol version the method was removed in (removedIn; 0 while it is not): it is offered only to connections that negotiated a lower version (OfferedAt)."), jen.Id("RemovedIn").Int(),
		jen.Comment("Experimental is true for methods of stability experimental."), jen.Id("Experimental").Bool(),
		jen.Comment("Errors lists the codes the method may answer besides the transport's."), jen.Id("Errors").Index().Int(),
		jen.Comment("Audited is true for a security-relevant method (x-audit): the server records every call in the audit log."), jen.Id("Audited").Bool(),
		jen.Comment("AuditParams are the top-level params an audit entry of the call records (x-audit)."), jen.Id("AuditParams").Index().String(),
		jen.Comment("Resource is the kind of per-connection resource a call takes (x-resource: watch, terminal, clone, media-ticket), or empty."), jen.Id("Resource").String(),
		jen.Comment("NewParams returns a pointer to a zero params value to decode into."), jen.Id("NewParams").Func().Params().Any(),
		jen.Comment("NewResult returns a pointer to a zero result value to decode into."), jen.Id("NewResult").Func().Params().Any(),
		jen.Id("call").Func().Params(jen.Qual("context", "Context"), jen.Id("Handlers"), jen.Any()).Params(jen.Any(), jen.Error()),
	)
	var specs []jen.Code
	for _, m := range p.Methods {
		var codes []jen.Code
		for _, e := range m.Errors {
			codes = append(codes, jen.Id("Code"+e.Name))
		}
		call := jen.Id("h").Dot(goName(m.Group)).Call().Dot(m.HandlerName).Call(jen.Id("ctx"), jen.Id("p").Assert(jen.Op("*").Id(g.paramsType(m))))
		var callBody []jen.Code
		if m.Experimental {
			callBody = []jen.Code{
				jen.List(jen.Id("eh"), jen.Id("ok")).Op(":=").Id("h").Assert(jen.Id("ExperimentalHandlers")),
				jen.If(jen.Op("!").Id("ok")).Block(jen.Return(jen.Nil(), jen.Id("errNotOffered").Call(jen.Lit(m.Name)))),
				jen.Return(jen.Id("eh").Dot(goName(m.Group)+"Experimental").Call().Dot(m.HandlerName).Call(jen.Id("ctx"), jen.Id("p").Assert(jen.Op("*").Id(g.paramsType(m))))),
			}
		} else {
			callBody = []jen.Code{jen.Return(call)}
		}
		dict := jen.Dict{
			jen.Id("Name"):         jen.Id("Method" + m.GoName),
			jen.Id("Group"):        jen.Lit(m.Group),
			jen.Id("Scope"):        jen.Id("Scope" + goName(m.Scope)),
			jen.Id("Since"):        jen.Lit(m.Since),
			jen.Id("Deprecated"):   jen.Lit(m.Deprecated != ""),
			jen.Id("RemovedIn"):    jen.Lit(m.RemovedIn),
			jen.Id("Experimental"): jen.Lit(m.Experimental),
			jen.Id("Errors"):       jen.Index().Int().Values(codes...),
			jen.Id("NewParams"):    jen.Func().Params().Any().Block(jen.Return(jen.New(jen.Id(g.paramsType(m))))),
			jen.Id("NewResult"):    jen.Func().Params().Any().Block(jen.Return(jen.New(jen.Id(g.resultType(m))))),
			jen.Id("call"):         jen.Func().Params(jen.Id("ctx").Qual("context", "Context"), jen.Id("h").Id("Handlers"), jen.Id("p").Any()).Params(jen.Any(), jen.Error()).Block(callBody...),
		}
		if m.Audited {
			var ps []jen.Code
			for _, a := range m.AuditParams {
				ps = append(ps, jen.Lit(a))
			}
			dict[jen.Id("Audited")] = jen.True()
			dict[jen.Id("AuditParams")] = jen.Index().String().Values(ps...)
		}
		if m.Resource != "" {
			dict[jen.Id("Resource")] = jen.Lit(m.Resource)
		}
		specs = append(specs, jen.Values(dict))
	}
	f.Comment("methodTable holds every method, sorted by name.")
	f.Var().Id("methodTable").Op("=").Index().Op("*").Id("MethodSpec").Values(specs...)

	// Signals.
	var sconsts []jen.Code
	var sspecs []jen.Code
	for _, s := range p.Signals {
		sconsts = append(sconsts, jen.Comment(fmt.Sprintf("Signal%s is %q: %s", goName(s.Kind), s.Kind, s.Summary)))
		sconsts = append(sconsts, jen.Id("Signal"+goName(s.Kind)).Op("=").Lit(s.Kind))
		var scopes []jen.Code
		for _, sc := range s.Scopes {
			scopes = append(scopes, jen.Id("Scope"+goName(sc)))
		}
		d := jen.Dict{
			jen.Id("Kind"):      jen.Id("Signal" + goName(s.Kind)),
			jen.Id("Group"):     jen.Lit(s.Group),
			jen.Id("Session"):   jen.Lit(s.Session),
			jen.Id("Scopes"):    jen.Index().Id("Scope").Values(scopes...),
			jen.Id("Delivery"):  jen.Id("Delivery" + goName(s.Delivery)),
			jen.Id("Sequenced"): jen.Lit(s.Sequenced()),
			jen.Id("Since"):     jen.Lit(s.Since),
		}
		if s.Ephemeral {
			d[jen.Id("Ephemeral")] = jen.Lit(true)
		}
		sspecs = append(sspecs, jen.Values(d))
	}
	f.Const().Defs(sconsts...)
	f.Comment("SignalSpec describes one signal kind.")
	f.Type().Id("SignalSpec").Struct(
		jen.Comment("Kind is the wire kind."), jen.Id("Kind").String(),
		jen.Comment("Group is the schema file that defines it."), jen.Id("Group").String(),
		jen.Comment("Session is true for session signals: they carry sessionId."), jen.Id("Session").Bool(),
		jen.Comment("Scopes are the token scopes that may receive the signal; a scope that includes one"), jen.Comment("of them receives it too (see Receives)."), jen.Id("Scopes").Index().Id("Scope"),
		jen.Comment("Delivery says which of the permitted connections receive it."), jen.Id("Delivery").Id("Delivery"),
		jen.Comment("Ephemeral marks a passing state (progress, presence, drafts): never numbered or logged."), jen.Id("Ephemeral").Bool(),
		jen.Comment("Sequenced is true when the signal carries $seq and enters the replay log: a session"), jen.Comment("signal delivered to all, not ephemeral."), jen.Id("Sequenced").Bool(),
		jen.Comment("Since is the protocol version the signal arrived in."), jen.Id("Since").Int(),
	)
	f.Comment("signalTable holds every signal kind in schema order.")
	f.Var().Id("signalTable").Op("=").Index().Op("*").Id("SignalSpec").Values(sspecs...)
}

func (g *goEmitter) emitErrors(f *jen.File) {
	var consts []jen.Code
	var msgs = jen.Dict{}
	errs := append([]*ErrorDef(nil), g.p.Errors...)
	for _, e := range errs {
		consts = append(consts, doc(fmt.Sprintf("Code%s (%d): %s", e.Name, e.Code, e.Description), e.Since, e.Deprecated, false)...)
		consts = append(consts, jen.Id("Code"+e.Name).Op("=").Lit(e.Code))
		msgs[jen.Id("Code"+e.Name)] = jen.Lit(e.Message)
	}
	f.Const().Defs(consts...)
	f.Comment("errorMessages maps each registry code to its default message.")
	f.Var().Id("errorMessages").Op("=").Map(jen.Int()).String().Values(msgs)
	sort.SliceStable(errs, func(i, j int) bool { return errs[i].Name < errs[j].Name })
	for _, e := range errs {
		fn := "New" + strings.TrimSuffix(e.Name, "Error") + "Error"
		params := []jen.Code{jen.Id("message").String()}
		dict := jen.Dict{jen.Id("Code"): jen.Id("Code" + e.Name), jen.Id("Message"): jen.Id("message")}
		if e.Data != nil {
			params = append(params, jen.Id("data").Op("*").Id(e.Data.Name))
			dict[jen.Id("Data")] = jen.Id("data")
		}
		f.Comment(fmt.Sprintf("%s returns a %s error (%d). An empty message takes the registry's: %q.", fn, e.Name, e.Code, e.Message))
		f.Func().Id(fn).Params(params...).Op("*").Id("Error").Block(
			jen.If(jen.Id("message").Op("==").Lit("")).Block(jen.Id("message").Op("=").Lit(e.Message)),
			jen.Return(jen.Op("&").Id("Error").Values(dict)),
		)
	}
}

func (g *goEmitter) emitClient(f *jen.File) {
	for _, m := range g.p.Methods {
		pt := jen.Qual(protocolPath, g.paramsType(m))
		rt := g.resultType(m)
		name := m.GoName
		fileDoc(f, fmt.Sprintf("%s calls %q (scope %s): %s nil params send {}.", name, m.Name, m.Scope, methodDoc(m)), m.Since, m.Deprecated, m.Experimental)
		f.Func().Params(jen.Id("c").Op("*").Id("Client")).Id(name).Params(jen.Id("ctx").Qual("context", "Context"), jen.Id("params").Op("*").Add(pt)).Params(jen.Op("*").Qual(protocolPath, rt), jen.Error()).Block(
			jen.Var().Id("out").Qual(protocolPath, rt),
			jen.If(jen.Err().Op(":=").Id("c").Dot("Call").Call(jen.Id("ctx"), jen.Qual(protocolPath, "Method"+m.GoName), jen.Id("params"), jen.Op("&").Id("out")), jen.Err().Op("!=").Nil()).Block(jen.Return(jen.Nil(), jen.Err())),
			jen.Return(jen.Op("&").Id("out"), jen.Nil()),
		)
	}
}

// GoFiles renders every generated Go file, keyed by path from the repository root.
func GoFiles(p *Protocol) (map[string][]byte, error) {
	out := map[string][]byte{}
	g := &goEmitter{p: p, qual: func(n string) *jen.Statement { return jen.Id(n) }}

	f := newFile("protocol", p)
	f.PackageComment("")
	g.emitTypes(f)
	if err := put(out, "protocol/types_gen.go", f); err != nil {
		return nil, err
	}
	f = newFile("protocol", p)
	g.emitMethods(f)
	if err := put(out, "protocol/methods_gen.go", f); err != nil {
		return nil, err
	}
	f = newFile("protocol", p)
	g.emitErrors(f)
	if err := put(out, "protocol/errors_gen.go", f); err != nil {
		return nil, err
	}
	f = newFile("protocol", p)
	g.emitFastParams(f)
	if err := put(out, "protocol/params_gen.go", f); err != nil {
		return nil, err
	}
	f = newFile("protocol", p)
	f.Anon("embed")
	f.Comment("BundledSchema is the whole protocol as one JSON Schema document, served at GET /protocol.json.")
	f.Comment("")
	f.Comment("//go:embed bundle_gen.json")
	f.Var().Id("BundledSchema").Index().Byte()
	f.Line()
	f.Comment("OpenRPCDocument is the WebSocket protocol as an OpenRPC 1.3 document (signals under x-signals),")
	f.Comment("served at GET /openrpc.json.")
	f.Comment("")
	f.Comment("//go:embed openrpc_gen.json")
	f.Var().Id("OpenRPCDocument").Index().Byte()
	if err := put(out, "protocol/schema_gen.go", f); err != nil {
		return nil, err
	}
	out["protocol/bundle_gen.json"] = p.Bundle
	out[openRPCPath] = OpenRPCFile(p)
	if p.HTTP != nil {
		f = newFile("protocol", p)
		g.emitSSE(f)
		if err := put(out, "protocol/sse_gen.go", f); err != nil {
			return nil, err
		}
		out[openAPIPath] = OpenAPIFile(p)
	}

	f = newFile("client", p)
	gc := &goEmitter{p: p, qual: func(n string) *jen.Statement { return jen.Qual(protocolPath, n) }}
	gc.emitClient(f)
	if err := put(out, "client/methods_gen.go", f); err != nil {
		return nil, err
	}
	return out, nil
}

func put(out map[string][]byte, path string, f *jen.File) error {
	b, err := render(f)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	out[path] = b
	return nil
}
