package server

import (
	"os"
	"testing"

	"github.com/zidane-server/zidane/server/store/storetest"
)

// TestMain runs the package's tests against the Postgres of DATABASE_URL, or a managed local
// Postgres that storetest.Shutdown stops at the end; it removes the trees tests share.
func TestMain(m *testing.M) {
	code := m.Run()
	removeSharedTrees()
	storetest.Shutdown()
	os.Exit(code)
}
