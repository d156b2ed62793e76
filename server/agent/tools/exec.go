package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/zidane-server/zidane/server/workspace"
)

// AllowedEnv are the variables of the server's environment an exec command inherits: an
// allowlist, so a provider key, DATABASE_URL or a token under any name never reaches the model's
// commands (runtime case R26).
var AllowedEnv = []string{"PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE",
	"LC_MESSAGES", "LC_COLLATE", "LC_NUMERIC", "LC_TIME", "TERM", "TMPDIR", "TZ"}

// SafeEnv returns the entries of environ (KEY=value) whose key is in AllowedEnv, plus a PATH
// default when environ has none.
func SafeEnv(environ []string) []string {
	allowed := setOf(AllowedEnv...)
	var out []string
	hasPath := false
	for _, kv := range environ {
		k, _, ok := strings.Cut(kv, "=")
		if ok && allowed[k] {
			out = append(out, kv)
			hasPath = hasPath || k == "PATH"
		}
	}
	if !hasPath {
		out = append(out, "PATH=/usr/local/bin:/usr/bin:/bin")
	}
	return out
}

// LaunchRequest tells a Launcher what exec is about to run.
type LaunchRequest struct {
	// Command is the command line (the shell's -c argument).
	Command string
	// Dir is the folder it runs in, resolved inside the roots at use.
	Dir workspace.Path
	// Roots are the workspace roots (absolute, links resolved).
	Roots []string
	// SessionID names the session.
	SessionID string
	// Narrow, when set, maps the session's sandbox policy to the one the run's agent allows
	// (issue 27: an agent definition only narrows, unless it is the server user's).
	Narrow func(policy string) string
}

// Launcher prepares exec's command before it starts: the seam where the OS sandbox (issue 14:
// Landlock, a network namespace) plugs in. Prepare may rewrite cmd.Path and cmd.Args (e.g. to run
// a sandbox helper that then runs the original argv), add cmd.ExtraFiles and set cmd.SysProcAttr
// fields, but must leave SysProcAttr.Setpgid true (exec kills the command's process group on
// cancel and timeout; the tool sets it again if a launcher clears it) and must not replace
// cmd.Env with anything holding the server's secrets. Output goes through cmd.Stdout/Stderr,
// which the tool sets.
// Prepare answers how it prepared the command (the tool result says it); an error refuses the
// command, which then does not run.
type Launcher interface {
	Prepare(cmd *exec.Cmd, req LaunchRequest) (Launched, error)
}

// LaunchChecker is a Launcher that can say, before a command is approved, that it would refuse
// it (a sandbox policy this machine cannot enforce): exec's Check asks it, so such a command is
// refused before anyone is asked to approve it.
type LaunchChecker interface {
	CheckLaunch(req LaunchRequest) error
}

// Launched says how a Launcher prepared a command.
type Launched struct {
	// Sandbox names the sandbox policy the command runs under ("" when it runs without one).
	Sandbox string
}

// LauncherFunc adapts a function to Launcher.
type LauncherFunc func(cmd *exec.Cmd, req LaunchRequest) (Launched, error)

// Prepare implements Launcher.
func (f LauncherFunc) Prepare(cmd *exec.Cmd, req LaunchRequest) (Launched, error) { return f(cmd, req) }

// Exec is the exec tool: `bash -c command` in the session's folder.
type Exec struct{}

type execInput struct {
	Command string `json:"command"`
	Timeout int    `json:"timeout"`
}

// Spec implements Tool.
func (Exec) Spec() Spec {
	return Spec{Name: "exec", Description: "Run a shell command (bash -c) in the session's folder, with stdin empty and a minimal " +
		"environment (no credentials). Returns the combined output (at most 64 KiB: head and tail kept, the cut said) and the exit code. " +
		"timeout in seconds (default 120, at most 600); on timeout or cancel the command's whole process group is killed. " +
		"Asks the user first unless the command is on the project's safelist.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{` +
			`"command":{"type":"string","minLength":1,"description":"the command line, run with bash -c"},` +
			`"timeout":{"type":"integer","minimum":1,"maximum":600,"description":"seconds before the command is killed (default 120)"}},"required":["command"]}`)}
}

// Kind implements Tool.
func (Exec) Kind() Kind { return KindExec }

// Check implements Tool.
func (Exec) Check(_ context.Context, env *Env, input json.RawMessage) (*Call, error) {
	var in execInput
	if err := decode("exec", input, &in); err != nil {
		return nil, err
	}
	if strings.TrimSpace(in.Command) == "" {
		return nil, failf("exec: command is required.")
	}
	if strings.ContainsRune(in.Command, 0) {
		return nil, failf("exec: the command cannot hold a NUL character.")
	}
	dir, err := env.WS.Folder(env.Cwd)
	if err != nil {
		return nil, err
	}
	if lc, ok := env.cfg().Launcher.(LaunchChecker); ok {
		if err := lc.CheckLaunch(LaunchRequest{Command: in.Command, Dir: dir, Roots: env.WS.Roots(), SessionID: env.SessionID, Narrow: env.NarrowSandbox}); err != nil {
			return nil, failf("exec: the command did not run: %v", err)
		}
	}
	return &Call{Summary: "exec " + in.Command, Command: ParseCommand(in.Command), Cwd: dir.Abs()}, nil
}

// Run implements Tool. The command runs in its own process group; on timeout or when ctx ends the
// group gets SIGTERM, then SIGKILL after Config.ExecKillGrace; when the shell exits any process left
// in the group is killed too. Output is read from a pipe the tool owns, so a process that left the
// group (setsid) and still holds it delays the result by at most Config.ExecPipeDrain (it is a
// documented leftover: docs/security.md).
func (Exec) Run(ctx context.Context, env *Env, input json.RawMessage) (*Result, error) {
	var in execInput
	if err := decode("exec", input, &in); err != nil {
		return failure(err), nil
	}
	cfg := env.cfg()
	// The folder is resolved again at use: it may have been swapped for a link while the approval
	// waited (runtime case R19).
	dir, err := env.WS.Folder(env.Cwd)
	if err != nil {
		return failure(err), nil
	}
	timeout := cfg.ExecTimeout
	if in.Timeout > 0 {
		timeout = min(time.Duration(in.Timeout)*time.Second, cfg.ExecMaxTimeout)
	}
	cmd := exec.Command(cfg.Shell, "-c", in.Command)
	cmd.Dir = dir.Abs()
	cmd.Env = cfg.ExecEnv
	if cmd.Env == nil {
		cmd.Env = SafeEnv(os.Environ())
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer pr.Close()
	cmd.Stdout, cmd.Stderr = pw, pw
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var launched Launched
	if cfg.Launcher != nil {
		if launched, err = cfg.Launcher.Prepare(cmd, LaunchRequest{Command: in.Command, Dir: dir, Roots: env.WS.Roots(), SessionID: env.SessionID, Narrow: env.NarrowSandbox}); err != nil {
			pw.Close()
			return &Result{Content: fmt.Sprintf("exec: the command did not run: %v", err), IsError: true, Sandbox: launched.Sandbox}, nil
		}
		if cmd.SysProcAttr == nil {
			cmd.SysProcAttr = &syscall.SysProcAttr{}
		}
		cmd.SysProcAttr.Setpgid = true
	}
	out := newHeadTail(cfg.OutputMaxBytes)
	start := time.Now()
	if err := cmd.Start(); err != nil {
		pw.Close()
		return failure(failf("exec: %v", err)), nil
	}
	pw.Close() // the children hold the write end now
	pgid := cmd.Process.Pid
	readDone := make(chan struct{})
	go func() { _, _ = io.Copy(out, pr); close(readDone) }()

	var (
		mu     sync.Mutex
		reason string // "timeout" or "cancel", once the group was signalled
	)
	exited := make(chan struct{})
	go func() {
		timer := time.NewTimer(timeout)
		defer timer.Stop()
		why := ""
		select {
		case <-exited:
			return
		case <-timer.C:
			why = "timeout"
		case <-ctx.Done():
			why = "cancel"
		}
		mu.Lock()
		reason = why
		mu.Unlock()
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(cfg.ExecKillGrace):
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
		}
	}()
	waitErr := cmd.Wait()
	close(exited)
	// Whatever is left in the group (background jobs, a shell's children) goes with the shell.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	select {
	case <-readDone:
	case <-time.After(cfg.ExecPipeDrain):
		pr.Close() // a process outside the group still holds the pipe: stop reading
		<-readDone
	}
	mu.Lock()
	why := reason
	mu.Unlock()

	text, cut := out.String()
	var b strings.Builder
	b.WriteString(text)
	if text != "" && !strings.HasSuffix(text, "\n") {
		b.WriteByte('\n')
	}
	res := &Result{Truncated: cut, Sandbox: launched.Sandbox}
	code := cmd.ProcessState.ExitCode()
	switch {
	case why == "timeout":
		fmt.Fprintf(&b, "[timed out after %s; the command's process group was killed]", timeout)
		res.IsError = true
	case why == "cancel":
		b.WriteString("[cancelled; the command's process group was killed]")
		res.IsError = true
	case code != 0:
		fmt.Fprintf(&b, "[exit code %d]", code)
		res.IsError = true
	case waitErr != nil && !errors.As(waitErr, new(*exec.ExitError)):
		fmt.Fprintf(&b, "[%v]", waitErr)
		res.IsError = true
	default:
		fmt.Fprintf(&b, "[exit code 0, %s]", time.Since(start).Round(time.Millisecond))
	}
	if launched.Sandbox != "" {
		fmt.Fprintf(&b, " [sandbox %s]", launched.Sandbox)
	}
	res.Content = b.String()
	if why == "cancel" {
		return res, ctx.Err()
	}
	return res, nil
}

// headTail keeps the first and the last half of max bytes written to it and counts the rest.
type headTail struct {
	mu    sync.Mutex
	max   int
	head  []byte
	tail  []byte // ring: the latest bytes, at most max/2
	total int64
}

func newHeadTail(max int) *headTail { return &headTail{max: max} }

// Write implements io.Writer.
func (h *headTail) Write(p []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := len(p)
	h.total += int64(n)
	if room := h.max/2 - len(h.head); room > 0 {
		k := min(room, len(p))
		h.head = append(h.head, p[:k]...)
		p = p[k:]
	}
	if len(p) > 0 {
		h.tail = append(h.tail, p...)
		if over := len(h.tail) - h.max/2; over > 0 {
			h.tail = append(h.tail[:0], h.tail[over:]...)
		}
	}
	return n, nil
}

// String returns the kept output, with a line saying how much was cut from the middle.
func (h *headTail) String() (string, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	kept := int64(len(h.head) + len(h.tail))
	if kept == h.total {
		return string(h.head) + string(h.tail), false
	}
	return fmt.Sprintf("%s\n[output cut: %d of %d bytes omitted from the middle]\n%s", h.head, h.total-kept, h.total, h.tail), true
}
