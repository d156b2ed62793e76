package sandbox

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/zidane-server/zidane/server/workspace"
)

// The launcher is the server's own binary, re-executed with stageEnv naming its stage and specEnv
// holding the launchSpec as JSON.
const (
	stageEnv = "ZIDANE_SANDBOX_STAGE"
	specEnv  = "ZIDANE_SANDBOX_SPEC"
	// maxSpec bounds the spec (one environment string may not exceed 128 KiB).
	maxSpec = 120 << 10
)

// launchSpec is what the launcher needs: the program, and the sandbox to build around it.
type launchSpec struct {
	Path string   `json:"path"`
	Args []string `json:"args"`
	Env  []string `json:"env"`
	Dir  string   `json:"dir"`
	// Writable are the folders the view shows read-write (roots unless read-only, the scratch
	// directory), links resolved.
	Writable []string `json:"writable"`
	// Readable are the folders the view shows read-only (the system folders, every PATH folder,
	// the exposed paths, the roots under read-only), links resolved.
	Readable []string `json:"readable,omitempty"`
	// Links are links the view shows at their path (a system folder that is a link on the host).
	Links map[string]string `json:"links,omitempty"`
	// Self, when set, is where the view shows the launcher's own binary (read-only), so that it
	// can run as the command (the probe's check stage).
	Self string `json:"self,omitempty"`
	// Stage is the folder the view's root is built on in the launcher's mount namespace (the
	// scratch directory; the host's is untouched).
	Stage string `json:"stage"`
	// GitDirs are the `.git` folders and files and the bare repositories inside the writable
	// roots, and their `.zidane` and `.claude` folders (which configure what the server runs:
	// MCP servers, commands; issue 23 item 3), kept read-only.
	GitDirs []string `json:"gitDirs,omitempty"`
	// Hide are folders and files shown empty.
	Hide []string `json:"hide,omitempty"`
	// Sockets are the host's named unix sockets inside the read-only folders of the view (none
	// in the roots or the scratch directory), covered so that connect fails.
	Sockets []string `json:"sockets,omitempty"`
	// NewNet runs the command in a new network namespace (its own loopback only).
	NewNet bool `json:"newNet"`
	// Landlock enforces the Landlock domain (false only while probing a kernel without it).
	Landlock bool   `json:"landlock"`
	Limits   Limits `json:"limits"`
	// Cgroup is the cgroup.procs file of the command's pids cgroup, joined by the launcher
	// before anything else ("" when none).
	Cgroup string `json:"cgroup,omitempty"`
}

// gitWalkDepth and gitWalkMax bound the search for `.git` inside a root: folders at most
// gitWalkDepth below it, at most gitWalkMax folders visited.
const (
	gitWalkDepth = 4
	gitWalkMax   = 5000
)

func (s *Sandbox) spec(cmd *exec.Cmd, env []string, scratch string, req Request) (*launchSpec, error) {
	sp := &launchSpec{Path: cmd.Path, Args: cmd.Args, Env: env, Dir: cmd.Dir, NewNet: !req.Policy.Network(),
		Landlock: true, Limits: s.opts.Limits}
	if sp.Dir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return nil, err
		}
		sp.Dir = wd
	}
	real := func(p string) (string, error) {
		abs, err := filepath.Abs(p)
		if err != nil {
			return "", err
		}
		return filepath.EvalSymlinks(abs)
	}
	sc, err := real(scratch)
	if err != nil {
		return nil, fmt.Errorf("sandbox: scratch directory: %w", err)
	}
	sp.Writable = append(sp.Writable, sc)
	sp.Stage = sc
	sp.Readable, sp.Links = viewDirs(env, s.opts.Expose)
	system := slices.Clone(sp.Readable)
	for _, r := range req.Roots {
		rr, err := real(r)
		if err != nil {
			return nil, fmt.Errorf("sandbox: workspace root %s: %w", r, err)
		}
		if !req.Policy.WritesWorkspace() {
			sp.Readable = append(sp.Readable, rr)
			continue
		}
		sp.Writable = append(sp.Writable, rr)
		sp.GitDirs = append(sp.GitDirs, findGit(rr)...)
	}
	for _, h := range s.opts.Hide {
		if hr, err := real(h); err == nil {
			sp.Hide = append(sp.Hide, hr)
		}
	}
	sp.Sockets = unixSockets(system, append(slices.Clone(sp.Writable), sp.Readable[len(system):]...))
	if s.pids != "" {
		procs, err := newPidsCgroup(s.pids, s.opts.Limits.Processes)
		if err != nil {
			return nil, fmt.Errorf("sandbox: the process limit's cgroup: %w", err)
		}
		sp.Cgroup = procs
	}
	return sp, nil
}

// findGit returns the `.git` entries (folders or files) and the bare repositories (found by what
// they hold, whatever their name) in root and its folders, bounded by
// gitWalkDepth and gitWalkMax, links not followed.
func findGit(root string) []string {
	var out []string
	seen := 0
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if d != nil && d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if d.Name() == ".git" || (d.IsDir() && workspace.IsGitDir(p)) || // a bare repository too
			(d.IsDir() && (d.Name() == ".zidane" || d.Name() == ".claude")) {
			out = append(out, p)
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if !d.IsDir() {
			return nil
		}
		seen++
		rel, _ := filepath.Rel(root, p)
		if seen > gitWalkMax || (rel != "." && strings.Count(rel, string(filepath.Separator)) >= gitWalkDepth) ||
			d.Name() == "node_modules" {
			return fs.SkipDir
		}
		return nil
	})
	return out
}

// unixSockets lists the named unix sockets bound in the server's network namespace
// (/proc/net/unix) that exist as sockets on the file system inside one of in and none of out.
// A socket bound with a relative path, or one bound later, is not listed: the view, not this
// list, keeps those out (only the folders of in are shown).
func unixSockets(in, out []string) []string {
	f, err := os.Open("/proc/net/unix")
	if err != nil {
		return nil
	}
	defer f.Close()
	var found []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		p, ok := socketPath(sc.Text())
		if !ok || !strings.HasPrefix(p, "/") || slices.Contains(found, p) ||
			!slices.ContainsFunc(in, func(d string) bool { return within(p, d) }) ||
			slices.ContainsFunc(out, func(d string) bool { return within(p, d) }) {
			continue
		}
		if fi, err := os.Lstat(p); err == nil && fi.Mode()&fs.ModeSocket != 0 {
			found = append(found, p)
		}
	}
	return found
}

// socketPath returns the path of a /proc/net/unix line ("Num RefCount Protocol Flags Type St
// Inode Path"): everything after the seventh field, spaces included.
func socketPath(line string) (string, bool) {
	rest := line
	for i := 0; i < 7; i++ {
		rest = strings.TrimLeft(rest, " ")
		j := strings.IndexByte(rest, ' ')
		if j < 0 {
			return "", false
		}
		rest = rest[j:]
	}
	if len(rest) < 2 {
		return "", false
	}
	return rest[1:], true
}

// viewDirs returns the folders (and files) every view shows read-only, links resolved: the system
// folders that exist (those that are links on the host come back as links) and the file a linked
// /etc/resolv.conf names, every absolute folder of env's PATH (and, for a PATH folder named bin,
// the prefix holding it, as a toolchain under a home folder needs: not the home folder itself,
// ~/.local or /), and expose.
func viewDirs(env, expose []string) (dirs []string, links map[string]string) {
	add := func(p string) {
		if p != "/" && !slices.Contains(dirs, p) {
			dirs = append(dirs, p)
		}
	}
	for _, d := range systemDirs {
		fi, err := os.Lstat(d)
		switch {
		case err != nil:
		case fi.Mode()&fs.ModeSymlink != 0:
			if target, err := os.Readlink(d); err == nil {
				if links == nil {
					links = map[string]string{}
				}
				links[d] = target
			}
		case fi.IsDir():
			add(d)
		}
	}
	// A resolv.conf that links out of /etc (to systemd-resolved's file in /run) is shown too, so
	// names resolve under the network policy.
	if r, err := filepath.EvalSymlinks("/etc/resolv.conf"); err == nil && r != "/etc/resolv.conf" {
		add(r)
	}
	home, _ := os.UserHomeDir()
	if h, err := filepath.EvalSymlinks(home); err == nil {
		home = h
	}
	for _, kv := range env {
		path, ok := strings.CutPrefix(kv, "PATH=")
		if !ok {
			continue
		}
		for _, d := range filepath.SplitList(path) {
			if !filepath.IsAbs(d) {
				continue
			}
			r, err := filepath.EvalSymlinks(d)
			if err != nil {
				continue
			}
			if fi, err := os.Stat(r); err != nil || !fi.IsDir() {
				continue
			}
			add(r)
			if prefix := filepath.Dir(r); filepath.Base(r) == "bin" && prefix != home && prefix != filepath.Join(home, ".local") {
				add(prefix)
			}
		}
	}
	for _, e := range expose {
		if r, err := filepath.EvalSymlinks(e); err == nil {
			add(r)
		}
	}
	return dirs, links
}

// prepare points cmd at the launcher with sp.
func prepare(cmd *exec.Cmd, sp *launchSpec) error {
	if !hooked.Load() {
		return errNoHook
	}
	raw, err := json.Marshal(sp)
	if err != nil {
		return err
	}
	if len(raw) > maxSpec {
		return errors.New("sandbox: the command and its environment are too long to sandbox (over 120 KiB)")
	}
	cmd.Path = "/proc/self/exe"
	cmd.Dir = "/"
	attr := cmd.SysProcAttr
	if attr == nil {
		attr = &syscall.SysProcAttr{}
		cmd.SysProcAttr = attr
	}
	attr.Pdeathsig = syscall.SIGKILL
	if needsSpawn() {
		// The spawn stage, a fresh exec and so dumpable, starts the init stage in its stead.
		cmd.Args = []string{"zidane-sandbox", "spawn"}
		cmd.Env = []string{stageEnv + "=spawn", specEnv + "=" + string(raw)}
		return nil
	}
	cmd.Args = []string{"zidane-sandbox", "init"}
	cmd.Env = []string{stageEnv + "=init", specEnv + "=" + string(raw)}
	initAttr(attr, sp.NewNet)
	return nil
}

// needsSpawn reports whether this process cannot start the init stage itself: a non-dumpable
// process (the server marks itself so at start) that is not root cannot write its child's
// uid_map, which the kernel then gives to root (issue 21 item 6).
func needsSpawn() bool {
	if os.Geteuid() == 0 {
		return false
	}
	d, err := unix.PrctlRetInt(unix.PR_GET_DUMPABLE, 0, 0, 0, 0)
	return err == nil && d != 1
}

// initAttr sets what starts the init stage: new namespaces, and the caller's ids mapped to root
// inside.
func initAttr(attr *syscall.SysProcAttr, newNet bool) {
	attr.Cloneflags |= syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS | syscall.CLONE_NEWPID | syscall.CLONE_NEWIPC | syscall.CLONE_NEWUTS
	if newNet {
		attr.Cloneflags |= syscall.CLONE_NEWNET
	}
	// Root inside maps to the server's user outside: the launcher holds capabilities only in the
	// new namespaces (to build the mounts), and files keep their owner, so the workspace stays
	// writable. The command itself gets no capability at all.
	attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}}
	attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}}
	attr.GidMappingsEnableSetgroups = false
	attr.Pdeathsig = syscall.SIGKILL
}
