package main

import (
	"bytes"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/dave/jennifer/jen"
)

// openAPIPath is where the generated OpenAPI document of the HTTP section lives (embedded by
// protocol/sse_gen.go and served at GET /zidane/sse/openapi.json).
const openAPIPath = "protocol/sse_openapi_gen.json"

// OpenAPIFile renders the HTTP section as an OpenAPI 3.1 document: paths relative to the base
// path (servers names the default one), one operation per route with its fixed operationId, and
// the $defs types the routes reach under components/schemas.
func OpenAPIFile(p *Protocol) []byte {
	a := p.HTTP
	bundle, err := parseOrdered(p.Bundle)
	if err != nil {
		panic(err) // the bundle is ours
	}
	defs := bundle.get("$defs")
	doc := objNode()
	doc.set("openapi", strNode("3.1.0"))
	info := objNode()
	info.set("title", strNode("zidane SSE protocol"))
	info.set("version", strNode(strconv.Itoa(a.Version)))
	info.set("description", strNode(p.files[a.File].getStr("description")+" "+a.Description+" Generated from schema/"+a.File+" (schema hash "+p.Hash+")."))
	doc.set("info", info)
	srv := objNode()
	srv.set("url", strNode(a.DefaultBasePath))
	srv.set("description", strNode("The default base path; a server may mount the routes under another (zidane-server --sse-base-path)."))
	doc.set("servers", arrNode(srv))
	sec := objNode()
	sec.set("bearer", arrNode())
	doc.set("security", arrNode(sec))

	want := map[string]bool{"ErrorBody": true}
	ref := func(name string) *node {
		want[name] = true
		r := objNode()
		r.set("$ref", strNode("#/components/schemas/"+name))
		return r
	}
	header := func() *node {
		h := objNode()
		ph := objNode()
		ph.set("description", strNode("The SSE protocol version; every response carries it."))
		sch := objNode()
		sch.set("type", strNode("string"))
		sch.set("const", strNode(strconv.Itoa(a.Version)))
		ph.set("schema", sch)
		h.set(a.Header, ph)
		return h
	}
	paths := objNode()
	for _, r := range a.Routes {
		pi := paths.get(r.Path)
		if pi == nil {
			pi = objNode()
			paths.set(r.Path, pi)
		}
		op := objNode()
		op.set("operationId", strNode(r.OperationID))
		op.set("summary", strNode(r.Summary))
		if r.Description != "" {
			op.set("description", strNode(r.Description))
		}
		var params []*node
		for _, group := range []struct {
			in string
			ps []*RouteParam
		}{{"path", r.PathParams}, {"query", r.Query}, {"header", r.Headers}} {
			for _, rp := range group.ps {
				pn := objNode()
				pn.set("name", strNode(rp.Name))
				pn.set("in", strNode(group.in))
				if group.in == "path" {
					pn.set("required", &node{kind: 'b', b: true})
				}
				pn.set("description", strNode(rp.T.Description))
				sch := rp.node.clone()
				sch.del("description")
				sch.del("since")
				rewrite(sch)
				pn.set("schema", sch)
				params = append(params, pn)
			}
		}
		if len(params) > 0 {
			op.set("parameters", arrNode(params...))
		}
		if r.Body != "" {
			rb := objNode()
			rb.set("required", &node{kind: 'b', b: true})
			ct := objNode()
			mt := objNode()
			mt.set("schema", ref(r.Body))
			ct.set("application/json", mt)
			rb.set("content", ct)
			op.set("requestBody", rb)
		}
		resps := objNode()
		ok := objNode()
		ok.set("headers", header())
		ct := objNode()
		mt := objNode()
		if r.Stream != "" {
			ok.set("description", strNode("A text/event-stream of records (each parsed as "+r.Stream+")."))
			sch := objNode()
			sch.set("type", strNode("string"))
			mt.set("schema", sch)
			mt.set("x-zidane-record", ref(r.Stream))
			ct.set("text/event-stream", mt)
		} else {
			ok.set("description", strNode("OK"))
			mt.set("schema", ref(r.Response))
			ct.set("application/json", mt)
		}
		ok.set("content", ct)
		resps.set("200", ok)
		for _, s := range a.Statuses {
			e := objNode()
			e.set("description", strNode(s.Meaning))
			e.set("headers", header())
			ect := objNode()
			emt := objNode()
			emt.set("schema", ref("ErrorBody"))
			ect.set("application/json", emt)
			e.set("content", ect)
			resps.set(strconv.Itoa(s.Code), e)
		}
		op.set("responses", resps)
		op.set("x-zidane-scope", strNode(r.Scope))
		if r.RPCMethod != "" {
			op.set("x-zidane-method", strNode(r.RPCMethod))
		}
		op.set("x-zidane-since", numNode(int64(r.Since)))
		pi.set(strings.ToLower(r.Method), op)
	}
	doc.set("paths", paths)

	// components/schemas: the types the routes reach, refs rewritten.
	schemas := objNode()
	var queue []string
	for n := range want {
		queue = append(queue, n)
	}
	sort.Strings(queue)
	seen := map[string]bool{}
	for len(queue) > 0 {
		name := queue[0]
		queue = queue[1:]
		if seen[name] {
			continue
		}
		seen[name] = true
		d := defs.get(name)
		if d == nil {
			continue
		}
		c := d.clone()
		for _, r := range refsOf(c) {
			if !seen[r] {
				queue = append(queue, r)
			}
		}
		schemas.set(name, c)
	}
	sort.Strings(schemas.keys)
	for _, k := range schemas.keys {
		toComponents(schemas.vals[k])
	}
	comp := objNode()
	comp.set("schemas", schemas)
	ss := objNode()
	bearer := objNode()
	bearer.set("type", strNode("http"))
	bearer.set("scheme", strNode("bearer"))
	bearer.set("description", strNode("zidane-server: a chat or admin token (zds_…). The Node bridge: what its authorize accepts."))
	ss.set("bearer", bearer)
	comp.set("securitySchemes", ss)
	doc.set("components", comp)
	var buf bytes.Buffer
	doc.write(&buf, "")
	buf.WriteByte('\n')
	return buf.Bytes()
}

// refsOf lists the $defs names n refers to (refs of the bundle: #/$defs/Name).
func refsOf(n *node) []string {
	var out []string
	var walk func(*node)
	walk = func(n *node) {
		switch n.kind {
		case 'o':
			if r := n.get("$ref"); r != nil && r.kind == 's' {
				out = append(out, strings.TrimPrefix(r.str, "#/$defs/"))
			}
			for _, k := range n.keys {
				walk(n.vals[k])
			}
		case 'a':
			for _, it := range n.items {
				walk(it)
			}
		}
	}
	walk(n)
	return out
}

// toComponents rewrites a bundle type for OpenAPI: refs to #/components/schemas/Name, and
// x-any (any JSON) to the empty schema.
func toComponents(n *node) {
	switch n.kind {
	case 'o':
		if r := n.get("$ref"); r != nil && r.kind == 's' {
			r.str = "#/components/schemas/" + strings.TrimPrefix(r.str, "#/$defs/")
		}
		for _, k := range n.keys {
			toComponents(n.vals[k])
		}
	case 'a':
		for _, it := range n.items {
			toComponents(it)
		}
	}
}

// emitSSE writes protocol/sse_gen.go: the HTTP section's constants, its route table and the
// embedded OpenAPI document.
func (g *goEmitter) emitSSE(f *jen.File) {
	a := g.p.HTTP
	f.Anon("embed")
	f.Comment(fmt.Sprintf("SSEProtocolHeader is the header every response of the SSE protocol carries, with SSEProtocolVersion as its value (schema/%s).", a.File))
	f.Const().Id("SSEProtocolHeader").Op("=").Lit(a.Header)
	f.Comment("SSEProtocolVersion is the SSE protocol's version.")
	f.Const().Id("SSEProtocolVersion").Op("=").Lit(a.Version)
	f.Comment("SSEDefaultBasePath is the base path the SSE routes are mounted under by default.")
	f.Const().Id("SSEDefaultBasePath").Op("=").Lit(a.DefaultBasePath)
	var consts []jen.Code
	for _, r := range a.Routes {
		consts = append(consts, jen.Comment(fmt.Sprintf("SSEOperation%s is the operationId of %s %s: %s", goName(r.OperationID), r.Method, r.Path, r.Summary)))
		consts = append(consts, jen.Id("SSEOperation"+goName(r.OperationID)).Op("=").Lit(r.OperationID))
	}
	f.Const().Defs(consts...)
	f.Comment("SSERoute is one route of the SSE protocol, its path relative to the base path.")
	f.Type().Id("SSERoute").Struct(
		jen.Comment("OperationID is the route's fixed OpenAPI operationId."), jen.Id("OperationID").String(),
		jen.Comment("Method is GET or POST."), jen.Id("Method").String(),
		jen.Comment("Path is relative to the base path; {name} segments are path parameters."), jen.Id("Path").String(),
		jen.Comment("Scope is the token scope the route needs."), jen.Id("Scope").Id("Scope"),
		jen.Comment("RPCMethod is the JSON-RPC method the route calls, or empty."), jen.Id("RPCMethod").String(),
		jen.Comment("Stream is true for a text/event-stream answer."), jen.Id("Stream").Bool(),
		jen.Comment("Since is the protocol version the route arrived in."), jen.Id("Since").Int(),
	)
	var rows []jen.Code
	for _, r := range a.Routes {
		rows = append(rows, jen.Values(jen.Dict{
			jen.Id("OperationID"): jen.Id("SSEOperation" + goName(r.OperationID)),
			jen.Id("Method"):      jen.Lit(r.Method),
			jen.Id("Path"):        jen.Lit(r.Path),
			jen.Id("Scope"):       jen.Id("Scope" + goName(r.Scope)),
			jen.Id("RPCMethod"):   jen.Lit(r.RPCMethod),
			jen.Id("Stream"):      jen.Lit(r.Stream != ""),
			jen.Id("Since"):       jen.Lit(r.Since),
		}))
	}
	f.Comment("SSERoutes are the SSE protocol's routes in schema order.")
	f.Var().Id("SSERoutes").Op("=").Index().Id("SSERoute").Values(rows...)
	f.Comment("SSEOpenAPI is the SSE protocol as an OpenAPI 3.1 document (paths relative to the base path),")
	f.Comment("served at GET /zidane/sse/openapi.json.")
	f.Comment("")
	f.Comment("//go:embed sse_openapi_gen.json")
	f.Var().Id("SSEOpenAPI").Index().Byte()
}

// tsSSE appends the HTTP section's constants and route table to sdk-ts/src/protocol.ts.
func tsSSE(b *strings.Builder, p *Protocol) {
	a := p.HTTP
	w := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	w("\n/** The header every response of the SSE protocol carries (schema/%s), with SSE_PROTOCOL_VERSION as its value. */\n", a.File)
	w("export const SSE_PROTOCOL_HEADER = %q as const\n\n", a.Header)
	w("/** The SSE protocol's version. */\nexport const SSE_PROTOCOL_VERSION = %d as const\n\n", a.Version)
	w("/** The base path the SSE routes are mounted under by default. */\nexport const SSE_DEFAULT_BASE_PATH = %q as const\n\n", a.DefaultBasePath)
	w("/** The SSE protocol's routes by operationId; paths are relative to the base path. */\nexport const sseRoutes = {\n")
	for _, r := range a.Routes {
		tsDoc(b, "  ", r.Summary, r.Since, "", false)
		w("  %s: { method: %q, path: %q, stream: %v },\n", r.OperationID, r.Method, r.Path, r.Stream != "")
	}
	w("} as const\n\n")
	w("/** An SSE route's operationId. */\nexport type SseOperation = keyof typeof sseRoutes\n\n")
	w("/** What each SSE route takes and answers: its body, its JSON answer, or the record of its stream. */\nexport interface SseRouteMap {\n")
	for _, r := range a.Routes {
		body, resp := "never", "never"
		if r.Body != "" {
			body = r.Body
		}
		if r.Response != "" {
			resp = r.Response
		}
		rec := "never"
		if r.Stream != "" {
			rec = r.Stream
		}
		w("  %s: { body: %s; response: %s; record: %s }\n", r.OperationID, body, resp, rec)
	}
	w("}\n")
}

// mdSSE renders the HTTP section of docs/protocol.md.
func mdSSE(b *strings.Builder, p *Protocol) {
	a := p.HTTP
	w := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	w("## SSE protocol v%d (HTTP)\n\n%s %s\n\n", a.Version, p.files[a.File].getStr("description"), a.Description)
	w("Every response carries `%s: %d`. The OpenAPI 3.1 document is served at `GET /zidane/sse/openapi.json` (no token); the TypeScript route table is `sseRoutes` in `sdk-ts/src/protocol.ts`. Default base path: `%s`.\n\n", a.Header, a.Version, a.DefaultBasePath)
	w("| operationId | route | scope | calls | body | answer | summary |\n|---|---|---|---|---|---|---|\n")
	for _, r := range a.Routes {
		calls := "—"
		if r.RPCMethod != "" {
			calls = fmt.Sprintf("[`%s`](#%s)", r.RPCMethod, anchor(r.RPCMethod))
		}
		body := "—"
		if r.Body != "" {
			body = fmt.Sprintf("[%s](#%s)", r.Body, strings.ToLower(r.Body))
		}
		ans := ""
		if r.Stream != "" {
			ans = fmt.Sprintf("`text/event-stream` of [%s](#%s)", r.Stream, strings.ToLower(r.Stream))
		} else {
			ans = fmt.Sprintf("[%s](#%s)", r.Response, strings.ToLower(r.Response))
		}
		w("| `%s` | `%s %s` | `%s` | %s | %s | %s | %s |\n", r.OperationID, r.Method, r.Path, r.Scope, calls, body, ans, r.Summary)
	}
	w("\n")
	for _, r := range a.Routes {
		w("### %s\n\n`%s %s` · scope `%s` · since %d\n\n%s", r.OperationID, r.Method, r.Path, r.Scope, r.Since, r.Summary)
		if r.Description != "" {
			w(" %s", r.Description)
		}
		w("\n\n")
		if ps := append(append(append([]*RouteParam{}, r.PathParams...), r.Query...), r.Headers...); len(ps) > 0 {
			w("| parameter | in | type | description |\n|---|---|---|---|\n")
			in := func(rp *RouteParam) string {
				for _, x := range r.PathParams {
					if x == rp {
						return "path"
					}
				}
				for _, x := range r.Query {
					if x == rp {
						return "query"
					}
				}
				return "header"
			}
			for _, rp := range ps {
				w("| `%s` | %s | %s | %s |\n", rp.Name, in(rp), mdType(p, rp.T), rp.T.Description)
			}
			w("\n")
		}
	}
	w("**Refusals** (body [ErrorBody](#errorbody)):\n\n| status | meaning |\n|---|---|\n")
	for _, s := range a.Statuses {
		w("| %d | %s |\n", s.Code, s.Meaning)
	}
	w("\n")
}
