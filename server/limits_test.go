package server

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
