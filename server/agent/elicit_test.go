package agent

import (
	"context"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zidane-server/zidane/protocol"
	"github.com/zidane-server/zidane/server/agent/provider"
)

// TestElicitExpiryCancelAndSubagent: an elicitation nobody answers expires and answers the MCP
// server cancel (resolution expired); one whose run ends is withdrawn, also cancel; a
// subagent's reaches its parent session too (childSessionId), answerable there; outside a tool
// call there is nobody to ask.
func TestElicitExpiryCancelAndSubagent(t *testing.T) {
	f := newHostFixture(t)
	f.gate = NewGate(f.st, f.rec, 150*time.Millisecond)
	f.host.Gate = f.gate
	form := &sdk.ElicitParams{Message: "Name?", RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"name": map[string]any{"type": "string"}}}}
	tc := HostCall{Session: f.sess, RunID: "run-1", Call: provider.ToolCall{ID: "call-1"}}

	_, err := f.host.Elicit(context.Background(), "srv", form)
	assert.ErrorContains(t, err, "only during a call")

	res, err := f.host.Elicit(f.host.withHostCall(context.Background(), tc), "srv", form)
	require.NoError(t, err)
	assert.Equal(t, "cancel", res.Action)
	assert.Equal(t, protocol.InteractionResolutionExpired, waitFor[*protocol.InteractionResolvedSignal](t, f.rec).Resolution)

	f.gate = NewGate(f.st, f.rec, time.Minute)
	f.host.Gate = f.gate
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan *sdk.ElicitResult, 1)
	go func() { r, _ := f.host.Elicit(f.host.withHostCall(ctx, tc), "srv", form); done <- r }()
	require.Eventually(t, func() bool { return len(f.gate.PendingQuestions(f.sess.ID)) == 1 }, 5*time.Second, 5*time.Millisecond)
	cancel()
	assert.Equal(t, "cancel", (<-done).Action)

	child := tc
	child.Session.ParentSessionID, child.Session.ParentRunID = "parent-session", "parent-run"
	go func() {
		r, _ := f.host.Elicit(f.host.withHostCall(context.Background(), child), "srv", form)
		done <- r
	}()
	var q []protocol.InteractionRequest
	require.Eventually(t, func() bool { q = f.gate.PendingQuestions("parent-session"); return len(q) == 1 }, 5*time.Second, 5*time.Millisecond)
	require.NotNil(t, q[0].ParentSessionID)
	accept := protocol.ElicitationActionAccept
	require.NoError(t, f.gate.AnswerQuestion("parent-session", q[0].RequestID, &protocol.InteractionAnswer{Action: &accept, Values: []byte(`{"name":"Ada"}`)}, "tester"))
	r := <-done
	assert.Equal(t, "accept", r.Action)
	assert.Equal(t, map[string]any{"name": "Ada"}, r.Content)
}
