package store_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zidane-server/zidane/server/store"
	"github.com/zidane-server/zidane/server/store/storetest"
)

// TestFieldCase_T13_SupervisorAdoptsPgCtlRestart (issue 22 item 3): a cluster an operator
// restarts with pg_ctl under a supervised Managed is watched, not fought (no failed restart, the
// operator's pg_ctl succeeds); when that postmaster dies, the supervisor starts its own again.
func TestFieldCase_T13_SupervisorAdoptsPgCtlRestart(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := filepath.Join(storetest.ShortTempDir(t), "data")
	h := &countingHandler{n: map[string]int{}}
	defer h.dump(t)
	m, err := store.StartManaged(ctx, dir, slog.New(h))
	require.NoError(t, err)
	t.Cleanup(func() { _ = m.Stop() })
	supervised := make(chan error, 1)
	go func() { supervised <- m.Supervise(ctx, store.SuperviseOptions{Backoff: 100 * time.Millisecond}) }()

	out, err := os.Create(filepath.Join(t.TempDir(), "pg_ctl.out"))
	require.NoError(t, err)
	defer out.Close()
	err = m.PGCtl(ctx, out, "restart", "-m", "fast", "-w", "-t", "60", "-l", filepath.Join(dir, "run", "pg_ctl.log"))
	if err != nil {
		b, _ := os.ReadFile(out.Name())
		t.Fatalf("pg_ctl restart under a supervisor: %v\n%s", err, b)
	}
	adopted := storetest.PostmasterPID(t, filepath.Join(dir, "postgres"))
	t.Cleanup(func() {
		if !store.ProcessGone(adopted) {
			_ = syscall.Kill(adopted, syscall.SIGQUIT)
		}
	})
	const adopt = "WARN managed postgres: another postmaster serves the cluster (started outside this server, e.g. pg_ctl); watching it"
	require.Eventually(t, func() bool { return h.count(adopt) == 1 }, 10*time.Second, 10*time.Millisecond)
	assert.Zero(t, h.count("WARN managed postgres: restart failed"))

	require.NoError(t, syscall.Kill(adopted, syscall.SIGKILL))
	require.Eventually(t, func() bool { return h.count("INFO managed postgres: restarted") == 1 }, 30*time.Second, 10*time.Millisecond)
	assert.Equal(t, 1, h.count("ERROR managed postgres: the postmaster exited; restarting it"))
	assert.NotEqual(t, adopted, storetest.PostmasterPID(t, filepath.Join(dir, "postgres")))
	c, err := pgx.Connect(ctx, m.URL())
	require.NoError(t, err, "the restarted cluster serves the socket")
	c.Close(ctx)

	require.NoError(t, m.Stop())
	require.NoError(t, <-supervised, "Stop ends supervision")
	assert.Zero(t, h.count("WARN managed postgres: restart failed"))
}
