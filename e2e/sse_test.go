package e2e

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zidane-server/zidane/e2e/ssesuite"
	"github.com/zidane-server/zidane/server/store/storetest"
)

// sseFlags start a server whose runs are slow enough to cut (40 ms a piece), whose message
// limit is small (so 413 is cheap), whose idle streams beat every 300 ms, and that allows two
// connections and streams per token.
var sseFlags = []string{"--scripted-step-delay", "40ms", "--max-message-bytes", "262144", "--sse-heartbeat", "300ms", "--max-conns-per-token", "3"}

// TestSSEConformance runs the SSE protocol's conformance suite (e2e/ssesuite) against the real
// binary under the default base path (issue 26). Its sessionsFor case is the bridge's
// (TestSSEBridgeConformance): zidane-server has no users, every chat token sees every session
// (sessions.list), so Users is nil here.
func TestSSEConformance(t *testing.T) {
	db := storetest.URL(t)
	s := startServer(t, serverOpts{dbURL: db, extra: sseFlags})
	var n atomic.Int64
	bearer := func(tok string) http.Header { return http.Header{"Authorization": {"Bearer " + tok}} }
	ssesuite.Run(t, ssesuite.Target{
		BaseURL: "http://" + s.addr + "/api/chat",
		Headers: func(t *testing.T) http.Header {
			return bearer(s.mintToken(fmt.Sprintf("sse-%d", n.Add(1)), "chat"))
		},
		Unauthorized:    bearer("zds_" + strings.Repeat("A", 43)),
		MaxBody:         262144,
		Prompt:          "Look it up.",
		Heartbeat:       300 * time.Millisecond,
		StreamsPerToken: 3,
		Restart: func(t *testing.T) string {
			s.stop()
			s = startServer(t, serverOpts{dbURL: db, dataDir: s.opts.dataDir, root: s.opts.root, extra: sseFlags})
			return "http://" + s.addr + "/api/chat"
		},
	})
}

// TestSSEAndWebSocketSeeOneRun: a stream and a WebSocket watching one session see the same run,
// the same signals with the same $seq; the stream and the connection share the token's bound;
// --sse-base-path moves the routes and "" turns them off.
func TestSSEAndWebSocketSeeOneRun(t *testing.T) {
	s := startServer(t, serverOpts{dbURL: storetest.URL(t), extra: []string{"--scripted-step-delay", "20ms", "--sse-base-path", "/agent/v1", "--max-conns-per-token", "2"}})
	tok := s.mintToken("both", "chat")
	ws := dial(t, s, tok)
	ws.hello()
	sid, _ := createSession(t, ws)
	req, err := http.NewRequest("GET", "http://"+s.addr+"/agent/v1/sessions/"+sid+"/stream", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode)
	// The token now has a connection and a stream: a second connection is past its bound.
	code, body, _ := upgradeReq(t, s, map[string]string{"Authorization": "Bearer " + tok})
	assert.Equal(t, 429, code, "a WebSocket past the token's bound, the stream counted: %s", body)

	runID := sendPrompt(t, ws, sid, "Say hello.")
	sigs := ws.collectRun(runID)
	var want []string
	for _, x := range sigs {
		if x.Seq != nil {
			want = append(want, string(x.Raw))
		}
	}
	// Read the stream's records up to the run's end.
	var got []string
	buf := make([]byte, 0, 1<<16)
	tmp := make([]byte, 4096)
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(string(buf), "event: run:end") && time.Now().Before(deadline) {
		n, err := resp.Body.Read(tmp)
		buf = append(buf, tmp[:n]...)
		if err != nil {
			break
		}
	}
	for _, rec := range strings.Split(string(buf), "\n\n") {
		var id, data string
		for _, line := range strings.Split(rec, "\n") {
			if v, ok := strings.CutPrefix(line, "id: "); ok {
				id = v
			}
			if v, ok := strings.CutPrefix(line, "data: "); ok {
				data = v
			}
		}
		if id != "" {
			got = append(got, data)
		}
	}
	require.NotEmpty(t, want)
	assert.Equal(t, want, got, "the stream carries the WebSocket's signals byte for byte")

	// Below the base path the protocol answers, never the web app: an unknown route is the
	// protocol's 404. The default base path is not the protocol's when another is given, and ""
	// turns the protocol off (what answers there then is the server's, e.g. the web app).
	r1, err := http.Get("http://" + s.addr + "/agent/v1/no-such-route")
	require.NoError(t, err)
	b1, _ := io.ReadAll(r1.Body)
	r1.Body.Close()
	assert.Equal(t, 404, r1.StatusCode)
	assert.Equal(t, "1", r1.Header.Get("X-Zidane-Chat-Protocol"))
	assert.Contains(t, string(b1), `"status":404`, "the protocol's ErrorBody, not a page")
	r2, err := http.Get("http://" + s.addr + "/api/chat/sessions")
	require.NoError(t, err)
	io.Copy(io.Discard, r2.Body)
	r2.Body.Close()
	assert.Empty(t, r2.Header.Get("X-Zidane-Chat-Protocol"))
	off := startServer(t, serverOpts{dbURL: storetest.URL(t), extra: []string{"--sse-base-path", ""}})
	r3, err := http.Get("http://" + off.addr + "/api/chat/sessions")
	require.NoError(t, err)
	io.Copy(io.Discard, r3.Body)
	r3.Body.Close()
	assert.Empty(t, r3.Header.Get("X-Zidane-Chat-Protocol"), "off: no route of the protocol")
}

// TestSSEConformanceOnReplicas runs the suite against a replica whose signals go through NATS
// JetStream (issue 25), streaming on one replica while another one runs nothing: the taps are fed
// by the stream's apply, and a resume waits for the replica to catch up (the restart case does
// not apply: the epoch is the stream's, not the process's).
func TestSSEConformanceOnReplicas(t *testing.T) {
	r := startReplicas(t, 2, sseFlags...)
	var n atomic.Int64
	bearer := func(tok string) http.Header { return http.Header{"Authorization": {"Bearer " + tok}} }
	ssesuite.Run(t, ssesuite.Target{
		BaseURL: "http://" + r.srv[1].addr + "/api/chat",
		Headers: func(t *testing.T) http.Header {
			return bearer(r.srv[0].mintToken(fmt.Sprintf("sse-r-%d", n.Add(1)), "chat"))
		},
		Unauthorized:    bearer("zds_" + strings.Repeat("B", 43)),
		MaxBody:         262144,
		Prompt:          "Look it up.",
		Heartbeat:       300 * time.Millisecond,
		StreamsPerToken: 3,
	})
}
