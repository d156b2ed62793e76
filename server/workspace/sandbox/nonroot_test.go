package sandbox

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// nonRootUser is the ordinary user the non-root test runs as (uid 1000 on most machines).
const nonRootUser = "1000"

// TestSandboxRunsForANonRootUser (issue 21 item 6): a server run by an ordinary user, marked
// non-dumpable as the server marks itself, runs sandboxed commands under the default policy
// where the kernel allows unprivileged user namespaces. Run as root, the test re-runs a copy of
// this test binary as uid 1000 (skipped when that user does not exist); the copy fails, rather
// than skips, when the sandbox cannot run.
func TestSandboxRunsForANonRootUser(t *testing.T) {
	if os.Getenv(nonRootEnv) != "" {
		t.Skip("already the non-root run")
	}
	if os.Geteuid() != 0 {
		t.Skip("runs as root, to become uid " + nonRootUser)
	}
	u, err := user.LookupId(nonRootUser)
	if err != nil {
		t.Skipf("no user %s: %v", nonRootUser, err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if out, err := exec.Command("unshare", "--help").CombinedOutput(); err == nil {
		probe := exec.Command("unshare", "-Urn", "true")
		probe.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
		if err := probe.Run(); err != nil {
			t.Skipf("the kernel refuses user %s a user namespace (unshare -Urn: %v)", nonRootUser, err)
		}
	} else {
		t.Logf("no unshare(1): %s", out)
	}
	dir, err := os.MkdirTemp("", "zsn") // short: unix socket paths are at most 107 bytes
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	require.NoError(t, os.Chmod(dir, 0o755))
	require.NoError(t, os.Chown(dir, uid, gid))
	self, err := os.Executable()
	require.NoError(t, err)
	bin := filepath.Join(dir, "sandbox.test")
	src, err := os.Open(self)
	require.NoError(t, err)
	dst, err := os.OpenFile(bin, os.O_CREATE|os.O_WRONLY, 0o755)
	require.NoError(t, err)
	_, err = io.Copy(dst, src)
	src.Close()
	require.NoError(t, err)
	require.NoError(t, dst.Close())
	tmp := filepath.Join(dir, "t")
	require.NoError(t, os.Mkdir(tmp, 0o700))
	require.NoError(t, os.Chown(tmp, uid, gid))

	cmd := exec.Command(bin, "-test.run", "^(TestWorkspaceWriteWritesOnlyTheRoots|TestFieldCase_T0[456].*|TestSupportReportsTheSandbox)$", "-test.v", "-test.count=1")
	cmd.Dir = tmp
	cmd.Env = []string{nonRootEnv + "=1", "TMPDIR=" + tmp, "HOME=" + tmp, "PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
	out, err := cmd.CombinedOutput()
	assert.NoError(t, err, "%s", out)
	for _, name := range []string{"TestWorkspaceWriteWritesOnlyTheRoots", "TestFieldCase_T04_HostSocketsOutOfView", "TestFieldCase_T05_OnlyStdioReachesTheCommand", "TestFieldCase_T06_FreshHomePerCommand"} {
		assert.Contains(t, string(out), "--- PASS: "+name, "%s", out)
	}
}

// TestNamespacesRefusalNamesCauseAndRemedy: a launch the kernel refuses (EPERM starting the
// launcher, as with unprivileged user namespaces off) is explained with a cause and a remedy;
// another failure is not dressed up as one.
func TestNamespacesRefusalNamesCauseAndRemedy(t *testing.T) {
	refused := fmt.Errorf("a sandboxed command did not run (%w)", &os.PathError{Op: "fork/exec", Path: "/proc/self/exe", Err: syscall.EPERM})
	r := namespacesRemedy(refused)
	assert.Contains(t, r, "Cause: ")
	assert.Contains(t, r, "Remedy: ")
	assert.Empty(t, namespacesRemedy(errors.New("a sandboxed command's report: unexpected end of JSON input")))
	f := newFixture(t, Options{})
	sup := f.sb.Support(false)
	sup.Available[Namespaces], sup.reasons = false, map[Feature]string{Namespaces: "Namespaces: refused." + r}
	f.sb.support = &sup
	err := f.sb.Check(WorkspaceWrite)
	require.ErrorIs(t, err, ErrUnsupported)
	assert.Contains(t, err.Error(), "Remedy: ", "Check's refusal carries the remedy")
}
