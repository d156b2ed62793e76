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

	"github.com/zidane-server/zidane/server/agent"
	"github.com/zidane-server/zidane/server/agent/provider/scripted"
)

func num(t *testing.T, v any) int64 {
	t.Helper()
	n, err := v.(json.Number).Int64()
	require.NoError(t, err)
	return n
}

// TestSessionManagement: the first prompt names a session; rename, archive (and the filtered,
// paged list), setModel (checked against the providers) and delete each answer the session and
// send session:updated; a session with a run cannot be deleted.
func TestSessionManagement(t *testing.T) {
	e := newEnv(t, nil)
	c := e.dial()
	c.hello()
	sid := c.newSession()
	c.result("chat.send", fmt.Sprintf(`{"sessionId":%q,"prompt":"Plan the trip to Lyon\nwith details"}`, sid))
	c.runSignals(sid)
	x := c.result("sessions.get", fmt.Sprintf(`{"sessionId":%q}`, sid))
	assert.Equal(t, "Plan the trip to Lyon", x["title"], "the first prompt's first line names the session")
	assert.Nil(t, x["model"], "absent: the server's default")

	x = c.result("sessions.rename", fmt.Sprintf(`{"sessionId":%q,"title":"Lyon"}`, sid))
	assert.Equal(t, "Lyon", x["title"])
	c.result("chat.send", fmt.Sprintf(`{"sessionId":%q,"prompt":"another"}`, sid))
	c.runSignals(sid)
	assert.Equal(t, "Lyon", c.result("sessions.get", fmt.Sprintf(`{"sessionId":%q}`, sid))["title"], "a renamed session keeps its name")

	m := c.call("sessions.setModel", fmt.Sprintf(`{"sessionId":%q,"model":"nowhere/m"}`, sid))
	require.Equal(t, -32602, errCode(m))
	assert.Contains(t, m["error"].(map[string]any)["message"], "scripted")
	x = c.result("sessions.setModel", fmt.Sprintf(`{"sessionId":%q,"model":"scripted/scripted"}`, sid))
	assert.Equal(t, "scripted/scripted", x["model"])
	models := c.result("models.list", `{}`)
	assert.Equal(t, "scripted/scripted", models["default"])
	require.Len(t, models["models"], 1)
	assert.Equal(t, true, models["models"].([]any)[0].(map[string]any)["isDefault"])

	others := []string{c.newSession(), c.newSession(), c.newSession()}
	x = c.result("sessions.archive", fmt.Sprintf(`{"sessionId":%q,"archived":true}`, sid))
	assert.Equal(t, true, x["archived"])
	archived := c.result("sessions.list", `{"archived":true}`)["sessions"].([]any)
	require.Len(t, archived, 1)
	assert.Equal(t, sid, archived[0].(map[string]any)["id"])
	// Paging: the three live sessions, two then one.
	p1 := c.result("sessions.list", `{"limit":2}`)
	require.Len(t, p1["sessions"], 2)
	require.NotNil(t, p1["nextCursor"])
	p2 := c.result("sessions.list", fmt.Sprintf(`{"limit":2,"cursor":%q}`, p1["nextCursor"]))
	require.Len(t, p2["sessions"], 1)
	assert.Nil(t, p2["nextCursor"])
	var seen []string
	for _, s := range append(p1["sessions"].([]any), p2["sessions"].([]any)...) {
		seen = append(seen, s.(map[string]any)["id"].(string))
	}
	assert.ElementsMatch(t, others, seen)
	m = c.call("sessions.list", fmt.Sprintf(`{"archived":true,"cursor":%q}`, p1["nextCursor"]))
	assert.Equal(t, -32602, errCode(m), "a cursor of another filter")

	// Delete: refused while running, then done; session:updated says deleted.
	c.result("chat.send", fmt.Sprintf(`{"sessionId":%q,"prompt":"long"}`, others[0]))
	m = c.call("sessions.delete", fmt.Sprintf(`{"sessionId":%q}`, others[0]))
	if errCode(m) == 0 {
		t.Log("the run ended before the delete; nothing to assert about the refusal")
	} else {
		assert.Equal(t, -32014, errCode(m))
	}
	c.runSignals(others[0])
	assert.Equal(t, true, c.result("sessions.delete", fmt.Sprintf(`{"sessionId":%q}`, sid))["deleted"])
	m = c.call("sessions.get", fmt.Sprintf(`{"sessionId":%q}`, sid))
	assert.Equal(t, -32014, errCode(m))
	found := false
	for !found {
		s := c.nextSignal()
		if s.kind == "session:updated" && s.session == sid {
			p := decodeObj(t, s.raw)["params"].(map[string]any)
			found = p["deleted"] == true
		}
	}
}

// TestUsageSummaryEqualsTurnEnds: usage.summary's totals are the sum of the turn:end usage the
// provider reported, per model and per day; deleting a session keeps its usage.
func TestUsageSummaryEqualsTurnEnds(t *testing.T) {
	e := newEnv(t, nil)
	c := e.dial()
	c.hello()
	var in, out, turns int64
	sessions := []string{c.newSession(), c.newSession()}
	for _, sid := range sessions {
		for i := 0; i < 2; i++ {
			c.result("chat.send", fmt.Sprintf(`{"sessionId":%q,"prompt":"count me %d"}`, sid, i))
			for _, s := range c.runSignals(sid) {
				if s.kind == "turn:end" {
					u := decodeObj(t, s.raw)["params"].(map[string]any)["usage"].(map[string]any)
					in += num(t, u["input"])
					out += num(t, u["output"])
					turns++
				}
			}
		}
	}
	require.Positive(t, in)
	c.result("sessions.delete", fmt.Sprintf(`{"sessionId":%q}`, sessions[1]))
	sum := c.result("usage.summary", `{}`)
	total := sum["total"].(map[string]any)
	assert.Equal(t, in, num(t, total["tokensIn"]))
	assert.Equal(t, out, num(t, total["tokensOut"]))
	assert.Equal(t, turns, num(t, total["turns"]))
	assert.Equal(t, int64(4), num(t, total["runs"]))
	assert.Equal(t, int64(2), num(t, total["sessions"]))
	assert.Zero(t, num(t, total["unreportedTurns"]))
	days := sum["days"].([]any)
	require.Len(t, days, 1)
	assert.Equal(t, in, num(t, days[0].(map[string]any)["tokensIn"]))
	models := sum["models"].([]any)
	require.Len(t, models, 1)
	assert.Equal(t, "scripted/scripted", models[0].(map[string]any)["key"])
	assert.Equal(t, out, num(t, models[0].(map[string]any)["tokensOut"]))
}

// TestStreamProgress (issue 8 item 8, on by default): a slow scripted turn (30 pieces of 5
// tokens, 50 ms apart, then a second turn after a tool call) sends stream:progress at most 4 a
// second per run, each with its runId and turnId, without $seq, only between the run's run:start
// and run:end; tokens grow within a turn and never pass the turn's streamed text (150 tokens),
// and tokens/s matches the pace (about 100). None comes after run:end.
func TestStreamProgress(t *testing.T) {
	piece := textStep("word word word word ") // 20 characters: 5 tokens
	steps := make([]string, 30)
	for i := range steps {
		steps[i] = piece
	}
	sc, err := scripted.Parse([]byte(`{"turns":[{"steps":[` + strings.Join(steps, ",") + `,` + toolStep("lookup", `{"query":"q"}`) + `]},{"steps":[` + strings.Join(steps[:10], ",") + `]}]}`))
	require.NoError(t, err)
	models, err := agent.NewRegistry(context.Background(), "", scripted.New(scripted.Options{Script: sc, StepDelay: 50 * time.Millisecond}))
	require.NoError(t, err)
	e := newEnv(t, func(c *Config) { c.Models = models })
	c := e.dial()
	c.hello()
	sid := c.newSession()
	runID := c.result("chat.send", fmt.Sprintf(`{"sessionId":%q,"prompt":"progress please"}`, sid))["runId"].(string)
	type progress struct {
		at     time.Time
		turn   string
		tokens int64
		tps    float64
	}
	var got []progress
	started, ended := false, false
	for !ended {
		s := c.nextSignal()
		if s.session != sid {
			continue
		}
		switch s.kind {
		case "run:start":
			started = true
		case "run:end":
			ended = true
		case "stream:progress":
			require.True(t, started, "progress before run:start")
			assert.Zero(t, s.seq, "ephemeral: no $seq")
			assert.NotContains(t, string(s.raw), `"$seq"`)
			p := decodeObj(t, s.raw)["params"].(map[string]any)
			assert.Equal(t, runID, p["runId"])
			assert.NotEmpty(t, p["turnId"])
			tps, err := p["tokensPerSecond"].(json.Number).Float64()
			require.NoError(t, err)
			got = append(got, progress{time.Now(), p["turnId"].(string), num(t, p["tokens"]), tps})
		}
	}
	// ~1.5 s + ~0.5 s of streaming: at least 4 reports, at most 4 a second: any 5 in a row span
	// a second at the server. Seen here they may bunch by the delivery jitter of a loaded
	// machine (CI saw 740 ms), so the check allows half of it: a missing limiter (a report per
	// 50 ms piece) spans 200 ms.
	require.GreaterOrEqual(t, len(got), 4, "%+v", got)
	for i := 4; i < len(got); i++ {
		assert.Greater(t, got[i].at.Sub(got[i-4].at), 500*time.Millisecond, "any 5 in a row span about a second")
	}
	turns := map[string]bool{}
	for i, p := range got {
		turns[p.turn] = true
		assert.Positive(t, p.tokens, "%+v", p)
		// Whole pieces of 5 tokens; the tool call's arguments ({"query":"q"}) add 4.
		assert.True(t, p.tokens%5 == 0 || p.tokens == 154, "no more than the turn streamed: %+v", p)
		assert.LessOrEqual(t, p.tokens, int64(154), "no more than the turn streamed: %+v", p)
		if i > 0 && got[i-1].turn == p.turn {
			assert.Greater(t, p.tokens, got[i-1].tokens, "tokens grow within a turn")
			// 5 tokens per 50 ms: 100 tokens/s; a loaded machine slows the pieces, never speeds them.
			assert.Greater(t, p.tps, 10.0, "%+v", p)
			assert.Less(t, p.tps, 150.0, "%+v", p)
		}
	}
	assert.Len(t, turns, 2, "both model turns report progress")
	// Nothing after run:end.
	deadline := time.Now().Add(700 * time.Millisecond)
	for time.Now().Before(deadline) {
		f, err := c.tryNext(time.Until(deadline))
		require.NoError(t, err)
		if f == nil {
			break
		}
		if isSignalFrame(f) {
			assert.NotEqual(t, "stream:progress", parseSignal(t, f).kind, "stream:progress after run:end: %s", f)
		}
	}
}
