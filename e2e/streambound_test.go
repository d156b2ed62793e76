package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zidane-server/zidane/server/agent/provider/anthropic/anthropictest"
	"github.com/zidane-server/zidane/server/agent/provider/openai/openaitest"
	"github.com/zidane-server/zidane/server/store/storetest"
)

// streamRSSBound is the peak resident memory (VmHWM) the server may reach while a provider
// streams 300 MiB at it: the turn is cut at its limits, so what it holds is bounded by them (the
// unbounded server peaked at 5,690 MiB).
const streamRSSBound = 160 << 20

// piece16K is 16 KiB of answer text (ASCII: a byte is a byte on the wire and in the estimate).
var piece16K = strings.Repeat("0123456789abcdef", 1024)

// vmHWM reads the peak resident set of process pid from /proc/<pid>/status, in bytes.
func vmHWM(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	require.NoError(t, err)
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "VmHWM:" && f[2] == "kB" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			require.NoError(t, err)
			return kb << 10
		}
	}
	t.Fatalf("no VmHWM in /proc/%d/status", pid)
	return 0
}

// boundedRun is what a run cut at its limits showed a client: its error event and run:end, the
// markdown it streamed, and the stored transcript.
type boundedRun struct {
	errEvent, endErr string
	endOK            bool
	streamed         int // bytes of markdown signalled
	stored           []struct {
		Kind string `json:"kind"`
		Text string `json:"text"`
	}
	status string
}

// runBounded sends prompt and reads the run to its run:end without keeping the streamed pieces,
// then loads the transcript and the session's status.
func runBounded(t *testing.T, c *wsConn, sid, prompt string) boundedRun {
	t.Helper()
	runID := sendPrompt(t, c, sid, prompt)
	var out boundedRun
	deadline := time.Now().Add(waitTimeout)
	for {
		f := c.next(time.Until(deadline))
		if f.Method != "ipc.signal" {
			continue
		}
		var sg signal
		require.NoError(t, json.Unmarshal(f.Params, &sg))
		if sg.RunID != runID {
			continue
		}
		if sg.Kind == "event" {
			var ev struct{ Kind, Message, Text string }
			require.NoError(t, json.Unmarshal(sg.Event, &ev))
			switch ev.Kind {
			case "markdown":
				out.streamed += len(ev.Text)
			case "error":
				out.errEvent = ev.Message
			}
		}
		if sg.Kind == "run:end" {
			var end struct {
				OK    bool   `json:"ok"`
				Error string `json:"error"`
			}
			require.NoError(t, json.Unmarshal(f.Params, &end))
			out.endOK, out.endErr = end.OK, end.Error
			break
		}
	}
	var page struct {
		Events []struct {
			Kind string `json:"kind"`
			Text string `json:"text"`
		} `json:"events"`
	}
	c.result("sessions.loadEvents", map[string]any{"sessionId": sid}, &page)
	out.stored = page.Events
	var x struct {
		Status string `json:"status"`
	}
	c.result("sessions.get", map[string]any{"sessionId": sid}, &x)
	out.status = x.Status
	return out
}

// TestFieldCase_T08_ProviderStreamsPastItsLimits: an OpenAI-compatible endpoint streams 16 KiB
// content deltas up to 300 MiB. The server closes the stream at the turn's output bound (twice
// the 8192 tokens asked, at 4 bytes a token: 64 KiB), so the endpoint never gets to send the rest;
// the run ends ok:false with an error naming --max-output-tokens; the transcript holds the 64 KiB
// kept; the server's peak RSS stays under streamRSSBound. Then SIGTERM while an endless stream
// trickles in: the process exits 0 within the documented 15 s.
func TestFieldCase_T08_ProviderStreamsPastItsLimits(t *testing.T) {
	f := openaitest.New(t)
	const total = 300 << 20
	f.Enqueue(
		openaitest.Response{Repeat: openaitest.Text(piece16K), Times: total / len(piece16K),
			Tail: []string{openaitest.Finish("stop"), openaitest.Usage(10, 80000000), openaitest.Done}},
		openaitest.Response{Repeat: openaitest.Text("and on "), Delay: 20 * time.Millisecond}, // forever
	)
	data := t.TempDir()
	cfg := fmt.Sprintf(`{"providers":[{"name":"fake","kind":"openai","baseUrl":%q,"models":[{"name":"m","contextWindow":128000}]}]}`, f.BaseURL())
	require.NoError(t, os.WriteFile(filepath.Join(data, "config.json"), []byte(cfg), 0o600))
	s := startServer(t, serverOpts{dbURL: storetest.URL(t), dataDir: data, extra: []string{"--model", "fake/m"}})
	c := dial(t, s, s.mintToken("t08", "chat"))
	c.hello()
	sid, _ := createSession(t, c)
	before := vmHWM(t, s.cmd.Process.Pid)

	r := runBounded(t, c, sid, "Say a lot.")
	peak := vmHWM(t, s.cmd.Process.Pid)
	t.Logf("VmHWM %d MiB before the run, %d MiB after; the endpoint wrote %d KiB", before>>20, peak>>20, f.Written()>>10)
	assert.Less(t, peak, int64(streamRSSBound), "peak RSS")
	assert.Less(t, f.Written(), int64(16<<20), "the stream was closed: the endpoint did not get to send its 300 MiB")

	assert.False(t, r.endOK)
	assert.Contains(t, r.endErr, "--max-output-tokens")
	assert.Equal(t, r.endErr, r.errEvent, "the error event says what run:end says")
	const kept = 2 * 8192 * 4
	assert.Equal(t, kept, r.streamed, "pieces signalled up to the bound, none past it")
	require.Len(t, r.stored, 3, "user-prompt, the kept markdown, the error: %+v", r.stored)
	assert.Equal(t, "user-prompt", r.stored[0].Kind)
	assert.Equal(t, "markdown", r.stored[1].Kind)
	assert.Equal(t, strings.Repeat(piece16K, kept/len(piece16K)), r.stored[1].Text, "the transcript holds what was kept, merged")
	assert.Equal(t, "error", r.stored[2].Kind)
	assert.Equal(t, "error", r.status)

	// SIGTERM while a run streams: exit 0 within the documented bound.
	sendPrompt(t, c, sid, "Go on forever.")
	for {
		fr := c.next(waitTimeout)
		var sg signal
		require.NoError(t, json.Unmarshal(fr.Params, &sg))
		if sg.Kind == "event" && sg.eventKind() == "markdown" {
			break
		}
	}
	start := time.Now()
	require.NoError(t, s.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case <-s.done:
	case <-time.After(20 * time.Second):
		t.Fatal("the server did not exit within 20 s of SIGTERM")
	}
	s.stopped = true
	took := time.Since(start)
	t.Logf("SIGTERM to exit: %s", took)
	require.NoError(t, s.waitErr, "exit status")
	assert.Less(t, took, 15*time.Second, "shutdown's documented bound")
}

// TestFieldCase_T08_ToolInputNeverEnds: the Anthropic wire format, a tool_use block whose input
// deltas (16 KiB each) never end. The byte bound counts tool-call arguments as they arrive:
// --max-turn-bytes 32768 closes the stream after two pieces, the call never runs, the run ends
// with an error naming the limit, and the text before it is kept.
func TestFieldCase_T08_ToolInputNeverEnds(t *testing.T) {
	fake := anthropictest.New(t)
	fake.SetModels("m")
	fake.Enqueue(anthropictest.Response{
		Events: []string{anthropictest.MessageStart(10), anthropictest.TextStart(0), anthropictest.TextDelta(0, "Writing it."),
			anthropictest.BlockStop(0), anthropictest.ToolStart(1, "toolu_1", "write_file"), anthropictest.InputDelta(1, `{"path":"a.txt","content":"`)},
		Repeat: anthropictest.InputDelta(1, piece16K), // forever
	})
	s := startServer(t, serverOpts{dbURL: storetest.URL(t), extra: []string{"--model", "anthropic/m", "--max-turn-bytes", "32768"},
		env: []string{"ANTHROPIC_BASE_URL=" + fake.URL(), "ANTHROPIC_API_KEY=sk-ant-e2e"}})
	c := dial(t, s, s.mintToken("t08b", "chat"))
	c.hello()
	sid, _ := createSession(t, c)

	r := runBounded(t, c, sid, "Write a big file.")
	assertCut(t, s, fake.Written(), r, "Writing it.", "--max-turn-bytes", "32768 bytes")
}

// assertCut checks a run cut at a limit after the text kept: the server's peak RSS under
// streamRSSBound, the endpoint's stream closed (written bytes), run:end ok:false with an error
// holding each of errParts, the transcript [user-prompt, markdown kept, error] (no tool call of
// the cut turn), the session's status "error".
func assertCut(t *testing.T, s *serverProc, written int64, r boundedRun, kept string, errParts ...string) {
	t.Helper()
	peak := vmHWM(t, s.cmd.Process.Pid)
	t.Logf("VmHWM %d MiB; the endpoint wrote %d KiB", peak>>20, written>>10)
	assert.Less(t, peak, int64(streamRSSBound), "peak RSS")
	assert.Less(t, written, int64(16<<20), "the stream was closed")
	assert.False(t, r.endOK)
	for _, p := range errParts {
		assert.Contains(t, r.endErr, p)
	}
	var kinds []string
	for _, e := range r.stored {
		kinds = append(kinds, e.Kind)
	}
	require.Equal(t, []string{"user-prompt", "markdown", "error"}, kinds)
	assert.Equal(t, kept, r.stored[1].Text)
	assert.Equal(t, "error", r.status)
}

// TestFieldCase_T08_DataLinesNeverFormAnEvent: an OpenAI-compatible endpoint sends "data:" lines
// that never end an event (no blank line), which the SDK's decoder would gather without end and
// no event reports. The turn's bound on the raw response (4 × --max-turn-bytes here: 256 KiB)
// closes the stream; the run ends with an error naming the limit.
func TestFieldCase_T08_DataLinesNeverFormAnEvent(t *testing.T) {
	f := openaitest.New(t)
	f.Enqueue(openaitest.Response{Events: []string{openaitest.Text("Start.")}, Repeat: "data: " + piece16K + "\n", RawRepeat: true, Delay: time.Millisecond})
	data := t.TempDir()
	cfg := fmt.Sprintf(`{"providers":[{"name":"fake","kind":"openai","baseUrl":%q,"models":[{"name":"m","contextWindow":128000}]}]}`, f.BaseURL())
	require.NoError(t, os.WriteFile(filepath.Join(data, "config.json"), []byte(cfg), 0o600))
	s := startServer(t, serverOpts{dbURL: storetest.URL(t), dataDir: data, extra: []string{"--model", "fake/m", "--max-turn-bytes", "65536", "--max-output-tokens", "256"}})
	c := dial(t, s, s.mintToken("t08c", "chat"))
	c.hello()
	sid, _ := createSession(t, c)

	r := runBounded(t, c, sid, "Say something.")
	assertCut(t, s, f.Written(), r, "Start.", "262144 bytes on the wire", "--max-turn-bytes")
}

// TestFieldCase_T08_TranscriptRefusedThroughTheServer: the real server with a Postgres that
// refuses a run's transcript (a constraint refuses its run-summary row): run:end is ok:false
// saying the transcript is not kept, never ok:true; sessions.loadEvents answers (not "busy"),
// sessions.get says "error", not "running"; once Postgres takes rows again the next prompt's run
// is stored.
func TestFieldCase_T08_TranscriptRefusedThroughTheServer(t *testing.T) {
	db := storetest.URL(t)
	s := startServer(t, serverOpts{dbURL: db})
	c := dial(t, s, s.mintToken("t08d", "chat"))
	c.hello()
	sid, _ := createSession(t, c)
	ctx := context.Background()
	pg, err := pgx.Connect(ctx, db)
	require.NoError(t, err)
	defer pg.Close(ctx)
	_, err = pg.Exec(ctx, `ALTER TABLE events ADD CONSTRAINT t08_refuse CHECK (kind <> 'run-summary') NOT VALID`)
	require.NoError(t, err)

	r := runBounded(t, c, sid, "Say hello.")
	assert.False(t, r.endOK, "run:end ok:true for a transcript that is not stored")
	assert.Contains(t, r.endErr, "transcript could not be stored")
	assert.Equal(t, r.endErr, r.errEvent)
	assert.Equal(t, "error", r.status)
	require.NotEmpty(t, r.stored)
	assert.Equal(t, "user-prompt", r.stored[0].Kind, "the prompt was stored at the run's start")

	_, err = pg.Exec(ctx, `ALTER TABLE events DROP CONSTRAINT t08_refuse`)
	require.NoError(t, err)
	r = runBounded(t, c, sid, "Again.")
	assert.True(t, r.endOK, "%s", r.endErr)
	assert.Equal(t, "run-summary", r.stored[len(r.stored)-1].Kind)
	assert.Equal(t, "idle", r.status)
}
