package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/coder/websocket"
	"github.com/google/uuid"

	"github.com/zidane-server/zidane/protocol"
	"github.com/zidane-server/zidane/server/agent"
	"github.com/zidane-server/zidane/server/store"
	"github.com/zidane-server/zidane/server/workspace"
)

// handlers implements protocol.Handlers; each group's methods live on the same value.
type handlers struct{ s *Server }

type (
	ipcHandler      struct{ s *Server }
	daemonHandler   struct{ s *Server }
	sessionsHandler struct{ s *Server }
	chatHandler     struct{ s *Server }
)

// IPC returns the ipc group's handler.
func (h *handlers) IPC() protocol.IPCHandler { return ipcHandler{h.s} }

// Daemon returns the daemon group's handler.
func (h *handlers) Daemon() protocol.DaemonHandler { return daemonHandler{h.s} }

// Sessions returns the sessions group's handler.
func (h *handlers) Sessions() protocol.SessionsHandler { return sessionsHandler{h.s} }

// Chat returns the chat group's handler.
func (h *handlers) Chat() protocol.ChatHandler { return chatHandler{h.s} }

func ms(t time.Time) int64 { return t.UnixMilli() }

func (s *Server) daemonInfo() protocol.DaemonInfo {
	return protocol.DaemonInfo{
		ProtocolVersion: protocol.ProtocolVersion, MinProtocolVersion: protocol.MinProtocolVersion,
		AppVersion: Version, PID: s.pid, StartedAt: ms(s.startedAt),
		BuildID: protocol.SchemaHash[:12], CodeVersion: Version, HostID: s.hostID,
		HostKind: protocol.HostKindServer, HostName: s.hostName,
	}
}

func (s *Server) adminCommands() protocol.AdminCommands {
	dir := s.cfg.DataDir
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs // the command works from any folder
	}
	where := "--data-dir " + shellQuote(dir)
	if s.cfg.DatabaseURL != "" {
		where = "--database-url " + shellQuote(redactURL(s.cfg.DatabaseURL))
	}
	return protocol.AdminCommands{
		Token: shellQuote(s.cfg.Binary) + " token create --name admin --scope admin " + where,
		Pair:  shellQuote(s.cfg.Binary) + " pair --scope admin " + where,
	}
}

// Hello implements ipc.hello: version negotiation (seed "Compatibility"; field case B13).
func (h ipcHandler) Hello(ctx context.Context, p *protocol.IPCHelloParams) (*protocol.IPCHelloResult, error) {
	c := connFrom(ctx)
	if c == nil {
		return nil, errors.New("no connection")
	}
	if c.helloed.Load() {
		return nil, protocol.NewHandlerFailedError("The handshake is already done on this connection; open a new connection to negotiate again.")
	}
	cmax := p.ProtocolVersion
	cmin := cmax
	if p.MinProtocolVersion != nil {
		cmin = *p.MinProtocolVersion
	}
	if cmin > cmax {
		return nil, protocol.NewInvalidParamsError(fmt.Sprintf("params/minProtocolVersion: %d is above protocolVersion %d; send a range with min ≤ max.", cmin, cmax), &protocol.InvalidParamsErrorData{Pointer: "/minProtocolVersion"})
	}
	smin, smax := protocol.MinProtocolVersion, protocol.ProtocolVersion
	negotiated := min(cmax, smax)
	if negotiated < max(cmin, smin) {
		side := "Upgrade the client."
		if cmin > smax {
			side = "Upgrade the server."
		}
		info := h.s.daemonInfo()
		return nil, protocol.NewVersionMismatchError(
			fmt.Sprintf("Protocol version mismatch: the server speaks v%s, the client v%s. %s", versionRange(smin, smax), versionRange(cmin, cmax), side),
			&protocol.VersionMismatchErrorData{Daemon: info})
	}
	info := h.s.daemonInfo()
	res := &protocol.IPCHelloResult{
		ProtocolVersion: info.ProtocolVersion, MinProtocolVersion: info.MinProtocolVersion,
		NegotiatedProtocolVersion: negotiated, AppVersion: info.AppVersion, PID: info.PID,
		StartedAt: info.StartedAt, BuildID: info.BuildID, CodeVersion: info.CodeVersion,
		HostID: info.HostID, HostKind: info.HostKind, HostName: info.HostName,
		SignalEpoch: h.s.hub.currentEpoch(), Methods: protocol.MethodsAt(c.scope, negotiated), AdminCommands: h.s.adminCommands(),
		DeprecatedMethods: protocol.DeprecatedMethodsAt(c.scope, negotiated),
	}
	// Drafts, prefs and the sidebar are shared between clients, and machine tokens are served
	// (machine.register), on every server (seed "Handshake": what this server offers).
	res.Sync, res.MachineServe = ptr(true), ptr(true)
	if h.s.cfg.AllowClone {
		res.Clone = ptr(true)
	}
	if h.s.cfg.AllowRemoteInstalls {
		res.RemoteInstalls = ptr(true)
	}
	if h.s.cfg.ProjectTerminals {
		res.ProjectTerminals = ptr(true)
	}
	if h.s.cfg.AllowCreateFolders {
		res.CreateFolders = ptr(true)
	}
	app := ""
	if p.AppVersion != nil {
		app = *p.AppVersion
	}
	c.log().Info("hello", "protocol", negotiated, "app", app, "scope", c.scope)
	c.version.Store(int32(negotiated))
	c.helloed.Store(true)
	h.s.hub.add(c)
	return res, nil
}

func versionRange(lo, hi int) string {
	if lo == hi {
		return fmt.Sprint(hi)
	}
	return fmt.Sprintf("%d–%d", lo, hi)
}

// Ping implements $/ping.
func (h ipcHandler) Ping(ctx context.Context, _ *protocol.PingParams) (*protocol.PingResult, error) {
	return &protocol.PingResult{Now: time.Now().UnixMilli()}, nil
}

// Info implements daemon.info.
func (h daemonHandler) Info(ctx context.Context, _ *protocol.DaemonInfoParams) (*protocol.DaemonInfo, error) {
	info := h.s.daemonInfo()
	return &info, nil
}

// Shutdown implements daemon.shutdown: a server never stops on a client's word.
func (h daemonHandler) Shutdown(ctx context.Context, _ *protocol.DaemonShutdownParams) (*protocol.DaemonShutdownResult, error) {
	return &protocol.DaemonShutdownResult{Accepted: false}, nil
}

func (s *Server) sessionOut(x store.Session) *protocol.Session {
	return &protocol.Session{
		ID: x.ID, Title: x.Title, ProjectRoot: x.ProjectRoot, Cwd: x.Cwd, AgentID: x.AgentID,
		Status: protocol.SessionStatus(x.Status), CreatedAt: ms(x.CreatedAt), UpdatedAt: ms(x.UpdatedAt),
		Archived: x.Archived, HostID: s.hostID, Model: optString(x.Model), ForkedFrom: optString(x.ForkedFrom),
		ParentSessionID: optString(x.ParentSessionID), ParentRunID: optString(x.ParentRunID),
	}
}

// storeErr turns a store error into the answer a client can act on.
// what names the member at fault for text errors, as "params/<member>".
func storeErr(err error, what string) error {
	switch {
	case errors.Is(err, store.ErrBusy):
		return protocol.NewHandlerFailedError("The database is busy; try again in a moment.")
	case errors.Is(err, store.ErrUnavailable):
		return protocol.NewHandlerFailedError("The database is unavailable; try again when the server reports ok on /healthz.")
	case errors.Is(err, store.ErrInvalidText):
		return protocol.NewInvalidParamsError(fmt.Sprintf("%s: text must be valid UTF-8 without NUL characters.", what), &protocol.InvalidParamsErrorData{Pointer: strings.TrimPrefix(what, "params")})
	case errors.Is(err, context.Canceled):
		return protocol.NewHandlerFailedError("The request was cancelled.")
	}
	return err
}

// Create implements sessions.create: cwd must lie inside a workspace root.
func (h sessionsHandler) Create(ctx context.Context, p *protocol.SessionsCreateParams) (*protocol.Session, error) {
	cwd := ""
	if p.Cwd != nil {
		cwd = *p.Cwd
	}
	root, dir, err := h.s.resolveCwd(cwd)
	if err != nil {
		return nil, err
	}
	title, titleSet := "New session", false
	if p.Title != nil && visible(*p.Title) {
		if err := titleInvalid(*p.Title); err != nil {
			return nil, err
		}
		title, titleSet = *p.Title, true // a given title is kept: the first prompt does not rename it
	}
	x, err := h.s.store.CreateSession(ctx, store.Session{Title: title, TitleSet: titleSet, ProjectRoot: root, Cwd: dir, AgentID: "build", Status: "idle"})
	if err != nil {
		return nil, storeErr(err, "params/title")
	}
	return h.s.sessionOut(x), nil
}

// resolveCwd checks a session's folder through the workspace confinement point: cwd (absolute, or
// relative to the first root; "" is the first root) must be an existing folder inside the roots.
// A folder outside answers the same whether it exists or not (a chat token cannot probe paths).
func (s *Server) resolveCwd(cwd string) (root, dir string, err error) {
	if strings.ContainsRune(cwd, 0) {
		return "", "", protocol.NewInvalidParamsError("params/cwd: a path cannot hold a NUL character.", &protocol.InvalidParamsErrorData{Pointer: "/cwd"})
	}
	p, err := s.ws.Folder(cwd)
	if err != nil {
		var e *workspace.Error
		if errors.As(err, &e) && e.Reason == workspace.ReasonOutside {
			return "", "", protocol.NewHandlerFailedError(fmt.Sprintf("Folder %q is outside the workspace roots (%s); pick a folder inside one of them.", cwd, strings.Join(s.ws.Roots(), ", ")))
		}
		return "", "", protocol.NewHandlerFailedError("Folder " + err.Error())
	}
	return p.Root, p.Abs(), nil
}

// sessionNotFound is the HandlerFailed answer for a session id that names no session; an id
// spelled other than the server spells it (uppercase, urn:uuid:) is told the canonical spelling.
func sessionNotFound(id, hint string) error {
	if u, err := uuid.Parse(id); err == nil && u.String() != id {
		hint = fmt.Sprintf("Session ids are spelled as the server gives them: %q. %s", u.String(), hint)
	}
	return protocol.NewHandlerFailedError(fmt.Sprintf("Session %q not found. %s", id, hint))
}

func (s *Server) getSession(ctx context.Context, id, hint string) (store.Session, error) {
	x, err := s.store.GetSession(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return x, sessionNotFound(id, hint)
	}
	if err != nil {
		return x, storeErr(err, "")
	}
	return x, nil
}

// Get implements sessions.get.
func (h sessionsHandler) Get(ctx context.Context, p *protocol.SessionsGetParams) (*protocol.Session, error) {
	x, err := h.s.getSession(ctx, p.SessionID, "List the sessions with sessions.list.")
	if err != nil {
		return nil, err
	}
	h.s.setView(connFrom(ctx), x.ID)
	return h.s.sessionOut(x), nil
}

// snapshotAt reads a session's transcript extent, its streaming block and the $seq watermark at
// one moment (agent.Runtime.Consistent states the invariant): every signal of the session with
// $seq <= seq has its content before mark or in open, none after seq has.
//
// With replicas on NATS JetStream, a session that runs on another replica is snapshotted there
// (remoteSnapshot): only the replica that runs it holds its unwritten rows and open block.
func (s *Server) snapshotAt(ctx context.Context, sessionID string) (mark store.Mark, open protocol.StreamEvent, seq int64, epoch string, err error) {
	if s.Bus() != nil && !slices.Contains(s.runs.Running(), sessionID) {
		if mark, open, seq, epoch, ok, err := s.remoteSnapshot(ctx, sessionID); ok {
			return mark, open, seq, epoch, err
		}
	}
	return s.localSnapshot(ctx, sessionID)
}

// localSnapshot is snapshotAt on this replica's runtime and hub.
//
// With a shared signal stream, a session stored as running that runs on no replica answering
// for it (its owner died and was not taken over yet) has streamed more than its transcript
// holds: the watermark is then the stored transcript's signal mark (store.SignalMark, issue 25
// §1), and the signals after it, still in the stream, reach the client by sessions.resume.
func (s *Server) localSnapshot(ctx context.Context, sessionID string) (mark store.Mark, open protocol.StreamEvent, seq int64, epoch string, err error) {
	here := s.runs.IsRunning(sessionID)
	err = s.runs.Consistent(ctx, sessionID, func(o protocol.StreamEvent) error {
		seq, epoch = s.hub.watermark(sessionID)
		open = o
		var err error
		mark, err = s.store.TranscriptMark(ctx, sessionID)
		if err == nil && s.Bus() != nil && !here && o == nil && mark.Running && mark.Signal.Epoch == epoch && mark.Signal.Seq < seq {
			seq = mark.Signal.Seq
		}
		return err
	})
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		if errors.Is(err, store.ErrBusy) || errors.Is(err, store.ErrUnavailable) || errors.Is(err, context.Canceled) {
			return mark, nil, 0, "", storeErr(err, "")
		}
		return mark, nil, 0, "", protocol.NewHandlerFailedError("The transcript could not be written to the database (" + err.Error() + "); try again in a moment.")
	}
	return mark, open, seq, epoch, err
}

// storedEvent splices a stored event into an answer as it is (UnknownStreamEvent marshals its
// Raw verbatim), not decoded and encoded again; false when the stored body is not valid JSON.
func (s *Server) storedEvent(sessionID string, r store.EventRow) (protocol.StreamEvent, bool) {
	if !json.Valid(r.Body) {
		s.log.Error("stored event is not valid JSON", "session", sessionID)
		return nil, false
	}
	return &protocol.UnknownStreamEvent{Kind: r.Kind, Raw: r.Body}, true
}

// LoadEvents implements sessions.loadEvents (seed "Paging"; issue 7 items 8 and 10): pages of
// whole turns backwards from the end, starting on exchange boundaries, read through an index,
// with the $seq watermark of the moment they were read.
func (h sessionsHandler) LoadEvents(ctx context.Context, p *protocol.SessionsLoadEventsParams) (*protocol.SessionsLoadEventsResult, error) {
	if _, err := h.s.getSession(ctx, p.SessionID, "List the sessions with sessions.list."); err != nil {
		return nil, err
	}
	h.s.setView(connFrom(ctx), p.SessionID)
	mark, open, seq, epoch, err := h.s.snapshotAt(ctx, p.SessionID)
	if err != nil {
		return nil, storeErr(err, "")
	}
	res := &protocol.SessionsLoadEventsResult{Exact: true, Events: []protocol.StreamEvent{}, SignalEpoch: epoch, Seq: seq}
	limit := 0 // the whole transcript
	if p.Before != nil || p.Limit != nil {
		limit = 200
		if p.Limit != nil {
			limit = *p.Limit
		}
	}
	page, err := h.s.store.LoadEventsPageAt(ctx, p.SessionID, mark, p.Before, limit)
	if err != nil {
		return nil, storeErr(err, "")
	}
	res.Start = page.Start
	if len(page.Events) > 0 && page.FirstTurn > 0 {
		ft := page.FirstTurn
		res.Cursor = &ft
	}
	for _, r := range page.Events {
		ev, ok := h.s.storedEvent(p.SessionID, r)
		if !ok {
			res.Exact = false
			continue
		}
		res.Events = append(res.Events, ev)
	}
	if open != nil && (p.Before == nil || *p.Before >= mark.Turns) {
		res.Events = append(res.Events, open)
	}
	return res, nil
}

// GetTurns implements sessions.getTurns (seed "Paging"; issue 7 items 8 and 10): the stored
// turns raw, limit at a time forwards from turn position from, a page ending on an exchange
// boundary, read through an index, with the $seq watermark of the moment they were read.
func (h sessionsHandler) GetTurns(ctx context.Context, p *protocol.SessionsGetTurnsParams) (*protocol.SessionsGetTurnsResult, error) {
	if _, err := h.s.getSession(ctx, p.SessionID, "List the sessions with sessions.list."); err != nil {
		return nil, err
	}
	h.s.setView(connFrom(ctx), p.SessionID)
	mark, open, seq, epoch, err := h.s.snapshotAt(ctx, p.SessionID)
	if err != nil {
		return nil, storeErr(err, "")
	}
	from, limit := 0, 200
	if p.From != nil {
		from = *p.From
	}
	if p.Limit != nil {
		limit = *p.Limit
	}
	page, err := h.s.store.LoadTurnsAt(ctx, p.SessionID, mark, from, limit)
	if err != nil {
		return nil, storeErr(err, "")
	}
	res := &protocol.SessionsGetTurnsResult{Turns: []protocol.StoredTurn{}, Total: mark.Turns, SignalEpoch: epoch, Seq: seq}
	add := func(pos int, turnID string, ev protocol.StreamEvent) {
		if n := len(res.Turns); n == 0 || res.Turns[n-1].Position != pos {
			role := protocol.TurnRoleAssistant
			if ev.StreamEventKind() == "user-prompt" {
				role = protocol.TurnRoleUser
			}
			res.Turns = append(res.Turns, protocol.StoredTurn{Position: pos, TurnID: turnID, Role: role, Events: []protocol.StreamEvent{}})
		}
		t := &res.Turns[len(res.Turns)-1]
		t.Events = append(t.Events, ev)
	}
	for i, r := range page.Events {
		if ev, ok := h.s.storedEvent(p.SessionID, r); ok {
			add(page.TurnPos[i], r.TurnID, ev)
		}
	}
	// A streaming block continues the last turn when it has its turnId, else it starts one (and
	// the total counts it); it comes with the page that holds its turn.
	openPos := -1
	if open != nil {
		openPos = mark.Turns
		if mark.Turns > 0 && blockTurnID(open) == mark.LastTurnID {
			openPos = mark.Turns - 1
		}
		if openPos == mark.Turns {
			res.Total = mark.Turns + 1
		}
	}
	if page.Next < mark.Turns {
		next := page.Next
		res.Next = &next
	} else if open != nil && openPos >= from {
		add(openPos, blockTurnID(open), open)
	}
	return res, nil
}

// blockTurnID is the turnId of a streaming block event.
func blockTurnID(ev protocol.StreamEvent) string {
	switch e := ev.(type) {
	case *protocol.MarkdownEvent:
		return e.TurnID
	case *protocol.ThinkingEvent:
		return e.TurnID
	}
	return ""
}

// Resume implements sessions.resume (seed "Reconnect and resume"; field case B19).
func (h sessionsHandler) Resume(ctx context.Context, p *protocol.SessionsResumeParams) (*protocol.SessionsResumeResult, error) {
	// Through the session cache: a reconnecting client resumes first thing, and a Postgres round
	// trip here was part of the resume figure's connect cost (docs/benchmarks.md).
	if _, err := h.s.cachedSession(ctx, p.SessionID, "List the sessions with sessions.list."); err != nil {
		return nil, err
	}
	a := h.s.hub.replay(p.SessionID, p.Epoch, p.AfterSeq)
	if a.ahead {
		return nil, protocol.NewInvalidParamsError(fmt.Sprintf("params/afterSeq: %d is past the session's last $seq %d in this epoch; reload the transcript with sessions.loadEvents.", p.AfterSeq, a.last), &protocol.InvalidParamsErrorData{Pointer: "/afterSeq"})
	}
	if !a.ok {
		r := a.reason
		return &protocol.SessionsResumeResult{OK: false, Reason: &r}, nil
	}
	// The log keeps each signal encoded: the answer splices those bytes in (UnknownSignal's Raw,
	// written as is by SessionsResumeResult.AppendJSON) instead of decoding and re-encoding every
	// signal — the resume figure of docs/benchmarks.md.
	// Two allocations for the answer's structure, whatever its length: allocation (and the GC
	// it drives) was a third of the server's CPU of a 2000-signal resume.
	raw := make([]protocol.UnknownSignal, len(a.signals))
	out := make([]protocol.ReplayedSignal, len(a.signals))
	for i, e := range a.signals {
		raw[i] = protocol.UnknownSignal{Kind: e.kind, Raw: e.signal}
		out[i] = protocol.ReplayedSignal{Seq: e.seq, Signal: &raw[i]}
	}
	return &protocol.SessionsResumeResult{OK: true, Signals: out}, nil
}

// promptStoreWait is a backstop on how long chat.send waits for its prompt's write, which the
// writer's own timeouts end sooner (agent.startWriteTimeout after an older write of the session).
const promptStoreWait = time.Minute

// Send implements chat.send: it answers once the run started and its prompt is committed; the
// run's run:start and prompt are published before the commit.
func (h chatHandler) Send(ctx context.Context, p *protocol.ChatSendParams) (*protocol.ChatSendResult, error) {
	const hint = "Create the session before sending a prompt."
	if bad := agent.CheckAttachments(p.Attachments); bad != nil { // before anything takes effect
		return nil, protocol.NewInvalidParamsError("params"+bad.Pointer+": "+bad.Message, &protocol.InvalidParamsErrorData{Pointer: bad.Pointer})
	}
	x, err := h.s.cachedSession(ctx, p.SessionID, hint)
	if err != nil {
		return nil, err
	}
	h.s.setView(connFrom(ctx), x.ID)
	if h.s.draining.Load() {
		return nil, protocol.NewHandlerFailedError("The server is shutting down; send the prompt again once it is back.")
	}
	if err := h.s.refuseWhileDegraded(); err != nil {
		return nil, err
	}
	if p.Model != nil && *p.Model != x.Model {
		if x, err = h.s.setModel(ctx, x.ID, *p.Model, "/model"); err != nil {
			return nil, err
		}
	}
	x, prompt, err := h.s.commandPrompt(ctx, x, p)
	if err != nil {
		return nil, err
	}
	prompt.Attachments = p.Attachments
	if len(p.Mentions) > agent.MaxMentions {
		return nil, protocol.NewInvalidParamsError(fmt.Sprintf("params/mentions: at most %d files and folders per prompt; attach fewer.", agent.MaxMentions), &protocol.InvalidParamsErrorData{Pointer: "/mentions"})
	}
	for _, m := range p.Mentions {
		prompt.Mentions = append(prompt.Mentions, m.Path)
	}
	release := h.s.holdSnapshots(x.ID) // answer other replicas' snapshots from its first signal
	runID, stored, err := h.s.runs.StartPrompt(ctx, x, prompt, originOf(connFrom(ctx)))
	release()
	for try := 0; ; try++ {
		owner, ok := elsewhere(err)
		if !ok {
			break
		}
		// The session's lease is another replica's: the prompt is queued there when a run holds
		// it (one hop; the owner answers a forwarded one itself, whatever it finds), and runs
		// here when the owner only kept the lease of an idle session (it yields it).
		if _, fwd := forwardedActor(ctx); fwd || try == 2 {
			tookEffect(ctx)
			return nil, protocol.NewHandlerFailedError(fmt.Sprintf("The session now runs on replica %q; send the prompt again.", owner))
		}
		var out protocol.ChatSendResult
		ferr := h.s.forward(ctx, owner, protocol.MethodChatSend, p, &out)
		if errors.Is(ferr, errYielded) {
			release := h.s.holdSnapshots(x.ID)
			runID, stored, err = h.s.runs.StartPrompt(ctx, x, prompt, originOf(connFrom(ctx)))
			release()
			continue
		}
		tookEffect(ctx)
		if ferr != nil {
			return nil, ferr
		}
		return &out, nil
	}
	tookEffect(ctx) // started or queued: the connection's next prompt goes behind it
	if err != nil {
		return nil, agentErr(h.s.notFoundAfterCache(x.ID, hint, err))
	}
	if stored != nil {
		// The run already streams; the answer waits for the prompt's commit (issue 10). A
		// write that fails refuses the run: its run:end says so, and nothing of it is kept.
		// The answer is the write's outcome, whatever the request timeout: an error answered
		// for a prompt that is then kept would have the client send it twice. The writer's
		// own timeouts bound the wait; promptStoreWait is a backstop.
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), promptStoreWait)
		err := stored(wctx)
		cancel()
		if err != nil {
			return nil, agentErr(h.s.notFoundAfterCache(x.ID, hint, err))
		}
	}
	return &protocol.ChatSendResult{RunID: runID}, nil
}

func shellQuote(s string) string {
	if s != "" && !strings.ContainsAny(s, " \t\n'\"\\$`!*?&;|<>(){}[]#~") {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func redactURL(u string) string {
	if i := strings.Index(u, "://"); i >= 0 {
		rest := u[i+3:]
		if at := strings.LastIndex(rest, "@"); at >= 0 {
			cred := rest[:at]
			if c := strings.Index(cred, ":"); c >= 0 {
				return u[:i+3] + cred[:c] + ":***@" + rest[at+1:]
			}
		}
	}
	return u
}

type machineHandler struct{ s *Server }

// Machine returns the machine group's handler.
func (h *handlers) Machine() protocol.MachineHandler { return machineHandler{h.s} }

// Register implements machine.register: the registration lasts while the connection is open.
func (h machineHandler) Register(ctx context.Context, p *protocol.MachineRegisterParams) (*protocol.MachineRegisterResult, error) {
	c := connFrom(ctx)
	id := uuid.NewString()
	if c != nil {
		c.log().Info("machine registered", "machine", p.Name, "id", id)
	}
	return &protocol.MachineRegisterResult{MachineID: id}, nil
}

type tokensHandler struct{ s *Server }

// Tokens returns the tokens group's handler.
func (h *handlers) Tokens() protocol.TokensHandler { return tokensHandler{h.s} }

func tokenInfo(t store.Token) protocol.TokenInfo {
	out := protocol.TokenInfo{Name: t.Name, Scope: t.Scope, CreatedAt: ms(t.CreatedAt)}
	if t.LastUsedAt != nil {
		out.LastUsedAt = ptr(ms(*t.LastUsedAt))
	}
	if t.RevokedAt != nil {
		out.RevokedAt = ptr(ms(*t.RevokedAt))
	}
	if t.ExpiresAt != nil {
		out.ExpiresAt = ptr(ms(*t.ExpiresAt))
	}
	return out
}

// List implements tokens.list.
func (h tokensHandler) List(ctx context.Context, _ *protocol.TokensListParams) (*protocol.TokensListResult, error) {
	ts, err := h.s.store.ListTokens(ctx)
	if err != nil {
		return nil, storeErr(err, "")
	}
	out := &protocol.TokensListResult{Tokens: make([]protocol.TokenInfo, 0, len(ts))}
	for _, t := range ts {
		out.Tokens = append(out.Tokens, tokenInfo(t))
	}
	return out, nil
}

// Revoke implements tokens.revoke: this process refuses the token from the answer on (token
// cache); it closes the token's connections when the revocation notice arrives.
func (h tokensHandler) Revoke(ctx context.Context, p *protocol.TokensRevokeParams) (*protocol.TokenInfo, error) {
	t, err := h.s.store.RevokeTokenBy(ctx, p.Name, actorOf(ctx))
	if errors.Is(err, store.ErrNotFound) {
		return nil, protocol.NewHandlerFailedError(fmt.Sprintf("No live token named %q; list them with tokens.list.", p.Name))
	}
	if err != nil {
		return nil, storeErr(err, "params/name")
	}
	h.s.tokens.drop(t.ID) // refused at once by this process, before the notice arrives
	info := tokenInfo(t)
	return &info, nil
}

// RevokeSelf implements tokens.revokeSelf (issue 24, "sign out"): the calling connection's token
// is revoked and refused by this process at once (token cache); the caller gets its answer, then
// its connection is closed with 1008 "token revoked", like every other connection of the token
// (closed when the revocation notice arrives).
func (h tokensHandler) RevokeSelf(ctx context.Context, _ *protocol.TokensRevokeSelfParams) (*protocol.TokenInfo, error) {
	c := connFrom(ctx)
	if c == nil {
		return nil, protocol.NewHandlerFailedError("tokens.revokeSelf revokes the token of a WebSocket connection; this call has none.")
	}
	c.signingOut.Store(true) // before the notice can arrive: this connection closes after its answer
	t, err := h.s.store.RevokeTokenID(ctx, c.token.ID, c.token.Name)
	if err != nil {
		c.signingOut.Store(false)
		if errors.Is(err, store.ErrNotFound) {
			return nil, protocol.NewHandlerFailedError("This connection's token is no longer live (revoked or expired); pair again for a new one.")
		}
		return nil, storeErr(err, "")
	}
	h.s.tokens.drop(t.ID)
	afterAnswer(ctx, func() {
		go c.drainAndClose(websocket.StatusPolicyViolation, "token revoked", 2*time.Second)
	})
	info := tokenInfo(t)
	return &info, nil
}

// Cancel implements chat.cancel; a cancel that finds nothing to stop is a no-op.
func (h chatHandler) Cancel(ctx context.Context, p *protocol.ChatCancelParams) (*protocol.ChatCancelResult, error) {
	if _, err := h.s.getSession(ctx, p.SessionID, "List the sessions with sessions.list."); err != nil {
		return nil, err
	}
	runID := ""
	if p.RunID != nil {
		runID = *p.RunID
	}
	if owner := h.s.ownerElsewhere(ctx, p.SessionID); owner != "" {
		var out protocol.ChatCancelResult
		if err := h.s.forward(ctx, owner, protocol.MethodChatCancel, p, &out); err != nil {
			return nil, err
		}
		return &out, nil
	}
	return &protocol.ChatCancelResult{Cancelled: h.s.runs.Cancel(p.SessionID, runID)}, nil
}

func ptr[T any](v T) *T { return &v }
