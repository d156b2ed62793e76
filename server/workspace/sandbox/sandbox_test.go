package sandbox

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fixture is a workspace root, a folder outside it, and a server data dir holding the kind of
// files a sandboxed command must not reach.
type fixture struct {
	sb      *Sandbox
	ws      string // the workspace root
	outside string // a folder outside the roots
	data    string // the server's data dir (hidden)
}

func newFixture(t *testing.T, opts Options) *fixture {
	t.Helper()
	f := &fixture{ws: t.TempDir(), outside: t.TempDir(), data: t.TempDir()}
	require.NoError(t, os.WriteFile(filepath.Join(f.data, "daemon.json"), []byte(`{"token":"zds_secret-daemon-R26"}`), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(f.data, "config.json"), []byte(`{"key":"sk-config-R26"}`), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(f.outside, "keep.txt"), []byte("outside"), 0o644))
	if opts.ScratchBase == "" {
		opts.ScratchBase = filepath.Join(f.data, "sandbox")
	}
	opts.Hide = append(opts.Hide, f.data)
	sb, err := New(opts)
	require.NoError(t, err)
	f.sb = sb
	return f
}

// needSandbox skips when this machine cannot sandbox at all (the forced-unsupported test covers
// the refusal).
func needSandbox(t *testing.T, f *fixture) {
	t.Helper()
	sup := f.sb.Support(false)
	if !sup.Available[Landlock] || !sup.Available[Namespaces] || !sup.Available[NetNamespace] {
		if os.Getenv(nonRootEnv) != "" {
			t.Fatalf("the sandbox cannot run for uid %d: %v", os.Getuid(), sup.Notes)
		}
		t.Skipf("this kernel cannot sandbox: %v", sup.Notes)
	}
}

// run runs script with bash under policy p in the fixture's workspace and returns the combined
// output and exit status.
func (f *fixture) run(t *testing.T, p Policy, script string) (string, int) {
	t.Helper()
	out, err := f.command(t, p, script).CombinedOutput()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return string(out), code
}

// command prepares script to run with bash under policy p in the fixture's workspace.
func (f *fixture) command(t *testing.T, p Policy, script string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("/bin/bash", "-c", script)
	cmd.Dir = f.ws
	cmd.Env = []string{"PATH=/usr/local/go/bin:/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, f.sb.Wrap(cmd, Request{Policy: p, Roots: []string{f.ws}, SessionID: "s1"}))
	return cmd
}

// refused is the error text of a write the sandbox stops: Landlock answers EACCES, a read-only
// mount EROFS, and a folder outside the view is not there.
func refused(out string) bool {
	return strings.Contains(out, "Permission denied") || strings.Contains(out, "Read-only file system") ||
		strings.Contains(out, "No such file or directory")
}

func TestWorkspaceWriteWritesOnlyTheRoots(t *testing.T) {
	f := newFixture(t, Options{})
	needSandbox(t, f)
	out, code := f.run(t, WorkspaceWrite, `touch inside.txt && echo made > sub.txt && mkdir -p d/e && chmod +x inside.txt && echo OK`)
	require.Equal(t, 0, code, out)
	assert.Contains(t, out, "OK")
	assert.FileExists(t, filepath.Join(f.ws, "inside.txt"))

	out, code = f.run(t, WorkspaceWrite, fmt.Sprintf(`touch %s/new.txt`, f.outside))
	assert.NotEqual(t, 0, code)
	assert.True(t, refused(out), out)
	assert.NoFileExists(t, filepath.Join(f.outside, "new.txt"))

	// Nor any other way out: chmod, rename, remove, truncate a file outside.
	out, _ = f.run(t, WorkspaceWrite, fmt.Sprintf(`chmod 777 %[1]s/keep.txt; mv %[1]s/keep.txt %[1]s/moved; rm -f %[1]s/keep.txt; : > %[1]s/keep.txt; echo done`, f.outside))
	assert.Contains(t, out, "done")
	b, err := os.ReadFile(filepath.Join(f.outside, "keep.txt"))
	require.NoError(t, err)
	assert.Equal(t, "outside", string(b))
	fi, err := os.Stat(filepath.Join(f.outside, "keep.txt"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o644), fi.Mode().Perm())
}

func TestReadOnlyRefusesWorkspaceWrites(t *testing.T) {
	f := newFixture(t, Options{})
	needSandbox(t, f)
	out, code := f.run(t, ReadOnly, `touch inside.txt`)
	assert.NotEqual(t, 0, code)
	assert.True(t, refused(out), out)
	assert.NoFileExists(t, filepath.Join(f.ws, "inside.txt"))
	// The scratch directory stays writable: TMPDIR works.
	out, code = f.run(t, ReadOnly, `f=$(mktemp) && echo hi > "$f" && cat "$f"`)
	assert.Equal(t, 0, code, out)
	assert.Contains(t, out, "hi")
}

func TestSymlinkOutOfTheWorkspaceDoesNotWriteOutside(t *testing.T) {
	f := newFixture(t, Options{})
	needSandbox(t, f)
	require.NoError(t, os.Symlink(f.outside, filepath.Join(f.ws, "out")))
	require.NoError(t, os.Symlink(filepath.Join(f.outside, "keep.txt"), filepath.Join(f.ws, "keep-link")))
	out, _ := f.run(t, WorkspaceWrite, `touch out/escaped.txt; echo x > keep-link; ln -s /etc out2; echo y > out2/escaped; echo done`)
	assert.Contains(t, out, "done")
	assert.True(t, refused(out), out)
	assert.NoFileExists(t, filepath.Join(f.outside, "escaped.txt"))
	b, _ := os.ReadFile(filepath.Join(f.outside, "keep.txt"))
	assert.Equal(t, "outside", string(b))
	assert.NoFileExists(t, "/etc/escaped")
}

// listen opens a loopback TCP listener that answers "pong" to each connection.
func listen(t *testing.T) (port int, accepted chan struct{}) {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	accepted = make(chan struct{}, 8)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- struct{}{}
			_, _ = c.Write([]byte("pong\n"))
			c.Close()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port, accepted
}

func TestNetworkOnlyWithTheNetworkPolicy(t *testing.T) {
	f := newFixture(t, Options{})
	needSandbox(t, f)
	port, accepted := listen(t)
	script := fmt.Sprintf(`exec 3<>/dev/tcp/127.0.0.1/%d && head -1 <&3`, port)

	for _, p := range []Policy{WorkspaceWrite, ReadOnly} {
		out, code := f.run(t, p, script)
		assert.NotEqual(t, 0, code, "%s: %s", p, out)
		assert.Contains(t, out, "Connection refused", p)
		assert.Empty(t, accepted, p)
	}
	out, code := f.run(t, WorkspaceWriteNetwork, script)
	assert.Equal(t, 0, code, out)
	assert.Contains(t, out, "pong")
	assert.Len(t, accepted, 1)

	// Without network the command still has its own loopback (a test server of its own works).
	out, code = f.run(t, WorkspaceWrite, `ip=127.0.0.1; (exec 3<>/dev/tcp/$ip/1) 2>&1 | grep -q refused && echo own-loopback`)
	assert.Equal(t, 0, code, out)
	assert.Contains(t, out, "own-loopback")
}

func TestServerSecretsStayOutOfReach(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-fake-R26")
	f := newFixture(t, Options{})
	needSandbox(t, f)
	// The managed Postgres listens on a unix socket in the data dir; another server socket sits
	// outside it. Neither may be reachable.
	pgDir := filepath.Join(f.data, "run")
	require.NoError(t, os.MkdirAll(pgDir, 0o700))
	pgSock := filepath.Join(pgDir, ".s.PGSQL.5432")
	other := filepath.Join(t.TempDir(), "server.sock")
	serveUnix(t, pgSock, "pg")
	serveUnix(t, other, "other")
	// The socket is reachable unsandboxed (so the test can fail).
	raw, _ := exec.Command("curl", "-sS", "--max-time", "2", "--unix-socket", other, "http://x/").CombinedOutput()
	require.Contains(t, string(raw), "reached")

	git := filepath.Join(f.ws, ".git")
	require.NoError(t, os.MkdirAll(filepath.Join(git, "hooks"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(git, "config"), []byte("[core]\n"), 0o644))
	nested := filepath.Join(f.ws, "vendor", "lib", ".git")
	require.NoError(t, os.MkdirAll(nested, 0o755))

	self := os.Getpid()
	script := fmt.Sprintf(`
cat %[1]s/daemon.json; cat %[1]s/config.json; ls -A %[1]s
curl -s --max-time 2 --unix-socket %[2]s http://x/ || echo pg-unreachable
curl -s --max-time 2 --unix-socket %[3]s http://x/ || echo sock-unreachable
cat /proc/%[4]d/environ; tr '\0' '\n' < /proc/$PPID/environ; cat /proc/1/environ; cat /proc/1/cmdline
env; cat /proc/self/environ
echo evil >> .git/config; echo evil > .git/hooks/pre-commit; chmod +x .git/hooks/pre-commit; touch vendor/lib/.git/HEAD
grep CapEff /proc/self/status; grep CapBnd /proc/self/status
umount /proc; mount -t tmpfs x %[1]s
ls /dev; cat /etc/shadow
echo end`, f.data, pgSock, other, self)
	out, _ := f.run(t, WorkspaceWrite, script)
	t.Log(out)
	for _, secret := range []string{"secret-daemon-R26", "sk-config-R26", "sk-fake-R26", "reached"} {
		assert.NotContains(t, out, secret)
	}
	assert.Contains(t, out, "pg-unreachable")
	assert.Contains(t, out, "sock-unreachable")
	assert.Contains(t, out, "CapEff:\t0000000000000000")
	assert.Contains(t, out, "CapBnd:\t0000000000000000")
	assert.Contains(t, out, "end")
	b, _ := os.ReadFile(filepath.Join(git, "config"))
	assert.Equal(t, "[core]\n", string(b))
	assert.NoFileExists(t, filepath.Join(git, "hooks", "pre-commit"))
	assert.NoFileExists(t, filepath.Join(nested, "HEAD"))
	assert.NotContains(t, out, "vda")
	if os.Geteuid() == 0 {
		assert.NotContains(t, out, "root:")
	}
}

// sandboxPids counts the processes in the PID namespace of the launcher pid (seen from the
// host).
func sandboxPids(t *testing.T, launcher int) int {
	ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", launcher))
	if err != nil {
		return 0
	}
	if own, _ := os.Readlink("/proc/self/ns/pid"); ns == own {
		// The launcher is the spawn stage (a non-root, non-dumpable run): the namespace is its
		// child's.
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", launcher, launcher))
		if err != nil || len(strings.Fields(string(b))) == 0 {
			return 0
		}
		child, _ := strconv.Atoi(strings.Fields(string(b))[0])
		if ns, err = os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", child)); err != nil {
			return 0
		}
	}
	ents, err := os.ReadDir("/proc")
	require.NoError(t, err)
	n := 0
	for _, e := range ents {
		if l, err := os.Readlink("/proc/" + e.Name() + "/ns/pid"); err == nil && l == ns {
			n++
		}
	}
	return n
}

func TestForkBombAndMemoryHogAreStopped(t *testing.T) {
	f := newFixture(t, Options{Limits: Limits{Processes: 64, MemoryBytes: 512 << 20}})
	needSandbox(t, f)

	cmd := exec.Command("/bin/bash", "-c", `bomb(){ bomb | bomb & }; bomb; sleep 60`)
	cmd.Dir = f.ws
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, f.sb.Wrap(cmd, Request{Policy: WorkspaceWrite, Roots: []string{f.ws}, SessionID: "s1"}))
	require.NoError(t, cmd.Start())
	launcher := cmd.Process.Pid
	most := 0
	for i := 0; i < 20; i++ {
		time.Sleep(100 * time.Millisecond)
		most = max(most, sandboxPids(t, launcher))
		// The server stays responsive: it still starts processes of its own.
		require.NoError(t, exec.Command("/bin/true").Run())
	}
	assert.LessOrEqual(t, most, 64, "processes in the sandbox")
	assert.Greater(t, most, 10, "the bomb ran")
	require.NoError(t, syscall.Kill(-launcher, syscall.SIGKILL))
	_ = cmd.Wait()
	assert.Eventually(t, func() bool { return sandboxPids(t, launcher) == 0 }, 5*time.Second, 50*time.Millisecond,
		"every process of the sandbox dies with its launcher")

	out, code := f.run(t, WorkspaceWrite, `awk 'BEGIN { s = "xxxxxxxxxxxxxxxx"; while (1) s = s s }'; echo "status $?"`)
	assert.Equal(t, 0, code, out)
	assert.NotContains(t, out, "status 0")
	assert.Contains(t, strings.ToLower(out), "memory", out)
}

func TestGoTestRunsInTheWorkspace(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module with a cold cache")
	}
	if _, err := os.Stat("/usr/local/go/bin/go"); err != nil {
		t.Skip("no Go toolchain at /usr/local/go")
	}
	f := newFixture(t, Options{})
	needSandbox(t, f)
	require.NoError(t, os.WriteFile(filepath.Join(f.ws, "go.mod"), []byte("module example.com/m\n\ngo 1.22\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(f.ws, "m.go"), []byte("package m\n\nfunc Add(a, b int) int { return a + b }\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(f.ws, "m_test.go"), []byte("package m\n\nimport \"testing\"\n\nfunc TestAdd(t *testing.T) {\n\tif Add(2, 3) != 5 {\n\t\tt.Fatal(\"bad\")\n\t}\n}\n"), 0o644))
	out, code := f.run(t, WorkspaceWrite, `go test ./... && go env GOCACHE`)
	require.Equal(t, 0, code, out)
	assert.Contains(t, out, "ok  \texample.com/m")
	assert.Contains(t, out, filepath.Join(f.data, "sandbox", "s1", "cache", "go-build"))
}

func TestUnsupportedRefusesInsteadOfRunningUnsandboxed(t *testing.T) {
	f := newFixture(t, Options{Unsupported: []Feature{NetNamespace}})
	marker := filepath.Join(f.outside, "ran")
	sup := f.sb.Support(true)
	assert.False(t, sup.Available[NetNamespace])
	assert.NotContains(t, sup.Policies, WorkspaceWrite)
	for _, p := range []Policy{WorkspaceWrite, ReadOnly} {
		cmd := exec.Command("/bin/touch", marker)
		err := f.sb.Wrap(cmd, Request{Policy: p, Roots: []string{f.ws}, SessionID: "s1"})
		require.ErrorIs(t, err, ErrUnsupported)
		assert.Contains(t, err.Error(), "netns")
		assert.NoFileExists(t, marker)
	}
	g := newFixture(t, Options{Unsupported: []Feature{"all"}})
	assert.Equal(t, "none", g.sb.Support(false).Kind)
	for _, p := range []Policy{WorkspaceWrite, WorkspaceWriteNetwork, ReadOnly} {
		require.ErrorIs(t, g.sb.Wrap(exec.Command("/bin/true"), Request{Policy: p, Roots: []string{g.ws}, SessionID: "s1"}), ErrUnsupported)
	}
	// Off is refused unless the operator allowed it.
	err := g.sb.Wrap(exec.Command("/bin/true"), Request{Policy: Off, Roots: []string{g.ws}, SessionID: "s1"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "--sandbox-allow-off")
}

func TestSupportReportsTheSandbox(t *testing.T) {
	f := newFixture(t, Options{AllowOff: true})
	sup := f.sb.Support(false)
	again := f.sb.Support(false)
	assert.Equal(t, sup.ProbedAt, again.ProbedAt, "cached")
	assert.True(t, f.sb.Support(true).ProbedAt.After(sup.ProbedAt), "refresh probes again")
	assert.Contains(t, sup.Policies, Off)
	if sup.LandlockABI >= 1 && sup.Available[Namespaces] && sup.Available[NetNamespace] {
		assert.Equal(t, "linux-landlock-namespaces", sup.Kind)
		assert.Equal(t, []Policy{WorkspaceWrite, WorkspaceWriteNetwork, ReadOnly, Off}, sup.Policies)
	}
}

// TestFieldCase_T01_BareRepositoryReadOnly: a bare repository in the workspace, named with or
// without ".git", is found by what it holds and stays read-only like a .git folder: a command
// can plant no hook and change no config in it, while the rest of the root stays writable.
func TestFieldCase_T01_BareRepositoryReadOnly(t *testing.T) {
	f := newFixture(t, Options{})
	needSandbox(t, f)
	for _, name := range []string{"up.git", "upstream", "deep/er/remote"} {
		out, err := exec.Command("git", "init", "-q", "--bare", filepath.Join(f.ws, name)).CombinedOutput()
		require.NoError(t, err, "%s", out)
	}
	out, _ := f.run(t, WorkspaceWrite, `for r in up.git upstream deep/er/remote; do
  printf '#!/bin/sh\nid > pwned\n' > $r/hooks/post-receive; echo evil >> $r/config; mkdir $r/refs/heads/x
done; touch free.txt deep/er/free.txt; echo end`)
	assert.Contains(t, out, "end")
	assert.True(t, refused(out), out)
	for _, name := range []string{"up.git", "upstream", "deep/er/remote"} {
		assert.NoFileExists(t, filepath.Join(f.ws, name, "hooks", "post-receive"), name)
		b, _ := os.ReadFile(filepath.Join(f.ws, name, "config"))
		assert.NotContains(t, string(b), "evil", name)
		assert.NoDirExists(t, filepath.Join(f.ws, name, "refs", "heads", "x"), name)
	}
	assert.FileExists(t, filepath.Join(f.ws, "free.txt"))
	assert.FileExists(t, filepath.Join(f.ws, "deep", "er", "free.txt"))
}

// TestConfigFoldersReadOnly: the .zidane and .claude folders in the roots (which configure the
// MCP servers and commands the server runs; issue 23 item 3) are read-only under
// workspace-write, as .git is, while the rest of the root stays writable.
func TestConfigFoldersReadOnly(t *testing.T) {
	f := newFixture(t, Options{})
	needSandbox(t, f)
	for _, d := range []string{".zidane", ".claude", "sub/.zidane"} {
		require.NoError(t, os.MkdirAll(filepath.Join(f.ws, d), 0o755))
	}
	out, _ := f.run(t, WorkspaceWrite, `for d in .zidane .claude sub/.zidane; do echo '{"mcpServers":{}}' > $d/mcps.json; done
touch free.txt; echo end`)
	assert.Contains(t, out, "end")
	assert.True(t, refused(out), out)
	for _, d := range []string{".zidane", ".claude", "sub/.zidane"} {
		assert.NoFileExists(t, filepath.Join(f.ws, d, "mcps.json"), d)
	}
	assert.FileExists(t, filepath.Join(f.ws, "free.txt"))
}
