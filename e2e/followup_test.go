package e2e

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zidane-server/zidane/server/store/storetest"
)

// TestFollowUpPromptsQueue: a prompt sent during a run is queued as a follow-up and runs after
// it, in order, with its own runId, and $seq stays gap-free across both runs.
func TestFollowUpPromptsQueue(t *testing.T) {
	s := startServer(t, serverOpts{dbURL: storetest.URL(t)})
	c := dial(t, s, s.mintToken("follow", "chat"))
	c.hello()
	sid, _ := createSession(t, c)
	first := sendPrompt(t, c, sid, "First prompt.")
	second := sendPrompt(t, c, sid, "Second prompt.")
	require.NotEqual(t, first, second)
	a := c.collectRun(first)
	b := c.collectRun(second)

	starts := func(sigs []signal) []string {
		var out []string
		for _, s := range sigs {
			if s.Kind == "run:start" {
				out = append(out, s.RunID)
			}
		}
		return out
	}
	assert.Equal(t, []string{first}, starts(a), "the follow-up does not start before the first run ends")
	assert.Equal(t, []string{second}, starts(b))
	var prompt struct {
		Kind, Text string
	}
	for _, s := range b {
		if s.Kind == "event" {
			require.NoError(t, json.Unmarshal(s.Event, &prompt))
			if prompt.Kind == "user-prompt" {
				break
			}
		}
	}
	assert.Equal(t, "Second prompt.", prompt.Text)
	var last int64
	for _, s := range append(a, b...) {
		if s.Seq == nil {
			continue
		}
		assert.Equal(t, last+1, *s.Seq)
		last = *s.Seq
	}
}
