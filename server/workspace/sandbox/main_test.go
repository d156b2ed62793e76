package sandbox

import (
	"fmt"
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// nonRootEnv, set by TestSandboxRunsForANonRootUser in the copy of this test binary it runs as
// another user, makes the copy behave as the server does (non-dumpable) and fail, not skip,
// where the sandbox cannot run.
const nonRootEnv = "ZIDANE_SANDBOX_TEST_AS_SERVER"

// TestMain installs the launcher hook: sandboxed commands re-execute this test binary.
func TestMain(m *testing.M) {
	Main()
	if os.Getenv(nonRootEnv) != "" {
		if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
			fmt.Fprintln(os.Stderr, "non-dumpable:", err)
			os.Exit(1)
		}
	}
	os.Exit(m.Run())
}
