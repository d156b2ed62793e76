package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// checkSelf is where a probe's view shows the launcher's binary, which runs as its command.
const checkSelf = "/run/zidane-sandbox-check"

// probeTimeout bounds one probe launch.
const probeTimeout = 10 * time.Second

// probe finds what works by launching the check stage in real sandboxes: with Landlock and
// namespaces (host network), then with a new network namespace too.
func (s *Sandbox) probe() Support {
	sup := Support{Available: map[Feature]bool{}, ProbedAt: time.Now()}
	sup.LandlockABI = landlockABI()
	sup.Available[Landlock] = sup.LandlockABI >= 1
	if !sup.Available[Landlock] {
		sup.Notes = append(sup.Notes, "The kernel has no Landlock: sandboxed policies cannot run.")
	}
	scratch, err := s.Scratch(".probe")
	if err != nil {
		sup.Notes = append(sup.Notes, err.Error())
		summarize(&sup)
		return sup
	}
	if r, err := s.launchCheck(scratch, false, sup.Available[Landlock]); err != nil {
		sup.Notes = append(sup.Notes, "Namespaces: "+err.Error()+namespacesRemedy(err))
		sup.reasons = map[Feature]string{Namespaces: sup.Notes[len(sup.Notes)-1]}
	} else if r.CapEff != "0000000000000000" || r.CapBnd != "0000000000000000" || r.NoNewPrivs != "1" || r.Pids > 3 || r.RootWritable {
		sup.Notes = append(sup.Notes, fmt.Sprintf("Namespaces: a sandboxed command kept privileges or reach (%+v).", r))
	} else {
		sup.Available[Namespaces] = true
	}
	if r, err := s.launchCheck(scratch, true, sup.Available[Landlock]); err != nil {
		sup.Notes = append(sup.Notes, "Network namespace: "+err.Error())
	} else if len(r.Interfaces) != 1 || r.Interfaces[0] != "lo" {
		sup.Notes = append(sup.Notes, fmt.Sprintf("Network namespace: a sandboxed command saw interfaces %v.", r.Interfaces))
	} else {
		sup.Available[NetNamespace] = true
	}
	if sup.LandlockABI >= 1 && sup.LandlockABI < 6 {
		sup.Notes = append(sup.Notes, fmt.Sprintf("Landlock ABI %d has no scopes: under workspace-write+network a command can reach abstract unix sockets of the host.", sup.LandlockABI))
	}
	switch {
	case s.pids != "":
		sup.Notes = append(sup.Notes, "The process limit is enforced by a pids cgroup under "+s.pids+".")
	case os.Geteuid() == 0:
		sup.Notes = append(sup.Notes, "The server runs as root without a usable pids cgroup: the kernel does not apply the process limit (RLIMIT_NPROC) to root's commands, so a fork bomb is stopped only by the command's timeout.")
	}
	for _, f := range Features {
		if s.forced(f) {
			sup.Available[f] = false
			sup.Notes = append(sup.Notes, fmt.Sprintf("%s is set unsupported by the server's settings.", f))
		}
	}
	for _, p := range Policies {
		ok := true
		for _, f := range p.Needs() {
			ok = ok && sup.Available[f]
		}
		if p == Off {
			ok = s.opts.AllowOff
		}
		if ok {
			sup.Policies = append(sup.Policies, p)
		}
	}
	summarize(&sup)
	return sup
}

func (s *Sandbox) launchCheck(scratch string, newNet, withLandlock bool) (*checkReport, error) {
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "/proc/self/exe")
	sp := &launchSpec{Path: checkSelf, Self: checkSelf, Args: []string{"zidane-sandbox", "check"}, Env: []string{stageEnv + "=check"},
		Dir: "/", Writable: []string{scratch}, Stage: scratch, NewNet: newNet, Landlock: withLandlock, Limits: DefaultLimits}
	sp.Readable, sp.Links = viewDirs(nil, s.opts.Expose)
	for _, h := range s.opts.Hide {
		sp.Hide = append(sp.Hide, h)
	}
	if err := prepare(cmd, sp); err != nil {
		return nil, err
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		if msg := strings.TrimSpace(errb.String()); msg != "" {
			return nil, fmt.Errorf("a sandboxed command did not run (%w): %s", err, msg)
		}
		return nil, fmt.Errorf("a sandboxed command did not run (%w)", err)
	}
	var r checkReport
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		return nil, fmt.Errorf("a sandboxed command's report: %w", err)
	}
	return &r, nil
}

// namespacesRemedy says why the kernel refused the sandbox's namespaces and what the operator can
// do, from the error and the kernel's settings ("" when the error is not such a refusal).
func namespacesRemedy(err error) string {
	if !errors.Is(err, syscall.EPERM) && !errors.Is(err, syscall.EACCES) && !errors.Is(err, syscall.ENOSPC) &&
		!strings.Contains(err.Error(), "zidane-sandbox: spawn:") {
		return ""
	}
	setting := func(p string) string {
		b, err := os.ReadFile(p)
		if err != nil {
			return ""
		}
		return strings.TrimSpace(string(b))
	}
	who := fmt.Sprintf("the server's user (uid %d)", os.Geteuid())
	switch {
	case setting("/proc/sys/user/max_user_namespaces") == "0":
		return " Cause: user namespaces are off (user.max_user_namespaces = 0). Remedy: sysctl -w user.max_user_namespaces=15000 (and in /etc/sysctl.d to keep it)."
	case os.Geteuid() != 0 && setting("/proc/sys/kernel/unprivileged_userns_clone") == "0":
		return " Cause: the kernel refuses user namespaces to unprivileged users (kernel.unprivileged_userns_clone = 0). Remedy: sysctl -w kernel.unprivileged_userns_clone=1, or run the server as root."
	case os.Geteuid() != 0 && setting("/proc/sys/kernel/apparmor_restrict_unprivileged_userns") == "1":
		return " Cause: AppArmor restricts unprivileged user namespaces (kernel.apparmor_restrict_unprivileged_userns = 1, Ubuntu 23.10 and later). Remedy: an AppArmor profile for the zidane-server binary that allows userns, or sysctl -w kernel.apparmor_restrict_unprivileged_userns=0, or run the server as root."
	default:
		return " Cause: the kernel, a security module or a container's seccomp profile refused " + who + " new user namespaces (check: unshare -Urn true, as that user). Remedy: allow them (a container: a seccomp profile that permits clone with CLONE_NEWUSER), or run the server as root."
	}
}
