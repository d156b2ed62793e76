package client

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zidane-server/zidane/protocol"
)

// newerServer is a WebSocket peer that speaks like a newer server: unknown fields, enum values,
// signal kinds, event kinds and error codes. The client must decode all of it and keep working.
func newerServer(t *testing.T) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		assert.Equal(t, "Bearer zds_test", r.Header.Get("Authorization"))
		ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{"zidane"}})
		if err != nil {
			return
		}
		defer ws.CloseNow()
		ctx := context.Background()
		for {
			_, b, err := ws.Read(ctx)
			if err != nil {
				return
			}
			var req struct {
				ID     json.RawMessage `json:"id"`
				Method string          `json:"method"`
			}
			json.Unmarshal(b, &req)
			send := func(s string) { ws.Write(ctx, websocket.MessageText, []byte(s)) }
			id := string(req.ID)
			switch req.Method {
			case "ipc.hello":
				send(`{"jsonrpc":"2.0","id":` + id + `,"result":{"protocolVersion":17,"minProtocolVersion":16,"negotiatedProtocolVersion":16,"appVersion":"next","pid":1,"startedAt":1,"buildId":"b","codeVersion":"c","hostId":"h","hostKind":"cluster","hostName":"n","signalEpoch":"e","methods":["sessions.get"],"adminCommands":{"token":"t","pair":"p"},"brandNew":{"x":[1,2]}}}`)
			case "sessions.get":
				// Signals of kinds this build does not know, and a known signal with an unknown event kind.
				send(`{"jsonrpc":"2.0","method":"ipc.signal","params":{"kind":"future:snapshot","sessionId":"s","snapshot":{"plans":[]},"$seq":1}}`)
				send(`{"jsonrpc":"2.0","method":"ipc.signal","params":{"kind":"event","sessionId":"s","event":{"kind":"diff","files":2},"$seq":2}}`)
				send(`{"jsonrpc":"2.0","method":"some.newNotification","params":{}}`)
				send(`{"jsonrpc":"2.0","id":` + id + `,"result":{"id":"s","title":"t","projectRoot":"/","cwd":"/","agentId":"a","status":"paused","createdAt":1,"updatedAt":2,"archived":false,"hostId":"h","color":"blue"}}`)
			default:
				send(`{"jsonrpc":"2.0","id":` + id + `,"error":{"code":-32077,"message":"A newer error.","data":{"retryInMs":5}}}`)
			}
		}
	}))
}

func TestForwardCompatibleClient(t *testing.T) {
	srv := newerServer(t)
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http"), Options{Token: "zds_test"})
	require.NoError(t, err)
	defer c.Close()
	assert.Equal(t, protocol.HostKind("cluster"), c.Hello().HostKind)
	assert.False(t, c.Hello().HostKind.IsKnown())

	s, err := c.SessionsGet(ctx, &protocol.SessionsGetParams{SessionID: "s"})
	require.NoError(t, err)
	assert.Equal(t, protocol.SessionStatus("paused"), s.Status)

	first := <-c.Signals()
	u, ok := first.Signal.(*protocol.UnknownSignal)
	require.True(t, ok)
	assert.Equal(t, "future:snapshot", u.Kind)
	assert.Equal(t, int64(1), first.Seq)
	second := <-c.Signals()
	ev := second.Signal.(*protocol.EventSignal)
	assert.Equal(t, "diff", ev.Event.StreamEventKind())
	assert.Equal(t, int64(2), second.Seq)

	_, err = c.SessionsList(ctx, nil)
	var rpcErr *protocol.Error
	require.True(t, errors.As(err, &rpcErr))
	assert.Equal(t, -32077, rpcErr.Code)
	assert.Equal(t, "A newer error.", rpcErr.Message)

	// The connection is still fine after all of it.
	_, err = c.SessionsGet(ctx, &protocol.SessionsGetParams{SessionID: "s"})
	require.NoError(t, err)
}

func TestDialRefusalNamesTheStatus(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusUnauthorized)
		w.Write([]byte("Unauthorized"))
	}))
	defer srv.Close()
	_, err := Dial(context.Background(), "ws"+strings.TrimPrefix(srv.URL, "http"), Options{Token: "zds_bad"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "401")
}

// TestDialThenCallAtOnce: a call made the moment Dial returns goes out on the new connection.
// Dial used to return before the connection became the current one, so such a call could fail
// with ErrNotConnected (seen as "create session: not connected" in the CLI's tests under -race).
func TestDialThenCallAtOnce(t *testing.T) {
	s := newFakeServer(t)
	o := fast()
	o.ConnectTimeout = 20 * time.Second // a loaded machine, not the subject here
	for i := 0; i < 200; i++ {
		c, err := Dial(context.Background(), s.url(), o)
		require.NoError(t, err)
		_, err = c.Ping(context.Background(), &protocol.PingParams{})
		c.Close()
		require.NoError(t, err, "dial %d", i)
		<-s.newConn // the fake server queues each connection (64 at most)
	}
}
