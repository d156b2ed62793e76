package e2e

import (
	"context"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zidane-server/zidane/server/store"
	"github.com/zidane-server/zidane/server/store/storetest"
)

// waitHealthz polls GET /healthz every 10 ms until it answers code, failing t after within.
func waitHealthz(t *testing.T, s *serverProc, code int, within time.Duration) {
	t.Helper()
	hc := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(within)
	last := 0
	for {
		if resp, err := hc.Get("http://" + s.addr + "/healthz"); err == nil {
			resp.Body.Close()
			if last = resp.StatusCode; last == code {
				return
			}
		}
		select {
		case <-s.done:
			t.Fatalf("zidane-server exited while waiting for /healthz %d: %v", code, s.waitErr)
		default:
		}
		require.True(t, time.Now().Before(deadline), "/healthz did not answer %d within %s (last %d)", code, within, last)
		time.Sleep(10 * time.Millisecond)
	}
}

// waitStderr polls the server's log every 10 ms until it holds substr n times.
func waitStderr(t *testing.T, s *serverProc, substr string, n int, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for strings.Count(s.stderr.String(), substr) < n {
		require.True(t, time.Now().Before(deadline), "the log did not say %q %d times within %s", substr, n, within)
		time.Sleep(10 * time.Millisecond)
	}
}

var epochRE = regexp.MustCompile(`signal epoch ([0-9a-f]{8})`)

// localTokenName is the name of the local token the server minted for its daemon.json.
func localTokenName(t *testing.T, s *serverProc) string {
	t.Helper()
	m := epochRE.FindStringSubmatch(s.stdout.String())
	require.NotNil(t, m, "banner: %s", s.stdout.String())
	return "local-" + m[1]
}

// tokenRevoked runs `zidane-server token list` with args and reports whether token name is
// listed as revoked.
func tokenRevoked(t *testing.T, name string, args ...string) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, serverBin, append([]string{"token", "list"}, args...)...)
	cmd.Env = env(true)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	revoked, ok := listedRevoked(string(out), name)
	if !ok {
		t.Fatalf("token %s not listed:\n%s", name, out)
	}
	return revoked
}

// listedRevoked reads `token list` output: whether the token named name is revoked (its REVOKED
// column, found by the header, is not "-"), and whether it is listed at all.
func listedRevoked(out, name string) (revoked, listed bool) {
	lines := strings.Split(out, "\n")
	col := -1
	for _, line := range lines {
		if strings.HasPrefix(line, "NAME") {
			col = strings.Index(line, "REVOKED")
			continue
		}
		if f := strings.Fields(line); col >= 0 && len(f) > 0 && f[0] == name && len(line) > col {
			v := strings.Fields(line[col:])
			return len(v) > 0 && v[0] != "-", true
		}
	}
	return false, false
}

// TestFieldCase_T13_ManagedPostgresSupervised (issue 22 item 3): the managed postmaster killed
// twice is restarted each time by the server itself, which stays up (same process, same
// WebSocket connection), says degraded on /healthz meanwhile and logs one line per exit naming
// the status and the log file. Variant: when the restarts keep failing, the server exits with
// status 1 after --managed-postgres-restarts, and its daemon.json (its token could not be
// revoked) stays for the next start, which revokes it (T12's kind).
func TestFieldCase_T13_ManagedPostgresSupervised(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a managed Postgres")
	}
	data := storetest.ShortTempDir(t)
	cluster := filepath.Join(data, "postgres")
	s := startServer(t, serverOpts{noDBEnv: true, dataDir: data,
		extra: []string{"--managed-postgres-backoff", "200ms", "--managed-postgres-restarts", "2"}})
	c := dial(t, s, s.mintToken("t13", "chat"))
	c.hello()
	sid, _ := createSession(t, c)
	serverPid := s.cmd.Process.Pid

	for kill := 1; kill <= 2; kill++ {
		pid := storetest.PostmasterPID(t, cluster)
		require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
		waitHealthz(t, s, http.StatusServiceUnavailable, 5*time.Second)
		waitHealthz(t, s, http.StatusOK, 20*time.Second)
		// Ready before the supervisor saw it: a kill now would be a failed restart.
		waitStderr(t, s, "managed postgres: restarted", kill, 10*time.Second)
		assert.NotEqual(t, pid, storetest.PostmasterPID(t, cluster), "a new postmaster")
		log := s.stderr.String()
		assert.Equal(t, kill, strings.Count(log, "managed postgres: the postmaster exited; restarting it"), "one line per exit:\n%s", log)
		assert.Contains(t, log, "pid="+strconv.Itoa(pid)+" status=\"signal: killed\"")
		assert.Contains(t, log, "log="+filepath.Join(data, "postgres.log"))
		assert.NotContains(t, log, "restart failed")
		c.result("sessions.get", map[string]any{"sessionId": sid}, nil) // the same connection is served
	}
	assert.Equal(t, serverPid, s.cmd.Process.Pid)
	assert.LessOrEqual(t, strings.Count(s.stderr.String(), "token revocation listener stopped"), 2, "at most one listener warning per outage")
	name := localTokenName(t, s)

	// Restarts that fail: a setting PostgreSQL refuses at start.
	conf := filepath.Join(cluster, "postgresql.conf")
	orig, err := os.ReadFile(conf)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(conf, append(append([]byte{}, orig...), "zidane_t13_bogus = 1\n"...), 0o600))
	require.NoError(t, syscall.Kill(storetest.PostmasterPID(t, cluster), syscall.SIGKILL))
	select {
	case <-s.done:
	case <-time.After(30 * time.Second):
		t.Fatal("the server did not exit after its restarts failed")
	}
	s.stopped = true
	var ee *exec.ExitError
	require.True(t, errors.As(s.waitErr, &ee), "exit: %v", s.waitErr)
	assert.Equal(t, 1, ee.ExitCode())
	assert.Contains(t, s.stderr.String(), "2 restarts in a row failed")
	assert.Contains(t, s.stderr.String(), filepath.Join(data, "postgres.log"))
	assert.FileExists(t, filepath.Join(data, "daemon.json"), "its token could not be revoked: the file stays for the next start")

	require.NoError(t, os.WriteFile(conf, orig, 0o600))
	s2 := startServer(t, serverOpts{noDBEnv: true, dataDir: data})
	assert.Contains(t, s2.stderr.String(), "revoked the token of a stale daemon.json")
	assert.True(t, tokenRevoked(t, name, "--data-dir", data), "the first server's local token is revoked by the next start")
	s2.stop()
}

// TestFieldCase_T12_StopWithDatabaseDownKeepsToken (issue 22 item 4): a clean stop while the
// (external) database is down cannot revoke the local token, so daemon.json stays, and the next
// start revokes it; a clean stop with the database up revokes the token and removes the file.
func TestFieldCase_T12_StopWithDatabaseDownKeepsToken(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a scratch Postgres")
	}
	pgDir := storetest.ShortTempDir(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pg, err := store.StartManaged(ctx, pgDir, nil) // a scratch cluster of the test's own
	require.NoError(t, err)
	t.Cleanup(func() { pg.Stop() })
	data := t.TempDir()
	daemon := filepath.Join(data, "daemon.json")
	s := startServer(t, serverOpts{dbURL: pg.URL(), dataDir: data})
	name := localTokenName(t, s)
	before, err := os.ReadFile(daemon)
	require.NoError(t, err)

	require.NoError(t, pg.Stop())
	s.stop() // SIGTERM: exits 0
	assert.Contains(t, s.stderr.String(), "the local token could not be revoked; daemon.json stays")
	after, err := os.ReadFile(daemon)
	require.NoError(t, err, "daemon.json stays while its token is live")
	assert.Equal(t, string(before), string(after))

	pg2, err := store.StartManaged(ctx, pgDir, nil)
	require.NoError(t, err)
	t.Cleanup(func() { pg2.Stop() })
	s2 := startServer(t, serverOpts{dbURL: pg2.URL(), dataDir: data})
	assert.Contains(t, s2.stderr.String(), "revoked the token of a stale daemon.json")
	assert.True(t, tokenRevoked(t, name, "--database-url", pg2.URL()), "the next start revoked the stale file's token")
	name2 := localTokenName(t, s2)
	assert.False(t, tokenRevoked(t, name2, "--database-url", pg2.URL()))

	s2.stop() // the database is up: revoked, then removed
	assert.NoFileExists(t, daemon)
	assert.True(t, tokenRevoked(t, name2, "--database-url", pg2.URL()))
}
