package mcp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Prepare readies a stdio server's command before it starts: for scope context the server wraps
// it in the session's OS sandbox (the same spawn as exec's, server/workspace/sandbox), and answers
// the policy it runs under. sessionID names the session whose policy applies; an error refuses
// the command, which then does not run.
type Prepare func(cmd *exec.Cmd, u Use) (policy string, err error)

// Use is who needs a server's process: a session, its project and its sandbox policy. Shared
// scope-context processes are one per server config, project and policy; unshared ones one per
// session too; host-scope and HTTP ones one per config.
type Use struct {
	// SessionID is the session (its policy applies to a context-scope process).
	SessionID string
	// ProjectRoot is the session's project (the process's working folder, the sharing key).
	ProjectRoot string
	// Policy is the session's sandbox policy (a sharing key; the Prepare hook enforces it).
	Policy string
}

// Options configure a Manager. Zero fields take the documented defaults.
type Options struct {
	// UserFile is the server user's mcps.json ("" for none): ~/.zidane/mcps.json (UserFile).
	UserFile string
	// Env is the environment a stdio process starts from (its config's env is added); nil: PATH,
	// LANG, TZ and HOME of the server's (never its secrets).
	Env []string
	// Prepare wraps a context-scope stdio command in the sandbox. Nil runs it as is (tests only;
	// the server always sets it).
	Prepare Prepare
	// HostPrepare prepares a host-scope stdio command (nil: as is).
	HostPrepare func(cmd *exec.Cmd) error
	// Logger logs; default slog.Default().
	Logger *slog.Logger
	// IdleStop stops a process no session used for this long (default 5 minutes).
	IdleStop time.Duration
	// StderrBytes bounds each process's kept stderr (default 64 KiB; the oldest bytes go first).
	StderrBytes int
	// BackoffMin and BackoffMax bound the wait before a failed or dead server is started again
	// (defaults 200 ms and 30 s; doubled per consecutive failure).
	BackoffMin, BackoffMax time.Duration
	// ConnectTimeout bounds one connect (process start plus handshake; default 30 s).
	ConnectTimeout time.Duration
	// HTTPClient reaches streamable HTTP servers (default: a client with a 0 timeout, since
	// streams are long-lived; each request is bounded by its context).
	HTTPClient *http.Client
	// Watch, when set, is called with each folder whose mcps.json the manager reads (and the
	// folder above it while the .zidane folder is missing), so the server's one watcher can call
	// Invalidate when the file changes.
	Watch func(dir string)
	// OAuth, when set, gives the OAuth handler of a streamable HTTP server of the user file by
	// name (server/oauth's Manager.Handler: the stored sign-in's token, refreshed; a 401 says
	// to sign in with auth.oauth.begin). Nil, or a nil handler, sends no Authorization.
	OAuth func(server string) auth.OAuthHandler
	// Sharing, when set, is the mcpSharing setting (settings group): nil, each server's own
	// shared applies; non-nil, it wins over every server's (Manager.Shared).
	Sharing func() *bool
	// Elicit answers the servers' elicitation requests during tool calls (nil: elicitation is
	// not advertised and servers cannot elicit).
	Elicit ElicitFunc
	// Caller, when set, names who a tool call's context belongs to (the agent: its session's
	// id). A server request that does not say which call it belongs to is answered for the
	// newest call when every call in progress on the process has the same caller, and refused
	// when they differ (ErrAmbiguousCaller); nil, or "", counts every call as a different caller.
	Caller func(ctx context.Context) string
	// Sample answers sampling/createMessage; nil (the default: the operator has not enabled
	// sampling) advertises no sampling capability, and a server's request is refused.
	Sample SampleFunc
	// ProtocolVersion pins the version the client asks for ("": the newest the SDK speaks,
	// 2026-07-28, falling back to 2025-11-25).
	ProtocolVersion string
}

// Manager holds the configured servers and their running processes (issue 23 items 1 and 3).
// Safe for concurrent use.
type Manager struct {
	o Options

	mu    sync.Mutex
	procs map[string]*Proc
	files map[string]parsedFile // by path; dropped by Invalidate
	stop  chan struct{}
	once  sync.Once
	// janitorOnce starts the idle janitor with the first process.
	janitorOnce sync.Once
	// changed is closed and replaced when a config file is invalidated (Changed).
	changed chan struct{}
}

type parsedFile struct {
	servers map[string]Config
	fields  map[string]map[string]bool
	errs    []ConfigError
}

// NewManager makes a manager (its idle janitor starts with the first process); Close stops
// its processes.
func NewManager(o Options) *Manager {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.IdleStop <= 0 {
		o.IdleStop = 5 * time.Minute
	}
	if o.StderrBytes <= 0 {
		o.StderrBytes = 64 << 10
	}
	if o.BackoffMin <= 0 {
		o.BackoffMin = 200 * time.Millisecond
	}
	if o.BackoffMax <= 0 {
		o.BackoffMax = 30 * time.Second
	}
	if o.ConnectTimeout <= 0 {
		o.ConnectTimeout = 30 * time.Second
	}
	if o.HTTPClient == nil {
		o.HTTPClient = &http.Client{}
	}
	if o.Env == nil {
		for _, k := range []string{"PATH", "LANG", "LC_ALL", "TZ", "HOME", "USER"} {
			if v, ok := os.LookupEnv(k); ok {
				o.Env = append(o.Env, k+"="+v)
			}
		}
	}
	return &Manager{o: o, procs: map[string]*Proc{}, files: map[string]parsedFile{}, stop: make(chan struct{}), changed: make(chan struct{})}
}

// UserFile is the server user's mcps.json the manager reads ("" for none).
func (m *Manager) UserFile() string { return m.o.UserFile }

// Close stops every process and the idle janitor.
func (m *Manager) Close() {
	m.once.Do(func() { close(m.stop) })
	m.mu.Lock()
	ps := make([]*Proc, 0, len(m.procs))
	for k, p := range m.procs {
		ps = append(ps, p)
		delete(m.procs, k)
	}
	m.mu.Unlock()
	for _, p := range ps {
		p.Close()
	}
}

func (m *Manager) janitor() {
	t := time.NewTicker(m.o.IdleStop / 4)
	defer t.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-t.C:
			m.stopIdle(time.Now().Add(-m.o.IdleStop))
		}
	}
}

// stopIdle stops the processes last used before cutoff.
func (m *Manager) stopIdle(cutoff time.Time) {
	m.mu.Lock()
	var idle []*Proc
	for k, p := range m.procs {
		if p.lastUse().Before(cutoff) {
			idle = append(idle, p)
			delete(m.procs, k)
		}
	}
	m.mu.Unlock()
	for _, p := range idle {
		m.o.Logger.Info("mcp: stopping an idle server", "server", p.srv.Name)
		p.Close()
	}
}

// Invalidate drops the cached parse of a config file (the watcher calls it when the file or its
// folder changes) and wakes Changed's waiters; "" drops every file.
func (m *Manager) Invalidate(path string) {
	m.mu.Lock()
	if path == "" {
		m.files = map[string]parsedFile{}
	} else {
		delete(m.files, path)
	}
	close(m.changed)
	m.changed = make(chan struct{})
	m.mu.Unlock()
}

// Changed is closed at the next Invalidate.
func (m *Manager) Changed() <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.changed
}

func (m *Manager) load(path string) parsedFile {
	if path == "" {
		return parsedFile{}
	}
	m.mu.Lock()
	f, ok := m.files[path]
	m.mu.Unlock()
	if ok {
		return f
	}
	if w := m.o.Watch; w != nil {
		dir := filepath.Dir(path)
		w(dir)
		if _, err := os.Stat(dir); err != nil {
			w(filepath.Dir(dir))
		}
	}
	s, fs, errs := LoadFile(path)
	f = parsedFile{servers: s, fields: fs, errs: errs}
	m.mu.Lock()
	m.files[path] = f
	m.mu.Unlock()
	return f
}

// Servers returns the servers configured for a project (projectRoot "" for the user file
// alone): the user file merged with the project's, the project's winning, and the problems found.
func (m *Manager) Servers(projectRoot string) ([]Server, []ConfigError) {
	u := m.load(m.o.UserFile)
	var p parsedFile
	pf := ""
	if projectRoot != "" {
		pf = ProjectFile(projectRoot)
		p = m.load(pf)
	}
	servers, errs := Merge(m.o.UserFile, u.servers, u.fields, pf, p.servers, p.fields)
	return servers, append(append(append([]ConfigError(nil), u.errs...), p.errs...), errs...)
}

// Key is the process key of server s for use u, by s's own shared.
func Key(s Server, u Use) string { return keyFor(s, u, s.Config.IsShared()) }

// keyFor is the process key of server s for use u: one per config for HTTP and host-scope
// servers; per project and policy for a shared context one, and per session too otherwise.
func keyFor(s Server, u Use, shared bool) string {
	k := s.Name + "\x00" + s.Hash
	if s.Config.IsHTTP() || s.Config.EffectiveScope() == ScopeHost {
		return k
	}
	k += "\x00" + u.ProjectRoot + "\x00" + u.Policy
	if !shared {
		k += "\x00" + u.SessionID
	}
	return k
}

// Shared reports whether server s's context-scope process is shared by the sessions of one
// project and policy: the mcpSharing setting (Options.Sharing) when set, else s's own shared
// (absent means shared). Seed "catalog": "the mcpSharing setting wins".
func (m *Manager) Shared(s Server) bool {
	if m.o.Sharing != nil {
		if v := m.o.Sharing(); v != nil {
			return *v
		}
	}
	return s.Config.IsShared()
}

// Proc returns the process of server s for use u, created (not yet started) when there is none.
// Starting happens at the first call that needs it.
func (m *Manager) Proc(s Server, u Use) *Proc {
	k := keyFor(s, u, m.Shared(s))
	m.janitorOnce.Do(func() { go m.janitor() })
	m.mu.Lock()
	defer m.mu.Unlock()
	p, ok := m.procs[k]
	if !ok {
		p = &Proc{m: m, key: k, srv: s, use: u, stderr: newRing(m.o.StderrBytes), used: time.Now()}
		m.procs[k] = p
	}
	p.touch()
	return p
}

// Procs lists the processes known now, sorted by server name.
func (m *Manager) Procs() []*Proc {
	m.mu.Lock()
	out := make([]*Proc, 0, len(m.procs))
	for _, p := range m.procs {
		out = append(out, p)
	}
	m.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		return out[i].srv.Name < out[j].srv.Name || (out[i].srv.Name == out[j].srv.Name && out[i].key < out[j].key)
	})
	return out
}

// Drop stops and forgets the processes of server name (after a removal or a config change).
func (m *Manager) Drop(name string) {
	m.mu.Lock()
	var ps []*Proc
	for k, p := range m.procs {
		if p.srv.Name == name {
			ps = append(ps, p)
			delete(m.procs, k)
		}
	}
	m.mu.Unlock()
	for _, p := range ps {
		p.Close()
	}
}

// Status is a process's state for the catalog.
type Status struct {
	// State is "idle" (not started), "starting", "running", "restarting" (dead, waiting its
	// backoff), "failed" (the last start failed) or "stopped".
	State string
	// ProtocolVersion is the negotiated version ("" before a connect).
	ProtocolVersion string
	// Restarts counts the times the process was started again after it died or failed.
	Restarts int
	// LastError is the last connect or process failure ("" none).
	LastError string
	// Stderr is the tail of the process's stderr (bounded).
	Stderr string
	// Policy is the sandbox policy a context-scope process runs under ("" otherwise).
	Policy string
}

// Proc is one server's supervised connection: a stdio process or an HTTP session. It connects at
// the first use, restarts with backoff when the process dies (while sessions still use it), and
// keeps its stderr in a bounded ring. Safe for concurrent use.
type Proc struct {
	m      *Manager
	key    string
	srv    Server
	use    Use
	stderr *ring
	calls  calls

	mu         sync.Mutex
	cs         *sdk.ClientSession
	connecting chan struct{}
	tools      []*sdk.Tool
	toolsStale bool
	failures   int
	restarts   int
	nextTry    time.Time
	lastErr    string
	policy     string
	closed     bool
	used       time.Time
	// listChanged is closed and replaced on every tools/list_changed.
	listChanged chan struct{}
}

// Server is the config this process runs.
func (p *Proc) Server() Server { return p.srv }

func (p *Proc) touch() {
	p.mu.Lock()
	p.used = time.Now()
	p.mu.Unlock()
}

func (p *Proc) lastUse() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.used
}

// Status reports the process's state.
func (p *Proc) Status() Status {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := Status{Restarts: p.restarts, LastError: p.lastErr, Stderr: p.stderr.String(), Policy: p.policy}
	switch {
	case p.closed:
		st.State = "stopped"
	case p.cs != nil:
		st.State = "running"
		if r := p.cs.InitializeResult(); r != nil {
			st.ProtocolVersion = r.ProtocolVersion
		}
	case p.connecting != nil:
		st.State = "starting"
	case p.failures > 0 && p.restarts > 0:
		st.State = "restarting"
	case p.failures > 0:
		st.State = "failed"
	default:
		st.State = "idle"
	}
	return st
}

// ErrStopped is returned by a stopped Proc.
var ErrStopped = errors.New("the MCP server was stopped")

// Session returns the connected session, connecting (or restarting) first when needed. A server
// inside its restart backoff answers the last failure at once rather than waiting.
func (p *Proc) Session(ctx context.Context) (*sdk.ClientSession, error) {
	for {
		p.mu.Lock()
		p.used = time.Now()
		if p.closed {
			p.mu.Unlock()
			return nil, ErrStopped
		}
		if p.cs != nil {
			cs := p.cs
			p.mu.Unlock()
			return cs, nil
		}
		if w := p.connecting; w != nil {
			p.mu.Unlock()
			select {
			case <-w:
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		if wait := time.Until(p.nextTry); wait > 0 {
			err := fmt.Errorf("MCP server %q is restarting after a failure (%s); it is tried again in %s", p.srv.Name, p.lastErr, wait.Round(time.Millisecond))
			p.mu.Unlock()
			return nil, err
		}
		w := make(chan struct{})
		p.connecting = w
		p.mu.Unlock()
		cs, err := p.connect(ctx)
		p.mu.Lock()
		p.connecting = nil
		close(w)
		if err != nil {
			p.failLocked(err)
			p.mu.Unlock()
			return nil, err
		}
		if p.closed {
			p.mu.Unlock()
			_ = cs.Close()
			return nil, ErrStopped
		}
		p.cs, p.tools, p.toolsStale = cs, nil, true
		p.failures = 0
		p.mu.Unlock()
		go p.supervise(cs)
		return cs, nil
	}
}

func (p *Proc) failLocked(err error) {
	p.failures++
	p.lastErr = oneLine(err.Error())
	back := p.m.o.BackoffMin << min(p.failures-1, 16)
	if back > p.m.o.BackoffMax || back <= 0 {
		back = p.m.o.BackoffMax
	}
	p.nextTry = time.Now().Add(back)
}

// supervise waits for the session's end; an end that nobody asked for (the process died, the
// HTTP session was lost) counts as a failure, and the process is started again after its backoff
// while a session used it within IdleStop.
func (p *Proc) supervise(cs *sdk.ClientSession) {
	p.lost(cs, cs.Wait())
}

// lost records that session cs ended (the process died, the HTTP session was lost) and
// schedules the restart; a second report of the same end is ignored.
func (p *Proc) lost(cs *sdk.ClientSession, werr error) {
	p.mu.Lock()
	if p.cs != cs || p.closed {
		p.mu.Unlock()
		return
	}
	p.cs = nil
	msg := "the server process ended"
	if werr != nil && !errors.Is(werr, sdk.ErrConnectionClosed) {
		msg += ": " + werr.Error()
	}
	if tail := p.stderr.Tail(200); tail != "" {
		msg += " (stderr: " + tail + ")"
	}
	p.failLocked(errors.New(msg))
	p.restarts++
	wait := time.Until(p.nextTry)
	recent := time.Since(p.used) < p.m.o.IdleStop
	p.mu.Unlock()
	go func() { _ = cs.Close() }()
	p.m.o.Logger.Warn("mcp: server ended; restarting after backoff", "server", p.srv.Name, "wait", wait, "err", msg)
	if recent {
		time.AfterFunc(wait, func() {
			ctx, cancel := context.WithTimeout(context.Background(), p.m.o.ConnectTimeout)
			defer cancel()
			_, _ = p.Session(ctx)
		})
	}
}

// connect starts the process (or opens the HTTP session) and runs the handshake.
func (p *Proc) connect(ctx context.Context) (*sdk.ClientSession, error) {
	ctx, cancel := context.WithTimeout(ctx, p.m.o.ConnectTimeout)
	defer cancel()
	var t sdk.Transport
	c := p.srv.Config
	if c.IsHTTP() {
		hc := *p.m.o.HTTPClient
		if len(c.Headers) > 0 {
			base := hc.Transport
			if base == nil {
				base = http.DefaultTransport
			}
			hc.Transport = headerTransport{base: base, headers: c.Headers}
		}
		st := &sdk.StreamableClientTransport{Endpoint: c.URL, HTTPClient: &hc, MaxRetries: 2}
		if p.m.o.OAuth != nil && p.srv.Origin == OriginUser {
			st.OAuthHandler = p.m.o.OAuth(p.srv.Name)
		}
		t = st
	} else {
		cmd := exec.Command(c.Command, c.Args...)
		cmd.Env = append([]string(nil), p.m.o.Env...)
		for _, k := range sortedKeys(c.Env) {
			cmd.Env = append(cmd.Env, k+"="+c.Env[k])
		}
		cmd.Dir = p.use.ProjectRoot
		cmd.Stderr = p.stderr
		if c.EffectiveScope() == ScopeHost {
			cmd.Dir = ""
			if h := p.m.o.HostPrepare; h != nil {
				if err := h(cmd); err != nil {
					return nil, err
				}
			}
		} else if prep := p.m.o.Prepare; prep != nil {
			pol, err := prep(cmd, p.use)
			if err != nil {
				return nil, fmt.Errorf("MCP server %q not started in the sandbox: %w", p.srv.Name, err)
			}
			p.mu.Lock()
			p.policy = pol
			p.mu.Unlock()
		}
		t = &sdk.CommandTransport{Command: cmd, TerminateDuration: time.Second}
	}
	copts := &sdk.ClientOptions{
		ToolListChangedHandler: func(context.Context, *sdk.ToolListChangedRequest) { p.markToolsStale() },
	}
	p.clientOptions(copts)
	client := sdk.NewClient(&sdk.Implementation{Name: "zidane-server", Version: "1"}, copts)
	var so *sdk.ClientSessionOptions
	if v := p.m.o.ProtocolVersion; v != "" {
		so = &sdk.ClientSessionOptions{ProtocolVersion: v}
	}
	cs, err := client.Connect(ctx, t, so)
	if err != nil {
		msg := fmt.Sprintf("MCP server %q did not connect: %v", p.srv.Name, err)
		if tail := p.stderr.Tail(300); tail != "" {
			msg += " (stderr: " + tail + ")"
		}
		if !c.IsHTTP() && c.EffectiveScope() != ScopeHost {
			p.mu.Lock()
			pol := p.policy
			p.mu.Unlock()
			msg += sandboxHint(pol)
		}
		return nil, errors.New(msg)
	}
	return cs, nil
}

func (p *Proc) markToolsStale() {
	p.mu.Lock()
	p.toolsStale = true
	if p.listChanged != nil {
		close(p.listChanged)
		p.listChanged = nil
	}
	p.mu.Unlock()
}

// ListChanged is closed at the server's next tools/list_changed notification.
func (p *Proc) ListChanged() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.listChanged == nil {
		p.listChanged = make(chan struct{})
	}
	return p.listChanged
}

// Tools returns the server's tools, listed again when the server said they changed
// (tools/list_changed) or after a restart; otherwise the last list.
func (p *Proc) Tools(ctx context.Context) ([]*sdk.Tool, error) {
	cs, err := p.Session(ctx)
	if err != nil {
		return p.LastTools(), err
	}
	p.mu.Lock()
	if !p.toolsStale && p.cs == cs {
		ts := p.tools
		p.mu.Unlock()
		return ts, nil
	}
	p.toolsStale = false
	p.mu.Unlock()
	var ts []*sdk.Tool
	for t, err := range cs.Tools(ctx, nil) {
		if err != nil {
			p.markToolsStale()
			return p.LastTools(), fmt.Errorf("MCP server %q: tools/list: %w", p.srv.Name, err)
		}
		ts = append(ts, t)
	}
	p.mu.Lock()
	p.tools = ts
	p.mu.Unlock()
	return ts, nil
}

// LastTools returns the tools as last listed (nil before any list).
func (p *Proc) LastTools() []*sdk.Tool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.tools
}

// CallTool calls a tool. When the process dies during the call the error says so (the call is
// not retried: it may have had effects) and the supervisor restarts it. The server's
// elicitation and sampling requests during the call are answered in ctx (Options.Elicit,
// Options.Sample).
func (p *Proc) CallTool(ctx context.Context, name string, args any) (*sdk.CallToolResult, error) {
	cs, err := p.Session(ctx)
	if err != nil {
		return nil, err
	}
	caller := ""
	if f := p.m.o.Caller; f != nil {
		caller = f(ctx)
	}
	ctx, done := p.calls.add(ctx, caller)
	defer done()
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil && ctx.Err() == nil && (errors.Is(err, sdk.ErrConnectionClosed) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)) {
		p.lost(cs, err)
		return nil, fmt.Errorf("MCP server %q ended during the call (it is restarted; the call did not finish and is not retried): %w", p.srv.Name, err)
	}
	return res, err
}

// Close stops the process (or closes the HTTP session) and keeps it stopped.
func (p *Proc) Close() {
	p.mu.Lock()
	p.closed = true
	cs := p.cs
	p.cs = nil
	p.mu.Unlock()
	if cs != nil {
		_ = cs.Close()
	}
}

// headerTransport adds a server's configured headers to every request.
type headerTransport struct {
	base    http.RoundTripper
	headers map[string]string
}

// RoundTrip implements http.RoundTripper.
func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h.headers {
		r.Header.Set(k, v)
	}
	return h.base.RoundTrip(r)
}

// ring keeps the last max bytes written to it.
type ring struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func newRing(max int) *ring { return &ring{max: max} }

// Write implements io.Writer; it never fails.
func (r *ring) Write(b []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := len(b)
	if len(b) >= r.max {
		r.buf = append(r.buf[:0], b[len(b)-r.max:]...)
		return n, nil
	}
	if over := len(r.buf) + len(b) - r.max; over > 0 {
		r.buf = append(r.buf[:0], r.buf[over:]...)
	}
	r.buf = append(r.buf, b...)
	return n, nil
}

// String returns what is kept.
func (r *ring) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return string(r.buf)
}

// Tail returns the last n bytes kept, on one line.
func (r *ring) Tail(n int) string {
	s := r.String()
	if len(s) > n {
		s = s[len(s)-n:]
	}
	return oneLine(s)
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// sandboxHint says, after a context-scope stdio server failed to connect, where it ran: inside
// the session's sandbox under policy, so a command that fetches itself (`npx -y`, `uvx`) finds
// no network there.
func sandboxHint(policy string) string {
	if policy == "" {
		policy = "the session's"
	}
	return fmt.Sprintf("; it runs in the session's sandbox (policy %s, scope: context), which has no network unless the policy allows it: "+
		"a command that downloads itself (npx -y, uvx) cannot start there; install the server inside a workspace root, or set \"scope\": \"host\" for it in the server user's mcps.json", policy)
}
