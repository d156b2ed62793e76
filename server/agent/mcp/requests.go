package mcp

import (
	"context"
	"errors"
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

// callKey marks a context as one of Proc.CallTool's (its value is the *inflight record).
type callKey struct{}

// inflight is one tool call in progress on a Proc: its caller's context, so that a server
// request arriving outside the call's own context (a 2025-11-25 server's elicitation/create on
// stdio) reaches the session that made the call.
type inflight struct{ ctx context.Context }

// calls tracks the tool calls in progress on one Proc, newest last.
type calls struct {
	mu   sync.Mutex
	list []*inflight
}

func (c *calls) add(ctx context.Context) (context.Context, func()) {
	rec := &inflight{}
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

func (c *calls) latest() *inflight {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.list) == 0 {
		return nil
	}
	return c.list[len(c.list)-1]
}

// callerContext is the context a server request is answered in: the request's own when it
// comes from within a call (multi round-trip input requests run in CallTool's context),
// otherwise the newest call in progress on this process, ending also when the request's
// context ends. With several calls in progress on one shared process the newest is asked (the
// 2025-11-25 wire does not say which call a stdio request belongs to).
func (p *Proc) callerContext(rctx context.Context) (context.Context, context.CancelFunc, error) {
	if _, ok := rctx.Value(callKey{}).(*inflight); ok {
		ctx, cancel := context.WithCancel(rctx)
		return ctx, cancel, nil
	}
	rec := p.calls.latest()
	if rec == nil {
		return nil, nil, ErrNoCaller
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
