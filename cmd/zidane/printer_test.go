package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zidane-server/zidane/client"
	"github.com/zidane-server/zidane/protocol"
)

func events(t *testing.T, js string) []protocol.StreamEvent {
	var raws []json.RawMessage
	require.NoError(t, json.Unmarshal([]byte(js), &raws))
	var out []protocol.StreamEvent
	for _, r := range raws {
		e, err := protocol.DecodeStreamEvent(r)
		require.NoError(t, err)
		out = append(out, e)
	}
	return out
}

const runEvents = `[
	{"kind":"user-prompt","text":"older","turnId":"u0"},
	{"kind":"markdown","text":"Old answer.","streaming":false,"turnId":"t0"},
	{"kind":"user-prompt","text":"mine","turnId":"u1"},
	{"kind":"markdown","text":"Hello! Let me look that up.","streaming":false,"turnId":"t1"},
	{"kind":"tool","tool":"lookup","callId":"c","text":"lookup","input":{},"turnId":"t1"},
	{"kind":"tool-result","tool":"lookup","callId":"c","text":"r","turnId":"t1"},
	{"kind":"markdown","text":"The lookup found: r","streaming":false,"turnId":"t2"}`

// A reload after a gap prints the part of the run the CLI had not printed, once, and ends the
// CLI when the transcript shows the run's end.
func TestPrinterReloadPrintsWhatWasMissed(t *testing.T) {
	var out, errb bytes.Buffer
	p := &printer{out: &out, stderr: &errb, sid: "S", runID: "R", prompt: "mine", inRun: true}
	p.enc = json.NewEncoder(&out)
	p.printed.WriteString("Hello! Let")
	out.WriteString("Hello! Let")

	done, _ := p.take(client.SignalEvent{SessionID: "S", Reload: &client.Reload{SessionID: "S", Reason: "gap", Events: events(t, runEvents+`]`)}})
	assert.False(t, done, "the run has not ended")
	assert.Equal(t, "Hello! Let me look that up.\nThe lookup found: r", out.String())
	assert.Contains(t, errb.String(), "(gap)")

	done, code := p.take(client.SignalEvent{SessionID: "S", Reload: &client.Reload{SessionID: "S", Reason: "gap", Events: events(t, runEvents+`,
		{"kind":"run-summary","text":"s","runSummary":{"modelId":"m","durationMs":1,"turns":2,"tokensIn":1,"tokensOut":1,"tokensPerSecond":1},"turnId":"t2"}]`)}})
	assert.True(t, done)
	assert.Equal(t, exitOK, code)
	assert.Equal(t, "Hello! Let me look that up.\nThe lookup found: r\n", out.String(), "nothing twice")
}

// After a restart (epoch) a run that the transcript does not show ended will not end.
func TestPrinterEpochEndsAnUnfinishedRun(t *testing.T) {
	var out, errb bytes.Buffer
	p := &printer{out: &out, stderr: &errb, sid: "S", runID: "R", prompt: "mine", inRun: true}
	done, code := p.take(client.SignalEvent{SessionID: "S", Reload: &client.Reload{SessionID: "S", Reason: "epoch", Events: events(t, runEvents+`]`)}})
	assert.True(t, done)
	assert.Equal(t, exitFailed, code)
	assert.Contains(t, errb.String(), "the run did not finish")
}

// A stream:progress of the CLI's run is printed neither as text nor with --json: it is a passing
// state without $seq (the --json lines are the run's sequenced signals, as a replay has them).
func TestPrinterSkipsStreamProgress(t *testing.T) {
	for _, asJSON := range []bool{false, true} {
		var out, errb bytes.Buffer
		p := &printer{out: &out, stderr: &errb, sid: "S", runID: "R", prompt: "mine", inRun: true, asJSON: asJSON}
		p.enc = json.NewEncoder(&out)
		raw := json.RawMessage(`{"kind":"stream:progress","sessionId":"S","runId":"R","turnId":"t1","tokens":12,"tokensPerSecond":30.5}`)
		sig := &protocol.StreamProgressSignal{SessionID: "S", RunID: "R", TurnID: "t1", Tokens: 12, TokensPerSecond: 30.5}
		done, _ := p.take(client.SignalEvent{SessionID: "S", Signal: sig, Raw: raw})
		assert.False(t, done)
		assert.Empty(t, out.String(), "json=%v", asJSON)
		raw = json.RawMessage(`{"kind":"turn:end","sessionId":"S","runId":"R","turnId":"t1","usage":{"input":1,"output":2},"$seq":5}`)
		p.take(client.SignalEvent{SessionID: "S", Seq: 5, Signal: &protocol.TurnEndSignal{SessionID: "S", RunID: "R", TurnID: "t1"}, Raw: raw})
		if asJSON {
			assert.Contains(t, out.String(), `"turn:end"`, "a sequenced signal is printed")
		}
	}
}

// A 401 after the local server restarted (daemon.json holds a new token) says so, instead of
// calling a file stale that the new server just wrote (a fresh user's report, issue 10).
func TestExplainRestartedServer(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, client.DaemonFileName)
	require.NoError(t, os.WriteFile(file, []byte(`{"url":"ws://127.0.0.1:1","token":"zds_new"}`), 0o600))
	got := explain(target{url: "ws://127.0.0.1:1", token: "zds_old", daemonFile: file}, client.ErrUnauthorized)
	require.Contains(t, got, "the server restarted while this command ran")
	got = explain(target{url: "ws://127.0.0.1:1", token: "zds_new", daemonFile: file}, client.ErrUnauthorized)
	require.Contains(t, got, "the file is stale")
}
