package server

import (
	"bytes"
	"net"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// countingConn records each write(2) the corkConn makes.
type countingConn struct {
	net.Conn
	mu     sync.Mutex
	writes [][]byte
}

func (c *countingConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.writes = append(c.writes, bytes.Clone(p))
	return len(p), nil
}

// TestCorkConn: uncorked writes go straight through; corked ones, from any goroutine, leave in
// their order with one write at uncork; a corked connection holds at most maxCorked.
func TestCorkConn(t *testing.T) {
	under := &countingConn{}
	c := &corkConn{Conn: under}
	_, _ = c.Write([]byte("a"))
	require.Len(t, under.writes, 1)

	c.cork()
	_, _ = c.Write([]byte("b"))
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _, _ = c.Write([]byte("c")) }() // a ping or close frame meanwhile
	wg.Wait()
	_, _ = c.Write([]byte("d"))
	require.Len(t, under.writes, 1, "nothing leaves while corked")
	require.NoError(t, c.uncork())
	require.Equal(t, [][]byte{[]byte("a"), []byte("bcd")}, under.writes)
	require.Nil(t, c.held, "no buffer kept between batches")

	under.writes = nil
	c.cork()
	big := bytes.Repeat([]byte("x"), maxCorked-1)
	_, _ = c.Write(big)
	_, _ = c.Write([]byte("yy")) // past the bound: what is held goes first
	require.Equal(t, [][]byte{big, []byte("yy")}, under.writes)
	require.NoError(t, c.uncork())
	require.Len(t, under.writes, 2)
	require.NoError(t, c.uncork(), "uncork without anything held")
}
