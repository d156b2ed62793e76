package agent

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zidane-server/zidane/protocol"
	"github.com/zidane-server/zidane/server/agent/mcp/mcptest"
	"github.com/zidane-server/zidane/server/agent/provider"
	"github.com/zidane-server/zidane/server/store"
	"github.com/zidane-server/zidane/server/store/storetest"
	"github.com/zidane-server/zidane/server/workspace"
	"github.com/zidane-server/zidane/server/workspace/workspacetest"
)

func TestMain(m *testing.M) { mcptest.ServeIfAsked(); storetest.Main(m) }

// recorder is a Reporter that keeps every signal, for the tests to wait on.
type recorder struct {
	mu      sync.Mutex
	signals []protocol.Signal
	changed int
	wake    chan struct{}
}

func newRecorder() *recorder { return &recorder{wake: make(chan struct{}, 1)} }

func (r *recorder) Publish(sig protocol.Signal, _ Origin) (store.SignalMark, error) {
	r.mu.Lock()
	r.signals = append(r.signals, sig)
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
	return store.SignalMark{}, nil
}

func (r *recorder) RunningChanged() {
	r.mu.Lock()
	r.changed++
	r.mu.Unlock()
}

func (r *recorder) SessionChanged(store.Session) {}

// waitFor returns the first signal (after skip of them) of type T, waiting up to 5 s.
func waitFor[T protocol.Signal](t *testing.T, r *recorder) T {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		r.mu.Lock()
		for _, s := range r.signals {
			if x, ok := s.(T); ok {
				r.mu.Unlock()
				return x
			}
		}
		r.mu.Unlock()
		select {
		case <-r.wake:
		case <-time.After(20 * time.Millisecond):
		case <-deadline:
			var zero T
			t.Fatalf("no %T signal", zero)
			return zero
		}
	}
}

func count[T protocol.Signal](r *recorder) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, s := range r.signals {
		if _, ok := s.(T); ok {
			n++
		}
	}
	return n
}

// hostFixture is the cases' layout ($T/ws the root, $T/out outside with victim.txt) with a real
// store, a session in ws, a Gate and a ToolHost.
type hostFixture struct {
	*workspacetest.Layout
	T, ws, out string
	st         *store.Store
	rec        *recorder
	gate       *Gate
	host       *ToolHost
	sess       store.Session
}

func newHostFixture(t *testing.T) *hostFixture {
	t.Helper()
	L := workspacetest.New(t)
	f := &hostFixture{Layout: L, T: L.T, ws: L.WS, out: L.Out, st: storetest.New(t), rec: newRecorder()}
	ws, err := workspace.New([]string{f.ws})
	require.NoError(t, err)
	t.Cleanup(func() { ws.Close() })
	f.gate = NewGate(f.st, f.rec, 0)
	f.host = &ToolHost{WS: ws, Gate: f.gate, Store: f.st, Reporter: f.rec}
	f.sess, err = f.st.CreateSession(context.Background(), store.Session{Title: "t", ProjectRoot: f.ws, Cwd: f.ws, AgentID: "build", Status: "idle"})
	require.NoError(t, err)
	return f
}

func (f *hostFixture) call(name, args string) HostCall {
	return HostCall{Session: f.sess, RunID: "run-1", TurnID: "turn-1", Call: provider.ToolCall{ID: "call-" + name, Name: name, Arguments: json.RawMessage(args)}}
}

// runAsync runs a call in the background; the result arrives on the channel.
func (f *hostFixture) runAsync(ctx context.Context, tc HostCall) <-chan HostResult {
	ch := make(chan HostResult, 1)
	go func() { ch <- f.host.Do(ctx, tc) }()
	return ch
}

func (f *hostFixture) run(t *testing.T, name, args string) HostResult {
	t.Helper()
	select {
	case m := <-f.runAsync(context.Background(), f.call(name, args)):
		return m
	case <-time.After(5 * time.Second):
		t.Fatalf("%s %s did not finish (waiting for an approval?)", name, args)
		return HostResult{}
	}
}

// pendingOne waits for exactly one pending approval and returns it.
func (f *hostFixture) pendingOne(t *testing.T) protocol.ApprovalRequest {
	t.Helper()
	var reqs []protocol.ApprovalRequest
	require.Eventually(t, func() bool { reqs = f.gate.PendingApprovals(f.sess.ID); return len(reqs) == 1 }, 5*time.Second, 5*time.Millisecond)
	return reqs[0]
}

func (f *hostFixture) answer(t *testing.T, req protocol.ApprovalRequest, d protocol.ApprovalDecision) AnswerResult {
	t.Helper()
	r, err := f.gate.Answer(context.Background(), f.sess.ID, req.RequestID, d, "tester")
	require.NoError(t, err)
	return r
}

func (f *hostFixture) setMode(t *testing.T, mode string) {
	t.Helper()
	require.NoError(t, f.st.SetApprovalMode(context.Background(), f.sess.ID, mode, "tester"))
}

func (f *hostFixture) safelist(t *testing.T, tool, prefix string) {
	t.Helper()
	_, err := f.st.AddSafelist(context.Background(), store.SafelistEntry{ProjectRoot: f.ws, Tool: tool, Prefix: prefix, CreatedBy: "tester"}, f.sess.ID)
	require.NoError(t, err)
}

func TestApprovalAllowAlwaysDeny(t *testing.T) {
	f := newHostFixture(t)
	ch := f.runAsync(context.Background(), f.call("write_file", `{"path":"a.txt","content":"hi\n"}`))
	req := f.pendingOne(t)
	assert.Equal(t, "write_file", req.Tool)
	assert.Equal(t, "write_file a.txt (1 lines)", req.Summary)
	assert.Equal(t, f.ws, req.Cwd)
	require.NotNil(t, req.Diff)
	assert.Contains(t, *req.Diff, "+hi\n")
	require.NotNil(t, req.AlwaysStores)
	assert.Equal(t, "write_file", *req.AlwaysStores)
	assert.False(t, f.Exists("a.txt"), "nothing runs before the answer")
	assert.True(t, f.gate.Waiting()[f.sess.ID], "attention while waiting")
	f.answer(t, req, protocol.ApprovalDecisionAllow)
	m := <-ch
	assert.False(t, m.IsError, m.Text)
	assert.True(t, f.Exists("a.txt"))
	assert.False(t, f.gate.Waiting()[f.sess.ID])
	res := waitFor[*protocol.ApprovalResolvedSignal](t, f.rec)
	assert.Equal(t, protocol.ApprovalResolutionAllow, res.Resolution)
	assert.Equal(t, "tester", *res.By)
	// The result carries the diff (for the tool-result event).
	assert.Contains(t, m.Diff, "+++ b/a.txt")

	// allow stored nothing: the next write asks again; deny → the tool result says so.
	ch = f.runAsync(context.Background(), f.call("write_file", `{"path":"b.txt","content":"x"}`))
	req = f.pendingOne(t)
	f.answer(t, req, protocol.ApprovalDecisionDeny)
	m = <-ch
	assert.True(t, m.IsError)
	assert.Contains(t, m.Text, "denied")
	assert.False(t, f.Exists("b.txt"))

	// always stores write_file for the project root: the next write runs without asking.
	ch = f.runAsync(context.Background(), f.call("write_file", `{"path":"c.txt","content":"x"}`))
	req = f.pendingOne(t)
	r := f.answer(t, req, protocol.ApprovalDecisionAlways)
	require.NotNil(t, r.Stored)
	assert.Equal(t, "write_file", r.Stored.Tool)
	<-ch
	m = f.run(t, "write_file", `{"path":"d.txt","content":"x"}`)
	assert.False(t, m.IsError, m.Text)

	// A late answer is refused.
	_, err := f.gate.Answer(context.Background(), f.sess.ID, req.RequestID, protocol.ApprovalDecisionAllow, "tester")
	var rf *Refusal
	require.ErrorAs(t, err, &rf)
	assert.Contains(t, rf.Message, "not pending")

	audit, err := f.st.ListAudit(context.Background(), 10, 0, f.sess.ID)
	require.NoError(t, err)
	var details []string
	for _, e := range audit {
		details = append(details, e.Action+" "+e.Actor+" "+e.Detail)
	}
	assert.Contains(t, details, "approval tester allow write_file a.txt (1 lines)")
	assert.Contains(t, details, "approval tester deny write_file b.txt (0 lines)")
	assert.Contains(t, details, "safelist.add tester write_file  in "+f.ws)
}

func TestApprovalExpiresAsDenial(t *testing.T) {
	f := newHostFixture(t)
	f.gate = NewGate(f.st, f.rec, 150*time.Millisecond)
	f.host.Gate = f.gate
	m := f.run(t, "exec", `{"command":"touch pwned"}`)
	assert.True(t, m.IsError)
	assert.Contains(t, m.Text, "expired")
	assert.False(t, f.Exists("pwned"))
	assert.Equal(t, protocol.ApprovalResolutionExpired, waitFor[*protocol.ApprovalResolvedSignal](t, f.rec).Resolution)
	assert.Empty(t, f.gate.PendingApprovals(""))
}

func TestQuestions(t *testing.T) {
	f := newHostFixture(t)
	ch := f.runAsync(context.Background(), f.call("ask_user", `{"prompt":"Which?","options":["a","b"]}`))
	var q []protocol.InteractionRequest
	require.Eventually(t, func() bool { q = f.gate.PendingQuestions(f.sess.ID); return len(q) == 1 }, 5*time.Second, 5*time.Millisecond)
	assert.Equal(t, []string{"a", "b"}, q[0].Options)
	assert.False(t, q[0].AllowText)
	err := f.gate.AnswerQuestion(f.sess.ID, q[0].RequestID, &protocol.InteractionAnswer{Choices: []string{"c"}}, "tester")
	assert.ErrorContains(t, err, "not one of the options")
	require.NoError(t, f.gate.AnswerQuestion(f.sess.ID, q[0].RequestID, &protocol.InteractionAnswer{Choices: []string{"b"}}, "tester"))
	m := <-ch
	assert.Equal(t, `The user chose "b".`, m.Text)

	ch = f.runAsync(context.Background(), f.call("ask_user", `{"prompt":"Name?"}`))
	require.Eventually(t, func() bool { q = f.gate.PendingQuestions(f.sess.ID); return len(q) == 1 }, 5*time.Second, 5*time.Millisecond)
	require.NoError(t, f.gate.AnswerQuestion(f.sess.ID, q[0].RequestID, nil, "tester"))
	m = <-ch
	assert.Contains(t, m.Text, "dismissed")
	assert.Error(t, f.gate.AnswerQuestion(f.sess.ID, q[0].RequestID, nil, "tester"), "a late answer is refused")
}

func TestPlans(t *testing.T) {
	f := newHostFixture(t)
	snap, err := f.host.PlanSnapshot(context.Background(), f.sess.ID)
	require.NoError(t, err)
	assert.Empty(t, snap.Plans)
	assert.Nil(t, snap.Active)
	m := f.run(t, "update_plan", `{"steps":[{"title":"read","status":"done"},{"title":"edit","status":"in_progress"}]}`)
	assert.Equal(t, "Plan updated: 2 steps, 1 done.", m.Text)
	sig := waitFor[*protocol.PlansSnapshotSignal](t, f.rec)
	require.Len(t, sig.Snapshot.Plans, 1)
	assert.Equal(t, protocol.PlanStepStatusInProgress, sig.Snapshot.Plans[0].Steps[1].Status)
	assert.Equal(t, sig.Snapshot.Plans[0].ID, *sig.Snapshot.Active)
	m = f.run(t, "update_plan", `{"steps":[{"title":"x","status":"bogus"}]}`)
	assert.True(t, m.IsError)
}

// TestRuntimeCase_R19_CheckAtUseAfterTheWait: the folder of a pending write, or the session's cwd of a
// pending exec, is swapped for a link to the outside while the approval waits: refused at use.
func TestRuntimeCase_R19_CheckAtUseAfterTheWait(t *testing.T) {
	f := newHostFixture(t)
	ch := f.runAsync(context.Background(), f.call("write_file", `{"path":"sub/a.txt","content":"x"}`))
	req := f.pendingOne(t)
	require.NoError(t, os.RemoveAll(filepath.Join(f.ws, "sub")))
	require.NoError(t, os.Symlink(f.out, filepath.Join(f.ws, "sub")))
	f.answer(t, req, protocol.ApprovalDecisionAllow)
	m := <-ch
	assert.True(t, m.IsError)
	assert.Contains(t, m.Text, "outside the workspace")
	assert.NoFileExists(t, filepath.Join(f.out, "a.txt"))
	f.OutsideUntouched(t)

	// Variant: the session's cwd is sub, swapped before an approved exec.
	require.NoError(t, os.Remove(filepath.Join(f.ws, "sub")))
	require.NoError(t, os.Mkdir(filepath.Join(f.ws, "sub"), 0o755))
	f.sess.Cwd = filepath.Join(f.ws, "sub")
	ch = f.runAsync(context.Background(), f.call("exec", `{"command":"pwd > here.txt"}`))
	req = f.pendingOne(t)
	require.NoError(t, os.RemoveAll(filepath.Join(f.ws, "sub")))
	require.NoError(t, os.Symlink(f.out, filepath.Join(f.ws, "sub")))
	f.answer(t, req, protocol.ApprovalDecisionAllow)
	m = <-ch
	assert.True(t, m.IsError)
	assert.Contains(t, m.Text, "outside the workspace")
	f.OutsideUntouched(t)

	// The diff shown is recomputed: a file changed while the edit waited is edited only if the span
	// still matches (here it does not: refused, file as it was changed).
	f.sess.Cwd = f.ws
	require.NoError(t, os.WriteFile(filepath.Join(f.ws, "e.txt"), []byte("old\n"), 0o644))
	ch = f.runAsync(context.Background(), f.call("edit_file", `{"path":"e.txt","old":"old","new":"new"}`))
	req = f.pendingOne(t)
	require.NoError(t, os.WriteFile(filepath.Join(f.ws, "e.txt"), []byte("changed\n"), 0o644))
	f.answer(t, req, protocol.ApprovalDecisionAllow)
	m = <-ch
	assert.True(t, m.IsError)
	b, _ := os.ReadFile(filepath.Join(f.ws, "e.txt"))
	assert.Equal(t, "changed\n", string(b))
}

// TestRuntimeCase_R20_ChainingAsks: with "git status" safelisted, a line that runs a second
// command asks (approval:request, canary absent), and always on it stores nothing.
func TestRuntimeCase_R20_ChainingAsks(t *testing.T) {
	f := newHostFixture(t)
	f.safelist(t, "exec", "git status")
	for _, line := range []string{
		"git status && touch pwned", "git status; touch pwned", "git status || touch pwned", "git status | sh",
		"git status & touch pwned", "git status\ntouch pwned", "touch pwned && git status", "cd sub && git status",
	} {
		b, _ := json.Marshal(map[string]string{"command": line})
		ch := f.runAsync(context.Background(), f.call("exec", string(b)))
		req := f.pendingOne(t)
		assert.False(t, f.Exists("pwned"), line)
		assert.Nil(t, req.AlwaysStores, "always on a compound line stores nothing: %q", line)
		r := f.answer(t, req, protocol.ApprovalDecisionAlways)
		assert.Nil(t, r.Stored, line)
		assert.Contains(t, r.Note, "Nothing was stored")
		<-ch
		_ = os.Remove(filepath.Join(f.ws, "pwned"))
	}
	es, err := f.st.ListSafelist(context.Background(), f.ws)
	require.NoError(t, err)
	assert.Len(t, es, 1, "only the original entry")
}

// TestRuntimeCase_R22_GitMetaAlwaysAsks: the five flag forms ask despite the entries, and in
// auto-edit an edit of .git/config still asks (here denied), so safelisted git status never runs
// the planted fsmonitor.
func TestRuntimeCase_R22_GitMetaAlwaysAsks(t *testing.T) {
	f := newHostFixture(t)
	f.safelist(t, "exec", "git diff")
	f.safelist(t, "exec", "git status")
	for _, line := range []string{
		"git diff --output=../out/victim.txt", "git diff --ext-diff", "git -c core.pager='touch pwned' -p diff",
		"git --git-dir=../out/repo.git status", "git -C ../out status",
	} {
		b, _ := json.Marshal(map[string]string{"command": line})
		ch := f.runAsync(context.Background(), f.call("exec", string(b)))
		req := f.pendingOne(t)
		f.answer(t, req, protocol.ApprovalDecisionDeny)
		<-ch
	}
	f.OutsideUntouched(t)

	require.NoError(t, os.MkdirAll(filepath.Join(f.ws, ".git"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(f.ws, ".git", "config"), []byte("[core]\n"), 0o644))
	f.setMode(t, store.ModeAutoEdit)
	m := f.run(t, "write_file", `{"path":"plain.txt","content":"x"}`)
	assert.False(t, m.IsError, "auto-edit: edits pass")
	ch := f.runAsync(context.Background(), f.call("edit_file", `{"path":".git/config","old":"[core]","new":"[core]\n\tfsmonitor = touch pwned; false"}`))
	req := f.pendingOne(t)
	require.NotNil(t, req.GitMeta)
	assert.True(t, *req.GitMeta)
	assert.Nil(t, req.AlwaysStores)
	f.answer(t, req, protocol.ApprovalDecisionDeny)
	<-ch
	b, _ := os.ReadFile(filepath.Join(f.ws, ".git", "config"))
	assert.Equal(t, "[core]\n", string(b))
	// A link to .git is resolved before the rule applies.
	require.NoError(t, os.Symlink(".git/config", filepath.Join(f.ws, "cfg")))
	ch = f.runAsync(context.Background(), f.call("write_file", `{"path":"cfg","content":"x"}`))
	f.answer(t, f.pendingOne(t), protocol.ApprovalDecisionDeny)
	<-ch
	assert.False(t, f.Exists("pwned"))
}

// TestRuntimeCase_R23_AlwaysStoresNoInterpreterRule: always on interpreters, wrappers, keywords,
// package managers and workspace programs stores nothing (safelist.list shows exactly what was
// stored); every follow-up asks; allow stores nothing.
func TestRuntimeCase_R23_AlwaysStoresNoInterpreterRule(t *testing.T) {
	f := newHostFixture(t)
	require.NoError(t, os.MkdirAll(filepath.Join(f.ws, "scripts"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(f.ws, "scripts", "build.sh"), []byte("#!/bin/sh\necho built\n"), 0o755))
	pairs := []struct{ approved, followUp string }{
		{`python3 -c "print(1)"`, `python3 -c "import os; os.system('touch pwned')"`},
		{`bash -c "ls"`, `bash -c "touch pwned"`},
		{`npm install left-pad`, `npm install some-other-pkg`},
		{`env FOO=1 make`, `env FOO=1 sh -c 'touch pwned'`},
		{`for f in *.go; do gofmt -l "$f"; done`, `for f in x; do touch pwned; done`},
		{`./scripts/build.sh --fast`, `./scripts/build.sh --fast`},
	}
	for _, p := range pairs {
		b, _ := json.Marshal(map[string]string{"command": p.approved})
		ch := f.runAsync(context.Background(), f.call("exec", string(b)))
		r := f.answer(t, f.pendingOne(t), protocol.ApprovalDecisionAlways)
		assert.Nil(t, r.Stored, p.approved)
		<-ch
		b, _ = json.Marshal(map[string]string{"command": p.followUp})
		ch = f.runAsync(context.Background(), f.call("exec", string(b)))
		f.answer(t, f.pendingOne(t), protocol.ApprovalDecisionDeny)
		<-ch
		assert.False(t, f.Exists("pwned"), p.followUp)
	}
	es, err := f.st.ListSafelist(context.Background(), "")
	require.NoError(t, err)
	assert.Empty(t, es, "nothing was stored")

	// allow (once) on git log, then git log -1 asks again.
	ch := f.runAsync(context.Background(), f.call("exec", `{"command":"git log"}`))
	f.answer(t, f.pendingOne(t), protocol.ApprovalDecisionAllow)
	<-ch
	ch = f.runAsync(context.Background(), f.call("exec", `{"command":"git log -1"}`))
	f.answer(t, f.pendingOne(t), protocol.ApprovalDecisionDeny)
	<-ch
	// always on git log stores "git log", and git log -1 then runs without asking.
	ch = f.runAsync(context.Background(), f.call("exec", `{"command":"git log"}`))
	r := f.answer(t, f.pendingOne(t), protocol.ApprovalDecisionAlways)
	require.NotNil(t, r.Stored)
	assert.Equal(t, "git log", *&r.Stored.Prefix)
	<-ch
	f.run(t, "exec", `{"command":"git log -1"}`)
	es, err = f.st.ListSafelist(context.Background(), f.ws)
	require.NoError(t, err)
	require.Len(t, es, 1)
	assert.Equal(t, "exec", es[0].Tool)
	assert.Equal(t, "git log", es[0].Prefix)
}

// TestRuntimeCase_R24_LockedModeOverridesTheSafelist: in locked (read-only) mode exec and edits are
// refused without asking, safelisted or not; an approval pending when the mode switches is refused
// at use; in auto-edit a redirecting exec still asks.
func TestRuntimeCase_R24_LockedModeOverridesTheSafelist(t *testing.T) {
	f := newHostFixture(t)
	require.NoError(t, os.WriteFile(filepath.Join(f.ws, "f.txt"), []byte("a\n"), 0o644))
	f.safelist(t, "exec", "git status")
	f.setMode(t, store.ModeLocked)
	for _, c := range []struct{ tool, args string }{
		{"exec", `{"command":"echo x > a.txt"}`},
		{"exec", `{"command":"sed -i s/a/b/ f.txt"}`},
		{"exec", `{"command":"cat > AGENTS.md << 'EOF'\nhi\nEOF"}`},
		{"exec", `{"command":"git status"}`},
		{"write_file", `{"path":"a.txt","content":"x"}`},
		{"edit_file", `{"path":"f.txt","old":"a","new":"b"}`},
	} {
		m := f.run(t, c.tool, c.args)
		assert.True(t, m.IsError, c.args)
		assert.Contains(t, m.Text, "locked", c.args)
	}
	assert.Equal(t, 0, count[*protocol.ApprovalRequestSignal](f.rec), "nobody was asked")
	assert.False(t, f.Exists("a.txt"))
	assert.False(t, f.Exists("AGENTS.md"))
	b, _ := os.ReadFile(filepath.Join(f.ws, "f.txt"))
	assert.Equal(t, "a\n", string(b))
	m := f.run(t, "read_file", `{"path":"f.txt"}`)
	assert.False(t, m.IsError, "reads still work")

	f.setMode(t, store.ModeAsk)
	ch := f.runAsync(context.Background(), f.call("exec", `{"command":"touch pwned"}`))
	req := f.pendingOne(t)
	f.setMode(t, store.ModeLocked)
	f.answer(t, req, protocol.ApprovalDecisionAllow)
	m = <-ch
	assert.True(t, m.IsError)
	assert.Contains(t, m.Text, "locked")
	assert.False(t, f.Exists("pwned"))

	f.setMode(t, store.ModeAutoEdit)
	ch = f.runAsync(context.Background(), f.call("exec", `{"command":"echo x > a.txt"}`))
	f.answer(t, f.pendingOne(t), protocol.ApprovalDecisionDeny)
	<-ch
	assert.False(t, f.Exists("a.txt"))
}

// TestCancelWithdrawsPendingApproval: the part of R29 the tool host owns: a cancel withdraws the
// request (approval:resolved withdrawn), the result says withdrawn (not denied), a late answer is
// refused and the command never runs.
func TestCancelWithdrawsPendingApproval(t *testing.T) {
	f := newHostFixture(t)
	ctx, cancel := context.WithCancel(context.Background())
	ch := f.runAsync(ctx, f.call("exec", `{"command":"touch after-cancel"}`))
	req := f.pendingOne(t)
	cancel()
	var m HostResult
	select {
	case m = <-ch:
	case <-time.After(time.Second):
		t.Fatal("not withdrawn within a second")
	}
	assert.Contains(t, m.Text, "withdrawn")
	assert.NotContains(t, m.Text, "denied by")
	assert.Equal(t, protocol.ApprovalResolutionWithdrawn, waitFor[*protocol.ApprovalResolvedSignal](t, f.rec).Resolution)
	assert.Empty(t, f.gate.PendingApprovals(""))
	_, err := f.gate.Answer(context.Background(), f.sess.ID, req.RequestID, protocol.ApprovalDecisionAllow, "late")
	assert.Error(t, err)
	time.Sleep(50 * time.Millisecond)
	assert.False(t, f.Exists("after-cancel"))
}

// TestFieldCase_T01_WriteIntoBareRepositoryAsks: a bare repository is found by what it holds,
// not by a ".git" in the path: in auto-edit a write_file into its hooks and an edit_file of its
// config ask (and cannot be stored), while a folder that merely has a hooks/ passes; in locked
// both are refused without asking.
func TestFieldCase_T01_WriteIntoBareRepositoryAsks(t *testing.T) {
	f := newHostFixture(t)
	up := filepath.Join(f.ws, "up")
	out, err := exec.Command("git", "init", "-q", "--bare", up).CombinedOutput()
	require.NoError(t, err, "%s", out)
	f.setMode(t, store.ModeAutoEdit)
	m := f.run(t, "write_file", `{"path":"notrepo/hooks/update","content":"x"}`)
	assert.False(t, m.IsError, "auto-edit: a plain folder's hooks/ passes: %s", m.Text)
	for _, c := range [][2]string{
		{"write_file", `{"path":"up/hooks/update","content":"#!/bin/sh\nid > pwned\n"}`},
		{"edit_file", `{"path":"up/config","old":"[core]","new":"[core]\n\thooksPath = /tmp"}`},
	} {
		ch := f.runAsync(context.Background(), f.call(c[0], c[1]))
		req := f.pendingOne(t)
		require.NotNil(t, req.GitMeta, c[0])
		assert.True(t, *req.GitMeta)
		assert.Nil(t, req.AlwaysStores)
		f.answer(t, req, protocol.ApprovalDecisionDeny)
		<-ch
	}
	assert.NoFileExists(t, filepath.Join(up, "hooks", "update"))
	b, _ := os.ReadFile(filepath.Join(up, "config"))
	assert.NotContains(t, string(b), "hooksPath")
	f.setMode(t, store.ModeLocked)
	m = f.run(t, "write_file", `{"path":"up/hooks/update","content":"x"}`)
	assert.True(t, m.IsError)
	assert.Contains(t, m.Text, "locked")
	assert.NoFileExists(t, filepath.Join(up, "hooks", "update"))
}

// TestFieldCase_T01_WriteCompletingBareRepositoryAsks: a write that would make a folder a bare
// repository asks, so no order of writes plants a config in one without an approval: a config,
// objects/ and refs/ pass, the HEAD that completes it asks. Variant: HEAD and objects/ first,
// refs/ last.
func TestFieldCase_T01_WriteCompletingBareRepositoryAsks(t *testing.T) {
	f := newHostFixture(t)
	f.setMode(t, store.ModeAutoEdit)
	for _, order := range [][]string{
		{"gd/config", "gd/objects/info/x", "gd/refs/heads/x", "gd/HEAD"},
		{"gd2/HEAD", "gd2/objects/x", "gd2/config", "gd2/refs/x"},
	} {
		for _, p := range order[:len(order)-1] {
			m := f.run(t, "write_file", `{"path":"`+p+`","content":"ref: refs/heads/main\n"}`)
			require.False(t, m.IsError, "%s: %s", p, m.Text)
		}
		last := order[len(order)-1]
		ch := f.runAsync(context.Background(), f.call("write_file", `{"path":"`+last+`","content":"ref: refs/heads/main\n"}`))
		req := f.pendingOne(t)
		require.NotNil(t, req.GitMeta, last)
		assert.True(t, *req.GitMeta, last)
		f.answer(t, req, protocol.ApprovalDecisionDeny)
		<-ch
		assert.NoFileExists(t, filepath.Join(f.ws, last))
	}
}
