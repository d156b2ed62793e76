package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// groupAlive returns the live (not zombie) processes whose process group is pgid, read from /proc
// (what `pgrep -g pgid` does).
func groupAlive(t *testing.T, pgid int) []int {
	t.Helper()
	des, err := os.ReadDir("/proc")
	require.NoError(t, err)
	var out []int
	for _, d := range des {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", d.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp ...
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
		if len(f) > 2 && f[2] == strconv.Itoa(pgid) && f[0] != "Z" && f[0] != "X" {
			out = append(out, pid)
		}
	}
	return out
}

// alive reports whether pid runs and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	st := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])[0]
	return st != "Z" && st != "X"
}

// waitFile waits until the file holds n lines and returns them as pids.
func waitPids(t *testing.T, file string, n int) []int {
	t.Helper()
	var pids []int
	require.Eventually(t, func() bool {
		b, err := os.ReadFile(file)
		if err != nil {
			return false
		}
		pids = nil
		for _, l := range strings.Fields(string(b)) {
			p, err := strconv.Atoi(l)
			if err == nil {
				pids = append(pids, p)
			}
		}
		return len(pids) >= n
	}, 5*time.Second, 10*time.Millisecond)
	return pids
}

func execInputJSON(cmd string, timeout int) json.RawMessage {
	m := map[string]any{"command": cmd}
	if timeout > 0 {
		m["timeout"] = timeout
	}
	b, _ := json.Marshal(m)
	return b
}

func TestExecBasics(t *testing.T) {
	f := newFixture(t)
	res := f.run(t, "exec", `{"command":"pwd; echo err >&2; exit 3"}`)
	assert.True(t, res.IsError)
	assert.Equal(t, f.ws+"\nerr\n[exit code 3]", res.Content)
	res = f.run(t, "exec", `{"command":"cat"}`)
	assert.False(t, res.IsError, "stdin is empty: %s", res.Content)

	f.env.Cwd = filepath.Join(f.ws, "sub")
	res = f.run(t, "exec", `{"command":"pwd"}`)
	assert.True(t, strings.HasPrefix(res.Content, f.ws+"/sub\n"), res.Content)

	f.env.Config.OutputMaxBytes = 100
	res = f.run(t, "exec", `{"command":"seq 1 1000"}`)
	assert.True(t, res.Truncated)
	assert.True(t, strings.HasPrefix(res.Content, "1\n2\n3\n"), res.Content)
	assert.Contains(t, res.Content, "bytes omitted from the middle")
	assert.Contains(t, res.Content, "999\n1000\n[exit code 0")
}

// TestExecLauncher: a Launcher sees the command and its folder and can wrap it; the process group
// is kept whatever the launcher sets.
func TestExecLauncher(t *testing.T) {
	f := newFixture(t)
	var seen LaunchRequest
	f.env.Config.Launcher = LauncherFunc(func(cmd *exec.Cmd, req LaunchRequest) (Launched, error) {
		seen = req
		cmd.Args = append([]string{cmd.Args[0], "-c", "echo wrapped; " + cmd.Args[2]}, cmd.Args[3:]...)
		cmd.SysProcAttr = nil
		return Launched{Sandbox: "test-policy"}, nil
	})
	res := f.run(t, "exec", `{"command":"echo inner; ps -o pgid= -p $$; ps -o pid= -p $$"}`)
	require.False(t, res.IsError, res.Content)
	lines := strings.Fields(res.Content)
	assert.Equal(t, "wrapped", lines[0])
	assert.Equal(t, "inner", lines[1])
	assert.Equal(t, lines[2], lines[3], "the shell leads its own process group")
	assert.Equal(t, "echo inner; ps -o pgid= -p $$; ps -o pid= -p $$", seen.Command)
	assert.Equal(t, f.ws, seen.Dir.Abs())
	assert.Equal(t, []string{f.ws}, seen.Roots)
	assert.Equal(t, "test-policy", res.Sandbox)
	assert.Contains(t, res.Content, "[sandbox test-policy]")
}

// TestRuntimeCase_R26_ExecEnvironmentHasNoSecrets: the child environment is an allowlist.
func TestRuntimeCase_R26_ExecEnvironmentHasNoSecrets(t *testing.T) {
	f := newFixture(t)
	secrets := map[string]string{"OPENAI_API_KEY": "sk-fake-R26", "ANTHROPIC_API_KEY": "sk-ant-fake-R26",
		"DATABASE_URL": "postgres://z:pw-R26@127.0.0.1/z", "MY_LLM_KEY": "sk-fake-R26b", "ZIDANE_TOKEN": "zds_R26"}
	for k, v := range secrets {
		t.Setenv(k, v)
	}
	t.Setenv("LANG", "C.UTF-8")
	for _, cmd := range []string{"env", "cat /proc/self/environ", "set", "declare -x"} {
		res := f.run(t, "exec", string(execInputJSON(cmd, 0)))
		require.False(t, res.IsError, res.Content)
		for k, v := range secrets {
			assert.NotContains(t, res.Content, v, cmd)
			assert.NotContains(t, res.Content, k+"=", cmd)
		}
		if cmd == "env" {
			assert.Contains(t, res.Content, "PATH=")
			assert.Contains(t, res.Content, "LANG=C.UTF-8")
		}
	}
}

// TestRuntimeCase_R27_CancelAndTimeoutKillTheTree: cancel and timeout kill the whole process
// group within a second (SIGKILL after a short grace, so a trap on TERM does not hold it), and a
// process that left the group does not make the tool hang on the pipe.
func TestRuntimeCase_R27_CancelAndTimeoutKillTheTree(t *testing.T) {
	cases := []struct {
		name, cmd string
		npids     int
		timeout   int
	}{
		{"background jobs, cancel", `echo $$ > pids; sleep 60 & echo $! >> pids; sleep 61 & echo $! >> pids; wait`, 3, 0},
		{"trap TERM, cancel", `echo $$ > pids; trap '' TERM INT; sleep 62 & echo $! >> pids; wait`, 2, 0},
		{"timeout", `echo $$ > pids; sleep 63 & echo $! >> pids; wait`, 2, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			type out struct {
				res *Result
				err error
				at  time.Time
			}
			done := make(chan out, 1)
			start := time.Now()
			go func() {
				res, err := Exec{}.Run(ctx, f.env, execInputJSON(c.cmd, c.timeout))
				done <- out{res, err, time.Now()}
			}()
			pids := waitPids(t, filepath.Join(f.ws, "pids"), c.npids)
			pgid := pids[0]
			require.NotEmpty(t, groupAlive(t, pgid))
			var trigger time.Time
			if c.timeout == 0 {
				time.Sleep(500*time.Millisecond - time.Since(start))
				trigger = time.Now()
				cancel()
			} else {
				trigger = start.Add(time.Duration(c.timeout) * time.Second)
			}
			var o out
			select {
			case o = <-done:
			case <-time.After(5 * time.Second):
				t.Fatal("exec did not return")
			}
			t.Logf("returned %s after the trigger", o.at.Sub(trigger).Round(time.Millisecond))
			assert.Less(t, o.at.Sub(trigger), time.Second, "returned within a second of the trigger")
			require.Eventually(t, func() bool { return len(groupAlive(t, pgid)) == 0 }, time.Second-o.at.Sub(trigger), 10*time.Millisecond, "no process left in the group")
			for _, p := range pids {
				assert.False(t, alive(p), "pid %d", p)
			}
			assert.True(t, o.res.IsError)
			if c.timeout == 0 {
				assert.ErrorIs(t, o.err, context.Canceled)
				assert.Contains(t, o.res.Content, "cancelled")
			} else {
				require.NoError(t, o.err)
				assert.Contains(t, o.res.Content, "timed out after 1s")
			}
		})
	}
	t.Run("setsid leaves the group, the tool still returns", func(t *testing.T) {
		f := newFixture(t)
		start := time.Now()
		res, err := Exec{}.Run(context.Background(), f.env, execInputJSON(`(setsid sleep 64 & echo $! > esc.pid); echo started`, 5))
		require.NoError(t, err)
		elapsed := time.Since(start)
		pids := waitPids(t, filepath.Join(f.ws, "esc.pid"), 1)
		t.Cleanup(func() { _ = syscall.Kill(pids[0], syscall.SIGKILL) })
		assert.Contains(t, res.Content, "started")
		assert.Less(t, elapsed, 2*time.Second, "returned after the pipe-drain delay, not the sleep")
	})
}
