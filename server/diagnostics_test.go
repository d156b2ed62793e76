package server

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zidane-server/zidane/server/workspace/sandbox"
)

// diagEnv is a server whose one workspace root is root, with its own sandbox scratch base, and an
// admin connection. It skips when the kernel cannot run the read-only policy.
func diagEnv(t *testing.T, root string, mods ...func(*Config)) (*testEnv, *testConn) {
	t.Helper()
	e := newEnv(t, func(c *Config) {
		c.WorkspaceRoots = []string{root}
		c.Sandbox.ScratchBase = t.TempDir()
		for _, m := range mods {
			m(c)
		}
	})
	if err := e.srv.sandbox.Check(sandbox.ReadOnly); err != nil {
		t.Skipf("this kernel cannot run the read-only sandbox the diagnostics tools run under: %v", err)
	}
	e.token = e.mint("admin")
	c := e.dial()
	c.hello()
	return e, c
}

// diagCall calls method, waiting up to a minute for the answer (tools take seconds on a busy
// machine), and returns the decoded answer.
func diagCall(c *testConn, method, params string) map[string]any {
	c.t.Helper()
	id := c.nextID.Add(1) + 100000
	c.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`, id, method, params))
	for {
		f, err := c.tryNext(time.Minute * raceSlowdown)
		require.NoError(c.t, err)
		require.NotNil(c.t, f, "no answer to %s within a minute", method)
		if isSignalFrame(f) {
			continue
		}
		m := decodeObj(c.t, f)
		require.Equal(c.t, fmt.Sprint(id), fmt.Sprint(m["id"]), "%s", f)
		return m
	}
}

// diagResult calls files.diagnostics on cwd and requires a result.
func diagResult(c *testConn, cwd string) map[string]any {
	c.t.Helper()
	m := diagCall(c, "files.diagnostics", fmt.Sprintf(`{"cwd":%q}`, cwd))
	require.Nil(c.t, m["error"], "files.diagnostics failed: %v", m["error"])
	return m["result"].(map[string]any)
}

// diag is one diagnostic as the wire has it.
type diagOut struct {
	Tool, File, Severity, Message string
	Line, Column                  int
}

func diagsOf(t *testing.T, res map[string]any) []diagOut {
	t.Helper()
	b, err := json.Marshal(res["diagnostics"])
	require.NoError(t, err)
	var out []diagOut
	require.NoError(t, json.Unmarshal(b, &out))
	return out
}

// toolsOf maps each entry of res["tools"] by its name.
func toolsOf(res map[string]any) map[string]map[string]any {
	out := map[string]map[string]any{}
	for _, x := range res["tools"].([]any) {
		m := x.(map[string]any)
		out[m["name"].(string)] = m
	}
	return out
}

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
	}
}

// TestFilesDiagnosticsGoVet: files.diagnostics on a Go module with a vet finding (a
// self-assignment) names the file, line, column and tool go vet, under the read-only sandbox; a
// second call is the cached answer; editing the module (a package with a type error added) is a
// miss that reports the error; files.diagnosticsInvalidate drops the cache; a chat token is
// Forbidden; a folder outside the roots is HandlerFailed; an unknown tool is InvalidParams;
// files.diagnosticsTools answers per folder; every files.diagnostics call is audited.
func TestFilesDiagnosticsGoVet(t *testing.T) {
	root := realDir(t)
	mod := filepath.Join(root, "mod")
	writeFiles(t, mod, map[string]string{
		"go.mod": "module example.com/m\n\ngo 1.22\n",
		"lib.go": "package lib\n\nfunc F() int {\n\tx := 1\n\tx = x\n\treturn x\n}\n",
	})
	other := filepath.Join(root, "notes")
	writeFiles(t, other, map[string]string{"README.md": "no project here\n"})
	e, c := diagEnv(t, root)

	tools := diagCall(c, "files.diagnosticsTools", fmt.Sprintf(`{"cwd":%q}`, mod))
	require.Nil(t, tools["error"], "%v", tools["error"])
	byName := toolsOf(tools["result"].(map[string]any))
	require.Len(t, byName, 3)
	assert.Equal(t, true, byName["go vet"]["applies"])
	assert.Equal(t, true, byName["go vet"]["runs"], byName["go vet"]["reason"])
	assert.Contains(t, byName["go vet"]["command"], "vet ./...")
	assert.Equal(t, false, byName["tsc"]["applies"])
	assert.Equal(t, false, byName["tsc"]["runs"])
	assert.Contains(t, byName["tsc"]["reason"], "tsconfig.json")
	assert.Equal(t, false, byName["eslint"]["applies"])
	// Per folder: a folder without go.mod has go vet not applying.
	tools = diagCall(c, "files.diagnosticsTools", fmt.Sprintf(`{"cwd":%q}`, other))
	assert.Equal(t, false, toolsOf(tools["result"].(map[string]any))["go vet"]["applies"])

	res := diagResult(c, mod)
	assert.Equal(t, false, res["cached"])
	run := toolsOf(res)["go vet"]
	require.Equal(t, true, run["ran"], "%v", run)
	require.Equal(t, true, run["ok"], "%v", run)
	ds := diagsOf(t, res)
	require.Len(t, ds, 1, "%v", ds)
	assert.Equal(t, diagOut{Tool: "go vet", File: "lib.go", Line: 5, Column: 2, Severity: "warning", Message: ds[0].Message}, ds[0])
	assert.Contains(t, ds[0].Message, "self-assignment of x")
	assert.Equal(t, false, toolsOf(res)["tsc"]["ran"])
	checkedAt := res["checkedAt"]

	again := diagResult(c, mod)
	assert.Equal(t, true, again["cached"], "the files have not moved")
	assert.Equal(t, checkedAt, again["checkedAt"])
	assert.Equal(t, ds, diagsOf(t, again))

	// The files move: a new package with a type error.
	writeFiles(t, mod, map[string]string{"sub/t.go": "package sub\n\nfunc G() int { return \"s\" }\n"})
	res = diagResult(c, mod)
	assert.Equal(t, false, res["cached"], "a new file is a miss")
	ds = diagsOf(t, res)
	require.Len(t, ds, 2, "%v", ds)
	var typeErr *diagOut
	for i := range ds {
		if ds[i].File == "sub/t.go" {
			typeErr = &ds[i]
		}
	}
	require.NotNil(t, typeErr, "%v", ds)
	assert.Equal(t, "error", typeErr.Severity)
	assert.Equal(t, 3, typeErr.Line)
	assert.Equal(t, 23, typeErr.Column)
	assert.Contains(t, typeErr.Message, "cannot use")
	assert.Equal(t, true, diagResult(c, mod)["cached"])

	// An edit of a file's content (same size, later mtime) is a miss too.
	lib := filepath.Join(mod, "lib.go")
	require.NoError(t, os.WriteFile(lib, []byte("package lib\n\nfunc F() int {\n\tx := 2\n\tx = x\n\treturn x\n}\n"), 0o644))
	later := time.Now().Add(time.Minute)
	require.NoError(t, os.Chtimes(lib, later, later))
	assert.Equal(t, false, diagResult(c, mod)["cached"])

	// Invalidate drops the cache, once.
	inv := diagCall(c, "files.diagnosticsInvalidate", fmt.Sprintf(`{"cwd":%q}`, mod))
	require.Nil(t, inv["error"], "%v", inv["error"])
	assert.Equal(t, true, inv["result"].(map[string]any)["dropped"])
	inv = diagCall(c, "files.diagnosticsInvalidate", fmt.Sprintf(`{"cwd":%q}`, mod))
	assert.Equal(t, false, inv["result"].(map[string]any)["dropped"])
	assert.Equal(t, false, diagResult(c, mod)["cached"], "invalidated")

	// A tools filter answers only those tools; an unknown name is refused.
	only := diagCall(c, "files.diagnostics", fmt.Sprintf(`{"cwd":%q,"tools":["tsc"]}`, mod))
	require.Nil(t, only["error"], "%v", only["error"])
	ot := toolsOf(only["result"].(map[string]any))
	require.Len(t, ot, 1)
	assert.Equal(t, false, ot["tsc"]["ran"])
	assert.Contains(t, ot["tsc"]["note"], "tsconfig.json")
	assert.Empty(t, only["result"].(map[string]any)["diagnostics"])
	bad := diagCall(c, "files.diagnostics", fmt.Sprintf(`{"cwd":%q,"tools":["go vet","rm -rf"]}`, mod))
	assert.Equal(t, -32602, errCode(bad), "%v", bad)
	assert.Contains(t, errMsg(bad), "params/tools/1")

	// Outside the roots: HandlerFailed, for each method.
	outside := realDir(t)
	writeFiles(t, outside, map[string]string{"go.mod": "module x\n"})
	for _, m := range []string{"files.diagnostics", "files.diagnosticsInvalidate", "files.diagnosticsTools"} {
		a := diagCall(c, m, fmt.Sprintf(`{"cwd":%q}`, outside))
		assert.Equal(t, -32014, errCode(a), "%s: %v", m, a)
		assert.Contains(t, errMsg(a), "outside the workspace roots", m)
	}

	// A chat token may call none of them.
	e.token = e.mint("chat")
	chat := e.dial()
	chat.hello()
	for _, m := range []string{"files.diagnostics", "files.diagnosticsInvalidate", "files.diagnosticsTools"} {
		a := diagCall(chat, m, fmt.Sprintf(`{"cwd":%q}`, mod))
		assert.Equal(t, -32013, errCode(a), "%s: %v", m, a)
	}

	// Every files.diagnostics call is in the audit log with its folder and outcome, refused ones too.
	calls := strings.Join(auditDetails(t, c, "call"), "\n")
	assert.Contains(t, calls, fmt.Sprintf(`files.diagnostics cwd=%q → ok`, mod))
	assert.Contains(t, calls, fmt.Sprintf(`files.diagnostics cwd=%q → error -32013`, mod))
	assert.Contains(t, calls, fmt.Sprintf(`files.diagnostics cwd=%q → error -32014`, outside))
}

// linkTree makes dst a copy of the tree src, hard-linking files (copying when links fail).
func linkTree(t *testing.T, src, dst string) {
	t.Helper()
	require.NoError(t, filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		to := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(to, 0o755)
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(target, to)
		}
		if os.Link(p, to) == nil {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		fi, _ := d.Info()
		return os.WriteFile(to, b, fi.Mode().Perm())
	}))
}

// TestFilesDiagnosticsTypeScript: files.diagnostics on a TypeScript project with a type error runs
// the project's own tsc (node_modules/.bin/tsc) under the read-only sandbox and names the file,
// line, column, severity and TS code; a second call is cached, fixing the error is a miss with no
// diagnostics. Variant: a project whose node_modules/.bin/tsc is a script that tries to write the
// folder and to read a hidden file cannot do either (the sandbox holds; nothing of the folder
// loosens it).
func TestFilesDiagnosticsTypeScript(t *testing.T) {
	tsPkg, err := filepath.Abs(filepath.Join("..", "sdk-ts", "node_modules", "typescript"))
	require.NoError(t, err)
	if _, err := os.Stat(filepath.Join(tsPkg, "bin", "tsc")); err != nil {
		t.Skipf("tsc is absent (%v): run scripts/bootstrap.sh --ts to install sdk-ts's TypeScript", err)
	}
	root := realDir(t)
	proj := filepath.Join(root, "web")
	writeFiles(t, proj, map[string]string{
		"tsconfig.json": `{"compilerOptions":{"strict":true,"noEmit":true,"target":"es2020","lib":["es2020"],"types":[]},"include":["src"]}`,
		"src/a.ts":      "const n: number = \"s\";\nexport { n };\n",
	})
	linkTree(t, tsPkg, filepath.Join(proj, "node_modules", "typescript"))
	require.NoError(t, os.MkdirAll(filepath.Join(proj, "node_modules", ".bin"), 0o755))
	require.NoError(t, os.Symlink("../typescript/bin/tsc", filepath.Join(proj, "node_modules", ".bin", "tsc")))

	// A project whose "tsc" is its own script.
	evil := filepath.Join(root, "evil")
	secret := filepath.Join(realDir(t), "secret")
	require.NoError(t, os.WriteFile(secret, []byte("s3cret"), 0o600))
	writeFiles(t, evil, map[string]string{
		"tsconfig.json": "{}",
		"node_modules/.bin/tsc": "#!/bin/sh\n" +
			"if echo x > written 2>/dev/null; then echo 'a.ts(1,1): error TS1: wrote the folder'; fi\n" +
			"if cat " + secret + " 2>/dev/null; then echo 'a.ts(2,1): error TS2: read outside the roots'; fi\n" +
			"echo 'a.ts(3,1): error TS3: ran'\nexit 2\n",
	})
	require.NoError(t, os.Chmod(filepath.Join(evil, "node_modules", ".bin", "tsc"), 0o755))

	_, c := diagEnv(t, root)
	tools := diagCall(c, "files.diagnosticsTools", fmt.Sprintf(`{"cwd":%q}`, proj))
	require.Nil(t, tools["error"], "%v", tools["error"])
	tsc := toolsOf(tools["result"].(map[string]any))["tsc"]
	assert.Equal(t, true, tsc["applies"])
	assert.Equal(t, true, tsc["available"])
	assert.Equal(t, true, tsc["runs"], tsc["reason"])
	assert.Contains(t, tsc["reason"], "node_modules/.bin/tsc")

	res := diagResult(c, proj)
	run := toolsOf(res)["tsc"]
	require.Equal(t, true, run["ok"], "%v", run)
	ds := diagsOf(t, res)
	require.Len(t, ds, 1, "%v", ds)
	assert.Equal(t, diagOut{Tool: "tsc", File: "src/a.ts", Line: 1, Column: 7, Severity: "error", Message: ds[0].Message}, ds[0])
	assert.True(t, strings.HasPrefix(ds[0].Message, "TS2322: "), ds[0].Message)
	assert.Equal(t, false, res["cached"])
	assert.Equal(t, true, diagResult(c, proj)["cached"])

	writeFiles(t, proj, map[string]string{"src/a.ts": "const n: number = 1;\nexport { n };\n"})
	res = diagResult(c, proj)
	assert.Equal(t, false, res["cached"])
	assert.Empty(t, diagsOf(t, res))
	assert.Equal(t, true, toolsOf(res)["tsc"]["ok"])

	res = diagResult(c, evil)
	ds = diagsOf(t, res)
	require.Len(t, ds, 1, "only the harmless line: %v", ds)
	assert.Equal(t, "TS3: ran", ds[0].Message)
	assert.NoFileExists(t, filepath.Join(evil, "written"), "the roots are read-only to diagnostics tools")
}

// TestFilesDiagnosticsPastRequestTimeout: a run longer than the request's time limit answers
// HandlerFailed saying the tools still run; the run goes on, and a later call answers its
// diagnostics without starting the tool again.
func TestFilesDiagnosticsPastRequestTimeout(t *testing.T) {
	root := realDir(t)
	writeFiles(t, root, map[string]string{
		"slow/tsconfig.json":         "{}",
		"slow/node_modules/.bin/tsc": "#!/bin/sh\necho run >> \"$TMPDIR/count\"\nsleep 1\necho 'a.ts(1,1): error TS1: slow'\nexit 2\n",
	})
	require.NoError(t, os.Chmod(filepath.Join(root, "slow", "node_modules", ".bin", "tsc"), 0o755))
	e, c := diagEnv(t, root, func(c *Config) { c.Limits.RequestTimeout = 500 * time.Millisecond })
	cwd := fmt.Sprintf(`{"cwd":%q}`, filepath.Join(root, "slow"))
	first := diagCall(c, "files.diagnostics", cwd)
	require.Equal(t, -32014, errCode(first), "%v", first)
	assert.Contains(t, errMsg(first), "still running")
	var res map[string]any
	for i := 0; i < 20 && res == nil; i++ { // each call waits up to its 500 ms for the one run
		m := diagCall(c, "files.diagnostics", cwd)
		if m["error"] == nil {
			res = m["result"].(map[string]any)
		} else {
			require.Contains(t, errMsg(m), "still running")
		}
	}
	require.NotNil(t, res, "the run never answered")
	ds := diagsOf(t, res)
	require.Len(t, ds, 1, "%v", ds)
	assert.Equal(t, "TS1: slow", ds[0].Message)
	// The tool ran once, writing only its own scratch folder.
	b, err := os.ReadFile(filepath.Join(e.srv.cfg.Sandbox.ScratchBase, diagnosticsScratch(filepath.Join(root, "slow")), "tmp", "count"))
	require.NoError(t, err)
	assert.Equal(t, "run\n", string(b))
}
