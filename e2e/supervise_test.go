package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zidane-server/zidane/server/store"
	"github.com/zidane-server/zidane/server/store/storetest"
)

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
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) > 0 && f[0] == name {
			return f[len(f)-1] != "-"
		}
	}
	t.Fatalf("token %s not listed:\n%s", name, out)
	return false
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
