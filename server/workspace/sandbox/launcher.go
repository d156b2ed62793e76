package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"

	"github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// Main runs the sandbox launcher when this process is one (the server re-executes its own binary
// for every sandboxed command) and then exits; otherwise it returns at once. Call it first thing
// in main, and in TestMain of every test package that runs sandboxed commands.
func Main() {
	switch os.Getenv(stageEnv) {
	case "":
		hooked.Store(true)
		return
	case "spawn":
		os.Exit(spawnStage())
	case "init":
		os.Exit(initStage())
	case "exec":
		os.Exit(execStage())
	case "check":
		os.Exit(checkStage())
	default:
		fmt.Fprintln(os.Stderr, "zidane-sandbox: unknown stage")
		os.Exit(125)
	}
}

// hooked is set by Main: without the hook, re-executing the binary would not reach the launcher
// (a test binary would run its tests again), so nothing is launched.
var hooked atomic.Bool

// errNoHook refuses a launch from a program that did not call Main.
var errNoHook = errors.New("sandbox: the launcher hook is not installed: call sandbox.Main() first thing in main (and in TestMain)")

// exitSetup is the exit status of a command whose sandbox could not be built (as env(1) and
// container runtimes use 125); the reason is on stderr, prefixed "zidane-sandbox:".
const exitSetup = 125

func fail(stage string, err error) int {
	fmt.Fprintf(os.Stderr, "zidane-sandbox: %s: %v\n", stage, err)
	return exitSetup
}

func readSpec() (*launchSpec, string, error) {
	raw := os.Getenv(specEnv)
	var sp launchSpec
	if err := json.Unmarshal([]byte(raw), &sp); err != nil {
		return nil, "", fmt.Errorf("bad spec: %w", err)
	}
	return &sp, raw, nil
}

// spawnStage starts the init stage for a non-dumpable parent (needsSpawn): freshly executed, it
// is dumpable, so it can write the init stage's uid_map, which its parent could not. It forwards
// signals to the init stage and exits with its status.
func spawnStage() int {
	sp, raw, err := readSpec()
	if err != nil {
		return fail("spawn", err)
	}
	attr := &syscall.SysProcAttr{}
	initAttr(attr, sp.NewNet)
	p, err := os.StartProcess("/proc/self/exe", []string{"zidane-sandbox", "init"}, &os.ProcAttr{
		Dir: "/", Env: []string{stageEnv + "=init", specEnv + "=" + raw},
		Files: []*os.File{os.Stdin, os.Stdout, os.Stderr}, Sys: attr,
	})
	if err != nil {
		return fail("spawn", err)
	}
	return forwardAndWait(p)
}

// forwardAndWait forwards the signals a command's launcher gets to p, reaps every child, and
// returns p's status as a shell would (128+N when signal N killed it).
func forwardAndWait(p *os.Process) int {
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2)
	go func() {
		for s := range sigs {
			_ = syscall.Kill(p.Pid, s.(syscall.Signal))
		}
	}()
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, 0, nil)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return fail("wait", err)
		}
		if pid != p.Pid {
			continue
		}
		if ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ws.ExitStatus()
	}
}

// initStage is PID 1 of the sandbox's PID namespace, holding capabilities only in the new user
// namespace: it builds the mounts and the network, starts the exec stage, forwards signals to it,
// reaps every orphan, and exits with the command's status. When it exits the kernel kills every
// process left in the namespace.
func initStage() int {
	sp, raw, err := readSpec()
	if err != nil {
		return fail("init", err)
	}
	if sp.Cgroup != "" {
		if err := os.WriteFile(sp.Cgroup, []byte("0"), 0); err != nil {
			return fail("cgroup", err)
		}
	}
	if err := buildView(sp); err != nil {
		return fail("view", err)
	}
	if sp.NewNet {
		if err := loopbackUp(); err != nil {
			return fail("network", err)
		}
	}
	p, err := os.StartProcess("/proc/self/exe", []string{"zidane-sandbox", "exec"}, &os.ProcAttr{
		Dir: "/", Env: []string{stageEnv + "=exec", specEnv + "=" + raw},
		Files: []*os.File{os.Stdin, os.Stdout, os.Stderr},
		Sys:   &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL},
	})
	if err != nil {
		return fail("init", err)
	}
	return forwardAndWait(p)
}

// loopbackUp brings up the new network namespace's loopback (the namespace's own; the host's
// stays unreachable).
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	return unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
}

// landlockConfigs are go-landlock's configurations by ABI version.
var landlockConfigs = []landlock.Config{landlock.V1, landlock.V1, landlock.V2, landlock.V3, landlock.V4,
	landlock.V5, landlock.V6, landlock.V7, landlock.V8, landlock.V9, landlock.V10, landlock.V11}

// landlockABI returns the kernel's Landlock ABI version, 0 without Landlock.
func landlockABI() int {
	v, err := ll.LandlockGetABIVersion()
	if err != nil || v < 0 {
		return 0
	}
	return v
}

// landlockRules builds the ruleset of the command's Landlock domain: read and execute the whole
// view, write only the writable folders, the private /tmp, /run and /dev/shm and the harmless
// devices; and with ABI 6 or later, no abstract unix socket and no signal outside the domain.
func landlockRules(sp *launchSpec, abi int) (fd int, flags uint32, err error) {
	base := landlockConfigs[min(abi, len(landlockConfigs)-1)]
	cfg := landlock.Config{HandledAccessFS: base.HandledAccessFS, Scoped: base.Scoped}
	rw := landlock.RWDirs(append(slices.Clone(sp.Writable), "/dev/shm", "/tmp", "/run")...)
	if abi >= 2 {
		rw = rw.WithRefer()
	}
	devFiles := landlock.RWFiles("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty").IgnoreIfMissing()
	pts := landlock.RWDirs("/dev/pts")
	if abi >= 5 {
		devFiles, pts = devFiles.WithIoctlDev(), pts.WithIoctlDev()
	}
	return cfg.NewRulesetFD(landlock.RODirs("/"), rw, devFiles, pts)
}

// Secure bits that keep a uid-0 process from regaining capabilities at execve.
const secureBits = 1<<0 | 1<<1 | 1<<2 | 1<<3 | 1<<5 | 1<<6 | 1<<7 // NOROOT, NO_SETUID_FIXUP, KEEP_CAPS_LOCKED, NO_CAP_AMBIENT_RAISE (each locked)

// execStage runs on one locked thread: Landlock, no_new_privs, every capability dropped (bounding
// set, ambient, inheritable, permitted, effective; secure bits locked), the limits, then execve of
// the command. It returns only on failure.
func execStage() int {
	runtime.LockOSThread() // never unlocked: the restrictions are this thread's, and it execs
	sp, _, err := readSpec()
	if err != nil {
		return fail("exec", err)
	}
	if sp.Landlock {
		abi := landlockABI()
		if abi < 1 {
			return fail("landlock", errors.New("the kernel has no Landlock"))
		}
		fd, flags, err := landlockRules(sp, abi)
		if err != nil {
			return fail("landlock", err)
		}
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			return fail("no_new_privs", err)
		}
		if err := ll.LandlockRestrictSelf(fd, flags); err != nil {
			return fail("landlock", err)
		}
		unix.Close(fd)
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fail("no_new_privs", err)
	}
	if err := dropCapabilities(); err != nil {
		return fail("capabilities", err)
	}
	l := sp.Limits.withDefaults()
	for _, r := range []struct {
		res int
		v   uint64
	}{{unix.RLIMIT_CPU, l.CPUSeconds}, {unix.RLIMIT_AS, l.MemoryBytes}, {unix.RLIMIT_NPROC, l.Processes},
		{unix.RLIMIT_FSIZE, l.FileBytes}, {unix.RLIMIT_CORE, 0}} {
		if err := unix.Setrlimit(r.res, &unix.Rlimit{Cur: r.v, Max: r.v}); err != nil {
			return fail("limits", err)
		}
	}
	if err := unix.Chdir(sp.Dir); err != nil {
		return fail("exec", fmt.Errorf("folder %s: %w", sp.Dir, err))
	}
	// Only stdin, stdout and stderr reach the command (field case T05): every other descriptor,
	// whoever opened it and whatever its flags, closes at the execve.
	if err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err != nil {
		return fail("exec", fmt.Errorf("close descriptors: %w", err))
	}
	err = syscall.Exec(sp.Path, sp.Args, sp.Env)
	return fail("exec", fmt.Errorf("%s: %w", sp.Path, err))
}

func dropCapabilities() error {
	if err := unix.Prctl(unix.PR_SET_SECUREBITS, secureBits, 0, 0, 0); err != nil {
		return fmt.Errorf("securebits: %w", err)
	}
	for c := 0; c < 64; c++ {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil {
			if err == unix.EINVAL {
				break
			}
			return fmt.Errorf("bounding set: %w", err)
		}
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
		return fmt.Errorf("ambient: %w", err)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	return unix.Capset(&hdr, &data[0])
}

// checkReport is what the check stage prints: the facts the probe checks.
type checkReport struct {
	CapEff, CapBnd, CapPrm string
	NoNewPrivs             string
	Pids                   int
	Interfaces             []string
	RootWritable           bool
}

// checkStage runs inside a sandbox (as the command) and reports what it can see and do.
func checkStage() int {
	var r checkReport
	if b, err := os.ReadFile("/proc/self/status"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			k, v, _ := strings.Cut(line, ":")
			v = strings.TrimSpace(v)
			switch k {
			case "CapEff":
				r.CapEff = v
			case "CapBnd":
				r.CapBnd = v
			case "CapPrm":
				r.CapPrm = v
			case "NoNewPrivs":
				r.NoNewPrivs = v
			}
		}
	}
	if ents, err := os.ReadDir("/proc"); err == nil {
		for _, e := range ents {
			if e.Name()[0] >= '0' && e.Name()[0] <= '9' {
				r.Pids++
			}
		}
	}
	if b, err := os.ReadFile("/proc/net/dev"); err == nil {
		for _, line := range strings.Split(string(b), "\n")[2:] {
			if name, _, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
				r.Interfaces = append(r.Interfaces, name)
			}
		}
	}
	probe := filepath.Join("/", fmt.Sprintf(".zidane-sandbox-probe-%d", os.Getpid()))
	if err := os.Mkdir(probe, 0o700); err == nil {
		r.RootWritable = true
		os.Remove(probe)
	}
	_ = json.NewEncoder(os.Stdout).Encode(r)
	return 0
}
