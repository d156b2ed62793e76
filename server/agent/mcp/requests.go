package mcp

import (
	"context"
	"errors"
	"fmt"
	"sync"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// ElicitFunc answers an MCP server's elicitation/create (issue 23 item 2, MCP 2025-11-25
// elicitation, form and URL modes). ctx is the context of the tool call the request belongs to
// (its values name the session and run; it ends with the call or the server's cancel); server is
// the server's name. The result's Action is accept, decline or cancel.
type ElicitFunc func(ctx context.Context, server string, p *sdk.ElicitParams) (*sdk.ElicitResult, error)

// SampleFunc answers an MCP server's sampling/createMessage; ctx is the tool call's like
// ElicitFunc's.
type SampleFunc func(ctx context.Context, server string, p *sdk.CreateMessageParams) (*sdk.CreateMessageResult, error)

// ErrNoCaller is what a server request answers when no tool call of this client waits on the
// server: an elicitation or a sampling request outside a call has nobody to ask.
var ErrNoCaller = errors.New("no tool call of this client is in progress on this server, so there is nobody to ask; send the request during a tool call")

// ErrAmbiguousCaller is what a server request answers when it does not say which of several
// tool calls in progress on one process it belongs to (a 2025-11-25 server's elicitation/create
// or sampling/createMessage pushed on stdio, or on a streamable HTTP stream the SDK does not
// name) and the calls belong to different callers: asking one of them could show another
// session's user the request, so nobody is asked.
var ErrAmbiguousCaller = errors.New("several tool calls from different sessions are in progress on this MCP server and the request does not say which one it belongs to, so nobody is asked; send it as an input request of the call's result (MCP 2026-07-28), or run the server with \"shared\": false")

// callKey marks a context as one of Proc.CallTool's (its value is the *inflight record).
type callKey struct{}

// inflight is one tool call in progress on a Proc: its caller's context, so that a server
// request arriving outside the call's own context (a 2025-11-25 server's elicitation/create on
// stdio) reaches the session that made the call, and the caller (Options.Caller) it belongs to.
type inflight struct {
	ctx    context.Context
	caller string
}

// calls tracks the tool calls in progress on one Proc, newest last.
type calls struct {
	mu   sync.Mutex
	list []*inflight
}

func (c *calls) add(ctx context.Context, caller string) (context.Context, func()) {
	rec := &inflight{caller: caller}
	ctx = context.WithValue(ctx, callKey{}, rec)
	rec.ctx = ctx
	c.mu.Lock()
	c.list = append(c.list, rec)
	c.mu.Unlock()
	return ctx, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		for i, r := range c.list {
			if r == rec {
				c.list = append(c.list[:i], c.list[i+1:]...)
				return
			}
		}
	}
}

// owner is the call an unassociated server request belongs to: the only call in progress, or
// the newest when every call in progress has the same non-empty caller (one session's
// parallel calls: its user is the one to ask either way). Otherwise ErrNoCaller (none) or
// ErrAmbiguousCaller (calls of different callers, or of unknown ones).
func (c *calls) owner() (*inflight, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.list) == 0 {
		return nil, ErrNoCaller
	}
	last := c.list[len(c.list)-1]
	if len(c.list) == 1 {
		return last, nil
	}
	for _, r := range c.list {
		if r.caller == "" || r.caller != last.caller {
			return nil, ErrAmbiguousCaller
		}
	}
	return last, nil
}

// callerContext is the context a server request is answered in. A request from within a call
// (a 2026-07-28 multi round-trip input request runs in CallTool's context) is exactly its
// call's. Any other (a 2025-11-25 server's elicitation/create or sampling/createMessage: on
// stdio the wire does not say which call it belongs to, and on streamable HTTP the Go SDK
// client does not expose the stream it came on) goes to the call calls.owner names, ending
// also when the request's context ends; with calls of several sessions in progress on one
// shared process it is refused (ErrAmbiguousCaller) rather than risk asking the wrong user.
func (p *Proc) callerContext(rctx context.Context) (context.Context, context.CancelFunc, error) {
	if _, ok := rctx.Value(callKey{}).(*inflight); ok {
		ctx, cancel := context.WithCancel(rctx)
		return ctx, cancel, nil
	}
	rec, err := p.calls.owner()
	if err != nil {
		p.m.o.Logger.Warn("mcp: a server request not answered", "server", p.srv.Name, "err", err)
		return nil, nil, fmt.Errorf("MCP server %q: %w", p.srv.Name, err)
	}
	ctx, cancel := context.WithCancel(rec.ctx)
	stop := context.AfterFunc(rctx, cancel)
	return ctx, func() { stop(); cancel() }, nil
}

// clientOptions are the handlers of the server requests this client answers, and the
// capabilities it advertises: elicitation (form and url) when Options.Elicit is set, sampling
// only when Options.Sample is (the operator enabled it).
func (p *Proc) clientOptions(o *sdk.ClientOptions) {
	caps := &sdk.ClientCapabilities{}
	if f := p.m.o.Elicit; f != nil {
		caps.Elicitation = &sdk.ElicitationCapabilities{Form: &sdk.FormElicitationCapabilities{}, URL: &sdk.URLElicitationCapabilities{}}
		o.ElicitationHandler = func(rctx context.Context, req *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
			ctx, cancel, err := p.callerContext(rctx)
			if err != nil {
				return nil, err
			}
			defer cancel()
			return f(ctx, p.srv.Name, req.Params)
		}
	}
	if f := p.m.o.Sample; f != nil {
		//lint:ignore SA1019 sampling is deprecated in 2026-07-28 but still served (issue 23 item 2)
		o.CreateMessageHandler = func(rctx context.Context, req *sdk.CreateMessageRequest) (*sdk.CreateMessageResult, error) {
			ctx, cancel, err := p.callerContext(rctx)
			if err != nil {
				return nil, err
			}
			defer cancel()
			return f(ctx, p.srv.Name, req.Params)
		}
	}
	o.Capabilities = caps
}
