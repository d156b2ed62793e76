// Package gitx runs the git program for the server: status, diffs, logs, one commit's facts,
// checkout, branches, sync and clone (protocol seed "git"), and one side of a file's change for
// media (seed "files", side=old|new). It imports nothing of the transport.
//
// Every call runs the real `git` binary with a clean environment, a timeout and machine-readable
// output (`-z`, `--porcelain=v2`, `--format` with separators), and runs no code from the
// repository: the agent can write .git/config, so each call switches off hooks
// (core.hooksPath=/dev/null), core.fsmonitor, external diff and textconv drivers (--no-ext-diff,
// --no-textconv), the clean/smudge/process filters the repository's config names, remote
// upload-pack/receive-pack commands (--upload-pack, --receive-pack), credential helpers and askpass programs it adds, curl's cookie jar (a file written wherever the config says), signature
// checks (gpg), submodule recursion, automatic gc and lazy fetches of a partial clone's missing
// objects (GIT_NO_LAZY_FETCH), and it restricts transports to an allowlist (protocol.allow=never
// plus one entry per allowed scheme, and GIT_ALLOW_PROTOCOL).
//
// Another repository (the other end of a local transport): git clears the -c settings for the
// programs it starts there, so the runner never pushes over a local transport (receive-pack would
// run that repository's hooks; ErrLocalPush, and "file" is off the allowlist for every push), and
// fetches and clones from a local path run a hardened upload-pack (`git -c … upload-pack`, the
// same settings; upload-pack runs no hook and its pack-objects hook is read only from the
// operator's own config).
//
// safe.directory: the runner never widens it. Git's own ownership check stands: a repository
// owned by another user than the server's is refused (ErrUnsafeRepository), unless the operator
// lists it in the server user's global git config (system config is not read:
// GIT_CONFIG_NOSYSTEM=1).
package gitx

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"
)

// Runner runs git with the hardened settings above. The zero value is usable: git from PATH,
// a 30 s timeout, https and ssh allowed for network transports.
type Runner struct {
	// Bin is the git program; default "git" looked up on PATH.
	Bin string
	// Timeout bounds one git call (not clones: they use CloneTimeout); default 30 s.
	Timeout time.Duration
	// CloneTimeout bounds one clone; default 30 min.
	CloneTimeout time.Duration
	// Schemes are the URL schemes allowed for clone and sync remotes; default https and ssh.
	// Local paths (file) are always allowed by the transport settings; callers check that they
	// lie inside the workspace roots.
	Schemes []string
	// MaxOutput bounds the captured standard output of one call, in bytes; default 64 MiB.
	// A call past it fails with ErrTooLarge.
	MaxOutput int64
}

var (
	// ErrNotRepository: the folder is not inside a git work tree.
	ErrNotRepository = errors.New("not a git repository")
	// ErrUnsafeRepository: git refused the repository because another user owns it
	// (safe.directory).
	ErrUnsafeRepository = errors.New("repository owned by another user")
	// ErrTooLarge: git's output exceeded Runner.MaxOutput.
	ErrTooLarge = errors.New("git output too large")
	// ErrTimeout: the call ran past its timeout and was killed.
	ErrTimeout = errors.New("git timed out")
)

// Error is a git call that exited non-zero. Stderr holds git's message (at most 4 KiB).
type Error struct {
	Args     []string // the subcommand and its arguments (without the hardening flags)
	ExitCode int
	Stderr   string
}

func (e *Error) Error() string {
	msg := strings.TrimSpace(e.Stderr)
	if msg == "" {
		msg = fmt.Sprintf("exit status %d", e.ExitCode)
	}
	sub := ""
	if len(e.Args) > 0 {
		sub = e.Args[0]
	}
	return fmt.Sprintf("git %s: %s", sub, msg)
}

// DefaultSchemes are the network URL schemes allowed when Runner.Schemes is empty.
var DefaultSchemes = []string{"https", "ssh"}

func (r *Runner) bin() string {
	if r.Bin != "" {
		return r.Bin
	}
	return "git"
}

func (r *Runner) timeout() time.Duration {
	if r.Timeout > 0 {
		return r.Timeout
	}
	return 30 * time.Second
}

func (r *Runner) maxOutput() int64 {
	if r.MaxOutput > 0 {
		return r.MaxOutput
	}
	return 64 << 20
}

func (r *Runner) schemes() []string {
	if len(r.Schemes) > 0 {
		return r.Schemes
	}
	return DefaultSchemes
}

// baseFlags come before the subcommand on every call; noLocal takes the file transport off the
// allowlist (pushes).
func (r *Runner) baseFlags(noLocal bool) []string {
	file := "always"
	if noLocal {
		file = "never"
	}
	f := []string{
		"--no-pager",
		"-c", "core.hooksPath=/dev/null",
		"-c", "core.fsmonitor=false",
		"-c", "submodule.recurse=false",
		"-c", "log.showSignature=false",
		"-c", "merge.verifySignatures=false",
		"-c", "push.gpgSign=false",
		"-c", "gc.auto=0",
		"-c", "maintenance.auto=false",
		"-c", "protocol.allow=never",
		"-c", "protocol.file.allow=" + file,
	}
	for _, s := range r.schemes() {
		f = append(f, "-c", "protocol."+s+".allow=always")
	}
	return f
}

// env is the clean environment of every git call: only what git needs from the server's
// environment (PATH, HOME, XDG_CONFIG_HOME for the operator's global config, SSH_AUTH_SOCK for
// ssh remotes), and settings that keep git from prompting or running programs. noLocal keeps
// "file" out of GIT_ALLOW_PROTOCOL (which, once set, overrides every protocol.*.allow).
func (r *Runner) env(readOnly, noLocal bool) []string {
	allow := r.schemes()
	if !noLocal {
		allow = append([]string{"file"}, allow...)
	}
	e := []string{
		"LANG=C", "LC_ALL=C",
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_TERMINAL_PROMPT=0",
		"GIT_ASKPASS=",
		"GIT_EDITOR=:",
		"GIT_SEQUENCE_EDITOR=:",
		"GIT_PAGER=cat",
		"PAGER=cat",
		"GIT_PROXY_COMMAND=",
		"GIT_SSH_COMMAND=ssh -o BatchMode=yes",
		"GIT_ALLOW_PROTOCOL=" + strings.Join(allow, ":"),
		// A partial clone fetches missing objects from its promisor remote on demand, with the
		// remote's uploadpack from the repository's config (which -c cannot override).
		"GIT_NO_LAZY_FETCH=1",
	}
	if readOnly {
		// Reads do not refresh the index: no lock taken beside the agent's own git.
		e = append(e, "GIT_OPTIONAL_LOCKS=0")
	}
	for _, k := range []string{"PATH", "HOME", "XDG_CONFIG_HOME", "SSH_AUTH_SOCK"} {
		if v, ok := os.LookupEnv(k); ok {
			e = append(e, k+"="+v)
		}
	}
	return e
}

// IsLocalURL reports whether git reaches url through its local transport (the other repository's
// git-upload-pack or git-receive-pack started on this machine): a file:// URL, or a path (no
// colon, or a slash before the first colon), as git's url_is_local_not_ssh decides. A
// "scheme://" URL of another scheme, scp-like host:path and transport::address are not local.
func IsLocalURL(url string) bool {
	if m := urlSchemeRE.FindStringSubmatch(url); m != nil {
		return strings.EqualFold(m[1], "file")
	}
	if helperRE.MatchString(url) {
		return false
	}
	colon, slash := strings.IndexByte(url, ':'), strings.IndexByte(url, '/')
	return colon < 0 || (slash >= 0 && slash < colon)
}

var (
	urlSchemeRE = regexp.MustCompile(`^([A-Za-z][A-Za-z0-9+.-]*)://`)
	helperRE    = regexp.MustCompile(`^[A-Za-z0-9._~-]+::`)
)

// uploadPack is the --upload-pack program for a fetch or clone from url: for a local one, git
// itself with the runner's settings, since git clears the caller's -c settings for the other
// repository's upload-pack; otherwise the plain name (a remote's shell may allow only that).
func (r *Runner) uploadPack(url string) string {
	if !IsLocalURL(url) {
		return "git-upload-pack"
	}
	q := func(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
	parts := []string{q(r.bin())}
	for _, f := range r.baseFlags(false) {
		parts = append(parts, q(f))
	}
	return strings.Join(append(parts, "upload-pack"), " ")
}

// call is one git invocation.
type call struct {
	dir      string
	args     []string
	readOnly bool
	noLocal  bool                  // no local transport (pushes): "file" is off the allowlist
	stdout   io.Writer             // when set, output streams here instead of being captured
	stderr   io.Writer             // when set, stderr streams here too (clone progress)
	timeout  time.Duration         // 0: Runner.Timeout
	scan     bool                  // read the repository's config first and neutralize its drivers
	scanIn   string                // where scan reads the config (default dir), no repository above it
	env      []string              // added to the environment
	allowed  map[int]bool          // exit codes that are not errors
	onStart  func(pid int)         // called once the process runs
	cancel   func(*exec.Cmd) error // how a cancelled call is stopped (default: kill the group)
}

// run executes c and returns its standard output.
func (r *Runner) run(ctx context.Context, c call) ([]byte, int, error) {
	args := r.baseFlags(c.noLocal)
	if c.scan {
		at, env := c.dir, []string(nil)
		if c.scanIn != "" {
			// No discovery above it: only the config the call itself reads (global).
			at, env = c.scanIn, []string{"GIT_CEILING_DIRECTORIES=" + filepath.Dir(c.scanIn)}
		}
		extra, err := r.neutralize(ctx, at, env)
		if err != nil {
			return nil, 0, err
		}
		args = append(args, extra...)
	}
	args = append(args, c.args...)
	to := c.timeout
	if to == 0 {
		to = r.timeout()
	}
	cctx, cancel := context.WithTimeout(ctx, to)
	defer cancel()
	cmd := exec.CommandContext(cctx, r.bin(), args...)
	cmd.Dir = c.dir
	cmd.Env = append(r.env(c.readOnly, c.noLocal), c.env...)
	cmd.Stdin = nil
	// Its own process group, so a timeout or cancel stops git and everything it started
	// (ssh, upload-pack, index-pack).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 2 * time.Second
	var out limitedBuffer
	out.max = r.maxOutput()
	out.stop = cancel
	if c.stdout != nil {
		cmd.Stdout = c.stdout
	} else {
		cmd.Stdout = &out
	}
	var errBuf limitedBuffer
	errBuf.max = 4 << 10
	errBuf.keep = true
	if c.stderr != nil {
		cmd.Stderr = io.MultiWriter(&errBuf, c.stderr)
	} else {
		cmd.Stderr = &errBuf
	}
	if err := cmd.Start(); err != nil {
		return nil, 0, fmt.Errorf("start git: %w", err)
	}
	err := cmd.Wait()
	if out.over {
		return nil, 0, ErrTooLarge
	}
	if cctx.Err() != nil {
		if ctx.Err() != nil {
			return nil, 0, ctx.Err()
		}
		return nil, 0, ErrTimeout
	}
	code := 0
	if err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			return nil, 0, fmt.Errorf("run git: %w", err)
		}
		code = ee.ExitCode()
		if !c.allowed[code] {
			return nil, code, classify(&Error{Args: c.args, ExitCode: code, Stderr: errBuf.String()})
		}
	}
	return out.Bytes(), code, nil
}

// classify maps git's well-known refusals to sentinel errors (wrapped, so the message stays).
func classify(e *Error) error {
	s := e.Stderr
	switch {
	case strings.Contains(s, "detected dubious ownership"), strings.Contains(s, "safe.directory"):
		return fmt.Errorf("%w: %s", ErrUnsafeRepository, strings.TrimSpace(firstLine(s)))
	case strings.Contains(s, "not a git repository"):
		return fmt.Errorf("%w: %s", ErrNotRepository, strings.TrimSpace(firstLine(s)))
	}
	return e
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// limitedBuffer keeps at most max bytes; past it, over is set and (unless keep) writes fail,
// which stops git with a broken pipe.
type limitedBuffer struct {
	buf  bytes.Buffer // not embedded: io.Copy would use its ReadFrom and pass Write by
	max  int64
	over bool
	keep bool   // keep the first max bytes and swallow the rest (stderr)
	stop func() // called once when max is passed (kills git, which would block on its pipe)
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if int64(b.buf.Len()+len(p)) > b.max {
		if b.keep {
			if room := int(b.max) - b.buf.Len(); room > 0 {
				b.buf.Write(p[:room])
			}
			return len(p), nil
		}
		if !b.over && b.stop != nil {
			b.stop()
		}
		b.over = true
		return 0, ErrTooLarge
	}
	return b.buf.Write(p)
}

// Bytes returns what was kept.
func (b *limitedBuffer) Bytes() []byte { return b.buf.Bytes() }

// String returns what was kept, as text.
func (b *limitedBuffer) String() string { return b.buf.String() }

// neutralize reads the configuration git would use in dir (every scope, includes followed) and
// returns -c overrides that switch off the programs it names: filter drivers, credential helpers
// other than the global ones, and core.alternateRefsCommand; and the files it would have git
// write outside the repository: curl's cookie jar (http[.<url>].cookieFile, saveCookies). (A remote's uploadpack and
// receivepack cannot be overridden with -c, the first value wins: fetch and push name the
// programs with --upload-pack and --receive-pack.) Reading config runs nothing.
func (r *Runner) neutralize(ctx context.Context, dir string, env []string) ([]string, error) {
	out, _, err := r.run(ctx, call{dir: dir, readOnly: true, env: env, args: []string{"config", "--list", "--show-scope", "-z"}})
	if err != nil {
		return nil, err
	}
	type entry struct{ scope, key, value string }
	var entries []entry
	fields := bytes.Split(out, []byte{0})
	for i := 0; i+1 < len(fields); i += 2 {
		kv := string(fields[i+1])
		k, v, _ := strings.Cut(kv, "\n")
		entries = append(entries, entry{scope: string(fields[i]), key: k, value: v})
	}
	var extra []string
	seen := map[string]bool{}
	add := func(kv ...string) {
		for _, s := range kv {
			if !seen[s] {
				seen[s] = true
				extra = append(extra, "-c", s)
			}
		}
	}
	globalHelpers := map[string][]string{} // key -> values from the global scope, in order
	localHelper := map[string]bool{}
	for _, e := range entries {
		sec, name, last := splitKey(e.key)
		switch {
		case sec == "filter" && name != "" && (last == "clean" || last == "smudge" || last == "process" || last == "required"):
			p := "filter." + name + "."
			add(p+"clean=", p+"smudge=", p+"process=", p+"required=false")
		case sec == "credential" && last == "helper":
			if e.scope == "global" {
				globalHelpers[e.key] = append(globalHelpers[e.key], e.value)
			} else if e.scope != "command" {
				localHelper[e.key] = true
			}
		case sec == "http" && (last == "cookiefile" || last == "savecookies") && e.scope != "command":
			// curl's cookie jar is written wherever the config points, as the server's user.
			p := "http."
			if name != "" {
				p += name + "."
			}
			add(p+"cookieFile=/dev/null", p+"saveCookies=false")
		case e.key == "core.alternaterefscommand" && e.scope != "global":
			add("core.alternateRefsCommand=true")
		}
	}
	for k := range localHelper {
		// An empty value resets the helper list; the operator's global helpers come back after.
		extra = append(extra, "-c", k+"=")
		for _, v := range globalHelpers[k] {
			extra = append(extra, "-c", k+"="+v)
		}
	}
	return extra, nil
}

// splitKey splits "section.sub.section.last" (or "section.last") into section, subsection and
// last name; git prints section and last name lower-case and the subsection as written.
func splitKey(k string) (section, sub, last string) {
	i := strings.IndexByte(k, '.')
	j := strings.LastIndexByte(k, '.')
	if i < 0 {
		return k, "", ""
	}
	if i == j {
		return k[:i], "", k[i+1:]
	}
	return k[:i], k[i+1 : j], k[j+1:]
}
