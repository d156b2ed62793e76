package server

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zidane-server/zidane/protocol"
)

// runSig is one decoded session signal of a run check.
type runSig struct {
	kind, runID string
	seq         int64
	params      map[string]any
	raw         []byte
}

func decodeRunSig(t *testing.T, s signal) runSig {
	t.Helper()
	p := decodeObj(t, s.raw)["params"].(map[string]any)
	rs := runSig{kind: s.kind, seq: s.seq, params: p, raw: s.raw}
	rs.runID, _ = p["runId"].(string)
	return rs
}

// checkBracketed asserts the B46 rules on one session's signals, in wire order: each run in
// runIDs has exactly one run:start and one run:end; every run-scoped signal (event, turn:end)
// carries a runId of a run that started and has not ended; runs of a session never overlap; no
// signal of an unknown run. It returns the events in wire order.
func checkBracketed(t *testing.T, sid string, sigs []runSig, runIDs []string) []protocol.StreamEvent {
	t.Helper()
	known := map[string]bool{}
	for _, id := range runIDs {
		known[id] = true
	}
	started, ended := map[string]bool{}, map[string]bool{}
	open := ""
	var events []protocol.StreamEvent
	for _, s := range sigs {
		switch s.kind {
		case "run:start":
			require.True(t, known[s.runID], "session %s: run:start of a run nobody sent: %s", sid, s.raw)
			require.False(t, started[s.runID], "session %s: a second run:start: %s", sid, s.raw)
			require.Empty(t, open, "session %s: run %s starts while run %s is open", sid, s.runID, open)
			started[s.runID], open = true, s.runID
		case "run:end":
			require.Equal(t, open, s.runID, "session %s: run:end of a run that is not the open one: %s", sid, s.raw)
			require.False(t, ended[s.runID], "session %s: a second run:end: %s", sid, s.raw)
			ended[s.runID], open = true, ""
		case "event", "turn:end":
			require.NotEmpty(t, s.runID, "session %s: a run-scoped signal without runId: %s", sid, s.raw)
			require.Equal(t, open, s.runID, "session %s: a %s outside its run's brackets: %s", sid, s.kind, s.raw)
			if s.kind == "event" {
				b, _ := json.Marshal(s.params["event"])
				ev, err := protocol.DecodeStreamEvent(b)
				require.NoError(t, err)
				events = append(events, ev)
			}
		}
	}
	for _, id := range runIDs {
		assert.True(t, started[id] && ended[id], "session %s: run %s is not bracketed (start %v, end %v)", sid, id, started[id], ended[id])
	}
	return events
}

// mergePieces folds streamed markdown and thinking pieces into blocks, as the transcript stores
// them, and encodes every event, so live events compare with sessions.loadEvents.
func mergePieces(t *testing.T, evs []protocol.StreamEvent) []string {
	t.Helper()
	var out []string
	var kind, turn, text string // the open block
	encode := func(ev protocol.StreamEvent) {
		b, err := protocol.Marshal(ev)
		require.NoError(t, err)
		out = append(out, string(b))
	}
	flush := func() {
		switch kind {
		case "markdown":
			encode(&protocol.MarkdownEvent{Text: text, TurnID: turn})
		case "thinking":
			encode(&protocol.ThinkingEvent{Text: text, TurnID: turn})
		}
		kind = ""
	}
	for _, ev := range evs {
		k, tid, piece, streaming := "", "", "", false
		switch e := ev.(type) {
		case *protocol.MarkdownEvent:
			k, tid, piece, streaming = "markdown", e.TurnID, e.Text, e.Streaming
		case *protocol.ThinkingEvent:
			k, tid, piece, streaming = "thinking", e.TurnID, e.Text, e.Streaming
		}
		if !streaming {
			flush()
			encode(ev)
			continue
		}
		if k != kind || tid != turn {
			flush()
			kind, turn, text = k, tid, ""
		}
		text += piece
	}
	flush()
	return out
}

// untilRunEnds reads signals until the session has had n run:ends and returns its signals; a
// signal of a session in done (all its runs ended) fails the test.
func (c *testConn) untilRunEnds(sid string, n int, done map[string]bool) []runSig {
	c.t.Helper()
	var sigs []runSig
	for ends := 0; ends < n; {
		s := c.nextSignal()
		if s.kind == "session:updated" {
			continue // not run-scoped: the status after run:end
		}
		require.False(c.t, done[s.session], "a signal after the session's last run:end: %s", s.raw)
		if s.session != sid {
			continue
		}
		rs := decodeRunSig(c.t, s)
		sigs = append(sigs, rs)
		if rs.kind == "run:end" {
			ends++
		}
	}
	return sigs
}

// storedEvents reads a session's transcript straight from the store, encoded.
func (e *testEnv) storedEvents(sid string) []string {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rows, err := e.st.LoadEvents(ctx, sid)
	require.NoError(e.t, err)
	out := make([]string, 0, len(rows))
	for _, r := range rows {
		ev, err := protocol.DecodeStreamEvent(r.Body)
		require.NoError(e.t, err)
		b, err := protocol.Marshal(ev)
		require.NoError(e.t, err)
		out = append(out, string(b))
	}
	return out
}

// TestFieldCase_B46_CancelledQueuedRunIsBracketed: chat.send A; chat.send B (queued);
// chat.cancel B. B gets run:start, its user-prompt and the cancellation error, then run:end, all
// after A's run:end; every event and turn:end carries its runId; the transcript holds the events
// in the order they were signalled.
func TestFieldCase_B46_CancelledQueuedRunIsBracketed(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.StepDelay = 50 * time.Millisecond })
	c := e.dial()
	c.hello()
	sid := c.newSession()
	a := c.result("chat.send", fmt.Sprintf(`{"sessionId":%q,"prompt":"A"}`, sid))["runId"].(string)
	b := c.result("chat.send", fmt.Sprintf(`{"sessionId":%q,"prompt":"B"}`, sid))["runId"].(string)
	require.Equal(t, true, c.result("chat.cancel", fmt.Sprintf(`{"sessionId":%q,"runId":%q}`, sid, b))["cancelled"])

	sigs := c.untilRunEnds(sid, 2, nil)
	c.expectNothing(300 * time.Millisecond)
	events := checkBracketed(t, sid, sigs, []string{a, b})

	// B's bracket, in order, after A's run:end.
	var kinds []string
	inB := false
	for _, s := range sigs {
		if s.runID != b {
			require.False(t, inB, "a signal of another run inside B's brackets: %s", s.raw)
			continue
		}
		k := s.kind
		if k == "event" {
			k = s.params["event"].(map[string]any)["kind"].(string)
		}
		kinds = append(kinds, k)
		inB = k != "run:end"
	}
	assert.Equal(t, []string{"run:start", "user-prompt", "error", "run:end"}, kinds)
	last := sigs[len(sigs)-1]
	assert.Equal(t, "run:end", last.kind)
	assert.Equal(t, b, last.runID, "B's run:end comes last, after A's")
	assert.Equal(t, true, last.params["interrupted"])

	assert.Equal(t, mergePieces(t, events), e.storedEvents(sid), "the transcript holds what was signalled, in that order")
}

// interleaving ops of TestRunsBracketed_Interleavings.
const (
	opSend          = "send"
	opCancelRunning = "cancel"       // chat.cancel without runId
	opCancelNewest  = "cancel-last"  // chat.cancel of the newest runId sent
	opCancelFirst   = "cancel-first" // chat.cancel of the first runId sent
)

// interleavings returns every sequence of 1..n ops that starts with a send.
func interleavings(n int) [][]string {
	ops := []string{opSend, opCancelRunning, opCancelNewest, opCancelFirst}
	out := [][]string{{opSend}}
	frontier := [][]string{{opSend}}
	for l := 2; l <= n; l++ {
		var next [][]string
		for _, s := range frontier {
			for _, op := range ops {
				next = append(next, append(append([]string(nil), s...), op))
			}
		}
		out = append(out, next...)
		frontier = next
	}
	return out
}

// runOps performs one interleaving in a new session, with gap between ops, and returns the
// session and the runIds chat.send answered.
func runOps(c *testConn, ops []string, gap time.Duration) (string, []string) {
	sid := c.newSession()
	var runs []string
	for i, op := range ops {
		if i > 0 && gap > 0 {
			time.Sleep(gap)
		}
		switch op {
		case opSend:
			m := c.call("chat.send", fmt.Sprintf(`{"sessionId":%q,"prompt":"op %d"}`, sid, i))
			if r, ok := m["result"].(map[string]any); ok {
				runs = append(runs, r["runId"].(string))
			} else {
				require.Equal(c.t, -32014, errCode(m), "chat.send: %v", m)
			}
		case opCancelRunning:
			c.result("chat.cancel", fmt.Sprintf(`{"sessionId":%q}`, sid))
		case opCancelNewest:
			c.result("chat.cancel", fmt.Sprintf(`{"sessionId":%q,"runId":%q}`, sid, runs[len(runs)-1]))
		case opCancelFirst:
			c.result("chat.cancel", fmt.Sprintf(`{"sessionId":%q,"runId":%q}`, sid, runs[0]))
		}
	}
	return sid, runs
}

// TestRunsBracketed_Interleavings runs every sequence of up to four sends and cancels (of the
// running prompt, the newest and the first run), back to back and with pauses, then the same
// sequences cut by a shutdown: every run is bracketed in every session, nothing of a run follows
// its run:end, and each transcript equals its signalled events in order (field case B46).
func TestRunsBracketed_Interleavings(t *testing.T) {
	seqs := interleavings(4)
	gaps := []time.Duration{0, 30 * time.Millisecond}

	t.Run("to the end", func(t *testing.T) {
		e := newEnv(t, func(c *Config) { c.StepDelay = 10 * time.Millisecond })
		for _, gap := range gaps {
			t.Run(fmt.Sprintf("gap %v", gap), func(t *testing.T) {
				t.Parallel()
				c := e.dial()
				c.t = t
				c.hello()
				done := map[string]bool{} // sessions whose runs all ended: nothing more may come
				for i, ops := range seqs {
					sid, runs := runOps(c, ops, gap)
					sigs := c.untilRunEnds(sid, len(runs), done)
					done[sid] = true
					events := checkBracketed(t, sid, sigs, runs)
					require.Equal(t, mergePieces(t, events), e.storedEvents(sid), "sequence %d %s", i, strings.Join(ops, ","))
				}
				c.expectNothing(200 * time.Millisecond)
				for len(c.skipped) > 0 {
					s := c.nextSignal()
					require.False(t, done[s.session] && s.kind != "session:updated", "a signal after the session's last run:end: %s", s.raw)
				}
			})
		}
	})

	t.Run("shutdown", func(t *testing.T) {
		e := newEnv(t, func(c *Config) { c.StepDelay = 100 * time.Millisecond })
		obs := e.dial()
		obs.hello()
		c := e.dial()
		c.hello()
		type sess struct {
			ops  []string
			runs []string
		}
		sessions := map[string]sess{}
		for _, gap := range []time.Duration{0, 5 * time.Millisecond} {
			for _, ops := range seqs {
				sid, runs := runOps(c, ops, gap)
				sessions[sid] = sess{ops, runs}
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		e.srv.Shutdown(ctx)
		// The observer read everything up to the close.
		bySession := map[string][]runSig{}
		for {
			f, err := obs.tryNext(10 * time.Second)
			if f == nil {
				require.Error(t, err, "the connection stays open after shutdown")
				break
			}
			if !isSignalFrame(f) {
				continue
			}
			s := parseSignal(t, f)
			if s.session != "" {
				bySession[s.session] = append(bySession[s.session], decodeRunSig(t, s))
			}
		}
		for sid, x := range sessions {
			events := checkBracketed(t, sid, bySession[sid], x.runs)
			require.Equal(t, mergePieces(t, events), e.storedEvents(sid), "sequence %s", strings.Join(x.ops, ","))
		}
	})
}
