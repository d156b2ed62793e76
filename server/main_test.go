package server

import (
	"github.com/zidane-server/zidane/server/agent/mcp/mcptest"
	"os"
	"testing"

	"github.com/zidane-server/zidane/server/store/storetest"
	"github.com/zidane-server/zidane/server/workspace/sandbox"
)

// TestMain runs the package's tests against the Postgres of DATABASE_URL, or a managed local
// Postgres that storetest.Shutdown stops at the end; it removes the trees tests share. Sandboxed
// commands re-execute this test binary as their launcher: sandbox.Main runs it and exits before
// any test starts.
func TestMain(m *testing.M) {
	sandbox.Main()
	mcptest.ServeIfAsked()
	code := m.Run()
	removeSharedTrees()
	storetest.Shutdown()
	os.Exit(code)
}
