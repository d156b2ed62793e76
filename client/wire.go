package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/zidane-server/zidane/protocol"
)

// wire is one WebSocket connection of a Client: its reader, its pending calls and its pinger.
type wire struct {
	c     *Client
	ws    *websocket.Conn
	gen   uint64
	epoch string
	hello *protocol.IPCHelloResult

	readCtx    context.Context // the reader's; cancelling it closes the connection at once
	readCancel context.CancelFunc

	lastFrame atomic.Int64 // when the reader last got a frame (UnixNano): proof of life for pingLoop

	mu      sync.Mutex
	pending map[string]chan response
	err     error // why it ended; set once, before dead closes
	dead    chan struct{}
}

// fail ends the connection's life once: pending calls fail with a *ConnectionLostError (or the
// terminal error), and later round trips fail at once.
func (w *wire) fail(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return
	}
	w.err = err
	close(w.dead)
}

func (w *wire) lostErr(method string) error {
	w.mu.Lock()
	err := w.err
	w.mu.Unlock()
	if errors.Is(err, ErrClosed) || terminalState(err) != "" {
		return err
	}
	return &ConnectionLostError{Method: method, Cause: err}
}

// roundTrip writes msg and waits for the answer with id.
func (w *wire) roundTrip(ctx context.Context, id, method string, msg []byte) (response, error) {
	ch := make(chan response, 1)
	w.mu.Lock()
	if w.err != nil {
		w.mu.Unlock()
		if errors.Is(w.err, ErrClosed) || terminalState(w.err) != "" {
			return response{}, w.err
		}
		return response{}, ErrNotConnected
	}
	w.pending[id] = ch
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		delete(w.pending, id)
		w.mu.Unlock()
	}()
	if err := w.ws.Write(ctx, websocket.MessageText, msg); err != nil {
		if ctx.Err() != nil {
			return response{}, ctx.Err()
		}
		w.kill(fmt.Errorf("write %s: %w", method, err))
		return response{}, w.lostErr(method)
	}
	select {
	case r := <-ch:
		return r, nil
	case <-w.dead:
		return response{}, w.lostErr(method)
	case <-ctx.Done():
		return response{}, ctx.Err()
	}
}

// kill declares the connection dead and closes it without the close handshake.
func (w *wire) kill(err error) {
	w.fail(err)
	w.ws.CloseNow()
}

// closeNormal closes with 1000, waiting at most a second for the close handshake.
func (w *wire) closeNormal() {
	done := make(chan struct{})
	go func() { w.ws.Close(websocket.StatusNormalClosure, ""); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Second):
		w.readCancel() // the peer does not answer: stop reading, which closes the socket
		<-done
	}
}

// closeError maps the server's close of a live connection to the client's error: a revoked token
// (1008 "token revoked") is ErrUnauthorized; anything else is transient.
func closeError(err error) error {
	var ce websocket.CloseError
	if errors.As(err, &ce) {
		if ce.Code == websocket.StatusPolicyViolation && strings.Contains(ce.Reason, "revoked") {
			return fmt.Errorf("%w (the server closed the connection: %s)", ErrUnauthorized, ce.Reason)
		}
		return fmt.Errorf("zidane client: the server closed the connection (%d %s)", int(ce.Code), ce.Reason)
	}
	return fmt.Errorf("zidane client: connection lost: %w", err)
}

func (w *wire) readLoop() {
	defer w.c.loopWG.Done()
	defer w.readCancel()
	for {
		_, data, err := w.ws.Read(w.readCtx)
		if err != nil {
			w.fail(closeError(err))
			w.ws.CloseNow()
			return
		}
		w.lastFrame.Store(time.Now().UnixNano())
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
			if ev, ok := decodeSignal(m.Params, 0); ok {
				w.c.onLive(w, ev)
			}
			continue
		}
		if len(m.ID) == 0 || m.Method != "" {
			continue
		}
		w.mu.Lock()
		ch := w.pending[string(m.ID)]
		w.mu.Unlock()
		if ch != nil {
			ch <- response{Result: m.Result, Err: m.Error}
		}
	}
}

// pingLoop sends $/ping every PingInterval and waits for its answer. The answer queues behind
// every frame the server sent before it (its send queue is in order), so a client working
// through a backlog of signals gets it late: a frame read within the last PingTimeout proves
// the connection alive and the wait goes on. Only a connection silent for PingTimeout after
// the ping is declared dead (client case C09).
func (w *wire) pingLoop() {
	defer w.c.loopWG.Done()
	t := time.NewTicker(w.c.opts.PingInterval)
	defer t.Stop()
	timeout := w.c.opts.PingTimeout
	for {
		select {
		case <-w.dead:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithCancel(context.Background())
		answered := make(chan error, 1)
		go func() { answered <- w.c.call(ctx, w, protocol.MethodPing, nil, nil) }()
		sent := time.Now()
		wait := time.NewTimer(timeout)
		var err error
	waiting:
		for {
			select {
			case err = <-answered:
				break waiting
			case <-wait.C:
				last := time.Unix(0, w.lastFrame.Load())
				if quiet := time.Since(last); last.After(sent) && quiet < timeout {
					wait.Reset(timeout - quiet)
					continue
				}
				cancel()
				<-answered
				w.kill(fmt.Errorf("zidane client: no answer to $/ping and no frame within %s; the connection is dead", timeout))
				return
			}
		}
		wait.Stop()
		cancel()
		var rpcErr *protocol.Error
		if err != nil && !errors.As(err, &rpcErr) {
			return // the connection ended (its reader reports why)
		}
	}
}

// signalHead is what the client reads of every signal, whatever its kind.
type signalHead struct {
	SessionID string `json:"sessionId"`
	RunID     string `json:"runId"`
	Seq       int64  `json:"$seq"`
}

// decodeSignal decodes a signal's params; seq, when not 0, is its $seq from a replay (whose
// signal carries none): it is added to Raw so every delivered signal looks alike.
func decodeSignal(params json.RawMessage, seq int64) (SignalEvent, bool) {
	var head signalHead
	if json.Unmarshal(params, &head) != nil {
		return SignalEvent{}, false
	}
	sig, err := protocol.DecodeSignal(params)
	if err != nil {
		return SignalEvent{}, false
	}
	raw := params
	if seq != 0 && head.Seq == 0 {
		raw = withSeq(params, seq)
		head.Seq = seq
	}
	return SignalEvent{Seq: head.Seq, Signal: sig, Raw: raw, SessionID: head.SessionID}, true
}

// withSeq appends "$seq":seq to a JSON object.
func withSeq(obj json.RawMessage, seq int64) json.RawMessage {
	b := bytes.TrimRight(obj, " \t\r\n")
	if len(b) < 2 || b[len(b)-1] != '}' {
		return obj
	}
	out := make([]byte, 0, len(b)+24)
	out = append(out, b[:len(b)-1]...)
	if len(bytes.TrimSpace(b[1:len(b)-1])) > 0 {
		out = append(out, ',')
	}
	out = append(out, fmt.Sprintf(`"$seq":%d}`, seq)...)
	return out
}
