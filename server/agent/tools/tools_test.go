package tools

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zidane-server/zidane/server/workspace"
	"github.com/zidane-server/zidane/server/workspace/workspacetest"
)

// fixture is the cases' layout (workspacetest) with an Env whose cwd is the root.
type fixture struct {
	*workspacetest.Layout
	T, ws, out string
	env        *Env
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	L := workspacetest.New(t)
	f := &fixture{Layout: L, T: L.T, ws: L.WS, out: L.Out}
	w, err := workspace.New([]string{f.ws})
	require.NoError(t, err)
	t.Cleanup(func() { w.Close() })
	f.env = &Env{WS: w, Cwd: f.ws, Config: &Config{}}
	return f
}

// run checks and runs a tool call the way the runtime does: a Check failure is the result.
func (f *fixture) run(t *testing.T, name, args string) *Result {
	t.Helper()
	tool, ok := All().Get(name)
	require.True(t, ok, name)
	if _, err := tool.Check(context.Background(), f.env, json.RawMessage(args)); err != nil {
		return failure(err)
	}
	res, err := tool.Run(context.Background(), f.env, json.RawMessage(args))
	require.NoError(t, err)
	return res
}

func TestSchemasCompile(t *testing.T) {
	for _, s := range All().Specs() {
		c := jsonschema.NewCompiler()
		require.NoError(t, c.AddResource(s.Name+".json", strings.NewReader(string(s.InputSchema))), s.Name)
		_, err := c.Compile(s.Name + ".json")
		require.NoError(t, err, s.Name)
		assert.NotEmpty(t, s.Description)
	}
	assert.Equal(t, []string{"read_file", "list_dir", "glob", "grep", "write_file", "edit_file", "exec", "ask_user", "update_plan"}, All().Names())
}

func TestReadFile(t *testing.T) {
	f := newFixture(t)
	f.Write(t, "a.txt", "one\ntwo\nthree\nfour\n")
	f.Write(t, "bin.dat", "ab\x00cd")
	res := f.run(t, "read_file", `{"path":"a.txt","offset":2,"limit":2}`)
	require.False(t, res.IsError, res.Content)
	assert.Equal(t, "     2\ttwo\n     3\tthree\n[lines 2-3 shown of 4; read on with offset 4]\n", res.Content)
	assert.True(t, res.Truncated)
	res = f.run(t, "read_file", `{"path":"bin.dat"}`)
	assert.True(t, res.IsError)
	assert.Contains(t, res.Content, "binary")
	res = f.run(t, "read_file", `{"path":"a.txt","offset":9}`)
	assert.Contains(t, res.Content, "past the end")

	f.env.Config.ReadMaxBytes = 20
	res = f.run(t, "read_file", `{"path":"a.txt"}`)
	assert.True(t, res.Truncated)
	assert.Contains(t, res.Content, "output cut at 20 bytes")
}

func TestListDirGlobGrep(t *testing.T) {
	f := newFixture(t)
	f.Write(t, "main.go", "package main\n// TODO fix\n")
	f.Write(t, "pkg/x.go", "package pkg\n// todo later\n")
	f.Write(t, "build/gen.go", "// TODO generated\n")
	f.Write(t, ".gitignore", "build/\n*.log\n")
	f.Write(t, "run.log", "TODO in a log\n")
	f.Write(t, ".git/config", "TODO in git\n")
	f.Write(t, "pkg/.gitignore", "skip.go\n")
	f.Write(t, "pkg/skip.go", "// TODO skipped\n")

	res := f.run(t, "list_dir", `{}`)
	assert.Equal(t, ".git/\n.gitignore\nbuild/\nmain.go\npkg/\nrun.log\nsub/\n", res.Content)

	res = f.run(t, "glob", `{"pattern":"**/*.go"}`)
	assert.Equal(t, "main.go\npkg/x.go\n", res.Content, "build/ and pkg/skip.go are ignored")
	res = f.run(t, "glob", `{"pattern":"*.go","path":"pkg"}`)
	assert.Equal(t, "pkg/x.go\n", res.Content)

	res = f.run(t, "grep", `{"pattern":"TODO"}`)
	assert.Equal(t, "main.go:2:// TODO fix\n", res.Content)
	res = f.run(t, "grep", `{"pattern":"todo","ignore_case":true,"glob":"**/*.go"}`)
	assert.Equal(t, "main.go:2:// TODO fix\npkg/x.go:2:// todo later\n", res.Content)
	res = f.run(t, "grep", `{"pattern":"todo","ignore_case":true,"max_results":1}`)
	assert.Contains(t, res.Content, "results cut at 1")
	assert.True(t, res.Truncated)
	res = f.run(t, "grep", `{"pattern":"(?<=x)"}`)
	assert.True(t, res.IsError)
	assert.Contains(t, res.Content, "RE2")
	res = f.run(t, "grep", `{"pattern":"package","path":"pkg/x.go"}`)
	assert.Equal(t, "pkg/x.go:1:package pkg\n", res.Content)
}

func TestWriteAndEditFile(t *testing.T) {
	f := newFixture(t)
	res := f.run(t, "write_file", `{"path":"dir/new.txt","content":"a\nb\n"}`)
	require.False(t, res.IsError, res.Content)
	assert.Equal(t, "a\nb\n", f.Read(t, "dir/new.txt"))
	assert.Contains(t, res.Diff, "--- /dev/null\n+++ b/dir/new.txt\n")
	assert.Contains(t, res.Diff, "+a\n+b\n")

	res = f.run(t, "edit_file", `{"path":"dir/new.txt","old":"b","new":"B"}`)
	require.False(t, res.IsError, res.Content)
	assert.Equal(t, "a\nB\n", f.Read(t, "dir/new.txt"))
	assert.Contains(t, res.Diff, "--- a/dir/new.txt\n+++ b/dir/new.txt\n")
	assert.Contains(t, res.Diff, "-b\n+B\n")

	res = f.run(t, "edit_file", `{"path":"dir/new.txt","old":"zzz","new":"B"}`)
	assert.True(t, res.IsError)
	assert.Contains(t, res.Content, "not found")
	f.Write(t, "twice.txt", "x x")
	res = f.run(t, "edit_file", `{"path":"twice.txt","old":"x","new":"y"}`)
	assert.True(t, res.IsError)
	assert.Contains(t, res.Content, "occurs 2 times")
	assert.Equal(t, "x x", f.Read(t, "twice.txt"))

	call, err := WriteFile{}.Check(context.Background(), f.env, json.RawMessage(`{"path":".git/hooks/pre-commit","content":"x"}`))
	require.NoError(t, err)
	assert.True(t, call.GitMeta, ".git writes are marked")
	call, err = WriteFile{}.Check(context.Background(), f.env, json.RawMessage(`{"path":"src/a.go","content":"x"}`))
	require.NoError(t, err)
	assert.False(t, call.GitMeta)
	assert.Equal(t, "write_file src/a.go (0 lines)", call.Summary)
}

// TestEditRecomputedAtUse: the edit is applied to the file as it is when it runs (R19: the diff
// shown in the approval is recomputed, or the edit refused if the span changed).
func TestEditRecomputedAtUse(t *testing.T) {
	f := newFixture(t)
	f.Write(t, "a.txt", "keep\nold\n")
	in := json.RawMessage(`{"path":"a.txt","old":"old","new":"new"}`)
	call, err := EditFile{}.Check(context.Background(), f.env, in)
	require.NoError(t, err)
	assert.Contains(t, call.Diff, "-old\n+new\n")
	f.Write(t, "a.txt", "changed meanwhile\n")
	res, err := EditFile{}.Run(context.Background(), f.env, in)
	require.NoError(t, err)
	assert.True(t, res.IsError)
	assert.Equal(t, "changed meanwhile\n", f.Read(t, "a.txt"))
}

// everyFileTool are calls of each file tool on a path (the placeholder P).
var everyFileTool = []struct{ tool, args string }{
	{"read_file", `{"path":"P"}`},
	{"list_dir", `{"path":"P"}`},
	{"glob", `{"pattern":"**","path":"P"}`},
	{"grep", `{"pattern":"o","path":"P"}`},
	{"write_file", `{"path":"P","content":"OWNED"}`},
	{"edit_file", `{"path":"P","old":"original","new":"OWNED"}`},
}

// TestEveryFileToolRefusesOutside: ../, an absolute path outside the roots and a link pointing out,
// for every file tool: refused with a readable error, nothing read or written outside.
func TestEveryFileToolRefusesOutside(t *testing.T) {
	f := newFixture(t)
	f.Link(t, "../out/victim.txt", "file-link")
	f.Link(t, f.out, "dir-link")
	for _, p := range []string{"../out/victim.txt", "../out", filepath.Join(f.out, "victim.txt"), f.out, "file-link", "dir-link", "dir-link/victim.txt", "sub/../../out/victim.txt"} {
		for _, c := range everyFileTool {
			args := strings.ReplaceAll(c.args, "P", strings.ReplaceAll(p, `\`, `\\`))
			res := f.run(t, c.tool, args)
			assert.True(t, res.IsError, "%s %s: %s", c.tool, p, res.Content)
			assert.Contains(t, res.Content, "outside the workspace", "%s %s", c.tool, p)
			assert.NotContains(t, res.Content, "original", "%s %s", c.tool, p)
		}
	}
	f.OutsideUntouched(t)
}

// TestEveryFileToolSymlinkSwappedIn: a folder checked when the call is made (Check, i.e. when the
// approval is shown) is swapped for a link to the outside before the call runs: every file tool
// refuses at use.
func TestEveryFileToolSymlinkSwappedIn(t *testing.T) {
	for _, c := range everyFileTool {
		t.Run(c.tool, func(t *testing.T) {
			f := newFixture(t)
			f.Write(t, "sub/victim.txt", "inside original")
			args := json.RawMessage(strings.ReplaceAll(c.args, "P", "sub/victim.txt"))
			if c.tool == "list_dir" || c.tool == "glob" {
				args = json.RawMessage(strings.ReplaceAll(c.args, "P", "sub"))
			}
			tool, _ := All().Get(c.tool)
			_, err := tool.Check(context.Background(), f.env, args)
			require.NoError(t, err)
			require.NoError(t, os.RemoveAll(filepath.Join(f.ws, "sub")))
			f.Link(t, f.out, "sub")
			res, err := tool.Run(context.Background(), f.env, args)
			require.NoError(t, err)
			assert.True(t, res.IsError, res.Content)
			assert.Contains(t, res.Content, "outside the workspace")
			assert.NotContains(t, res.Content, "original")
			f.OutsideUntouched(t)
		})
	}
}

// TestRuntimeCase_R16_WritesThroughSymlinks: links at the last component, dangling links and
// directory links that lead out are refused; a link that stays inside works; a root that is
// itself a link works.
func TestRuntimeCase_R16_WritesThroughSymlinks(t *testing.T) {
	f := newFixture(t)
	require.NoError(t, os.MkdirAll(filepath.Join(f.ws, "real-docs"), 0o755))
	f.Link(t, "../out/victim.txt", "notes.md")
	f.Link(t, filepath.Join(f.out, "new.txt"), "draft.txt")
	f.Link(t, f.out, "outbox")
	f.Link(t, filepath.Join(f.ws, "real-docs"), "docs")
	for _, c := range []struct{ tool, args string }{
		{"write_file", `{"path":"notes.md","content":"OWNED"}`},
		{"edit_file", `{"path":"notes.md","old":"original","new":"OWNED"}`},
		{"write_file", `{"path":"draft.txt","content":"x"}`},
		{"write_file", `{"path":"outbox/escaped.txt","content":"x"}`},
		{"write_file", `{"path":"outbox/../../etc/x","content":"x"}`},
		{"read_file", `{"path":"notes.md"}`},
	} {
		res := f.run(t, c.tool, c.args)
		assert.True(t, res.IsError, c.args)
		assert.Contains(t, res.Content, "outside the workspace", c.args)
		assert.NotContains(t, res.Content, "original")
	}
	f.OutsideUntouched(t)
	assert.NoFileExists(t, filepath.Join(f.out, "new.txt"))

	res := f.run(t, "write_file", `{"path":"docs/a.md","content":"ok"}`)
	require.False(t, res.IsError, res.Content)
	assert.Equal(t, "ok", f.Read(t, "real-docs/a.md"))
	fi, err := os.Lstat(filepath.Join(f.ws, "docs"))
	require.NoError(t, err)
	assert.NotZero(t, fi.Mode()&os.ModeSymlink, "the inside link is still a link")

	// A root given as a link.
	alias := filepath.Join(f.T, "ws-alias")
	require.NoError(t, os.Symlink(f.ws, alias))
	w, err := workspace.New([]string{alias})
	require.NoError(t, err)
	defer w.Close()
	f.env = &Env{WS: w, Cwd: alias, Config: &Config{}}
	res = f.run(t, "read_file", `{"path":"real-docs/a.md"}`)
	require.False(t, res.IsError, res.Content)
	res = f.run(t, "write_file", `{"path":"b.md","content":"b"}`)
	require.False(t, res.IsError, res.Content)
	assert.Equal(t, "b", f.Read(t, "b.md"))
	f.OutsideUntouched(t)
}

// TestRuntimeCase_R17_TrailingSlash: a link followed by "/" never leads out (the os.Root fix of
// Go 1.26.5, and our own resolution), and go.mod requires that release.
func TestRuntimeCase_R17_TrailingSlash(t *testing.T) {
	f := newFixture(t)
	f.Link(t, "/etc", "etc")
	f.Link(t, filepath.Join(f.out, "victim.txt"), "secret")
	for _, c := range []struct{ tool, args string }{
		{"read_file", `{"path":"secret/"}`},
		{"list_dir", `{"path":"etc/"}`},
		{"write_file", `{"path":"secret/","content":"x"}`},
		{"grep", `{"pattern":"root","path":"etc/"}`},
		{"glob", `{"pattern":"*","path":"etc/"}`},
	} {
		res := f.run(t, c.tool, c.args)
		assert.True(t, res.IsError, c.args)
		assert.Contains(t, res.Content, "outside the workspace", c.args)
		assert.NotContains(t, res.Content, "passwd")
		assert.NotContains(t, res.Content, "original")
	}
	f.OutsideUntouched(t)

	mod, err := os.ReadFile("../../../go.mod")
	require.NoError(t, err)
	assert.Regexp(t, `(?m)^go 1\.(26\.([5-9]|\d\d)|2[7-9]|[3-9]\d)`, string(mod), "go.mod requires a Go release with the os.Root fixes")
}
