package server

import (
	"context"
	"sync"

	"github.com/zidane-server/zidane/protocol"
)

// orderedMethods act on a session's runs: on one connection they take effect in the order the
// client sent them, though requests otherwise run concurrently once the read loop hands a waiting
// one off (serve). Two prompts pipelined on one connection run (or queue) in the order sent, and
// a chat.cancel sent right behind a chat.send finds its run. Requests of other connections are
// not ordered against these.
var orderedMethods = map[string]bool{
	protocol.MethodChatSend:       true,
	protocol.MethodChatCancel:     true,
	protocol.MethodQueueRemove:    true,
	protocol.MethodSessionsDelete: true,
}

// orderTicket is an ordered request's place in its connection's chain: it waits until prev is
// closed before its handler runs, and closes mine once it has taken effect (chat.send: once its
// run started or queued, before its prompt's commit; every other: once its handler returned).
type orderTicket struct {
	prev, mine chan struct{}
	once       sync.Once
}

// closedChan is the prev of a connection's first ordered request.
var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// takeTicket gives req its place when its method is ordered; nil otherwise. Only the goroutine
// that reads the connection calls it, in arrival order, before the request can be handed off:
// a reader that takes over (handOff) starts after the previous one's last call (through imu).
func (c *conn) takeTicket(req *protocol.Request) *orderTicket {
	if req == nil || !orderedMethods[req.Method] {
		return nil
	}
	prev := c.orderTail
	if prev == nil {
		prev = closedChan
	}
	t := &orderTicket{prev: prev, mine: make(chan struct{})}
	c.orderTail = t.mine
	return t
}

// wait blocks until every earlier ordered request of the connection has taken effect, or ctx ends.
func (t *orderTicket) wait(ctx context.Context) error {
	select {
	case <-t.prev:
		return nil
	default:
	}
	select {
	case <-t.prev:
		return nil
	case <-ctx.Done():
		return protocol.NewHandlerFailedError("An earlier request on this connection did not finish in time; send this one again.")
	}
}

// pass lets the next ordered request go, once every earlier one has (so a request that failed
// before its turn never lets a later one overtake an earlier one). Idempotent.
func (t *orderTicket) pass() {
	t.once.Do(func() {
		select {
		case <-t.prev:
			close(t.mine)
		default:
			go func() { <-t.prev; close(t.mine) }()
		}
	})
}

type orderKey struct{}

// tookEffect tells the ordered request that ctx belongs to that it has taken effect: later ordered
// requests of its connection may run. A handler calls it where its effect is settled but it still
// waits (chat.send: run started, prompt not yet committed); the request's end calls it anyway.
func tookEffect(ctx context.Context) {
	if t, ok := ctx.Value(orderKey{}).(*orderTicket); ok && t != nil {
		t.pass()
	}
}
