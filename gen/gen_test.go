package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite the golden files of gen/testdata")

const metaDir = "../schema/meta"

func loadFixture(t *testing.T, name string) map[string][]byte {
	t.Helper()
	files, err := readSchemaFiles(filepath.Join("testdata", "fixtures", name, "schema"))
	require.NoError(t, err)
	return files
}

func generateFiles(t *testing.T, files map[string][]byte) map[string][]byte {
	t.Helper()
	p, err := LoadFiles(files, metaDir)
	require.NoError(t, err)
	out, err := GoFiles(p)
	require.NoError(t, err)
	out["sdk-ts/src/protocol.ts"] = TSFile(p)
	out["docs/protocol.md"] = MarkdownFile(p)
	return out
}

// TestGeneratedFilesUpToDate is the drift gate inside `go test ./...`: it regenerates from
// schema/ in memory and compares the file set and the bytes with the committed files.
func TestGeneratedFilesUpToDate(t *testing.T) {
	files, err := Generate("../schema")
	require.NoError(t, err)
	drift := Drift("..", files)
	if len(drift) > 0 {
		t.Fatalf("generated files drift from schema/; run `make generate` and commit:\n  %s", strings.Join(drift, "\n  "))
	}
}

// TestDeterministic: two runs give identical bytes (field case B27).
func TestDeterministic(t *testing.T) {
	a, err := Generate("../schema")
	require.NoError(t, err)
	for i := 0; i < 3; i++ {
		b, err := Generate("../schema")
		require.NoError(t, err)
		require.Equal(t, len(a), len(b))
		for k := range a {
			require.True(t, bytes.Equal(a[k], b[k]), "%s differs between runs", k)
		}
	}
}

// TestGolden compares the fixture outputs with gen/testdata/fixtures/*/golden/*.golden (go test ./gen -update rewrites them).
func TestGolden(t *testing.T) {
	for _, name := range []string{"minimal", "full"} {
		t.Run(name, func(t *testing.T) {
			out := generateFiles(t, loadFixture(t, name))
			dir := filepath.Join("testdata", "fixtures", name, "golden")
			for path, b := range out {
				gp := filepath.Join(dir, strings.ReplaceAll(path, "/", "__")+".golden") // never a .go file a tool would build
				if *update {
					require.NoError(t, os.MkdirAll(dir, 0o755))
					require.NoError(t, os.WriteFile(gp, b, 0o644))
					continue
				}
				want, err := os.ReadFile(gp)
				require.NoError(t, err, "golden file missing: run go test ./gen -run TestGolden -update")
				assert.Equal(t, string(want), string(b), "%s differs from %s", path, gp)
			}
		})
	}
}

// TestGoldenGoCompilesAndRoundTrips builds the fixture's generated protocol package together with
// the handwritten JSON-RPC core, and runs a round-trip program against it: unions, unknown kinds,
// required lists as [], the field states.
func TestGoldenGoCompilesAndRoundTrips(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module")
	}
	out := generateFiles(t, loadFixture(t, "full"))
	root, err := filepath.Abs("..")
	require.NoError(t, err)
	dir, err := os.MkdirTemp(root, ".tmp-golden-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	pkg := filepath.Join(dir, "protocol")
	require.NoError(t, os.MkdirAll(pkg, 0o755))
	for path, b := range out {
		if strings.HasPrefix(path, "protocol/") {
			require.NoError(t, os.WriteFile(filepath.Join(pkg, filepath.Base(path)), b, 0o644))
		}
	}
	hand, _ := filepath.Glob(filepath.Join(root, "protocol", "*.go"))
	for _, h := range hand {
		// _ext.go: hand-written methods on this schema's own generated types (protocol/resume_ext.go).
		if strings.HasSuffix(h, "_gen.go") || strings.HasSuffix(h, "_test.go") || strings.HasSuffix(h, "_ext.go") {
			continue
		}
		b, err := os.ReadFile(h)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(pkg, filepath.Base(h)), b, 0o644))
	}
	rel, _ := filepath.Rel(root, pkg)
	imp := modulePath + "/" + filepath.ToSlash(rel)
	prog := `package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"

	p "` + imp + `"
)

func must(err error) { if err != nil { fmt.Println("FAIL", err); os.Exit(1) } }

func main() {
	// Required list encodes [], nil optional list is absent, required nullable encodes null.
	b, err := json.Marshal(p.ThingsPutParams{ID: "a"})
	must(err)
	fmt.Println(string(b))
	// A known union kind decodes into its struct; an unknown kind round-trips byte for byte.
	s, err := p.DecodeShape([]byte(` + "`" + `{"kind":"square","side":2,"inner":{"kind":"circle","radius":1}}` + "`" + `))
	must(err)
	sq := s.(*p.Square)
	fmt.Println(sq.Side, sq.Inner.(*p.Circle).Radius)
	raw := []byte(` + "`" + `{"kind":"hexagon","sides":6, "x":[1,2]}` + "`" + `)
	u, err := p.DecodeShape(raw)
	must(err)
	enc, err := json.Marshal(u)
	must(err)
	var compact bytes.Buffer
	must(json.Compact(&compact, raw))
	fmt.Println(u.ShapeKind(), string(u.(*p.UnknownShape).Raw) == string(raw), string(enc) == compact.String())
	// A known kind with a bad body is an error.
	if _, err := p.DecodeShape([]byte(` + "`" + `{"kind":"circle","radius":"big"}` + "`" + `)); err == nil { fmt.Println("FAIL bad body decoded"); os.Exit(1) }
	// Variant encodes kind first.
	c, _ := json.Marshal(&p.Circle{Radius: 3})
	fmt.Println(string(c))
	// Enums are open.
	fmt.Println(p.OpLess.IsKnown(), p.Op("~=").IsKnown(), p.UnitMillihertz, p.UnitMegahertz)
	// Signal union with a session signal.
	sig, err := p.DecodeSignal([]byte(` + "`" + `{"kind":"thing:changed","sessionId":"s1","shape":{"kind":"circle","radius":2}}` + "`" + `))
	must(err)
	fmt.Println(sig.(*p.ThingChangedSignal).SessionKey(), sig.(*p.ThingChangedSignal).Shape.ShapeKind())
}
`
	mainDir := filepath.Join(dir, "prog")
	require.NoError(t, os.MkdirAll(mainDir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(mainDir, "main.go"), []byte(prog), 0o644))
	cmd := exec.Command("go", "run", "./"+filepath.ToSlash(mustRel(t, root, mainDir)))
	cmd.Dir = root
	got, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", got)
	want := `{"id":"a","cursor":null,"tags":[]}
2 1
hexagon true true
{"kind":"circle","radius":3}
true false mHz MHz
s1 circle
`
	assert.Equal(t, want, string(got))
}

func mustRel(t *testing.T, base, p string) string {
	r, err := filepath.Rel(base, p)
	require.NoError(t, err)
	return r
}

// edit returns the fixture with one file changed by fn (on the decoded JSON).
func edit(t *testing.T, file string, fn func(m map[string]any)) map[string][]byte {
	return editFixture(t, "full", file, fn)
}

// editFixture is edit on another fixture.
func editFixture(t *testing.T, fixture, file string, fn func(m map[string]any)) map[string][]byte {
	files := loadFixture(t, fixture)
	var m map[string]any
	require.NoError(t, json.Unmarshal(files[file], &m))
	fn(m)
	b, err := json.Marshal(m)
	require.NoError(t, err)
	files[file] = b
	return files
}

func obj(m map[string]any, path ...string) map[string]any {
	for _, k := range path {
		m = m[k].(map[string]any)
	}
	return m
}

// TestBadSchemas: each bad schema fails with its precise message, naming the file and pointer.
func TestBadSchemas(t *testing.T) {
	cases := []struct {
		name string
		fn   func(m map[string]any)
		want string
	}{
		{"unknown key", func(m map[string]any) { obj(m, "methods", "things.put")["colour"] = "red" }, "schema/things.json#/methods/things.put: additionalProperties 'colour' not allowed"},
		{"dangling ref", func(m map[string]any) { obj(m, "$defs", "Tree", "properties", "parent")["$ref"] = "#/$defs/Nope" }, `schema/things.json#/$defs/Tree/properties/parent: dangling $ref "#/$defs/Nope": schema/things.json has no $defs/Nope`},
		{"ref into missing file", func(m map[string]any) {
			obj(m, "$defs", "Tree", "properties", "parent")["$ref"] = "nofile.json#/$defs/Tree"
		}, `points into schema/nofile.json, which does not exist`},
		{"variant without kind", func(m map[string]any) {
			c := obj(m, "$defs", "Circle")
			delete(obj(c, "properties"), "kind")
			c["required"] = []any{"radius"}
		}, "union variant Circle of Shape needs a required member \"kind\" with a const value"},
		{"duplicate kind", func(m map[string]any) { obj(m, "$defs", "Square", "properties", "kind")["const"] = "circle" }, `variants Circle and Square share the kind "circle"`},
		{"missing since on a field", func(m map[string]any) { delete(obj(m, "$defs", "Tree", "properties", "id"), "since") }, "schema/things.json#/$defs/Tree/properties/id: missing since"},
		{"missing since on a method", func(m map[string]any) { delete(obj(m, "methods", "things.put"), "since") }, "schema/things.json#/methods/things.put: missing properties: 'since'"},
		{"enum collision", func(m map[string]any) { delete(obj(m, "$defs", "Unit"), "x-enum-names") }, `enum values "mHz" and "MHz" both map to the identifier UnitMHz`},
		{"enum punctuation", func(m map[string]any) { delete(obj(m, "$defs", "Op"), "x-enum-names") }, `enum value "<" has no letters or digits`},
		{"unused x-enum-names", func(m map[string]any) { obj(m, "$defs", "Op", "x-enum-names")["=~"] = "Match" }, `x-enum-names names "=~", which is not an enum value`},
		{"int64", func(m map[string]any) {
			obj(m, "methods", "things.put", "params", "properties", "count")["format"] = "int64"
		}, "integer format int64 can exceed 2^53-1"},
		{"integer without format", func(m map[string]any) {
			delete(obj(m, "methods", "things.put", "params", "properties", "count"), "format")
		}, "integer without a format"},
		{"field name collision", func(m map[string]any) {
			obj(m, "$defs", "Tree", "properties")["ID"] = map[string]any{"type": "string", "since": 1}
		}, `both map to the Go field ID`},
		{"type name collision", func(m map[string]any) {
			obj(m, "$defs")["ThingsPutParams"] = map[string]any{"type": "object", "since": 1, "description": "clash", "properties": map[string]any{}}
		}, "generated name ThingsPutParams collides"},
		{"optional nullable", func(m map[string]any) {
			obj(m, "methods", "things.put", "params", "properties", "note")["type"] = []any{"string", "null"}
		}, `member "note" is optional and nullable`},
		{"unknown error", func(m map[string]any) { obj(m, "methods", "things.put")["errors"] = []any{"Nope"} }, `unknown error "Nope"`},
		{"unknown scope", func(m map[string]any) { obj(m, "methods", "things.put")["scope"] = "root" }, `unknown scope "root"`},
		{"redundant x-go-name", func(m map[string]any) { obj(m, "methods", "things.put")["x-go-name"] = "ThingsPut" }, `x-go-name "ThingsPut" equals the mechanical name`},
		{"x-audit of a param that does not exist", func(m map[string]any) { obj(m, "methods", "things.put")["x-audit"] = []any{"id", "secret"} }, `x-audit names "secret", which is not a param of things.put`},
		{"x-go-name without effect", func(m map[string]any) {
			obj(m, "$defs", "Tree", "properties", "children", "items")["x-go-name"] = "Kid"
		}, "x-go-name has no effect here"},
		{"redundant field x-go-name", func(m map[string]any) {
			obj(m, "$defs", "Tree", "properties", "parent")["x-go-name"] = "Parent"
		}, `x-go-name "Parent" equals the mechanical name`},
		{"enum since names no value", func(m map[string]any) {
			obj(m, "$defs", "Unit")["x-enum-since"] = map[string]any{"GHz": 16}
		}, `x-enum-since names "GHz", which is not an enum value`},
		{"signal without scopes", func(m map[string]any) { delete(obj(m, "signals", "thing:changed"), "scopes") }, "schema/things.json#/signals/thing:changed: missing properties: 'scopes'"},
		{"signal with an unknown scope", func(m map[string]any) { obj(m, "signals", "thing:changed")["scopes"] = []any{"chat", "root"} }, `schema/things.json#/signals/thing:changed/scopes/1: unknown scope "root"`},
		{"unknown delivery", func(m map[string]any) { obj(m, "signals", "thing:changed")["delivery"] = "everyone" }, "schema/things.json#/signals/thing:changed/delivery"},
		{"sequenced signals with different scopes", func(m map[string]any) {
			obj(m, "signals", "thing:changed")["delivery"] = "all"
			obj(m, "signals")["thing:gone"] = map[string]any{"summary": "A thing went.", "since": 1, "session": true, "scopes": []any{"admin"}, "delivery": "all",
				"required": []any{"sessionId"}, "properties": map[string]any{"sessionId": map[string]any{"type": "string", "since": 1, "description": "The session."}}}
		}, `schema/things.json#/signals/thing:gone/scopes: a sequenced signal (session, delivery all, not ephemeral) must have the same scopes as "thing:changed"`},
		{"inline union", func(m map[string]any) {
			obj(m, "methods", "things.put", "params", "properties")["shape2"] = map[string]any{"since": 1, "oneOf": []any{map[string]any{"$ref": "#/$defs/Circle"}}}
		}, "a union (oneOf) must be a named type under $defs"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := LoadFiles(edit(t, "things.json", c.fn), metaDir)
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.want)
		})
	}
}

// TestBadHTTPSchemas: each bad route of the http section (fixture http) fails with its precise
// message, naming the file and pointer.
func TestBadHTTPSchemas(t *testing.T) {
	cases := []struct {
		name string
		fn   func(m map[string]any)
		want string
	}{
		{"route path parameter not declared", func(m map[string]any) {
			delete(obj(m, "http", "routes", "getThing"), "pathParams")
		}, "schema/things.json#/http/routes/getThing/path: {id} in the path is not declared in pathParams"},
		{"route parameter not in the path", func(m map[string]any) {
			obj(m, "http", "routes", "getThing", "pathParams")["other"] = map[string]any{"type": "string", "since": 1}
		}, `path parameter "other" is not in the path /things/{id}`},
		{"GET route with a body", func(m map[string]any) {
			obj(m, "http", "routes", "getThing")["body"] = map[string]any{"$ref": "#/$defs/Tree"}
		}, "schema/things.json#/http/routes/getThing/body: a GET route takes no body"},
		{"POST route without a body", func(m map[string]any) { delete(obj(m, "http", "routes", "putThing"), "body") }, "a POST route takes a JSON body"},
		{"route with response and stream", func(m map[string]any) {
			obj(m, "http", "routes", "getThing")["stream"] = map[string]any{"$ref": "#/$defs/Shape"}
		}, "a route answers either response (JSON) or stream"},
		{"route naming an unknown method", func(m map[string]any) { obj(m, "http", "routes", "putThing")["x-method"] = "things.nope" }, `x-method names "things.nope"`},
		{"route with a dangling body", func(m map[string]any) {
			obj(m, "http", "routes", "putThing", "body")["$ref"] = "#/$defs/Nope"
		}, `schema/things.json#/http/routes/putThing/body: dangling $ref`},
		{"route parameter that is an object", func(m map[string]any) {
			obj(m, "http", "routes", "getThing", "query")["depth"] = map[string]any{"type": "object", "since": 1, "properties": map[string]any{}}
		}, "a query parameter is a string, an integer or a boolean"},
		{"duplicate route", func(m map[string]any) {
			obj(m, "http", "routes", "putThing")["path"] = "/things/{id}"
			obj(m, "http", "routes", "putThing")["method"] = "GET"
			delete(obj(m, "http", "routes", "putThing"), "body")
		}, "is also route getThing"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := LoadFiles(editFixture(t, "http", "things.json", c.fn), metaDir)
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.want)
		})
	}
}

// TestGoldenHTTP compares the http section's own outputs of fixture http with
// gen/testdata/fixtures/http/golden/*.golden (go test ./gen -run TestGoldenHTTP -update rewrites
// them): the Go route table, the OpenAPI document, and the TypeScript and reference sections.
func TestGoldenHTTP(t *testing.T) {
	out := generateFiles(t, loadFixture(t, "http"))
	ts := string(out["sdk-ts/src/protocol.ts"])
	md := string(out["docs/protocol.md"])
	parts := map[string]string{
		"protocol__sse_gen.go.golden":           string(out["protocol/sse_gen.go"]),
		"protocol__sse_openapi_gen.json.golden": string(out[openAPIPath]),
		"sdk-ts__src__protocol.ts.golden":       ts[strings.Index(ts, "\n/** The header every response"):],
		"docs__protocol.md.golden":              md[strings.Index(md, "## SSE protocol"):strings.Index(md, "## Types")],
	}
	dir := filepath.Join("testdata", "fixtures", "http", "golden")
	for name, got := range parts {
		gp := filepath.Join(dir, name)
		if *update {
			require.NoError(t, os.WriteFile(gp, []byte(got), 0o644))
			continue
		}
		want, err := os.ReadFile(gp)
		require.NoError(t, err, "golden file missing: run go test ./gen -run TestGoldenHTTP -update")
		assert.Equal(t, string(want), got, "%s differs", gp)
	}
}

func TestNames(t *testing.T) {
	for in, want := range map[string]string{
		"sessions.create": "SessionsCreate", "sessions.loadEvents": "SessionsLoadEvents", "ipc.hello": "IPCHello",
		"$/ping": "Ping", "sessionId": "SessionID", "$seq": "Seq", "run:start": "RunStart", "tool-result": "ToolResult",
		"hostId": "HostID", "timeToFirstTokenMs": "TimeToFirstTokenMs", "baseURL": "BaseURL", "pid": "PID", "ok": "OK",
		"<": "", "mHz": "MHz", "2fa": "N2fa",
	} {
		assert.Equal(t, want, goName(in), in)
	}
}

// TestBreakingChanges: each kind of break is caught, an additive change passes, and a bumped
// protocolVersion allows breaks.
func TestBreakingChanges(t *testing.T) {
	base := loadFixture(t, "full")
	p, err := LoadFiles(base, metaDir)
	require.NoError(t, err)
	old := p.Bundle
	check := func(t *testing.T, files map[string][]byte) []string {
		p, err := LoadFiles(files, metaDir)
		require.NoError(t, err)
		out, err := Breaking(old, p.Bundle)
		require.NoError(t, err)
		return out
	}
	cases := []struct {
		name string
		fn   func(m map[string]any)
		want string
	}{
		{"removed method", func(m map[string]any) { delete(obj(m, "methods"), "things.clear") }, "method things.clear was removed"},
		{"removed signal", func(m map[string]any) { delete(m, "signals") }, "signal thing:changed was removed"},
		{"removed field", func(m map[string]any) { delete(obj(m, "$defs", "Tree", "properties"), "parent") }, "type Tree: field parent was removed"},
		{"renamed field", func(m map[string]any) {
			ps := obj(m, "$defs", "Tree", "properties")
			ps["identifier"] = ps["id"]
			delete(ps, "id")
			obj(m, "$defs", "Tree")["required"] = []any{"identifier", "children"}
		}, "type Tree: field id was removed"},
		{"removed enum value", func(m map[string]any) {
			u := obj(m, "$defs", "Unit")
			u["enum"] = []any{"mHz"}
			u["x-enum-names"] = map[string]any{"mHz": "Millihertz"}
		}, "type Unit: enum value MHz was removed"},
		{"changed type", func(m map[string]any) {
			obj(m, "methods", "things.put", "params", "properties", "ratio")["type"] = "string"
		}, "method things.put params.ratio: type changed from number to string"},
		{"new required param", func(m map[string]any) {
			prm := obj(m, "methods", "things.put", "params")
			prm["required"] = []any{"id", "cursor", "tags", "note"}
		}, "method things.put params: note is a new required param"},
		{"removed type", func(m map[string]any) {
			delete(obj(m, "$defs"), "Unit")
			delete(obj(m, "methods", "things.put", "params", "properties"), "unit")
		}, "type Unit was removed"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := check(t, edit(t, "things.json", c.fn))
			assert.Contains(t, strings.Join(out, "\n"), c.want)
		})
	}
	t.Run("additive change passes", func(t *testing.T) {
		out := check(t, edit(t, "things.json", func(m map[string]any) {
			obj(m, "$defs", "Tree", "properties")["label"] = map[string]any{"type": "string", "since": 16, "description": "new"}
			obj(m, "methods")["things.count"] = map[string]any{"summary": "Counts.", "description": "", "scope": "chat", "since": 16,
				"params": map[string]any{"type": "object", "properties": map[string]any{}},
				"result": map[string]any{"type": "object", "properties": map[string]any{}}, "errors": []any{}}
			u := obj(m, "$defs", "Unit")
			u["enum"] = []any{"mHz", "MHz", "GHz"}
			obj(u, "x-enum-names")["GHz"] = "Gigahertz"
			u["x-enum-since"] = map[string]any{"GHz": 16}
		}))
		assert.Empty(t, out)
	})
	t.Run("new enum value without since", func(t *testing.T) {
		out := check(t, edit(t, "things.json", func(m map[string]any) {
			u := obj(m, "$defs", "Unit")
			u["enum"] = []any{"mHz", "MHz", "GHz"}
			obj(u, "x-enum-names")["GHz"] = "Gigahertz"
		}))
		assert.Contains(t, strings.Join(out, "\n"), "enum value GHz is new but has no since")
	})
	t.Run("bumped version allows breaks", func(t *testing.T) {
		files := edit(t, "things.json", func(m map[string]any) {
			obj(m, "methods", "things.put", "params", "properties", "ratio")["type"] = "string"
		})
		var pm map[string]any
		require.NoError(t, json.Unmarshal(files["protocol.json"], &pm))
		pm["protocolVersion"] = 17
		b, _ := json.Marshal(pm)
		files["protocol.json"] = b
		assert.Empty(t, check(t, files))
	})
}

// TestNoBreakingChangeAgainstRelease runs the gate over the real schema.
func TestNoBreakingChangeAgainstRelease(t *testing.T) {
	files, err := Generate("../schema")
	require.NoError(t, err)
	breaks, snap, err := checkBreaking("../schema", files["protocol/bundle_gen.json"])
	require.NoError(t, err)
	require.NotEmpty(t, snap, "schema/releases has no snapshot; run make release-schema")
	require.Empty(t, breaks, "breaking changes against %s; bump protocolVersion or undo them", snap)
}

// TestSSEOpenAPI checks the OpenAPI document of the real schema's HTTP section: the fixed
// operationIds (other clients find the routes by them, issue 26), every $ref resolving inside
// the document, and every component schema compiling as JSON Schema 2020-12 (OpenAPI 3.1's
// dialect).
func TestSSEOpenAPI(t *testing.T) {
	files, err := Generate("../schema")
	require.NoError(t, err)
	raw := files[openAPIPath]
	require.NotEmpty(t, raw)
	var doc struct {
		OpenAPI    string                               `json:"openapi"`
		Paths      map[string]map[string]map[string]any `json:"paths"`
		Components struct {
			Schemas map[string]any `json:"schemas"`
		} `json:"components"`
	}
	require.NoError(t, json.Unmarshal(raw, &doc))
	assert.Equal(t, "3.1.0", doc.OpenAPI)
	ops := map[string]string{}
	for path, item := range doc.Paths {
		assert.True(t, strings.HasPrefix(path, "/") && !strings.HasPrefix(path, "/api/"), "paths are relative to the base path: %s", path)
		for method, op := range item {
			ops[op["operationId"].(string)] = strings.ToUpper(method) + " " + path
		}
	}
	assert.ElementsMatch(t, []string{"listSessions", "createSession", "hydrate", "stream", "send", "answer", "cancel"}, sortedKeys(ops))
	for _, ref := range regexp.MustCompile(`"\$ref": "([^"]+)"`).FindAllStringSubmatch(string(raw), -1) {
		name, ok := strings.CutPrefix(ref[1], "#/components/schemas/")
		require.True(t, ok, "ref %s points outside components/schemas", ref[1])
		assert.Contains(t, doc.Components.Schemas, name, "dangling ref %s", ref[1])
	}
	c := jsonschema.NewCompiler()
	c.Draft = jsonschema.Draft2020
	require.NoError(t, c.AddResource("https://zidane.dev/sse/openapi.json", bytes.NewReader(raw)))
	for name := range doc.Components.Schemas {
		_, err := c.Compile("https://zidane.dev/sse/openapi.json#/components/schemas/" + name)
		assert.NoError(t, err, name)
	}
}
