package e2e

import (
	"encoding/json"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zidane-server/zidane/server/store/storetest"
)

// TestSIGTERMDuringRun: SIGTERM in the middle of a run ends it as interrupted (run:end reaches the
// client before the 1001 close), the process exits 0, and after a restart the transcript holds
// the prompt, the streamed text so far (merged) and the interruption.
func TestSIGTERMDuringRun(t *testing.T) {
	db := storetest.URL(t)
	data, root := t.TempDir(), t.TempDir()
	opts := serverOpts{dbURL: db, dataDir: data, root: root, extra: []string{"--scripted-step-delay", "300ms"}}
	s := startServer(t, opts)
	c := dial(t, s, s.mintToken("term", "chat"))
	c.hello()
	sid, _ := createSession(t, c)
	runID := sendPrompt(t, c, sid, "Take your time.")

	// Wait for the first streamed piece, then stop the server.
	for {
		f := c.next(10 * time.Second)
		var sg signal
		require.NoError(t, json.Unmarshal(f.Params, &sg))
		if sg.Kind == "event" && len(sg.Event) > 0 {
			var ev struct{ Kind string }
			json.Unmarshal(sg.Event, &ev)
			if ev.Kind == "markdown" {
				break
			}
		}
	}
	require.NoError(t, s.cmd.Process.Signal(syscall.SIGTERM))
	var end struct {
		Kind        string `json:"kind"`
		RunID       string `json:"runId"`
		OK          bool   `json:"ok"`
		Interrupted bool   `json:"interrupted"`
		Error       string `json:"error"`
	}
	for end.Kind != "run:end" {
		b, ok := <-c.frames
		if !ok { // c.readErr is written before frames closes: read it only then
			t.Fatalf("the connection closed before run:end arrived: %v", c.readErr)
		}
		var f frame
		require.NoError(t, json.Unmarshal(b, &f))
		if f.Method == "ipc.signal" {
			require.NoError(t, json.Unmarshal(f.Params, &end))
		}
	}
	assert.Equal(t, runID, end.RunID)
	assert.False(t, end.OK)
	assert.True(t, end.Interrupted)
	for range c.frames {
	}
	assert.Equal(t, websocket.StatusGoingAway, websocket.CloseStatus(c.readErr))
	select {
	case <-s.done:
	case <-time.After(20 * time.Second):
		t.Fatal("the server did not exit within 20 s of SIGTERM")
	}
	s.stopped = true
	require.NoError(t, s.waitErr, "exit status")

	s2 := startServer(t, opts)
	c2 := dial(t, s2, s2.mintToken("term2", "chat"))
	c2.hello()
	var page struct {
		Events []struct {
			Kind      string `json:"kind"`
			Text      string `json:"text"`
			Message   string `json:"message"`
			Streaming *bool  `json:"streaming"`
		} `json:"events"`
	}
	c2.result("sessions.loadEvents", map[string]any{"sessionId": sid}, &page)
	var kinds []string
	for _, e := range page.Events {
		kinds = append(kinds, e.Kind)
	}
	require.Equal(t, []string{"user-prompt", "markdown", "error"}, kinds)
	assert.Equal(t, "Take your time.", page.Events[0].Text)
	assert.NotEmpty(t, page.Events[1].Text)
	assert.False(t, *page.Events[1].Streaming)
	assert.Contains(t, page.Events[2].Message, "interrupted")
	var sess struct{ Status string }
	c2.result("sessions.get", map[string]any{"sessionId": sid}, &sess)
	assert.Equal(t, "interrupted", sess.Status, "the run was interrupted by the shutdown")
}
