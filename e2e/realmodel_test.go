package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zidane-server/zidane/server/agent/provider/openai/openaitest"
	"github.com/zidane-server/zidane/server/store/storetest"
)

// realModel is a server whose default model is openai/m on a local OpenAI-compatible fake that
// refuses any history the real API refuses (runtime cases R14/R15), with AGENTS.md at the root.
type realModel struct {
	fake *openaitest.Server
	srv  *serverProc
	c    *wsConn
	opts serverOpts
}

const agentsText = "Always answer in French. (from AGENTS.md)"

func startRealModel(t *testing.T, extra ...string) *realModel {
	t.Helper()
	fake := openaitest.New(t)
	fake.Validate(openaitest.CheckHistory)
	fake.SetModels("m")
	root, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(root, "AGENTS.md"), []byte(agentsText+"\n"), 0o644))
	opts := serverOpts{dbURL: storetest.URL(t), root: root, extra: append([]string{"--model", "openai/m"}, extra...),
		env: []string{"OPENAI_BASE_URL=" + fake.BaseURL(), "OPENAI_API_KEY=sk-e2e-secret"}}
	s := startServer(t, opts)
	c := dial(t, s, s.mintToken("model", "chat"))
	c.hello()
	return &realModel{fake: fake, srv: s, c: c, opts: opts}
}

// run sends a prompt and returns its signals up to its run:end.
func (m *realModel) run(t *testing.T, sid, prompt string) []signal {
	t.Helper()
	return m.c.collectRun(sendPrompt(t, m.c, sid, prompt))
}

func (m *realModel) chat(t *testing.T, i int) openaitest.ChatRequest {
	t.Helper()
	reqs := m.fake.StreamRequests()
	require.Greater(t, len(reqs), i, "model requests")
	c, err := openaitest.Chat(reqs[i])
	require.NoError(t, err)
	return c
}

func lastEnd(t *testing.T, sigs []signal) signal {
	t.Helper()
	end := sigs[len(sigs)-1]
	require.Equal(t, "run:end", end.Kind)
	return end
}

func errorEvents(sigs []signal) []string {
	var out []string
	for _, s := range sigs {
		if s.Kind == "event" && s.eventKind() == "error" {
			var e struct{ Message string }
			_ = json.Unmarshal(s.Event, &e)
			out = append(out, e.Message)
		}
	}
	return out
}

// TestRealModel_OpenAICompatible: over a real WebSocket and Postgres with the OpenAI-compatible
// fake: AGENTS.md reaches the system message; a tool call round trip (read_file); the second
// prompt's request carries the first exchange; usage.summary equals what the fake reported;
// models.list and setModel; rename, archive, delete; the key reaches neither client nor logs.
func TestRealModel_OpenAICompatible(t *testing.T) {
	m := startRealModel(t)
	sid, _ := createSession(t, m.c)

	m.fake.Enqueue(
		openaitest.Response{Events: []string{openaitest.Text("Let me "), openaitest.Text("read it."),
			openaitest.ToolCall(0, "call_1", "read_file", `{"path":`), openaitest.ToolArgs(0, `"AGENTS.md"}`),
			openaitest.Finish("tool_calls"), openaitest.Usage(100, 7), openaitest.Done}},
		openaitest.Reply("It says to answer in French.", 140, 9),
	)
	sigs := m.run(t, sid, "What does AGENTS.md say?")
	require.True(t, *lastEnd(t, sigs).OK, "%s", lastEnd(t, sigs).Raw)
	var kinds []string
	for _, s := range sigs {
		if s.Kind == "event" {
			kinds = append(kinds, s.eventKind())
		}
	}
	assert.Contains(t, kinds, "tool")
	assert.Contains(t, kinds, "tool-result")

	first, second := m.chat(t, 0), m.chat(t, 1)
	require.Equal(t, "system", first.Messages[0].Role)
	assert.Contains(t, first.Messages[0].Content, agentsText, "AGENTS.md reaches the system message")
	assert.Equal(t, "m", first.Model)
	last := second.Messages[len(second.Messages)-1]
	assert.Equal(t, "tool", last.Role)
	assert.Equal(t, "call_1", last.ToolCallID)
	assert.Contains(t, last.Content, agentsText, "the tool's result goes back to the model")

	m.fake.Enqueue(openaitest.Reply("Second answer.", 200, 3))
	sigs = m.run(t, sid, "And then?")
	require.True(t, *lastEnd(t, sigs).OK)
	third := m.chat(t, 2)
	var roles, texts []string
	for _, msg := range third.Messages[1:] {
		roles = append(roles, msg.Role)
		texts = append(texts, msg.Content)
	}
	assert.Equal(t, []string{"user", "assistant", "tool", "assistant", "user"}, roles, "the second request carries the first exchange")
	assert.Equal(t, "What does AGENTS.md say?", texts[0])
	assert.Equal(t, "It says to answer in French.", texts[3])
	assert.Equal(t, "And then?", texts[4])

	var sum struct {
		Total struct {
			TokensIn, TokensOut, Runs, Sessions, Turns, UnreportedTurns int64
		}
		Models []struct {
			Key                 string
			TokensIn, TokensOut int64
		}
	}
	m.c.result("usage.summary", map[string]any{}, &sum)
	assert.Equal(t, int64(100+140+200), sum.Total.TokensIn, "usage.summary equals what the fake reported")
	assert.Equal(t, int64(7+9+3), sum.Total.TokensOut)
	assert.Equal(t, int64(3), sum.Total.Turns)
	assert.Equal(t, int64(2), sum.Total.Runs)
	require.Len(t, sum.Models, 1)
	assert.Equal(t, "openai/m", sum.Models[0].Key)

	var models struct {
		Models []struct {
			ID        string
			IsDefault bool
		}
		Default string
	}
	m.c.result("models.list", map[string]any{}, &models)
	assert.Equal(t, "openai/m", models.Default)
	var ids []string
	for _, x := range models.Models {
		ids = append(ids, x.ID)
	}
	assert.Contains(t, ids, "openai/m")
	assert.Contains(t, ids, "scripted/scripted")

	// setModel: the next run goes to the scripted model; the fake gets no request.
	var sess struct {
		Title    string
		Model    string
		Archived bool
	}
	m.c.result("sessions.setModel", map[string]any{"sessionId": sid, "model": "scripted/scripted"}, &sess)
	assert.Equal(t, "scripted/scripted", sess.Model)
	before := len(m.fake.StreamRequests())
	sigs = m.run(t, sid, "Now the scripted one.")
	require.True(t, *lastEnd(t, sigs).OK)
	assert.Len(t, m.fake.StreamRequests(), before, "the scripted model answered")

	m.c.result("sessions.rename", map[string]any{"sessionId": sid, "title": "French"}, &sess)
	assert.Equal(t, "French", sess.Title)
	m.c.result("sessions.archive", map[string]any{"sessionId": sid, "archived": true}, &sess)
	assert.True(t, sess.Archived)
	var list struct{ Sessions []struct{ ID string } }
	m.c.result("sessions.list", map[string]any{}, &list)
	assert.Empty(t, list.Sessions, "archived sessions leave the default list")
	m.c.result("sessions.list", map[string]any{"archived": true}, &list)
	require.Len(t, list.Sessions, 1)
	m.c.result("sessions.delete", map[string]any{"sessionId": sid}, nil)
	e := m.c.callErr("sessions.get", map[string]any{"sessionId": sid})
	assert.Contains(t, e.Message, "not found")

	assert.NotContains(t, m.srv.stderr.String(), "sk-e2e-secret", "the key never reaches the logs")
}

// TestRealModel_SameShapeAsScripted: the scripted provider playing a script and the OpenAI
// provider answering the same turns give transcripts of the same kinds in the same order.
func TestRealModel_SameShapeAsScripted(t *testing.T) {
	dir := t.TempDir()
	script := `{"turns":[{"steps":[{"text":"Let me "},{"text":"read it."},{"tool":{"name":"read_file","arguments":{"path":"AGENTS.md"},"id":"call_1"}}]},{"steps":[{"text":"It says "},{"text":"French."}]}]}`
	require.NoError(t, os.WriteFile(filepath.Join(dir, "script.json"), []byte(script), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{"providers":[{"name":"demo","kind":"scripted","script":"script.json"}]}`), 0o644))
	m := startRealModel(t, "--config", filepath.Join(dir, "config.json"))
	m.fake.Enqueue(
		openaitest.Response{Events: []string{openaitest.Text("Let me "), openaitest.Text("read it."),
			openaitest.ToolCall(0, "call_1", "read_file", `{"path":"AGENTS.md"}`),
			openaitest.Finish("tool_calls"), openaitest.Usage(10, 5), openaitest.Done}},
		openaitest.Reply("It says French.", 20, 3),
	)
	shape := func(model string) []string {
		sid, _ := createSession(t, m.c)
		m.c.result("sessions.setModel", map[string]any{"sessionId": sid, "model": model}, nil)
		require.True(t, *lastEnd(t, m.run(t, sid, "Read AGENTS.md")).OK)
		var page struct{ Events []json.RawMessage }
		m.c.result("sessions.loadEvents", map[string]any{"sessionId": sid}, &page)
		return eventKinds(t, page.Events)
	}
	scripted, real := shape("demo/scripted"), shape("openai/m")
	assert.Equal(t, []string{"user-prompt", "markdown", "tool", "tool-result", "markdown", "run-summary"}, scripted)
	assert.Equal(t, scripted, real)
}

// TestRealModel_Kill9DuringStream: kill -9 while a turn streams, start again: the session is
// interrupted, its transcript ends with the error event, and every piece streamed more than a
// second before the kill is in it.
func TestRealModel_Kill9DuringStream(t *testing.T) {
	m := startRealModel(t)
	sid, _ := createSession(t, m.c)
	var words []string
	for i := 0; i < 60; i++ {
		words = append(words, fmt.Sprintf("w%02d ", i))
	}
	resp := openaitest.Reply(strings.Join(words, ""), 10, 60)
	resp.Delay = 50 * time.Millisecond
	m.fake.Enqueue(resp)
	runID := sendPrompt(t, m.c, sid, "Stream slowly.")
	type piece struct {
		at   time.Time
		text string
	}
	var pieces []piece
	for len(pieces) < 40 { // 40 pieces, 50 ms apart: about 2 s of streaming
		f := m.c.next(waitTimeout)
		if f.Method != "ipc.signal" {
			continue
		}
		var s signal
		require.NoError(t, json.Unmarshal(f.Params, &s))
		require.NotEqual(t, "run:end", s.Kind, "the run ended before the kill")
		if s.RunID == runID && s.Kind == "event" && s.eventKind() == "markdown" {
			var e struct{ Text string }
			require.NoError(t, json.Unmarshal(s.Event, &e))
			pieces = append(pieces, piece{time.Now(), e.Text})
		}
	}
	kill := time.Now()
	require.NoError(t, m.srv.cmd.Process.Signal(syscall.SIGKILL))
	<-m.srv.done
	m.srv.stopped = true
	var sure strings.Builder
	for _, p := range pieces {
		if kill.Sub(p.at) > time.Second {
			sure.WriteString(p.text)
		}
	}
	require.NotEmpty(t, sure.String(), "pieces streamed more than a second before the kill")

	again := m.opts
	again.dataDir = m.srv.opts.dataDir // the same server started again (its replica id, so it ends its own run at once)
	s2 := startServer(t, again)
	c2 := dial(t, s2, s2.mintToken("after", "chat"))
	c2.hello()
	var sess struct{ Status string }
	c2.result("sessions.get", map[string]any{"sessionId": sid}, &sess)
	assert.Equal(t, "interrupted", sess.Status)
	var page struct {
		Events []struct {
			Kind, Text, Message string
		}
	}
	c2.result("sessions.loadEvents", map[string]any{"sessionId": sid}, &page)
	require.GreaterOrEqual(t, len(page.Events), 3)
	assert.Equal(t, "user-prompt", page.Events[0].Kind)
	assert.Equal(t, "markdown", page.Events[1].Kind)
	assert.True(t, strings.HasPrefix(page.Events[1].Text, sure.String()), "stored %q, streamed a second before the kill %q", page.Events[1].Text, sure.String())
	lastEv := page.Events[len(page.Events)-1]
	assert.Equal(t, "error", lastEv.Kind)
	assert.Contains(t, lastEv.Message, "The server stopped during the run")
}

// TestRealModel_RunLimits: each per-run limit ends its run with an error event naming it.
func TestRealModel_RunLimits(t *testing.T) {
	t.Run("turns", func(t *testing.T) {
		m := startRealModel(t, "--max-turns", "1")
		sid, _ := createSession(t, m.c)
		m.fake.Enqueue(openaitest.CallReply(10, 2, openaitest.Call{ID: "call_1", Name: "read_file", Args: `{"path":"AGENTS.md"}`}))
		sigs := m.run(t, sid, "Loop.")
		assert.False(t, *lastEnd(t, sigs).OK)
		assert.Contains(t, strings.Join(errorEvents(sigs), "\n"), "limit of 1 model turns per run")
	})
	t.Run("output tokens", func(t *testing.T) {
		m := startRealModel(t, "--max-output-tokens", "16")
		sid, _ := createSession(t, m.c)
		m.fake.Enqueue(openaitest.Response{Events: []string{openaitest.Text("Cut "), openaitest.Finish("length"), openaitest.Usage(5, 16), openaitest.Done}})
		sigs := m.run(t, sid, "Long.")
		assert.False(t, *lastEnd(t, sigs).OK)
		assert.Contains(t, strings.Join(errorEvents(sigs), "\n"), "16 output tokens per turn")
		assert.Equal(t, 16, m.chat(t, 0).MaxCompletionTokens+m.chat(t, 0).MaxTokens, "the limit is sent")
	})
	t.Run("wall time", func(t *testing.T) {
		m := startRealModel(t, "--max-run-time", "1s")
		sid, _ := createSession(t, m.c)
		slow := openaitest.Reply("one two three four five six", 5, 6)
		slow.Delay = 400 * time.Millisecond
		m.fake.Enqueue(slow)
		sigs := m.run(t, sid, "Slow.")
		assert.False(t, *lastEnd(t, sigs).OK)
		assert.Contains(t, strings.Join(errorEvents(sigs), "\n"), "limit of 1s per run")
	})
	t.Run("concurrent runs", func(t *testing.T) {
		m := startRealModel(t, "--max-concurrent-runs", "1")
		a, _ := createSession(t, m.c)
		b, _ := createSession(t, m.c)
		slow := openaitest.Reply("first run streams slowly", 5, 4)
		slow.Delay = 150 * time.Millisecond
		m.fake.Enqueue(slow, openaitest.Reply("second", 5, 1))
		ra := sendPrompt(t, m.c, a, "A")
		time.Sleep(100 * time.Millisecond)
		rb := sendPrompt(t, m.c, b, "B")
		endA, firstB := -1, -1
		var seen []signal
		for endA < 0 || firstB < 0 || seen[len(seen)-1].Kind != "run:end" || seen[len(seen)-1].RunID != rb {
			f := m.c.next(waitTimeout)
			if f.Method != "ipc.signal" {
				continue
			}
			var s signal
			require.NoError(t, json.Unmarshal(f.Params, &s))
			seen = append(seen, s)
			if s.Kind == "run:end" && s.RunID == ra {
				endA = len(seen)
			}
			if s.RunID == rb && s.Kind == "event" && s.eventKind() == "markdown" && firstB < 0 {
				firstB = len(seen)
			}
		}
		assert.Less(t, endA, firstB, "the second run waits for a slot: it streams after the first ended")
	})
}
