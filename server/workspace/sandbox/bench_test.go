package sandbox

import (
	"os/exec"
	"syscall"
	"testing"
)

// BenchmarkSandboxedTrue is the cost of one sandboxed command: /bin/true under workspace-write,
// launcher and view included (docs/security.md reports the figure).
func BenchmarkSandboxedTrue(b *testing.B) {
	f := newBenchFixture(b)
	for b.Loop() {
		cmd := exec.Command("/bin/true")
		cmd.Dir = f.ws
		cmd.Env = []string{"PATH=/usr/local/go/bin:/usr/local/bin:/usr/bin:/bin"}
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := f.sb.Wrap(cmd, Request{Policy: WorkspaceWrite, Roots: []string{f.ws}, SessionID: "bench"}); err != nil {
			b.Fatal(err)
		}
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("%v: %s", err, out)
		}
	}
}

func newBenchFixture(b *testing.B) *fixture {
	f := &fixture{ws: b.TempDir(), data: b.TempDir()}
	sb, err := New(Options{ScratchBase: f.data + "/sandbox", Hide: []string{f.data}})
	if err != nil {
		b.Fatal(err)
	}
	f.sb = sb
	if sup := sb.Support(false); len(sup.Policies) < 3 {
		b.Skipf("this kernel cannot sandbox: %v", sup.Notes)
	}
	return f
}
