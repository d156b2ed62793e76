package main

import (
	"context"
	"net"
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
