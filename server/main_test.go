package server

import (
	"testing"

	"github.com/zidane-server/zidane/server/store/storetest"
)

// TestMain runs the package's tests against the Postgres of DATABASE_URL, or a managed local
// Postgres that storetest.Main stops at the end.
func TestMain(m *testing.M) { storetest.Main(m) }
