package main

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zidane-server/zidane/client"
)

// TestExplainNoServerAtURL: a ZIDANE_URL where nothing listens is named, with the network's own
// words and what to do, not the client library's chain of wrapped errors.
func TestExplainNoServerAtURL(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	url := "ws://" + l.Addr().String()
	require.NoError(t, l.Close()) // nothing listens there now
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = client.Dial(ctx, url, client.Options{Token: "zds_x"})
	require.Error(t, err)
	msg := explain(target{url: url, token: "zds_x"}, err)
	assert.Equal(t, "no server answers at "+url+" (ZIDANE_URL): connect: connection refused. Check the address, or start the server (`make run` or `zidane-server start`)", msg)
}

// TestBadZidaneURL: a ZIDANE_URL that is no server address is bad usage (exit 2), said before the
// token is asked for.
func TestBadZidaneURL(t *testing.T) {
	for _, u := range []string{":::", "localhost:4380", "ftp://host", "ws://[::1", "ws://", "unix://"} {
		t.Setenv("ZIDANE_URL", u)
		t.Setenv("ZIDANE_TOKEN", "")
		var stderr strings.Builder
		_, code := resolveTarget(promptOptions{}, &stderr)
		assert.Equal(t, exitUsage, code, u)
		assert.Contains(t, stderr.String(), "is not a server address: use ws://HOST:PORT", u)
	}
	for _, u := range []string{"ws://127.0.0.1:4380", "wss://example.com", "http://[::1]:4380/x", "unix:///tmp/z.sock"} {
		assert.True(t, serverURL(u), u)
	}
}
