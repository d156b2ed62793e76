package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/coder/websocket"

	"github.com/zidane-server/zidane/protocol"
	"github.com/zidane-server/zidane/server/store"
)

// conn is one WebSocket connection: a read loop, a bounded send queue with a writer goroutine
// that runs only while frames are queued, and the handshake state.
type conn struct {
	srv   *Server
	ws    *websocket.Conn
	cork  *corkConn // ws's network connection (cork.go); nil when it is not one
	id    int64     // the connection's number in logs
	token store.Token
	// origin is the origin the connection reached the server by, as checked at the upgrade
	// (connOrigin): an auth.oauth.begin redirectUri must be origin + /zidane/oauth/callback.
	origin  string
	scope   protocol.Scope
	ctx     context.Context // cancelled when the connection ends: cancels its queries
	cancel  context.CancelFunc
	helloed atomic.Bool
	// version is the negotiated protocol version (set by ipc.hello before helloed); the dispatch
	// leaves out methods removed in it or earlier.
	version atomic.Int32
	sem     chan struct{} // bounds concurrent requests
	// signingOut is set by tokens.revokeSelf: the connection closes itself once its answer is
	// written, so the revocation notice (closeTokenConns) leaves it alone.
	signingOut atomic.Bool
	// expiry closes the connection (1008 "token expired") when its token's life ends (pair
	// --ttl-token); nil for a token without one.
	expiry *time.Timer
	bound  func() // releases the connection's place in the per-token and per-address bounds

	qmu       sync.Mutex
	queue     [][]byte
	qbytes    int
	qroom     chan struct{} // signalled after each written batch (flow control: waitRoom)
	pingTimer *time.Timer   // fires ping every Limits.PingInterval

	writing  bool        // a frame is being written (by the writer or by send); guarded by qmu
	writerOn bool        // a writer goroutine runs (kickLocked starts one); guarded by qmu
	wtimer   *time.Timer // the write batch's deadline (write); used by the one writing
	writers  sync.WaitGroup
	closing  bool
	closeErr error
	wg       sync.WaitGroup

	// The request the read loop runs inline (serve) and the watchdog that hands the read loop to
	// a new goroutine when that request runs long (handOff). inlineGen numbers the inline
	// requests, so a reader that was handed off knows it from the one that took over, and the
	// watchdog a request it saw before; guarded by imu.
	imu           sync.Mutex
	inlineGen     uint64
	inlineRunning bool
	watchedGen    uint64      // inlineGen when the watchdog last looked
	watching      bool        // the watchdog timer is armed
	handoff       *time.Timer // the watchdog; nil until the first request after hello
	helloTimer    *time.Timer

	// orderTail is the last ordered request's ticket (order.go); only the reading goroutine
	// uses it.
	orderTail chan struct{}

	view atomic.Pointer[connView] // the session this connection shows (presence); nil: none, never declared
}

// connView is what a connection shows, for presence:changed (schema/presence.json). declared is
// set once the connection called presence.set: from then on only presence.set moves the view, and
// the inference from sessions.get, sessions.loadEvents and chat.send (setView) leaves it alone.
type connView struct {
	sessionID string // "" when it shows none
	focused   bool   // the window has the user's focus (declared only)
	declared  bool
}

type connKey struct{}

// connFrom returns the connection a handler runs for.
func connFrom(ctx context.Context) *conn {
	c, _ := ctx.Value(connKey{}).(*conn)
	return c
}

func (s *Server) serveConn(ws *websocket.Conn, tok store.Token, cork *corkConn, release func(), origin string) {
	ctx, cancel := context.WithCancel(s.baseCtx)
	c := &conn{
		srv:    s,
		ws:     ws,
		cork:   cork,
		token:  tok,
		origin: origin,
		scope:  protocol.Scope(tok.Scope),
		id:     s.connSeq.Add(1),
		cancel: cancel,
		sem:    make(chan struct{}, s.cfg.Limits.ConcurrentRequests),
		qroom:  make(chan struct{}, 1),
		bound:  release,
	}
	c.ctx = context.WithValue(ctx, connKey{}, c)
	ws.SetReadLimit(s.cfg.Limits.MaxMessageBytes)
	if tok.ExpiresAt != nil {
		c.expiry = time.AfterFunc(time.Until(*tok.ExpiresAt), func() {
			c.log().Info("token expired: closing the connection")
			c.close(websocket.StatusPolicyViolation, "token expired")
		})
	}
	s.track(c, true)
	c.log().Debug("connected")
	c.pingTimer = time.AfterFunc(time.Hour, c.ping) // armed below, once c.pingTimer is set
	c.pingTimer.Reset(s.cfg.Limits.PingInterval)
	c.helloTimer = time.AfterFunc(s.cfg.Limits.HelloTimeout, func() {
		if !c.helloed.Load() {
			c.close(websocket.StatusPolicyViolation, "no ipc.hello within the handshake timeout")
		}
	})
	c.readLoop()
}

// end tears the connection down once its read loop has ended; it runs on the goroutine that was
// reading last (the read loop moves between goroutines: serve).
func (c *conn) end() {
	c.helloTimer.Stop()
	if c.expiry != nil {
		c.expiry.Stop()
	}
	c.pingTimer.Stop()
	c.imu.Lock()
	if c.handoff != nil {
		c.handoff.Stop()
	}
	c.imu.Unlock()
	c.srv.hub.remove(c)
	if c.srv.oauth != nil {
		c.srv.oauth.DropOwner(c)
	}
	c.cancel()
	c.wg.Wait()
	c.close(websocket.StatusNormalClosure, "")
	c.writers.Wait() // no writer starts once the connection is closing
	// Frames a failed write left in the queue leave the server's total (Limits.SendQueueTotalBytes):
	// nothing writes or queues any more (its requests and writers have ended).
	c.qmu.Lock()
	c.queue = nil
	c.addQueued(-c.qbytes)
	c.qmu.Unlock()
	c.srv.track(c, false)
	if c.bound != nil {
		c.bound() // the per-token and per-address bounds (sse_backend.go connBounds)
	}
	c.log().Debug("disconnected", "reason", c.closeErr)
}

// log is the connection's logger, made when something is logged: a logger held by every
// connection cost memory per idle connection (the idle figure of docs/benchmarks.md).
func (c *conn) log() *slog.Logger {
	return c.srv.log.With("conn", c.id, "token", c.token.Name)
}

// readLoop reads frames until the connection ends, then ends it. It returns early, leaving the
// connection to another goroutine's read loop, when a request it ran inline was handed off
// (serve). It reads with a context that close does not cancel: coder/websocket tears the TCP
// connection down at once when a Read's context ends, which would drop the close frame (1003,
// 1007, 1008, 1013) that close is writing. ws.Close ends the read itself once the close handshake
// is done or times out.
func (c *conn) readLoop() {
	for {
		data, ok := c.readFrame()
		if !ok {
			c.end()
			return
		}
		w, ok := c.admitFrame(len(data))
		if !ok {
			c.end()
			return
		}
		more := c.handleFrame(data)
		c.srv.inflight.Release(w)
		if !more {
			return
		}
	}
}

// readFrame reads the next text frame; false when the connection ends (closing it when the frame
// broke a rule).
func (c *conn) readFrame() ([]byte, bool) {
	typ, data, err := c.ws.Read(context.Background())
	if err != nil {
		var ce websocket.CloseError
		if errors.As(err, &ce) {
			c.setCloseErr(err)
			return nil, false
		}
		if websocket.CloseStatus(err) == -1 && errors.Is(err, context.Canceled) {
			return nil, false
		}
		c.setCloseErr(err)
		if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, false // the peer went away
		}
		// A frame that breaks RFC 6455 (e.g. unmasked); coder/websocket has already closed
		// with 1009 when the read limit was exceeded, and then this is a no-op.
		c.close(websocket.StatusProtocolError, "protocol error")
		return nil, false
	}
	if typ != websocket.MessageText {
		c.close(websocket.StatusUnsupportedData, "binary frames are not accepted: send JSON-RPC as text frames")
		return nil, false
	}
	if !utf8.Valid(data) {
		c.close(websocket.StatusInvalidFramePayloadData, "text frame is not valid UTF-8")
		return nil, false
	}
	return data, true
}

// admitFrame waits until the server's in-flight request budget (Limits.InflightRequestBytes) has
// room for a frame of n bytes and takes w of it, given back (inflight.Release) once the frame's
// requests are answered. The read loop does not read meanwhile: the client gets TCP
// backpressure, as past ConcurrentRequests. False when the connection ends while waiting.
func (c *conn) admitFrame(n int) (w int64, ok bool) {
	w = min(int64(n), c.srv.cfg.Limits.InflightRequestBytes) // a larger weight would never fit
	if !c.srv.inflight.TryAcquire(w) {
		c.srv.inflightWaiting.Add(1)
		err := c.srv.inflight.Acquire(c.ctx, w)
		c.srv.inflightWaiting.Add(-1)
		if err != nil {
			return 0, false
		}
	}
	return w, true
}

// handleFrame runs one frame's requests and reports whether this goroutine still reads the
// connection (serve).
func (c *conn) handleFrame(data []byte) bool {
	fr := protocol.DecodeFrame(data)
	if !fr.Batch {
		it := fr.Items[0]
		if it.Err != nil {
			if it.ErrID != nil { // nil: an invalid notification, never answered (field case B04)
				c.send(protocol.EncodeError(it.ErrID, it.Err))
			}
			return true
		}
		req := it.Req
		if isHello(req) && req.IsNotification() {
			// A handshake nobody can read the answer of: ignored, never answered (B04, B12).
			return true
		}
		t := c.takeTicket(req)
		if !c.helloed.Load() || isHello(req) || (req.IsNotification() && t == nil) {
			// Until the handshake completes, frames run strictly in arrival order (field case B12).
			// Notifications do too: they have no answer to match, so their effects must follow
			// the order they were sent in (a draft's keystrokes: the last one wins). An ordered
			// one (a chat.cancel) is served instead, as a request is: it may wait for an earlier
			// chat.send, and the read loop must not wait with it (pongs would go unread).
			c.apart(func() { c.answer(req, t) })
			return true
		}
		return c.serve(func() { c.answer(req, t) })
	}
	// A batch: members may run in any order; the answers go out as one array (JSON-RPC §6).
	// Before the handshake it runs apart and waited for, so frames stay in arrival order (field
	// case B12). Its ordered members take their places now, before it can be handed off.
	tickets := make([]*orderTicket, len(fr.Items))
	for i, it := range fr.Items {
		tickets[i] = c.takeTicket(it.Req)
	}
	return c.serveOrApart(!c.helloed.Load(), func() {
		var out [][]byte
		var after []func()
		defer func() { runAfter(after) }()
		total, limit := 2, c.srv.cfg.Limits.MaxMessageBytes
		add := func(id protocol.ID, resp []byte) {
			if int64(total+len(resp)+1) > limit {
				// The batch's answer must fit one message too: later members that do not fit
				// answer ResponseTooLarge, and their results are not kept in memory.
				resp = protocol.EncodeError(id, protocol.NewResponseTooLargeError(fmt.Sprintf("The batch's answers exceed the %d-byte message limit; send fewer requests per batch.", limit)))
			}
			total += len(resp) + 1
			out = append(out, resp)
		}
		for i, it := range fr.Items {
			if it.Err != nil {
				if it.ErrID != nil {
					add(it.ErrID, protocol.EncodeError(it.ErrID, it.Err))
				}
				continue
			}
			if isHello(it.Req) {
				if !it.Req.IsNotification() {
					add(it.Req.ID, protocol.EncodeError(it.Req.ID, protocol.NewInvalidRequestError("Invalid Request: ipc.hello cannot be sent in a batch; send it alone as the first frame.")))
				}
				continue
			}
			resp, hooks := c.run(it.Req, tickets[i])
			after = append(after, hooks...)
			if resp != nil {
				add(it.Req.ID, resp)
			}
		}
		b := protocol.EncodeBatch(out)
		if int64(len(b)) > limit {
			// Even the -32012 answers of the members past the limit do not fit (many members,
			// long ids): one error object says so, and nothing over the limit is sent.
			b = protocol.EncodeError(protocol.ID("null"), protocol.NewResponseTooLargeError(fmt.Sprintf("The batch's answers exceed the %d-byte message limit, even as errors; send fewer requests per batch.", limit)))
		}
		if b != nil {
			c.send(b)
		}
	})
}

func isHello(r *protocol.Request) bool { return r.Method == protocol.MethodIPCHello }

// serveOrApart runs fn apart (waited for) when inOrder is set, else as serve does; it reports
// whether this goroutine still reads the connection.
func (c *conn) serveOrApart(inOrder bool, fn func()) bool {
	if inOrder {
		c.apart(fn)
		return true
	}
	return c.serve(fn)
}

// apart runs fn on a goroutine of its own and waits for it: the read loop's order is kept, and
// the stack fn grows (a handler, JSON, the answer's write) goes with that goroutine instead of
// staying with the read loop's, which every idle connection keeps (the idle figure of
// docs/benchmarks.md).
func (c *conn) apart(fn func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn()
	}()
	<-done
}

// handoffDelay is the period of the watchdog that hands a long inline request's read loop to
// another goroutine (serve): a request is handed off after running between one and two periods.
// Go's poller sleeps in whole milliseconds, so a shorter period fires no sooner once the process
// is idle.
const handoffDelay = time.Millisecond

// serve runs a request (fn) on the read loop's own goroutine, holding one of the connection's
// request slots (Limits.ConcurrentRequests; the read loop waits for a free one, which is the
// backpressure on a client that floods requests). It reports whether this goroutine still reads
// the connection.
//
// Most requests end within microseconds, and then no goroutine is started or woken per request:
// that handoff (a new goroutine growing its stack, another core woken to run it) doubled the
// latency of a `$/ping` round trip (p50 43–67 µs against the raw echo's 18–19 µs, then 21 µs
// against 20: the round-trip figures of docs/benchmarks.md). A request still running after
// one to two handoffDelay (one that waits: on Postgres, a run, an approval) keeps this
// goroutine, and a new goroutine takes over the read loop (handOff): later frames, a chat.cancel
// for the waiting handler among them, are read at most that late, and requests still run
// concurrently up to the bound. The order rules are unchanged: only requests after the handshake
// come here, and they may run in any order, but for the ordered methods (order.go), which take
// their places in the chain before serve and wait for their turn in call.
//
// The watchdog is a timer armed while the connection is busy, not per request: a timer armed a
// millisecond ahead is the process's earliest, and arming it woke the network poller's thread
// every request (a futex wake and a write(2)).
func (c *conn) serve(fn func()) bool {
	select {
	case c.sem <- struct{}{}:
	case <-c.ctx.Done():
		return true
	}
	c.imu.Lock()
	c.inlineGen++
	gen := c.inlineGen
	c.inlineRunning = true
	if !c.watching {
		c.watching = true
		c.watchedGen = gen - 1
		if c.handoff == nil { // made on first use: an idle connection that only said hello has none
			c.handoff = time.AfterFunc(handoffDelay, c.handOff)
		} else {
			c.handoff.Reset(handoffDelay)
		}
	}
	c.imu.Unlock()
	fn()
	<-c.sem
	c.imu.Lock()
	reader := c.inlineRunning && c.inlineGen == gen // else handOff ran: another goroutine reads
	if reader {
		c.inlineRunning = false
	}
	c.imu.Unlock()
	if reader {
		return true
	}
	c.wg.Done() // counted by handOff: the connection ends after this request
	return false
}

// handOff is the watchdog of serve, every handoffDelay while the read loop runs requests: an
// inline request it already saw running last time keeps its goroutine, and a new one takes over
// the read loop. It stops once it finds no request ran since its last look.
func (c *conn) handOff() {
	c.imu.Lock()
	seen := c.inlineGen == c.watchedGen
	c.watchedGen = c.inlineGen
	switch {
	case seen && c.inlineRunning:
		c.inlineRunning = false
		c.watching = false // the next reader's first request arms it again
		c.wg.Add(1)        // before the request can end: the reader's end waits for it
		c.imu.Unlock()
		go c.readLoop()
		return
	case seen:
		c.watching = false // idle since the last look
	default:
		c.handoff.Reset(handoffDelay)
	}
	c.imu.Unlock()
}

// answer runs one request, queues its answer, then runs the request's afterAnswer hooks.
// t is its place among the connection's ordered requests (nil: not ordered).
func (c *conn) answer(req *protocol.Request, t *orderTicket) {
	resp, after := c.run(req, t)
	if resp != nil {
		c.send(resp)
	}
	runAfter(after)
}

func runAfter(fns []func()) {
	for _, fn := range fns {
		fn()
	}
}

type afterKey struct{}

// afterAnswer runs fn once the answer to the request that ctx belongs to is queued (or at once
// outside a request): work a handler starts can signal only after the client has its answer,
// so a client always knows an id (a clone's, a terminal's) before a signal names it.
func afterAnswer(ctx context.Context, fn func()) {
	if h, ok := ctx.Value(afterKey{}).(*[]func()); ok && h != nil {
		*h = append(*h, fn)
		return
	}
	fn()
}

// run executes one request and returns the encoded answer, or nil for a notification, and the
// handler's afterAnswer hooks.
func (c *conn) run(req *protocol.Request, t *orderTicket) (frame []byte, after []func()) {
	res, after, err := c.call(req, t)
	c.srv.metrics.observe(req.Method, err)
	if req.IsNotification() {
		return nil, after
	}
	if err != nil {
		return protocol.EncodeError(req.ID, toRPCError(err)), after
	}
	b, merr := protocol.EncodeResult(req.ID, res)
	if merr != nil {
		c.log().Error("encode result", "method", req.Method, "err", merr)
		return protocol.EncodeError(req.ID, protocol.NewInternalError("The server could not encode the result.")), after
	}
	if int64(len(b)) > c.srv.cfg.Limits.MaxMessageBytes {
		return protocol.EncodeError(req.ID, protocol.NewResponseTooLargeError(fmt.Sprintf("The answer to %s is %d bytes, over the %d-byte message limit; ask for less (a smaller limit).", req.Method, len(b), c.srv.cfg.Limits.MaxMessageBytes))), after
	}
	return b, after
}

// call runs the request's handler and returns its result or error and its afterAnswer hooks.
// An ordered request (t not nil) runs once the connection's earlier ordered ones took effect.
func (c *conn) call(req *protocol.Request, t *orderTicket) (res any, after []func(), err error) {
	var ctx *reqCtx
	if t != nil {
		defer t.pass()
	}
	defer func() {
		if r := recover(); r != nil {
			c.log().Error("handler panic", "method", req.Method, "panic", r)
			err = protocol.NewInternalError("The server failed while handling " + req.Method + ".")
			if ctx != nil {
				after = ctx.hooks
			}
		}
	}()
	if c.isClosing() {
		return nil, nil, protocol.NewHandlerFailedError("The connection is closing; reconnect.")
	}
	m := protocol.LookupMethod(req.Method)
	if !c.helloed.Load() && (m == nil || m.Scope != protocol.ScopeNone) {
		return nil, nil, protocol.NewHandshakeRequiredError("")
	}
	if len(req.Params) > 0 && req.Params[0] == '[' {
		return nil, nil, protocol.NewInvalidParamsError("params must be an object.", &protocol.InvalidParamsErrorData{Pointer: ""})
	}
	ctx = newReqCtx(c.ctx, c.srv.cfg.Limits.RequestTimeout)
	defer ctx.end()
	if t != nil {
		if err := t.wait(ctx); err != nil {
			return nil, nil, err
		}
		ctx.order = t
	}
	v := int(c.version.Load())
	if v == 0 {
		v = protocol.ProtocolVersion // before the handshake: the methods of scope none
	}
	res, err = protocol.DispatchAt(ctx, c.srv.handlers, c.scope, v, req.Method, req.Params)
	if m != nil && m.Audited {
		c.srv.auditCall(c, m, req.Params, err)
	}
	return res, ctx.hooks, err
}

func toRPCError(err error) *protocol.Error {
	var e *protocol.Error
	if errors.As(err, &e) {
		return e
	}
	return protocol.NewHandlerFailedError(err.Error())
}

// send writes a response. When nothing is queued or being written it writes from the calling
// goroutine (the handler's), which saves a goroutine handoff per request (the `$/ping` figure of
// docs/benchmarks.md); otherwise it queues the frame behind the others. Either way frames leave
// in the order they reached the queue lock, so wire order is queue order (field case B17).
func (c *conn) send(frame []byte) {
	c.qmu.Lock()
	if c.closing || len(c.queue) > 0 || c.writing {
		c.enqueueLocked(frame) // unlocks
		return
	}
	c.writing = true
	c.addQueued(len(frame))
	c.qmu.Unlock()
	c.srv.overBudget()
	err := c.write([][]byte{frame})
	c.qmu.Lock()
	c.writing = false
	c.addQueued(-len(frame))
	if err == nil {
		c.kickLocked() // frames queued meanwhile
	}
	c.qmu.Unlock()
	if err != nil {
		c.writeFailed(err)
	}
}

// sendSignal queues a signal frame shared by every connection (encoded once by the hub). It never
// blocks: the hub fans out without waiting on any connection's socket.
func (c *conn) sendSignal(frame []byte) {
	c.qmu.Lock()
	c.enqueueLocked(frame)
}

// enqueueLocked queues a frame for the writer; the caller holds qmu, which it releases. A full
// queue closes the connection with 1013.
func (c *conn) enqueueLocked(frame []byte) {
	lim := c.srv.cfg.Limits
	if c.closing {
		c.qmu.Unlock()
		return
	}
	if len(c.queue) >= lim.SendQueueMessages || c.qbytes+len(frame) > lim.SendQueueBytes {
		n, b := len(c.queue), c.qbytes
		c.shedLocked() // from here on nothing more is queued or written (field case B18)
		c.qmu.Unlock()
		c.log().Warn("send queue full: closing the slow connection", "messages", n, "bytes", b)
		go c.finishClose(websocket.StatusTryAgainLater, "send queue full: reconnect and resume")
		return
	}
	c.queue = append(c.queue, frame)
	c.addQueued(len(frame))
	c.kickLocked()
	c.qmu.Unlock()
	c.srv.overBudget()
}

// addQueued adds n (negative: frames written or dropped) to the connection's queued bytes and
// to the server's total; the caller holds qmu.
func (c *conn) addQueued(n int) {
	c.qbytes += n
	c.srv.queued.Add(int64(n))
	if c.closing {
		c.srv.releasing.Add(int64(n))
	}
}

// setClosingLocked marks the connection closing; the caller holds qmu. What it still holds (the
// batch in flight) moves to the server's releasing bytes: it leaves when that write ends, and
// shedding another connection would not free it (overBudget).
func (c *conn) setClosingLocked() {
	if c.closing {
		return
	}
	c.closing = true
	c.srv.releasing.Add(int64(c.qbytes))
}

// shedLocked marks the connection closing and drops the frames waiting in its queue at once
// (the batch being written, if any, stays until its write ends): a peer that stopped reading
// holds no more of the server's memory than that batch while its close runs. The caller holds
// qmu.
func (c *conn) shedLocked() {
	c.setClosingLocked()
	dropped := 0
	for _, f := range c.queue {
		dropped += len(f)
	}
	c.queue = nil
	c.addQueued(-dropped)
}

// overBudget sheds the largest queues while the bytes queued on open connections exceed
// Limits.SendQueueTotalBytes. Each connection's own bound (SendQueueBytes) alone let any number
// of connections that never read, each just under it, hold that much memory each (break-it: 8
// connections pipelining prefs.get held 1.2 GB); past the total the connection with the most
// queued is closed with 1013 and its queue dropped, as its own bound would. Bytes closing
// connections still hold (their batch in flight, until its write ends or times out) do not
// count: no shed frees them (they leave within coder/websocket's 5 s close timeout, or
// Limits.WriteTimeout), and counting them closed every open connection down to one that read
// all it got (CI: TestSendBudgetShedsLargestQueue's reading client got 1013). One goroutine
// sheds at a time; the others go on.
func (s *Server) overBudget() {
	limit := s.cfg.Limits.SendQueueTotalBytes
	if s.openQueued() <= limit || !s.shedding.CompareAndSwap(false, true) {
		return
	}
	defer s.shedding.Store(false)
	for s.openQueued() > limit {
		if !s.shedLargest() {
			return
		}
	}
}

// openQueued is the bytes queued on connections that are not closing: what shedding can free.
func (s *Server) openQueued() int64 {
	return s.queued.Load() - s.releasing.Load()
}

// shedLargest closes (1013) the open connection with the most bytes queued; false when none
// holds any.
func (s *Server) shedLargest() bool {
	s.connsMu.Lock()
	conns := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.connsMu.Unlock()
	var victim *conn
	most := 0
	for _, c := range conns {
		c.qmu.Lock()
		if !c.closing && c.qbytes > most {
			victim, most = c, c.qbytes
		}
		c.qmu.Unlock()
	}
	if victim == nil {
		return false
	}
	victim.qmu.Lock()
	if victim.closing {
		victim.qmu.Unlock()
		return true // it closed meanwhile: look again
	}
	victim.shedLocked()
	victim.qmu.Unlock()
	victim.log().Warn("the server's send budget is full: closing the connection with the largest queue",
		"bytes", most, "total_limit", s.cfg.Limits.SendQueueTotalBytes)
	go victim.finishClose(websocket.StatusTryAgainLater, "server send budget full: reconnect and resume")
	return true
}

// kickLocked starts the writer goroutine when frames are queued and nothing writes them; the
// caller holds qmu. The writer ends when the queue is empty: an idle connection holds one
// goroutine, its reader (the idle figure of docs/benchmarks.md).
func (c *conn) kickLocked() {
	if c.writerOn || c.writing || c.closing || len(c.queue) == 0 {
		return
	}
	c.writerOn = true
	c.writers.Add(1)
	go c.writeLoop()
}

// maxWriteBatch bounds the frames the writer takes from the queue at once (one write deadline
// covers a batch; see write).
const maxWriteBatch = 64

// write writes frames in order under one deadline of Limits.WriteTimeout for the batch, kept by
// the connection's write timer (reset per batch; when it fires the connection is torn down, which
// ends the blocked write). The writes themselves carry no deadline: coder/websocket arms and
// disarms a context.AfterFunc per frame for a context that has one, which cost about a tenth of
// the server's CPU in the fan-out figure of docs/benchmarks.md. A batch of several frames is
// corked (cork.go): one write(2) for all of them. Callers never write concurrently (c.writing).
func (c *conn) write(frames [][]byte) error {
	if c.wtimer == nil {
		c.wtimer = time.AfterFunc(c.srv.cfg.Limits.WriteTimeout, c.writeTimedOut)
	} else {
		c.wtimer.Reset(c.srv.cfg.Limits.WriteTimeout)
	}
	corked := len(frames) > 1 && c.cork != nil
	if corked {
		c.cork.cork()
	}
	stopped, err := c.writeFrames(frames)
	if corked {
		if uerr := c.cork.uncork(); err == nil {
			err = uerr
		}
	}
	if fired := !c.wtimer.Stop(); fired && err == nil && !stopped {
		return errWriteTimeout
	}
	return err
}

// writeFrames writes frames until one fails or the connection is closing (stopped: the close
// frame follows the frame in flight).
func (c *conn) writeFrames(frames [][]byte) (stopped bool, err error) {
	for _, f := range frames {
		if c.isClosing() {
			return true, nil
		}
		if err := c.ws.Write(context.Background(), websocket.MessageText, f); err != nil {
			return false, err
		}
	}
	return false, nil
}

var errWriteTimeout = errors.New("write timed out: the peer does not read")

// writeTimedOut runs when a write batch overran Limits.WriteTimeout: the peer stopped reading.
func (c *conn) writeTimedOut() {
	c.setCloseErr(errWriteTimeout)
	c.closeBroken()
}

// writeFailed ends a connection whose write failed: coder/websocket has already torn it down (the
// deadline passed or the socket closed); closeBroken records the state and cancels the handlers.
func (c *conn) writeFailed(err error) {
	c.setCloseErr(err)
	go c.closeBroken()
}

// writeLoop is the connection's queue writer, started by kickLocked: it writes queued frames in
// order, a batch at a time, and ends when the queue is empty or a response is being written
// directly (send, which starts it again after). A frame counts against the queue's byte limit
// until it is written. Once the connection is closing it writes no more data.
func (c *conn) writeLoop() {
	defer c.writers.Done()
	var batch [][]byte
	for {
		c.qmu.Lock()
		if c.closing {
			c.shedLocked()
		}
		if c.closing || len(c.queue) == 0 || c.writing {
			c.writerOn = false
			c.qmu.Unlock()
			return
		}
		n := min(len(c.queue), maxWriteBatch)
		batch = append(batch[:0], c.queue[:n]...)
		clear(c.queue[:n])
		c.queue = c.queue[n:]
		c.writing = true
		c.qmu.Unlock()
		err := c.write(batch)
		size := 0
		for i, f := range batch {
			size += len(f)
			batch[i] = nil
		}
		c.qmu.Lock()
		c.addQueued(-size)
		c.writing = false
		if err != nil {
			c.writerOn = false
		}
		c.qmu.Unlock()
		select {
		case c.qroom <- struct{}{}:
		default:
		}
		if err != nil {
			c.writeFailed(err)
			return
		}
	}
}

// waitRoom blocks until the send queue is at most half full (in messages and bytes), the
// connection closes, or ctx ends; it reports whether there is room. A producer that can pause
// (a terminal's output) waits here instead of filling the queue, which would close the
// connection with 1013.
func (c *conn) waitRoom(ctx context.Context) bool {
	lim := c.srv.cfg.Limits
	for {
		c.qmu.Lock()
		closing := c.closing
		room := len(c.queue) <= lim.SendQueueMessages/2 && c.qbytes <= lim.SendQueueBytes/2
		c.qmu.Unlock()
		if closing {
			return false
		}
		if room {
			return true
		}
		select {
		case <-c.qroom:
		case <-c.ctx.Done():
			return false
		case <-ctx.Done():
			return false
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// ping runs when the connection's ping timer fires (every Limits.PingInterval): it pings, waits
// for the pong (at most Limits.PongTimeout) and re-arms the timer. A timer instead of a keepalive
// goroutine: an idle connection holds two goroutines, its reader and its writer (the idle-memory
// figure of docs/benchmarks.md).
func (c *conn) ping() {
	if c.ctx.Err() != nil {
		return
	}
	// Not derived from c.ctx: a cancelled write context makes coder/websocket drop the TCP
	// connection at once, before close can send its close frame.
	ctx, cancel := context.WithTimeout(context.Background(), c.srv.cfg.Limits.PongTimeout)
	err := c.ws.Ping(ctx)
	cancel()
	if c.ctx.Err() != nil {
		return
	}
	if err != nil {
		c.close(websocket.StatusPolicyViolation, "no pong within the timeout")
		return
	}
	c.pingTimer.Reset(c.srv.cfg.Limits.PingInterval)
}

func (c *conn) setCloseErr(err error) {
	c.qmu.Lock()
	if c.closeErr == nil {
		c.closeErr = err
	}
	c.qmu.Unlock()
}

// close closes the WebSocket with a status; safe to call many times and from any goroutine.
// The first close (or closeBroken) wins; later calls return at once.
func (c *conn) close(code websocket.StatusCode, reason string) {
	if !c.markClosing() {
		return
	}
	c.finishClose(code, reason)
}

// closeBroken ends a connection whose write failed (the peer reset it, or stopped reading past
// the write timeout): nothing more can be sent, so no close code is counted as sent.
func (c *conn) closeBroken() {
	if !c.markClosing() {
		return
	}
	c.srv.metrics.closes.WithLabelValues("write_failed").Inc()
	c.stop()
	_ = c.ws.CloseNow()
}

// markClosing sets closing and reports whether this call did (the first to close wins).
func (c *conn) markClosing() bool {
	c.qmu.Lock()
	defer c.qmu.Unlock()
	if c.closing {
		return false
	}
	c.setClosingLocked()
	return true
}

// stop cancels the connection's context (and so every in-flight handler's, field case B29); the
// writer stops after its batch in flight, as the connection is closing.
func (c *conn) stop() {
	c.cancel()
}

// finishClose stops the connection and runs the close handshake: the close frame is written
// once the frame in flight (if any) is out, bounded by coder/websocket's 5 s close timeouts.
func (c *conn) finishClose(code websocket.StatusCode, reason string) {
	c.srv.metrics.closes.WithLabelValues(strconv.Itoa(int(code))).Inc()
	c.stop()
	_ = c.ws.Close(code, reason)
}

func (c *conn) isClosing() bool {
	c.qmu.Lock()
	defer c.qmu.Unlock()
	return c.closing
}

// drainAndClose lets the writer send every queued frame (waiting at most d), then closes with
// code: a graceful shutdown delivers the run:end signals before the 1001 close.
func (c *conn) drainAndClose(code websocket.StatusCode, reason string, d time.Duration) {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		c.qmu.Lock()
		pending, closing := c.qbytes, c.closing
		c.qmu.Unlock()
		if pending == 0 || closing {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	c.close(code, reason)
}
