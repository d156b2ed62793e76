package wirekit

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/zidane-server/zidane/protocol"
)

// Placeholders a scenario's expected frame may hold in place of a value (README, "Conformance
// kit"). An expected object matches a received one that has at least its keys (extra keys are
// ignored: receivers ignore unknown fields); arrays match element by element and must have the
// same length.
const (
	PAny    = "<any>"    // any value, the key must be present
	PAbsent = "<absent>" // the key must be absent
	PString = "<string>" // a non-empty string
	PUUID   = "<uuid>"   // a UUID string
	PInt    = "<int>"    // an integer
	PNumber = "<number>" // any number
	PBool   = "<bool>"   // true or false
	PTime   = "<time>"   // integer milliseconds since the Unix epoch (after 2001)
	PArray  = "<array>"  // any array
	PObject = "<object>" // any object
)

var uuidRE = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

// varRE is a ${name} reference to a captured value, optionally followed by +N or -N.
var varRE = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}([+-][0-9]+)?`)

// substitute replaces ${name} references in v (a decoded JSON value) by captured values: a
// string that is exactly one reference becomes the captured value itself (any JSON type, with
// +N/-N added to a number); references inside a longer string are replaced by the value's text.
func substitute(v any, vars map[string]any) (any, error) {
	switch x := v.(type) {
	case string:
		if m := varRE.FindStringSubmatchIndex(x); m != nil && m[0] == 0 && m[1] == len(x) {
			name := x[m[2]:m[3]]
			val, ok := vars[name]
			if !ok {
				return nil, fmt.Errorf("${%s} was never captured", name)
			}
			if m[4] >= 0 {
				n, ok := val.(float64)
				if !ok {
					return nil, fmt.Errorf("${%s}%s: the captured value %v is not a number", name, x[m[4]:m[5]], val)
				}
				d, _ := strconv.Atoi(x[m[4]:m[5]])
				return n + float64(d), nil
			}
			return val, nil
		}
		var err error
		out := varRE.ReplaceAllStringFunc(x, func(ref string) string {
			name := varRE.FindStringSubmatch(ref)[1]
			val, ok := vars[name]
			if !ok {
				err = fmt.Errorf("${%s} was never captured", name)
				return ref
			}
			if s, ok := val.(string); ok {
				return s
			}
			b, _ := protocol.Marshal(val)
			return string(b)
		})
		return out, err
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			s, err := substitute(e, vars)
			if err != nil {
				return nil, err
			}
			out[k] = s
		}
		return out, nil
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			s, err := substitute(e, vars)
			if err != nil {
				return nil, err
			}
			out[i] = s
		}
		return out, nil
	}
	return v, nil
}

// match reports where got differs from want (a pattern with placeholders), as "at <JSON
// pointer>: <what>", or "" when it matches.
func match(want, got any, path string) string {
	at := path
	if at == "" {
		at = "/"
	}
	if s, ok := want.(string); ok && strings.HasPrefix(s, "<") && strings.HasSuffix(s, ">") {
		bad := func(what string) string { return fmt.Sprintf("at %s: want %s, got %s", at, what, show(got)) }
		switch s {
		case PAny:
			return ""
		case PString:
			if g, ok := got.(string); ok && g != "" {
				return ""
			}
			return bad("a non-empty string")
		case PUUID:
			if g, ok := got.(string); ok && uuidRE.MatchString(g) {
				return ""
			}
			return bad("a UUID")
		case PInt:
			if g, ok := got.(float64); ok && g == float64(int64(g)) {
				return ""
			}
			return bad("an integer")
		case PNumber:
			if _, ok := got.(float64); ok {
				return ""
			}
			return bad("a number")
		case PBool:
			if _, ok := got.(bool); ok {
				return ""
			}
			return bad("a boolean")
		case PTime:
			if g, ok := got.(float64); ok && g == float64(int64(g)) && g > 1e12 {
				return ""
			}
			return bad("a time in ms since the epoch")
		case PArray:
			if _, ok := got.([]any); ok {
				return ""
			}
			return bad("an array")
		case PObject:
			if _, ok := got.(map[string]any); ok {
				return ""
			}
			return bad("an object")
		}
	}
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return fmt.Sprintf("at %s: want an object, got %s", at, show(got))
		}
		keys := make([]string, 0, len(w))
		for k := range w {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			gv, present := g[k]
			p := path + "/" + strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1")
			if w[k] == PAbsent {
				if present {
					return fmt.Sprintf("at %s: want no such key, got %s", p, show(gv))
				}
				continue
			}
			if !present {
				return fmt.Sprintf("at %s: missing (want %s)", p, show(w[k]))
			}
			if d := match(w[k], gv, p); d != "" {
				return d
			}
		}
		return ""
	case []any:
		g, ok := got.([]any)
		if !ok {
			return fmt.Sprintf("at %s: want an array, got %s", at, show(got))
		}
		if len(g) != len(w) {
			return fmt.Sprintf("at %s: want %d elements, got %d: %s", at, len(w), len(g), show(got))
		}
		for i := range w {
			if d := match(w[i], g[i], path+"/"+strconv.Itoa(i)); d != "" {
				return d
			}
		}
		return ""
	}
	if !jsonEqual(want, got) {
		return fmt.Sprintf("at %s: want %s, got %s", at, show(want), show(got))
	}
	return ""
}

func jsonEqual(a, b any) bool {
	x, _ := protocol.Marshal(a)
	y, _ := protocol.Marshal(b)
	return string(x) == string(y)
}

// show renders a value for a message, cut to 300 bytes.
func show(v any) string {
	b, err := protocol.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	if len(b) > 300 {
		return string(b[:300]) + "…"
	}
	return string(b)
}

// pointer resolves a JSON pointer (RFC 6901) in v.
func pointer(v any, ptr string) (any, bool) {
	if ptr == "" || ptr == "/" {
		return v, true
	}
	for _, tok := range strings.Split(strings.TrimPrefix(ptr, "/"), "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch x := v.(type) {
		case map[string]any:
			e, ok := x[tok]
			if !ok {
				return nil, false
			}
			v = e
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(x) {
				return nil, false
			}
			v = x[i]
		default:
			return nil, false
		}
	}
	return v, true
}
