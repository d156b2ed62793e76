package sandbox

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestFieldCase_T05_OnlyStdioReachesTheCommand: descriptors the launching process holds without
// close-on-exec (a secret opened for reading, a log outside the roots opened for appending) do
// not reach the command: it has 0, 1 and 2 only, reads nothing through the first and writes
// nothing through the second.
func TestFieldCase_T05_OnlyStdioReachesTheCommand(t *testing.T) {
	f := newFixture(t, Options{})
	needSandbox(t, f)
	secret := filepath.Join(f.outside, "key.txt")
	require.NoError(t, os.WriteFile(secret, []byte("TOPSECRET"), 0o600))
	logf := filepath.Join(f.outside, "outside.log")
	require.NoError(t, os.WriteFile(logf, nil, 0o644))
	// syscall.Open, unlike os.Open, leaves close-on-exec off: as a shell's `exec 9<file` does.
	rd, err := syscall.Open(secret, syscall.O_RDONLY, 0)
	require.NoError(t, err)
	defer syscall.Close(rd)
	wr, err := syscall.Open(logf, syscall.O_WRONLY|syscall.O_APPEND, 0)
	require.NoError(t, err)
	defer syscall.Close(wr)

	out, _ := f.run(t, WorkspaceWrite, fmt.Sprintf(`echo FDS; ls /proc/$$/fd; echo "via fd: $(cat <&%d)"; echo WRITTEN-FROM-SANDBOX >&%d; echo end`, rd, wr))
	assert.Contains(t, out, "FDS\n0\n1\n2\n", out)
	assert.NotContains(t, out, "FDS\n0\n1\n2\n3")
	assert.NotContains(t, out, "TOPSECRET")
	assert.Contains(t, out, "end")
	b, err := os.ReadFile(logf)
	require.NoError(t, err)
	assert.Empty(t, string(b))
	// Under read-only too.
	out, _ = f.run(t, ReadOnly, `echo FDS; ls /proc/$$/fd; echo END`)
	assert.Equal(t, "FDS\n0\n1\n2\nEND\n", out)
}

// serveUnix answers "reached-<name>" to every connection on a unix socket bound at path
// (relative paths bind in the test's folder).
func serveUnix(t *testing.T, path, name string) {
	t.Helper()
	ln, err := net.Listen("unix", path)
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = c.Read(make([]byte, 4096))
			_, _ = c.Write([]byte("HTTP/1.0 200 OK\r\n\r\nreached-" + name + "\n"))
			c.Close()
		}
	}()
}

// connectScript tries each socket and says "reached-<name>" or "unreachable-<name>".
func connectScript(socks map[string]string) string {
	var b strings.Builder
	for name, p := range socks {
		fmt.Fprintf(&b, "curl -s --max-time 2 --unix-socket %q http://x/ || echo unreachable-%s\n", p, name)
	}
	return b.String()
}

// TestFieldCase_T04_HostSocketsOutOfView: host unix sockets outside the roots are not in a
// sandboxed command's view, however they are named (a path with a space, a relative bind that
// /proc/net/unix shows without its folder) and whenever they were bound (one bound while the
// command runs); a socket inside the roots stays reachable (the roots are the command's).
func TestFieldCase_T04_HostSocketsOutOfView(t *testing.T) {
	f := newFixture(t, Options{})
	needSandbox(t, f)
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("no curl")
	}
	space := filepath.Join(f.outside, "sp ace", "s.sock")
	abs := filepath.Join(f.outside, "abs", "a.sock")
	relDir := filepath.Join(f.outside, "rel")
	for _, d := range []string{filepath.Dir(space), filepath.Dir(abs), relDir} {
		require.NoError(t, os.MkdirAll(d, 0o755))
	}
	serveUnix(t, space, "space")
	serveUnix(t, abs, "abs")
	wd, err := os.Getwd()
	require.NoError(t, err)
	t.Chdir(relDir)
	serveUnix(t, "r.sock", "rel")
	require.NoError(t, os.Chdir(wd))
	serveUnix(t, filepath.Join(f.ws, "in.sock"), "in")
	outsideSocks := map[string]string{"space": space, "abs": abs, "rel": filepath.Join(relDir, "r.sock")}
	// Reachable unsandboxed, so the test can fail.
	raw, _ := exec.Command("bash", "-c", connectScript(outsideSocks)).CombinedOutput()
	for name := range outsideSocks {
		require.Contains(t, string(raw), "reached-"+name)
	}

	for _, p := range []Policy{WorkspaceWrite, WorkspaceWriteNetwork, ReadOnly} {
		out, _ := f.run(t, p, connectScript(outsideSocks)+connectScript(map[string]string{"in": "in.sock"}))
		for name := range outsideSocks {
			assert.Contains(t, out, "unreachable-"+name, "%s: %s", p, out)
			assert.NotContains(t, out, "reached-"+name+"\n", "%s: %s", p, out)
		}
		assert.Contains(t, out, "reached-in", "%s: a socket in the roots is the command's: %s", p, out)
	}

	// A socket bound while the command runs: the command waits on a FIFO in the workspace until
	// the test has bound it.
	late := filepath.Join(f.outside, "late", "l.sock")
	require.NoError(t, os.MkdirAll(filepath.Dir(late), 0o755))
	require.NoError(t, syscall.Mkfifo(filepath.Join(f.ws, "go.fifo"), 0o600))
	cmd := f.command(t, WorkspaceWrite, "echo started; read x < go.fifo; "+connectScript(map[string]string{"late": late}))
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = cmd.Stdout
	require.NoError(t, cmd.Start())
	rd := bufio.NewReader(stdout)
	line, err := rd.ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "started\n", line)
	serveUnix(t, late, "late")
	fifo, err := os.OpenFile(filepath.Join(f.ws, "go.fifo"), os.O_WRONLY, 0)
	require.NoError(t, err)
	_, _ = fifo.WriteString("go\n")
	fifo.Close()
	rest, _ := io.ReadAll(rd)
	_ = cmd.Wait()
	assert.Contains(t, string(rest), "unreachable-late", string(rest))
	assert.NotContains(t, string(rest), "reached-late\n")
}

// TestFieldCase_T06_FreshHomePerCommand: what one command writes in its HOME (a .gitconfig whose
// core.fsmonitor runs a workspace script, git's XDG config, an .npmrc), or in the HOME folder of
// the scratch directory, is not read by the next command: its HOME is empty and git status runs
// no hook.
func TestFieldCase_T06_FreshHomePerCommand(t *testing.T) {
	f := newFixture(t, Options{})
	needSandbox(t, f)
	git := func(args ...string) {
		c := exec.Command("git", args...)
		c.Dir = f.ws
		c.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null")
		out, err := c.CombinedOutput()
		require.NoError(t, err, "%s", out)
	}
	git("init", "-q")
	require.NoError(t, os.WriteFile(filepath.Join(f.ws, "README"), []byte("hi\n"), 0o644))
	git("add", "README")
	evil := filepath.Join(f.ws, "evil.sh")
	require.NoError(t, os.WriteFile(evil, []byte("#!/bin/sh\ntouch "+filepath.Join(f.ws, "PWNED")+"\n"), 0o755))
	cfg := fmt.Sprintf("[core]\n\tfsmonitor = %s\n[user]\n\tname = planted\n", evil)
	require.NoError(t, os.WriteFile(filepath.Join(f.ws, "evil.cfg"), []byte(cfg), 0o644))

	out, code := f.run(t, WorkspaceWrite, fmt.Sprintf(`cp evil.cfg "$HOME/.gitconfig"
mkdir -p "$HOME/.config/git" && cp evil.cfg "$HOME/.config/git/config"
echo 'registry=http://evil.invalid/' > "$HOME/.npmrc"
mkdir -p %[1]s && cp evil.cfg %[1]s/.gitconfig
echo "home=$HOME"`, filepath.Join(f.data, "sandbox", "s1", "home")))
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "home=/")

	out, _ = f.run(t, WorkspaceWrite, `git status --short; echo "name=$(git config --get user.name)"; echo "fsm=$(git config --get core.fsmonitor)"; echo "home: $(ls -A "$HOME")"; cat "$HOME/.npmrc" 2>/dev/null; echo end`)
	assert.NoFileExists(t, filepath.Join(f.ws, "PWNED"), out)
	assert.Contains(t, out, "name=\n", out)
	assert.Contains(t, out, "fsm=\n", out)
	assert.Contains(t, out, "home: \n", out)
	assert.NotContains(t, out, "evil.invalid")
	assert.Contains(t, out, "end")
}

// TestViewShowsPathFoldersAndExposedOnes: a toolchain in a PATH folder outside the system folders
// (as under a home folder) runs, with the prefix holding its bin folder; an --sandbox-expose
// folder is seen; both are read-only; a folder next to them is not in the view.
func TestViewShowsPathFoldersAndExposedOnes(t *testing.T) {
	tool, exposed, other := t.TempDir(), t.TempDir(), t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(tool, "bin"), 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(tool, "share"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(tool, "share", "msg"), []byte("tool-ok\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(tool, "bin", "mytool"), []byte("#!/bin/sh\ncat \"$(dirname \"$0\")/../share/msg\"\n"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(exposed, "set.txt"), []byte("exposed-ok\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(other, "x.txt"), []byte("other\n"), 0o644))
	single := filepath.Join(other, "one.txt") // a file exposed alone: its folder stays out
	require.NoError(t, os.WriteFile(single, []byte("file-ok\n"), 0o644))
	f := newFixture(t, Options{Expose: []string{exposed, single}})
	needSandbox(t, f)
	cmd := exec.Command("/bin/bash", "-c", fmt.Sprintf(`mytool; cat %[1]s/set.txt; cat %[2]s/x.txt; cat %[4]s; echo x >> %[4]s; touch %[1]s/w %[3]s/w; echo end`,
		exposed, other, filepath.Join(tool, "share"), single))
	cmd.Dir = f.ws
	cmd.Env = []string{"PATH=" + filepath.Join(tool, "bin") + ":/usr/bin:/bin"}
	require.NoError(t, f.sb.Wrap(cmd, Request{Policy: WorkspaceWrite, Roots: []string{f.ws}, SessionID: "s1"}))
	b, _ := cmd.CombinedOutput()
	out := string(b)
	assert.Contains(t, out, "tool-ok", out)
	assert.Contains(t, out, "exposed-ok", out)
	assert.NotContains(t, out, "other\n", out)
	assert.Contains(t, out, "file-ok", out)
	b, err := os.ReadFile(single)
	require.NoError(t, err)
	assert.Equal(t, "file-ok\n", string(b))
	assert.Contains(t, out, "end")
	assert.NoFileExists(t, filepath.Join(exposed, "w"))
	assert.NoFileExists(t, filepath.Join(tool, "share", "w"))
	assert.Contains(t, out, "Read-only file system")
}
