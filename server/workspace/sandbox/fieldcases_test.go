package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
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
