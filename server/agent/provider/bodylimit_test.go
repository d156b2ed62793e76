package provider

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A response body read under WithBodyLimit gives max bytes, then ErrBodyLimit, with exceeded
// called once; without the bound, with max <= 0, or a body of exactly max bytes, it is read whole.
func TestLimitBodies(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, strings.Repeat("x", 1<<20))
	}))
	defer srv.Close()
	hc := &http.Client{Transport: LimitBodies(nil)}
	get := func(ctx context.Context) ([]byte, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
		require.NoError(t, err)
		resp, err := hc.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		return io.ReadAll(resp.Body)
	}
	calls := 0
	b, err := get(WithBodyLimit(context.Background(), 1000, func() { calls++ }))
	assert.ErrorIs(t, err, ErrBodyLimit)
	assert.Len(t, b, 1000)
	assert.Equal(t, 1, calls)
	for _, ctx := range []context.Context{context.Background(), WithBodyLimit(context.Background(), 0, nil), WithBodyLimit(context.Background(), 1<<20, nil)} {
		b, err = get(ctx)
		require.NoError(t, err)
		assert.Len(t, b, 1<<20)
	}
}
