package client

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDefaultDataDir(t *testing.T) {
	t.Setenv("ZIDANE_SERVER_HOME", "/srv/zs")
	assert.Equal(t, "/srv/zs", DefaultDataDir())
	t.Setenv("ZIDANE_SERVER_HOME", "")
	t.Setenv("XDG_DATA_HOME", "/xdg")
	if os.Geteuid() == 0 {
		assert.Equal(t, "/var/lib/zidane-server", DefaultDataDir())
	} else {
		assert.Equal(t, "/xdg/zidane-server", DefaultDataDir())
	}
}

func TestReadDaemonFile(t *testing.T) {
	dir := t.TempDir()
	_, err := ReadDaemonFile(dir)
	assert.ErrorContains(t, err, "no running zidane-server found")

	write := func(s string) { require.NoError(t, os.WriteFile(filepath.Join(dir, DaemonFileName), []byte(s), 0o600)) }
	server := startProgram(t, "zidane-server") // a live process named like the server
	write(`{"url":"ws://127.0.0.1:1","token":"zds_x","pid":` + strconv.Itoa(server) + `}`)
	d, err := ReadDaemonFile(dir)
	require.NoError(t, err)
	assert.Equal(t, "zds_x", d.Token)

	write(`not json`)
	_, err = ReadDaemonFile(dir)
	assert.ErrorContains(t, err, "not a valid daemon file")

	write(`{"url":"ws://127.0.0.1:1","token":"zds_x","pid":2147483000}`)
	_, err = ReadDaemonFile(dir)
	assert.ErrorContains(t, err, "which is not running")
	var stale *StaleDaemonFileError
	assert.ErrorAs(t, err, &stale)
}

// startProgram runs a copy of sleep named name and returns its pid; it is killed at cleanup.
func startProgram(t *testing.T, name string) int {
	t.Helper()
	src, err := exec.LookPath("sleep")
	require.NoError(t, err)
	b, err := os.ReadFile(src)
	require.NoError(t, err)
	bin := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(bin, b, 0o755))
	cmd := exec.Command(bin, "60")
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd.Process.Pid
}

// TestFieldCase_B43_StaleDaemonFileOfAnotherProgram: daemon.json names a pid that another
// program now has (the server was killed and the pid reused): the file is stale, and the error
// says so and what to do, instead of a dial to a dead port.
func TestFieldCase_B43_StaleDaemonFileOfAnotherProgram(t *testing.T) {
	dir := t.TempDir()
	other := startProgram(t, "sleep")
	require.NoError(t, os.WriteFile(filepath.Join(dir, DaemonFileName), []byte(`{"url":"ws://127.0.0.1:1","token":"zds_x","pid":`+strconv.Itoa(other)+`}`), 0o600))
	_, err := ReadDaemonFile(dir)
	var stale *StaleDaemonFileError
	require.ErrorAs(t, err, &stale)
	assert.Equal(t, other, stale.PID)
	assert.Equal(t, "sleep", stale.Program)
	assert.Contains(t, err.Error(), "is stale")
	assert.Contains(t, err.Error(), "another program (sleep)")
	assert.Contains(t, err.Error(), "Start the server again")
}

// A server killed a moment ago whose parent has not reaped it yet is a zombie: its daemon.json is
// stale at once (a start on its data dir was refused as "in use" until the parent waited; a
// break-it helper's report).
func TestStaleDaemonFileOfAZombie(t *testing.T) {
	dir := t.TempDir()
	pid := startProgram(t, "zidane-server")
	require.NoError(t, os.WriteFile(filepath.Join(dir, DaemonFileName), []byte(`{"url":"ws://127.0.0.1:1","token":"zds_x","pid":`+strconv.Itoa(pid)+`}`), 0o600))
	_, err := ReadDaemonFile(dir)
	require.NoError(t, err, "a running server's file")
	require.NoError(t, syscall.Kill(pid, syscall.SIGKILL)) // not waited for: a zombie until cleanup
	require.Eventually(t, func() bool { return exited(pid) }, 5*time.Second, 10*time.Millisecond)
	_, err = ReadDaemonFile(dir)
	var stale *StaleDaemonFileError
	require.ErrorAs(t, err, &stale)
	assert.ErrorContains(t, err, "which is not running")
}
