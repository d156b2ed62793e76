// Package clienttest holds test helpers for the Go client and the CLI: a loopback TCP proxy
// that a test places between a client and a server (a real zidane-server or a test's own) to
// cut, stall, black-hole or refuse connections, so the server sees a real drop, not a restart.
package clienttest

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
)

// Proxy is a loopback TCP proxy to one target address. New connections are forwarded unless
// Stall or Respond say otherwise; RST, Blackhole and CutAfter act on open connections. It counts
// the connections it accepted and the most that were open at the same time.
type Proxy struct {
	ln     net.Listener
	target string

	mu         sync.Mutex
	mode       string // "forward", "stall", "respond"
	status     int
	blackholed bool
	pairs      map[*pair]struct{}
	accepted   int
	maxOpen    int
	cutAfter   int64  // bytes server→client left before a cut; -1 = not armed
	cutMatch   []byte // CutAtMatch's pattern; nil = not armed
	cutMatchN  int    // occurrences of cutMatch left before the cut
	cutTail    []byte // the last len(cutMatch)-1 bytes forwarded, for a match across reads
	cuts       int
	wg         sync.WaitGroup
	closed     bool
}

type pair struct {
	client     net.Conn
	blackholed bool // guarded by Proxy.mu
	once       sync.Once
	mu         sync.Mutex
	server     net.Conn
}

// Start listens on 127.0.0.1:0 and forwards to target (host:port); it is closed at cleanup.
func Start(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("clienttest: listen: %v", err)
	}
	p := &Proxy{ln: ln, target: target, mode: "forward", pairs: map[*pair]struct{}{}, cutAfter: -1}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.Close)
	return p
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// URL is ws://<Addr>/.
func (p *Proxy) URL() string { return "ws://" + p.Addr() + "/" }

// Close stops accepting and resets every open connection.
func (p *Proxy) Close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.ln.Close()
	p.RST()
	p.wg.Wait()
}

// RST resets every open connection on both sides (TCP RST, no close handshake).
func (p *Proxy) RST() {
	p.mu.Lock()
	ps := make([]*pair, 0, len(p.pairs))
	for x := range p.pairs {
		ps = append(ps, x)
	}
	p.mu.Unlock()
	for _, x := range ps {
		p.close(x)
	}
}

// Blackhole stops forwarding on every open connection and on new ones, keeping the sockets open
// (no FIN, no RST): what both sides send is dropped.
func (p *Proxy) Blackhole() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.blackholed = true
	for x := range p.pairs {
		x.blackholed = true
	}
}

// Forward makes new connections forwarded again (connections black-holed before stay so).
func (p *Proxy) Forward() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mode, p.blackholed = "forward", false
}

// SetTarget makes new connections go to addr (host:port), for example a server restarted on
// another port, so a client keeps its URL.
func (p *Proxy) SetTarget(addr string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.target = addr
}

// Stall makes new connections accepted and held without forwarding anything.
func (p *Proxy) Stall() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mode = "stall"
}

// Respond makes new connections answered with an HTTP status instead of the upgrade.
func (p *Proxy) Respond(status int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mode, p.status = "respond", status
}

// CutAfter arms one cut: after n more bytes from the server to the client (n = 0: at once, on
// the next byte), the connection carrying them is reset, possibly in the middle of a frame.
func (p *Proxy) CutAfter(n int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cutAfter = n
}

// CutAtMatch resets the connection that carries, server→client, the n-th occurrence (n >= 1)
// of pattern counted from now, right after the pattern's last byte: the client reads the
// bytes before it and nothing after (a frame holding the pattern arrives cut). Unlike a cut
// where the client's consumer has seen something, it bounds what the connection itself read,
// whatever the client buffers ahead of its consumer. Once.
func (p *Proxy) CutAtMatch(pattern string, n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cutMatch, p.cutMatchN, p.cutTail = []byte(pattern), n, nil
}

// Armed reports whether a CutAfter is still waiting.
func (p *Proxy) Armed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cutAfter >= 0 || p.cutMatch != nil
}

// Cuts counts the cuts CutAfter made.
func (p *Proxy) Cuts() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cuts
}

// Accepted counts the connections accepted so far.
func (p *Proxy) Accepted() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.accepted
}

// Open counts the connections open now; MaxOpen the most open at once.
func (p *Proxy) Open() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.pairs)
}

// MaxOpen is the most connections that were open at the same time.
func (p *Proxy) MaxOpen() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.maxOpen
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			c.Close()
			return
		}
		p.accepted++
		x := &pair{client: c, blackholed: p.blackholed}
		p.pairs[x] = struct{}{}
		if len(p.pairs) > p.maxOpen {
			p.maxOpen = len(p.pairs)
		}
		mode, status := p.mode, p.status
		p.mu.Unlock()
		p.wg.Add(1)
		go p.serve(x, mode, status)
	}
}

func (p *Proxy) drop(x *pair) {
	p.mu.Lock()
	delete(p.pairs, x)
	p.mu.Unlock()
}

// close resets a pair the proxy ends itself. It stops counting as open first: once its sockets
// close the client may connect again at once, and that new connection must not find the old one
// still counted (Open, MaxOpen: a client that never held two sockets was seen holding two).
func (p *Proxy) close(x *pair) {
	p.drop(x)
	x.reset()
}

// closedConn marks a pair reset before its server side was dialed.
var closedConn net.Conn = &net.TCPConn{}

func (x *pair) reset() {
	x.once.Do(func() {
		x.mu.Lock()
		server := x.server
		x.server = closedConn
		x.mu.Unlock()
		for _, c := range []net.Conn{x.client, server} {
			if c == nil || c == closedConn {
				continue
			}
			if tc, ok := c.(*net.TCPConn); ok {
				tc.SetLinger(0) // Close sends RST
			}
			c.Close()
		}
	})
}

func (p *Proxy) serve(x *pair, mode string, status int) {
	defer p.wg.Done()
	defer p.drop(x)
	switch mode {
	case "stall":
		io.Copy(io.Discard, x.client) // hold until the client or RST closes it
		p.close(x)
		return
	case "respond":
		req, err := http.ReadRequest(bufio.NewReader(x.client))
		p.drop(x) // before the answer, after which the client may connect again (close)
		if err == nil {
			req.Body.Close()
			fmt.Fprintf(x.client, "HTTP/1.1 %d %s\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", status, http.StatusText(status))
		}
		x.client.Close()
		return
	}
	p.mu.Lock()
	target := p.target
	p.mu.Unlock()
	s, err := net.Dial("tcp", target)
	if err != nil {
		p.close(x)
		return
	}
	x.mu.Lock()
	if x.server == closedConn { // reset while dialing
		x.mu.Unlock()
		s.Close()
		return
	}
	x.server = s
	x.mu.Unlock()
	done := make(chan struct{}, 2)
	go func() { p.copy(x, x.client, s, false); done <- struct{}{} }()
	go func() { p.copy(x, s, x.client, true); done <- struct{}{} }()
	<-done
	p.close(x)
	<-done
}

// matchLocked counts the occurrences of cutMatch in b (with the bytes forwarded before it) and
// returns the length of b up to the end of the occurrence that completes cutMatchN, or -1.
func (p *Proxy) matchLocked(b []byte) int {
	k := len(p.cutTail)
	buf := append(append([]byte{}, p.cutTail...), b...)
	from := 0
	for {
		i := bytes.Index(buf[from:], p.cutMatch)
		if i < 0 {
			break
		}
		from += i + len(p.cutMatch)
		if p.cutMatchN--; p.cutMatchN <= 0 {
			return from - k
		}
	}
	keep := len(p.cutMatch) - 1
	if keep > len(buf) {
		keep = len(buf)
	}
	p.cutTail = append(p.cutTail[:0], buf[len(buf)-keep:]...)
	return -1
}

// copy forwards src to dst; down is the server→client direction, where cuts happen.
func (p *Proxy) copy(x *pair, src, dst net.Conn, down bool) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			b := buf[:n]
			p.mu.Lock()
			hole := x.blackholed
			cut := false
			if down && !hole && p.cutMatch != nil {
				if end := p.matchLocked(b); end >= 0 {
					b = b[:end]
					cut = true
					p.cutMatch = nil
					p.cuts++
				}
			}
			if down && !hole && !cut && p.cutAfter >= 0 {
				if int64(len(b)) > p.cutAfter {
					b = b[:p.cutAfter]
					cut = true
					p.cutAfter = -1
					p.cuts++
				} else {
					p.cutAfter -= int64(len(b))
				}
			}
			p.mu.Unlock()
			if !hole && len(b) > 0 {
				if _, werr := dst.Write(b); werr != nil {
					return
				}
			}
			if cut {
				p.close(x)
				return
			}
		}
		if err != nil {
			return
		}
	}
}
