package server

import (
	"bufio"
	"crypto/rand"
	"crypto/sha1"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// rawConn is a minimal RFC 6455 client written from scratch over net.Conn, able to send what
// a well-behaved library never sends: any opcode, RSV bits, fragments, invalid UTF-8 and
// oversized control frames. Frames it sends are masked, as a client's must be.
type rawConn struct {
	t  *testing.T
	c  net.Conn
	br *bufio.Reader
}

// Opcodes (RFC 6455 §5.2).
const (
	opCont   = 0x0
	opText   = 0x1
	opBinary = 0x2
	opClose  = 0x8
	opPing   = 0x9
	opPong   = 0xA
)

// rawHandshake sends an upgrade request with the given extra header lines ("Name: value")
// and returns the connection and the parsed response. The body of a non-101 answer is read.
func rawHandshake(t *testing.T, e *testEnv, headerLines ...string) (*rawConn, *http.Response) {
	t.Helper()
	addr := strings.TrimPrefix(e.hs.URL, "http://")
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	var key [16]byte
	_, _ = rand.Read(key[:])
	k := base64.StdEncoding.EncodeToString(key[:])
	var b strings.Builder
	fmt.Fprintf(&b, "GET / HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: %s\r\n", addr, k)
	for _, h := range headerLines {
		b.WriteString(h + "\r\n")
	}
	b.WriteString("\r\n")
	require.NoError(t, c.SetDeadline(time.Now().Add(10*time.Second)))
	_, err = io.WriteString(c, b.String())
	require.NoError(t, err)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodGet})
	require.NoError(t, err)
	if resp.StatusCode == http.StatusSwitchingProtocols {
		sum := sha1.Sum([]byte(k + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"))
		require.Equal(t, base64.StdEncoding.EncodeToString(sum[:]), resp.Header.Get("Sec-WebSocket-Accept"))
	} else {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
		resp.Body.Close()
		resp.Body = io.NopCloser(strings.NewReader(string(body)))
	}
	_ = c.SetDeadline(time.Time{})
	return &rawConn{t: t, c: c, br: br}, resp
}

// dialRaw upgrades with Authorization: Bearer and requires 101.
func dialRaw(t *testing.T, e *testEnv) *rawConn {
	t.Helper()
	rc, resp := rawHandshake(t, e, "Authorization: Bearer "+e.token)
	require.Equal(t, http.StatusSwitchingProtocols, resp.StatusCode)
	return rc
}

// frame writes one masked frame. rsv holds the RSV1..3 bits as 0b100, 0b010, 0b001.
func (r *rawConn) frame(fin bool, rsv byte, op byte, payload []byte) {
	r.t.Helper()
	var hdr []byte
	b0 := op & 0x0F
	if fin {
		b0 |= 0x80
	}
	b0 |= (rsv & 0x7) << 4
	hdr = append(hdr, b0)
	n := len(payload)
	switch {
	case n < 126:
		hdr = append(hdr, 0x80|byte(n))
	case n <= 0xFFFF:
		hdr = append(hdr, 0x80|126, byte(n>>8), byte(n))
	default:
		hdr = append(hdr, 0x80|127)
		hdr = binary.BigEndian.AppendUint64(hdr, uint64(n))
	}
	var mask [4]byte
	_, _ = rand.Read(mask[:])
	hdr = append(hdr, mask[:]...)
	masked := make([]byte, n)
	for i := range payload {
		masked[i] = payload[i] ^ mask[i%4]
	}
	require.NoError(r.t, r.c.SetWriteDeadline(time.Now().Add(10*time.Second)))
	_, err := r.c.Write(append(hdr, masked...))
	require.NoError(r.t, err)
}

// text sends one unfragmented text message.
func (r *rawConn) text(s string) { r.frame(true, 0, opText, []byte(s)) }

// readFrame reads one server frame (servers never mask).
func (r *rawConn) readFrame(d time.Duration) (fin bool, op byte, payload []byte, err error) {
	_ = r.c.SetReadDeadline(time.Now().Add(d))
	var h [2]byte
	if _, err = io.ReadFull(r.br, h[:]); err != nil {
		return
	}
	fin = h[0]&0x80 != 0
	op = h[0] & 0x0F
	if h[1]&0x80 != 0 {
		return false, 0, nil, errors.New("server frame is masked")
	}
	n := uint64(h[1] & 0x7F)
	switch n {
	case 126:
		var x [2]byte
		if _, err = io.ReadFull(r.br, x[:]); err != nil {
			return
		}
		n = uint64(binary.BigEndian.Uint16(x[:]))
	case 127:
		var x [8]byte
		if _, err = io.ReadFull(r.br, x[:]); err != nil {
			return
		}
		n = binary.BigEndian.Uint64(x[:])
	}
	if n > 64<<20 {
		return false, 0, nil, fmt.Errorf("frame of %d bytes", n)
	}
	payload = make([]byte, n)
	_, err = io.ReadFull(r.br, payload)
	return
}

// readText returns the next text message (answering pings, skipping pongs); it fails on close.
func (r *rawConn) readText() string {
	r.t.Helper()
	for {
		fin, op, p, err := r.readFrame(10 * time.Second)
		require.NoError(r.t, err)
		switch op {
		case opPing:
			r.frame(true, 0, opPong, p)
		case opPong:
		case opText:
			require.True(r.t, fin, "server messages are not fragmented")
			return string(p)
		case opClose:
			r.t.Fatalf("server closed: %d %q", closeCode(p), p[min(2, len(p)):])
		default:
			r.t.Fatalf("unexpected opcode %#x", op)
		}
	}
}

// expectClose reads until the server's close frame and returns its code (-1 if the TCP
// connection ended without one). Data frames before it are skipped.
func (r *rawConn) expectClose() int {
	r.t.Helper()
	for {
		_, op, p, err := r.readFrame(15 * time.Second)
		if err != nil {
			return -1
		}
		if op == opClose {
			return closeCode(p)
		}
		if op == opPing {
			r.frame(true, 0, opPong, p)
		}
	}
}

func closeCode(p []byte) int {
	if len(p) < 2 {
		return 1005
	}
	return int(binary.BigEndian.Uint16(p))
}

// rawHello performs ipc.hello over a raw connection.
func (r *rawConn) hello() {
	r.t.Helper()
	r.text(`{"jsonrpc":"2.0","id":"hello","method":"ipc.hello","params":` + helloParams + `}`)
	m := decodeObj(r.t, []byte(r.readText()))
	require.Nil(r.t, m["error"], "hello: %v", m)
}

// TestRawWS_ProtocolErrors sends frames that RFC 6455 forbids and checks the close code; after
// each, the same server still serves another client.
func TestRawWS_ProtocolErrors(t *testing.T) {
	e := newEnv(t, nil)
	cases := []struct {
		name string
		send func(r *rawConn)
		code int
	}{
		{"reserved data opcode 0x3", func(r *rawConn) { r.frame(true, 0, 0x3, []byte("x")) }, 1002},
		{"reserved control opcode 0xB", func(r *rawConn) { r.frame(true, 0, 0xB, nil) }, 1002},
		{"RSV1 without an extension", func(r *rawConn) { r.frame(true, 0b100, opText, []byte(`{}`)) }, 1002},
		{"RSV2", func(r *rawConn) { r.frame(true, 0b010, opText, []byte(`{}`)) }, 1002},
		{"ping with a 126-byte payload", func(r *rawConn) { r.frame(true, 0, opPing, make([]byte, 126)) }, 1002},
		{"fragmented ping", func(r *rawConn) { r.frame(false, 0, opPing, []byte("a")) }, 1002},
		{"continuation without a start", func(r *rawConn) { r.frame(true, 0, opCont, []byte("x")) }, 1002},
		{"binary frame", func(r *rawConn) {
			r.frame(true, 0, opBinary, []byte(`{"jsonrpc":"2.0","id":1,"method":"$/ping","params":{}}`))
		}, 1003},
		{"invalid UTF-8 text", func(r *rawConn) {
			r.frame(true, 0, opText, []byte("{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"$/ping\",\"params\":{\"s\":\"\xff\"}}"))
		}, 1007},
		{"invalid UTF-8 split over fragments", func(r *rawConn) {
			r.frame(false, 0, opText, []byte("{\"s\":\"\xf0\x9f"))
			r.frame(true, 0, opCont, []byte("\x98\"}"))
		}, 1007},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := dialRaw(t, e)
			r.hello()
			tc.send(r)
			require.Equal(t, tc.code, r.expectClose())
			other := e.dial()
			other.hello()
			other.result("$/ping", `{}`)
		})
	}
}

// TestRawWS_PingAnswered checks that a client ping gets its pong and the connection stays.
func TestRawWS_PingAnswered(t *testing.T) {
	e := newEnv(t, nil)
	r := dialRaw(t, e)
	r.frame(true, 0, opPing, []byte("abc"))
	_, op, p, err := r.readFrame(5 * time.Second)
	require.NoError(t, err)
	require.Equal(t, byte(opPong), op)
	require.Equal(t, "abc", string(p))
	r.hello()
}
