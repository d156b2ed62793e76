package store_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zidane-server/zidane/server/store"
	"github.com/zidane-server/zidane/server/store/storetest"
)

func TestSessionSandboxPolicy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.New(t)
	a, err := s.CreateSession(ctx, store.Session{Title: "a", ProjectRoot: "/p", Cwd: "/p", AgentID: "x", Status: "idle"})
	require.NoError(t, err)

	p, err := s.SessionSandbox(ctx, a.ID)
	require.NoError(t, err)
	assert.Empty(t, p, "no policy set: the server's default")

	require.NoError(t, s.SetSessionSandbox(ctx, a.ID, "read-only"))
	require.NoError(t, s.SetSessionSandbox(ctx, a.ID, "workspace-write+network"))
	p, err = s.SessionSandbox(ctx, a.ID)
	require.NoError(t, err)
	assert.Equal(t, "workspace-write+network", p)

	require.NoError(t, s.SetSessionSandbox(ctx, a.ID, ""))
	p, err = s.SessionSandbox(ctx, a.ID)
	require.NoError(t, err)
	assert.Empty(t, p)

	missing := "7d1c1b0e-5d6c-4b53-9e43-7ad8d1f1a2b3"
	_, err = s.SessionSandbox(ctx, missing)
	assert.ErrorIs(t, err, store.ErrNotFound)
	assert.ErrorIs(t, s.SetSessionSandbox(ctx, missing, "read-only"), store.ErrNotFound)
	assert.ErrorIs(t, s.SetSessionSandbox(ctx, "not-a-uuid", "read-only"), store.ErrNotFound)
}
