// Package client is the Go client of zidane-server: it dials the WebSocket with a token, does the
// ipc.hello handshake, makes typed calls (methods_gen.go) and delivers ipc.signal notifications.
package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/coder/websocket"

	"github.com/zidane-server/zidane/protocol"
)

// Options configure Dial.
type Options struct {
	// Token is the bearer token (zds_…); it travels in the Authorization header.
	Token string
	// AppVersion is sent in ipc.hello and shows in the server's logs; default "zidane-go".
	AppVersion string
	// ReadLimit is the largest message the client accepts, in bytes; default 16 MiB.
	ReadLimit int64
	// HTTPClient dials the WebSocket; default http.DefaultClient.
	HTTPClient *http.Client
	// Header adds request headers to the upgrade request (for example Origin).
	Header http.Header
}

// SignalEvent is one ipc.signal notification.
type SignalEvent struct {
	// Seq is the signal's $seq in its session; 0 for signals without a session.
	Seq int64
	// Signal is the decoded signal; an unknown kind is *protocol.UnknownSignal.
	Signal protocol.Signal
	// Raw is the notification's params as received.
	Raw json.RawMessage
}

type response struct {
	Result json.RawMessage
	Err    *protocol.Error
}

// Client is one connection to a server. Its methods are safe for concurrent use.
type Client struct {
	conn    *websocket.Conn
	hello   *protocol.IPCHelloResult
	nextID  atomic.Int64
	mu      sync.Mutex
	pending map[string]chan response
	closed  bool
	err     error
	done    chan struct{}

	sigMu    sync.Mutex
	sigQueue []SignalEvent
	sigWake  chan struct{}
	signals  chan SignalEvent

	closeOnce  sync.Once
	userClosed chan struct{}
}

// ErrClosed is returned by calls on a closed connection.
var ErrClosed = errors.New("zidane client: connection closed")

// Dial connects to url (ws://, wss://, or unix:///path/to/socket), authenticates with opts.Token and completes the
// ipc.hello handshake. An HTTP refusal (401, 403) is returned as an error naming the status.
func Dial(ctx context.Context, url string, opts Options) (*Client, error) {
	h := http.Header{}
	for k, v := range opts.Header {
		h[k] = v
	}
	if opts.Token != "" {
		h.Set("Authorization", "Bearer "+opts.Token)
	}
	httpClient := opts.HTTPClient
	if strings.HasPrefix(url, "unix://") {
		httpClient, url = unixClient(url)
	}
	conn, resp, err := websocket.Dial(ctx, url, &websocket.DialOptions{
		HTTPClient:   httpClient,
		HTTPHeader:   h,
		Subprotocols: []string{"zidane"},
	})
	if err != nil {
		if resp != nil && resp.StatusCode >= 400 {
			return nil, fmt.Errorf("zidane client: the server refused the connection: %s", resp.Status)
		}
		return nil, fmt.Errorf("zidane client: dial %s: %w", url, err)
	}
	limit := opts.ReadLimit
	if limit <= 0 {
		limit = 16 << 20
	}
	conn.SetReadLimit(limit)
	c := &Client{
		conn:    conn,
		pending: map[string]chan response{},
		done:    make(chan struct{}),
		sigWake: make(chan struct{}, 1),
		signals: make(chan SignalEvent),

		userClosed: make(chan struct{}),
	}
	go c.readLoop()
	go c.deliverSignals()
	app := opts.AppVersion
	if app == "" {
		app = "zidane-go"
	}
	pid := int64(os.Getpid())
	hello, err := c.IPCHello(ctx, &protocol.IPCHelloParams{ProtocolVersion: protocol.ProtocolVersion, MinProtocolVersion: ptr(protocol.MinProtocolVersion), AppVersion: &app, PID: &pid})
	if err != nil {
		c.Close()
		return nil, err
	}
	if n := hello.NegotiatedProtocolVersion; n < protocol.MinProtocolVersion || n > protocol.ProtocolVersion {
		c.conn.Close(4001, "negotiated protocol version outside the client's range")
		c.fail(ErrClosed)
		return nil, fmt.Errorf("zidane client: the server chose protocol v%d, outside this client's v%d–v%d; upgrade the client", n, protocol.MinProtocolVersion, protocol.ProtocolVersion)
	}
	c.hello = hello
	return c, nil
}

func ptr[T any](v T) *T { return &v }

// Hello returns the server's answer to the handshake.
func (c *Client) Hello() *protocol.IPCHelloResult { return c.hello }

// Signals delivers every ipc.signal in arrival order. Signals are queued without bound so a slow
// reader never stalls responses; the channel closes when the connection ends.
func (c *Client) Signals() <-chan SignalEvent { return c.signals }

// Done is closed when the connection ends; Err then says why.
func (c *Client) Done() <-chan struct{} { return c.done }

// Err returns why the connection ended, or nil while it is open.
func (c *Client) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Close closes the connection with status 1000 and stops delivering signals.
func (c *Client) Close() error {
	c.closeOnce.Do(func() { close(c.userClosed) })
	err := c.conn.Close(websocket.StatusNormalClosure, "")
	c.fail(ErrClosed)
	return err
}

// Call sends a request and decodes its result into result (a pointer, or nil to discard it).
// A JSON-RPC error is returned as *protocol.Error. nil params send {}.
func (c *Client) Call(ctx context.Context, method string, params, result any) error {
	id := strconv.FormatInt(c.nextID.Add(1), 10)
	ch := make(chan response, 1)
	c.mu.Lock()
	if c.closed {
		err := c.err
		c.mu.Unlock()
		return err
	}
	c.pending[id] = ch
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.pending, id)
		c.mu.Unlock()
	}()
	var raw json.RawMessage = json.RawMessage("{}")
	if params != nil && !isNilPtr(params) {
		b, err := json.Marshal(params)
		if err != nil {
			return fmt.Errorf("zidane client: encode %s params: %w", method, err)
		}
		raw = b
	}
	msg, _ := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      int64           `json:"id"`
		Method  string          `json:"method"`
		Params  json.RawMessage `json:"params"`
	}{"2.0", mustInt(id), method, raw})
	if err := c.conn.Write(ctx, websocket.MessageText, msg); err != nil {
		return fmt.Errorf("zidane client: send %s: %w", method, err)
	}
	select {
	case r := <-ch:
		if r.Err != nil {
			return r.Err
		}
		if result != nil {
			if err := json.Unmarshal(r.Result, result); err != nil {
				return fmt.Errorf("zidane client: decode %s result: %w", method, err)
			}
		}
		return nil
	case <-c.done:
		return c.Err()
	case <-ctx.Done():
		return ctx.Err()
	}
}

func mustInt(s string) int64 {
	n, _ := strconv.ParseInt(s, 10, 64)
	return n
}

func isNilPtr(v any) bool {
	rv := reflect.ValueOf(v)
	return rv.Kind() == reflect.Pointer && rv.IsNil()
}

func (c *Client) fail(err error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	c.err = err
	c.mu.Unlock()
	close(c.done)
	select {
	case c.sigWake <- struct{}{}:
	default:
	}
}

func (c *Client) readLoop() {
	for {
		_, data, err := c.conn.Read(context.Background())
		if err != nil {
			c.fail(fmt.Errorf("zidane client: connection closed: %w", err))
			return
		}
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
			Result json.RawMessage `json:"result"`
			Error  *protocol.Error `json:"error"`
		}
		if err := json.Unmarshal(data, &m); err != nil {
			continue // not ours to fail on: ignore what cannot be read
		}
		if m.Method == "ipc.signal" {
			ev := SignalEvent{Raw: m.Params}
			var seq struct {
				Seq int64 `json:"$seq"`
			}
			_ = json.Unmarshal(m.Params, &seq)
			ev.Seq = seq.Seq
			sig, err := protocol.DecodeSignal(m.Params)
			if err != nil {
				continue
			}
			ev.Signal = sig
			c.sigMu.Lock()
			c.sigQueue = append(c.sigQueue, ev)
			c.sigMu.Unlock()
			select {
			case c.sigWake <- struct{}{}:
			default:
			}
			continue
		}
		if len(m.ID) == 0 || m.Method != "" {
			continue
		}
		c.mu.Lock()
		ch := c.pending[string(m.ID)]
		c.mu.Unlock()
		if ch != nil {
			ch <- response{Result: m.Result, Err: m.Error}
		}
	}
}

func (c *Client) deliverSignals() {
	defer close(c.signals)
	for {
		c.sigMu.Lock()
		q := c.sigQueue
		c.sigQueue = nil
		c.sigMu.Unlock()
		if len(q) == 0 {
			select {
			case <-c.sigWake:
				continue
			case <-c.done:
				c.sigMu.Lock()
				n := len(c.sigQueue)
				c.sigMu.Unlock()
				if n == 0 {
					return
				}
				continue
			}
		}
		for _, ev := range q {
			select {
			case c.signals <- ev:
			case <-c.userClosed:
				return
			}
		}
	}
}
