package client

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zidane-server/zidane/client/clienttest"
	"github.com/zidane-server/zidane/protocol"
)

// The client cases of shared/cases/client-cases.md that apply to the Go client, against a
// scripted server (fakeServer) behind a cut proxy (clienttest.Proxy).

type rig struct {
	fs *fakeServer
	px *clienttest.Proxy
	c  *Client
	k  *collector
	st *states
}

func newRig(t *testing.T, mod func(*Options)) *rig {
	return newRigWith(t, nil, mod)
}

// newRigWith is newRig with the proxy set up by px before the client opens.
func newRigWith(t *testing.T, px func(*clienttest.Proxy), mod func(*Options)) *rig {
	r := &rig{fs: newFakeServer(t), st: &states{}}
	r.px = r.fs.proxy()
	if px != nil {
		px(r.px)
	}
	o := fast()
	o.OnState = r.st.record
	if mod != nil {
		mod(&o)
	}
	r.c = Open(r.px.URL(), o)
	t.Cleanup(func() { r.c.Close() })
	r.k = collect(r.c)
	return r
}

func params(t *testing.T, req fsRequest) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(req.Params, &m))
	return m
}

// follow connects, follows sid from 0 and answers its first resume with nothing.
func (r *rig) follow(t *testing.T, conn *fsConn, sid string) {
	t.Helper()
	r.c.Follow(sid, 0)
	req := conn.req(t)
	require.Equal(t, "sessions.resume", req.Method)
	conn.answer(req.ID, `{"ok":true,"signals":[]}`)
}

// followed connects, follows sid and delivers its live signals 1..n.
func (r *rig) followed(t *testing.T, sid string, n int64) *fsConn {
	t.Helper()
	conn := r.connected(t)
	r.follow(t, conn, sid)
	for i := int64(1); i <= n; i++ {
		conn.push(md(sid, i, "x"))
	}
	r.k.waitSeqs(t, sid, int(n))
	return conn
}

func (r *rig) connected(t *testing.T) *fsConn {
	t.Helper()
	conn := r.fs.conn(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, r.c.WaitConnected(ctx))
	return conn
}

// TestClientCase_C01_CloseWinsOverReconnect: Close during the backoff wait, and Close while an
// attempt is connecting, end the client: no socket is opened after Close returns.
func TestClientCase_C01_CloseWinsOverReconnect(t *testing.T) {
	t.Run("during the wait", func(t *testing.T) {
		down := clienttest.Start(t, deadAddr(t)) // accepts, then finds nothing behind it
		st := &states{}
		o := fast()
		o.Backoff = Backoff{Min: 300 * time.Millisecond, Max: time.Second}
		o.OnState = st.record
		c := Open(down.URL(), o)
		require.Eventually(t, func() bool { return st.count(StateReconnecting) == 1 }, 5*time.Second, time.Millisecond)
		require.NoError(t, c.Close())
		n := down.Accepted()
		time.Sleep(600 * time.Millisecond)
		assert.Equal(t, n, down.Accepted(), "no attempt after Close")
		assert.Equal(t, 1, n)
		assert.Equal(t, StateClosed, c.State())
		assert.ErrorIs(t, c.WaitConnected(context.Background()), ErrClosed)
	})
	t.Run("while connecting", func(t *testing.T) {
		fs := newFakeServer(t)
		px := fs.proxy()
		px.Stall()
		c := Open(px.URL(), fast())
		require.Eventually(t, func() bool { return px.Accepted() == 1 }, 5*time.Second, time.Millisecond)
		require.NoError(t, c.Close())
		px.Forward()
		time.Sleep(200 * time.Millisecond)
		assert.Equal(t, 1, px.Accepted(), "one socket")
		fs.mu.Lock()
		assert.Empty(t, fs.conns, "no hello reached the server")
		fs.mu.Unlock()
		assert.NoError(t, c.Close(), "a second Close does nothing")
		assert.Equal(t, StateClosed, c.State())
	})
}

// deadAddr is a loopback address where nothing listens.
func deadAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// TestClientCase_C02_ConnectTimeoutKeepsRetrying: an upgrade that never answers is aborted after
// ConnectTimeout, the cause says so, and the next attempts follow the backoff; after five cycles
// there were exactly five sockets.
func TestClientCase_C02_ConnectTimeoutKeepsRetrying(t *testing.T) {
	r := newRigWith(t, (*clienttest.Proxy).Stall, func(o *Options) {
		o.ConnectTimeout = 100 * time.Millisecond
		o.Backoff = Backoff{Min: 20 * time.Millisecond, Max: 40 * time.Millisecond}
	})
	require.Eventually(t, func() bool { return r.st.count(StateReconnecting) >= 5 }, 10*time.Second, time.Millisecond)
	r.c.Close()
	var delays []time.Duration
	for _, ch := range r.st.list() {
		if ch.State == StateReconnecting {
			assert.ErrorContains(t, ch.Err, "timed out after 100ms")
			delays = append(delays, ch.Delay)
		}
	}
	assert.Equal(t, []time.Duration{20 * time.Millisecond, 40 * time.Millisecond, 40 * time.Millisecond, 40 * time.Millisecond, 40 * time.Millisecond}, delays[:5])
	n := r.px.Accepted() // one socket per attempt; Close may have cut one more short
	assert.True(t, n == len(delays) || n == len(delays)+1, "%d sockets for %d failed attempts", n, len(delays))
}

// TestClientCase_C03_OneSocketAtATime: failures and resets never open a second socket: one new
// attempt per failed attempt, and after 20 resets the server has one live connection whose
// signals arrive once.
func TestClientCase_C03_OneSocketAtATime(t *testing.T) {
	r := newRig(t, nil)
	r.px.Respond(http.StatusBadGateway)
	r.px.RST() // in case the first attempt got through before Respond
	require.Eventually(t, func() bool { return r.st.count(StateReconnecting) >= 3 }, 5*time.Second, time.Millisecond)
	assert.LessOrEqual(t, r.px.Accepted(), r.st.count(StateReconnecting)+1, "one attempt per failure")
	r.px.Forward()
	r.connected(t)
	for i := 0; i < 20; i++ {
		r.px.RST()
		time.Sleep(50 * time.Millisecond)
	}
	conn := r.connected(t)
	for len(r.fs.newConn) > 0 { // the latest connection is the live one
		conn = <-r.fs.newConn
	}
	assert.Equal(t, 1, r.px.MaxOpen(), "never two sockets at once")
	conn.push(`{"kind":"presence:changed","sessions":[]}`)
	require.Eventually(t, func() bool { return len(r.k.all()) == 1 }, 5*time.Second, time.Millisecond)
	time.Sleep(50 * time.Millisecond)
	assert.Len(t, r.k.all(), 1)
}

// TestClientCase_C05_BackoffResetsOnlyAfterHello: waits double to the cap while attempts fail,
// including attempts whose upgrade succeeds but that close before hello answers (1011); only a
// completed handshake resets them.
func TestClientCase_C05_BackoffResetsOnlyAfterHello(t *testing.T) {
	r := newRig(t, func(o *Options) {
		o.Backoff = Backoff{Min: 10 * time.Millisecond, Max: 80 * time.Millisecond}
	})
	ms := time.Millisecond
	delays := func(from int) []time.Duration {
		var out []time.Duration
		for _, ch := range r.st.list()[from:] {
			if ch.State == StateReconnecting {
				out = append(out, ch.Delay)
			}
		}
		return out
	}
	r.connected(t)
	mark := len(r.st.list())
	r.px.Respond(http.StatusServiceUnavailable)
	r.px.RST()
	require.Eventually(t, func() bool { return len(delays(mark)) >= 6 }, 5*time.Second, time.Millisecond)
	assert.Equal(t, []time.Duration{10 * ms, 20 * ms, 40 * ms, 80 * ms, 80 * ms, 80 * ms}, delays(mark)[:6])

	r.fs.set(func() { r.fs.closeBeforeHello = 1011 })
	r.px.Forward()
	require.Eventually(t, func() bool { return r.fs.accepted() >= 3 }, 5*time.Second, time.Millisecond)
	r.fs.set(func() { r.fs.closeBeforeHello = 0 })
	r.connected(t)
	for _, d := range delays(mark)[6:] {
		assert.Equal(t, 80*ms, d, "an upgrade without a hello does not reset the backoff")
	}

	mark = len(r.st.list())
	r.px.RST()
	r.connected(t)
	assert.Equal(t, 10*ms, delays(mark)[0], "after a handshake the first wait is Min again")
}

// TestClientCase_C06_NeverReplayABufferedCall: a call made while reconnecting fails at once and
// never reaches the server; a call on the wire when the connection drops fails with
// ConnectionLostError and is not resent.
func TestClientCase_C06_NeverReplayABufferedCall(t *testing.T) {
	r := newRig(t, nil)
	conn := r.connected(t)
	done := make(chan error, 1)
	go func() {
		_, err := r.c.ChatSend(context.Background(), &protocol.ChatSendParams{SessionID: "A", Prompt: ptr("hi")})
		done <- err
	}()
	req := conn.req(t)
	require.Equal(t, "chat.send", req.Method)
	r.px.Respond(http.StatusBadGateway)
	r.px.RST()
	err := <-done
	var lost *ConnectionLostError
	require.ErrorAs(t, err, &lost)
	assert.Equal(t, "chat.send", lost.Method)
	assert.ErrorIs(t, err, ErrDisconnected)
	assert.Contains(t, err.Error(), "outcome is unknown")

	start := time.Now()
	_, err = r.c.ChatSend(context.Background(), &protocol.ChatSendParams{SessionID: "A", Prompt: ptr("offline")})
	assert.ErrorIs(t, err, ErrNotConnected)
	assert.Less(t, time.Since(start), 100*time.Millisecond, "fails at once")
	r.px.Forward()
	conn2 := r.connected(t)
	time.Sleep(100 * time.Millisecond)
	assert.Equal(t, []string{"ipc.hello"}, conn2.seen(), "nothing is resent on the new connection")
}

// TestClientCase_C07_NothingMultipliesAcrossReconnects: after three reconnects a signal pushed
// once is delivered once, and each connection sends one resume per followed session.
func TestClientCase_C07_NothingMultipliesAcrossReconnects(t *testing.T) {
	r := newRig(t, nil)
	conn := r.connected(t)
	r.follow(t, conn, "A")
	for i := 0; i < 3; i++ {
		r.px.RST()
		conn = r.fs.conn(t)
		req := conn.req(t)
		require.Equal(t, "sessions.resume", req.Method)
		conn.answer(req.ID, `{"ok":true,"signals":[]}`)
	}
	conn.push(md("A", 1, "x"))
	assert.Equal(t, []int64{1}, r.k.waitSeqs(t, "A", 1))
	time.Sleep(100 * time.Millisecond)
	assert.Equal(t, []int64{1}, r.k.seqs("A"))
	assert.Equal(t, []string{"ipc.hello", "sessions.resume"}, conn.seen())
	assert.Equal(t, 1, r.px.Open())
}

// TestClientCase_C08_EveryPendingCallSettles: a call before the handshake fails at once, a
// call in flight fails when the connection drops and when the client closes.
func TestClientCase_C08_EveryPendingCallSettles(t *testing.T) {
	r := newRig(t, nil)
	r.px.Stall()
	r.px.RST()
	_, err := r.c.SessionsList(context.Background(), nil)
	assert.ErrorIs(t, err, ErrNotConnected, "a call before hello is not queued")

	r.px.Forward()
	r.px.RST()
	conn := r.connected(t)
	errs := make(chan error, 1)
	go func() { _, err := r.c.SessionsList(context.Background(), nil); errs <- err }()
	conn.req(t) // never answered
	r.px.RST()
	select {
	case err := <-errs:
		assert.ErrorIs(t, err, ErrDisconnected)
	case <-time.After(5 * time.Second):
		t.Fatal("the pending call did not settle on the drop")
	}

	conn = r.connected(t)
	go func() { _, err := r.c.SessionsList(context.Background(), nil); errs <- err }()
	conn.req(t)
	r.c.Close()
	select {
	case err := <-errs:
		assert.ErrorIs(t, err, ErrClosed)
	case <-time.After(5 * time.Second):
		t.Fatal("the pending call did not settle on Close")
	}
}

// TestClientCase_C09_HalfOpenConnectionIsDropped: a black-holed connection (no FIN, no RST) is
// declared dead when $/ping goes unanswered, closed at once, its pending call fails, and the
// client reconnects and resumes from its last $seq.
func TestClientCase_C09_HalfOpenConnectionIsDropped(t *testing.T) {
	r := newRig(t, func(o *Options) {
		o.PingInterval = 100 * time.Millisecond
		o.PingTimeout = 100 * time.Millisecond
	})
	conn := r.followed(t, "A", 3)
	errs := make(chan error, 1)
	go func() {
		_, err := r.c.ChatSend(context.Background(), &protocol.ChatSendParams{SessionID: "A", Prompt: ptr("p")})
		errs <- err
	}()
	conn.req(t)
	r.px.Blackhole()
	start := time.Now()
	select {
	case err := <-errs:
		assert.ErrorIs(t, err, ErrDisconnected)
		assert.Less(t, time.Since(start), 2*time.Second, "declared dead within interval + timeout, not after a close handshake")
	case <-time.After(5 * time.Second):
		t.Fatal("the half-open connection was not detected")
	}
	r.px.Forward()
	conn2 := r.fs.conn(t)
	req := conn2.req(t)
	assert.Equal(t, map[string]any{"sessionId": "A", "epoch": "epoch-1", "afterSeq": float64(3)}, params(t, req))
	conn2.answer(req.ID, resumeOK("A", 4, 9))
	assert.Equal(t, span(1, 9), r.k.waitSeqs(t, "A", 9))
}

// TestClientCase_C09_BacklogIsNotDeath: a $/ping answer held behind a stream of signals (the
// server's in-order send queue) does not drop the connection while frames keep arriving; once
// they stop, the unanswered ping declares it dead.
func TestClientCase_C09_BacklogIsNotDeath(t *testing.T) {
	r := newRig(t, func(o *Options) {
		o.PingInterval = 50 * time.Millisecond
		o.PingTimeout = 150 * time.Millisecond
	})
	r.fs.set(func() { r.fs.pingLag = time.Hour })
	conn := r.followed(t, "A", 1)
	stop := make(chan struct{})
	flowed := make(chan int64)
	go func() {
		seq := int64(1)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				flowed <- seq
				return
			case <-tick.C:
				seq++
				conn.push(md("A", seq, "x"))
			}
		}
	}()
	time.Sleep(time.Second) // over six ping timeouts, each ping unanswered, signals flowing
	close(stop)
	n := <-flowed
	assert.Equal(t, 0, r.st.count(StateReconnecting), "no drop while frames arrive: %v", r.st.list())
	assert.Equal(t, 1, r.px.Accepted())
	r.k.waitSeqs(t, "A", int(n))
	quiet := time.Now()
	r.fs.conn(t) // silence: the ping's deadline ends the connection and the client reconnects
	assert.Less(t, time.Since(quiet), 2*time.Second)
	assert.GreaterOrEqual(t, r.st.count(StateReconnecting), 1)
}

// TestClientCase_C10_LateTimersDoNotLookDead: a ping answered later than the ping interval but
// within the timeout counted from its send does not drop the connection.
func TestClientCase_C10_LateTimersDoNotLookDead(t *testing.T) {
	r := newRig(t, func(o *Options) {
		o.PingInterval = 30 * time.Millisecond
		o.PingTimeout = 500 * time.Millisecond
	})
	r.fs.set(func() { r.fs.pingLag = 120 * time.Millisecond })
	r.connected(t)
	time.Sleep(time.Second)
	assert.Equal(t, 0, r.st.count(StateReconnecting), "no reconnect: %v", r.st.list())
	assert.Equal(t, 1, r.px.Accepted())
}

// TestClientCase_C11_RefusedTokenStopsRetries: 401 gives one attempt, ErrUnauthorized and the
// terminal unauthorized state; 403 stops as forbidden; 503 keeps retrying.
func TestClientCase_C11_RefusedTokenStopsRetries(t *testing.T) {
	for _, tc := range []struct {
		status int
		state  State
		err    error
	}{{401, StateUnauthorized, ErrUnauthorized}, {403, StateForbidden, ErrForbidden}} {
		fs := newFakeServer(t)
		px := fs.proxy()
		px.Respond(tc.status)
		c := Open(px.URL(), fast())
		select {
		case <-c.Done():
		case <-time.After(5 * time.Second):
			t.Fatalf("%d: the client did not stop", tc.status)
		}
		assert.Equal(t, tc.state, c.State())
		assert.ErrorIs(t, c.Err(), tc.err)
		time.Sleep(100 * time.Millisecond)
		assert.Equal(t, 1, px.Accepted(), "%d: one attempt", tc.status)
		_, err := c.SessionsList(context.Background(), nil)
		assert.ErrorIs(t, err, tc.err)
		c.Close()
		_, err = Dial(context.Background(), px.URL(), fast())
		assert.ErrorIs(t, err, tc.err, "Dial names it too")
	}
	r := newRig(t, nil)
	r.px.Respond(http.StatusServiceUnavailable)
	r.px.RST() // in case the first attempt got through before Respond
	require.Eventually(t, func() bool { return r.st.count(StateReconnecting) >= 3 }, 5*time.Second, time.Millisecond)
	last := r.st.list()
	assert.ErrorContains(t, last[len(last)-1].Err, "503")
	assert.False(t, r.c.State().Terminal())
}

// TestClientCase_C12_RevocationCloseIsTerminal: the server's close for a revoked token is the
// token-refused error, terminal, and pending calls fail with it. The table lists the closes the
// server sends and which stop the client.
func TestClientCase_C12_RevocationCloseIsTerminal(t *testing.T) {
	for _, tc := range []struct {
		code     int
		reason   string
		terminal bool
	}{
		{1008, "token revoked", true},
		{1008, "no pong within the timeout", false},
		{1008, "no ipc.hello within the handshake timeout", false},
		{1001, "", false},
		{1002, "protocol error", false},
		{1011, "", false},
		{1013, "send queue full", false},
		{1000, "", false},
	} {
		r := newRig(t, nil)
		conn := r.connected(t)
		errs := make(chan error, 1)
		go func() { _, err := r.c.SessionsList(context.Background(), nil); errs <- err }()
		conn.req(t)
		conn.ws.Close(websocketStatus(tc.code), tc.reason)
		err := <-errs
		if tc.terminal {
			assert.ErrorIs(t, err, ErrUnauthorized, "%d %s", tc.code, tc.reason)
			<-r.c.Done()
			assert.Equal(t, StateUnauthorized, r.c.State())
			time.Sleep(50 * time.Millisecond)
			assert.Equal(t, 1, r.px.Accepted(), "no reconnect after a revocation")
		} else {
			var lost *ConnectionLostError
			assert.ErrorAs(t, err, &lost, "%d %s", tc.code, tc.reason)
			r.connected(t)
			assert.Equal(t, 2, r.px.Accepted(), "%d %s reconnects", tc.code, tc.reason)
		}
		r.c.Close()
	}
}

// TestClientCase_C13_AnotherHostIDStops: a server that answers another hostId at the same URL
// is refused: no resume, the state is hostChanged with both ids, and no retries.
func TestClientCase_C13_AnotherHostIDStops(t *testing.T) {
	r := newRig(t, nil)
	conn := r.connected(t)
	r.follow(t, conn, "A")
	conn.push(md("A", 1, "x"))
	r.k.waitSeqs(t, "A", 1)
	assert.Equal(t, "host-1", r.c.HostID())
	r.fs.set(func() { r.fs.hostID = "host-2" })
	r.px.RST()
	conn2 := r.fs.conn(t)
	<-r.c.Done()
	assert.Equal(t, StateHostChanged, r.c.State())
	var hc *HostChangedError
	require.ErrorAs(t, r.c.Err(), &hc)
	assert.Equal(t, "host-1", hc.Expected)
	assert.Equal(t, "host-2", hc.Got)
	time.Sleep(100 * time.Millisecond)
	assert.Equal(t, []string{"ipc.hello"}, conn2.seen(), "no resume, no reload")
	assert.Equal(t, 2, r.px.Accepted())

	// A saved hostId is checked on the first connection too.
	_, err := Dial(context.Background(), r.fs.url(), Options{HostID: "host-1"})
	assert.ErrorAs(t, err, &hc)
}

// TestClientCase_C14_HeldSignalsAppliedOnce: live signals that arrive while resume runs are
// held, then applied after the replay without repeats; a hole after the replay is resumed
// again; another session's signals are not held.
func TestClientCase_C14_HeldSignalsAppliedOnce(t *testing.T) {
	for _, variant := range []struct {
		name           string
		liveBefore     []int64
		replayTo       int64
		liveAfter      []int64
		secondReplayTo int64
		want           int64
	}{
		{"live 7 then replay 4..7", []int64{7}, 7, nil, 0, 7},
		{"live 7, replay 4..6, live 8", []int64{7}, 6, []int64{8}, 0, 8},
		{"live 9, replay 4..7: hole at 8", []int64{9}, 7, nil, 9, 9},
	} {
		t.Run(variant.name, func(t *testing.T) {
			r := newRig(t, nil)
			conn := r.followed(t, "A", 3)
			r.px.RST()
			conn = r.fs.conn(t)
			req := conn.req(t)
			assert.Equal(t, float64(3), params(t, req)["afterSeq"])
			for _, s := range variant.liveBefore {
				conn.push(md("A", s, "x"))
			}
			conn.push(md("B", 5, "b"))
			require.Eventually(t, func() bool { return len(r.k.seqs("B")) == 1 }, 5*time.Second, time.Millisecond, "B is not held behind A's resume")
			assert.Equal(t, []int64{1, 2, 3}, r.k.seqs("A"), "A's live signals are held while its resume runs")
			conn.answer(req.ID, resumeOK("A", 4, variant.replayTo))
			for _, s := range variant.liveAfter {
				conn.push(md("A", s, "x"))
			}
			if variant.secondReplayTo > 0 {
				req2 := conn.req(t)
				assert.Equal(t, float64(variant.replayTo), params(t, req2)["afterSeq"], "resumes again from the last applied")
				conn.answer(req2.ID, resumeOK("A", variant.replayTo+1, variant.secondReplayTo))
			}
			assert.Equal(t, span(1, variant.want), r.k.waitSeqs(t, "A", int(variant.want)))
			time.Sleep(50 * time.Millisecond)
			assert.Equal(t, span(1, variant.want), r.k.seqs("A"))
			_, seq, _ := r.c.Cursor("A")
			assert.Equal(t, variant.want, seq)
		})
	}
}

// TestClientCase_C15_CursorSurvivesAnEmptyResume: a connection that resumed nothing and dropped
// does not lose the cursor; a followed session without signals resumes from 0 each time.
func TestClientCase_C15_CursorSurvivesAnEmptyResume(t *testing.T) {
	r := newRig(t, nil)
	conn := r.followed(t, "A", 3)
	r.c.Follow("C", 0)
	answerResumes := func(conn *fsConn) map[string]float64 {
		got := map[string]float64{}
		for i := 0; i < 2; i++ {
			req := conn.req(t)
			p := params(t, req)
			assert.Equal(t, "epoch-1", p["epoch"])
			got[p["sessionId"].(string)] = p["afterSeq"].(float64)
			conn.answer(req.ID, `{"ok":true,"signals":[]}`)
		}
		return got
	}
	req := conn.req(t)
	conn.answer(req.ID, `{"ok":true,"signals":[]}`)
	r.px.RST()
	assert.Equal(t, map[string]float64{"A": 3, "C": 0}, answerResumes(r.fs.conn(t)))
	time.Sleep(20 * time.Millisecond)
	r.px.RST()
	assert.Equal(t, map[string]float64{"A": 3, "C": 0}, answerResumes(r.fs.conn(t)))
}

// TestClientCase_C18_ReplayBoundToItsConnection: a long replay delivered to a slow reader, cut
// in the middle, gives every $seq once and in order, and the cursor only moves forward.
func TestClientCase_C18_ReplayBoundToItsConnection(t *testing.T) {
	fs := newFakeServer(t)
	px := fs.proxy()
	c := Open(px.URL(), fast())
	defer c.Close()
	conn := fs.conn(t)
	require.NoError(t, c.WaitConnected(context.Background()))
	c.Follow("A", 3)
	req := conn.req(t)
	conn.answer(req.ID, resumeOK("A", 4, 200))
	var got []int64
	last := int64(3)
	for ev := range c.Signals() {
		got = append(got, ev.Seq)
		_, cur, _ := c.Cursor("A")
		assert.GreaterOrEqual(t, cur, last, "the cursor never moves back")
		last = cur
		if ev.Seq == 50 {
			px.RST()
			conn = fs.conn(t)
			req := conn.req(t)
			assert.Equal(t, float64(200), params(t, req)["afterSeq"], "the cursor counts what was taken, not what the reader got to")
			conn.answer(req.ID, resumeOK("A", 201, 210))
		}
		time.Sleep(100 * time.Microsecond) // a slow handler
		if ev.Seq == 210 {
			break
		}
	}
	assert.Equal(t, span(4, 210), got)
}

// TestClientCase_C19_EpochReloadsAndTellsTheUser: after a restart (another signalEpoch) the
// client does not continue E1's cursor with E2's numbers: it reloads through
// sessions.loadEvents, delivers a Reload, and follows E2 from then on. With a watermark in the
// answer the held live signals above it are applied and none below, with no further resume.
func TestClientCase_C19_EpochReloadsAndTellsTheUser(t *testing.T) {
	r := newRig(t, nil)
	conn := r.followed(t, "A", 40)
	r.fs.set(func() { r.fs.epoch = "epoch-2" })
	r.px.RST()
	conn = r.fs.conn(t)
	req := conn.req(t)
	assert.Equal(t, map[string]any{"sessionId": "A", "epoch": "epoch-1", "afterSeq": float64(40)}, params(t, req))
	for i := int64(45); i <= 48; i++ { // a run streams in E2 meanwhile
		conn.push(md("A", i, "y"))
	}
	conn.answer(req.ID, `{"ok":false,"reason":"epoch"}`)
	req = conn.req(t)
	require.Equal(t, "sessions.loadEvents", req.Method)
	conn.push(md("A", 49, "z"))
	conn.answer(req.ID, `{"events":[{"kind":"user-prompt","text":"p","turnId":"u"},{"kind":"markdown","text":"done","streaming":false,"turnId":"t1"}],"start":0,"exact":true,"signalEpoch":"epoch-2","$seq":46}`)
	// The held signals above the watermark (47–49) complete the snapshot: no resume is needed
	// (behind a short replay log one could answer gap again and again while a run streams).
	conn.push(md("A", 50, "w"))
	require.Eventually(t, func() bool {
		s := r.k.seqs("A")
		return len(s) > 0 && s[len(s)-1] == 50
	}, 5*time.Second, time.Millisecond)
	var reload *Reload
	var after []int64
	for _, ev := range r.k.all() {
		if ev.Reload != nil {
			reload = ev.Reload
			continue
		}
		if reload != nil && ev.SessionID == "A" {
			after = append(after, ev.Seq)
		}
	}
	require.NotNil(t, reload, "the user is told")
	assert.Equal(t, "epoch", reload.Reason)
	assert.True(t, reload.Exact)
	assert.Len(t, reload.Events, 2)
	assert.Equal(t, []int64{47, 48, 49, 50}, after, "nothing at or below the watermark, nothing twice")
	epoch, seq, _ := r.c.Cursor("A")
	assert.Equal(t, "epoch-2", epoch)
	assert.Equal(t, int64(50), seq)
}

// TestClientCase_C19_ReloadWithoutWatermarkRefreshesAtRunEnd: a server that answers no
// watermark gets a second reload when the streaming run ends, so the transcript ends exact.
func TestClientCase_C19_ReloadWithoutWatermarkRefreshesAtRunEnd(t *testing.T) {
	r := newRig(t, nil)
	conn := r.connected(t)
	r.follow(t, conn, "A")
	conn.push(md("A", 1, "x"))
	r.k.waitSeqs(t, "A", 1)
	r.px.RST()
	conn = r.fs.conn(t)
	req := conn.req(t)
	conn.push(md("A", 2500, "y"))
	conn.answer(req.ID, `{"ok":false,"reason":"gap"}`)
	req = conn.req(t)
	require.Equal(t, "sessions.loadEvents", req.Method)
	conn.answer(req.ID, `{"events":[],"start":0,"exact":true}`)
	conn.push(md("A", 2501, "z"))
	conn.push(`{"kind":"run:end","sessionId":"A","runId":"r","ok":true,"$seq":2502}`)
	req = conn.req(t)
	require.Equal(t, "sessions.loadEvents", req.Method, "reloads again at run:end")
	conn.answer(req.ID, `{"events":[{"kind":"markdown","text":"yz","streaming":false,"turnId":"t1"}],"start":0,"exact":true}`)
	require.Eventually(t, func() bool {
		n := 0
		for _, ev := range r.k.all() {
			if ev.Reload != nil {
				n++
			}
		}
		return n == 2
	}, 5*time.Second, time.Millisecond)
	tr := NewTranscript("A")
	var reasons []string
	for _, ev := range r.k.all() {
		tr.Apply(ev)
		if ev.Reload != nil {
			reasons = append(reasons, ev.Reload.Reason)
			assert.False(t, ev.Reload.Exact)
		}
	}
	assert.Equal(t, []string{"gap", "refresh"}, reasons)
	b, _ := json.Marshal(tr.Events())
	assert.JSONEq(t, `[{"kind":"markdown","text":"yz","streaming":false,"turnId":"t1"}]`, string(b))
}

func TestTranscriptMergesLikeTheServer(t *testing.T) {
	tr := NewTranscript("A")
	ev := func(e string) SignalEvent {
		sig, err := protocol.DecodeSignal([]byte(`{"kind":"event","sessionId":"A","event":` + e + `}`))
		require.NoError(t, err)
		return SignalEvent{SessionID: "A", Signal: sig}
	}
	for _, e := range []string{
		`{"kind":"user-prompt","text":"q","turnId":"u"}`,
		`{"kind":"thinking","text":"Let me ","streaming":true,"turnId":"t1"}`,
		`{"kind":"thinking","text":"check.","streaming":true,"turnId":"t1"}`,
		`{"kind":"markdown","text":"Hel","streaming":true,"turnId":"t1"}`,
		`{"kind":"markdown","text":"lo","streaming":true,"turnId":"t1"}`,
		`{"kind":"tool","tool":"lookup","callId":"c1","text":"lookup","input":{},"turnId":"t1"}`,
		`{"kind":"markdown","text":" there","streaming":true,"turnId":"t1"}`,
		`{"kind":"markdown","text":"next","streaming":true,"turnId":"t2"}`,
	} {
		tr.Apply(ev(e))
	}
	tr.Apply(SignalEvent{SessionID: "B", Signal: ev(`{"kind":"markdown","text":"B!","streaming":true,"turnId":"t2"}`).Signal})
	b, err := json.Marshal(tr.Events())
	require.NoError(t, err)
	assert.JSONEq(t, `[
		{"kind":"user-prompt","text":"q","turnId":"u"},
		{"kind":"thinking","text":"Let me check.","streaming":false,"turnId":"t1"},
		{"kind":"markdown","text":"Hello","streaming":false,"turnId":"t1"},
		{"kind":"tool","tool":"lookup","callId":"c1","text":"lookup","input":{},"turnId":"t1"},
		{"kind":"markdown","text":" there","streaming":false,"turnId":"t1"},
		{"kind":"markdown","text":"next","streaming":false,"turnId":"t2"}]`, string(b))
}

func TestBackoffDelays(t *testing.T) {
	b := Backoff{Min: 500 * time.Millisecond, Max: 15 * time.Second}
	var got []string
	for n := 1; n <= 7; n++ {
		got = append(got, b.delay(n).String())
	}
	assert.Equal(t, "500ms 1s 2s 4s 8s 15s 15s", strings.Join(got, " "))
	j := DefaultBackoff
	for i := 0; i < 100; i++ {
		d := j.delay(1)
		assert.True(t, d >= 400*time.Millisecond && d <= 600*time.Millisecond, "%s", d)
	}
	assert.True(t, errors.Is(ErrNotConnected, ErrDisconnected))
}

// TestClientCase_C19_ReloadPagesWhenTooLarge: a transcript too large for one answer is reloaded
// page by page from its end, in order, with the newest page's watermark.
func TestClientCase_C19_ReloadPagesWhenTooLarge(t *testing.T) {
	r := newRig(t, nil)
	conn := r.followed(t, "A", 1)
	r.px.RST()
	conn = r.fs.conn(t)
	conn.answer(conn.req(t).ID, `{"ok":false,"reason":"gap"}`)
	req := conn.req(t)
	assert.Equal(t, map[string]any{"sessionId": "A"}, params(t, req))
	conn.write(`{"jsonrpc":"2.0","id":` + string(req.ID) + `,"error":{"code":-32012,"message":"Response too large"}}`)
	prompt := func(n int) string {
		return `{"kind":"user-prompt","text":"` + strconv.Itoa(n) + `","turnId":"u` + strconv.Itoa(n) + `"}`
	}
	req = conn.req(t)
	assert.Equal(t, map[string]any{"sessionId": "A", "limit": float64(200)}, params(t, req))
	conn.answer(req.ID, `{"events":[`+prompt(3)+`,`+prompt(4)+`],"start":2,"exact":true,"cursor":2,"signalEpoch":"epoch-1","$seq":9}`)
	req = conn.req(t)
	assert.Equal(t, map[string]any{"sessionId": "A", "limit": float64(200), "before": float64(2)}, params(t, req))
	conn.answer(req.ID, `{"events":[`+prompt(1)+`,`+prompt(2)+`],"start":0,"exact":true}`)
	// Nothing was signalled after the newest page's watermark: nothing to resume.
	var reload *Reload
	require.Eventually(t, func() bool {
		for _, ev := range r.k.all() {
			if ev.Reload != nil {
				reload = ev.Reload
			}
		}
		return reload != nil
	}, 5*time.Second, time.Millisecond)
	var texts []string
	for _, e := range reload.Events {
		texts = append(texts, e.(*protocol.UserPromptEvent).Text)
	}
	assert.Equal(t, []string{"1", "2", "3", "4"}, texts)
	assert.True(t, reload.Exact)
}

// TestClientSessionResetReloads (issue 28): a session:reset (a rollback, a restore, a
// compaction) reloads the followed session through sessions.loadEvents, and the signals after
// the snapshot's watermark continue it; the transcript ends as the snapshot plus them.
func TestClientSessionResetReloads(t *testing.T) {
	r := newRig(t, nil)
	conn := r.connected(t)
	r.follow(t, conn, "A")
	conn.push(md("A", 1, "dropped"))
	r.k.waitSeqs(t, "A", 1)
	conn.push(`{"kind":"session:reset","sessionId":"A","reason":"rollback","$seq":2}`)
	req := conn.req(t)
	require.Equal(t, "sessions.loadEvents", req.Method)
	conn.push(md("A", 3, "after"))
	conn.answer(req.ID, `{"events":[{"kind":"user-prompt","text":"kept","turnId":"u"}],"start":0,"exact":true,"$seq":2,"signalEpoch":"epoch-1"}`)
	require.Eventually(t, func() bool {
		for _, ev := range r.k.all() {
			if ev.Seq == 3 {
				return true
			}
		}
		return false
	}, 5*time.Second, time.Millisecond)
	tr := NewTranscript("A")
	var reasons []string
	for _, ev := range r.k.all() {
		tr.Apply(ev)
		if ev.Reload != nil {
			reasons = append(reasons, ev.Reload.Reason)
			assert.True(t, ev.Reload.Exact)
		}
	}
	assert.Equal(t, []string{"reset"}, reasons)
	b, _ := json.Marshal(tr.Events())
	assert.JSONEq(t, `[{"kind":"user-prompt","text":"kept","turnId":"u"},{"kind":"markdown","text":"after","streaming":false,"turnId":"t1"}]`, string(b))
}

// TestClientFollowFromTheFirstConnection: a session in Options.Follow is followed before the
// first connection, so signals read before its first resume is answered are held and applied
// once (the kit's client mode once saw $seq 1–3 twice with Follow called after Open).
func TestClientFollowFromTheFirstConnection(t *testing.T) {
	r := newRig(t, func(o *Options) { o.Follow = map[string]int64{"A": 0} })
	conn := r.connected(t)
	for i := int64(1); i <= 3; i++ {
		conn.push(md("A", i, "x"))
	}
	req := conn.req(t)
	assert.Equal(t, "sessions.resume", req.Method)
	assert.Equal(t, float64(0), params(t, req)["afterSeq"])
	conn.answer(req.ID, resumeOK("A", 1, 3))
	conn.push(md("A", 4, "x"))
	assert.Equal(t, span(1, 4), r.k.waitSeqs(t, "A", 4))
	_, seq, ok := r.c.Cursor("A")
	assert.True(t, ok)
	assert.Equal(t, int64(4), seq)
}
