package server

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/zidane-server/zidane/server/store"
)

// chat.send answers the prompt write's outcome even past a short request timeout: an error
// answered for a prompt that is then kept would have the client send it twice (adversarial
// review of issue 10).
func TestPromptWrite_AnswerIsTheOutcome(t *testing.T) {
	url, _, e := ownStoreEnv(t, store.Options{}, func(c *Config) { c.Limits.RequestTimeout = 1 * time.Second })
	ctx := context.Background()
	a := e.dial()
	a.hello()
	sid := a.newSession()

	release := lockSessions(t, url, sid)
	go func() { time.Sleep(2 * time.Second); release() }()
	m := a.call("chat.send", fmt.Sprintf(`{"sessionId":%q,"prompt":"held past the request timeout"}`, sid))
	sigs := a.runSignals(sid)
	end := string(sigs[len(sigs)-1].raw)
	n, err := e.st.CountEvents(ctx, sid)
	require.NoError(t, err)
	t.Logf("chat.send answer: %v", m)
	t.Logf("run:end: %s; events stored: %d", end, n)
	if m["error"] != nil {
		require.Contains(t, end, `"ok":false`, "chat.send answered an error, but the run went on and ended ok")
		require.Zero(t, n, "chat.send answered an error, but the run's transcript was kept")
	}
}

// A refused run (its prompt's write failed: nothing of it is kept) leaves the model's in-memory
// conversation too: the next run's model does not see the refused prompt.
func TestPromptWrite_RefusedRunForgotten(t *testing.T) {
	url, _, e := ownStoreEnv(t, store.Options{QueryTimeout: time.Second}, nil)
	a := e.dial()
	a.hello()
	sid := a.newSession()
	require.Nil(t, a.call("chat.send", fmt.Sprintf(`{"sessionId":%q,"prompt":"first prompt"}`, sid))["error"])
	a.runSignals(sid)

	release := lockSessions(t, url, sid)
	m := a.call("chat.send", fmt.Sprintf(`{"sessionId":%q,"prompt":"REFUSED prompt"}`, sid))
	require.Equal(t, -32014, errCode(m), "%v", m)
	sigs := a.runSignals(sid)
	require.Contains(t, string(sigs[len(sigs)-1].raw), "nothing of this run is kept")
	release()

	require.Nil(t, a.call("chat.send", fmt.Sprintf(`{"sessionId":%q,"prompt":"third prompt"}`, sid))["error"])
	var text strings.Builder
	for _, s := range a.runSignals(sid) {
		text.Write(s.raw)
	}
	require.NotContains(t, text.String(), "REFUSED prompt", "the model was shown a refused prompt that nothing kept")
	require.Contains(t, text.String(), "first prompt", "the previous kept prompt is quoted")
}

// One session's held prompt write does not hold up another session's chat.send or run.
func TestPromptWrite_HeldStartStallsNoOtherSession(t *testing.T) {
	url, _, e := ownStoreEnv(t, store.Options{}, nil)
	a := e.dial()
	a.hello()
	b := e.dial()
	b.hello()
	sidA := a.newSession()
	sidB := b.newSession()

	release := lockSessions(t, url, sidA)
	a.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"chat.send","params":{"sessionId":%q,"prompt":"held"}}`, sidA))
	time.Sleep(200 * time.Millisecond) // A's start is in StartRun, behind the lock
	go func() { time.Sleep(4 * time.Second); release() }()
	t0 := time.Now()
	m := b.call("chat.send", fmt.Sprintf(`{"sessionId":%q,"prompt":"unrelated"}`, sidB))
	took := time.Since(t0)
	require.Nil(t, m["error"], "%v", m)
	b.runSignals(sidB)
	tookEnd := time.Since(t0)
	t.Logf("session B: chat.send answered after %v, run:end after %v", took, tookEnd)
	require.Less(t, took, time.Second, "session B's chat.send waited for session A's row lock")
	require.Less(t, tookEnd, 2*time.Second, "session B's run waited for session A's row lock")
}

// With the default limits: other sessions' held writes do not make an unlocked session's
// chat.send give up while its write later commits.
func TestPromptWrite_AnswerIsTheOutcomeDefaults(t *testing.T) {
	url, _, e := ownStoreEnv(t, store.Options{}, nil)
	ctx := context.Background()
	a := e.dial()
	a.hello()
	b := e.dial()
	b.hello()
	held := []string{a.newSession(), a.newSession(), a.newSession()}
	sidB := b.newSession()

	release := lockSessions(t, url, held...)
	for i, sid := range held {
		a.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"chat.send","params":{"sessionId":%q,"prompt":"held"}}`, i+1, sid))
		time.Sleep(100 * time.Millisecond)
	}
	t0 := time.Now()
	m := b.call("chat.send", fmt.Sprintf(`{"sessionId":%q,"prompt":"unlocked B"}`, sidB))
	t.Logf("B's chat.send after %v: %v", time.Since(t0), m)
	release()
	for i := 0; i < 3; i++ {
		t.Logf("held answer at %v: %s", time.Since(t0), a.nextAnswer())
	}
	sigs := b.runSignals(sidB)
	end := string(sigs[len(sigs)-1].raw)
	n, err := e.st.CountEvents(ctx, sidB)
	require.NoError(t, err)
	t.Logf("B's run:end after %v: %s; B's events stored: %d", time.Since(t0), end, n)
	if m["error"] != nil {
		require.Contains(t, end, `"ok":false`, "chat.send answered an error, but the run went on and ended ok")
		require.Zero(t, n, "chat.send answered an error, but the run's transcript was kept")
	}
}

// sessions.loadEvents during a held start waits for the write; its watermark covers the prompt,
// which is in the page.
func TestPromptWrite_LoadEventsDuringHeldStart(t *testing.T) {
	url, _, e := ownStoreEnv(t, store.Options{}, func(c *Config) { c.StepDelay = 30 * time.Millisecond })
	a := e.dial()
	a.hello()
	b := e.dial()
	b.hello()
	sid := a.newSession()
	require.Nil(t, a.call("chat.send", fmt.Sprintf(`{"sessionId":%q,"prompt":"one"}`, sid))["error"])
	a.runSignals(sid)

	release := lockSessions(t, url, sid)
	a.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":9,"method":"chat.send","params":{"sessionId":%q,"prompt":"held two"}}`, sid))
	var promptSeq int64
	for promptSeq == 0 {
		s := parseSignal(t, a.next())
		if s.kind == "event" && strings.Contains(string(s.raw), "held two") {
			promptSeq = s.seq
		}
	}
	go func() { time.Sleep(time.Second); release() }()
	r := b.result("sessions.loadEvents", fmt.Sprintf(`{"sessionId":%q}`, sid))
	w, _ := r["$seq"].(interface{ Int64() (int64, error) }).Int64()
	require.GreaterOrEqual(t, w, promptSeq)
	evs := r["events"].([]any)
	found := false
	for _, ev := range evs {
		if strings.Contains(fmt.Sprint(ev), "held two") {
			found = true
		}
	}
	require.True(t, found, "watermark %d covers the prompt ($seq %d) but the page lacks it", w, promptSeq)
}

// The server shuts down while a prompt's write is held; the lock goes shortly after. The session
// is not left "running" (nor once a new server starts on the store), and the run ends interrupted.
func TestPromptWrite_ShutdownDuringHeldStart(t *testing.T) {
	url, st, e := ownStoreEnv(t, store.Options{}, func(c *Config) { c.StepDelay = 200 * time.Millisecond })
	ctx := context.Background()
	a := e.dial()
	a.hello()
	sid := a.newSession()
	release := lockSessions(t, url, sid)
	a.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":9,"method":"chat.send","params":{"sessionId":%q,"prompt":"held at shutdown"}}`, sid))
	time.Sleep(300 * time.Millisecond)
	go func() { time.Sleep(1500 * time.Millisecond); release() }()
	sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	e.srv.Shutdown(sctx)
	cancel()
	x, err := st.GetSession(ctx, sid)
	require.NoError(t, err)
	evs, err := st.LoadEvents(ctx, sid)
	require.NoError(t, err)
	var kinds []string
	for _, r := range evs {
		kinds = append(kinds, r.Kind)
	}
	t.Logf("after shutdown: status %s, events %v", x.Status, kinds)
	require.NotEqual(t, "running", x.Status)
}

// A session nobody locks is not refused because other sessions' transcript flushes wait behind
// their row locks.
func TestPromptWrite_UnlockedSessionNotRefusedBehindOthers(t *testing.T) {
	url, _, e := ownStoreEnv(t, store.Options{}, func(c *Config) { c.StepDelay = 100 * time.Millisecond })
	ctx := context.Background()
	a := e.dial()
	a.hello()
	b := e.dial()
	b.hello()
	busy := []string{a.newSession(), a.newSession()}
	for _, sid := range busy {
		require.Nil(t, a.call("chat.send", fmt.Sprintf(`{"sessionId":%q,"prompt":"running"}`, sid))["error"])
	}
	release := lockSessions(t, url, busy...) // mid-run: their flushes (periodic and end) now wait on the lock
	time.Sleep(1500 * time.Millisecond)
	sidB := b.newSession()
	t0 := time.Now()
	m := b.call("chat.send", fmt.Sprintf(`{"sessionId":%q,"prompt":"innocent"}`, sidB))
	t.Logf("unlocked session's chat.send after %v: %v", time.Since(t0), m)
	release()
	sigs := b.runSignals(sidB)
	end := string(sigs[len(sigs)-1].raw)
	n, err := e.st.CountEvents(ctx, sidB)
	require.NoError(t, err)
	t.Logf("its run:end after %v: %s; its events stored: %d", time.Since(t0), end, n)
	require.Nil(t, m["error"], "a session nobody locked was refused")
}

// sessions.delete waits in Postgres (a row lock another transaction holds); a chat.send on the
// session meanwhile is refused at once and starts no run (it used to start one, whose model turns
// went on while its prompt's write waited behind the delete: a break-it helper's report); once
// the lock goes the delete completes, and a later chat.send answers not found.
func TestPromptWrite_DeleteRacesHeldStart(t *testing.T) {
	url, st, e := ownStoreEnv(t, store.Options{}, nil)
	ctx := context.Background()
	a := e.dial()
	a.hello()
	b := e.dial()
	b.hello()
	sid := a.newSession()
	require.Nil(t, a.call("chat.send", fmt.Sprintf(`{"sessionId":%q,"prompt":"one"}`, sid))["error"])
	a.runSignals(sid)
	release := lockSessions(t, url, sid)
	b.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":5,"method":"sessions.delete","params":{"sessionId":%q}}`, sid))
	time.Sleep(300 * time.Millisecond)
	send := a.call("chat.send", fmt.Sprintf(`{"sessionId":%q,"prompt":"two"}`, sid))
	require.NotNil(t, send["error"], "a prompt for a session being deleted was accepted: %v", send)
	require.Contains(t, fmt.Sprint(send["error"]), "is being deleted")
	release()
	del := decodeObj(t, b.nextAnswer())
	require.Nil(t, del["error"], "%v", del)
	_, gerr := st.GetSession(ctx, sid)
	require.ErrorIs(t, gerr, store.ErrNotFound)
	again := a.call("chat.send", fmt.Sprintf(`{"sessionId":%q,"prompt":"three"}`, sid))
	require.NotNil(t, again["error"])
	require.Contains(t, fmt.Sprint(again["error"]), "not found")
	require.False(t, e.srv.runs.IsRunning(sid), "a run started on a deleted session")
}

// chat.cancel while the prompt's write is held, then the write succeeds: the run ends cancelled,
// chat.send answers ok, the transcript keeps the prompt and the cancel's error, the session is
// idle.
func TestPromptWrite_CancelDuringHeldStart(t *testing.T) {
	url, st, e := ownStoreEnv(t, store.Options{}, func(c *Config) { c.StepDelay = 200 * time.Millisecond })
	ctx := context.Background()
	a := e.dial()
	a.hello()
	b := e.dial()
	b.hello()
	sid := a.newSession()
	release := lockSessions(t, url, sid)
	a.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":6,"method":"chat.send","params":{"sessionId":%q,"prompt":"to cancel"}}`, sid))
	time.Sleep(300 * time.Millisecond)
	c := b.call("chat.cancel", fmt.Sprintf(`{"sessionId":%q}`, sid))
	t.Logf("cancel: %v", c)
	time.Sleep(300 * time.Millisecond)
	release()
	send := decodeObj(t, a.nextAnswer())
	sigs := a.runSignals(sid)
	end := string(sigs[len(sigs)-1].raw)
	x, err := st.GetSession(ctx, sid)
	require.NoError(t, err)
	evs, err := st.LoadEvents(ctx, sid)
	require.NoError(t, err)
	var kinds []string
	for _, r := range evs {
		kinds = append(kinds, r.Kind)
	}
	t.Logf("send: %v\nrun:end: %s\nstatus %s events %v", send, end, x.Status, kinds)
	require.Nil(t, send["error"])
	require.Contains(t, end, "cancelled")
	require.Equal(t, "idle", x.Status)
	require.Equal(t, []string{"user-prompt", "error"}, kinds)
}

// A prompt queued behind a run that is refused keeps its own prompt: the refused run drops only
// its own rows, and the follow-up's write, after the refused run's end, stores it first (the
// adversarial review of issue 10 had the follow-up's prompt dropped and the server panic).
func TestPromptWrite_FollowUpOfARefusedRunKeepsItsPrompt(t *testing.T) {
	url, st, e := ownStoreEnv(t, store.Options{QueryTimeout: time.Second}, nil)
	ctx := context.Background()
	a := e.dial()
	a.hello()
	sid := a.newSession()

	release := lockSessions(t, url, sid)
	a.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":31,"method":"chat.send","params":{"sessionId":%q,"prompt":"refused first"}}`, sid))
	a.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":32,"method":"chat.send","params":{"sessionId":%q,"prompt":"queued follow-up"}}`, sid))
	answers := map[string]map[string]any{}
	for len(answers) < 2 {
		m := decodeObj(t, a.nextAnswer())
		answers[fmt.Sprint(m["id"])] = m
		if fmt.Sprint(m["id"]) == "31" {
			release() // the first was answered (refused: the lock outlasted the 1 s statement timeout)
		}
	}
	require.Equal(t, -32014, errCode(answers["31"]), "%v", answers["31"])
	require.Nil(t, answers["32"]["error"], "%v", answers["32"])
	first := a.runSignals(sid)
	require.Contains(t, string(first[len(first)-1].raw), "nothing of this run is kept")
	second := a.runSignals(sid)
	require.Contains(t, string(second[len(second)-1].raw), `"ok":true`)

	evs, err := st.LoadEvents(ctx, sid)
	require.NoError(t, err)
	require.NotEmpty(t, evs)
	require.Equal(t, "user-prompt", evs[0].Kind)
	require.Contains(t, string(evs[0].Body), "queued follow-up")
	for _, ev := range evs {
		require.NotContains(t, string(ev.Body), "refused first")
	}
	x, err := st.GetSession(ctx, sid)
	require.NoError(t, err)
	require.Equal(t, "idle", x.Status)
}
