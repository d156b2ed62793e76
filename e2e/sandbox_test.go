package e2e

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/zidane-server/zidane/protocol"
	"github.com/zidane-server/zidane/server/store/storetest"
)

// TestSandboxFlagsReachTheServer: the binary's sandbox flags are in force: host.info reports the
// default policy and off allowed, and a feature forced unsupported leaves its policies out.
func TestSandboxFlagsReachTheServer(t *testing.T) {
	s := startServer(t, serverOpts{dbURL: storetest.URL(t), extra: []string{"--sandbox", "read-only", "--sandbox-allow-off",
		"--sandbox-unsupported", "netns", "--sandbox-processes", "77"}})
	c := dial(t, s, s.mintToken("sb-chat", "chat"))
	c.hello()
	var info protocol.HostInfo
	c.result("host.info", map[string]any{}, &info)
	assert.Equal(t, protocol.SandboxPolicyReadOnly, info.Sandbox.DefaultPolicy)
	assert.True(t, info.Sandbox.AllowOff)
	assert.EqualValues(t, 77, info.Sandbox.Limits.Processes)
	assert.NotContains(t, info.Sandbox.Policies, protocol.SandboxPolicyWorkspaceWrite)
	assert.NotContains(t, info.Sandbox.Policies, protocol.SandboxPolicyReadOnly)
	assert.Contains(t, info.Sandbox.Policies, protocol.SandboxPolicyOff)
}
