package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zidane-server/zidane/server/hub/jetstream/natstest"
	"github.com/zidane-server/zidane/server/store/storetest"
)

// Several replicas of the real binary on one Postgres, with the in-process hub (issue 25 §2,
// docs/scaling.md): signals stay on the replica that publishes them, while run leases, the calls
// that reach a run's owner and token revocations go through the shared database.

// replicaLease is the lease bound the replica tests run with (--lease-ttl, --lease-heartbeat):
// short, so a killed replica's run is taken over within a few seconds.
const (
	replicaLeaseTTL       = 2 * time.Second
	replicaLeaseHeartbeat = 500 * time.Millisecond
)

// startLeaseReplicas starts one replica per id on database db, all with the same workspace root (a
// path every replica sees) and the scripted providers of answerServer (solo/scripted asks to run
// a command, then says done), each with its own data dir. Extra flags come after.
func startLeaseReplicas(t *testing.T, db string, ids []string, extra ...string) (map[string]*serverProc, string) {
	t.Helper()
	dir := t.TempDir()
	exec := map[string]any{"tool": map[string]any{"name": "exec", "arguments": map[string]any{"command": "echo ran > ran.txt"}, "id": "c1"}}
	done := map[string]any{"steps": []any{map[string]any{"text": "done"}}}
	b, err := json.Marshal(map[string]any{"turns": []any{map[string]any{"steps": []any{exec}}, done}})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "solo.json"), b, 0o644))
	cfg := `{"providers":[{"name":"solo","kind":"scripted","script":"solo.json"},{"name":"scripted","kind":"scripted"}]}`
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.json"), []byte(cfg), 0o644))
	root, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	out := map[string]*serverProc{}
	for _, id := range ids {
		args := append([]string{"--replica-id", id, "--config", filepath.Join(dir, "config.json"),
			"--lease-ttl", replicaLeaseTTL.String(), "--lease-heartbeat", replicaLeaseHeartbeat.String()}, extra...)
		out[id] = startServer(t, serverOpts{dbURL: db, root: root, extra: args})
	}
	return out, root
}

// waitKind reads c's frames until a signal of kind for id (a session or run id) and returns it.
func waitKind(t *testing.T, c *wsConn, kind, id string) signal {
	t.Helper()
	s, _ := watchSignal(t, c, kind, id)
	return s
}

// TestReplicasReachTheRunsOwner: a run started on replica B is stopped by chat.cancel on A; an
// approval its tool asks for is answered on C and reaches the run on B; a prompt sent on A to a
// session running on B is queued on B and runs there, and one sent on A once the session is idle
// runs on A; a token revoked on A drops its connection on B within a second.
func TestReplicasReachTheRunsOwner(t *testing.T) {
	db := storetest.URL(t)
	// Steps of 250 ms: the "queued where the run is" check needs B's run to outlast a chat.send
	// routed from A and a queue.list on a loaded machine (at 100 ms the run could end first).
	rs, root := startLeaseReplicas(t, db, []string{"A", "B", "C"}, "--scripted-step-delay", "250ms")
	tok := rs["A"].mintToken("replicas", "chat")
	a, b, c := dial(t, rs["A"], tok), dial(t, rs["B"], tok), dial(t, rs["C"], tok)
	a.hello()
	b.hello()
	c.hello()

	// chat.cancel on A stops the run on B.
	sid, _ := createSession(t, b)
	run := sendPrompt(t, b, sid, "Long one.")
	waitKind(t, b, "run:start", run)
	var cancelled struct{ Cancelled bool }
	a.result("chat.cancel", map[string]any{"sessionId": sid}, &cancelled)
	assert.True(t, cancelled.Cancelled, "the cancel reaches the run on B")
	end, m := watchSignal(t, b, "run:end", run)
	assert.False(t, *end.OK)
	assert.Equal(t, true, m["interrupted"], "cancelled: %v", m)

	// An approval asked on B is answered on C.
	var sent struct{ RunID string }
	b.result("chat.send", map[string]any{"sessionId": sid, "prompt": "Run it.", "model": "solo/scripted"}, &sent)
	_, req := watchSignal(t, b, "approval:request", sid)
	requestID := req["request"].(map[string]any)["requestId"].(string)
	var ok struct{ OK bool }
	c.result("approvals.answer", map[string]any{"sessionId": sid, "requestId": requestID, "decision": "allow"}, &ok)
	assert.True(t, ok.OK)
	end = waitKind(t, b, "run:end", sent.RunID)
	assert.True(t, *end.OK, "the run on B goes on once C's answer reached it")
	assert.FileExists(t, filepath.Join(root, "ran.txt"), "the allowed command ran")

	// A prompt sent on A while the session runs on B is queued where the run is.
	long := sendPrompt(t, b, sid, "Long one again.")
	waitKind(t, b, "run:start", long)
	var queued struct{ RunID string }
	a.result("chat.send", map[string]any{"sessionId": sid, "prompt": "Queued from A."}, &queued)
	require.Regexp(t, uuidRE, queued.RunID)
	var q struct {
		Items []struct {
			RunID string `json:"runId"`
		} `json:"items"`
	}
	b.result("queue.list", map[string]any{"sessionId": sid}, &q)
	require.Len(t, q.Items, 1, "the prompt from A waits in B's queue")
	assert.Equal(t, queued.RunID, q.Items[0].RunID)
	waitKind(t, b, "run:end", long)
	start := waitKind(t, b, "run:start", queued.RunID)
	assert.Equal(t, sid, start.SessionID)
	end = waitKind(t, b, "run:end", queued.RunID)
	assert.True(t, *end.OK)

	// Idle now, the session's next prompt sent on A runs on A: B yields the lease it kept
	// (cluster.LeaseLinger), and A's client sees the run.
	onA := sendPrompt(t, a, sid, "On A now.")
	end = waitKind(t, a, "run:end", onA)
	assert.True(t, *end.OK, "the run is A's")

	// A token revoked on A drops its connections on B within a second.
	admin := dial(t, rs["A"], rs["A"].mintToken("replicas-admin", "admin"))
	admin.hello()
	victim := rs["B"].mintToken("replicas-victim", "chat")
	vb := dial(t, rs["B"], victim)
	vb.hello()
	var info struct{ Name string }
	admin.result("tokens.revoke", map[string]any{"name": "replicas-victim"}, &info)
	assert.Equal(t, websocket.StatusPolicyViolation, waitClosed(t, vb, time.Second), "closed on B within a second of the revoke on A")
	_, _, err := websocket.Dial(t.Context(), rs["C"].url(), dialOpts(victim))
	require.Error(t, err, "no replica takes the revoked token")
}

// TestReplicaKilledRunInterrupted: kill -9 of the replica that owns a run: another replica takes
// its lease once it expires and marks the run interrupted (what it had streamed and written is
// kept, then the interruption), within the lease bound; the session then takes new prompts on
// that other replica. A replica restarted with its id ends its own leftover runs at its start,
// without waiting for the lease bound.
func TestReplicaKilledRunInterrupted(t *testing.T) {
	db := storetest.URL(t)
	rs, _ := startLeaseReplicas(t, db, []string{"A", "B"}, "--scripted-step-delay", "200ms")
	tok := rs["A"].mintToken("replicas", "chat")
	a, b := dial(t, rs["A"], tok), dial(t, rs["B"], tok)
	a.hello()
	b.hello()
	sid, _ := createSession(t, b)
	sendPrompt(t, b, sid, "Long one.")
	for { // B streams the answer
		if s := waitKind(t, b, "event", sid); s.eventKind() == "markdown" {
			break
		}
	}
	require.NoError(t, rs["B"].cmd.Process.Kill())
	killed := time.Now()
	<-rs["B"].done
	rs["B"].stopped = true

	// A takes the run over once B's lease expired, and says so (session:updated).
	for {
		_, m := watchSignal(t, a, "session:updated", sid)
		if sess, _ := m["session"].(map[string]any); sess["status"] == "interrupted" {
			break
		}
	}
	took := time.Since(killed)
	bound := replicaLeaseTTL + 2*replicaLeaseHeartbeat
	t.Logf("run of the killed replica marked interrupted %s after kill -9 (lease bound %s)", took.Round(time.Millisecond), bound)
	assert.Less(t, took, bound+time.Second, "within the lease bound (TTL + a heartbeat for the sweep, + a second of slack)")
	events := loadEvents(t, a, sid)
	assert.Contains(t, events, `"text":"Long one."`)
	assert.Contains(t, events, "The server stopped during the run", "the interruption is recorded: %s", events)

	// The session takes new prompts on A.
	next := sendPrompt(t, a, sid, "Again.")
	end := waitKind(t, a, "run:end", next)
	assert.True(t, *end.OK, "the session runs on A now")

	// Restarted with its id (and a lease bound far longer than the test), B ends its own
	// leftover run at its start.
	rs2, _ := startLeaseReplicas(t, db, []string{"D"}, "--scripted-step-delay", "200ms", "--lease-ttl", "1h")
	d := dial(t, rs2["D"], tok)
	d.hello()
	sid2, _ := createSession(t, d)
	sendPrompt(t, d, sid2, "Long one.")
	for {
		if s := waitKind(t, d, "event", sid2); s.eventKind() == "markdown" {
			break
		}
	}
	dp := rs2["D"]
	require.NoError(t, dp.cmd.Process.Kill())
	<-dp.done
	dp.stopped = true
	restarted := startServer(t, serverOpts{dbURL: db, dataDir: dp.opts.dataDir, root: dp.opts.root, extra: dp.opts.extra})
	d = dial(t, restarted, tok)
	d.hello()
	var sess struct{ Status string }
	d.result("sessions.get", map[string]any{"sessionId": sid2}, &sess)
	assert.Equal(t, "interrupted", sess.Status, "the restarted replica ended its own run at its start, within a lease of 1h")
	assert.Contains(t, loadEvents(t, d, sid2), "The server stopped during the run")
}

// TestReplicaDegradedWithoutNATS (issue 25 §4): a replica whose NATS is unreachable answers
// /healthz 503 degraded and refuses new runs with a clear error, keeps its connections, and once
// NATS is back answers ok and runs prompts again, without a restart.
func TestReplicaDegradedWithoutNATS(t *testing.T) {
	ns := natstest.Start(t)
	s := startServer(t, serverOpts{dbURL: storetest.URL(t), extra: []string{"--nats-url", ns.URL}})
	c := dial(t, s, s.mintToken("degraded", "chat"))
	c.hello()
	sid, _ := createSession(t, c)
	health := func() (int, string) {
		resp, err := http.Get("http://" + s.addr + "/healthz")
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	ns.Stop()
	require.Eventually(t, func() bool { code, _ := health(); return code == http.StatusServiceUnavailable }, waitTimeout, 20*time.Millisecond)
	_, body := health()
	assert.Contains(t, body, "degraded: NATS unreachable, new runs refused")
	e := c.callErr("chat.send", map[string]any{"sessionId": sid, "prompt": "Hello."})
	assert.Equal(t, -32014, e.Code)
	assert.Contains(t, e.Message, "New runs are refused while this replica cannot reach NATS")
	c.result("sessions.get", map[string]any{"sessionId": sid}, nil) // the connection stays and answers

	ns.Restart()
	require.Eventually(t, func() bool { code, _ := health(); return code == http.StatusOK }, waitTimeout, 20*time.Millisecond)
	run := sendPrompt(t, c, sid, "Hello.")
	end := waitKind(t, c, "run:end", run)
	assert.True(t, *end.OK, "runs again without a restart")
}
