// Package client is the Go client of zidane-server: it dials the WebSocket with a token, does the
// ipc.hello handshake, makes typed calls (methods_gen.go) and delivers ipc.signal notifications.
//
// A Client keeps itself connected (protocol seed, "Reconnect and resume"): when its connection
// drops it reconnects with exponential backoff and jitter (Options.Backoff), sends $/ping every
// Options.PingInterval and treats a missed answer as a dead connection, bounds every connect by
// Options.ConnectTimeout, and resumes every session it follows (Follow) with sessions.resume:
// it holds that session's live signals while resume runs, applies the replay, then the held
// signals the replay did not carry. When the server cannot fill the gap (reason epoch or gap) it
// reloads the transcript with sessions.loadEvents and says so with a SignalEvent whose Reload is
// set. Calls are never buffered: a call made while the client is not connected fails at once with
// ErrNotConnected, and a call in flight when the connection drops fails with a
// *ConnectionLostError (its outcome is unknown; it is not resent). A refused token (401, or a
// revocation close), a refused origin (403) or a server with another hostId stop the client
// (State, Err).
package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/zidane-server/zidane/protocol"
)

// Backoff is the wait between connection attempts: Min after the first failure, doubling up to
// Max, each wait multiplied by a random factor in [1-Jitter, 1+Jitter]. It resets to Min only
// after a handshake (ipc.hello) succeeds, never on a bare TCP or upgrade success.
type Backoff struct {
	// Min is the first wait; default 500 ms.
	Min time.Duration
	// Max caps the wait; default 15 s.
	Max time.Duration
	// Jitter is the fraction (0 to 1) by which each wait varies at random; default 0.2 when Min
	// and Max are both zero, else as given (0 = none).
	Jitter float64
}

// DefaultBackoff is 0.5 s doubling to 15 s with ±20 % jitter (createServerHost's range in the
// protocol seed).
var DefaultBackoff = Backoff{Min: 500 * time.Millisecond, Max: 15 * time.Second, Jitter: 0.2}

// delay returns the wait before attempt n (n = 1 after the first failure).
func (b Backoff) delay(n int) time.Duration {
	d := b.Min
	for i := 1; i < n && d < b.Max; i++ {
		d *= 2
	}
	if d > b.Max {
		d = b.Max
	}
	if b.Jitter > 0 {
		d = time.Duration(float64(d) * (1 + b.Jitter*(2*rand.Float64()-1)))
	}
	return d
}

// Options configure Dial and Open. Zero values take the defaults.
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
	// Backoff is the wait between connection attempts; default DefaultBackoff.
	Backoff Backoff
	// ConnectTimeout bounds one attempt: dial, upgrade and ipc.hello; default 10 s.
	ConnectTimeout time.Duration
	// PingInterval is how often the client sends $/ping on a live connection; default 20 s.
	PingInterval time.Duration
	// PingTimeout is how long a $/ping may go unanswered, counted from when it was sent, before
	// the connection is declared dead and closed without the close handshake; a frame received
	// meanwhile restarts the count from that frame (the answer waits behind a backlog); default 10 s.
	PingTimeout time.Duration
	// HostID is the server's hostId saved from an earlier connection; empty means the first
	// handshake's hostId is saved. A server that answers another hostId is refused
	// (*HostChangedError, StateHostChanged) and the client stops.
	HostID string
	// OnState, when set, is called with every change of the connection state, in order, from the
	// client's connection goroutine; it must return quickly and must not call Close.
	OnState func(StateChange)
	// Follow lists the sessions followed from the first connection on (session id → afterSeq,
	// as Follow takes them). Follow called after Open races with the first connection: a signal
	// read before it is delivered unfollowed, then replayed again by the resume from afterSeq.
	Follow map[string]int64
}

func (o *Options) defaults() {
	if o.Backoff == (Backoff{}) {
		o.Backoff = DefaultBackoff
	}
	if o.Backoff.Min <= 0 {
		o.Backoff.Min = DefaultBackoff.Min
	}
	if o.Backoff.Max < o.Backoff.Min {
		o.Backoff.Max = o.Backoff.Min
	}
	if o.ConnectTimeout <= 0 {
		o.ConnectTimeout = 10 * time.Second
	}
	if o.PingInterval <= 0 {
		o.PingInterval = 20 * time.Second
	}
	if o.PingTimeout <= 0 {
		o.PingTimeout = 10 * time.Second
	}
	if o.ReadLimit <= 0 {
		o.ReadLimit = 16 << 20
	}
	if o.AppVersion == "" {
		o.AppVersion = "zidane-go"
	}
}

// State is the client's connection state.
type State string

const (
	// StateConnecting: an attempt (dial, upgrade, ipc.hello) is in flight.
	StateConnecting State = "connecting"
	// StateConnected: the handshake succeeded; calls are sent. Followed sessions may still be
	// resuming (their signals are held until they are in order).
	StateConnected State = "connected"
	// StateReconnecting: the last attempt failed or the connection dropped; the client waits
	// (StateChange.Delay) before the next attempt.
	StateReconnecting State = "reconnecting"
	// StateUnauthorized (terminal): the server refused the token (401 at the upgrade, or closed
	// the connection because the token was revoked).
	StateUnauthorized State = "unauthorized"
	// StateForbidden (terminal): the server refused the connection with 403 (origin not allowed).
	StateForbidden State = "forbidden"
	// StateHostChanged (terminal): the server's hostId differs from the saved one.
	StateHostChanged State = "hostChanged"
	// StateFailed (terminal): the server speaks no protocol version this client speaks.
	StateFailed State = "failed"
	// StateClosed (terminal): Close was called.
	StateClosed State = "closed"
)

// Terminal reports whether the client stays in s for good.
func (s State) Terminal() bool {
	switch s {
	case StateUnauthorized, StateForbidden, StateHostChanged, StateFailed, StateClosed:
		return true
	}
	return false
}

// StateChange is one transition of the connection state.
type StateChange struct {
	// State is the new state.
	State State
	// Err is the cause: why an attempt failed or the connection dropped (StateReconnecting), or
	// the terminal error; nil otherwise.
	Err error
	// Attempt counts consecutive failed attempts since the last successful handshake
	// (StateReconnecting); 0 otherwise.
	Attempt int
	// Delay is the wait before the next attempt (StateReconnecting); 0 otherwise.
	Delay time.Duration
}

// Errors. Calls return these (wrapped, so use errors.Is / errors.As); Err returns the terminal one.
var (
	// ErrClosed: the client was closed with Close.
	ErrClosed = errors.New("zidane client: closed")
	// ErrDisconnected is what every error about a missing or dropped connection matches.
	ErrDisconnected = errors.New("zidane client: not connected")
	// ErrNotConnected: the call was made while the client was (re)connecting; it was not sent.
	ErrNotConnected = fmt.Errorf("%w (reconnecting); the call was not sent, try again once connected", ErrDisconnected)
	// ErrUnauthorized: the server refused the token (HTTP 401 at the upgrade, or a close because
	// the token was revoked). The client stops.
	ErrUnauthorized = errors.New("zidane client: the server refused the token (401): it is unknown or revoked")
	// ErrForbidden: the server refused the connection with HTTP 403 (a browser origin that is not
	// allowed). The client stops.
	ErrForbidden = errors.New("zidane client: the server refused the connection (403 forbidden)")
)

// ConnectionLostError is returned by a call that was in flight when its connection dropped. The
// server may or may not have acted on it; the client does not send it again.
type ConnectionLostError struct {
	// Method is the call's method.
	Method string
	// Cause is why the connection dropped.
	Cause error
}

// Error says which call lost its answer and why the connection dropped.
func (e *ConnectionLostError) Error() string {
	return fmt.Sprintf("zidane client: the connection dropped before %s was answered; its outcome is unknown and it was not resent: %v", e.Method, e.Cause)
}

// Unwrap makes errors.Is(err, ErrDisconnected) and the cause match.
func (e *ConnectionLostError) Unwrap() []error { return []error{ErrDisconnected, e.Cause} }

// HostChangedError: the server at the URL answered another hostId than the saved one, so it is
// another server; the client stops without resuming or reloading anything.
type HostChangedError struct {
	// Expected is the saved hostId; Got is the one the server answered.
	Expected, Got string
}

// Error names both hostIds.
func (e *HostChangedError) Error() string {
	return fmt.Sprintf("zidane client: the server at this URL is another server (hostId %s, expected %s); refusing to sync with it", e.Got, e.Expected)
}

// SignalEvent is one item of the client's ordered signal stream: an ipc.signal, or (Reload set) a
// notice that a session's transcript was reloaded.
type SignalEvent struct {
	// Seq is the signal's $seq in its session; 0 for signals without a session and for reloads.
	Seq int64
	// Signal is the decoded signal; an unknown kind is *protocol.UnknownSignal. Nil for a reload.
	Signal protocol.Signal
	// Raw is the signal's params as received, with "$seq" also for replayed signals.
	Raw json.RawMessage
	// SessionID is the signal's sessionId, "" for signals without one.
	SessionID string
	// Replayed is true when the signal came through sessions.resume after a reconnect.
	Replayed bool
	// Reload, when set, says the client reloaded the session's transcript with
	// sessions.loadEvents because sessions.resume could not fill the gap; the signals of the
	// session that follow continue from it.
	Reload *Reload
}

// Reload is a session transcript reloaded through sessions.loadEvents.
type Reload struct {
	// SessionID is the session reloaded.
	SessionID string
	// Reason is why: "epoch" (the server restarted), "gap" (its replay log dropped signals the
	// client missed), "cursor" (the client had no $seq to resume from), "refresh" (the run
	// that was streaming during an earlier reload ended; this copy is exact), or "reset" (a
	// session:reset said the transcript changed other than by appending: a rollback, a
	// restore, a compaction).
	Reason string
	// Events is the whole transcript, as sessions.loadEvents answers it.
	Events []protocol.StreamEvent
	// Exact is true when the server answered the $seq its snapshot is consistent with, so the
	// signals that follow continue it exactly. When false, live signals of a run that streamed
	// during the reload may repeat or miss a piece, and the client reloads again (Reason
	// "refresh") when that run ends.
	Exact bool
}

// FromNow is the afterSeq of Follow for a session whose current $seq the caller does not know:
// the first live signal is taken as the start; if the connection drops before one arrives, the
// client reloads the transcript.
const FromNow int64 = -1

type response struct {
	Result json.RawMessage
	Err    *protocol.Error
}

// Client is a self-reconnecting connection to a server. Its methods are safe for concurrent use.
type Client struct {
	url        string
	dialURL    string
	httpClient *http.Client
	opts       Options
	nextID     atomic.Int64

	ctx    context.Context // cancelled by Close or a terminal state
	cancel context.CancelFunc
	loopWG sync.WaitGroup // the connection loop and per-connection goroutines

	mu        sync.Mutex
	state     State
	cur       *wire // the live connection after its handshake; nil otherwise
	gen       uint64
	hostID    string
	hello     *protocol.IPCHelloResult
	follows   map[string]*follow
	err       error // terminal error
	done      chan struct{}
	closedC   chan struct{} // closed by Close
	stateCh   chan struct{} // closed and replaced at every state change
	queue     []SignalEvent
	wake      chan struct{}
	signals   chan SignalEvent
	first     chan error // Dial: the first attempt's result
	closeOnce sync.Once
}

// follow is the client's cursor and resume state for one session.
type follow struct {
	id        string
	epoch     string // the signalEpoch seq belongs to; "" = the connection's
	seq       int64  // last $seq applied; FromNow (-1) = unknown
	syncedGen uint64 // the connection on which live signals apply directly; 0 = none
	syncing   bool   // a syncer runs for it
	held      []SignalEvent
	reload    string // a reload is due, for this reason
	refresh   bool   // reload again ("refresh") at the next run:end
}

// Dial connects to url (ws://, wss://, or unix:///path/to/socket), authenticates with opts.Token
// and completes the ipc.hello handshake. It returns the first attempt's error (a refused token is
// ErrUnauthorized, a refused origin ErrForbidden); after that the client reconnects by itself.
func Dial(ctx context.Context, url string, opts Options) (*Client, error) {
	c := newClient(url, opts)
	first := make(chan error, 1)
	c.first = first
	c.start()
	select {
	case err := <-first:
		if err != nil {
			c.Close()
			return nil, err
		}
		return c, nil
	case <-ctx.Done():
		c.Close()
		return nil, fmt.Errorf("zidane client: dial %s: %w", url, ctx.Err())
	}
}

// Open returns a client that connects to url in the background and keeps retrying, with backoff,
// until it is connected, refused, or closed. WaitConnected waits for the connection.
func Open(url string, opts Options) *Client {
	c := newClient(url, opts)
	c.start()
	return c
}

func newClient(url string, opts Options) *Client {
	opts.defaults()
	c := &Client{
		url: url, dialURL: url, opts: opts, httpClient: opts.HTTPClient,
		state: StateConnecting, hostID: opts.HostID, follows: map[string]*follow{},
		done: make(chan struct{}), closedC: make(chan struct{}), stateCh: make(chan struct{}),
		wake: make(chan struct{}, 1), signals: make(chan SignalEvent),
	}
	for id, seq := range opts.Follow {
		c.follows[id] = &follow{id: id, seq: seq}
	}
	if strings.HasPrefix(url, "unix://") {
		c.httpClient, c.dialURL = unixClient(url)
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	return c
}

func (c *Client) start() {
	c.loopWG.Add(2)
	go c.connectLoop()
	go c.deliver()
}

func ptr[T any](v T) *T { return &v }

// Hello returns the server's answer to the latest handshake (nil before the first).
func (c *Client) Hello() *protocol.IPCHelloResult {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.hello
}

// HostID returns the saved hostId: Options.HostID, or the first handshake's.
func (c *Client) HostID() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.hostID
}

// State returns the current connection state.
func (c *Client) State() State {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.state
}

// Signals delivers the signal stream in order: every ipc.signal once (a followed session's
// signals in $seq order, without repeats, across reconnects) and reload notices. It is queued
// without bound so a slow reader never stalls the connection; the channel closes when the
// client stops (Close, or a terminal state after what was queued is delivered).
func (c *Client) Signals() <-chan SignalEvent { return c.signals }

// Done is closed when the client stops for good; Err then says why.
func (c *Client) Done() <-chan struct{} { return c.done }

// Err returns why the client stopped (ErrClosed, ErrUnauthorized, ErrForbidden,
// *HostChangedError, a version mismatch), or nil while it runs.
func (c *Client) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// WaitConnected waits until the client is connected (handshake done), it stops, or ctx ends.
func (c *Client) WaitConnected(ctx context.Context) error {
	for {
		c.mu.Lock()
		if c.err != nil {
			err := c.err
			c.mu.Unlock()
			return err
		}
		if c.cur != nil {
			c.mu.Unlock()
			return nil
		}
		w := c.stateCh
		c.mu.Unlock()
		select {
		case <-w:
		case <-c.done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// setState records a state change and reports it; c.mu must not be held.
func (c *Client) setState(ch StateChange) {
	c.mu.Lock()
	if c.state.Terminal() {
		c.mu.Unlock()
		return
	}
	c.state = ch.State
	if ch.State.Terminal() {
		c.err = ch.Err
		close(c.done)
	}
	close(c.stateCh)
	c.stateCh = make(chan struct{})
	c.mu.Unlock()
	if c.opts.OnState != nil {
		c.opts.OnState(ch)
	}
}

// Close stops the client: no attempt is made after it returns, the connection closes with 1000,
// pending calls fail with ErrClosed and the signal stream closes. A second Close does nothing.
func (c *Client) Close() error {
	c.setState(StateChange{State: StateClosed, Err: ErrClosed})
	c.closeOnce.Do(func() { close(c.closedC) })
	c.cancel()
	c.loopWG.Wait()
	return nil
}

// Follow makes the client track sessionID's signals by $seq and resume them after every
// reconnect (seed "Reconnect and resume"). afterSeq is the last $seq the caller already has under
// the current connection's signalEpoch: 0 for a session created just now, FromNow when unknown.
// While the session resumes, its live signals are held and delivered in order afterwards.
// Signals read before Follow are delivered unfollowed; to follow from the first connection on,
// use Options.Follow.
func (c *Client) Follow(sessionID string, afterSeq int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.follows[sessionID]; ok {
		return
	}
	f := &follow{id: sessionID, seq: afterSeq}
	if c.hello != nil {
		f.epoch = c.hello.SignalEpoch
	}
	c.follows[sessionID] = f
	if c.cur != nil {
		if afterSeq == FromNow {
			f.syncedGen = c.cur.gen // nothing to catch up: take the next live signal as the start
			return
		}
		c.startSyncLocked(f, c.cur)
	}
}

// Unfollow stops tracking sessionID; its signals are then delivered as they arrive.
func (c *Client) Unfollow(sessionID string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.follows, sessionID)
}

// Cursor returns the signalEpoch and the last $seq applied for a followed session (FromNow when
// unknown); ok is false when the session is not followed.
func (c *Client) Cursor(sessionID string) (epoch string, seq int64, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f := c.follows[sessionID]
	if f == nil {
		return "", 0, false
	}
	return f.epoch, f.seq, true
}

// Call sends a request on the current connection and decodes its result into result (a pointer,
// or nil to discard it). A JSON-RPC error is returned as *protocol.Error. nil params send {}.
// Without a connection it fails at once with ErrNotConnected (or the terminal error); a call in
// flight when the connection drops fails with *ConnectionLostError. Nothing is ever resent.
func (c *Client) Call(ctx context.Context, method string, params, result any) error {
	c.mu.Lock()
	w := c.cur
	err := c.err
	c.mu.Unlock()
	if err != nil {
		return err
	}
	if w == nil {
		return ErrNotConnected
	}
	return c.call(ctx, w, method, params, result)
}

func (c *Client) call(ctx context.Context, w *wire, method string, params, result any) error {
	var raw json.RawMessage = json.RawMessage("{}")
	if params != nil && !isNilPtr(params) {
		b, err := protocol.Marshal(params)
		if err != nil {
			return fmt.Errorf("zidane client: encode %s params: %w", method, err)
		}
		raw = b
	}
	id := c.nextID.Add(1)
	msg, _ := protocol.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      int64           `json:"id"`
		Method  string          `json:"method"`
		Params  json.RawMessage `json:"params"`
	}{"2.0", id, method, raw})
	r, err := w.roundTrip(ctx, strconv.FormatInt(id, 10), method, msg)
	if err != nil {
		return err
	}
	if r.Err != nil {
		return r.Err
	}
	if result != nil {
		if err := json.Unmarshal(r.Result, result); err != nil {
			return fmt.Errorf("zidane client: decode %s result: %w", method, err)
		}
	}
	return nil
}

func isNilPtr(v any) bool {
	rv := reflect.ValueOf(v)
	return rv.Kind() == reflect.Pointer && rv.IsNil()
}

// ---------------------------------------------------------------------------------------------
// The connection loop

// connectLoop owns connecting: one attempt at a time, backoff between failures, until a terminal
// state or Close.
func (c *Client) connectLoop() {
	defer c.loopWG.Done()
	first := c.first
	failures := 0
	for {
		if c.ctx.Err() != nil {
			return
		}
		c.setState(StateChange{State: StateConnecting})
		w, err := c.attempt()
		if first != nil && err != nil {
			first <- err
			return // Dial returns it and closes the client
		}
		if err == nil {
			failures = 0 // reset only after a handshake succeeded
			err = c.serve(w, first)
			first = nil
		}
		if c.ctx.Err() != nil {
			return
		}
		if st := terminalState(err); st != "" {
			c.stop(st, err)
			return
		}
		if w == nil {
			failures++
		} else {
			failures = 1
		}
		d := c.opts.Backoff.delay(failures)
		c.setState(StateChange{State: StateReconnecting, Err: err, Attempt: failures, Delay: d})
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-c.ctx.Done():
			t.Stop()
			return
		}
	}
}

// stop enters a terminal state: the client will not connect again.
func (c *Client) stop(st State, err error) {
	c.setState(StateChange{State: st, Err: err})
	c.cancel()
}

// terminalState maps an error to the terminal state it causes, or "" for a transient one.
func terminalState(err error) State {
	var hc *HostChangedError
	var vm *versionError
	switch {
	case err == nil:
		return ""
	case errors.Is(err, ErrUnauthorized):
		return StateUnauthorized
	case errors.Is(err, ErrForbidden):
		return StateForbidden
	case errors.As(err, &hc):
		return StateHostChanged
	case errors.As(err, &vm):
		return StateFailed
	}
	return ""
}

// versionError: the server and the client share no protocol version.
type versionError struct{ msg string }

func (e *versionError) Error() string { return e.msg }

// attempt dials, upgrades and shakes hands within ConnectTimeout. It returns a live wire whose
// reader runs, or why not.
func (c *Client) attempt() (*wire, error) {
	ctx, cancel := context.WithTimeout(c.ctx, c.opts.ConnectTimeout)
	defer cancel()
	h := http.Header{}
	for k, v := range c.opts.Header {
		h[k] = v
	}
	if c.opts.Token != "" {
		h.Set("Authorization", "Bearer "+c.opts.Token)
	}
	ws, resp, err := websocket.Dial(ctx, c.dialURL, &websocket.DialOptions{
		HTTPClient:   c.httpClient,
		HTTPHeader:   h,
		Subprotocols: []string{"zidane"},
	})
	if err != nil {
		if resp != nil {
			switch resp.StatusCode {
			case http.StatusUnauthorized:
				return nil, ErrUnauthorized
			case http.StatusForbidden:
				return nil, fmt.Errorf("%w: %s", ErrForbidden, resp.Status)
			}
			if resp.StatusCode >= 400 {
				return nil, fmt.Errorf("zidane client: the server answered the upgrade with %s", resp.Status)
			}
		}
		if ctx.Err() != nil && c.ctx.Err() == nil {
			return nil, fmt.Errorf("zidane client: connect to %s timed out after %s", c.url, c.opts.ConnectTimeout)
		}
		return nil, fmt.Errorf("zidane client: dial %s: %w", c.url, err)
	}
	ws.SetReadLimit(c.opts.ReadLimit)
	c.mu.Lock()
	c.gen++
	w := &wire{c: c, ws: ws, gen: c.gen, pending: map[string]chan response{}, dead: make(chan struct{})}
	w.readCtx, w.readCancel = context.WithCancel(context.Background())
	c.mu.Unlock()
	c.loopWG.Add(1)
	go w.readLoop()
	app := c.opts.AppVersion
	pid := int64(os.Getpid())
	var hello protocol.IPCHelloResult
	err = c.call(ctx, w, protocol.MethodIPCHello, &protocol.IPCHelloParams{ProtocolVersion: protocol.ProtocolVersion, MinProtocolVersion: ptr(protocol.MinProtocolVersion), AppVersion: &app, PID: &pid}, &hello)
	if err == nil {
		if n := hello.NegotiatedProtocolVersion; n < protocol.MinProtocolVersion || n > protocol.ProtocolVersion {
			ws.Close(4001, "negotiated protocol version outside the client's range")
			err = &versionError{fmt.Sprintf("zidane client: the server chose protocol v%d, outside this client's v%d–v%d; upgrade the client", n, protocol.MinProtocolVersion, protocol.ProtocolVersion)}
		}
	} else {
		var rpcErr *protocol.Error
		if errors.As(err, &rpcErr) && rpcErr.Code == -32010 {
			err = &versionError{fmt.Sprintf("zidane client: the server speaks no protocol version this client speaks (v%d–v%d): %s", protocol.MinProtocolVersion, protocol.ProtocolVersion, rpcErr.Message)}
		} else if ctx.Err() != nil && c.ctx.Err() == nil {
			err = fmt.Errorf("zidane client: no answer to ipc.hello from %s within %s", c.url, c.opts.ConnectTimeout)
		}
	}
	if err == nil {
		c.mu.Lock()
		if c.hostID == "" {
			c.hostID = hello.HostID
		} else if c.hostID != hello.HostID {
			err = &HostChangedError{Expected: c.hostID, Got: hello.HostID}
		}
		c.mu.Unlock()
	}
	if err != nil {
		w.fail(err)
		ws.CloseNow()
		return nil, err
	}
	w.hello = &hello
	return w, nil
}

// serve makes w the live connection, resumes every followed session on it, pings it, and
// returns when it ends, with why. It answers first (Dial's wait, when not nil) once w is the
// current connection, so a call made the moment Dial returns goes out on it.
func (c *Client) serve(w *wire, first chan<- error) error {
	c.mu.Lock()
	if c.ctx.Err() != nil {
		c.mu.Unlock()
		w.fail(ErrClosed)
		w.ws.CloseNow()
		if first != nil {
			first <- ErrClosed
		}
		return ErrClosed
	}
	h := w.hello
	c.hello = h
	w.epoch = h.SignalEpoch
	c.cur = w
	for _, f := range c.follows {
		if f.seq == FromNow && f.epoch == "" {
			f.epoch = w.epoch // followed before any connection: start with this one's signals
			f.syncedGen = w.gen
			continue
		}
		c.startSyncLocked(f, w)
	}
	c.mu.Unlock()
	c.setState(StateChange{State: StateConnected})
	if first != nil {
		first <- nil
	}
	c.loopWG.Add(1)
	go w.pingLoop()
	select {
	case <-w.dead:
	case <-c.ctx.Done():
		w.fail(c.Err())
		w.closeNormal()
	}
	c.mu.Lock()
	if c.cur == w {
		c.cur = nil
	}
	c.mu.Unlock()
	return w.err
}
