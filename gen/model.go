package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v5"
)

// kind is the shape of a schema type after loading.
type kind int

const (
	kObject kind = iota
	kString
	kInt
	kNumber
	kBool
	kArray
	kMap
	kAny
	kRef
	kUnion
	kEnum
)

// Protocol is the loaded, checked schema: everything the emitters need.
type Protocol struct {
	Title, Description  string
	Version, MinVersion int
	Scopes              []*Scope
	Errors              []*ErrorDef
	Groups              []*Group
	Types               map[string]*Type // every named Go/TS type, params and results included
	Methods             []*Method        // sorted by wire name
	Signals             []*Signal        // in group order, then schema order
	Hash                string           // sha256 of the schema files, hex
	Bundle              []byte           // the bundled schema served at /protocol.json
	HTTP                *HTTPAPI         // the HTTP section (SSE protocol v1), nil when no group has one

	files map[string]*node
}

// Scope is one token scope.
type Scope struct {
	Name, Description string
	Includes          []string
}

// Group is one schema file.
type Group struct {
	Name, Description, File string
	Methods                 []*Method
	Signals                 []*Signal
}

// Method is one JSON-RPC method.
type Method struct {
	Name, Group, GoName, HandlerName string
	Summary, Description, Scope      string
	Since                            int
	Deprecated                       string
	// RemovedIn is removedIn: the protocol version the method was removed in (0 while it is not);
	// the dispatch serves it only to connections that negotiated a lower version.
	RemovedIn      int
	Experimental   bool
	Params, Result *Type
	Errors         []*ErrorDef
	// Audited is x-audit: every call is recorded in the audit log, with AuditParams (top-level
	// params names).
	Audited     bool
	AuditParams []string
	// Resource is x-resource: the kind of per-connection resource a call takes ("" for none).
	Resource string
}

// Signal is one ipc.signal kind.
type Signal struct {
	Kind, Group, Summary, Description string
	Since                             int
	Deprecated                        string
	Experimental                      bool
	Session                           bool
	// Scopes are the token scopes that may receive the signal (a scope that includes one of them
	// receives it too); Delivery is all, origin, others or watchers; Ephemeral marks a passing
	// state. See docs/schema-guide.md "Signals and their audience".
	Scopes    []string
	Delivery  string
	Ephemeral bool
	Type      *Type
}

// Sequenced reports whether the signal carries $seq and enters the replay log: a session signal
// delivered to all, not ephemeral.
func (s *Signal) Sequenced() bool { return s.Session && s.Delivery == "all" && !s.Ephemeral }

// ErrorDef is one entry of the errors registry.
type ErrorDef struct {
	Name, Message, Description string
	Code, Since                int
	Deprecated                 string
	Data                       *Type
}

// Type is one schema type. Named types (structs, enums, unions) have Name set.
type Type struct {
	K            kind
	Name         string
	Nullable     bool
	Format       string
	Props        []*Prop
	Items        *Type // array items, map values
	Ref          string
	Variants     []string // union: variant type names in order
	Enum         []EnumValue
	Const        string // the value of a kind const
	Description  string
	Deprecated   string
	Experimental bool
	Since        int
	Where        string // file#pointer, for messages
	IsSignal     bool
	Kind         string // for union variants: their kind const
	Unions       []string
	// Bounds: minLength and maxLength (characters) of a string, minimum and maximum of an
	// integer (with int32's and int53's own range when the schema gives none, as the bundle
	// does); nil when absent. Pattern is the string's pattern. Odd is set when a bound is not
	// an integer: such a type is checked only by the full validator (gen/gogen_fast.go).
	MinLength, MaxLength *int64
	Minimum, Maximum     *int64
	Pattern              string
	Odd                  bool
}

// Prop is one object member.
type Prop struct {
	Name, GoName string
	T            *Type
	Required     bool
}

// EnumValue is one enum member with its Go constant suffix.
type EnumValue struct {
	Value, GoName string
	Since         int
}

// schemaError is a located schema problem.
type schemaError struct {
	where, msg string
}

func (e schemaError) Error() string { return e.where + ": " + e.msg }

type loader struct {
	p      *Protocol
	errs   []string
	names  map[string]string // generated identifier → where it came from
	defsOf map[string]map[string]bool

	signalNodes [][2]any // signal type name, synthesized schema node
}

func (l *loader) fail(where, format string, args ...any) {
	l.errs = append(l.errs, where+": "+fmt.Sprintf(format, args...))
}

// claim reserves a generated identifier, failing on a collision.
func (l *loader) claim(name, where string) {
	if prev, ok := l.names[name]; ok && prev != where {
		l.fail(where, "generated name %s collides with the one from %s; rename one of them or set x-go-name", name, prev)
		return
	}
	l.names[name] = where
}

// Load reads and checks every schema file under dir.
func Load(dir string) (*Protocol, error) {
	files, err := readSchemaFiles(dir)
	if err != nil {
		return nil, err
	}
	return LoadFiles(files, filepath.Join(dir, "meta"))
}

func readSchemaFiles(dir string) (map[string][]byte, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	files := map[string][]byte{}
	for _, e := range ents {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		files[e.Name()] = b
	}
	if _, ok := files["protocol.json"]; !ok {
		return nil, fmt.Errorf("%s: no protocol.json", dir)
	}
	return files, nil
}

// LoadFiles checks the given schema files (name → bytes) against the meta-schemas in metaDir,
// then builds the model. All problems are reported together, one per line.
func LoadFiles(files map[string][]byte, metaDir string) (*Protocol, error) {
	if err := validateMeta(files, metaDir); err != nil {
		return nil, err
	}
	l := &loader{p: &Protocol{Types: map[string]*Type{}, files: map[string]*node{}}, names: map[string]string{}, defsOf: map[string]map[string]bool{}}
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	h := sha256.New()
	for _, n := range names {
		nd, err := parseOrdered(files[n])
		if err != nil {
			return nil, fmt.Errorf("schema/%s: %v", n, err)
		}
		l.p.files[n] = nd
		h.Write([]byte(n))
		h.Write([]byte{0})
		h.Write(files[n])
		h.Write([]byte{0})
	}
	l.p.Hash = hex.EncodeToString(h.Sum(nil))
	l.build(names)
	if len(l.errs) > 0 {
		sort.Strings(l.errs)
		return nil, fmt.Errorf("schema has %d problem(s):\n  %s", len(l.errs), strings.Join(l.errs, "\n  "))
	}
	l.p.Bundle = bundle(l.p, names, l.signalNodes)
	return l.p, nil
}

func validateMeta(files map[string][]byte, metaDir string) error {
	c := jsonschema.NewCompiler()
	c.Draft = jsonschema.Draft2020
	for _, m := range []string{"protocol.schema.json", "group.schema.json"} {
		b, err := os.ReadFile(filepath.Join(metaDir, m))
		if err != nil {
			return fmt.Errorf("meta-schema: %v", err)
		}
		if err := c.AddResource("https://zidane.dev/schema/meta/"+m, bytes.NewReader(b)); err != nil {
			return fmt.Errorf("meta-schema %s: %v", m, err)
		}
	}
	protoMeta, err := c.Compile("https://zidane.dev/schema/meta/protocol.schema.json")
	if err != nil {
		return fmt.Errorf("meta-schema: %v", err)
	}
	groupMeta, err := c.Compile("https://zidane.dev/schema/meta/group.schema.json")
	if err != nil {
		return fmt.Errorf("meta-schema: %v", err)
	}
	var problems []string
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		var v any
		if err := json.Unmarshal(files[n], &v); err != nil {
			problems = append(problems, fmt.Sprintf("schema/%s: not valid JSON: %v", n, err))
			continue
		}
		meta := groupMeta
		if n == "protocol.json" {
			meta = protoMeta
		}
		if err := meta.Validate(v); err != nil {
			var ve *jsonschema.ValidationError
			if ok := asValidation(err, &ve); ok {
				for _, leaf := range leaves(ve) {
					problems = append(problems, fmt.Sprintf("schema/%s#%s: %s", n, leaf.InstanceLocation, leaf.Message))
				}
			} else {
				problems = append(problems, fmt.Sprintf("schema/%s: %v", n, err))
			}
		}
	}
	if len(problems) > 0 {
		problems = dedupe(problems)
		return fmt.Errorf("schema does not match the meta-schema (schema/meta/, see docs/schema-guide.md):\n  %s", strings.Join(problems, "\n  "))
	}
	return nil
}

func asValidation(err error, ve **jsonschema.ValidationError) bool {
	v, ok := err.(*jsonschema.ValidationError)
	if ok {
		*ve = v
	}
	return ok
}

func leaves(ve *jsonschema.ValidationError) []*jsonschema.ValidationError {
	if len(ve.Causes) == 0 {
		return []*jsonschema.ValidationError{ve}
	}
	var out []*jsonschema.ValidationError
	for _, c := range ve.Causes {
		out = append(out, leaves(c)...)
	}
	return out
}

func dedupe(xs []string) []string {
	sort.Strings(xs)
	out := xs[:0]
	for i, x := range xs {
		if i == 0 || x != xs[i-1] {
			out = append(out, x)
		}
	}
	return out
}
