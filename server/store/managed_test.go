package store_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zidane-server/zidane/server/store"
	"github.com/zidane-server/zidane/server/store/storetest"
)

func TestManagedStartStopRestartKeepsData(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := filepath.Join(storetest.ShortTempDir(t), "data")

	m, err := store.StartManaged(ctx, dir, quiet)
	require.NoError(t, err)
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = m.Stop()
		}
	})
	assert.Contains(t, m.URL(), "host="+strings.ReplaceAll(filepath.Join(dir, "run"), "/", "%2F"))
	assert.FileExists(t, filepath.Join(dir, "postgres", "PG_VERSION"))
	fi, err := os.Stat(filepath.Join(dir, "run", ".s.PGSQL.5432"))
	require.NoError(t, err)
	assert.Equal(t, os.ModeSocket, fi.Mode().Type())

	if os.Geteuid() == 0 {
		// PostgreSQL refuses root: it must run as an unprivileged user.
		pidLine, err := os.ReadFile(filepath.Join(dir, "postgres", "postmaster.pid"))
		require.NoError(t, err)
		pid, _, _ := strings.Cut(string(pidLine), "\n")
		pfi, err := os.Stat("/proc/" + pid)
		require.NoError(t, err)
		assert.NotEqual(t, uint32(0), pfi.Sys().(*syscall.Stat_t).Uid, "postgres runs unprivileged")
	}

	c, err := pgx.Connect(ctx, m.URL())
	require.NoError(t, err)
	var listen, user, enc string
	require.NoError(t, c.QueryRow(ctx, `SELECT current_setting('listen_addresses'), current_user, pg_encoding_to_char(encoding) FROM pg_database WHERE datname = current_database()`).Scan(&listen, &user, &enc))
	c.Close(ctx)
	assert.Equal(t, "", listen, "no TCP listener")
	assert.Equal(t, "zidane", user)
	assert.Equal(t, "UTF8", enc)

	s, err := store.Open(ctx, m.URL(), store.Options{Logger: quiet})
	require.NoError(t, err)
	sess, err := s.CreateSession(ctx, store.Session{Title: "persist me"})
	require.NoError(t, err)
	host, err := s.HostID(ctx)
	require.NoError(t, err)
	s.Close()

	// A second server on the same data directory is refused.
	_, err = store.StartManaged(ctx, dir, quiet)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "already running")

	require.NoError(t, m.Stop())
	require.NoError(t, m.Stop(), "Stop is idempotent")
	stopped = true
	assert.NoFileExists(t, filepath.Join(dir, "postgres", "postmaster.pid"))

	// A stale postmaster.pid (process gone) does not prevent a start.
	stale := "2147483646\n" + filepath.Join(dir, "postgres") + "\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "postgres", "postmaster.pid"), []byte(stale), 0o600))

	m2, err := store.StartManaged(ctx, dir, quiet)
	require.NoError(t, err)
	defer func() { require.NoError(t, m2.Stop()) }()
	s, err = store.Open(ctx, m2.URL(), store.Options{Logger: quiet})
	require.NoError(t, err)
	defer s.Close()
	got, err := s.GetSession(ctx, sess.ID)
	require.NoError(t, err)
	assert.Equal(t, "persist me", got.Title)
	host2, err := s.HostID(ctx)
	require.NoError(t, err)
	assert.Equal(t, host, host2)
}

func TestManagedMissingBinaries(t *testing.T) {
	t.Setenv("PATH", "")
	defer store.SetPGBinGlob(filepath.Join(t.TempDir(), "nonexistent", "*", "bin"))()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := store.StartManaged(ctx, storetest.ShortTempDir(t), quiet)
	require.ErrorIs(t, err, store.ErrPostgresNotFound)
	assert.Contains(t, err.Error(), "not found")
	assert.Contains(t, err.Error(), "apt-get install postgresql")
	assert.Contains(t, err.Error(), "DATABASE_URL")
}

func TestManagedSocketPathTooLong(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(storetest.ShortTempDir(t), strings.Repeat("d", 100))
	_, err := store.StartManaged(context.Background(), dir, quiet)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "too long")
	assert.Contains(t, err.Error(), filepath.Join(dir, "run"))
}

func TestManagedRootBlockedParent(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("only meaningful as root")
	}
	t.Parallel()
	blocked, err := os.MkdirTemp("", "ztb-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(blocked) })
	require.NoError(t, os.Chmod(blocked, 0o700))

	_, err = store.StartManaged(context.Background(), filepath.Join(blocked, "data"), quiet)
	require.Error(t, err)
	msg := err.Error()
	assert.Contains(t, msg, "cannot enter "+blocked+" ")
	assert.Contains(t, msg, "--data-dir /var/lib/zidane-server")
	assert.NoDirExists(t, filepath.Join(blocked, "data", "postgres"), "nothing initialised")
}

// TestManagedRootLeavesAnotherUsersCluster: as root, a data dir whose cluster an ordinary user's
// server made is refused with the owner named, and nothing in it changes owner (a fresh user's
// `token list` as root had chowned a stopped uid-1000 cluster, which then could not start).
func TestManagedRootLeavesAnotherUsersCluster(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("only meaningful as root")
	}
	t.Parallel()
	data := storetest.ShortTempDir(t)
	cluster := filepath.Join(data, "postgres")
	require.NoError(t, os.Mkdir(cluster, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(cluster, "PG_VERSION"), []byte("15\n"), 0o600))
	for _, p := range []string{cluster, filepath.Join(cluster, "PG_VERSION")} {
		require.NoError(t, os.Lchown(p, 1000, 1000))
	}
	_, err := store.StartManaged(context.Background(), data, quiet)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "uid 1000")
	assert.Contains(t, err.Error(), "run this command as that user")
	fi, err := os.Stat(filepath.Join(cluster, "PG_VERSION"))
	require.NoError(t, err)
	assert.EqualValues(t, 1000, fi.Sys().(*syscall.Stat_t).Uid, "the user's cluster keeps its owner")
}

// TestHealthSeesSmartShutdown: a PostgreSQL in smart shutdown keeps serving the pool's open
// connections but refuses new ones; Store.Health must report that (so /healthz says degraded)
// while Ping, which reuses a pooled connection, still succeeds.
func TestHealthSeesSmartShutdown(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := filepath.Join(storetest.ShortTempDir(t), "data")
	m, err := store.StartManaged(ctx, dir, quiet)
	require.NoError(t, err)
	t.Cleanup(func() { _ = m.Stop() })
	s, err := store.Open(ctx, m.URL(), store.Options{MaxConns: 2, Logger: quiet})
	require.NoError(t, err)
	require.NoError(t, s.Health(ctx))

	pidLine, err := os.ReadFile(filepath.Join(dir, "postgres", "postmaster.pid"))
	require.NoError(t, err)
	first, _, _ := strings.Cut(string(pidLine), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(first))
	require.NoError(t, err)
	require.NoError(t, syscall.Kill(pid, syscall.SIGTERM)) // smart shutdown: waits for open sessions

	var herr error
	require.Eventually(t, func() bool { herr = s.Health(ctx); return herr != nil }, 15*time.Second, 200*time.Millisecond,
		"Health must fail once new connections are refused")
	assert.ErrorIs(t, herr, store.ErrUnavailable)
	assert.NoError(t, s.Ping(ctx), "the pooled connection still works: Ping alone cannot see it")
	s.Close() // lets the smart shutdown finish
}

// TestFieldCase_B32_ManagedStopFollowsPostmasterPid (issue 7 item 3): after the cluster was
// restarted outside the Managed (pg_ctl restart, as an operator would), the postmaster is no
// longer the process the Managed started; Stop must stop the one postmaster.pid names, not the
// remembered (long exited) child, and wait until it is gone.
func TestFieldCase_B32_ManagedStopFollowsPostmasterPid(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := filepath.Join(storetest.ShortTempDir(t), "data")
	m, err := store.StartManaged(ctx, dir, quiet)
	require.NoError(t, err)
	t.Cleanup(func() { _ = m.Stop() })
	started := storetest.PostmasterPID(t, filepath.Join(dir, "postgres"))

	out, err := os.Create(filepath.Join(t.TempDir(), "pg_ctl.out"))
	require.NoError(t, err)
	defer out.Close()
	rctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	err = m.PGCtl(rctx, out, "restart", "-m", "fast", "-w", "-t", "60", "-l", filepath.Join(dir, "run", "pg_ctl.log"))
	if err != nil {
		b, _ := os.ReadFile(out.Name())
		t.Fatalf("pg_ctl restart: %v\n%s", err, b)
	}
	pid := storetest.PostmasterPID(t, filepath.Join(dir, "postgres"))
	require.NotEqual(t, started, pid, "pg_ctl started another postmaster")
	t.Cleanup(func() { // never leave it running, whatever Stop did
		if !store.ProcessGone(pid) {
			_ = syscall.Kill(pid, syscall.SIGQUIT)
		}
	})
	c, err := pgx.Connect(ctx, m.URL())
	require.NoError(t, err, "the restarted cluster serves the same socket")
	c.Close(ctx)

	require.NoError(t, m.Stop())
	assert.True(t, store.ProcessGone(pid), "Stop stopped the postmaster of postmaster.pid (pid %d), not only the child it started (pid %d)", pid, started)
	assert.NoFileExists(t, filepath.Join(dir, "postgres", "postmaster.pid"), "a clean shutdown removes postmaster.pid")
	cctx, ccancel := context.WithTimeout(ctx, 3*time.Second)
	defer ccancel()
	_, err = pgx.Connect(cctx, m.URL())
	assert.Error(t, err, "nothing serves the socket after Stop")
}
