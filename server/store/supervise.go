package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Supervision of the managed Postgres (issue 22 item 3, field case T13): the server owns the
// cluster it starts, so when its postmaster exits it restarts it, or exits itself for its own
// supervisor to see.

// Defaults of SuperviseOptions.
const (
	// DefaultMaxRestarts is how many restarts in a row may fail before Supervise gives up.
	DefaultMaxRestarts = 5
	// DefaultRestartBackoff is the wait before the first restart after the postmaster exited.
	DefaultRestartBackoff = 500 * time.Millisecond
	// MaxRestartBackoff caps the doubling wait between restarts.
	MaxRestartBackoff = 30 * time.Second
	// RestartStableAfter is how long a postmaster stays up before its next exit waits
	// RestartBackoff again rather than twice the last wait.
	RestartStableAfter = time.Minute
)

// cleanExitGrace is how long after a clean exit of its postmaster (exit status 0: a shutdown
// someone asked for, such as pg_ctl restart) Supervise waits for another postmaster to serve the
// cluster before it restarts one itself.
const cleanExitGrace = 2 * time.Second

const adoptMsg = "managed postgres: another postmaster serves the cluster (started outside this server, e.g. pg_ctl); watching it"

// SuperviseOptions tunes Managed.Supervise. The zero value is valid.
type SuperviseOptions struct {
	// MaxRestarts is how many restarts in a row may fail (postgres exits before it accepts
	// connections, or does not accept them within 30 s) before Supervise gives up; 0 means
	// DefaultMaxRestarts.
	MaxRestarts int
	// Backoff is the wait before the first restart after an exit; every further restart waits
	// twice the previous wait, up to MaxRestartBackoff, until a postmaster has stayed up for
	// RestartStableAfter. 0 means DefaultRestartBackoff.
	Backoff time.Duration
}

// Supervise watches the cluster's postmaster until ctx ends or Stop is called (it returns nil
// then). When the postmaster exits, it logs one line at error level (its pid, exit status and
// the log file), lets the processes it left end, and starts it again after the backoff; a
// restart that fails is logged with the next wait, and after MaxRestarts failed restarts in a
// row Supervise returns an error naming the log file (the caller exits non-zero). A postmaster
// that someone else started on the cluster meanwhile (pg_ctl) is watched, not fought. Call it
// once, after StartManaged.
func (m *Managed) Supervise(ctx context.Context, o SuperviseOptions) error {
	if o.MaxRestarts <= 0 {
		o.MaxRestarts = DefaultMaxRestarts
	}
	if o.Backoff <= 0 {
		o.Backoff = DefaultRestartBackoff
	}
	delay := o.Backoff
	for {
		pid, status, upFor, ok := m.waitDown(ctx)
		if !ok {
			return nil
		}
		if upFor >= RestartStableAfter {
			delay = o.Backoff
		}
		m.log.Error("managed postgres: the postmaster exited; restarting it", "pid", pid, "status", status,
			"up", upFor.Round(time.Millisecond), "log", m.LogPath(), "restart_in", delay)
		for failed := 0; ; {
			if !m.sleep(ctx, delay) {
				return nil
			}
			delay = min(2*delay, MaxRestartBackoff)
			newPID, adopted, err := m.restart(ctx)
			if m.ending(ctx) {
				return nil
			}
			if err == nil {
				if adopted {
					m.log.Warn(adoptMsg, "pid", newPID)
				} else {
					m.log.Info("managed postgres: restarted", "pid", newPID, "url", m.URL())
				}
				break
			}
			failed++
			if failed >= o.MaxRestarts {
				m.log.Error("managed postgres: giving up", "failed_restarts", failed, "log", m.LogPath(), "err", err)
				return fmt.Errorf("managed postgres: %d restarts in a row failed (see %s): %w", failed, m.LogPath(), err)
			}
			m.log.Warn("managed postgres: restart failed", "attempt", failed, "of", o.MaxRestarts, "next_in", delay, "log", m.LogPath(), "err", err)
		}
	}
}

// waitDown waits until the postmaster serving the cluster exits: our child, or the one
// postmaster.pid names that we adopted. It returns its pid, exit status and uptime; ok is false
// when ctx ended or Stop was called first.
func (m *Managed) waitDown(ctx context.Context) (pid int, status string, upFor time.Duration, ok bool) {
	for {
		m.mu.Lock()
		c, adopted, adoptedAt := m.cur, m.adopted, m.adoptedAt
		m.mu.Unlock()
		if adopted > 0 {
			for !processGone(adopted) {
				if !m.sleep(ctx, 250*time.Millisecond) {
					return 0, "", 0, false
				}
			}
			drainGroup(adopted) // pg_ctl starts it as a session (and group) leader
			m.mu.Lock()
			m.adopted = 0
			m.mu.Unlock()
			return adopted, "unknown (not this server's child)", time.Since(adoptedAt), true
		}
		select {
		case <-ctx.Done():
			return 0, "", 0, false
		case <-m.stopCh:
			return 0, "", 0, false
		case <-c.done:
		}
		if m.ending(ctx) {
			return 0, "", 0, false
		}
		pid = c.cmd.Process.Pid
		drainGroup(pid)
		pm := m.postmasterPID()
		// A clean exit is a shutdown someone asked for, maybe pg_ctl restart: give its postmaster
		// time to appear rather than race it for the cluster.
		for wait := time.Now().Add(cleanExitGrace); pm == 0 && c.err == nil && time.Now().Before(wait); pm = m.postmasterPID() {
			if !m.sleep(ctx, 50*time.Millisecond) {
				return 0, "", 0, false
			}
		}
		if pm > 0 {
			m.log.Warn(adoptMsg, "pid", pm, "exited", pid, "status", exitStatus(c.err))
			m.mu.Lock()
			m.adopted, m.adoptedAt = pm, time.Now()
			m.mu.Unlock()
			continue
		}
		return pid, exitStatus(c.err), time.Since(c.started), true
	}
}

// restart starts a postmaster again and waits until it accepts connections. When a live
// postmaster of the cluster is there already, it adopts it instead (adopted true).
func (m *Managed) restart(ctx context.Context) (pid int, adopted bool, err error) {
	if pm := m.postmasterPID(); pm > 0 {
		m.mu.Lock()
		m.adopted, m.adoptedAt = pm, time.Now()
		m.mu.Unlock()
		return pm, true, nil
	}
	if err := m.checkNotRunning(); err != nil {
		return 0, false, err
	}
	from, _ := m.logFile.Seek(0, io.SeekEnd)
	m.mu.Lock()
	if m.stopping {
		m.mu.Unlock()
		return 0, false, errors.New("stopping")
	}
	c, err := m.launch()
	if err == nil {
		m.cur = c
	}
	m.mu.Unlock()
	if err != nil {
		return 0, false, err
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-m.stopCh:
			cancel()
		case <-rctx.Done():
		}
	}()
	if err := m.waitReady(rctx, c); err != nil {
		if !c.exited() && !m.ending(ctx) { // not ready in time: end it before the next attempt (Stop ends it otherwise)
			_ = c.cmd.Process.Signal(syscall.SIGQUIT)
			if !waitGone(c, c.exited, 10*time.Second) {
				_ = c.cmd.Process.Kill()
				<-c.done
			}
		}
		if line := lastLine(m.logTail(from)); line != "" {
			err = fmt.Errorf("%w (log: %s)", err, line)
		}
		return 0, false, err
	}
	return c.cmd.Process.Pid, false, nil
}

// ending reports whether ctx ended or Stop was called.
func (m *Managed) ending(ctx context.Context) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.stopping || ctx.Err() != nil
}

// sleep waits d; false when ctx ended or Stop was called first.
func (m *Managed) sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-m.stopCh:
		return false
	case <-t.C:
		return !m.ending(ctx)
	}
}

// exitStatus describes a postmaster's cmd.Wait result: "exit status 1", "signal: killed".
func exitStatus(err error) string {
	if err == nil {
		return "exit status 0"
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.String()
	}
	return err.Error()
}

// lastLine is the last non-empty line of s.
func lastLine(s string) string {
	s = strings.TrimRight(s, "\n ")
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return strings.TrimSpace(s)
}

// drainGroup asks the processes an exited postmaster left in its process group (backends and
// auxiliary processes; they end by themselves when they notice) to quit, and waits up to 5 s
// until none is left, so the next postmaster does not find their shared memory still attached.
// A process group id is not reused while a member lives.
func drainGroup(pgid int) {
	if err := syscall.Kill(-pgid, syscall.SIGQUIT); err != nil {
		return // none left
	}
	deadline := time.Now().Add(5 * time.Second)
	for groupAlive(pgid) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
}

// groupAlive reports whether a process other than a zombie is in process group pgid.
func groupAlive(pgid int) bool {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return false
	}
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp ...: comm may hold spaces and parentheses.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 3 || f[0] == "Z" || f[0] == "X" {
			continue
		}
		if g, err := strconv.Atoi(f[2]); err == nil && g == pgid {
			return true
		}
	}
	return false
}
