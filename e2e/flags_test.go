package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestNegativeLimitsRefused: a negative limit or interval, as a flag or in the config file, stops
// the server at start with a message naming it, and so does a 0 for a flag whose default is not 0;
// before, the server silently used the default.
func TestNegativeLimitsRefused(t *testing.T) {
	// A server that accepts the limit starts and serves: the timeout ends it, and the test fails.
	run := func(args ...string) ([]byte, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		return exec.CommandContext(ctx, serverBin, args...).CombinedOutput()
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--max-turns", "-3"}, "--max-turns -3: must be positive; give a positive value, or leave the flag out for its default\n"},
		{[]string{"--max-run-time=-1m"}, "--max-run-time -1m0s: must be positive"},
		{[]string{"--concurrent-requests", "-1"}, "--concurrent-requests -1: must be positive; give a positive value, or leave the flag out for its default (16)"},
		{[]string{"--max-message-bytes", "0"}, "--max-message-bytes 0: must be positive"},
		{[]string{"--hello-timeout=0s"}, "--hello-timeout 0s: must be positive; give a positive value, or leave the flag out for its default (30s)"},
		{[]string{"--request-timeout=-5s"}, "--request-timeout -5s: must be positive"},
		{[]string{"--max-turn-bytes", "-1"}, "--max-turn-bytes -1: must be positive"},
	} {
		args := append([]string{"start", "--listen", freeAddr(t), "--data-dir", t.TempDir()}, tc.args...)
		out, err := run(args...)
		require.Error(t, err, "%v: %s", tc.args, out)
		assert.Contains(t, string(out), tc.want)
	}
	cfg := filepath.Join(t.TempDir(), "config.json")
	require.NoError(t, os.WriteFile(cfg, []byte(`{"limits":{"maxOutputTokens":-10}}`), 0o600))
	out, err := run("start", "--listen", freeAddr(t), "--data-dir", t.TempDir(), "--config", cfg)
	require.Error(t, err, "%s", out)
	assert.Contains(t, string(out), "limits.maxOutputTokens is negative")
}
