package server

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/google/uuid"

	"github.com/zidane-server/zidane/protocol"
	"github.com/zidane-server/zidane/server/workspace/term"
)

type terminalHandler struct{ s *Server }

// Terminal returns the terminal group's handler (seed "terminal").
func (h *handlers) Terminal() protocol.TerminalHandler { return terminalHandler{h.s} }

// maxTerminalsPerConn bounds the terminals one connection runs at once.
const maxTerminalsPerConn = 16

// termJob is a running terminal; it belongs to the connection that started it.
type termJob struct {
	id      string
	origin  *conn
	t       *term.Terminal
	cwd     string
	argv    []string
	started time.Time
}

func (s *Server) terminalsOn() error {
	if !s.cfg.ProjectTerminals {
		return protocol.NewHandlerFailedError("Project terminals are off on this server; the operator starts it with " + s.flagHint("--project-terminals") + ".")
	}
	return nil
}

// termOf finds a terminal of the calling connection.
func (s *Server) termOf(ctx context.Context, id string) (*termJob, error) {
	if err := s.terminalsOn(); err != nil {
		return nil, err
	}
	c := connFrom(ctx)
	s.termMu.Lock()
	j := s.terms[id]
	s.termMu.Unlock()
	if j == nil || j.origin != c {
		return nil, protocol.NewHandlerFailedError(fmt.Sprintf("No running terminal %q on this connection; list them with terminal.list.", id))
	}
	return j, nil
}

// Start implements terminal.start: the terminal's output and exit go to this connection only,
// after the answer; a dropped connection kills the terminal's session.
func (h terminalHandler) Start(ctx context.Context, p *protocol.TerminalStartParams) (*protocol.TerminalStartResult, error) {
	s := h.s
	if err := s.terminalsOn(); err != nil {
		return nil, err
	}
	c := connFrom(ctx)
	if c == nil {
		return nil, errors.New("no connection")
	}
	cwd := ""
	if p.Cwd != nil {
		cwd = *p.Cwd
	}
	_, dir, err := s.resolveCwd(cwd)
	if err != nil {
		return nil, err
	}
	if len(p.Argv) > 0 && p.Argv[0] == "" {
		return nil, protocol.NewInvalidParamsError("params/argv/0: name the program to run.", &protocol.InvalidParamsErrorData{Pointer: "/argv/0"})
	}
	for i, a := range p.Argv {
		if strings.IndexByte(a, 0) >= 0 {
			ptr := fmt.Sprintf("/argv/%d", i)
			return nil, protocol.NewInvalidParamsError("params"+ptr+": an argument cannot hold a NUL character.", &protocol.InvalidParamsErrorData{Pointer: ptr})
		}
	}
	// The start reserves its place before it runs the program (and holds it until its job is in
	// s.terms, or it failed): concurrent starts on one connection count each other.
	s.termMu.Lock()
	n := s.termStarting[c]
	for _, j := range s.terms {
		if j.origin == c {
			n++
		}
	}
	if n >= maxTerminalsPerConn {
		s.termMu.Unlock()
		return nil, protocol.NewHandlerFailedError(fmt.Sprintf("This connection already runs %d terminals; end one first.", maxTerminalsPerConn))
	}
	s.termStarting[c]++
	s.termMu.Unlock()
	reserved := true
	release := func() { // under termMu
		if reserved {
			reserved = false
			if s.termStarting[c]--; s.termStarting[c] <= 0 {
				delete(s.termStarting, c)
			}
		}
	}
	defer func() {
		s.termMu.Lock()
		release()
		s.termMu.Unlock()
	}()
	o := term.Options{Dir: dir, Argv: p.Argv, Prepare: s.cfg.TerminalPrepare}
	if p.Cols != nil {
		o.Cols = uint16(*p.Cols)
	}
	if p.Rows != nil {
		o.Rows = uint16(*p.Rows)
	}
	job := &termJob{id: uuid.NewString(), origin: c, cwd: dir, argv: p.Argv, started: time.Now()}
	if len(job.argv) == 0 {
		job.argv = []string{term.Shell()}
	}
	ready := make(chan struct{}) // closed once the answer is queued: no signal before it
	// The output callback blocks while the connection's queue is half full (flow control); it
	// gives up, dropping output, only once the connection is gone.
	output := func(data string) {
		<-ready
		if !c.waitRoom(c.ctx) {
			return
		}
		if _, err := s.hub.publish(&protocol.WorkspaceExecDataSignal{TerminalID: job.id, Data: data}, c, ""); err != nil {
			s.log.Warn("terminal output not sent", "err", err)
		}
	}
	exited := func(e term.Exit) {
		<-ready
		s.termMu.Lock()
		delete(s.terms, job.id)
		s.termMu.Unlock()
		sig := &protocol.WorkspaceExecExitSignal{TerminalID: job.id}
		if e.Signal != "" {
			sig.Signal = ptr(e.Signal)
		} else {
			sig.ExitCode = ptr(e.Code)
		}
		if _, err := s.hub.publish(sig, c, ""); err != nil {
			s.log.Warn("terminal exit not sent", "err", err)
		}
		c.log().Info("terminal ended", "terminal", job.id, "code", e.Code, "signal", e.Signal)
	}
	t, err := term.Start(o, output, exited)
	if err != nil {
		close(ready)
		var ee *exec.Error
		if errors.As(err, &ee) || errors.Is(err, syscall.ENOENT) {
			return nil, protocol.NewHandlerFailedError(fmt.Sprintf("Cannot start %q: %v; name a program on the server's PATH.", job.argv[0], err))
		}
		return nil, protocol.NewHandlerFailedError(fmt.Sprintf("Cannot start the terminal: %v.", err))
	}
	job.t = t
	s.termMu.Lock()
	s.terms[job.id] = job
	release() // the job now counts in its reservation's place
	s.termMu.Unlock()
	c.log().Info("terminal started", "terminal", job.id, "pid", t.Pid(), "cwd", dir, "argv0", job.argv[0])
	// The connection's end kills the terminal's whole session.
	s.bgWG.Add(1)
	go func() {
		defer s.bgWG.Done()
		select {
		case <-c.ctx.Done():
			t.Close()
		case <-t.Done():
		}
	}()
	afterAnswer(ctx, func() { close(ready) })
	return &protocol.TerminalStartResult{TerminalID: job.id, PID: int64(t.Pid())}, nil
}

// Input implements terminal.input.
func (h terminalHandler) Input(ctx context.Context, p *protocol.TerminalInputParams) (*protocol.TerminalInputResult, error) {
	j, err := h.s.termOf(ctx, p.TerminalID)
	if err != nil {
		return nil, err
	}
	if err := j.t.Write([]byte(p.Data)); err != nil {
		return nil, protocol.NewHandlerFailedError(fmt.Sprintf("Terminal %q does not take input: %v.", p.TerminalID, err))
	}
	return &protocol.TerminalInputResult{Written: len(p.Data)}, nil
}

// Resize implements terminal.resize.
func (h terminalHandler) Resize(ctx context.Context, p *protocol.TerminalResizeParams) (*protocol.TerminalResizeResult, error) {
	j, err := h.s.termOf(ctx, p.TerminalID)
	if err != nil {
		return nil, err
	}
	if err := j.t.Resize(uint16(p.Cols), uint16(p.Rows)); err != nil {
		return nil, protocol.NewHandlerFailedError(fmt.Sprintf("Terminal %q cannot be resized: %v.", p.TerminalID, err))
	}
	return &protocol.TerminalResizeResult{Cols: p.Cols, Rows: p.Rows}, nil
}

var termSignals = map[protocol.TerminalSignal]syscall.Signal{
	protocol.TerminalSignalSIGKILL: syscall.SIGKILL, protocol.TerminalSignalSIGTERM: syscall.SIGTERM,
	protocol.TerminalSignalSIGINT: syscall.SIGINT, protocol.TerminalSignalSIGHUP: syscall.SIGHUP,
}

// Kill implements terminal.kill.
func (h terminalHandler) Kill(ctx context.Context, p *protocol.TerminalKillParams) (*protocol.TerminalKillResult, error) {
	sig := syscall.SIGKILL
	if p.Signal != nil {
		v, ok := termSignals[*p.Signal]
		if !ok {
			return nil, protocol.NewInvalidParamsError(fmt.Sprintf("params/signal: %q is not one of SIGKILL, SIGTERM, SIGINT, SIGHUP.", *p.Signal), &protocol.InvalidParamsErrorData{Pointer: "/signal"})
		}
		sig = v
	}
	if err := h.s.terminalsOn(); err != nil {
		return nil, err
	}
	c := connFrom(ctx)
	h.s.termMu.Lock()
	j := h.s.terms[p.TerminalID]
	h.s.termMu.Unlock()
	if j == nil {
		return &protocol.TerminalKillResult{Killed: false}, nil // ended (or never started)
	}
	if j.origin != c {
		// As schema/terminal.json says; worded as for an unknown id, so another connection's
		// terminals are not revealed.
		return nil, protocol.NewHandlerFailedError(fmt.Sprintf("No running terminal %q on this connection; list them with terminal.list.", p.TerminalID))
	}
	j.t.Kill(sig)
	return &protocol.TerminalKillResult{Killed: true}, nil
}

// List implements terminal.list: this connection's running terminals.
func (h terminalHandler) List(ctx context.Context, _ *protocol.TerminalListParams) (*protocol.TerminalListResult, error) {
	if err := h.s.terminalsOn(); err != nil {
		return nil, err
	}
	c := connFrom(ctx)
	out := &protocol.TerminalListResult{Terminals: []protocol.TerminalInfo{}}
	h.s.termMu.Lock()
	for _, j := range h.s.terms {
		if j.origin == c {
			out.Terminals = append(out.Terminals, protocol.TerminalInfo{TerminalID: j.id, PID: int64(j.t.Pid()), Cwd: j.cwd, Argv: j.argv, StartedAt: ms(j.started)})
		}
	}
	h.s.termMu.Unlock()
	sort.Slice(out.Terminals, func(a, b int) bool { return out.Terminals[a].StartedAt < out.Terminals[b].StartedAt })
	return out, nil
}
