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
	"strings"
	"unicode/utf8"

	"github.com/pmezard/go-difflib/difflib"

	"github.com/zidane-server/zidane/server/workspace"
)

// ReadFile is the read_file tool: a text file's lines, numbered, from a line offset.
type ReadFile struct{}

type readFileInput struct {
	Path   string `json:"path"`
	Offset int    `json:"offset"`
	Limit  int    `json:"limit"`
}

// Spec implements Tool.
func (ReadFile) Spec() Spec {
	return Spec{Name: "read_file", Description: "Read a text file inside the workspace. Lines come numbered (number, tab, text). " +
		"offset is the first line (1-based, default 1), limit the number of lines (default 2000). Output over 256 KiB is cut and says so; " +
		"binary files are refused. Paths are relative to the session's folder.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{` +
			`"path":{"type":"string","description":"file path, relative to the session's folder or absolute inside the workspace"},` +
			`"offset":{"type":"integer","minimum":1,"description":"first line to return, 1-based"},` +
			`"limit":{"type":"integer","minimum":1,"description":"number of lines to return"}},"required":["path"]}`)}
}

// Kind implements Tool.
func (ReadFile) Kind() Kind { return KindRead }

// Check implements Tool.
func (ReadFile) Check(_ context.Context, env *Env, input json.RawMessage) (*Call, error) {
	var in readFileInput
	if err := decode("read_file", input, &in); err != nil {
		return nil, err
	}
	if in.Path == "" {
		return nil, failf("read_file: path is required.")
	}
	if _, err := env.WS.Resolve(env.Cwd, in.Path); err != nil {
		return nil, err
	}
	return &Call{Summary: "read_file " + in.Path}, nil
}

// readBound is how much of a file read_file reads: the lines are counted over it, and a larger
// file says only its start was read.
const readBound = 64 << 20

// Run implements Tool. The file is streamed (issue 21, T11): only the lines shown are kept, at most
// ReadMaxBytes of them, and the rest is counted in 64 KiB chunks, so a call's memory is bounded by
// the output cap whatever the file's shape (64 MiB of newlines, or one 64 MiB line).
func (t ReadFile) Run(ctx context.Context, env *Env, input json.RawMessage) (*Result, error) {
	if _, err := t.Check(ctx, env, input); err != nil {
		return failure(err), nil
	}
	var in readFileInput
	_ = decode("read_file", input, &in)
	cfg := env.cfg()
	f, _, err := env.WS.Open(env.Cwd, in.Path)
	if err != nil {
		return failure(err), nil
	}
	defer f.Close()
	br := bufio.NewReaderSize(io.LimitReader(f, readBound), 16<<10)
	if head, _ := br.Peek(8<<10 + 1); isBinary(head) {
		return failure(failf("%q is a binary file; read_file shows text only.", in.Path)), nil
	}
	offset, limit := max(in.Offset, 1), in.Limit
	if limit <= 0 {
		limit = cfg.ReadMaxLines
	}
	last := offset - 1 + limit // the last line to show (1-based)
	var b strings.Builder
	var cur []byte          // the current line's text (while it is to be shown), at most ReadMaxBytes
	curLen := 0             // the current line's full length
	nl, size := 0, int64(0) // newlines and bytes read
	var lastByte byte
	collecting, cutAt := true, 0 // cutAt: the line that did not fit the output cap (0: none)
	longLen := 0                 // the length of a first line over the cap, shown cut
	finish := func(line int) {   // line ends; show it if it is in range
		if line < offset {
			return
		}
		prefix := fmt.Sprintf("%6d\t", line)
		if b.Len()+len(prefix)+curLen+1 > cfg.ReadMaxBytes {
			cutAt, collecting = line, false
			if b.Len() == 0 { // the first line alone is over the cap: its start is shown
				longLen = curLen
				b.WriteString(prefix)
				b.Write(cur[:max(0, min(len(cur), cfg.ReadMaxBytes-len(prefix)-1))])
				b.WriteByte('\n')
			}
			return
		}
		b.WriteString(prefix)
		b.Write(cur)
		b.WriteByte('\n')
		if line >= last {
			collecting = false
		}
	}
	buf := make([]byte, 64<<10)
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		n, rerr := br.Read(buf)
		chunk := buf[:n]
		if n > 0 {
			size += int64(n)
			lastByte = chunk[n-1]
		}
		for collecting && len(chunk) > 0 {
			i := bytes.IndexByte(chunk, '\n')
			part := chunk
			if i >= 0 {
				part = chunk[:i]
			}
			if nl+1 >= offset {
				if room := cfg.ReadMaxBytes - len(cur); room > 0 {
					cur = append(cur, part[:min(len(part), room)]...)
				}
				curLen += len(part)
			}
			if i < 0 {
				chunk = nil
				break
			}
			chunk = chunk[i+1:]
			nl++
			finish(nl)
			cur, curLen = cur[:0], 0
		}
		nl += bytes.Count(chunk, []byte{'\n'})
		if rerr != nil {
			break
		}
	}
	total := nl
	if size > 0 && lastByte != '\n' {
		total++ // a last line without a newline
		if collecting {
			finish(total)
		}
	}
	if total == 0 {
		return &Result{Content: fmt.Sprintf("%s is empty.", in.Path)}, nil
	}
	if offset > total {
		return failure(failf("%s has %d lines; offset %d is past the end.", in.Path, total, offset)), nil
	}
	end := min(last, total)
	truncated := false
	switch {
	case longLen > 0:
		next := ""
		if cutAt < total {
			next = fmt.Sprintf("; read on with offset %d", cutAt+1)
		}
		fmt.Fprintf(&b, "[output cut at %d bytes: line %d is %d bytes long and only its start is shown; %d lines in all%s]\n", cfg.ReadMaxBytes, cutAt, longLen, total, next)
		truncated = true
	case cutAt > 0:
		fmt.Fprintf(&b, "[output cut at %d bytes: lines %d-%d shown of %d; read on with offset %d]\n", cfg.ReadMaxBytes, offset, cutAt-1, total, cutAt)
		truncated = true
	case end < total:
		fmt.Fprintf(&b, "[lines %d-%d shown of %d; read on with offset %d]\n", offset, end, total, end+1)
		truncated = true
	}
	if size == readBound {
		if n, _ := f.Read(buf[:1]); n > 0 {
			fmt.Fprintf(&b, "[the file is larger than %d bytes; only its start was read]\n", readBound)
			truncated = true
		}
	}
	return &Result{Content: b.String(), Truncated: truncated}, nil
}

// isBinary reports whether data looks binary: a NUL byte, or invalid UTF-8, in its first 8 KiB.
func isBinary(data []byte) bool {
	head := data[:min(len(data), 8<<10)]
	if bytes.IndexByte(head, 0) >= 0 {
		return true
	}
	// A cut in the middle of a rune at the end of the head is not binary.
	for i := 0; i < 3 && len(head) > 0 && !utf8.Valid(head); i++ {
		if len(head) < len(data) {
			head = head[:len(head)-1]
			continue
		}
		return true
	}
	return !utf8.Valid(head)
}

// ListDir is the list_dir tool: a folder's entries.
type ListDir struct{}

type listDirInput struct {
	Path string `json:"path"`
}

// Spec implements Tool.
func (ListDir) Spec() Spec {
	return Spec{Name: "list_dir", Description: "List a folder inside the workspace: one entry a line, folders end in '/', symbolic links in '@'. " +
		"At most 1000 entries. Default path: the session's folder.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string","description":"folder path, relative to the session's folder (default \".\")"}}}`)}
}

// Kind implements Tool.
func (ListDir) Kind() Kind { return KindRead }

// Check implements Tool.
func (ListDir) Check(_ context.Context, env *Env, input json.RawMessage) (*Call, error) {
	var in listDirInput
	if err := decode("list_dir", input, &in); err != nil {
		return nil, err
	}
	if in.Path == "" {
		in.Path = "."
	}
	if _, err := env.WS.Resolve(env.Cwd, in.Path); err != nil {
		return nil, err
	}
	return &Call{Summary: "list_dir " + in.Path}, nil
}

// Run implements Tool.
func (t ListDir) Run(ctx context.Context, env *Env, input json.RawMessage) (*Result, error) {
	if _, err := t.Check(ctx, env, input); err != nil {
		return failure(err), nil
	}
	var in listDirInput
	_ = decode("list_dir", input, &in)
	if in.Path == "" {
		in.Path = "."
	}
	_, des, err := env.WS.ReadDir(env.Cwd, in.Path)
	if err != nil {
		return failure(err), nil
	}
	cfg := env.cfg()
	var b strings.Builder
	for i, d := range des {
		if i == cfg.ListMaxEntries {
			fmt.Fprintf(&b, "[list cut: %d of %d entries shown]\n", i, len(des))
			return &Result{Content: b.String(), Truncated: true}, nil
		}
		b.WriteString(d.Name())
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			b.WriteByte('@')
		case d.IsDir():
			b.WriteByte('/')
		}
		b.WriteByte('\n')
	}
	if len(des) == 0 {
		return &Result{Content: in.Path + " is empty."}, nil
	}
	out, cut := capText(b.String(), cfg.OutputMaxBytes)
	return &Result{Content: out, Truncated: cut}, nil
}

// WriteFile is the write_file tool: create or replace a file.
type WriteFile struct{}

type writeFileInput struct {
	Path    string  `json:"path"`
	Content *string `json:"content"`
}

// Spec implements Tool.
func (WriteFile) Spec() Spec {
	return Spec{Name: "write_file", Description: "Create or replace a file inside the workspace with content (missing folders are created). " +
		"Asks the user first unless the session's mode allows edits.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{` +
			`"path":{"type":"string","description":"file path, relative to the session's folder"},` +
			`"content":{"type":"string","description":"the file's whole new content"}},"required":["path","content"]}`)}
}

// Kind implements Tool.
func (WriteFile) Kind() Kind { return KindEdit }

func (WriteFile) parse(env *Env, input json.RawMessage) (writeFileInput, workspace.Path, error) {
	var in writeFileInput
	if err := decode("write_file", input, &in); err != nil {
		return in, workspace.Path{}, err
	}
	if in.Path == "" || in.Content == nil {
		return in, workspace.Path{}, failf("write_file: path and content are required.")
	}
	rp, err := env.WS.ResolveWrite(env.Cwd, in.Path) // a hidden path: outside the roots
	return in, rp, err
}

// Check implements Tool.
func (t WriteFile) Check(_ context.Context, env *Env, input json.RawMessage) (*Call, error) {
	in, rp, err := t.parse(env, input)
	if err != nil {
		return nil, err
	}
	old, err := currentText(env, in.Path)
	if err != nil {
		return nil, err
	}
	n := strings.Count(*in.Content, "\n")
	return configGuard(&Call{Summary: fmt.Sprintf("write_file %s (%d lines)", in.Path, n), Paths: []workspace.Path{rp},
		GitMeta: rp.InGitDir(), Diff: unifiedDiff(rp.Rel, old, *in.Content)}, rp), nil
}

// Run implements Tool.
func (t WriteFile) Run(_ context.Context, env *Env, input json.RawMessage) (*Result, error) {
	in, _, err := t.parse(env, input)
	if err != nil {
		return failure(err), nil
	}
	old, err := currentText(env, in.Path)
	if err != nil {
		return failure(err), nil
	}
	rp, err := env.WS.WriteFile(env.Cwd, in.Path, []byte(*in.Content), 0o644)
	if err != nil {
		return failure(err), nil
	}
	return &Result{Content: fmt.Sprintf("Wrote %s (%d bytes).", in.Path, len(*in.Content)), Diff: unifiedDiff(rp.Rel, old, *in.Content)}, nil
}

// currentText returns a file's text ("" when it does not exist); a binary or huge file is refused,
// a folder too.
func currentText(env *Env, p string) (string, error) {
	const bound = 8 << 20
	data, _, cut, err := env.WS.ReadFile(env.Cwd, p, bound)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	if cut {
		return "", failf("%q is larger than %d bytes; it cannot be edited with these tools.", p, bound)
	}
	if isBinary(data) {
		return "", failf("%q is a binary file; it cannot be edited with these tools.", p)
	}
	return string(data), nil
}

// EditFile is the edit_file tool: replace one exact span of a file.
type EditFile struct{}

type editFileInput struct {
	Path string  `json:"path"`
	Old  *string `json:"old"`
	New  *string `json:"new"`
}

// Spec implements Tool.
func (EditFile) Spec() Spec {
	return Spec{Name: "edit_file", Description: "Replace one exact span of a text file inside the workspace: old must occur exactly once " +
		"(include surrounding lines to make it unique); new replaces it. Asks the user first unless the session's mode allows edits.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{` +
			`"path":{"type":"string","description":"file path, relative to the session's folder"},` +
			`"old":{"type":"string","minLength":1,"description":"the exact text to replace, as it is in the file"},` +
			`"new":{"type":"string","description":"the replacement text"}},"required":["path","old","new"]}`)}
}

// Kind implements Tool.
func (EditFile) Kind() Kind { return KindEdit }

// apply checks the input against the file as it is now and returns the edit.
func (EditFile) apply(env *Env, input json.RawMessage) (in editFileInput, rp workspace.Path, before, after string, err error) {
	if err = decode("edit_file", input, &in); err != nil {
		return
	}
	if in.Path == "" || in.Old == nil || in.New == nil || *in.Old == "" {
		err = failf("edit_file: path, old (not empty) and new are required.")
		return
	}
	if rp, err = env.WS.ResolveWrite(env.Cwd, in.Path); err != nil { // a hidden path: outside the roots
		return
	}
	data, _, cut, rerr := env.WS.ReadFile(env.Cwd, in.Path, 8<<20)
	if rerr != nil {
		err = rerr
		return
	}
	if cut || isBinary(data) {
		err = failf("%q is binary or larger than 8 MiB; edit_file edits text files.", in.Path)
		return
	}
	before = string(data)
	switch n := strings.Count(before, *in.Old); n {
	case 0:
		err = failf("edit_file: old text not found in %s; read the file again and copy the span exactly (whitespace included).", in.Path)
		return
	case 1:
	default:
		err = failf("edit_file: old text occurs %d times in %s; include more surrounding lines so it matches exactly once.", n, in.Path)
		return
	}
	after = strings.Replace(before, *in.Old, *in.New, 1)
	return
}

// Check implements Tool.
func (t EditFile) Check(_ context.Context, env *Env, input json.RawMessage) (*Call, error) {
	in, rp, before, after, err := t.apply(env, input)
	if err != nil {
		return nil, err
	}
	return configGuard(&Call{Summary: fmt.Sprintf("edit_file %s (-%d +%d lines)", in.Path, strings.Count(*in.Old, "\n")+1, strings.Count(*in.New, "\n")+1),
		Paths: []workspace.Path{rp}, GitMeta: rp.InGitDir(), Diff: unifiedDiff(rp.Rel, before, after)}, rp), nil
}

// Run implements Tool: the edit is computed again on the file as it is at use, so a file changed
// while the approval waited is edited only if the span still matches exactly once.
func (t EditFile) Run(_ context.Context, env *Env, input json.RawMessage) (*Result, error) {
	in, _, before, after, err := t.apply(env, input)
	if err != nil {
		return failure(err), nil
	}
	rp, err := env.WS.WriteFile(env.Cwd, in.Path, []byte(after), 0o644)
	if err != nil {
		return failure(err), nil
	}
	return &Result{Content: fmt.Sprintf("Edited %s.", in.Path), Diff: unifiedDiff(rp.Rel, before, after)}, nil
}

// unifiedDiff returns the unified diff (3 lines of context) from a to b of the file rel
// ("a/rel", "b/rel"; "/dev/null" for a new file).
func unifiedDiff(rel, a, b string) string {
	from := "a/" + rel
	if a == "" {
		from = "/dev/null"
	}
	s, err := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
		A: diffLines(a), B: diffLines(b), FromFile: from, ToFile: "b/" + rel, Context: 3,
	})
	if err != nil {
		return ""
	}
	return s
}

// diffLines splits s into lines that each end in "\n" (nil for "").
func diffLines(s string) []string {
	if s == "" {
		return nil
	}
	ls := strings.SplitAfter(s, "\n")
	if ls[len(ls)-1] == "" {
		return ls[:len(ls)-1]
	}
	ls[len(ls)-1] += "\n"
	return ls
}

// ConfigFolders are the folders whose files configure what the server runs (MCP servers in
// .zidane/mcps.json, commands and settings in .claude/): a write into one, at any depth of the
// roots (so ~/.zidane and ~/.claude too when a root holds the home folder), asks in every mode
// but locked, where it is refused (issue 23 item 3).
var ConfigFolders = []string{".zidane", ".claude"}

// InConfigFolder reports whether a slash-separated path inside a root lies in a ConfigFolders
// folder.
func InConfigFolder(rel string) bool {
	for _, part := range strings.Split(rel, "/") {
		for _, f := range ConfigFolders {
			if strings.EqualFold(part, f) {
				return true
			}
		}
	}
	return false
}

// configGuard marks a write into a config folder as one that asks every time.
func configGuard(c *Call, rp workspace.Path) *Call {
	if InConfigFolder(rp.Rel) {
		c.AskAlways = true
		c.AskNote = "writes into .zidane/ or .claude/ (which configure MCP servers and commands) ask every time"
	}
	return c
}
