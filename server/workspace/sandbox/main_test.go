package sandbox

import (
	"os"
	"testing"
)

// TestMain installs the launcher hook: sandboxed commands re-execute this test binary.
func TestMain(m *testing.M) {
	Main()
	os.Exit(m.Run())
}
