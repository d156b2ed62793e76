package server

import (
	"bufio"
	"net"
	"net/http"
	"sync"
)

// corkConn is a WebSocket's network connection that can hold what is written to it while corked
// and send it with one write(2) at uncork. coder/websocket flushes every message with a write of
// its own (it has no way to write several messages at once); the connection's writer corks around
// a batch of queued frames (conn.write), so a batch costs one system call instead of one per
// frame. That system call per frame was about half the server's CPU per delivered signal in the
// fan-out figure of docs/benchmarks.md.
//
// Only the order of the bytes matters to the peer, and it is kept: a frame another goroutine
// writes while corked (a ping, the close frame) is held behind the batch and leaves with it. The
// batch's deadline (conn.write's timer) covers the uncorking write, the only one that can block.
type corkConn struct {
	net.Conn
	mu     sync.Mutex
	corked bool
	held   *[]byte // from heldPool while something is held
}

// maxCorked is how much a corked connection holds at most; past it what is held is written.
const maxCorked = 256 << 10

// heldPool lends the buffers of corked connections: a connection keeps none between batches.
var heldPool = sync.Pool{New: func() any { b := make([]byte, 0, 16<<10); return &b }}

// Write holds p while corked, else writes it. A blocking write happens under mu, so a frame
// written meanwhile waits behind it, as coder/websocket's own write lock would make it; the
// batch's deadline ends such a wait.
func (c *corkConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.corked {
		return c.Conn.Write(p)
	}
	if c.held == nil {
		c.held = heldPool.Get().(*[]byte)
	}
	if len(*c.held)+len(p) > maxCorked {
		if err := c.flushLocked(); err != nil {
			return 0, err
		}
		return c.Conn.Write(p)
	}
	*c.held = append(*c.held, p...)
	return len(p), nil
}

// cork holds what is written from now on until uncork.
func (c *corkConn) cork() {
	c.mu.Lock()
	c.corked = true
	c.mu.Unlock()
}

// uncork writes what was held, with one write(2), and stops holding.
func (c *corkConn) uncork() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.corked = false
	return c.flushLocked()
}

// flushLocked writes what is held and gives the buffer back.
func (c *corkConn) flushLocked() error {
	if c.held == nil {
		return nil
	}
	var err error
	if len(*c.held) > 0 {
		_, err = c.Conn.Write(*c.held)
	}
	if cap(*c.held) <= maxCorked { // a buffer grown past the bound by one large frame is dropped
		*c.held = (*c.held)[:0]
		heldPool.Put(c.held)
	}
	c.held = nil
	return err
}

// corkingWriter hands coder/websocket's Accept the hijacked connection as a corkConn.
type corkingWriter struct {
	http.ResponseWriter
	conn *corkConn // set by Hijack
}

func (w *corkingWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	hj, ok := w.ResponseWriter.(http.Hijacker)
	if !ok {
		return nil, nil, http.ErrNotSupported
	}
	nc, brw, err := hj.Hijack()
	if err != nil {
		return nil, nil, err
	}
	if err := brw.Writer.Flush(); err != nil { // nothing is buffered there; kept in order if it were
		nc.Close()
		return nil, nil, err
	}
	w.conn = &corkConn{Conn: nc}
	brw.Writer.Reset(w.conn)
	return w.conn, brw, nil
}
