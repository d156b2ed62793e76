package server

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zidane-server/zidane/protocol"
)

// TestResponseTooLarge: an answer over the message limit is -32012, and the client can ask again
// for a smaller page (seed "Paging").
func TestResponseTooLarge(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.Limits.MaxMessageBytes = 8 << 10 })
	c := e.dial()
	c.hello()
	sid := c.newSession()
	big := strings.Repeat("x", 3000)
	for i := 0; i < 3; i++ {
		c.result("chat.send", fmt.Sprintf(`{"sessionId":%q,"prompt":%q}`, sid, big))
		c.runSignals(sid)
	}
	m := c.call("sessions.loadEvents", fmt.Sprintf(`{"sessionId":%q}`, sid))
	require.Equal(t, -32012, errCode(m), "answer: %v", m)
	msg := m["error"].(map[string]any)["message"].(string)
	assert.Contains(t, msg, "over the 8192-byte message limit; ask for less (a smaller limit)")
	page := c.result("sessions.loadEvents", fmt.Sprintf(`{"sessionId":%q,"limit":1}`, sid))
	require.NotEmpty(t, page["events"])
}

// TestOversizedEventIsReplaced: a prompt that fits one request but whose events would not fit one
// message is carried by an error event saying so; no frame the server sends exceeds the limit
// (adversarial review: large signals disconnected other clients).
func TestOversizedEventIsReplaced(t *testing.T) {
	const limit = 8 << 10
	e := newEnv(t, func(c *Config) { c.Limits.MaxMessageBytes = limit })
	c := e.dial()
	other := e.dial()
	c.hello()
	other.hello()
	sid := c.newSession()
	req := fmt.Sprintf(`{"sessionId":%q,"prompt":%q}`, sid, strings.Repeat("<", limit-200))
	c.result("chat.send", req)
	sigs := c.runSignals(sid)
	var leftOut int
	for _, s := range sigs {
		if s.kind == "event" && strings.Contains(string(s.raw), "was left out") {
			leftOut++
		}
	}
	assert.GreaterOrEqual(t, leftOut, 2, "the user-prompt and the tool call are replaced")
	for _, s := range sigs {
		assert.LessOrEqual(t, len(s.raw)+len(`{"jsonrpc":"2.0","method":"ipc.signal","params":}`), limit)
	}
	other.result("$/ping", `{}`) // the other client was not disturbed
	page := c.result("sessions.loadEvents", fmt.Sprintf(`{"sessionId":%q}`, sid))
	require.NotEmpty(t, page["events"])
}

// TestBatchAnswerStaysWithinLimit (a break-it report): a batch of many invalid members, `[1,1,…]`,
// used to be answered past the message limit (2 MB of 1s: a 155 MB answer and 700 MB of memory),
// because the -32012 answers that replace members past the limit were themselves kept and sent.
// Now no batch answer exceeds MaxMessageBytes, a batch of more than protocol.MaxBatch members is
// refused whole with one -32600 before anything of it runs, and other clients are not disturbed.
func TestBatchAnswerStaysWithinLimit(t *testing.T) {
	const limit = 8 << 10
	e := newEnv(t, func(c *Config) { c.Limits.MaxMessageBytes = limit })
	c := e.dial()
	other := e.dial()
	c.hello()
	other.hello()

	// 1000 members: within MaxBatch, but their answers (~130 bytes each) need far more than 8 KiB.
	c.send("[" + strings.TrimSuffix(strings.Repeat("1,", 1000), ",") + "]")
	f := c.next()
	require.LessOrEqual(t, len(f), limit, "the batch's answer fits one message")
	if f[0] == '[' {
		a := decodeArr(t, f)
		requireError(t, a[0], -32600, "null")
		requireError(t, a[len(a)-1], -32012, "null")
	} else {
		requireError(t, decodeObj(t, f), -32012, "null")
	}

	// More than MaxBatch members: one error object, nothing of it runs.
	e2 := newEnvOn(t, e) // the default message limit: the frame is over 8 KiB
	c2 := e2.dial()
	c2.hello()
	c2.send("[" + strings.TrimSuffix(strings.Repeat(`{"jsonrpc":"2.0","id":1,"method":"$/ping"},`, protocol.MaxBatch+1), ",") + "]")
	m := decodeObj(t, c2.next())
	requireError(t, m, -32600, "null")
	assert.Contains(t, m["error"].(map[string]any)["message"], fmt.Sprintf("at most %d requests", protocol.MaxBatch))

	other.result("$/ping", `{}`)
	c.result("$/ping", `{}`)
}
