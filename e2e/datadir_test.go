package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zidane-server/zidane/server/store/storetest"
)

// TestDataDirOwnership: a second server on a data dir in use is refused and touches nothing of
// the first (its daemon.json and local token stay); a stale daemon.json (the server was killed)
// is replaced and its token revoked (adversarial review).
func TestDataDirOwnership(t *testing.T) {
	db := storetest.URL(t)
	data := t.TempDir()
	a := startServer(t, serverOpts{dbURL: db, dataDir: data})
	before, err := os.ReadFile(filepath.Join(data, "daemon.json"))
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b := exec.CommandContext(ctx, serverBin, "start", "--listen", freeAddr(t), "--data-dir", data, "--database-url", db, "--workspace-root", t.TempDir())
	b.Env = env(false)
	out, err := b.CombinedOutput()
	require.Error(t, err, "%s", out)
	assert.Contains(t, string(out), "is in use by zidane-server pid")
	after, err := os.ReadFile(filepath.Join(data, "daemon.json"))
	require.NoError(t, err)
	assert.Equal(t, string(before), string(after))
	cli := exec.CommandContext(ctx, cliBin, "-c", "Still mine?")
	cli.Env = env(false, "ZIDANE_SERVER_HOME="+data)
	o, err := cli.CombinedOutput()
	require.NoError(t, err, "%s", o)

	// Kill A: its daemon.json is stale; the next server replaces it and revokes the old token.
	require.NoError(t, a.cmd.Process.Kill())
	<-a.done
	a.stopped = true
	stale, err := os.ReadFile(filepath.Join(data, "daemon.json"))
	require.NoError(t, err)
	c := startServer(t, serverOpts{dbURL: db, dataDir: data})
	fresh, err := os.ReadFile(filepath.Join(data, "daemon.json"))
	require.NoError(t, err)
	assert.NotEqual(t, string(stale), string(fresh))
	list := exec.CommandContext(ctx, serverBin, "token", "list", "--database-url", db)
	list.Env = env(false)
	o, err = list.CombinedOutput()
	require.NoError(t, err, "%s", o)
	live := 0
	for _, line := range strings.Split(string(o), "\n") {
		if f := strings.Fields(line); len(f) > 0 && strings.HasPrefix(f[0], "local-") {
			if revoked, _ := listedRevoked(string(o), f[0]); !revoked {
				live++
			}
		}
	}
	assert.Equal(t, 1, live, "one live local token, the new server's:\n%s", o)
	c.stop()
}

// An operator command on the data dir of a server that uses an external database, without that
// database's URL, is refused and says which flag to pass: it used to start a managed Postgres
// under the data dir and mint a token there, which the running server then refused (401; a
// break-it helper's report).
func TestOperatorCommandNeedsTheServersDatabase(t *testing.T) {
	db := storetest.URL(t)
	data := filepath.Join(t.TempDir(), "new") // a data dir the start makes (a fresh user saw no marker then)
	srv := startServer(t, serverOpts{dbURL: db, dataDir: data})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	refused := func(when string) {
		mint := exec.CommandContext(ctx, serverBin, "token", "create", "--name", "elsewhere", "--scope", "chat", "--data-dir", data)
		mint.Env = env(true)
		out, err := mint.CombinedOutput()
		require.Error(t, err, "%s: %s", when, out)
		assert.Contains(t, string(out), "the database of", when)
		assert.Contains(t, string(out), "pass the same --database-url (or DATABASE_URL)", when)
		_, serr := os.Stat(filepath.Join(data, "postgres"))
		assert.True(t, os.IsNotExist(serr), "%s: a managed Postgres was set up under the data dir", when)
	}
	refused("while the server runs")
	// The banner's token create line names the server's database, not $DATABASE_URL (unset here).
	assert.Contains(t, srv.stdout.String(), "token create --name cli --scope chat --database-url '"+db+"'")
	srv.stop()
	refused("after the server stopped") // daemon.json is gone; the data dir still says so

	ok := exec.CommandContext(ctx, serverBin, "token", "create", "--name", "here", "--scope", "chat", "--data-dir", data, "--database-url", db)
	ok.Env = env(true)
	out, err := ok.CombinedOutput()
	require.NoError(t, err, "%s", out)
}

// TestBannerPairLineNamesTheDataDir: the banner's pair line names the data dir the server runs
// on when it came from ZIDANE_SERVER_HOME, so run as printed from a terminal without that
// variable it reaches this server's managed Postgres and its code pairs at this server. It used to
// print a bare `pair`, which set up another managed Postgres under the default data dir (a fresh
// user's report).
func TestBannerPairLineNamesTheDataDir(t *testing.T) {
	data, err := os.MkdirTemp("/tmp", "zd") // short: the managed Postgres' socket lives there
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(data) })
	srv := startServer(t, serverOpts{dataDir: data, root: "-", noDBEnv: true, homeEnv: true})
	var line string
	for _, l := range strings.Split(srv.stdout.String(), "\n") {
		if rest, ok := strings.CutPrefix(l, "pair an app:"); ok {
			line, _, _ = strings.Cut(rest, "   (")
		}
	}
	args := strings.Fields(line)
	require.GreaterOrEqual(t, len(args), 2, "banner:\n%s", srv.stdout.String())
	require.Equal(t, "pair", args[1], line)
	require.Contains(t, args, data, "the pair line names the data dir: %s", line) // never run a bare pair here

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	pair := exec.CommandContext(ctx, serverBin, args[1:]...) // as printed, with this test's binary
	// No ZIDANE_SERVER_HOME, no DATABASE_URL: another terminal.
	pair.Env = env(true)
	var stderr strings.Builder
	pair.Stderr = &stderr
	out, err := pair.Output()
	require.NoError(t, err, "%s", out)
	assert.NotContains(t, stderr.String(), "warning:", "a server runs on the data dir: no warning")
	code := strings.TrimSpace(string(out))
	resp, err := http.Post("http://"+srv.addr+"/zidane/pair", "application/json", strings.NewReader(fmt.Sprintf(`{"code":%q,"name":"printed"}`, code)))
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode, "the printed command's code pairs at this server: %s", body)
	assert.Contains(t, string(body), "zds_")
}

// TestOperatorCommandsWarnOnAnUnusedDataDir: pair and token create on a data dir no server runs on
// (no live daemon.json) succeed, since a server may start there later, but say on stderr that the
// code or token works only with a server on that data dir and how to name the right one: a fresh
// user's pair on the default data dir gave a code the server they ran (ZIDANE_SERVER_HOME) refused.
func TestOperatorCommandsWarnOnAnUnusedDataDir(t *testing.T) {
	data, err := os.MkdirTemp("/tmp", "zd") // short: the managed Postgres' socket lives there
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(data) })
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	for _, c := range []struct {
		args []string
		what string
		out  string
	}{
		{[]string{"pair", "--data-dir", data}, "the pairing code", "-"},
		{[]string{"token", "create", "--name", "cli", "--data-dir", data}, "the token", "zds_"},
	} {
		cmd := exec.CommandContext(ctx, serverBin, c.args...)
		cmd.Env = env(true) // no DATABASE_URL: the data dir's managed Postgres
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		require.NoError(t, err, "%v: %s", c.args, stderr.String())
		assert.Contains(t, string(out), c.out, "%v still prints its result", c.args)
		assert.Contains(t, stderr.String(), "warning: no zidane-server is running on data dir "+data+" (no live daemon.json there): "+c.what+" is stored in that data dir's database", c.args)
		assert.Contains(t, stderr.String(), "--data-dir DIR, or ZIDANE_SERVER_HOME=DIR", c.args)
	}
}
