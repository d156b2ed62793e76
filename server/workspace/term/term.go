// Package term runs project terminals (protocol seed "terminal"): a command or a shell in a
// pseudo-terminal (github.com/creack/pty), its output streamed through a callback that may block
// (flow control: while it blocks nothing more is read, so the program blocks on its writes), input,
// resize, and a kill that reaches every process of the terminal's session. It imports nothing of
// the transport.
package term

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"
)

// Options start a terminal.
type Options struct {
	// Dir is the folder the program starts in (already confined by the caller).
	Dir string
	// Argv is the program and its arguments; empty starts Shell().
	Argv []string
	// Env is the program's whole environment; nil means CleanEnv().
	Env []string
	// Cols and Rows are the initial size; 0 means 80×24.
	Cols, Rows uint16
	// Prepare, when set, may change the command before it starts (the sandbox hook: it can wrap
	// the program or set its SysProcAttr fields other than Setsid and Setctty). An error refuses
	// the start.
	Prepare func(*exec.Cmd) error
}

// Exit is how a terminal's program ended: Code is its exit status, or -1 when a signal
// ended it, named by Signal (e.g. "SIGKILL").
type Exit struct {
	Code   int
	Signal string
}

// Terminal is one running program in a pseudo-terminal.
type Terminal struct {
	cmd    *exec.Cmd
	ptmx   *os.File
	pid    int
	mu     sync.Mutex
	closed bool
	done   chan struct{} // closed once exited has been called
}

// Shell is the program started when Options.Argv is empty: $SHELL when it is an absolute path to
// an executable, else /bin/bash, else /bin/sh.
func Shell() string {
	if s := os.Getenv("SHELL"); filepath.IsAbs(s) {
		if fi, err := os.Stat(s); err == nil && fi.Mode()&0o111 != 0 {
			return s
		}
	}
	if _, err := os.Stat("/bin/bash"); err == nil {
		return "/bin/bash"
	}
	return "/bin/sh"
}

// CleanEnv is a terminal's default environment: the server's PATH, HOME, USER, LOGNAME and
// LANG, TERM=xterm-256color and SHELL; nothing else of the server's environment (its database
// URL, tokens, keys) reaches the terminal.
func CleanEnv() []string {
	env := []string{"TERM=xterm-256color", "COLORTERM=truecolor", "SHELL=" + Shell()}
	for _, k := range []string{"PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "TZ"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	if _, ok := os.LookupEnv("PATH"); !ok {
		env = append(env, "PATH=/usr/local/bin:/usr/bin:/bin")
	}
	return env
}

// Start runs the program in a new session with the pseudo-terminal as its controlling terminal.
// output receives the terminal's output as valid UTF-8 text (a character split across reads is
// held until it is whole; invalid bytes become U+FFFD), in order, from one goroutine; while it
// blocks the terminal is not read. exited runs once, after the last output, when the program has
// ended and its output is drained (or 2 s after it ended, when other processes of the session
// still hold the terminal open).
func Start(o Options, output func(string), exited func(Exit)) (*Terminal, error) {
	argv := o.Argv
	if len(argv) == 0 {
		argv = []string{Shell()}
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = o.Dir
	cmd.Env = o.Env
	if cmd.Env == nil {
		cmd.Env = CleanEnv()
	}
	cols, rows := o.Cols, o.Rows
	if cols == 0 {
		cols = 80
	}
	if rows == 0 {
		rows = 24
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{}
	if o.Prepare != nil {
		if err := o.Prepare(cmd); err != nil {
			return nil, err
		}
	}
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	attrs := *cmd.SysProcAttr
	attrs.Setsid, attrs.Setctty, attrs.Setpgid = true, true, false
	master, err := pty.StartWithAttrs(cmd, &pty.Winsize{Cols: cols, Rows: rows}, &attrs)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", argv[0], err)
	}
	// A non-blocking copy of the master, so reads go through Go's poller and Close interrupts
	// them (pty's own file is in blocking mode).
	fd, err := unix.Dup(int(master.Fd()))
	master.Close()
	if err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		return nil, err
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		cmd.Process.Kill()
		cmd.Wait()
		return nil, err
	}
	t := &Terminal{cmd: cmd, ptmx: os.NewFile(uintptr(fd), "/dev/ptmx"), pid: cmd.Process.Pid, done: make(chan struct{})}
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		t.pump(output)
	}()
	go func() {
		err := cmd.Wait()
		select {
		case <-readDone:
		case <-time.After(2 * time.Second):
		}
		t.mu.Lock()
		t.closed = true
		t.ptmx.Close()
		t.mu.Unlock()
		<-readDone
		exited(exitOf(cmd, err))
		close(t.done)
	}()
	return t, nil
}

// pump reads the master until it fails (EIO once every slave side is closed, or Close).
func (t *Terminal) pump(output func(string)) {
	buf := make([]byte, 32<<10)
	var held []byte
	for {
		n, err := t.ptmx.Read(buf[len(held):])
		if n > 0 {
			chunk := buf[:len(held)+n]
			cut := completeUTF8(chunk)
			text := chunk[:cut]
			if len(text) > 0 {
				output(strings.ToValidUTF8(string(text), "\uFFFD"))
			}
			held = append(held[:0], chunk[cut:]...)
			copy(buf, held)
		}
		if err != nil {
			if len(held) > 0 {
				output(strings.ToValidUTF8(string(held), "\uFFFD"))
			}
			return
		}
	}
}

// completeUTF8 returns the length of b without a trailing, incomplete UTF-8 sequence (at most 3
// bytes are held back; anything else is left for ToValidUTF8 to replace).
func completeUTF8(b []byte) int {
	for i := 1; i <= 3 && i <= len(b); i++ {
		c := b[len(b)-i]
		if c < 0x80 {
			return len(b) // ASCII: nothing pending
		}
		if c >= 0xC0 { // a lead byte: is its sequence complete?
			if utf8.FullRune(b[len(b)-i:]) {
				return len(b)
			}
			return len(b) - i
		}
	}
	return len(b)
}

func exitOf(cmd *exec.Cmd, err error) Exit {
	ps := cmd.ProcessState
	if ps == nil {
		return Exit{Code: -1, Signal: "SIGKILL"}
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return Exit{Code: -1, Signal: unix.SignalName(ws.Signal())}
	}
	return Exit{Code: ps.ExitCode()}
}

// Pid is the program's process id; it leads the terminal's session and process group.
func (t *Terminal) Pid() int { return t.pid }

// ErrClosed: the terminal's program has ended.
var ErrClosed = errors.New("terminal closed")

// Write sends input to the program as typed keys.
func (t *Terminal) Write(p []byte) error {
	t.mu.Lock()
	closed := t.closed
	t.mu.Unlock()
	if closed {
		return ErrClosed
	}
	for len(p) > 0 {
		n, err := t.ptmx.Write(p)
		if err != nil {
			if errors.Is(err, os.ErrClosed) {
				return ErrClosed
			}
			return err
		}
		p = p[n:]
	}
	return nil
}

// Resize sets the terminal's size in character cells; the program gets SIGWINCH.
func (t *Terminal) Resize(cols, rows uint16) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return ErrClosed
	}
	sc, err := t.ptmx.SyscallConn()
	if err != nil {
		return err
	}
	var ierr error
	if err := sc.Control(func(fd uintptr) {
		ierr = unix.IoctlSetWinsize(int(fd), unix.TIOCSWINSZ, &unix.Winsize{Col: cols, Row: rows})
	}); err != nil {
		return err
	}
	return ierr
}

// Kill sends sig to every process of the terminal's session: its process group and any other
// group its shell made for jobs. A process that left the session (setsid) is not reached.
func (t *Terminal) Kill(sig syscall.Signal) {
	members := SessionMembers(t.pid)
	select {
	case <-t.done:
		if len(members) == 0 {
			return // reaped and alone: its pid may belong to another process by now
		}
	default:
	}
	_ = syscall.Kill(-t.pid, sig)
	for _, pid := range members {
		_ = syscall.Kill(pid, sig)
	}
}

// Close kills the session with SIGKILL and waits (at most 5 s) until the program was reaped
// and exited ran.
func (t *Terminal) Close() {
	t.Kill(syscall.SIGKILL)
	select {
	case <-t.done:
	case <-time.After(5 * time.Second):
	}
}

// Done is closed once the program ended and exited ran.
func (t *Terminal) Done() <-chan struct{} { return t.done }

// SessionMembers lists the processes whose session id is sid (from /proc), sid's own included
// while it lives.
func SessionMembers(sid int) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		f, err := os.Open("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		b, _ := io.ReadAll(io.LimitReader(f, 4096))
		f.Close()
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		// After "pid (comm)": state ppid pgrp session ...
		f4 := strings.Fields(s[i+1:])
		if len(f4) >= 4 {
			if v, err := strconv.Atoi(f4[3]); err == nil && v == sid {
				out = append(out, pid)
			}
		}
	}
	return out
}
