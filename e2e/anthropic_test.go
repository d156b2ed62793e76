package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zidane-server/zidane/server/agent/provider/anthropic/anthropictest"
	"github.com/zidane-server/zidane/server/store/storetest"
)

// TestRealModel_Anthropic: the real binary over a real WebSocket and Postgres with the Anthropic
// fake (ANTHROPIC_BASE_URL, ANTHROPIC_API_KEY, --model anthropic/m), which refuses any history the
// real API refuses: AGENTS.md reaches the system prompt; a tool_use round trip (read_file, its
// input streamed in two input_json_delta pieces) sends the tool_result back; the second prompt's
// request carries the first exchange; usage.summary equals the usage the fake reported
// (message_start input, message_delta output); the key reaches neither client nor logs.
func TestRealModel_Anthropic(t *testing.T) {
	fake := anthropictest.New(t)
	fake.Validate(anthropictest.CheckHistory)
	fake.SetModels("m")
	root, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(root, "AGENTS.md"), []byte(agentsText+"\n"), 0o644))
	s := startServer(t, serverOpts{dbURL: storetest.URL(t), root: root, extra: []string{"--model", "anthropic/m"},
		env: []string{"ANTHROPIC_BASE_URL=" + fake.URL(), "ANTHROPIC_API_KEY=sk-ant-e2e-secret"}})
	c := dial(t, s, s.mintToken("anthropic", "chat"))
	c.hello()
	sid, _ := createSession(t, c)

	fake.Enqueue(
		anthropictest.Response{Events: []string{anthropictest.MessageStart(100), anthropictest.Ping,
			anthropictest.TextStart(0), anthropictest.TextDelta(0, "Let me "), anthropictest.TextDelta(0, "read it."), anthropictest.BlockStop(0),
			anthropictest.ToolStart(1, "toolu_1", "read_file"), anthropictest.InputDelta(1, `{"path":`), anthropictest.InputDelta(1, `"AGENTS.md"}`), anthropictest.BlockStop(1),
			anthropictest.MessageDelta("tool_use", 7), anthropictest.MessageStop}},
		anthropictest.Reply("It says to answer in French.", 140, 9),
	)
	sigs := c.collectRun(sendPrompt(t, c, sid, "What does AGENTS.md say?"))
	require.True(t, *lastEnd(t, sigs).OK, "%s", lastEnd(t, sigs).Raw)
	var kinds []string
	for _, sg := range sigs {
		if sg.Kind == "event" {
			kinds = append(kinds, sg.eventKind())
		}
	}
	assert.Contains(t, kinds, "tool")
	assert.Contains(t, kinds, "tool-result")

	messages := func(i int) anthropictest.MessagesRequest {
		t.Helper()
		reqs := fake.StreamRequests()
		require.Greater(t, len(reqs), i, "model requests")
		m, err := anthropictest.Messages(reqs[i])
		require.NoError(t, err)
		return m
	}
	first, second := messages(0), messages(1)
	assert.Equal(t, "m", first.Model)
	require.NotEmpty(t, first.System)
	assert.Contains(t, first.System[0].Text, agentsText, "AGENTS.md reaches the system prompt")
	assert.Positive(t, first.MaxTokens)
	last := second.Messages[len(second.Messages)-1]
	require.Equal(t, "user", last.Role)
	require.NotEmpty(t, last.Content)
	assert.Equal(t, "tool_result", last.Content[0].Type)
	assert.Equal(t, "toolu_1", last.Content[0].ToolUseID)
	assert.Contains(t, string(last.Content[0].Content), "answer in French", "the tool's result goes back to the model")
	prev := second.Messages[len(second.Messages)-2]
	require.Equal(t, "assistant", prev.Role)
	var input map[string]string
	for _, b := range prev.Content {
		if b.Type == "tool_use" {
			assert.Equal(t, "toolu_1", b.ID)
			require.NoError(t, json.Unmarshal(b.Input, &input))
		}
	}
	assert.Equal(t, map[string]string{"path": "AGENTS.md"}, input, "the input JSON streamed in pieces, whole")

	fake.Enqueue(anthropictest.Reply("Second answer.", 200, 3))
	sigs = c.collectRun(sendPrompt(t, c, sid, "And then?"))
	require.True(t, *lastEnd(t, sigs).OK, "%s", lastEnd(t, sigs).Raw)
	third := messages(2)
	var roles []string
	for _, m := range third.Messages {
		roles = append(roles, m.Role)
	}
	assert.Equal(t, []string{"user", "assistant", "user", "assistant", "user"}, roles, "the second request carries the first exchange")
	assert.Equal(t, "What does AGENTS.md say?", third.Messages[0].Content[0].Text)
	assert.Equal(t, "It says to answer in French.", third.Messages[3].Content[0].Text)
	assert.Equal(t, "And then?", third.Messages[4].Content[0].Text)

	var sum struct {
		Total struct {
			TokensIn, TokensOut, Runs, Turns, UnreportedTurns int64
		}
		Models []struct{ Key string }
	}
	c.result("usage.summary", map[string]any{}, &sum)
	assert.Equal(t, int64(100+140+200), sum.Total.TokensIn, "usage.summary equals what the fake reported")
	assert.Equal(t, int64(7+9+3), sum.Total.TokensOut)
	assert.Equal(t, int64(3), sum.Total.Turns)
	assert.Equal(t, int64(2), sum.Total.Runs)
	assert.Zero(t, sum.Total.UnreportedTurns)
	require.Len(t, sum.Models, 1)
	assert.Equal(t, "anthropic/m", sum.Models[0].Key)

	assert.NotContains(t, s.stderr.String(), "sk-ant-e2e-secret", "the key never reaches the logs")
	for _, r := range fake.StreamRequests() {
		assert.Equal(t, "sk-ant-e2e-secret", r.Header.Get("X-Api-Key")+trimBearer(r.Header.Get("Authorization")), "the key reaches the API")
	}
}

func trimBearer(s string) string {
	if len(s) > 7 && s[:7] == "Bearer " {
		return s[7:]
	}
	return s
}
