// Package sandbox runs the agent's commands under an operating system sandbox (issue 14; the
// protocol seed's "host" section reports it as "the sandbox").
//
// On Linux a sandboxed command runs in its own user, mount, PID, IPC and UTS namespaces (and a
// network namespace with only its own loopback unless the policy allows the network), in a view
// built for it: a fresh root holding the session's workspace roots and its scratch directory
// (read-write), the system folders, the PATH folders and the exposed paths (read-only), every
// `.git` inside the roots read-only, private /tmp (with a fresh HOME), /run and /dev, a fresh
// /proc; the server's data directory and known credential files hidden; then a Landlock domain,
// no capabilities, no_new_privs, no descriptor but 0, 1 and 2, and resource limits. The server's own binary is re-executed as the
// launcher: a program that uses this package calls Main at the very start of main (and in TestMain
// of packages whose tests launch commands).
//
// The package imports nothing of the transport.
package sandbox

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/zidane-server/zidane/server/workspace"
)

// Policy is what a sandboxed command may do. The zero value is not a policy; see ParsePolicy.
type Policy string

// The policies (docs/security.md has the table).
const (
	// WorkspaceWrite: read the file system (less the server's files), write only inside the
	// session's workspace roots and its scratch directory, no network. The default.
	WorkspaceWrite Policy = "workspace-write"
	// WorkspaceWriteNetwork is WorkspaceWrite with the host's network.
	WorkspaceWriteNetwork Policy = "workspace-write+network"
	// ReadOnly: read the file system (less the server's files), write only the scratch
	// directory, no network.
	ReadOnly Policy = "read-only"
	// Off runs the command without a sandbox; only an operator flag (Options.AllowOff) allows it.
	Off Policy = "off"
)

// Policies lists every policy, default first.
var Policies = []Policy{WorkspaceWrite, WorkspaceWriteNetwork, ReadOnly, Off}

// ParsePolicy returns the policy named s, or an error that lists the known names.
func ParsePolicy(s string) (Policy, error) {
	for _, p := range Policies {
		if string(p) == s {
			return p, nil
		}
	}
	return "", fmt.Errorf("unknown sandbox policy %q: use one of %s", s, policyNames())
}

func policyNames() string {
	var n []string
	for _, p := range Policies {
		n = append(n, string(p))
	}
	return strings.Join(n, ", ")
}

// Network reports whether the policy lets the command use the host's network.
func (p Policy) Network() bool { return p == WorkspaceWriteNetwork || p == Off }

// WritesWorkspace reports whether the policy lets the command write the workspace roots.
func (p Policy) WritesWorkspace() bool { return p != ReadOnly }

// Feature names a kernel feature the sandbox uses.
type Feature string

// The features. Every sandboxed policy needs Landlock and Namespaces; the policies without
// network also need NetNamespace.
const (
	// Landlock is the Landlock LSM (file system rules, scopes), ABI 1 or later.
	Landlock Feature = "landlock"
	// Namespaces are user, mount and PID namespaces a process may create (and so hide the
	// server's files and /proc entries and drop every capability).
	Namespaces Feature = "namespaces"
	// NetNamespace is a new network namespace (the "no network" of the policies without it).
	NetNamespace Feature = "netns"
)

// Features lists every feature.
var Features = []Feature{Landlock, Namespaces, NetNamespace}

// Needs returns the kernel features policy p cannot run without.
func (p Policy) Needs() []Feature {
	switch p {
	case Off:
		return nil
	case WorkspaceWriteNetwork:
		return []Feature{Landlock, Namespaces}
	default:
		return []Feature{Landlock, Namespaces, NetNamespace}
	}
}

// Limits are the resource limits of one sandboxed command (rlimits of every process it starts).
// A zero member takes its default from DefaultLimits.
type Limits struct {
	// CPUSeconds is RLIMIT_CPU: CPU seconds per process (SIGXCPU, then SIGKILL).
	CPUSeconds uint64 `json:"cpuSeconds,omitempty"`
	// MemoryBytes is RLIMIT_AS: the address space of each process, in bytes.
	MemoryBytes uint64 `json:"memoryBytes,omitempty"`
	// Processes is RLIMIT_NPROC: processes and threads of the command together (counted in the
	// sandbox's own user namespace).
	Processes uint64 `json:"processes,omitempty"`
	// FileBytes is RLIMIT_FSIZE: the largest file a process may write, in bytes.
	FileBytes uint64 `json:"fileBytes,omitempty"`
}

// DefaultLimits are the limits a command gets when Options.Limits leaves a member zero.
var DefaultLimits = Limits{
	CPUSeconds:  900,
	MemoryBytes: 8 << 30,
	Processes:   1024,
	FileBytes:   8 << 30,
}

func (l Limits) withDefaults() Limits {
	if l.CPUSeconds == 0 {
		l.CPUSeconds = DefaultLimits.CPUSeconds
	}
	if l.MemoryBytes == 0 {
		l.MemoryBytes = DefaultLimits.MemoryBytes
	}
	if l.Processes == 0 {
		l.Processes = DefaultLimits.Processes
	}
	if l.FileBytes == 0 {
		l.FileBytes = DefaultLimits.FileBytes
	}
	return l
}

// Options configure a Sandbox.
type Options struct {
	// ScratchBase is the folder under which each session gets its scratch directory
	// (ScratchBase/<session>/{tmp,cache,home}); the server uses <data-dir>/sandbox. Required.
	ScratchBase string
	// Hide are folders and files a sandboxed command must not see: the server's data directory
	// (daemon.json, the managed Postgres and its socket, config), its run directory, its unix
	// socket. Folders show empty, files empty. DefaultHidden is added.
	Hide []string
	// Expose are more host folders or files the view shows read-only (the operator's
	// --sandbox-expose: a toolchain outside the system folders and PATH, a shared data set).
	Expose []string
	// AllowOff lets the Off policy run commands (the operator's flag); without it Off is refused.
	AllowOff bool
	// Limits are the resource limits per command (zero members: DefaultLimits).
	Limits Limits
	// Unsupported forces features to count as missing, as on a kernel without them (a setting for
	// tests and for operators who distrust one); "all" names every feature.
	Unsupported []Feature
}

// DefaultHidden returns the credential files of the server's user that a command never needs
// (its HOME points at the scratch directory) and, when the server runs as root, the shadow files:
// workspace.DefaultHidden, the one list the confinement point hides too.
func DefaultHidden() []string { return workspace.DefaultHidden() }

// Support is what the kernel offers the sandbox, as probed (the host group's "sandbox").
type Support struct {
	// Kind is "linux-landlock-namespaces" when every feature works, "linux-partial" when some
	// do, "none" when none does.
	Kind string
	// LandlockABI is the kernel's Landlock ABI version (0: none).
	LandlockABI int
	// Available maps each feature to whether it works (false when forced unsupported).
	Available map[Feature]bool
	// Policies are the policies that can run commands here.
	Policies []Policy
	// Notes say what is missing or weaker, one sentence each.
	Notes []string
	// ProbedAt is when the probe ran.
	ProbedAt time.Time
	// reasons are the notes saying why a feature failed, cause and remedy, for Check's error.
	reasons map[Feature]string
}

// ErrUnsupported is returned (wrapped) when the session's policy needs a feature this machine
// lacks: the command is refused, never run with less.
var ErrUnsupported = errors.New("sandbox unsupported")

// Sandbox prepares commands to run under a policy. Safe for concurrent use.
type Sandbox struct {
	opts Options
	// pids is where command cgroups of the pids controller go ("" when none is usable).
	pids string

	mu      sync.Mutex
	support *Support
}

// New returns a Sandbox. It does not probe; Support does, and caches the answer for a minute.
func New(opts Options) (*Sandbox, error) {
	if opts.ScratchBase == "" {
		return nil, errors.New("sandbox: ScratchBase is required")
	}
	abs, err := filepath.Abs(opts.ScratchBase)
	if err != nil {
		return nil, err
	}
	opts.ScratchBase = abs
	opts.Limits = opts.Limits.withDefaults()
	opts.Hide = dedupe(append(slices.Clone(opts.Hide), DefaultHidden()...))
	return &Sandbox{opts: opts, pids: pidsBase()}, nil
}

// dedupe returns paths without repeats (the server hands over its whole hidden set, defaults
// included), in order.
func dedupe(paths []string) []string {
	seen := map[string]bool{}
	out := paths[:0]
	for _, p := range paths {
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	return out
}

// AllowsOff reports whether the operator allowed the Off policy.
func (s *Sandbox) AllowsOff() bool { return s.opts.AllowOff }

// supportTTL is how long a probe's answer is reused (the seed: "cached for a minute").
const supportTTL = time.Minute

// Support returns what the kernel offers, probing when the cached answer is older than a
// minute or refresh is set. The probe runs real sandboxed commands (the outcome, not the
// mechanism): `namespaces` holds only when a launched command came up with the mounts, the
// fresh /proc and no capabilities.
func (s *Sandbox) Support(refresh bool) Support {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.support != nil && !refresh && time.Since(s.support.ProbedAt) < supportTTL {
		return *s.support
	}
	sup := s.probe()
	s.support = &sup
	return sup
}

func (s *Sandbox) forced(f Feature) bool {
	for _, u := range s.opts.Unsupported {
		if u == f || u == "all" {
			return true
		}
	}
	return false
}

func summarize(sup *Support) {
	n := 0
	for _, f := range Features {
		if sup.Available[f] {
			n++
		}
	}
	switch n {
	case len(Features):
		sup.Kind = "linux-landlock-namespaces"
	case 0:
		sup.Kind = "none"
	default:
		sup.Kind = "linux-partial"
	}
}

// Check returns nil when policy p can run commands here, else an error wrapping ErrUnsupported
// (or saying Off is not allowed) that tells the operator what to do.
func (s *Sandbox) Check(p Policy) error {
	if _, err := ParsePolicy(string(p)); err != nil {
		return err
	}
	if p == Off {
		if !s.opts.AllowOff {
			return errors.New("sandbox policy off is not allowed on this server: the operator starts it with --sandbox-allow-off to allow it")
		}
		return nil
	}
	sup := s.Support(false)
	var missing, why []string
	for _, f := range p.Needs() {
		if !sup.Available[f] {
			missing = append(missing, string(f))
			if r := sup.reasons[f]; r != "" {
				why = append(why, r)
			}
		}
	}
	if len(missing) > 0 {
		detail := "see host.info"
		if len(why) > 0 {
			detail = strings.Join(why, " ")
		}
		return fmt.Errorf("%w: policy %s needs %s, which this server's kernel does not provide (%s); the command was not run", ErrUnsupported, p, strings.Join(missing, ", "), detail)
	}
	return nil
}

// Request is one command to sandbox.
type Request struct {
	// Policy is the session's policy.
	Policy Policy
	// Roots are the session's workspace roots (absolute).
	Roots []string
	// SessionID names the session whose scratch directory the command gets.
	SessionID string
}

// Scratch returns the session's scratch directory (created 0700 with tmp, cache and home inside).
func (s *Sandbox) Scratch(sessionID string) (string, error) {
	if sessionID == "" || strings.ContainsAny(sessionID, "/\\") || sessionID == "." || sessionID == ".." {
		return "", fmt.Errorf("sandbox: bad session id %q", sessionID)
	}
	dir := filepath.Join(s.opts.ScratchBase, sessionID)
	for _, sub := range []string{"tmp", "cache", "home"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o700); err != nil {
			return "", fmt.Errorf("sandbox: scratch directory: %w", err)
		}
	}
	return dir, nil
}

// ScratchEnv returns the variables that point a command's temporary files and caches at the
// scratch directory dir (TMPDIR, HOME, XDG_CACHE_HOME, GOCACHE, npm's cache, …).
func ScratchEnv(dir string) []string {
	tmp, cache, home := filepath.Join(dir, "tmp"), filepath.Join(dir, "cache"), filepath.Join(dir, "home")
	return []string{
		"TMPDIR=" + tmp, "HOME=" + home, "XDG_CACHE_HOME=" + cache,
		"GOCACHE=" + filepath.Join(cache, "go-build"), "GOPATH=" + filepath.Join(home, "go"),
		"GOTOOLCHAIN=local", "npm_config_cache=" + filepath.Join(cache, "npm"),
		"PIP_CACHE_DIR=" + filepath.Join(cache, "pip"), "CARGO_HOME=" + filepath.Join(home, ".cargo"),
	}
}

// Wrap rewrites cmd, prepared as it would run unsandboxed (Path, Args, Dir, Env, Stdio and
// SysProcAttr.Setpgid), so that starting it runs the same program under the request's policy:
// the server's binary is re-executed as the launcher, which builds the sandbox and then executes
// the program. cmd.Env (or, when nil, an allowlist of the server's environment) gets the scratch
// variables of ScratchEnv. Wrap refuses (and cmd must not be started) when the policy cannot run
// here (ErrUnsupported), or is Off without AllowOff. Under Off cmd only gets the scratch
// variables. cmd.ExtraFiles must be empty.
func (s *Sandbox) Wrap(cmd *exec.Cmd, req Request) error {
	if err := s.Check(req.Policy); err != nil {
		return err
	}
	if len(cmd.ExtraFiles) > 0 {
		return errors.New("sandbox: a command with extra files cannot be sandboxed")
	}
	scratch, err := s.Scratch(req.SessionID)
	if err != nil {
		return err
	}
	env := cmd.Env
	if env == nil {
		env = allowEnv(os.Environ())
	}
	env = overrideEnv(env, ScratchEnv(scratch))
	if req.Policy == Off {
		cmd.Env = env
		return nil
	}
	// A fresh HOME per command (field case T06): no .gitconfig, .npmrc or cargo config one
	// command leaves is obeyed by the next.
	env = overrideEnv(env, []string{"HOME=" + viewHome, "CARGO_HOME=" + viewHome + "/.cargo"})
	spec, err := s.spec(cmd, env, scratch, req)
	if err != nil {
		return err
	}
	return prepare(cmd, spec)
}

// allowEnv keeps the entries of environ an unconfigured command may see (runtime case R26: an
// allowlist, never a denylist).
func allowEnv(environ []string) []string {
	allowed := map[string]bool{"PATH": true, "LANG": true, "LANGUAGE": true, "LC_ALL": true, "LC_CTYPE": true,
		"LC_MESSAGES": true, "TERM": true, "TZ": true, "USER": true, "LOGNAME": true, "SHELL": true}
	var out []string
	for _, kv := range environ {
		if k, _, ok := strings.Cut(kv, "="); ok && allowed[k] {
			out = append(out, kv)
		}
	}
	return out
}

// overrideEnv returns env with the keys of over replaced by over's entries.
func overrideEnv(env, over []string) []string {
	keys := map[string]bool{}
	for _, kv := range over {
		k, _, _ := strings.Cut(kv, "=")
		keys[k] = true
	}
	out := make([]string, 0, len(env)+len(over))
	for _, kv := range env {
		if k, _, _ := strings.Cut(kv, "="); !keys[k] {
			out = append(out, kv)
		}
	}
	return append(out, over...)
}
