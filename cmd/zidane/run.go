package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/zidane-server/zidane/client"
	"github.com/zidane-server/zidane/protocol"
)

// mintHint says how to get a chat token.
const mintHint = "mint one on the server's machine with `zidane-server token create --name cli --scope chat` and set ZIDANE_TOKEN"

// target is where the CLI connects and where that came from.
type target struct {
	url, token string
	daemonFile string // the daemon.json read, "" when ZIDANE_URL was set
}

func resolveTarget(o promptOptions, stderr io.Writer) (target, int) {
	// A token read with $(cat file) or pasted ends in a newline or spaces: they are not part of it.
	t := target{url: strings.TrimSpace(os.Getenv("ZIDANE_URL")), token: strings.TrimSpace(os.Getenv("ZIDANE_TOKEN"))}
	if strings.ContainsFunc(t.token, func(r rune) bool { return r < 0x21 || r == 0x7f }) {
		fmt.Fprintln(stderr, "zidane: ZIDANE_TOKEN holds a space or a control character inside it; a token is one word (zds_…): set it again, e.g. ZIDANE_TOKEN=$(cat token-file)")
		return t, exitUsage
	}
	if t.url != "" && !serverURL(t.url) {
		fmt.Fprintf(stderr, "zidane: ZIDANE_URL %q is not a server address: use ws://HOST:PORT (or wss://, http://, https://, or unix:///path/to/socket)\n", t.url)
		return t, exitUsage
	}
	if t.url == "" {
		// A local server: its daemon.json names the URL and a chat token.
		d, err := client.ReadDaemonFile(o.dataDir)
		if err != nil {
			fmt.Fprintln(stderr, "zidane:", err)
			return t, exitUsage
		}
		t.url = d.URL
		t.daemonFile = filepath.Join(o.dataDir, client.DaemonFileName)
		if t.token == "" {
			t.token = d.Token
		}
	}
	if t.token == "" {
		fmt.Fprintln(stderr, "zidane: set ZIDANE_TOKEN:", mintHint)
		return t, exitUsage
	}
	return t, exitOK
}

// serverURL reports whether u is an address the client dials: ws, wss, http or https with a
// host, or unix with a path.
func serverURL(u string) bool {
	p, err := url.Parse(u)
	if err != nil {
		return false
	}
	switch p.Scheme {
	case "ws", "wss", "http", "https":
		return p.Host != ""
	case "unix":
		return p.Path != ""
	}
	return false
}

// noServer reports whether err says that nothing answers at the address daemon.json names (a
// stale file: exit 2, "no server found", as for a missing file).
func noServer(t target, err error) bool {
	return t.daemonFile != "" && dialFailed(err)
}

// dialFailed reports whether err is a connect that no server answered (not a connection that
// dropped later).
func dialFailed(err error) bool {
	return !errors.Is(err, client.ErrDisconnected) && strings.Contains(err.Error(), "dial")
}

// unknownSession reports whether err is the server's answer for a session id it does not have
// (HandlerFailed "Session "<id>" not found. …", server/handlers.go sessionNotFound).
func unknownSession(err error, id string) bool {
	var rpcErr *protocol.Error
	return errors.As(err, &rpcErr) && rpcErr.Code == protocol.CodeHandlerFailed &&
		strings.HasPrefix(rpcErr.Message, fmt.Sprintf("Session %q not found.", id))
}

// lostCause says in a few words why a connection ended: the server closed it (with its close
// code and reason), it stopped answering, or the network's own words; never a chain of wrapped
// errors.
func lostCause(err error) string {
	var ce websocket.CloseError
	var op *net.OpError
	switch {
	case err == nil:
		return "the connection ended"
	case errors.As(err, &ce):
		s := fmt.Sprintf("the server closed it (%d %s)", int(ce.Code), strings.TrimPrefix(ce.Code.String(), "Status"))
		if ce.Reason != "" {
			s = fmt.Sprintf("the server closed it (%d %s: %s)", int(ce.Code), strings.TrimPrefix(ce.Code.String(), "Status"), ce.Reason)
		}
		return s
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "the connection ended without a close (the server stopped or the network dropped)"
	case errors.Is(err, context.DeadlineExceeded):
		return "the server stopped answering (no pong in time)"
	case errors.As(err, &op) && op.Err != nil:
		return op.Err.Error()
	}
	return err.Error()
}

// explain turns a client error into what the user should know and do.
func explain(t target, err error) string {
	var hc *client.HostChangedError
	switch {
	case errors.Is(err, client.ErrUnauthorized):
		if t.daemonFile != "" && os.Getenv("ZIDANE_TOKEN") == "" {
			if d, derr := client.ReadDaemonFile(filepath.Dir(t.daemonFile)); derr == nil && d.Token != t.token {
				// The server restarted meanwhile: its new start revoked the token this CLI read.
				return fmt.Sprintf("the server restarted while this command ran (%s now holds a new token), so a prompt it was running ended interrupted: run the command again", t.daemonFile)
			}
			return fmt.Sprintf("the server refused the local token of %s (401): the file is stale; restart the server, or %s", t.daemonFile, mintHint)
		}
		return "the server refused the token (401): it is unknown or revoked; " + mintHint
	case errors.Is(err, client.ErrForbidden):
		return fmt.Sprintf("the server refused the connection (403 forbidden): %v", err)
	case errors.As(err, &hc):
		return err.Error()
	case noServer(t, err):
		return fmt.Sprintf("no server answers at %s, which %s names: %v. The file is stale if that server is gone: start it again (`make run` or `zidane-server start`), or set ZIDANE_URL and ZIDANE_TOKEN", t.url, t.daemonFile, err)
	case t.daemonFile == "" && dialFailed(err):
		return fmt.Sprintf("no server answers at %s (ZIDANE_URL): %s. Check the address, or start the server (`make run` or `zidane-server start`)", t.url, dialCause(err))
	}
	return err.Error()
}

// dialCause is the network's own words for a failed dial ("connect: connection refused"), or
// the whole error when it holds no *net.OpError.
func dialCause(err error) string {
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		return op.Err.Error()
	}
	return err.Error()
}

// lockedWriter serializes writes: the connection's state notes and the cancel write to stderr
// from their own goroutines.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

// runPrompt sends the prompt and prints its run; it returns the exit code.
func runPrompt(o promptOptions, stdout, stderr io.Writer) int {
	stderr = &lockedWriter{w: stderr}
	t, code := resolveTarget(o, stderr)
	if code != exitOK {
		return code
	}
	interrupts := make(chan os.Signal, 2)
	signal.Notify(interrupts, os.Interrupt)
	defer signal.Stop(interrupts)
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	// Until the run is known (chat.send answered) a Ctrl-C cannot name it: before chat.send it
	// stops the CLI; while chat.send is in flight it waits (bounded) for the answer, then cancels
	// the run; a second Ctrl-C stops at once.
	setupCtx, setupCancel := context.WithCancel(ctx)
	defer setupCancel()
	var sending, early atomic.Bool
	setupDone, watcherDone := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(watcherDone)
		for {
			select {
			case <-interrupts:
				if early.Load() || !sending.Load() {
					setupCancel()
					return
				}
				early.Store(true)
				fmt.Fprintln(stderr, "\nzidane: cancelling the run once the server has started it (Ctrl-C again to exit at once)…")
				time.AfterFunc(o.cancelWait, setupCancel)
			case <-setupDone:
				return
			case <-setupCtx.Done():
				return
			}
		}
	}()
	closeClient := true // an exit on Ctrl-C does not wait for the close handshake
	wasDown := false
	c, err := client.Dial(setupCtx, t.url, client.Options{Token: t.token, AppVersion: "zidane-cli " + Version, OnState: func(s client.StateChange) {
		switch s.State {
		case client.StateReconnecting:
			fmt.Fprintf(stderr, "zidane: lost the connection to %s: %s; reconnecting in %s\n", t.url, lostCause(s.Err), s.Delay.Round(10*time.Millisecond))
			wasDown = true
		case client.StateConnected:
			if wasDown {
				fmt.Fprintln(stderr, "zidane: reconnected; resuming the session")
			}
		}
	}})
	if err != nil {
		if setupCtx.Err() != nil && ctx.Err() == nil {
			fmt.Fprintln(stderr, "zidane: interrupted")
			return exitInterrupted
		}
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			// The user's own --timeout ran out during the connect: not a stale daemon.json.
			fmt.Fprintf(stderr, "zidane: no answer from %s within --timeout %s: %v\n", t.url, o.timeout, err)
			return exitFailed
		}
		fmt.Fprintln(stderr, "zidane:", explain(t, err))
		if noServer(t, err) {
			return exitUsage
		}
		return exitFailed
	}

	defer func() {
		if closeClient {
			c.Close()
		}
	}()
	sid := o.sessionID
	if sid == "" {
		s, err := c.SessionsCreate(setupCtx, &protocol.SessionsCreateParams{})
		for i := 0; i < 3 && errors.Is(err, client.ErrNotConnected) && c.WaitConnected(setupCtx) == nil; i++ {
			// Not sent (the connection dropped right after the dial): send it once connected.
			s, err = c.SessionsCreate(setupCtx, &protocol.SessionsCreateParams{})
		}
		if err != nil {
			return setupFailed(setupCtx, ctx, t, stderr, "create session", err)
		}
		sid = s.ID
		c.Follow(sid, 0)
		fmt.Fprintf(stderr, "session %s (continue it with --session %s)\n", sid, sid)
	} else {
		c.Follow(sid, client.FromNow)
	}
	var res *protocol.ChatSendResult
	sending.Store(true)
	for {
		params := &protocol.ChatSendParams{SessionID: sid, Prompt: &o.prompt}
		if o.model != "" {
			params.Model = &o.model
		}
		res, err = c.ChatSend(setupCtx, params)
		if errors.Is(err, client.ErrNotConnected) {
			// Not sent: wait for the connection and send it (once).
			if werr := c.WaitConnected(setupCtx); werr == nil {
				continue
			}
		}
		break
	}
	close(setupDone)
	<-watcherDone
	var rpcErr *protocol.Error
	if errors.As(err, &rpcErr) && rpcErr.Code == protocol.CodeInvalidParams && o.sessionID == "" {
		// The prompt was refused (e.g. an unknown --model) in the session made for it: remove
		// that empty session rather than leave it in sessions.list.
		dctx, dcancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, _ = c.SessionsDelete(dctx, &protocol.SessionsDeleteParams{SessionID: sid})
		dcancel()
	}
	var lost *client.ConnectionLostError
	var startDeadline <-chan time.Time
	if errors.As(err, &lost) && o.sessionID == "" && setupCtx.Err() == nil {
		// The prompt may or may not have reached the server. In the session the CLI just
		// created every run is its own: the resume shows its run:start if it started.
		fmt.Fprintln(stderr, "zidane: the connection dropped while sending the prompt; waiting to see whether the server started it")
		res, err = &protocol.ChatSendResult{}, nil
		startDeadline = time.After(unknownStartWait)
	}
	if err != nil {
		if o.sessionID != "" && unknownSession(err, o.sessionID) {
			fmt.Fprintf(stderr, "zidane: the server has no session %s: leave --session out to start a new one (the CLI prints each new session's id)\n", o.sessionID)
			return exitUsage
		}
		return setupFailed(setupCtx, ctx, t, stderr, "send", err)
	}
	p := &printer{out: stdout, stderr: stderr, sid: sid, runID: res.RunID, prompt: o.prompt, asJSON: o.asJSON, newSession: o.sessionID == ""}
	p.enc = json.NewEncoder(stdout)
	p.enc.SetEscapeHTML(false)
	p.ans = &answerer{c: c, sid: sid, mode: o.approve, tty: !o.asJSON && isTerminal(os.Stdin), stdin: os.Stdin, stderr: stderr,
		beforePrompt: func() {
			if p.lastText {
				fmt.Fprintln(stderr) // the prompt starts on a line of its own
			}
		}}

	var cancelDeadline <-chan time.Time
	cancelling := false
	startCancel := func() {
		cancelling = true
		p.cancelling = true
		cancelDeadline = time.After(o.cancelWait)
		go sendCancel(c, sid, p.runID, o.cancelWait, stderr)
	}
	if early.Load() {
		startCancel()
	}
	for {
		select {
		case ev, ok := <-c.Signals():
			if !ok {
				fmt.Fprintln(stderr, "zidane: the connection ended before the run did:", explain(t, c.Err()))
				return exitFailed
			}
			if done, code := p.take(ev); done {
				if cancelling {
					fmt.Fprintln(stderr, "zidane: the run was cancelled on the server")
					return exitInterrupted
				}
				return code
			}
		case l, ok := <-p.ans.lineCh():
			p.ans.line(l, ok)
		case <-interrupts:
			if cancelling {
				fmt.Fprintln(stderr, "zidane: interrupted again; exiting without waiting")
				closeClient = false
				return exitInterrupted
			}
			fmt.Fprintf(stderr, "\nzidane: cancelling the run (Ctrl-C again to exit at once)…\n")
			startCancel()
		case <-startDeadline:
			if p.runID == "" {
				fmt.Fprintf(stderr, "zidane: the prompt did not start within %s of the dropped connection; it may not have reached the server: send it again\n", unknownStartWait)
				return exitFailed
			}
		case <-cancelDeadline:
			fmt.Fprintf(stderr, "zidane: the run did not end within %s of the cancel; exiting\n", o.cancelWait)
			return exitInterrupted
		case <-ctx.Done():
			fmt.Fprintf(stderr, "zidane: gave up after %s (--timeout); the run goes on on the server\n", o.timeout)
			return exitFailed
		}
	}
}

func setupFailed(setupCtx, ctx context.Context, t target, stderr io.Writer, what string, err error) int {
	if setupCtx.Err() != nil && ctx.Err() == nil {
		fmt.Fprintln(stderr, "zidane: interrupted")
		return exitInterrupted
	}
	fmt.Fprintf(stderr, "zidane: %s: %s\n", what, explain(t, err))
	return exitFailed
}

// unknownStartWait bounds the wait for the run:start of a prompt whose chat.send lost its answer.
const unknownStartWait = 15 * time.Second

// sendCancel asks the server to stop the run (runID "": the session's running prompt), waiting
// for a connection if it is down.
func sendCancel(c *client.Client, sid, runID string, wait time.Duration, stderr io.Writer) {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	params := &protocol.ChatCancelParams{SessionID: sid}
	if runID != "" {
		params.RunID = &runID
	}
	for {
		_, err := c.ChatCancel(ctx, params)
		if err == nil || ctx.Err() != nil {
			return
		}
		if errors.Is(err, client.ErrDisconnected) {
			if c.WaitConnected(ctx) == nil {
				continue // a cancel is safe to send again: a second one is a no-op
			}
			return
		}
		fmt.Fprintln(stderr, "zidane: cancel:", err)
		return
	}
}

// printer prints the signals of one run of one session (field case B36): the run is bracketed by
// its run:start and run:end (runId); a signal that names another run is not printed, nor an
// ephemeral one (stream:progress: it has no $seq and a replay does not carry it).
type printer struct {
	out, stderr io.Writer
	enc         *json.Encoder
	sid, runID  string
	prompt      string
	asJSON      bool
	cancelling  bool // the CLI cancelled the run: its run:end error is expected
	newSession  bool // the CLI created the session: every run in it is the CLI's
	inRun       bool
	ended       bool
	lastText    bool
	printed     strings.Builder // the markdown text printed so far (text mode)
	ans         *answerer       // answers the run's approvals and questions; nil: none (tests)
}

// take handles one item of the signal stream; done reports the run's end, with the exit code.
func (p *printer) take(ev client.SignalEvent) (done bool, code int) {
	if ev.SessionID != p.sid {
		return false, 0
	}
	if ev.Reload != nil {
		return p.reload(ev.Reload)
	}
	var head struct {
		RunID string `json:"runId"`
	}
	_ = json.Unmarshal(ev.Raw, &head)
	if _, start := ev.Signal.(*protocol.RunStartSignal); start && p.runID == "" && p.newSession {
		p.runID = head.RunID // the chat.send answer was lost: the session's first run is the CLI's
	}
	if head.RunID != "" && head.RunID != p.runID {
		return false, 0 // another run of the session
	}
	if _, ok := ev.Signal.(*protocol.RunStartSignal); ok {
		p.inRun = true
	}
	if head.RunID == "" {
		return false, 0 // not part of a run (session:updated …): every run-scoped signal carries its runId
	}
	if ev.Signal != nil && isEphemeral(ev.Signal.SignalKind()) {
		// A passing state (stream:progress): not part of the run's record. --json prints the
		// run's sequenced signals only, each once and in order, as a replay has them.
		return false, 0
	}
	if p.asJSON {
		p.enc.Encode(ev.Raw)
	}
	if p.ans != nil && ev.Signal != nil {
		p.ans.take(ev.Signal)
	}
	switch s := ev.Signal.(type) {
	case *protocol.EventSignal:
		if m, ok := s.Event.(*protocol.MarkdownEvent); ok && !p.asJSON {
			fmt.Fprint(p.out, m.Text)
			p.printed.WriteString(m.Text)
			p.lastText = true
		}
	case *protocol.TurnEndSignal:
		p.endLine()
	case *protocol.RunEndSignal:
		p.endLine()
		p.inRun = false
		if !s.OK && !p.cancelling {
			msg := "the run failed"
			if s.Error != nil {
				msg = *s.Error
			}
			fmt.Fprintln(p.stderr, "zidane:", msg)
			return true, exitFailed
		}
		return true, exitOK
	}
	return false, 0
}

func (p *printer) endLine() {
	if p.lastText && !p.asJSON {
		fmt.Fprintln(p.out)
		p.printed.WriteString("\n")
		p.lastText = false
	}
}

// reload handles a reloaded transcript (the server could not replay what the connection
// missed): the text of the run the CLI did not print is printed from it, and a run that ended in
// the gap ends the CLI as the transcript says. After a restart (epoch) a run that did not end
// never will.
func (p *printer) reload(r *client.Reload) (bool, int) {
	if r.Reason != "refresh" {
		fmt.Fprintf(p.stderr, "zidane: the server could not replay what this connection missed (%s); reloaded the transcript\n", r.Reason)
	}
	lost := func() (bool, int) {
		if r.Reason != "epoch" {
			return false, 0
		}
		fmt.Fprintln(p.stderr, "zidane: the server restarted while the run was going on; the run did not finish")
		return true, exitFailed
	}
	if !p.inRun && !p.newSession {
		return lost() // its run:start may still come, unless the server restarted
	}
	start := -1
	for i, e := range r.Events {
		if u, ok := e.(*protocol.UserPromptEvent); ok && u.Text == p.prompt {
			start = i
		}
	}
	if start < 0 {
		return lost()
	}
	p.inRun = true
	// The run's text as the CLI prints it: its markdown, a line end after each turn's text.
	run := r.Events[start+1:]
	var text strings.Builder
	ended, failed := false, ""
	for i, e := range run {
		switch x := e.(type) {
		case *protocol.MarkdownEvent:
			text.WriteString(x.Text)
			if next := nextMarkdown(run[i+1:]); next == nil || next.TurnID != x.TurnID {
				text.WriteString("\n")
			}
		case *protocol.RunSummaryEvent:
			ended = true
		case *protocol.ErrorEvent:
			if i == len(run)-1 {
				ended, failed = true, x.Message
			}
		}
	}
	full := text.String()
	if !ended {
		full = strings.TrimSuffix(full, "\n") // the last turn may still stream
	}
	if rest, ok := strings.CutPrefix(full, p.printed.String()); ok && rest != "" && !p.asJSON {
		fmt.Fprint(p.out, rest)
		p.printed.WriteString(rest)
		p.lastText = !strings.HasSuffix(rest, "\n")
	}
	if !ended {
		return lost()
	}
	p.endLine()
	if failed != "" {
		if !p.cancelling {
			fmt.Fprintln(p.stderr, "zidane:", failed)
		}
		return true, exitFailed
	}
	return true, exitOK
}

// nextMarkdown returns the first markdown event of events, or nil.
func nextMarkdown(events []protocol.StreamEvent) *protocol.MarkdownEvent {
	for _, e := range events {
		if m, ok := e.(*protocol.MarkdownEvent); ok {
			return m
		}
	}
	return nil
}

// listModels prints models.list: one model per line (id, context window), the default with *.
func listModels(o promptOptions, stdout, stderr io.Writer) int {
	t, code := resolveTarget(o, stderr)
	if code != exitOK {
		return code
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, t.url, client.Options{Token: t.token, AppVersion: "zidane-cli " + Version})
	if err != nil {
		fmt.Fprintln(stderr, "zidane:", explain(t, err))
		return exitFailed
	}
	defer c.Close()
	res, err := c.ModelsList(ctx, &protocol.ModelsListParams{})
	if err != nil {
		fmt.Fprintln(stderr, "zidane: models.list:", err)
		return exitFailed
	}
	for _, m := range res.Models {
		mark := " "
		if m.IsDefault {
			mark = "*"
		}
		window := ""
		if m.ContextWindow != nil {
			window = fmt.Sprintf("\t%d tokens", *m.ContextWindow)
		}
		fmt.Fprintf(stdout, "%s %s%s\n", mark, m.ID, window)
	}
	return exitOK
}

// isEphemeral reports whether signals of kind are a passing state the schema marks ephemeral
// (no $seq, not replayed).
func isEphemeral(kind string) bool {
	spec := protocol.LookupSignal(kind)
	return spec != nil && spec.Ephemeral
}
