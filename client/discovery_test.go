package client

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

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
	write(`{"url":"ws://127.0.0.1:1","token":"zds_x","pid":` + strconv.Itoa(os.Getpid()) + `}`)
	d, err := ReadDaemonFile(dir)
	require.NoError(t, err)
	assert.Equal(t, "zds_x", d.Token)

	write(`not json`)
	_, err = ReadDaemonFile(dir)
	assert.ErrorContains(t, err, "not a valid daemon file")

	write(`{"url":"ws://127.0.0.1:1","token":"zds_x","pid":2147483000}`)
	_, err = ReadDaemonFile(dir)
	assert.ErrorContains(t, err, "which is not running")
}
