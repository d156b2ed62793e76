package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
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
		sup.Notes = append(sup.Notes, "Namespaces: "+err.Error())
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
		return nil, fmt.Errorf("a sandboxed command did not run (%v): %s", err, strings.TrimSpace(errb.String()))
	}
	var r checkReport
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		return nil, fmt.Errorf("a sandboxed command's report: %w", err)
	}
	return &r, nil
}
