package server

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zidane-server/zidane/server/workspace/workspacetest"
)

// TestFieldCase_T02_SafelistCoversOnlyListedOptions: over a real server, `always` on a harmless
// clone, push, fetch, tar, rsync and go build stores its entry, and the second command of each
// pair of case T02 (an abbreviation, a short form or an option that runs a program) asks (denied
// here), as do the variants: another abbreviation, an attached short value, an option of a
// subcommand without a table. `always` on a call holding an option its entry would not cover, and
// on sh -c, python3, env, xargs and make, stores nothing and says why (the answer's note). No PWNED file appears.
func TestFieldCase_T02_SafelistCoversOnlyListedOptions(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	L := newT02Layout(t)
	ws := L.WS
	type step struct{ cmd, decision, stores, note string }
	steps := []step{
		{"git clone . " + ws + "/c1", "always", "git clone", ""},
		{`git clone -u "touch ` + ws + `/PWNED-clone; git-upload-pack" . ` + ws + "/c2", "deny", "", ""},
		{`git clone --upl "touch ` + ws + `/PWNED-clone2; git-upload-pack" . ` + ws + "/c3", "deny", "", ""},
		{`git clone "-utouch ` + ws + `/PWNED-clone3; git-upload-pack" . ` + ws + "/c4", "deny", "", ""},
		{"git push . HEAD:refs/heads/x", "always", "git push", ""},
		{`git push --exe="touch ` + ws + `/PWNED-push; git-receive-pack" . HEAD:refs/heads/y`, "deny", "", ""},
		{"git fetch --dry-run .", "always", "git fetch", ""},
		{`git fetch --dry-run --upload-pa="touch ` + ws + `/PWNED-fetch; git-upload-pack" .`, "deny", "", ""},
		{"tar -cf t.tar main.go", "always", "tar", ""},
		{`tar -cf t2.tar --checkpoint=1 --checkpoint-act="exec=touch ` + ws + `/PWNED-tar" main.go`, "deny", "", ""},
		{`tar -cf t3.tar "-Ish -c 'touch ` + ws + `/PWNED-tar2'" main.go`, "deny", "", ""},
		{"rsync -a main.go copy.go", "always", "rsync", ""},
		{`rsync -e "sh -c 'touch ` + ws + `/PWNED-rsync'" main.go h:x`, "deny", "", ""},
		{"go build -o " + ws + "/gomod/out .", "always", "go build", ""},
		{"go build -o " + ws + "/gomod/out2 -toolexec=" + ws + "/evil.sh .", "deny", "", ""},
		{"git ls-remote .", "always", "git ls-remote", ""},
		{`git ls-remote --upload-pack="touch ` + ws + `/PWNED-lsremote; git-upload-pack" .`, "deny", "", ""},
		{"git clone --template=" + ws + "/none . " + ws + "/c5", "always", "", "--template"},
		{`sh -c "true"`, "always", "", "runs whatever code"},
		{`python3 -c "print(1)"`, "always", "", "runs whatever code"},
		{"env FOO=1 true", "always", "", "runs whatever code"},
		{"xargs echo", "always", "", "runs whatever code"},
		{"make --version", "always", "", "runs whatever code"},
	}
	var turns [][]string
	for _, s := range steps {
		turns = append(turns, []string{toolStep("exec", execArgs(s.cmd))})
	}
	turns = append(turns, []string{textStep("done")})
	e := newAgentEnv(t, script(t, turns...), func(c *Config) { c.WorkspaceRoots = []string{ws} })
	c := e.dial()
	c.hello()
	sid := c.result("sessions.create", fmt.Sprintf(`{"cwd":%q}`, filepath.Join(ws, "repo1")))["id"].(string)
	c.prompt(sid, "go")
	for _, s := range steps {
		req := c.approval(sid)
		require.Equal(t, s.cmd, req["input"].(map[string]any)["command"], "the command before it ran without asking")
		r := c.answer(sid, req, s.decision)
		switch {
		case s.stores != "":
			require.NotNil(t, r["stored"], s.cmd)
			assert.Equal(t, s.stores, r["stored"].(map[string]any)["prefix"], s.cmd)
		case s.decision == "always":
			assert.Nil(t, r["stored"], "always on %q stores nothing", s.cmd)
			assert.Contains(t, r["note"], "Nothing was stored", s.cmd)
			assert.Contains(t, r["note"], s.note, s.cmd)
		}
	}
	require.Equal(t, true, c.runEnd(sid)["ok"])
	var stored []string
	for _, x := range c.result("safelist.list", `{}`)["entries"].([]any) {
		stored = append(stored, x.(map[string]any)["prefix"].(string))
	}
	assert.ElementsMatch(t, []string{"git clone", "git push", "git fetch", "tar", "rsync", "go build", "git ls-remote"}, stored)
	des, err := os.ReadDir(ws)
	require.NoError(t, err)
	for _, d := range des {
		assert.False(t, strings.HasPrefix(d.Name(), "PWNED"), "%s was created", d.Name())
	}
	// The stored commands ran (the environment is real).
	for _, p := range []string{"c1/main.go", "repo1/t.tar", "repo1/copy.go", "gomod/out"} {
		assert.True(t, L.Exists(p), p)
	}
	L.OutsideUntouched(t)
}

// newT02Layout is case T02's workspace: $WS/repo1, a git repository with one commit that is also a
// Go module (main.go, a package without imports), $WS/gomod for build outputs, and $WS/evil.sh, which would leave
// PWNED-script if it ran.
func newT02Layout(t *testing.T) *workspacetest.Layout {
	t.Helper()
	L := workspacetest.New(t)
	L.Write(t, "repo1/go.mod", "module example.com/t02\n\ngo 1.21\n")
	// A package without imports builds in well under a second even with a cold cache (a main
	// package would compile the runtime first).
	L.Write(t, "repo1/main.go", "package t02\n")
	L.Write(t, "gomod/.keep", "")
	L.Write(t, "evil.sh", "#!/bin/sh\ntouch "+L.WS+"/PWNED-script\nexec \"$@\"\n")
	require.NoError(t, os.Chmod(filepath.Join(L.WS, "evil.sh"), 0o755))
	repo := filepath.Join(L.WS, "repo1")
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"add", "."},
		{"-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "init"}} {
		out, err := exec.Command("git", append([]string{"-C", repo}, args...)...).CombinedOutput()
		require.NoError(t, err, string(out))
	}
	return L
}
