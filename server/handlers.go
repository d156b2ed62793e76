package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/zidane-server/zidane/protocol"
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
		AppVersion: Version, PID: int64(os.Getpid()), StartedAt: ms(s.startedAt),
		BuildID: protocol.SchemaHash[:12], CodeVersion: Version, HostID: s.hostID,
		HostKind: protocol.HostKindServer, HostName: s.hostName,
	}
}

func (s *Server) adminCommands() protocol.AdminCommands {
	where := "--data-dir " + shellQuote(s.cfg.DataDir)
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
		SignalEpoch: h.s.epoch, Methods: protocol.MethodsFor(c.scope), AdminCommands: h.s.adminCommands(),
	}
	if h.s.cfg.AllowClone {
		res.Clone = ptr(true)
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
		Archived: x.Archived, HostID: s.hostID, Model: optString(x.Model),
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
	title := "New session"
	if p.Title != nil && strings.TrimSpace(*p.Title) != "" {
		title = *p.Title
	}
	x, err := h.s.store.CreateSession(ctx, store.Session{Title: title, ProjectRoot: root, Cwd: dir, AgentID: "build", Status: "idle"})
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

func (s *Server) getSession(ctx context.Context, id, hint string) (store.Session, error) {
	x, err := s.store.GetSession(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return x, protocol.NewHandlerFailedError(fmt.Sprintf("Session %q not found. %s", id, hint))
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

// LoadEvents implements sessions.loadEvents (seed "Paging").
func (h sessionsHandler) LoadEvents(ctx context.Context, p *protocol.SessionsLoadEventsParams) (*protocol.SessionsLoadEventsResult, error) {
	if _, err := h.s.getSession(ctx, p.SessionID, "List the sessions with sessions.list."); err != nil {
		return nil, err
	}
	h.s.setView(connFrom(ctx), p.SessionID)
	h.s.runs.Flush(ctx)
	res := &protocol.SessionsLoadEventsResult{Exact: true, Events: []protocol.StreamEvent{}}
	var rows []store.EventRow
	if p.Before == nil && p.Limit == nil {
		all, err := h.s.store.LoadEvents(ctx, p.SessionID)
		if err != nil {
			return nil, storeErr(err, "")
		}
		rows = all
	} else {
		limit := 200
		if p.Limit != nil {
			limit = *p.Limit
		}
		page, err := h.s.store.LoadEventsPage(ctx, p.SessionID, p.Before, limit)
		if err != nil {
			return nil, storeErr(err, "")
		}
		rows = page.Events
		res.Start = page.Start
		if len(rows) > 0 && page.FirstTurn > 0 {
			ft := page.FirstTurn
			res.Cursor = &ft
		}
	}
	// Stored events are the server's own encoding: they are spliced into the answer as they are
	// (UnknownStreamEvent marshals its Raw verbatim), not decoded and encoded again.
	for _, r := range rows {
		if !json.Valid(r.Body) {
			h.s.log.Error("stored event is not valid JSON", "session", p.SessionID)
			res.Exact = false
			continue
		}
		res.Events = append(res.Events, &protocol.UnknownStreamEvent{Kind: r.Kind, Raw: r.Body})
	}
	return res, nil
}

// Resume implements sessions.resume (seed "Reconnect and resume"; field case B19).
func (h sessionsHandler) Resume(ctx context.Context, p *protocol.SessionsResumeParams) (*protocol.SessionsResumeResult, error) {
	if _, err := h.s.getSession(ctx, p.SessionID, "List the sessions with sessions.list."); err != nil {
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
	// The log keeps each signal encoded: the answer splices those bytes in (UnknownSignal
	// marshals its Raw verbatim) instead of decoding and re-encoding every signal — the resume
	// figure of docs/benchmarks.md.
	out := make([]protocol.ReplayedSignal, 0, len(a.signals))
	for _, e := range a.signals {
		out = append(out, protocol.ReplayedSignal{Seq: e.seq, Signal: &protocol.UnknownSignal{Kind: signalKind(e.signal), Raw: e.signal}})
	}
	return &protocol.SessionsResumeResult{OK: true, Signals: out}, nil
}

// signalKind reads the kind of an encoded signal, whose first member is kind (protocol.Marshal
// writes it first).
func signalKind(b []byte) string {
	const prefix = `{"kind":"`
	if !bytes.HasPrefix(b, []byte(prefix)) {
		return ""
	}
	rest := b[len(prefix):]
	if i := bytes.IndexByte(rest, '"'); i >= 0 {
		return string(rest[:i])
	}
	return ""
}

// Send implements chat.send: it answers once the run starts.
func (h chatHandler) Send(ctx context.Context, p *protocol.ChatSendParams) (*protocol.ChatSendResult, error) {
	const hint = "Create the session before sending a prompt."
	x, err := h.s.cachedSession(ctx, p.SessionID, hint)
	if err != nil {
		return nil, err
	}
	h.s.setView(connFrom(ctx), x.ID)
	if h.s.draining.Load() {
		return nil, protocol.NewHandlerFailedError("The server is shutting down; send the prompt again once it is back.")
	}
	if p.Model != nil && *p.Model != x.Model {
		if x, err = h.s.setModel(ctx, x.ID, *p.Model, "/model"); err != nil {
			return nil, err
		}
	}
	runID, err := h.s.runs.Start(ctx, x, p.Prompt, originOf(connFrom(ctx)))
	if err != nil {
		return nil, agentErr(h.s.notFoundAfterCache(x.ID, hint, err))
	}
	if !x.TitleSet {
		h.s.titleFromPrompt(x.ID, p.Prompt)
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

// Revoke implements tokens.revoke; the running server closes the token's connections when the
// revocation notice arrives.
func (h tokensHandler) Revoke(ctx context.Context, p *protocol.TokensRevokeParams) (*protocol.TokenInfo, error) {
	t, err := h.s.store.RevokeTokenBy(ctx, p.Name, actorOf(ctx))
	if errors.Is(err, store.ErrNotFound) {
		return nil, protocol.NewHandlerFailedError(fmt.Sprintf("No live token named %q; list them with tokens.list.", p.Name))
	}
	if err != nil {
		return nil, storeErr(err, "params/name")
	}
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
	return &protocol.ChatCancelResult{Cancelled: h.s.runs.Cancel(p.SessionID, runID)}, nil
}

func ptr[T any](v T) *T { return &v }
