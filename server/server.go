// Package server is zidane-server: HTTP and WebSocket on one port, token auth, the JSON-RPC
// connection loop, the signal hub with its replay log, and the thin handlers of the generated
// protocol interfaces. The agent runtime lives in server/agent and reports through agentReporter.
// It implements the protocol seed (shared/seeds/000_…).
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"github.com/google/uuid"
	"golang.org/x/sync/semaphore"

	"github.com/zidane-server/zidane/protocol"
	"github.com/zidane-server/zidane/server/agent"
	"github.com/zidane-server/zidane/server/agent/mcp"
	"github.com/zidane-server/zidane/server/agent/tools"
	"github.com/zidane-server/zidane/server/cluster"
	"github.com/zidane-server/zidane/server/credstore"
	"github.com/zidane-server/zidane/server/oauth"
	"github.com/zidane-server/zidane/server/sse"
	"github.com/zidane-server/zidane/server/store"
	"github.com/zidane-server/zidane/server/webapp"
	"github.com/zidane-server/zidane/server/workspace"
	"github.com/zidane-server/zidane/server/workspace/diag"
	"github.com/zidane-server/zidane/server/workspace/fileindex"
	"github.com/zidane-server/zidane/server/workspace/gitx"
	"github.com/zidane-server/zidane/server/workspace/sandbox"
	"github.com/zidane-server/zidane/server/workspace/watch"
)

// Version is the server's application version (protocol.ProductVersion, from the VERSION file), reported in hello and GET /version.
var Version = protocol.ProductVersion

// Limits are the server's documented limits (docs/security.md). Zero fields take the defaults.
type Limits struct {
	// MaxMessageBytes is the largest message in either direction; default 16 MiB. A larger incoming
	// message closes the connection with 1009; a larger answer becomes ResponseTooLarge.
	MaxMessageBytes int64
	// ConcurrentRequests bounds the requests one connection runs at once; default 16.
	ConcurrentRequests int
	// InflightRequestBytes bounds the bytes of the incoming WebSocket frames all connections
	// together have read and not yet answered (a frame counts whole, from its read to its last
	// answer); past it a read loop waits before running its frame, as for ConcurrentRequests (TCP
	// backpressure on the client), in arrival order across connections. Default 16 times
	// MaxMessageBytes (256 MiB), at least MaxMessageBytes. Memory for requests is then at most
	// this plus one frame being read per connection.
	InflightRequestBytes int64
	// HelloTimeout closes (1008) a connection that sends no ipc.hello in time; default 30 s.
	HelloTimeout time.Duration
	// RequestTimeout bounds one request's handler; default 60 s.
	RequestTimeout time.Duration
	// SendQueueMessages and SendQueueBytes bound a connection's outgoing queue; past either the
	// connection is closed with 1013 and the client resumes. Defaults 8192 messages, 64 MiB.
	SendQueueMessages int
	SendQueueBytes    int
	// SendQueueTotalBytes bounds the outgoing bytes queued on all WebSocket connections together
	// (each connection's queue counted whole, a signal shared by several counted once for each);
	// past it the connection with the largest queue is closed with 1013. Default 16 times
	// SendQueueBytes (1 GiB), at least SendQueueBytes.
	SendQueueTotalBytes int64
	// WriteTimeout bounds one frame's write; default 10 s.
	WriteTimeout time.Duration
	// PingInterval is how often the server pings; default 25 s. PongTimeout is how long it waits
	// for the pong; default 20 s.
	PingInterval, PongTimeout time.Duration
	// Replay bounds the replay log.
	Replay ReplayLimits
	// MaxWatches bounds the kernel watches (folders) the server's one file watcher holds for
	// every connection together (field case T10; --max-watches); default watch.DefaultMax (4096).
	// A watch past it is refused with HandlerFailed naming the limit.
	MaxWatches int
	// RefWatchFolders bounds the folders one repository's git.watch takes of MaxWatches; default
	// gitx.DefaultRefWatchFolders (64). A repository with more ref folders is polled besides.
	RefWatchFolders int
	// RefPoll is how often such a repository's refs are re-read; default 2 s.
	RefPoll time.Duration
	// MaxConnsPerToken and MaxConnsPerAddress bound the WebSocket connections and SSE streams
	// open at once per token and per client address (--max-conns-per-token,
	// --max-conns-per-address); past either a new one is refused with 429. Default 8192 each.
	MaxConnsPerToken, MaxConnsPerAddress int
}

func (l *Limits) defaults() {
	if l.MaxMessageBytes <= 0 {
		l.MaxMessageBytes = 16 << 20
	}
	if l.ConcurrentRequests <= 0 {
		l.ConcurrentRequests = 16
	}
	if l.HelloTimeout <= 0 {
		l.HelloTimeout = 30 * time.Second
	}
	if l.RequestTimeout <= 0 {
		l.RequestTimeout = 60 * time.Second
	}
	if l.SendQueueMessages <= 0 {
		l.SendQueueMessages = 8192
	}
	if l.SendQueueBytes <= 0 {
		l.SendQueueBytes = 64 << 20
	}
	if int64(l.SendQueueBytes) < l.MaxMessageBytes {
		l.SendQueueBytes = int(l.MaxMessageBytes) // one largest message must fit
	}
	if l.InflightRequestBytes <= 0 {
		l.InflightRequestBytes = 16 * l.MaxMessageBytes
	}
	if l.InflightRequestBytes < l.MaxMessageBytes {
		l.InflightRequestBytes = l.MaxMessageBytes
	}
	if l.SendQueueTotalBytes <= 0 {
		l.SendQueueTotalBytes = 16 * int64(l.SendQueueBytes)
	}
	if l.SendQueueTotalBytes < int64(l.SendQueueBytes) {
		l.SendQueueTotalBytes = int64(l.SendQueueBytes)
	}
	if l.WriteTimeout <= 0 {
		l.WriteTimeout = 10 * time.Second
	}
	if l.PingInterval <= 0 {
		l.PingInterval = 25 * time.Second
	}
	if l.PongTimeout <= 0 {
		l.PongTimeout = 20 * time.Second
	}
	l.Replay.defaults()
	if l.MaxWatches <= 0 {
		l.MaxWatches = watch.DefaultMax
	}
	if l.RefWatchFolders <= 0 {
		l.RefWatchFolders = gitx.DefaultRefWatchFolders
	}
	if l.RefPoll <= 0 {
		l.RefPoll = 2 * time.Second
	}
	if l.MaxConnsPerToken <= 0 {
		l.MaxConnsPerToken = 8192
	}
	if l.MaxConnsPerAddress <= 0 {
		l.MaxConnsPerAddress = 8192
	}
}

// Config configures a Server.
type Config struct {
	// WorkspaceRoots are the folders sessions may work in; the first is the default cwd.
	WorkspaceRoots []string
	// AllowedOrigins lists browser origins (scheme://host[:port]) allowed to connect; a request
	// without Origin (a non-browser client) or from the server's own origin is always allowed.
	AllowedOrigins []string
	// TokenRecheck is how often open connections' and cached tokens are checked against the
	// database, in case a revocation NOTIFY was lost (field case B32), and how long a verified
	// token stays in the token cache; default 30 s.
	TokenRecheck time.Duration
	// AllowedHosts lists extra Host names ("name" or "name:port") a request that arrives on a
	// loopback address may carry, beside the loopback names (the DNS-rebinding defence,
	// docs/security.md "Host check"); for instance the public name a reverse proxy forwards.
	AllowedHosts []string
	// TrustedProxies are the reverse proxies (--trusted-proxy) whose X-Forwarded-For or
	// Forwarded header names the client: a request whose TCP peer is in one of these ranges
	// counts against that client's address (pairing lockouts, connections per address) instead
	// of the proxy's. Empty: the TCP peer always, the headers ignored.
	TrustedProxies []netip.Prefix
	// DataDir is shown in adminCommands so an operator can mint an admin token.
	DataDir string
	// DatabaseURL, when set, is passed to adminCommands instead of DataDir.
	DatabaseURL string
	// NATSURL, when set (--nats-url), carries the signals, their $seq and the replay log on NATS
	// JetStream, shared by every replica on the same database (issue 25; docs/scaling.md); the
	// signal epoch then names the stream, not the process. Empty: the in-process hub.
	NATSURL string
	// NATSStream names the JetStream stream (default jetstream.DefaultStream); replicas of one
	// deployment share it.
	NATSStream string
	// Binary is how adminCommands name the operator binary: its absolute path, or its bare name
	// when PATH finds it; default "zidane-server".
	Binary string
	// Limits are the server's limits.
	Limits Limits
	// Logger logs; default slog.Default().
	Logger *slog.Logger
	// ApprovalTimeout is how long a tool approval request waits before it expires as a denial;
	// default agent.DefaultApprovalTimeout (30 min).
	ApprovalTimeout time.Duration
	// RestoreWindow is how long history.restore can bring back what history.rollback dropped,
	// across restarts; default DefaultRestoreWindow (7 days).
	RestoreWindow time.Duration
	// Tools holds the agent tools' limits and exec's Launcher (where the OS sandbox plugs in).
	Tools tools.Config
	// MCPUserFile is the server user's mcps.json (issue 23); "" is ~/.zidane/mcps.json, "-" none.
	MCPUserFile string
	// MCPSampling lets MCP servers' sampling/createMessage requests run on the session's model,
	// each under an approval (issue 23 item 2; --mcp-sampling). False: sampling is not advertised
	// and a request is refused.
	MCPSampling bool
	// StepDelay slows the scripted provider between streamed pieces (tests use it to watch a run).
	StepDelay time.Duration
	// Models resolves the agent's model ids; nil: the scripted provider alone.
	Models agent.Models
	// SystemPrompt replaces the agent's built-in system prompt (the operator's override).
	SystemPrompt string
	// UserHome is the server user's home: its .zidane/ (and .claude/) agents, skills and commands
	// are merged with each project's. "" reads only the projects' (the tests' default).
	UserHome string
	// RunLimits are the agent's per-run limits (turns, wall time, output tokens, concurrent runs).
	RunLimits agent.Limits
	// AllowClone lets chat tokens clone repositories into the workspace roots (git.clone; hello's
	// clone: true). Off by default.
	AllowClone bool
	// CloneSchemes are the URL schemes git.clone and git.sync accept besides local paths inside
	// the roots; default https and ssh.
	CloneSchemes []string
	// ProjectTerminals lets admin tokens run terminals in the workspace roots (the terminal group;
	// hello's projectTerminals: true). Off by default: see docs/security.md.
	ProjectTerminals bool
	// AllowRemoteInstalls lets admin tokens install what the server will run: claudeImport.run
	// (issue 27 item 5); hello's remoteInstalls says so.
	AllowRemoteInstalls bool
	// AllowCreateFolders lets chat tokens create folders in the workspace roots (fs.createFolder;
	// hello's createFolders). Off by default.
	AllowCreateFolders bool
	// TerminalPrepare, when set, changes each terminal's command before it starts: the hook
	// through which terminals run under the operator's sandbox policy. An error refuses the start.
	TerminalPrepare func(*exec.Cmd) error
	// Sandbox configures the OS sandbox of the agent's commands (issue 14).
	Sandbox SandboxConfig
	// ViaMakeRun is set when `make run` started the server (ZIDANE_MAKE_RUN=1): a refusal that
	// names a start flag then names the `make run ARGS="…"` form too (FlagHint), keeping the
	// ARGS it was started with (MakeArgs, from ZIDANE_MAKE_ARGS).
	ViaMakeRun bool
	MakeArgs   string
	// WebApp serves the embedded web app on every plain GET no other route takes (issue 24;
	// server/webapp; --web-app, on by default in the binary). Off: those GETs answer 404.
	WebApp bool
	// WebAppReserved are path prefixes besides /zidane that never get the app (404 when no route
	// takes them): the SSE handler's base path. nil: webapp.DefaultSSEBase (/api/chat).
	WebAppReserved []string
	// SSEBasePath mounts the SSE protocol v1 (server/sse, schema/sse.json; issue 26) under this
	// path; "" leaves it off. The binary's --sse-base-path defaults to protocol.SSEDefaultBasePath.
	SSEBasePath string
	// SSEHeartbeat is how often an idle SSE stream writes a comment line; default 15 s.
	SSEHeartbeat time.Duration
	// ReplicaID names this process among the replicas of one database (issue 25; --replica-id):
	// unique per replica and the same across its restarts; default the host name.
	ReplicaID string
	// LeaseTTL and LeaseHeartbeat are the run lease bound and its renewal interval; defaults
	// cluster.DefaultLeaseTTL (10 s) and cluster.DefaultHeartbeat (2 s) (docs/scaling.md).
	LeaseTTL, LeaseHeartbeat time.Duration
	// SignalHealth, when set, is the shared signal hub's health (cluster.Health): /healthz and
	// chat.send follow it. Nil: signals stay in this process, always healthy.
	SignalHealth cluster.Health
	// SignalTail, when set, gives a replica taking over a dead one's run what that run streamed
	// but did not write (cluster.Tail), and makes it send the run's run:end.
	SignalTail cluster.Tail
	// CredentialKeyFile is --credential-key-file, the credential store's key (issue 23 §5);
	// default <DataDir>/credential.key, created 0600. With neither, the auth group answers that
	// the server has no credential store.
	CredentialKeyFile string
	// PublicURL is --public-url, the address browsers reach the server by; an https one lets
	// MCP sign-ins use a Client ID Metadata Document (<PublicURL>/zidane/oauth/client.json).
	PublicURL string
	// MCPServers resolves MCP servers for sign-ins; default oauth.FileResolver of the server
	// user's mcps.json (MCPUserFile), whose HTTP servers get their tokens through
	// mcp.Options.OAuth (server/mcp.go).
	MCPServers oauth.Resolver
	// OAuthHTTPClient makes the sign-ins' requests; default a client with a 30 s timeout.
	OAuthHTTPClient *http.Client
}

// MakeRunEnv is the variable `make run` sets so that refusals naming a start flag also say how
// to pass it through make (Config.ViaMakeRun).
const MakeRunEnv = "ZIDANE_MAKE_RUN"

// MakeArgsEnv is the variable `make run` puts its ARGS in, so a hint keeps them.
const MakeArgsEnv = "ZIDANE_MAKE_ARGS"

// FlagHint names a start flag (with its value, e.g. "--allowed-host NAME") as an operator passes
// it: the flag itself, followed, when viaMake is set, by the `make run ARGS="…"` form that adds
// it to the ARGS the server was started with (makeArgs).
func FlagHint(flag string, viaMake bool, makeArgs string) string {
	if !viaMake {
		return flag
	}
	all := strings.TrimSpace(strings.TrimSpace(makeArgs) + " " + flag)
	return flag + ` (with make run: make run ARGS="` + all + `")`
}

// flagHint is FlagHint for this server's start.
func (s *Server) flagHint(flag string) string {
	return FlagHint(flag, s.cfg.ViaMakeRun, s.cfg.MakeArgs)
}

// Server is one zidane-server process.
type Server struct {
	cfg       Config
	ws        *workspace.Workspace // the one confinement point for paths in the roots
	store     *store.Store
	log       *slog.Logger
	hub       *hub
	snaps     snapshotSubs // other replicas' snapshots of the sessions this one runs (natsbus.go)
	handlers  *handlers
	hostID    string
	epoch     string
	startedAt time.Time
	pid       int64 // os.Getpid, a system call each time it is asked
	hostName  string
	baseCtx   context.Context
	stop      context.CancelFunc
	connSeq   atomic.Int64
	runs      *agent.Runtime
	gate      *agent.Gate     // pending approvals and questions (issue 9)
	tools     *agent.ToolHost // the agent's tools behind approvals
	pairs     *pairLimiter
	metrics   *metrics
	replica   *cluster.Replica // this process among the replicas of its database (replicas.go)

	connsMu sync.Mutex
	conns   map[*conn]struct{}
	// queued is the sum of every connection's qbytes (Limits.SendQueueTotalBytes bounds it), of
	// which releasing is held by closing connections; shedding is set while one goroutine closes
	// the largest queue (shedLargest).
	queued    atomic.Int64
	releasing atomic.Int64
	shedding  atomic.Bool
	// inflight admits incoming frames by size (Limits.InflightRequestBytes, admitFrame);
	// inflightWaiting counts the read loops waiting for room.
	inflight        *semaphore.Weighted
	inflightWaiting atomic.Int32
	draining        atomic.Bool // set by Shutdown: new connections are refused with 503

	presencePending atomic.Bool    // a coalesced presence:changed is scheduled
	presence        presenceShares // the other replicas' presence (presence_share.go)
	rechecks        atomic.Uint64  // token re-checks finished (recheckTokens), which tests wait on

	media  *mediaTickets // GET /zidane/media tickets (media.go)
	drafts *draftBook    // drafts in memory, written coalesced (handlers_state.go)
	git    *gitx.Runner  // every git call of the server (handlers_git.go)
	gitMu  sync.Mutex
	// clones are the running clones by id (handlers_git.go).
	clones map[string]*cloneJob
	// watcher is the server's one file watcher (one inotify instance, Limits.MaxWatches kernel
	// watches): every watch kind subscribes to it (field case T10).
	watcher *watch.Watcher
	// defsWatch publishes agents:changed, skills:changed and commands:changed.
	defsWatch *defsWatch
	// files are the `@` completion indexes, one per root (issue 28).
	files *fileindex.Set
	// mcp holds the MCP servers and their processes (server/mcp.go); mcpTests their last
	// mcp.test (handlers_mcp.go).
	mcp      *mcp.Manager
	mcpTests mcpTests
	// refWatchers are the ref watchers by repository top, one per watched repository, and
	// refWatching the repositories each connection watches (handlers_gitwatch.go); under gitMu.
	refWatchers map[string]*gitx.RefWatcher
	refWatching map[*conn]map[string]struct{}
	// terms are the running terminals by id (handlers_terminal.go).
	termMu sync.Mutex
	terms  map[string]*termJob
	// termStarting counts each connection's terminal.start calls between their limit check and
	// their job's entry in terms, so concurrent starts cannot pass maxTerminalsPerConn.
	termStarting map[*conn]int
	// bgWG counts the clones and terminal watchers running in the background; Shutdown waits
	// for them (their connections are closed, so they are ending).
	bgWG sync.WaitGroup

	// sandbox runs the agent's commands (server/sandbox.go); host caches host.info.
	sandbox *sandbox.Sandbox
	host    hostCache
	// diag runs and caches files.diagnostics (handlers_diagnostics.go).
	diag *diag.Runner
	// sessions caches chat.send's session lookups (sessioncache.go).
	sessions sessionCache
	// tokens caches the tokens the upgrade verified (tokencache.go).
	tokens tokenCache
	// webapp serves the web app on the other plain GETs; nil when Config.WebApp is off.
	webapp *webapp.Handler
	// sse serves the SSE protocol under cfg.SSEBasePath (nil when off); streams are its open
	// streams; bounds counts connections and streams per token and address.
	sse     *sse.Handler
	streams sseStreams
	bounds  *connBounds

	// creds is the credential store and oauth the MCP sign-ins (handlers_auth.go); both nil
	// without a key file (Config.CredentialKeyFile, DataDir).
	creds *credstore.Store
	oauth *oauth.Manager
}

// compile-time check that the server implements every generated handler interface.
var _ protocol.Handlers = (*handlers)(nil)

// New creates a server on an open store.
func New(ctx context.Context, cfg Config, st *store.Store) (*Server, error) {
	cfg.Limits.defaults()
	if cfg.TokenRecheck <= 0 {
		cfg.TokenRecheck = 30 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Binary == "" {
		cfg.Binary = "zidane-server"
	}
	if err := checkSSEBasePath(cfg.SSEBasePath); err != nil {
		return nil, err
	}
	if len(cfg.WorkspaceRoots) == 0 {
		wd, err := os.Getwd()
		if err != nil {
			return nil, err
		}
		cfg.WorkspaceRoots = []string{wd}
	}
	// One hidden set (docs/security.md "Hidden paths"): the confinement point and the sandbox
	// both hide the data dir, the --sandbox-hide paths and the user's credential files.
	hidden := append([]string{}, cfg.Sandbox.Hide...)
	if cfg.DataDir != "" {
		hidden = append(hidden, cfg.DataDir)
	}
	if cfg.CredentialKeyFile != "" { // the credential store's key, wherever it lives
		hidden = append(hidden, cfg.CredentialKeyFile)
	}
	ws, err := workspace.New(cfg.WorkspaceRoots, hidden...)
	if err != nil {
		return nil, err
	}
	cfg.WorkspaceRoots = ws.Roots()
	hostID, err := st.HostID(ctx)
	if err != nil {
		return nil, fmt.Errorf("read host id: %w", err)
	}
	hn, _ := os.Hostname()
	if cfg.ReplicaID == "" {
		cfg.ReplicaID = hn
	}
	base, stop := context.WithCancel(context.Background())
	s := &Server{
		cfg: cfg, ws: ws, store: st, log: cfg.Logger, hostID: hostID, epoch: uuid.NewString(),
		startedAt: time.Now(), pid: int64(os.Getpid()), hostName: hn, baseCtx: base, stop: stop, conns: map[*conn]struct{}{}, inflight: semaphore.NewWeighted(cfg.Limits.InflightRequestBytes),
	}
	s.hub = newHub(s.epoch, cfg.Limits.Replay, int(cfg.Limits.MaxMessageBytes))
	s.hub.log = s.log
	if cfg.NATSURL != "" {
		if err := s.openBus(ctx); err != nil {
			stop()
			return nil, err
		}
	}
	s.bounds = newConnBounds(cfg.Limits.MaxConnsPerToken, cfg.Limits.MaxConnsPerAddress)
	if cfg.SSEBasePath != "" {
		s.sse = sse.New(sse.Config{BasePath: cfg.SSEBasePath, MaxBodyBytes: cfg.Limits.MaxMessageBytes, Heartbeat: cfg.SSEHeartbeat,
			QueueRecords: cfg.Limits.SendQueueMessages, QueueBytes: cfg.Limits.SendQueueBytes, WriteTimeout: cfg.Limits.WriteTimeout,
			BodyTimeout: cfg.Limits.RequestTimeout, Logger: cfg.Logger}, sseBackend{s})
	}
	s.pairs = newPairLimiter()
	if err := s.newCredentials(ctx); err != nil {
		stop()
		return nil, err
	}
	s.gate = agent.NewGate(st, agentReporter{s}, cfg.ApprovalTimeout)
	s.tools = &agent.ToolHost{WS: ws, Config: cfg.Tools, Gate: s.gate, Store: st, Reporter: agentReporter{s}, Logger: s.log}
	s.replica, err = cluster.New(cluster.Config{Store: st, ID: cfg.ReplicaID, LeaseTTL: cfg.LeaseTTL, Heartbeat: cfg.LeaseHeartbeat,
		Logger: s.log, Handle: s.handleReplicaCall, TakeOver: s.takeOver, Lost: s.leasesLost})
	if err != nil {
		stop()
		return nil, err
	}
	s.metrics = newMetrics(s)
	s.hub.published = s.metrics.signals
	s.runs, err = agent.New(agent.Config{
		Store: st, Reporter: agentReporter{s}, Logger: s.log,
		MaxMessageBytes: int(cfg.Limits.MaxMessageBytes), StepDelay: cfg.StepDelay,
		Models: s.storedModels(ctx), SystemPrompt: cfg.SystemPrompt, Limits: cfg.RunLimits, DefsHome: cfg.UserHome,
		Tools: agent.HostTools{Host: s.tools}, Workspace: ws, Leases: s.replica, SharedSignals: s.Bus() != nil,
		AutoCompact: func(ctx context.Context) bool {
			set, err := s.loadSettings(ctx)
			return err != nil || set.AutoCompact == nil || *set.AutoCompact
		},
	})
	if err != nil {
		stop()
		return nil, err
	}
	s.tools.Sampler = s.runs.SampleText
	s.handlers = &handlers{s: s}
	if cfg.WebApp {
		reserved := cfg.WebAppReserved
		if reserved == nil && cfg.SSEBasePath != "" {
			reserved = []string{cfg.SSEBasePath} // the app never answers below the SSE routes
		}
		s.webapp = webapp.New(webapp.Options{Reserved: reserved})
	}
	if err := s.newSandbox(); err != nil {
		stop()
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	if err := s.newDiagnostics(); err != nil {
		stop()
		return nil, fmt.Errorf("diagnostics: %w", err)
	}
	s.git = &gitx.Runner{Schemes: cfg.CloneSchemes}
	s.clones = map[string]*cloneJob{}
	s.media = newMediaTickets()
	s.drafts = newDraftBook(st, s.log)
	go s.drafts.run(base)
	s.refWatchers = map[string]*gitx.RefWatcher{}
	s.refWatching = map[*conn]map[string]struct{}{}
	s.watcher = watch.New(cfg.Limits.MaxWatches)
	s.files = fileindex.NewSet(ws, s.watcher)
	s.newMCP()
	s.newDefsWatch()
	s.terms = map[string]*termJob{}
	s.termStarting = map[*conn]int{}
	// Registered before any run: the runs a previous process of this replica (or a dead
	// replica) left are ended first (issue 8 "Crashes", issue 25 §2).
	if err := s.replica.Start(base); err != nil {
		stop()
		s.runs.Close()
		return nil, fmt.Errorf("end the runs a previous process left: %w", err)
	}
	// One LISTEN connection carries token revocations and the calls between replicas.
	notices := s.replica.Notices()
	notices[store.TokenRevokedChannel] = s.closeTokenConns
	go st.Listen(base, time.Second, notices, func() {
		s.recheckTokens()
		s.replica.Listening(base)
	})
	go s.recheckTokensEvery(cfg.TokenRecheck)
	if bus := s.Bus(); bus != nil {
		if err := s.startPresenceShare(bus); err != nil {
			s.log.Warn("presence is not shared with the other replicas", "err", err)
		}
	}
	return s, nil
}

// views counts, per session, the connections that view it (presence "windows") and those of them
// that declared it focused (presence "focused").
func (s *Server) views() (windows, focused map[string]int) {
	windows, focused = map[string]int{}, map[string]int{}
	s.connsMu.Lock()
	for c := range s.conns {
		if v := c.view.Load(); v != nil && v.sessionID != "" {
			windows[v.sessionID]++
			if v.focused {
				focused[v.sessionID]++
			}
		}
	}
	s.connsMu.Unlock()
	return windows, focused
}

// setView infers that c now shows sessionID (it opened or prompted it) and publishes presence
// when that changed. A connection views one session at a time, like an app window. It does
// nothing for a connection that declared its view with presence.set (setPresence).
func (s *Server) setView(c *conn, sessionID string) {
	if c == nil {
		return
	}
	for {
		old := c.view.Load()
		if old != nil && (old.declared || old.sessionID == sessionID) {
			return
		}
		if c.view.CompareAndSwap(old, &connView{sessionID: sessionID}) {
			break
		}
	}
	s.presenceSoon()
}

// setPresence records the view c declared with presence.set (sessionID "" for none) and
// publishes presence when the counts it feeds changed.
func (s *Server) setPresence(c *conn, sessionID string, focused bool) {
	if c == nil {
		return
	}
	v := &connView{sessionID: sessionID, focused: focused && sessionID != "", declared: true}
	old := c.view.Swap(v)
	if old != nil && old.sessionID == v.sessionID && old.focused == v.focused {
		return
	}
	if old == nil && v.sessionID == "" {
		return
	}
	s.presenceSoon()
}

// dropViews ends every connection's view of a deleted session (declared or inferred; a declared
// connection stays declared, showing none) and publishes presence when one ended.
func (s *Server) dropViews(sessionID string) {
	changed := false
	s.connsMu.Lock()
	for c := range s.conns {
		for {
			old := c.view.Load()
			if old == nil || old.sessionID == "" || !strings.EqualFold(old.sessionID, sessionID) {
				break
			}
			if c.view.CompareAndSwap(old, &connView{declared: old.declared}) {
				changed = true
				break
			}
		}
	}
	s.connsMu.Unlock()
	if changed {
		s.presenceSoon()
	}
}

// presenceDelay coalesces view changes: at most one presence:changed per delay, however often
// connections switch sessions.
const presenceDelay = 100 * time.Millisecond

// presenceSoon publishes presence:changed once, presenceDelay from the first change it covers.
func (s *Server) presenceSoon() {
	if s.presencePending.CompareAndSwap(false, true) {
		time.AfterFunc(presenceDelay, func() {
			s.presencePending.Store(false)
			if s.baseCtx.Err() == nil {
				s.publishPresence()
			}
		})
	}
}

// recheckTokens closes (1008) the connections whose token was revoked (or deleted) while no
// notice arrived, and drops such tokens from the token cache: run after every (re)LISTEN and
// every Config.TokenRecheck (field case B32).
func (s *Server) recheckTokens() {
	defer s.rechecks.Add(1)
	seen := map[string]bool{}
	var ids []string
	add := func(id string) {
		if !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	s.connsMu.Lock()
	for c := range s.conns {
		add(c.token.ID)
	}
	s.connsMu.Unlock()
	for _, id := range s.tokens.ids() {
		add(id)
	}
	ctx, cancel := context.WithTimeout(s.baseCtx, 10*time.Second)
	defer cancel()
	revoked, err := s.store.RevokedAmong(ctx, ids)
	if err != nil {
		if s.baseCtx.Err() == nil {
			s.log.Warn("token re-check failed; retrying at the next interval", "err", err)
		}
		return
	}
	for _, id := range revoked {
		s.closeTokenConns(id)
	}
}

func (s *Server) recheckTokensEvery(d time.Duration) {
	if d <= 0 {
		d = 30 * time.Second
	}
	s.every(d, s.recheckTokens)
}

// every calls fn every d until the server stops.
func (s *Server) every(d time.Duration, fn func()) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-s.baseCtx.Done():
			return
		case <-t.C:
			fn()
		}
	}
}

// closeTokenConns closes, with 1008, every connection authenticated by a revoked token, and
// drops the token from the token cache.
func (s *Server) closeTokenConns(tokenID string) {
	s.tokens.drop(tokenID)
	s.endStreams(tokenID)
	s.connsMu.Lock()
	var hit []*conn
	for c := range s.conns {
		if c.token.ID == tokenID && !c.signingOut.Load() {
			hit = append(hit, c)
		}
	}
	s.connsMu.Unlock()
	for _, c := range hit {
		c.log().Info("token revoked: closing the connection")
		// In parallel: a close handshake waits for the peer (up to 5 s), and a peer that does not
		// answer must not delay the others or the next revocation.
		go c.close(websocket.StatusPolicyViolation, "token revoked")
	}
}

// WebApp reports whether the server serves the web app (Config.WebApp) and whether the binary
// holds its build (else it serves the page saying how to build it).
func (s *Server) WebApp() (on, built bool) {
	if s.webapp == nil {
		return false, false
	}
	return true, s.webapp.Built()
}

// HostID is the stable id of this server (kept in Postgres).
func (s *Server) HostID() string { return s.hostID }

// Hidden returns the hidden paths (docs/security.md "Hidden paths"): all of them, and those that
// lie inside a workspace root (the ones the start names).
func (s *Server) Hidden() (all, inRoots []string) {
	return s.ws.Hidden().Paths(), s.ws.HiddenInRoots()
}

// Epoch is this process's signalEpoch.
func (s *Server) Epoch() string { return s.hub.currentEpoch() }

func (s *Server) track(c *conn, add bool) {
	s.connsMu.Lock()
	if add {
		s.conns[c] = struct{}{}
		s.metrics.connections.Inc()
	} else {
		delete(s.conns, c)
		s.metrics.connections.Dec()
	}
	s.connsMu.Unlock()
	if !add {
		s.media.drop(c) // its media tickets end with it
	}
	if v := c.view.Load(); !add && v != nil && v.sessionID != "" && s.baseCtx.Err() == nil {
		s.presenceSoon() // its window closed
	}
}

// ServeHTTP answers plain HTTP (GET /healthz, /version, /protocol.json, /openrpc.json, the web app on the other
// GETs when it is on) and WebSocket upgrades on any path.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	setBaseHeaders(w.Header())
	health := (r.Method == http.MethodGet || r.Method == http.MethodHead) && (r.URL.Path == "/healthz" || r.URL.Path == "/health")
	if !health && !s.hostAllowed(r) {
		plainText(w, http.StatusForbidden, "Forbidden: host not allowed. This server listens on a loopback address and answers only Host names that are loopback (localhost, 127.0.0.1, [::1]) with its port; an operator can allow another name with "+s.flagHint("--allowed-host NAME")+".")
		return
	}
	if isUpgrade(r) {
		s.upgrade(w, r)
		return
	}
	switch {
	case health: // /health is the snowpea seed's name for /healthz
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if err := s.store.Health(ctx); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprint(w, "degraded: database unavailable")
			return
		}
		if err := s.signalsUnhealthy(); err != nil {
			// Connections stay; new runs are refused until NATS answers again (docs/scaling.md).
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprint(w, "degraded: NATS unreachable, new runs refused: "+err.Error())
			return
		}
		fmt.Fprint(w, "ok")
	case r.Method == http.MethodGet && r.URL.Path == "/version":
		w.Header().Set("Content-Type", "application/json")
		b, _ := protocol.Marshal(map[string]any{
			"appVersion": Version, "protocolVersion": protocol.ProtocolVersion,
			"minProtocolVersion": protocol.MinProtocolVersion, "schemaHash": protocol.SchemaHash,
		})
		w.Write(append(b, '\n'))
	case s.sse != nil && s.sse.Match(r.URL.Path):
		s.sse.ServeHTTP(w, r)
	case r.URL.Path == "/metrics":
		if onlyGet(w, r) {
			s.serveMetrics(w, r)
		}
	case strings.HasPrefix(r.URL.Path, "/debug/pprof/"):
		s.serveProfile(w, r)
	case r.URL.Path == "/zidane/pair":
		s.servePair(w, r)
	case r.URL.Path == "/zidane/token":
		s.serveTokenCheck(w, r)
	case r.URL.Path == "/zidane/media":
		s.serveMedia(w, r)
	case r.URL.Path == oauth.CallbackPath:
		s.serveOAuthCallback(w, r)
	case r.URL.Path == oauth.ClientMetadataPath:
		s.serveOAuthClientMetadata(w, r)
	case r.Method == http.MethodGet && r.URL.Path == "/protocol.json":
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Content-Type", "application/schema+json")
		w.Write(protocol.BundledSchema)
	case r.Method == http.MethodGet && r.URL.Path == "/openrpc.json":
		// The WebSocket protocol as an OpenRPC 1.3 document (issue 29), like /protocol.json: no token.
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Content-Type", "application/json")
		w.Write(protocol.OpenRPCDocument)
	case r.Method == http.MethodGet && r.URL.Path == "/zidane/sse/openapi.json":
		// The SSE protocol's OpenAPI document (schema/sse.json), like /protocol.json: no token.
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Content-Type", "application/json")
		w.Write(protocol.SSEOpenAPI)
	case s.webapp != nil:
		s.webapp.ServeHTTP(w, r) // every other plain GET: the app (seed "HTTP on the same port"); other methods on its paths 405
	default:
		plainText(w, http.StatusNotFound, "Not found. Connect a WebSocket to this port, or GET /healthz, /version, /protocol.json, /openrpc.json, /zidane/sse/openapi.json, /metrics, or POST /zidane/pair.")
	}
}

// BaseCSP is the Content-Security-Policy of every answer that sets no policy of its own (the web
// app and /zidane/media set theirs): nothing loads, runs or frames it, so a JSON or text answer
// opened as a page, or a refusal, is inert.
const BaseCSP = "default-src 'none'; frame-ancestors 'none'"

// setBaseHeaders sets the headers every HTTP answer carries, refusals and upgrades' refusals
// included: X-Content-Type-Options: nosniff (no JSON or text sniffed into script or HTML),
// Referrer-Policy: no-referrer, X-Frame-Options: DENY and BaseCSP. Routes with a policy of their
// own replace the CSP.
func setBaseHeaders(h http.Header) {
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Content-Security-Policy", BaseCSP)
}

// onlyGet reports whether r is a GET; otherwise it has answered 405 with Allow: GET.
func onlyGet(w http.ResponseWriter, r *http.Request) bool {
	if r.Method == http.MethodGet {
		return true
	}
	w.Header().Set("Allow", http.MethodGet)
	plainText(w, http.StatusMethodNotAllowed, "Method Not Allowed: "+r.URL.Path+" answers GET.")
	return false
}

// plainText answers a refusal with exactly msg as the body (the seed's captured answers).
func plainText(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	w.Write([]byte(msg))
}

func isUpgrade(r *http.Request) bool {
	return strings.EqualFold(r.Header.Get("Upgrade"), "websocket") && headerHasToken(r.Header, "Connection", "upgrade")
}

func headerHasToken(h http.Header, name, token string) bool {
	for _, v := range h.Values(name) {
		for _, p := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(p), token) {
				return true
			}
		}
	}
	return false
}

func (s *Server) upgrade(w http.ResponseWriter, r *http.Request) {
	if s.draining.Load() {
		w.Header().Set("Retry-After", "5")
		plainText(w, http.StatusServiceUnavailable, "Service Unavailable: the server is shutting down")
		return
	}
	if !s.originAllowed(r) {
		plainText(w, http.StatusForbidden, "Forbidden: origin not allowed")
		return
	}
	tok, status := s.authenticate(r)
	if status != 0 {
		refuseAuth(w, status, "Unauthorized")
		return
	}
	release, err := s.bounds.acquire(tok.ID, s.clientIP(r))
	if err != nil {
		plainText(w, http.StatusTooManyRequests, "Too Many Requests: "+err.Error()+".")
		return
	}
	cw := &corkingWriter{ResponseWriter: w}
	ws, err := websocket.Accept(cw, r, &websocket.AcceptOptions{
		Subprotocols:       []string{"zidane"},
		InsecureSkipVerify: true, // the origin was checked above, exactly
		CompressionMode:    websocket.CompressionDisabled,
	})
	if err != nil {
		release()
		return
	}
	// The connection is served on a goroutine of its own, with a fresh small stack: the HTTP
	// handler's goroutine grew its stack through the upgrade (the token check) and would keep it
	// as the idle reader's (the idle figure of docs/benchmarks.md).
	go s.serveConn(ws, tok, cw.conn, release, s.connOrigin(r))
}

// Shutdown closes every connection with 1001, waits for runs to end as interrupted (bounded by
// ctx), and flushes the transcripts.
func (s *Server) Shutdown(ctx context.Context) {
	s.draining.Store(true) // no new connections, no new prompts
	s.endStreams("")       // SSE streams end now; their clients resume elsewhere or later
	// Runs get the time up to 5 s before ctx's deadline; the rest is for flushing and closing.
	runCtx := ctx
	if d, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		runCtx, cancel = context.WithDeadline(ctx, d.Add(-5*time.Second))
		defer cancel()
	}
	s.runs.Shutdown(runCtx)
	s.runs.Flush(ctx)
	if s.oauth != nil {
		s.oauth.Close() // open sign-ins end; their clients begin again once the server is back
	}
	s.mcp.Close()
	if bus := s.hub.bus.Load(); bus != nil {
		defer bus.Close() // after the connections: the runs' last signals went out
		s.sendPresenceShare(bus, nil, true)
	}
	s.replica.Close(ctx) // its leases end with it: the others need not wait for the lease bound
	s.connsMu.Lock()
	cs := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		cs = append(cs, c)
	}
	s.connsMu.Unlock()
	var wg sync.WaitGroup
	for _, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.drainAndClose(websocket.StatusGoingAway, "server shutting down", 2*time.Second)
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		for _, c := range cs { // peers that do not answer the close in time
			c.ws.CloseNow()
		}
	}
	s.stop()
	select { // the drafts still in memory are written
	case <-s.drafts.done:
	case <-ctx.Done():
	}
	// Clones and terminals end with their connections: wait until their processes are gone
	// and no half-made clone is left (bounded by ctx).
	bg := make(chan struct{})
	go func() { s.bgWG.Wait(); close(bg) }()
	select {
	case <-bg:
	case <-ctx.Done():
	}
	s.runs.Close()
	s.closeRefWatchers()
	s.files.Close()
	_ = s.ws.Close()
}

// Listen opens the TCP listener; a clear error names the address in use.
func Listen(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		if errors.Is(err, syscallEADDRINUSE()) {
			return nil, fmt.Errorf("listen on %s: the address is in use; stop the other server or pass --listen with another port", addr)
		}
		return nil, fmt.Errorf("listen on %s: %w", addr, err)
	}
	return ln, nil
}
