package e2e

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zidane-server/zidane/server/store/storetest"
)

// TestCancel: chat.cancel stops a running prompt (one run:end, interrupted, nothing after it),
// drops a queued follow-up by runId, and a stray cancel is a no-op (field case B21).
func TestCancel(t *testing.T) {
	s := startServer(t, serverOpts{dbURL: storetest.URL(t), extra: []string{"--scripted-step-delay", "200ms"}})
	c := dial(t, s, s.mintToken("cancel", "chat"))
	c.hello()
	sid, _ := createSession(t, c)
	first := sendPrompt(t, c, sid, "Long one.")
	queued := sendPrompt(t, c, sid, "Queued one.")
	third := sendPrompt(t, c, sid, "Third one.")

	var res struct{ Cancelled bool }
	c.result("chat.cancel", map[string]any{"sessionId": sid, "runId": queued}, &res)
	assert.True(t, res.Cancelled)
	c.result("chat.cancel", map[string]any{"sessionId": sid}, &res)
	assert.True(t, res.Cancelled)

	ends := map[string]signal{}
	deadline := time.Now().Add(20 * time.Second)
	for len(ends) < 3 && time.Now().Before(deadline) {
		f := c.next(time.Until(deadline))
		if f.Method != "ipc.signal" {
			continue
		}
		var sg signal
		require.NoError(t, json.Unmarshal(f.Params, &sg))
		if sg.Kind == "run:end" {
			_, dup := ends[sg.RunID]
			require.False(t, dup, "one run:end per run")
			ends[sg.RunID] = sg
		}
	}
	require.Len(t, ends, 3)
	assert.False(t, *ends[first].OK)
	assert.False(t, *ends[queued].OK)
	assert.True(t, *ends[third].OK, "the next follow-up still runs")

	c.result("chat.cancel", map[string]any{"sessionId": sid}, &res)
	assert.False(t, res.Cancelled, "a stray cancel is a no-op")
	c.result("chat.cancel", map[string]any{"sessionId": sid, "runId": third}, &res)
	assert.False(t, res.Cancelled, "a run that ended is not cancelled")
	e := c.callErr("chat.cancel", map[string]any{"sessionId": sid, "runId": ""})
	assert.Equal(t, -32602, e.Code)
	c.result("chat.cancel", map[string]any{"sessionId": sid, "runId": "no-such-run"}, &res)
	assert.False(t, res.Cancelled)

	var page struct {
		Events []struct {
			Kind, Text, Message string
			Stopped             *bool
		} `json:"events"`
	}
	c.result("sessions.loadEvents", map[string]any{"sessionId": sid}, &page)
	var kinds []string
	for _, e := range page.Events {
		kinds = append(kinds, e.Kind)
	}
	// The dropped follow-up is recorded after the cancelled run, never inside it.
	require.GreaterOrEqual(t, len(kinds), 5)
	assert.Equal(t, "user-prompt", kinds[0])
	assert.Equal(t, "Long one.", page.Events[0].Text)
	firstEnd := 0
	for i, k := range kinds {
		if k == "error" {
			firstEnd = i
			break
		}
	}
	for _, k := range kinds[1:firstEnd] {
		assert.NotEqual(t, "user-prompt", k, "another prompt inside the first run: %v", kinds)
	}
	var msgs []string
	for _, e := range page.Events {
		if e.Kind == "error" {
			msgs = append(msgs, e.Message)
			assert.Equal(t, ptr(true), e.Stopped, "a client's stop is marked stopped (not a failure): %s", e.Message)
		}
	}
	assert.ElementsMatch(t, []string{"The run was cancelled.", "The queued prompt was cancelled."}, msgs)
}
