package e2e

import (
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zidane-server/zidane/server/hub/jetstream/natstest"
	"github.com/zidane-server/zidane/server/store/storetest"
)

// Issue 25: several replicas (the real binary) on one Postgres, their signals carried by NATS
// JetStream (an embedded nats-server -js on a free port with a temporary store). The run
// lease cases (an approval answered on another replica, kill -9 of the owner) are the cluster
// tests'; startReplicas is their harness too.

// replicas are n servers on one database, one workspace root and one NATS server.
type replicas struct {
	nats *natstest.Server
	srv  []*serverProc
	tok  string
}

// startReplicas starts the NATS server and n replicas of zidane-server on a fresh database.
func startReplicas(t *testing.T, n int, extra ...string) *replicas {
	t.Helper()
	ns := natstest.Start(t)
	db := storetest.URL(t)
	root, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	r := &replicas{nats: ns}
	for i := 0; i < n; i++ {
		args := append([]string{"--nats-url", ns.URL}, extra...)
		r.srv = append(r.srv, startServer(t, serverOpts{dbURL: db, root: root, extra: args}))
	}
	r.tok = r.srv[0].mintToken("chat", "chat")
	return r
}

// resumeResult is sessions.resume's answer.
type resumeResult struct {
	OK      bool   `json:"ok"`
	Reason  string `json:"reason"`
	Signals []struct {
		Seq    int64           `json:"seq"`
		Signal json.RawMessage `json:"signal"`
	} `json:"signals"`
}

// seqOf is a frame's $seq, or 0.
func seqOf(s signal) int64 {
	if s.Seq == nil {
		return 0
	}
	return *s.Seq
}

// withoutSeq is a live signal's params without its "$seq" member (as sessions.resume answers it).
func withoutSeq(s signal) string {
	return strings.Replace(string(s.Raw), `,"$seq":`+strconv.FormatInt(seqOf(s), 10), "", 1)
}

// sessionSignals keeps the numbered signals of sid, in wire order.
func sessionSignals(sigs []signal, sid string) []signal {
	var out []signal
	for _, s := range sigs {
		if s.Seq != nil && s.SessionID == sid {
			out = append(out, s)
		}
	}
	return out
}

// A client on replica A sees a run started on replica B live, in order and without gaps, byte
// for byte as a client on C and one on B itself; every replica names the same signal epoch.
func TestReplicasLiveAcross(t *testing.T) {
	r := startReplicas(t, 3)
	a, b, c := dial(t, r.srv[0], r.tok), dial(t, r.srv[1], r.tok), dial(t, r.srv[2], r.tok)
	ha, hb, hc := a.hello(), b.hello(), c.hello()
	require.Equal(t, ha.SignalEpoch, hb.SignalEpoch, "the epoch names the stream, not the process")
	require.Equal(t, ha.SignalEpoch, hc.SignalEpoch)
	sid, _ := createSession(t, a)
	runID := sendPrompt(t, b, sid, "Say hello.")
	sa, sb, sc := a.collectRun(runID), b.collectRun(runID), c.collectRun(runID)
	assertRunSignals(t, sb, sid, runID, 1)
	assertRunSignals(t, sa, sid, runID, 1)
	assertRunSignals(t, sc, sid, runID, 1)
	raw := func(ss []signal) (out []string) {
		for _, s := range sessionSignals(ss, sid) {
			out = append(out, string(s.Raw))
		}
		return out
	}
	assert.Equal(t, raw(sb), raw(sa), "A gets B's run byte for byte")
	assert.Equal(t, raw(sb), raw(sc))

	// A second run, started on C, continues the session's $seq on every replica.
	last := seqOf(sa[len(sa)-1])
	run2 := sendPrompt(t, c, sid, "Again.")
	assertRunSignals(t, a.collectRun(run2), sid, run2, last+1)
	assertRunSignals(t, b.collectRun(run2), sid, run2, last+1)
}

// A client cut at random points from a random replica reconnects to another random one and
// resumes with ok:true: it ends with exactly the signals a client that never dropped got, none
// lost, none twice (30 cuts; 200 under make soak). Then NATS itself restarts: the replicas
// recover without a restart of their own and a run on one reaches a client on another.
func TestReplicaCuts(t *testing.T) {
	cuts := 30
	if os.Getenv("ZIDANE_SOAK") != "" {
		cuts = 200
	}
	r := startReplicas(t, 3, "--scripted-step-delay", "3ms")
	ref := dial(t, r.srv[2], r.tok)
	drv := dial(t, r.srv[1], r.tok)
	epoch := ref.hello().SignalEpoch
	drv.hello()
	sid, _ := createSession(t, drv)

	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 25))
	t.Logf("cuts %d", cuts)
	cur := rng.IntN(3)
	cl := dial(t, r.srv[cur], r.tok)
	cl.hello()
	var applied []signal // the cutting client's session signals, $seq 1.. without gaps
	apply := func(s signal, where string) {
		t.Helper()
		n := seqOf(s)
		if n <= int64(len(applied)) {
			return // already applied (live after the resume's answer, or replayed then live)
		}
		require.Equal(t, int64(len(applied))+1, n, "gap %s: %s", where, s.Raw)
		applied = append(applied, s)
	}
	var refSigs []signal
	done := 0
	for done < cuts {
		runID := sendPrompt(t, drv, sid, "Say hello.")
		refSigs = append(refSigs, sessionSignals(ref.collectRun(runID), sid)...)
		end := seqOf(refSigs[len(refSigs)-1])
		// The client reads this run's signals, cutting after a random count, up to three times a run.
		for int64(len(applied)) < end {
			budget := 1 + rng.IntN(12)
			for int64(len(applied)) < end && budget > 0 {
				f := cl.next(waitTimeout)
				if f.Method != "ipc.signal" {
					continue
				}
				var s signal
				require.NoError(t, json.Unmarshal(f.Params, &s))
				s.Raw = f.Params
				if s.Seq != nil && s.SessionID == sid {
					apply(s, "live on replica "+strconv.Itoa(cur))
					budget--
				}
			}
			if done >= cuts || int64(len(applied)) >= end {
				break
			}
			_ = cl.ws.CloseNow()
			done++
			next := rng.IntN(3)
			cl = dial(t, r.srv[next], r.tok)
			require.Equal(t, epoch, cl.hello().SignalEpoch)
			var rr resumeResult
			cl.result("sessions.resume", map[string]any{"sessionId": sid, "epoch": epoch, "afterSeq": len(applied)}, &rr)
			require.True(t, rr.OK, "cut %d: replica %d → %d after $seq %d: resume answered %s", done, cur, next, len(applied), rr.Reason)
			for _, x := range rr.Signals {
				var s signal
				require.NoError(t, json.Unmarshal(x.Signal, &s))
				// The replayed signal, as the live one would carry it, for the comparison below.
				s.Raw = json.RawMessage(strings.TrimSuffix(string(x.Signal), "}") + `,"$seq":` + strconv.FormatInt(x.Seq, 10) + "}")
				s.Seq = &x.Seq
				apply(s, "replayed by replica "+strconv.Itoa(next))
			}
			cur = next
		}
	}
	// The reference saw every signal of the runs: the cutting client ends with the same ones.
	require.Len(t, applied, len(refSigs))
	for i := range refSigs {
		require.JSONEq(t, withoutSeq(refSigs[i]), withoutSeq(applied[i]), "$seq %d", i+1)
	}

	// NATS restarts under the replicas; they reconnect on their own.
	last := seqOf(refSigs[len(refSigs)-1])
	r.nats.Restart()
	require.Eventually(t, func() bool { return r.nats.Clients() >= len(r.srv) }, 30*time.Second, 20*time.Millisecond, "the replicas reconnect to NATS")
	runID := sendPrompt(t, drv, sid, "After the restart.")
	sigs := ref.collectRun(runID)
	assertRunSignals(t, sigs, sid, runID, last+1)
	// A client that arrives now on the third replica resumes from before the restart.
	late := dial(t, r.srv[0], r.tok)
	require.Equal(t, epoch, late.hello().SignalEpoch, "the stream survived the restart: the same epoch")
	var rr struct {
		OK      bool              `json:"ok"`
		Signals []json.RawMessage `json:"signals"`
	}
	late.result("sessions.resume", map[string]any{"sessionId": sid, "epoch": epoch, "afterSeq": last}, &rr)
	require.True(t, rr.OK)
	assert.Len(t, rr.Signals, len(sessionSignals(sigs, sid)))
}

// content is a transcript's text as a client shows it: the text of markdown and thinking events
// in order (streamed pieces and the merged block read alike), other events as their kind.
func content(t *testing.T, evs []json.RawMessage) string {
	t.Helper()
	var b strings.Builder
	for _, e := range evs {
		var m struct {
			Kind string `json:"kind"`
			Text string `json:"text"`
		}
		require.NoError(t, json.Unmarshal(e, &m))
		if m.Kind == "markdown" || m.Kind == "thinking" {
			b.WriteString(m.Text)
		} else {
			b.WriteString("\x00" + m.Kind + "\x00")
		}
	}
	return b.String()
}

// A reload (sessions.loadEvents) on replica A while the session's run streams on replica B
// answers a watermark consistent with its events: the events plus the signals after the
// watermark are the transcript as it ends, nothing lost or twice, at every moment it is asked
// (the replica that runs the session takes the snapshot: only it holds its unwritten rows).
func TestReplicasReloadMidRun(t *testing.T) {
	r := startReplicas(t, 3, "--scripted-step-delay", "15ms")
	a, b, ref := dial(t, r.srv[0], r.tok), dial(t, r.srv[1], r.tok), dial(t, r.srv[2], r.tok)
	a.hello()
	b.hello()
	epoch := ref.hello().SignalEpoch
	sid, _ := createSession(t, b)
	runID := sendPrompt(t, b, sid, "Say hello.")
	type snap struct {
		Events []json.RawMessage `json:"events"`
		Epoch  string            `json:"signalEpoch"`
		Seq    int64             `json:"$seq"`
	}
	var snaps []snap
	end := make(chan []signal, 1)
	go func() { end <- ref.collectRun(runID) }()
	var sigs []signal
	for sigs == nil {
		var s snap
		a.result("sessions.loadEvents", map[string]any{"sessionId": sid}, &s)
		snaps = append(snaps, s)
		select {
		case sigs = <-end:
		default:
		}
	}
	var final snap
	a.result("sessions.loadEvents", map[string]any{"sessionId": sid}, &final)
	want := content(t, final.Events)
	require.Contains(t, want, "\x00run-summary\x00")
	mid := 0
	for i, s := range snaps {
		require.Equal(t, epoch, s.Epoch)
		evs := append([]json.RawMessage{}, s.Events...)
		for _, x := range sessionSignals(sigs, sid) {
			if seqOf(x) > s.Seq && x.Kind == "event" {
				evs = append(evs, x.Event)
			}
		}
		assert.Equal(t, want, content(t, evs), "reload %d of %d (watermark %d)", i+1, len(snaps), s.Seq)
		if s.Seq < seqOf(sigs[len(sigs)-1]) {
			mid++
		}
	}
	t.Logf("%d reloads, %d of them during the run", len(snaps), mid)
	require.Positive(t, mid, "some reloads happened while the run streamed")
}

// TestReplicaKilledStreamKept (issue 25 §1 and §2): kill -9 of the replica running a session,
// right after a client on another replica saw pieces of its answer live, loses nothing of what
// was streamed. While the dead owner's run is not taken over yet, a reload elsewhere answers the
// stored transcript's signal mark as its watermark (its events plus the signals after it are
// what the live client saw); once the run is taken over, the stored transcript is exactly what
// the live client saw (the pieces the owner streamed after its last flush included, read from
// the stream, nothing twice) and then the interruption.
func TestReplicaKilledStreamKept(t *testing.T) {
	dir := t.TempDir()
	var steps []any
	for i := 0; i < 60; i++ {
		steps = append(steps, map[string]any{"text": "w" + strconv.Itoa(i) + " "})
	}
	script, err := json.Marshal(map[string]any{"turns": []any{map[string]any{"steps": steps}}})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "long.json"), script, 0o644))
	cfg := `{"providers":[{"name":"long","kind":"scripted","script":"long.json"},{"name":"scripted","kind":"scripted"}]}`
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.json"), []byte(cfg), 0o644))
	r := startReplicas(t, 2, "--config", filepath.Join(dir, "config.json"), "--scripted-step-delay", "20ms",
		"--lease-ttl", replicaLeaseTTL.String(), "--lease-heartbeat", replicaLeaseHeartbeat.String())
	owner := r.srv[1]
	a, b := dial(t, r.srv[0], r.tok), dial(t, owner, r.tok)
	a.hello()
	b.hello()
	sid, _ := createSession(t, b)
	var sent struct {
		RunID string `json:"runId"`
	}
	b.result("chat.send", map[string]any{"sessionId": sid, "prompt": "Stream long.", "model": "long/scripted"}, &sent)

	// a, on the other replica, watches the run live; B dies right after a saw a few pieces
	// (pieces come every 20 ms, the transcript is flushed every 100 ms: some are unwritten).
	var live []signal
	pieces := 0
	for pieces < 12 {
		f := a.next(waitTimeout)
		var s signal
		if f.Method != "ipc.signal" || json.Unmarshal(f.Params, &s) != nil || s.SessionID != sid || s.Seq == nil {
			continue
		}
		live = append(live, s)
		if s.Kind == "event" && s.eventKind() == "markdown" {
			pieces++
		}
	}
	require.NoError(t, owner.cmd.Process.Kill())
	<-owner.done
	owner.stopped = true

	// Before the takeover: a reload on A answers the stored signal mark, and the signals after
	// it complete the transcript as the live client has it.
	var snap struct {
		Events []json.RawMessage `json:"events"`
		Seq    int64             `json:"$seq"`
	}
	c := dial(t, r.srv[0], r.tok)
	c.hello()
	c.result("sessions.loadEvents", map[string]any{"sessionId": sid}, &snap)

	// The rest of what B published reaches a, then A takes the run over (its run:end).
	for {
		f := a.next(waitTimeout)
		var s signal
		if f.Method != "ipc.signal" || json.Unmarshal(f.Params, &s) != nil || s.SessionID != sid || s.Seq == nil {
			continue
		}
		s.Raw = f.Params
		live = append(live, s)
		if s.Kind == "run:end" {
			require.NotNil(t, s.OK)
			assert.False(t, *s.OK)
			break
		}
	}
	var seen []json.RawMessage
	for _, s := range live {
		if s.Kind == "event" {
			seen = append(seen, s.Event)
		}
	}
	want := content(t, seen)
	require.Contains(t, want, "w11 ", "a saw the pieces it waited for")
	require.NotContains(t, want, "w59 ", "B was killed before the answer ended")

	if snap.Seq < seqOf(live[len(live)-1]) { // taken before the takeover (else the store holds it all)
		evs := append([]json.RawMessage{}, snap.Events...)
		for _, s := range live {
			if seqOf(s) > snap.Seq && s.Kind == "event" {
				evs = append(evs, s.Event)
			}
		}
		assert.Equal(t, want, content(t, evs), "reload during the dead owner's lease (watermark %d): events + the signals after it", snap.Seq)
	}

	var page struct {
		Events []json.RawMessage `json:"events"`
	}
	c.result("sessions.loadEvents", map[string]any{"sessionId": sid}, &page)
	assert.Equal(t, want+"\x00error\x00", content(t, page.Events),
		"the stored transcript holds every piece the live client saw, once, then the interruption")
	t.Logf("live pieces before kill: %d; stored transcript after takeover: %d events", pieces, len(page.Events))
}

// TestReplicasPresence (issue 25 §3): presence is the sum over the replicas. A window declared
// with presence.set on replica A is seen by a client on B, a second one on C adds to it, and
// when A is killed its window leaves B's presence within the share's bound (presenceTTL +
// presenceBeat: 4 s); a window that closes cleanly leaves at once.
func TestReplicasPresence(t *testing.T) {
	r := startReplicas(t, 3)
	a, b, c := dial(t, r.srv[0], r.tok), dial(t, r.srv[1], r.tok), dial(t, r.srv[2], r.tok)
	a.hello()
	b.hello()
	c.hello()
	sid, _ := createSession(t, b)
	a.result("presence.set", map[string]any{"sessionId": sid, "focused": true}, nil)
	waitCounts(t, b, sid, 1, 1)
	c.result("presence.set", map[string]any{"sessionId": sid, "focused": false}, nil)
	waitCounts(t, b, sid, 2, 1)
	waitCounts(t, a, sid, 2, 1)

	require.NoError(t, r.srv[0].cmd.Process.Kill())
	killed := time.Now()
	<-r.srv[0].done
	r.srv[0].stopped = true
	waitCounts(t, b, sid, 1, 0)
	took := time.Since(killed)
	t.Logf("a killed replica's window left the others' presence %s after kill -9", took.Round(time.Millisecond))
	assert.Less(t, took, 4*time.Second+time.Second, "within presenceTTL + presenceBeat (+ a second of slack)")

	c.result("presence.set", map[string]any{"sessionId": nil, "focused": false}, nil)
	waitCounts(t, b, sid, 0, 0)
}
