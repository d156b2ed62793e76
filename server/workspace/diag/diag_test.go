package diag

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zidane-server/zidane/server/workspace"
)

func TestParseGoVet(t *testing.T) {
	out := "# example.com/m/sub\n" +
		"vet: ./sub/t.go:3:23: cannot use \"s\" (untyped string constant) as int value in return statement\n" +
		"lib.go:5:2: self-assignment of x\n" +
		"/w/mod/x.go:7:14: fmt.Printf format %d has arg x of wrong type string\n" +
		"\tmore detail\n" +
		"main.go:3:8: no required module provides package example.com/y; to add it:\n" +
		"go: warning: ignoring\n"
	ds := parseGoVet("/w/mod", nil, []byte(out))
	require.Len(t, ds, 4)
	assert.Equal(t, Diagnostic{File: "sub/t.go", Line: 3, Column: 23, Severity: Error, Message: `cannot use "s" (untyped string constant) as int value in return statement`}, ds[0])
	assert.Equal(t, Diagnostic{File: "lib.go", Line: 5, Column: 2, Severity: Warning, Message: "self-assignment of x"}, ds[1])
	assert.Equal(t, "x.go", ds[2].File)
	assert.Equal(t, "fmt.Printf format %d has arg x of wrong type string\nmore detail", ds[2].Message)
	assert.Equal(t, Error, ds[3].Severity)
}

func TestParseTsc(t *testing.T) {
	out := "src/a.ts(1,7): error TS2322: Type 'string' is not assignable to type 'number'.\n" +
		"src/b.ts(10,3): error TS2345: Argument of type 'x' is not assignable.\n" +
		"  Type 'x' is missing.\n" +
		"error TS5058: The specified path does not exist: 'tsconfig.json'.\n"
	ds := parseTsc("/w", []byte(out), nil)
	require.Len(t, ds, 3)
	assert.Equal(t, Diagnostic{File: "src/a.ts", Line: 1, Column: 7, Severity: Error, Message: "TS2322: Type 'string' is not assignable to type 'number'."}, ds[0])
	assert.Equal(t, "TS2345: Argument of type 'x' is not assignable.\nType 'x' is missing.", ds[1].Message)
	assert.Equal(t, Diagnostic{Severity: Error, Message: "TS5058: The specified path does not exist: 'tsconfig.json'."}, ds[2])
}

func TestParseESLint(t *testing.T) {
	out := `[{"filePath":"/w/src/a.js","messages":[{"ruleId":"no-unused-vars","severity":2,"message":"'x' is assigned a value but never used.","line":1,"column":7},` +
		`{"ruleId":null,"severity":1,"message":"File ignored","line":0,"column":0}]},{"filePath":"/w/b.js","messages":[]}]`
	ds := parseESLint("/w", []byte(out), nil)
	require.Len(t, ds, 2)
	assert.Equal(t, Diagnostic{File: "src/a.js", Line: 1, Column: 7, Severity: Error, Message: "'x' is assigned a value but never used. (no-unused-vars)"}, ds[0])
	assert.Equal(t, Diagnostic{File: "src/a.js", Severity: Warning, Message: "File ignored"}, ds[1])
	assert.Empty(t, parseESLint("/w", []byte("Oops! Something went wrong"), nil))
}

// fakeProject is a folder with tsconfig.json whose node_modules/.bin/tsc is script.
func fakeProject(t *testing.T, script string) (*workspace.Workspace, string) {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(filepath.Join(root, "node_modules", ".bin"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, "tsconfig.json"), []byte("{}"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(root, "node_modules", ".bin", "tsc"), []byte("#!/bin/sh\n"+script), 0o755))
	ws, err := workspace.New([]string{root})
	require.NoError(t, err)
	t.Cleanup(func() { ws.Close() })
	return ws, root
}

// unsandboxed is a Prepare for the runner's own tests (the server's test runs the real sandbox).
func unsandboxed(*exec.Cmd, string) error { return nil }

// TestRunSharesAFolderRun: calls for a folder being checked wait for that one run and take its
// answer (the tool runs once); a call whose context ends stops waiting, the run goes on.
func TestRunSharesAFolderRun(t *testing.T) {
	count := filepath.Join(t.TempDir(), "count")
	ws, root := fakeProject(t, "echo run >> "+count+"\nsleep 1\necho 'a.ts(1,1): error TS1: x'\nexit 2\n")
	r, err := New(ws, Options{Prepare: unsandboxed})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	_, err = r.Run(ctx, root, []string{Tsc})
	cancel()
	require.ErrorIs(t, err, context.DeadlineExceeded)
	var wg sync.WaitGroup
	reps := make([]*Report, 3)
	for i := range reps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rep, err := r.Run(context.Background(), root, []string{Tsc})
			assert.NoError(t, err)
			reps[i] = rep
		}()
	}
	wg.Wait()
	b, err := os.ReadFile(count)
	require.NoError(t, err)
	assert.Equal(t, "run\n", string(b), "one run for every caller")
	for _, rep := range reps {
		require.Len(t, rep.Diagnostics, 1)
		assert.Equal(t, "TS1: x", rep.Diagnostics[0].Message)
		assert.True(t, rep.Cached)
	}
}

// TestRunBounds: a tool past its timeout is killed (with what it started) and reported not ok,
// and not cached; output past the cap is cut and said so; diagnostics past the bound are counted.
func TestRunBounds(t *testing.T) {
	ws, root := fakeProject(t, "sleep 30 &\nsleep 30\n")
	r, err := New(ws, Options{Prepare: unsandboxed, Timeout: 300 * time.Millisecond})
	require.NoError(t, err)
	start := time.Now()
	rep, err := r.Run(context.Background(), root, []string{Tsc})
	require.NoError(t, err)
	assert.Less(t, time.Since(start), 10*time.Second, "the process group was killed")
	require.Len(t, rep.Tools, 1)
	assert.True(t, rep.Tools[0].Ran)
	assert.False(t, rep.Tools[0].OK)
	assert.Contains(t, rep.Tools[0].Note, "killed")
	assert.False(t, r.Invalidate(root), "a timed-out run is not cached")

	ws, root = fakeProject(t, "i=0; while [ $i -lt 50 ]; do echo \"a.ts($((i+1)),1): error TS1: $(printf '%0100d' 0)\"; i=$((i+1)); done\n")
	r, err = New(ws, Options{Prepare: unsandboxed, OutputMax: 2000, MaxDiagnostics: 5})
	require.NoError(t, err)
	rep, err = r.Run(context.Background(), root, nil)
	require.NoError(t, err)
	assert.Len(t, rep.Diagnostics, 5)
	require.Len(t, rep.Tools, 3)
	note := rep.Tools[1].Note
	assert.True(t, strings.Contains(note, "the first 5 are listed") && strings.Contains(note, "was cut"), note)
	assert.Contains(t, rep.Tools[0].Note, "no go.mod")
}
