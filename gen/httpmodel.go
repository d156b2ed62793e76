package main

import (
	"regexp"
	"sort"
	"strconv"
)

// HTTPAPI is the HTTP section of the schema (a group file's "http" key): the SSE protocol v1 of
// the client seed, its routes relative to a base path, their bodies and answers ($defs types).
// At most one group has one; docs/schema-guide.md "HTTP routes".
type HTTPAPI struct {
	Group, File     string
	Header          string // the response header every answer carries
	Version         int    // its value
	DefaultBasePath string
	Description     string
	Routes          []*Route // schema order
	Statuses        []HTTPStatus
}

// HTTPStatus is one refusal status any route may answer.
type HTTPStatus struct {
	Code    int
	Meaning string
}

// Route is one HTTP route; its key is the OpenAPI operationId.
type Route struct {
	OperationID, Method, Path, Summary, Description, Scope string
	// RPCMethod is x-method: the JSON-RPC method the route calls ("" for none).
	RPCMethod string
	Since     int
	// PathParams, Query and Headers are the route's parameters in schema order.
	PathParams, Query, Headers []*RouteParam
	// Body, Response and Stream name $defs types ("" when absent): Stream is the parsed form of
	// one text/event-stream record.
	Body, Response, Stream string
}

// RouteParam is one path, query or header parameter.
type RouteParam struct {
	Name string
	T    *Type
	node *node
}

var pathParamRe = regexp.MustCompile(`\{([a-z][A-Za-z0-9]*)\}`)

// httpAPI loads the http section of schema/fn.
func (l *loader) httpAPI(g *Group, fn string, n *node) {
	where := "schema/" + fn + "#/http"
	if l.p.HTTP != nil {
		l.fail(where, "schema/%s already has the http section; one group holds it", l.p.HTTP.File)
		return
	}
	a := &HTTPAPI{Group: g.Name, File: fn, Header: n.getStr("protocolHeader"), Version: n.getInt("protocolVersion"), DefaultBasePath: n.getStr("defaultBasePath"), Description: n.getStr("description")}
	l.p.HTTP = a
	st := n.get("statuses")
	for _, k := range st.keys {
		c, _ := strconv.Atoi(k)
		a.Statuses = append(a.Statuses, HTTPStatus{Code: c, Meaning: st.vals[k].str})
	}
	sort.Slice(a.Statuses, func(i, j int) bool { return a.Statuses[i].Code < a.Statuses[j].Code })
	if !l.defsOf[fn]["ErrorBody"] {
		l.fail(where+"/statuses", "the refusals' body is the type ErrorBody; define it in schema/%s $defs", fn)
	}
	seen := map[string]string{}
	rs := n.get("routes")
	for _, id := range rs.keys {
		rn := rs.vals[id]
		rw := where + "/routes/" + id
		r := &Route{OperationID: id, Method: rn.getStr("method"), Path: rn.getStr("path"), Summary: rn.getStr("summary"), Description: rn.getStr("description"), Scope: rn.getStr("scope"), RPCMethod: rn.getStr("x-method"), Since: rn.getInt("since")}
		key := r.Method + " " + r.Path
		if prev, ok := seen[key]; ok {
			l.fail(rw, "%s is also route %s", key, prev)
		}
		seen[key] = id
		if l.scope(r.Scope) == nil {
			l.fail(rw+"/scope", "unknown scope %q; scopes are defined in schema/protocol.json", r.Scope)
		}
		if r.Since > l.p.Version {
			l.fail(rw+"/since", "since %d is above protocolVersion %d", r.Since, l.p.Version)
		}
		if r.RPCMethod != "" && !l.methodNamed(r.RPCMethod) {
			l.fail(rw+"/x-method", "x-method names %q, which is not a method of the schema", r.RPCMethod)
		}
		params := func(key string) []*RouteParam {
			var out []*RouteParam
			pn := rn.get(key)
			if pn == nil {
				return nil
			}
			for _, k := range pn.keys {
				pw := rw + "/" + key + "/" + k
				t := l.typ(pn.vals[k], fn, pw, "", false)
				if t.Since == 0 {
					l.fail(pw, "missing since: every parameter says the protocol version it arrived in")
				}
				if t.K != kString && t.K != kInt && t.K != kBool {
					l.fail(pw, "a %s parameter is a string, an integer or a boolean", key)
				}
				out = append(out, &RouteParam{Name: k, T: t, node: pn.vals[k]})
			}
			return out
		}
		r.PathParams, r.Query, r.Headers = params("pathParams"), params("query"), params("headers")
		inPath := map[string]bool{}
		for _, m := range pathParamRe.FindAllStringSubmatch(r.Path, -1) {
			inPath[m[1]] = true
		}
		for _, pp := range r.PathParams {
			if !inPath[pp.Name] {
				l.fail(rw+"/pathParams/"+pp.Name, "path parameter %q is not in the path %s", pp.Name, r.Path)
			}
			delete(inPath, pp.Name)
		}
		for name := range inPath {
			l.fail(rw+"/path", "{%s} in the path is not declared in pathParams", name)
		}
		ref := func(key string) string {
			if x := rn.get(key); x != nil {
				return l.refName(x.getStr("$ref"), fn, rw+"/"+key)
			}
			return ""
		}
		r.Body, r.Response, r.Stream = ref("body"), ref("response"), ref("stream")
		if r.Method == "GET" && r.Body != "" {
			l.fail(rw+"/body", "a GET route takes no body")
		}
		if r.Method == "POST" && r.Body == "" {
			l.fail(rw, "a POST route takes a JSON body; give it one (an object type with no required members when it needs nothing)")
		}
		if (r.Response == "") == (r.Stream == "") {
			l.fail(rw, "a route answers either response (JSON) or stream (text/event-stream)")
		}
		l.claim("SSEOperation"+goName(id), rw)
		a.Routes = append(a.Routes, r)
	}
}

func (l *loader) methodNamed(name string) bool {
	for _, m := range l.p.Methods {
		if m.Name == name {
			return true
		}
	}
	return false
}
