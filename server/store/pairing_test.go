package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zidane-server/zidane/server/store"
	"github.com/zidane-server/zidane/server/store/storetest"
)

func TestPairingCodes(t *testing.T) {
	st := storetest.New(t)
	ctx := context.Background()
	code, exp, err := st.CreatePairingCode(ctx, "chat", time.Minute, 0)
	require.NoError(t, err)
	assert.Regexp(t, `^[A-Z2-9]{4}-[A-Z2-9]{4}$`, code)
	assert.WithinDuration(t, time.Now().Add(time.Minute), exp, 5*time.Second)

	// Typed loosely: lower case, no dash.
	plain, tok, err := st.RedeemPairingCode(ctx, "  "+store.NormalizePairCode(code)[:4]+" "+code[5:], "phone")
	require.NoError(t, err)
	assert.Equal(t, "chat", tok.Scope)
	got, err := st.LookupToken(ctx, plain)
	require.NoError(t, err)
	assert.Equal(t, tok.ID, got.ID)

	// Single use.
	_, _, err = st.RedeemPairingCode(ctx, code, "phone2")
	assert.ErrorIs(t, err, store.ErrPairingUsed, "a used code is spent, not unknown")
	// Unknown.
	_, _, err = st.RedeemPairingCode(ctx, "ABCD-EFGH", "x")
	assert.ErrorIs(t, err, store.ErrNotFound)
	// Expired.
	short, _, err := st.CreatePairingCode(ctx, "admin", time.Second, 0)
	require.NoError(t, err)
	time.Sleep(1100 * time.Millisecond)
	_, _, err = st.RedeemPairingCode(ctx, short, "late")
	assert.ErrorIs(t, err, store.ErrNotFound)
	// A taken name leaves the code usable.
	c2, _, err := st.CreatePairingCode(ctx, "chat", time.Minute, 0)
	require.NoError(t, err)
	_, _, err = st.RedeemPairingCode(ctx, c2, "phone")
	assert.ErrorIs(t, err, store.ErrNameTaken)
	_, _, err = st.RedeemPairingCode(ctx, c2, "tablet")
	assert.NoError(t, err)
	// Bad scope.
	_, _, err = st.CreatePairingCode(ctx, "root", time.Minute, 0)
	assert.ErrorIs(t, err, store.ErrInvalidScope)
}
