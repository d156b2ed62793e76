package sandbox

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// RLIMIT_NPROC is not enforced for host root's processes (the kernel exempts the root user
// whatever the namespace), so a server running as root caps a command's processes with the pids
// cgroup controller too: each command gets a cgroup of its own under
// <pids hierarchy>/zidane-sandbox/, which the launcher joins before it starts anything.

// pidsBase returns the folder under which command cgroups are made, or "" when no pids
// controller is usable: a cgroup v1 pids hierarchy, or cgroup v2 whose root (where the server
// must then run) enables pids for its children.
func pidsBase() string {
	if os.Geteuid() != 0 {
		return ""
	}
	own := map[string]string{} // controller -> the server's cgroup path
	if f, err := os.Open("/proc/self/cgroup"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			parts := strings.SplitN(sc.Text(), ":", 3)
			if len(parts) == 3 {
				for _, c := range strings.Split(parts[1], ",") {
					own[c] = parts[2]
				}
			}
		}
		f.Close()
	}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		pf, qf := strings.Fields(pre), strings.Fields(post)
		if len(pf) < 5 || len(qf) < 3 {
			continue
		}
		mnt := pf[4]
		switch {
		case qf[0] == "cgroup" && hasOpt(qf[2], "pids"):
			return filepath.Join(mnt, own["pids"], "zidane-sandbox")
		case qf[0] == "cgroup2" && own[""] == "/":
			if b, err := os.ReadFile(filepath.Join(mnt, "cgroup.subtree_control")); err == nil && hasWord(string(b), "pids") {
				return filepath.Join(mnt, "zidane-sandbox")
			}
		}
	}
	return ""
}

func hasOpt(opts, name string) bool {
	for _, o := range strings.Split(opts, ",") {
		if o == name {
			return true
		}
	}
	return false
}

func hasWord(s, w string) bool {
	for _, f := range strings.Fields(s) {
		if f == w {
			return true
		}
	}
	return false
}

var cgroupSeq atomic.Uint64

// cgroupKeep is how long a command's cgroup is kept before it may be removed once empty: a
// cgroup is empty from its creation until its launcher joins it, and another command (or another
// server) must not remove it meanwhile.
const cgroupKeep = time.Minute

// newPidsCgroup makes a cgroup under base allowing at most max tasks, and returns its
// cgroup.procs file (for the launcher to join). Empty cgroups older than cgroupKeep (of finished
// commands) are removed first.
func newPidsCgroup(base string, max uint64) (string, error) {
	if err := os.MkdirAll(base, 0o755); err != nil {
		return "", err
	}
	now := time.Now()
	if ents, err := os.ReadDir(base); err == nil {
		for _, e := range ents {
			// Names are p<pid>-<seq>-<unix seconds of creation>.
			parts := strings.Split(e.Name(), "-")
			if !e.IsDir() || len(parts) != 3 {
				continue
			}
			if at, err := strconv.ParseInt(parts[2], 10, 64); err == nil && now.Sub(time.Unix(at, 0)) > cgroupKeep {
				_ = os.Remove(filepath.Join(base, e.Name())) // fails while tasks remain
			}
		}
	}
	dir := filepath.Join(base, fmt.Sprintf("p%d-%d-%d", os.Getpid(), cgroupSeq.Add(1), now.Unix()))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, "pids.max"), []byte(strconv.FormatUint(max, 10)), 0o644); err != nil {
		_ = os.Remove(dir)
		return "", err
	}
	return filepath.Join(dir, "cgroup.procs"), nil
}
