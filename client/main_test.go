package client

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a goroutine outlives the tests: every client that was closed
// (or stopped) must have ended its connection loop, readers, pingers, syncers and delivery.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
