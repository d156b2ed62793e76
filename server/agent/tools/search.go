package tools

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"regexp"
	"strings"
	"unicode/utf8"

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
				if !d.Type().IsRegular() {
					return env.WS.NotRegular(p, d.Type())
				}
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
		err := grepFile(env.WS.RootFS(rp), name, re, cfg.GrepMaxFileBytes, func(line int, text []byte, long bool) error {
			if n == limit {
				cut = true
				return errStop
			}
			n++
			s := string(text)
			if len(s) > 300 || long {
				s, _ = capText(s, 300)
				s = strings.SplitN(s, "\n", 2)[0] + " [line cut]"
			}
			fmt.Fprintf(&b, "%s:%d:%s\n", shown(in.Path, rel), line, s)
			return nil
		})
		if err != nil {
			return err
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

// grepLineHead is the bytes of a line grep keeps to show it: a longer line is matched whole but
// only its start is shown.
const grepLineHead = 4 << 10

// grepFile matches re against each line of the regular file name (a folder, a special file, a
// binary file or one over maxBytes is skipped: 0, nil) and calls hit with each matching line's
// number and text; hit's error ends the file and is returned. Memory is bounded whatever the file's shape: a
// line that does not fit the 64 KiB read buffer is matched as a stream (regexp.MatchReader) and
// only its first grepLineHead bytes are kept (long reports that).
func grepFile(fsys fs.FS, name string, re *regexp.Regexp, maxBytes int64, hit func(line int, text []byte, long bool) error) error {
	f, err := fsys.Open(name)
	if err != nil {
		return nil
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() || fi.Size() > maxBytes {
		return nil
	}
	br := bufio.NewReaderSize(io.LimitReader(f, maxBytes), 64<<10)
	if head, _ := br.Peek(8<<10 + 1); isBinary(head) {
		return nil
	}
	var pre []byte // a long line's start, copied out of br's buffer
	for line := 1; ; line++ {
		b, err := br.ReadSlice('\n')
		long := false
		var matched bool
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			pre = append(pre[:0], b...)
			lr := &lineReader{pre: pre, br: br, head: append([]byte(nil), b[:min(len(b), grepLineHead)]...)}
			matched = re.MatchReader(lr)
			lr.skip()
			b, long, err = lr.head, true, lr.err
		case len(b) == 0 && err != nil:
			return nil
		default:
			b = bytes.TrimSuffix(bytes.TrimSuffix(b, []byte{'\n'}), []byte{'\r'})
			matched = re.Match(b)
		}
		if matched {
			if herr := hit(line, b, long); herr != nil {
				return herr
			}
		}
		if err != nil {
			return nil
		}
	}
}

// lineReader reads one line (up to its newline, which it consumes) as runes for
// regexp.MatchReader: first pre (the start already read), then from br.
type lineReader struct {
	pre  []byte
	br   *bufio.Reader
	head []byte // the start of the line, for the output
	done bool
	err  error // br's error at the end of the line (io.EOF: the file ended)
}

// ReadRune implements io.RuneReader.
func (l *lineReader) ReadRune() (rune, int, error) {
	if len(l.pre) > 0 {
		r, size := utf8.DecodeRune(l.pre)
		l.pre = l.pre[size:]
		return r, size, nil
	}
	if l.done {
		return 0, 0, io.EOF
	}
	r, size, err := l.br.ReadRune()
	if err != nil || r == '\n' {
		l.done, l.err = true, err
		return 0, 0, io.EOF
	}
	if len(l.head) < grepLineHead {
		l.head = utf8.AppendRune(l.head, r)
	}
	return r, size, nil
}

// skip consumes the rest of the line.
func (l *lineReader) skip() {
	l.pre = nil
	for !l.done {
		l.ReadRune()
	}
}
