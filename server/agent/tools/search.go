package tools

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"strings"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/zidane-server/zidane/server/workspace"
)

// errStop ends a walk early (a cap was reached).
var errStop = errors.New("stop")

// walkFiles walks the folder p (relative to env.Cwd) and calls fn for each regular file that is not
// ignored, with its path relative to p ("" when p is that file) and its root-relative name. .git folders, ignored paths and
// symbolic links are skipped; the walk never leaves the root. fn returning errStop ends the walk.
func walkFiles(ctx context.Context, env *Env, p string, fn func(rel, name string, rp workspace.Path) error) error {
	var ig *workspace.Ignorer
	err := env.WS.WalkDir(env.Cwd, p, func(rp workspace.Path, name string, d fs.DirEntry, err error) error {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if ig == nil {
			ig = workspace.NewIgnorer(env.WS.RootFS(rp))
		}
		if err != nil {
			if name == rp.Rel {
				return err
			}
			return nil // an unreadable entry is skipped
		}
		rel := name
		if rp.Rel != "." {
			rel = strings.TrimPrefix(strings.TrimPrefix(name, rp.Rel), "/")
		}
		if name == rp.Rel {
			if !d.IsDir() { // the path is one file
				return fn("", name, rp)
			}
			return nil
		}
		if d.IsDir() {
			if d.Name() == ".git" || ig.Ignored(name, true) {
				return fs.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() || ig.Ignored(name, false) {
			return nil
		}
		return fn(rel, name, rp)
	})
	if errors.Is(err, errStop) {
		return nil
	}
	var we *workspace.Error
	switch {
	case err == nil, errors.As(err, &we), errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return err
	case errors.Is(err, fs.ErrNotExist):
		return failf("%q does not exist; pass an existing folder or file inside the workspace.", p)
	}
	return failf("%q cannot be searched: %v", p, err)
}

// shown is how a path found under the search folder p is shown to the model: relative to the
// session's folder.
func shown(p, rel string) string {
	if p == "" || p == "." {
		return rel
	}
	if rel == "" {
		return p
	}
	return path.Join(p, rel)
}

// Glob is the glob tool: files whose path matches a pattern.
type Glob struct{}

type globInput struct {
	Pattern string `json:"pattern"`
	Path    string `json:"path"`
}

// Spec implements Tool.
func (Glob) Spec() Spec {
	return Spec{Name: "glob", Description: "Find files by path pattern (doublestar: * within a name, ** across folders, e.g. \"**/*.go\") " +
		"under a folder of the workspace (default the session's folder). Honours .gitignore, skips .git; at most 1000 paths, sorted.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{` +
			`"pattern":{"type":"string","description":"path pattern relative to path, e.g. **/*.go"},` +
			`"path":{"type":"string","description":"folder to search, relative to the session's folder (default \".\")"}},"required":["pattern"]}`)}
}

// Kind implements Tool.
func (Glob) Kind() Kind { return KindRead }

// Check implements Tool.
func (Glob) Check(_ context.Context, env *Env, input json.RawMessage) (*Call, error) {
	var in globInput
	if err := decode("glob", input, &in); err != nil {
		return nil, err
	}
	if in.Pattern == "" || !doublestar.ValidatePattern(in.Pattern) {
		return nil, failf("glob: %q is not a valid pattern; use * ? [..] {a,b} and ** (e.g. \"**/*.go\").", in.Pattern)
	}
	if _, err := env.WS.Resolve(env.Cwd, orDot(in.Path)); err != nil {
		return nil, err
	}
	return &Call{Summary: "glob " + in.Pattern}, nil
}

// Run implements Tool.
func (t Glob) Run(ctx context.Context, env *Env, input json.RawMessage) (*Result, error) {
	if _, err := t.Check(ctx, env, input); err != nil {
		return failure(err), nil
	}
	var in globInput
	_ = decode("glob", input, &in)
	cfg := env.cfg()
	ctx, cancel := context.WithTimeout(ctx, cfg.GrepTimeout)
	defer cancel()
	var out []string
	cut := false
	err := walkFiles(ctx, env, orDot(in.Path), func(rel, _ string, _ workspace.Path) error {
		if ok, _ := doublestar.Match(in.Pattern, rel); ok {
			if len(out) == cfg.ListMaxEntries {
				cut = true
				return errStop
			}
			out = append(out, shown(in.Path, rel))
		}
		return nil
	})
	note := ""
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		note = fmt.Sprintf("[search stopped after %s; the paths found so far]\n", cfg.GrepTimeout)
		cut = true
	case err != nil && ctx.Err() == nil:
		return failure(err), nil
	case cut:
		note = fmt.Sprintf("[list cut at %d paths; narrow the pattern]\n", cfg.ListMaxEntries)
	}
	if err := parentCtxErr(ctx, err); err != nil {
		return nil, err
	}
	if len(out) == 0 && note == "" {
		return &Result{Content: "No files match " + in.Pattern + "."}, nil
	}
	s, c := capText(strings.Join(out, "\n")+"\n"+note, cfg.OutputMaxBytes)
	return &Result{Content: s, Truncated: cut || c}, nil
}

// parentCtxErr returns the run's cancellation (not a tool's own deadline) so the runtime stops.
func parentCtxErr(ctx context.Context, err error) error {
	if errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

func orDot(p string) string {
	if p == "" {
		return "."
	}
	return p
}

// Grep is the grep tool: lines matching an RE2 regular expression.
type Grep struct{}

type grepInput struct {
	Pattern    string `json:"pattern"`
	Path       string `json:"path"`
	Glob       string `json:"glob"`
	IgnoreCase bool   `json:"ignore_case"`
	MaxResults int    `json:"max_results"`
}

// Spec implements Tool.
func (Grep) Spec() Spec {
	return Spec{Name: "grep", Description: "Search file contents with an RE2 regular expression under a folder or in a file of the workspace " +
		"(default the session's folder). Honours .gitignore, skips .git and binary files. Prints path:line:text; at most 200 lines " +
		"(max_results may ask for fewer) and 10 seconds.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{` +
			`"pattern":{"type":"string","description":"RE2 regular expression, matched per line"},` +
			`"path":{"type":"string","description":"folder or file to search, relative to the session's folder (default \".\")"},` +
			`"glob":{"type":"string","description":"only files whose path (relative to path) matches this doublestar pattern, e.g. **/*.go"},` +
			`"ignore_case":{"type":"boolean","description":"match case-insensitively"},` +
			`"max_results":{"type":"integer","minimum":1,"description":"stop after this many matching lines"}},"required":["pattern"]}`)}
}

// Kind implements Tool.
func (Grep) Kind() Kind { return KindRead }

func (Grep) parse(env *Env, input json.RawMessage) (grepInput, *regexp.Regexp, error) {
	var in grepInput
	if err := decode("grep", input, &in); err != nil {
		return in, nil, err
	}
	expr := in.Pattern
	if in.IgnoreCase {
		expr = "(?i)" + expr
	}
	re, err := regexp.Compile(expr)
	if in.Pattern == "" || err != nil {
		return in, nil, failf("grep: %q is not a valid RE2 regular expression (%v); Go's RE2 syntax has no look-around or backreferences.", in.Pattern, err)
	}
	if in.Glob != "" && !doublestar.ValidatePattern(in.Glob) {
		return in, nil, failf("grep: glob %q is not a valid pattern.", in.Glob)
	}
	if _, err := env.WS.Resolve(env.Cwd, orDot(in.Path)); err != nil {
		return in, nil, err
	}
	return in, re, nil
}

// Check implements Tool.
func (t Grep) Check(_ context.Context, env *Env, input json.RawMessage) (*Call, error) {
	in, _, err := t.parse(env, input)
	if err != nil {
		return nil, err
	}
	return &Call{Summary: "grep " + in.Pattern}, nil
}

// Run implements Tool.
func (t Grep) Run(ctx context.Context, env *Env, input json.RawMessage) (*Result, error) {
	in, re, err := t.parse(env, input)
	if err != nil {
		return failure(err), nil
	}
	cfg := env.cfg()
	limit := cfg.GrepMaxResults
	if in.MaxResults > 0 && in.MaxResults < limit {
		limit = in.MaxResults
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.GrepTimeout)
	defer cancel()
	var b strings.Builder
	n, cut := 0, false
	err = walkFiles(ctx, env, orDot(in.Path), func(rel, name string, rp workspace.Path) error {
		if in.Glob != "" && rel != "" {
			if ok, _ := doublestar.Match(in.Glob, rel); !ok {
				return nil
			}
		}
		fsys := env.WS.RootFS(rp)
		if fi, err := fs.Stat(fsys, name); err != nil || fi.Size() > cfg.GrepMaxFileBytes {
			return nil
		}
		data, err := fs.ReadFile(fsys, name)
		if err != nil || isBinary(data) {
			return nil
		}
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(make([]byte, 0, 64<<10), int(cfg.GrepMaxFileBytes)+1)
		for line := 1; sc.Scan(); line++ {
			if !re.Match(sc.Bytes()) {
				continue
			}
			if n == limit {
				cut = true
				return errStop
			}
			n++
			text := sc.Text()
			if len(text) > 300 {
				text, _ = capText(text, 300)
				text = strings.SplitN(text, "\n", 2)[0] + " [line cut]"
			}
			fmt.Fprintf(&b, "%s:%d:%s\n", shown(in.Path, rel), line, text)
		}
		return ctx.Err()
	})
	if perr := parentCtxErr(ctx, err); perr != nil {
		return nil, perr
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		fmt.Fprintf(&b, "[search stopped after %s; the matches found so far]\n", cfg.GrepTimeout)
		cut = true
	case err != nil:
		return failure(err), nil
	case cut:
		fmt.Fprintf(&b, "[results cut at %d lines; narrow the pattern or the path]\n", limit)
	}
	if n == 0 && !cut {
		return &Result{Content: "No matches for " + in.Pattern + "."}, nil
	}
	s, c := capText(b.String(), cfg.OutputMaxBytes)
	return &Result{Content: s, Truncated: cut || c}, nil
}
