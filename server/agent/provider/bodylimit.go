package provider

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
)

type bodyLimitKey struct{}

// bodyLimit is a turn's bound on the response bytes read: what its request's context carries.
type bodyLimit struct {
	max      int64
	exceeded func()
	once     sync.Once
}

// ErrBodyLimit is the read error of a response body past its request's WithBodyLimit bound.
var ErrBodyLimit = errors.New("the response passed the bytes a model turn may send")

// WithBodyLimit returns a context under which the HTTP response bodies a LimitBodies transport
// reads are bounded to max bytes each: past it, exceeded is called once (the runtime cancels the
// turn with its error there) and the read fails with ErrBodyLimit. It bounds what no event
// reports (SSE framing, comments, data lines that never form an event, which the SDKs' decoders
// would otherwise gather without end). max <= 0: no bound.
func WithBodyLimit(ctx context.Context, max int64, exceeded func()) context.Context {
	if max <= 0 {
		return ctx
	}
	return context.WithValue(ctx, bodyLimitKey{}, &bodyLimit{max: max, exceeded: exceeded})
}

// LimitBodies wraps rt (nil: http.DefaultTransport) so that each response body is bounded by its
// request context's WithBodyLimit, if any. Providers install it in their HTTP client.
func LimitBodies(rt http.RoundTripper) http.RoundTripper {
	if rt == nil {
		rt = http.DefaultTransport
	}
	return limitTransport{rt}
}

type limitTransport struct{ rt http.RoundTripper }

func (t limitTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.rt.RoundTrip(r)
	if err != nil || resp.Body == nil {
		return resp, err
	}
	if l, ok := r.Context().Value(bodyLimitKey{}).(*bodyLimit); ok {
		resp.Body = &limitedBody{ReadCloser: resp.Body, l: l, left: l.max}
	}
	return resp, nil
}

type limitedBody struct {
	io.ReadCloser
	l    *bodyLimit
	left int64
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		var one [1]byte // a body of exactly max bytes ends as it should
		if n, err := b.ReadCloser.Read(one[:]); n == 0 {
			return 0, err // the end, another error, or nothing yet
		}
		b.l.once.Do(func() {
			if b.l.exceeded != nil {
				b.l.exceeded()
			}
		})
		return 0, ErrBodyLimit
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	return n, err
}
