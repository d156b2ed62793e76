package server

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/zidane-server/zidane/server/agent/tools"
	"github.com/zidane-server/zidane/server/workspace/sandbox"
)

// SandboxConfig configures the OS sandbox of the agent's commands (issue 14; docs/security.md).
type SandboxConfig struct {
	// Default is the policy of a session nobody set one for; default workspace-write.
	Default sandbox.Policy
	// AllowOff lets the off policy (no sandbox) be the default or a session's policy.
	AllowOff bool
	// Unsupported forces kernel features to count as missing (a setting for tests); "all" names
	// every feature.
	Unsupported []sandbox.Feature
	// Limits are each command's resource limits (zero members: sandbox.DefaultLimits).
	Limits sandbox.Limits
	// Hide are more paths hidden from the agent's tools, clients and commands (the server's unix
	// socket, the config file, --sandbox-hide); the data dir and the user's credential files
	// (workspace.DefaultHidden) are always hidden.
	Hide []string
	// Expose are more host files and folders commands see, read-only (--sandbox-expose): the
	// view holds only the roots, the system folders, the PATH folders and these.
	Expose []string
	// TerminalPolicy, when set, runs every project terminal under that policy (--terminal-sandbox);
	// a policy the kernel cannot enforce refuses the server's start.
	TerminalPolicy sandbox.Policy
	// ScratchBase is where sessions' scratch directories go; default <data-dir>/sandbox, or
	// $TMPDIR/zidane-sandbox-<uid> without a data dir.
	ScratchBase string
}

// newSandbox builds the server's sandbox, probes the kernel and logs what it found (the server
// says at start what its kernel lacks).
func (s *Server) newSandbox() error {
	c := &s.cfg.Sandbox
	if c.Default == "" {
		c.Default = sandbox.WorkspaceWrite
	}
	if _, err := sandbox.ParsePolicy(string(c.Default)); err != nil {
		return err
	}
	if c.Default == sandbox.Off && !c.AllowOff {
		return fmt.Errorf("the default sandbox policy off needs %s", s.flagHint("--sandbox-allow-off"))
	}
	if c.ScratchBase == "" {
		if s.cfg.DataDir != "" {
			c.ScratchBase = filepath.Join(s.cfg.DataDir, "sandbox")
		} else {
			c.ScratchBase = filepath.Join(os.TempDir(), fmt.Sprintf("zidane-sandbox-%d", os.Getuid()))
		}
	}
	if err := os.MkdirAll(c.ScratchBase, 0o700); err != nil {
		return fmt.Errorf("sandbox scratch base: %w", err)
	}
	// The workspace's hidden set (the data dir, c.Hide, the credential files): one list.
	sb, err := sandbox.New(sandbox.Options{ScratchBase: c.ScratchBase, Hide: s.ws.Hidden().Paths(), Expose: c.Expose, AllowOff: c.AllowOff,
		Limits: c.Limits, Unsupported: c.Unsupported})
	if err != nil {
		return err
	}
	s.sandbox = sb
	sup := sb.Support(true)
	if err := sb.Check(c.Default); err != nil {
		s.log.Warn("sandbox: the default policy cannot run here; commands will be refused", "policy", c.Default, "kind", sup.Kind,
			"landlockAbi", sup.LandlockABI, "notes", strings.Join(sup.Notes, " "), "err", err)
	} else {
		s.log.Info("sandbox", "kind", sup.Kind, "landlockAbi", sup.LandlockABI, "default", c.Default, "policies", sup.Policies,
			"notes", strings.Join(sup.Notes, " "))
	}
	if tp := c.TerminalPolicy; tp != "" && s.cfg.TerminalPrepare == nil {
		if err := sb.Check(tp); err != nil {
			return fmt.Errorf("--terminal-sandbox: %w", err)
		}
		s.cfg.TerminalPrepare = func(cmd *exec.Cmd) error {
			return sb.Wrap(cmd, sandbox.Request{Policy: tp, Roots: s.ws.Roots(), SessionID: "terminals"})
		}
	}
	if s.tools != nil && s.tools.Config.Launcher == nil {
		s.tools.Config.Launcher = execLauncher{s}
	}
	return nil
}

// execLauncher runs exec's commands under their session's sandbox policy (the tools package's
// Launcher seam).
type execLauncher struct{ s *Server }

// Prepare implements tools.Launcher.
func (l execLauncher) Prepare(cmd *exec.Cmd, req tools.LaunchRequest) (tools.Launched, error) {
	p, err := l.s.sandboxCommand(l.s.baseCtx, cmd, req.SessionID, req.Roots, req.Narrow)
	return tools.Launched{Sandbox: string(p)}, err
}

// CheckLaunch implements tools.LaunchChecker: a command whose session policy cannot run here is
// refused before it is approved.
func (l execLauncher) CheckLaunch(req tools.LaunchRequest) error {
	p, _, err := l.s.sessionPolicy(l.s.baseCtx, req.SessionID)
	if err != nil {
		return err
	}
	return l.s.sandbox.Check(narrowPolicy(p, req.Narrow))
}

// sessionPolicy returns the policy sessionID's commands run under: the one an admin set, else
// the server's default.
func (s *Server) sessionPolicy(ctx context.Context, sessionID string) (sandbox.Policy, bool, error) {
	p, err := s.store.SessionSandbox(ctx, sessionID)
	if err != nil {
		return "", false, err
	}
	if p == "" {
		return s.cfg.Sandbox.Default, false, nil
	}
	return sandbox.Policy(p), true, nil
}

// narrowPolicy applies the run's agent's narrowing (tools.LaunchRequest.Narrow) to p; a result
// that names no policy keeps p.
func narrowPolicy(p sandbox.Policy, narrow func(string) string) sandbox.Policy {
	if narrow == nil {
		return p
	}
	if q, err := sandbox.ParsePolicy(narrow(string(p))); err == nil {
		return q
	}
	return p
}

// sandboxCommand prepares cmd to run under sessionID's policy with roots writable, and returns
// the policy. An error means cmd must not run: the policy cannot be
// enforced here, or is off without the operator's flag.
func (s *Server) sandboxCommand(ctx context.Context, cmd *exec.Cmd, sessionID string, roots []string, narrow func(string) string) (sandbox.Policy, error) {
	p, _, err := s.sessionPolicy(ctx, sessionID)
	if err != nil {
		return "", err
	}
	p = narrowPolicy(p, narrow)
	if err := s.sandbox.Wrap(cmd, sandbox.Request{Policy: p, Roots: roots, SessionID: sessionID}); err != nil {
		return p, err
	}
	return p, nil
}
