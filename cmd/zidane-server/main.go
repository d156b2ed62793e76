// Command zidane-server is the operator binary: start the server, manage tokens.
//
//	zidane-server start [--listen 127.0.0.1:4380] [--data-dir DIR] [--database-url URL]
//	                    [--workspace-root DIR]... [--allowed-origin ORIGIN]... [--allowed-host HOST]...
//	                    [--tls-cert FILE --tls-key FILE] [--debug-listen ADDR] [--unix-socket PATH]
//	                    [--trusted-proxy CIDR]...
//	zidane-server token create --name NAME --scope chat|admin|machine
//	zidane-server token list
//	zidane-server token revoke NAME
//	zidane-server pair --scope chat|admin [--ttl 10m]
//	zidane-server migrate
//	zidane-server version
package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/sys/unix"

	"github.com/zidane-server/zidane/client"
	"github.com/zidane-server/zidane/protocol"
	"github.com/zidane-server/zidane/server"
	"github.com/zidane-server/zidane/server/agent"
	"github.com/zidane-server/zidane/server/cluster"
	"github.com/zidane-server/zidane/server/oneline"
	"github.com/zidane-server/zidane/server/store"
	"github.com/zidane-server/zidane/server/workspace"
	"github.com/zidane-server/zidane/server/workspace/sandbox"
	"github.com/zidane-server/zidane/server/workspace/watch"
)

// httpIdleTimeout closes a plain-HTTP keep-alive connection idle this long between requests
// (health checks, /metrics scrapes); without it idle connections stayed open for ever. Upgraded
// WebSocket connections are the protocol's own (ping/pong) and do not count.
const httpIdleTimeout = 2 * time.Minute

func main() {
	// A sandboxed command re-executes this binary as its launcher; that run ends here.
	sandbox.Main()
	// Descriptors inherited from whoever started the server (a shell's `exec 9<file`, a
	// supervisor, an IDE) reach none of its children (field case T05): they close at every exec.
	if err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err != nil {
		fmt.Fprintln(os.Stderr, "zidane-server: marking inherited descriptors close-on-exec:", err)
		os.Exit(1)
	}
	if err := rootCmd().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "zidane-server:", err)
		os.Exit(1)
	}
}

// dbFlags are the flags that choose the database, shared by every command.
type dbFlags struct {
	dataDir     string
	databaseURL string
	managed     *store.Managed // the managed Postgres openFor started, if it did
}

func (f *dbFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.dataDir, "data-dir", "", "data directory: the managed Postgres and daemon.json (default $ZIDANE_SERVER_HOME, /var/lib/zidane-server as root, else $XDG_DATA_HOME/zidane-server or ~/.local/share/zidane-server)")
	cmd.Flags().StringVar(&f.databaseURL, "database-url", "", "PostgreSQL URL (default $DATABASE_URL; without one, a managed local Postgres runs under the data directory)")
}

func (f *dbFlags) resolve() {
	if f.databaseURL == "" {
		f.databaseURL = os.Getenv("DATABASE_URL")
	}
	if f.dataDir == "" {
		f.dataDir = client.DefaultDataDir()
	}
}

// externalMarker is the file a server started with --database-url leaves in its data directory,
// and a server started on the managed Postgres removes: operator commands on the data dir without
// a URL are refused while it is there, so a token is never minted in a managed Postgres that the
// server, started again with its URL, would not read.
const externalMarker = "external-database"

// markExternal records in the data directory which database its server uses (externalMarker).
func (f *dbFlags) markExternal(log *slog.Logger) {
	path := filepath.Join(f.dataDir, externalMarker)
	if f.databaseURL == "" {
		os.Remove(path)
		return
	}
	err := os.MkdirAll(f.dataDir, 0o700) // a data dir this start makes: nothing else made it yet
	if err == nil {
		err = os.WriteFile(path, []byte("The server of this data directory uses the database of its --database-url (DATABASE_URL), never\na managed one: operator commands on this data directory need the same URL. Removed when a server\nstarts here on the managed Postgres.\n"), 0o600)
	}
	if err != nil {
		log.Warn("the data dir does not record that this server uses an external database; operator commands there without --database-url would set up a managed Postgres", "err", err)
	}
}

// databaseHint is the --database-url of the banner's token create line: "$DATABASE_URL" when the
// URL came from there, else the URL given (its password, if any, shown as xxxxx).
func databaseHint(dbURL string) string {
	if os.Getenv("DATABASE_URL") == dbURL {
		return `--database-url "$DATABASE_URL"`
	}
	u, err := url.Parse(dbURL)
	if err != nil || u.Scheme == "" {
		return "--database-url '<this server's --database-url>'"
	}
	hint := "--database-url '" + strings.ReplaceAll(u.Redacted(), "'", `'\''`) + "'"
	if _, has := u.User.Password(); has {
		hint += "   (put its password in place of xxxxx)"
	}
	return hint
}

// open opens the store: the given URL, the managed Postgres that a running server already
// started under the data directory, or a managed Postgres this process starts (and stops in close).
// An operator command (not start) without a URL is refused on the data dir of a server that uses
// an external database (externalMarker, or a running one's daemon.json).
func (f *dbFlags) open(ctx context.Context, log *slog.Logger) (*store.Store, func(), error) {
	return f.openFor(ctx, log, false)
}

func (f *dbFlags) openFor(ctx context.Context, log *slog.Logger, server bool) (*store.Store, func(), error) {
	f.resolve()
	if f.databaseURL != "" {
		st, err := store.Open(ctx, f.databaseURL, store.Options{Logger: log})
		if err != nil {
			return nil, nil, err
		}
		return st, st.Close, nil
	}
	if d, err := client.ReadDaemonFile(f.dataDir); err == nil && d.ExternalDatabase {
		// A managed Postgres started here would not be the running server's database: a token
		// minted in it would be refused.
		return nil, nil, fmt.Errorf("the server on data dir %s (pid %d) uses the database of its --database-url, not a managed one: pass the same --database-url (or DATABASE_URL) to this command", f.dataDir, d.PID)
	}
	if _, err := os.Stat(filepath.Join(f.dataDir, externalMarker)); err == nil && !server {
		return nil, nil, fmt.Errorf("the server of data dir %s last started with --database-url: it uses the database of that URL, not a managed one; pass the same --database-url (or DATABASE_URL) to this command (%s there says so)", f.dataDir, externalMarker)
	}
	if _, err := os.Stat(store.ManagedSocket(f.dataDir)); err == nil {
		cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		st, err := store.Open(cctx, store.ManagedURL(f.dataDir), store.Options{Logger: log})
		cancel()
		if err == nil {
			return st, st.Close, nil
		}
	}
	m, err := store.StartManaged(ctx, f.dataDir, log)
	if err != nil {
		return nil, nil, err
	}
	st, err := store.Open(ctx, m.URL(), store.Options{Logger: log})
	if err != nil {
		m.Stop()
		return nil, nil, err
	}
	f.managed = m
	return st, func() { st.Close(); m.Stop() }, nil
}

func rootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "zidane-server",
		Short:         "zidane-server hosts agents for apps speaking JSON-RPC 2.0 over one WebSocket",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(startCmd(), tokenCmd(), pairCmd(), migrateCmd(), versionCmd())
	return root
}

func migrateCmd() *cobra.Command {
	var db dbFlags
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Apply the database migrations and exit (start applies them too)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, closeDB, err := db.open(cmd.Context(), logger()) // Open migrates
			if err != nil {
				return err
			}
			closeDB()
			fmt.Println("migrations applied")
			return nil
		},
	}
	db.add(cmd)
	return cmd
}

func versionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the server and protocol versions",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			fmt.Printf("zidane-server %s (protocol %d, min %d, schema %s)\n", server.Version, protocol.ProtocolVersion, protocol.MinProtocolVersion, protocol.SchemaHash[:12])
		},
	}
}

func logger() *slog.Logger {
	level := slog.LevelInfo
	if os.Getenv("ZIDANE_DEBUG") != "" {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}

func startCmd() *cobra.Command {
	var db dbFlags
	var listen string
	var replicaID string
	var leaseTTL, leaseHeartbeat time.Duration
	var roots, origins []string
	var sseBasePath string
	var sseHeartbeat time.Duration
	var stepDelay time.Duration
	var unixSocket string
	var credentialKeyFile, publicURL string
	var limits server.Limits
	var allowClone, projectTerminals, allowCreateFolders, allowRemoteInstalls, webApp, mcpSampling bool
	var mcpConfig string
	var sb server.SandboxConfig
	var sbDefault string
	var sbUnsupported []string
	var terminalSandbox string
	var cloneSchemes []string
	var allowedHosts []string
	var trustedProxies []string
	var debugListen, tlsCert, tlsKey string
	var tokenRecheck time.Duration
	var model, configPath string
	var limitFlags agent.Limits
	var approvalTimeout, restoreWindow time.Duration
	var allowHomeRoot bool
	var pgSupervise store.SuperviseOptions
	var natsURL, natsStream string
	cmd := &cobra.Command{
		Use:   "start",
		Short: "Start the server (on a managed local Postgres unless --database-url or DATABASE_URL is set)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkLimitFlags(cmd); err != nil {
				return err
			}
			log := logger()
			slog.SetDefault(log)
			if env := os.Getenv("ZIDANE_SERVER_ALLOWED_ORIGINS"); env != "" {
				for _, o := range strings.Split(env, ",") {
					if o = strings.TrimSpace(o); o != "" {
						origins = append(origins, o)
					}
				}
			}
			// Runtime case R26: the server's /proc entries (environ, cmdline, fds) are not readable by
			// other processes of its user, such as a command run under the off policy.
			if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
				log.Warn("could not mark the process non-dumpable", "err", err)
			}
			pol, err := sandbox.ParsePolicy(sbDefault)
			if err != nil {
				return fmt.Errorf("--sandbox: %w", err)
			}
			sb.Default = pol
			if env := os.Getenv("ZIDANE_SANDBOX_UNSUPPORTED"); env != "" {
				sbUnsupported = append(sbUnsupported, strings.Split(env, ",")...)
			}
			for _, f := range sbUnsupported {
				sb.Unsupported = append(sb.Unsupported, sandbox.Feature(strings.TrimSpace(f)))
			}
			if unixSocket != "" {
				sb.Hide = append(sb.Hide, unixSocket)
			}
			if terminalSandbox != "" {
				tp, err := sandbox.ParsePolicy(terminalSandbox)
				if err != nil {
					return fmt.Errorf("--terminal-sandbox: %w", err)
				}
				if tp == sandbox.Off {
					return errors.New("--terminal-sandbox off: leave the flag out to run terminals without a sandbox")
				}
				sb.TerminalPolicy = tp
			}
			proxies, err := server.ParseTrustedProxies(trustedProxies)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			db.resolve()
			if err := dataDirInUse(db.dataDir); err != nil {
				return err
			}
			if err := checkRoots(srvRoots(roots), db.dataDir, allowHomeRoot, os.Getenv(server.MakeRunEnv) == "1"); err != nil {
				return err
			}
			if configPath != "" {
				sb.Hide = append(sb.Hide, configPath) // its provider keys (the default one is in the data dir)
			}
			if (tlsCert == "") != (tlsKey == "") {
				return errors.New("--tls-cert and --tls-key go together: pass both (PEM files) to serve wss://, or neither")
			}
			if tlsCert != "" {
				if _, err := tls.LoadX509KeyPair(tlsCert, tlsKey); err != nil {
					return fmt.Errorf("--tls-cert/--tls-key: %w", err)
				}
			}
			models, systemPrompt, runLimits, err := modelSettings(ctx, log, db.dataDir, configPath, model, stepDelay)
			if err != nil {
				return err
			}
			runLimits = overrideLimits(runLimits, limitFlags)
			ln, err := server.Listen(listen)
			if err != nil {
				return err
			}
			st, closeDB, err := db.openFor(ctx, log, true)
			if err != nil {
				ln.Close()
				return err
			}
			defer closeDB()
			db.markExternal(log)
			pgGaveUp := make(chan error, 1)
			if db.managed != nil { // issue 22 item 3: restart it when it exits, or exit non-zero
				go func() { pgGaveUp <- db.managed.Supervise(ctx, pgSupervise) }()
			}
			self, cli := binaries()
			cfg := server.Config{WorkspaceRoots: roots, AllowedOrigins: origins, AllowedHosts: allowedHosts, TokenRecheck: tokenRecheck, DataDir: db.dataDir, StepDelay: stepDelay, Logger: log, Limits: limits, Binary: absBinary(self),
				AllowClone: allowClone, CloneSchemes: cloneSchemes, ProjectTerminals: projectTerminals, AllowCreateFolders: allowCreateFolders, AllowRemoteInstalls: allowRemoteInstalls,
				ApprovalTimeout: approvalTimeout, RestoreWindow: restoreWindow, Models: models, SystemPrompt: systemPrompt, RunLimits: runLimits, Sandbox: sb,
				ViaMakeRun: os.Getenv(server.MakeRunEnv) == "1", MakeArgs: os.Getenv(server.MakeArgsEnv), WebApp: webApp,
				SSEBasePath: sseBasePath, SSEHeartbeat: sseHeartbeat,
				CredentialKeyFile: credentialKeyFile, PublicURL: publicURL, MCPSampling: mcpSampling, MCPUserFile: mcpConfig}
			if home, err := os.UserHomeDir(); err == nil {
				cfg.UserHome = home // ~/.zidane/agents, skills and commands (issue 27)
			}
			if db.databaseURL != "" {
				cfg.DatabaseURL = db.databaseURL
			}
			cfg.TrustedProxies = proxies
			cfg.NATSURL, cfg.NATSStream = natsURL, natsStream
			cfg.ReplicaID, cfg.LeaseTTL, cfg.LeaseHeartbeat = replicaID, leaseTTL, leaseHeartbeat
			if cfg.ReplicaID == "" { // the same across restarts on this data dir, distinct per data dir
				hn, _ := os.Hostname()
				cfg.ReplicaID = hn + ":" + db.dataDir
			}
			srv, err := server.New(ctx, cfg, st)
			if err != nil {
				ln.Close()
				return err
			}
			hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: httpIdleTimeout}
			errc := make(chan error, 2)
			var uln net.Listener
			if unixSocket != "" {
				if uln, err = listenUnix(unixSocket); err != nil {
					ln.Close()
					return err
				}
				defer os.Remove(unixSocket)
			}
			addr := ln.Addr().String()
			scheme := "ws"
			if tlsCert != "" {
				scheme = "wss"
			}
			var dhs *http.Server
			if debugListen != "" {
				dln, err := server.Listen(debugListen)
				if err != nil {
					ln.Close()
					return fmt.Errorf("--debug-listen: %w", err)
				}
				dhs = &http.Server{Handler: srv.DebugHandler(), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: httpIdleTimeout}
				go dhs.Serve(dln)
				defer dhs.Close()
				log.Info("debug address: GET /metrics without a token", "addr", dln.Addr().String())
			}
			// daemon.json is in place before the first request is served: a client that sees the
			// server healthy finds it.
			removeDaemonFile, err := writeDaemonFile(ctx, st, db.dataDir, scheme, addr, unixSocket, srv.Epoch(), db.databaseURL != "", log)
			if err != nil {
				log.Warn("daemon.json not written; local clients need ZIDANE_URL and ZIDANE_TOKEN", "err", err)
			} else {
				defer removeDaemonFile()
			}
			where := "--data-dir " + db.dataDir
			if cfg.DatabaseURL != "" {
				where = databaseHint(cfg.DatabaseURL)
			}
			fmt.Printf("zidane-server %s listening on %s://%s (health: %s://%s/healthz)\n", server.Version, scheme, addr, strings.Replace(scheme, "ws", "http", 1), addr)
			if sseBasePath != "" {
				log.Info("SSE protocol v1 (HTTP + Server-Sent Events) served", "basePath", sseBasePath, "openapi", "/zidane/sse/openapi.json")
			}
			fmt.Printf("host %s · signal epoch %s · workspace roots %s\n", srv.HostID(), srv.Epoch(), strings.Join(srvRoots(roots), ", "))
			if on, built := srv.WebApp(); on && built {
				fmt.Printf("web app: open %s://%s/ in a browser and pair it with a code (the pair line below)\n", strings.Replace(scheme, "ws", "http", 1), addr)
			} else if on {
				fmt.Printf("web app: not built into this binary (make build builds it); %s://%s/ says how\n", strings.Replace(scheme, "ws", "http", 1), addr)
			}
			allHidden, inRoots := srv.Hidden()
			log.Info("hidden from the agent's tools, clients and commands", "paths", allHidden)
			if len(inRoots) > 0 {
				fmt.Printf("hidden inside the workspace roots: %s (and %d more paths outside them; docs/security.md \"Hidden paths\")\n", strings.Join(inRoots, ", "), len(allHidden)-len(inRoots))
			} else {
				fmt.Printf("hidden: %d paths (the data dir, credential files), none inside the workspace roots (docs/security.md \"Hidden paths\")\n", len(allHidden))
			}
			local := cli
			if os.Getenv("ZIDANE_SERVER_HOME") != "" || filepath.Clean(db.dataDir) != filepath.Clean(client.DefaultDataDir()) {
				local += " --data-dir " + db.dataDir // a terminal without the same environment looks elsewhere
			}
			fmt.Printf("chat locally:  %s -c \"Say hello.\"   (reads %s)\n", local, filepath.Join(db.dataDir, client.DaemonFileName))
			fmt.Printf("mint a token:  %s token create --name cli --scope chat %s\n", self, where)
			// The pair command names this server's data dir (or database) as the token line does:
			// run bare, from a terminal without ZIDANE_SERVER_HOME, it set up a managed Postgres of
			// its own whose code this server never knew (a fresh user's report).
			fmt.Printf("pair an app:   %s pair %s   (a single-use code the web app or an app trades for a token)\n", self, where)
			fmt.Printf("then chat:     ZIDANE_URL=%s://%s ZIDANE_TOKEN=<token> %s -c \"Say hello.\"\n", scheme, addr, cli)
			// Served once the banner is out (the socket listens already: early clients wait in its
			// backlog), so a client that sees /healthz answer has the whole banner (T03's check).
			go func() {
				if tlsCert != "" {
					errc <- hs.ServeTLS(ln, tlsCert, tlsKey)
					return
				}
				errc <- hs.Serve(ln)
			}()
			if uln != nil {
				go func() { errc <- hs.Serve(uln) }()
			}
			var failed error
			select {
			case <-ctx.Done():
			case err := <-errc:
				if !errors.Is(err, http.ErrServerClosed) {
					return err
				}
			case failed = <-pgGaveUp: // nil when ctx ended
				if failed != nil {
					log.Error("the managed Postgres could not be restarted; shutting down so a supervisor sees it", "err", failed)
				}
			}
			log.Info("shutting down")
			sctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			go hs.Shutdown(sctx) // stop accepting; hijacked WebSockets are the server's to close
			srv.Shutdown(sctx)
			log.Info("stopped")
			return failed
		},
	}
	db.add(cmd)
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:4380", "address to listen on (HTTP and WebSocket on one port)")
	cmd.Flags().StringVar(&replicaID, "replica-id", "", "this server's id among the replicas sharing its database: unique per replica, the same across its restarts (default host name:data dir; docs/scaling.md)")
	cmd.Flags().DurationVar(&leaseTTL, "lease-ttl", cluster.DefaultLeaseTTL, "how long a replica's run leases outlive its last heartbeat: another replica takes over a dead one's runs past it (docs/scaling.md)")
	cmd.Flags().DurationVar(&leaseHeartbeat, "lease-heartbeat", cluster.DefaultHeartbeat, "how often a replica renews its run leases (below --lease-ttl)")
	cmd.Flags().StringArrayVar(&roots, "workspace-root", nil, "folder sessions may work in (repeatable; default the current directory)")
	cmd.Flags().StringArrayVar(&origins, "allowed-origin", nil, "browser origin allowed to connect, scheme://host[:port] (repeatable; also $ZIDANE_SERVER_ALLOWED_ORIGINS, comma-separated)")
	cmd.Flags().StringVar(&unixSocket, "unix-socket", "", "also serve the protocol on this unix socket (mode 0600)")
	cmd.Flags().StringVar(&credentialKeyFile, "credential-key-file", "", "key of the encrypted credential store (MCP sign-ins, provider keys), created 0600 if missing; replicas sharing a database share it (default <data-dir>/credential.key)")
	cmd.Flags().StringVar(&publicURL, "public-url", "", "the address browsers reach the server by, e.g. https://zidane.example.com; an https one lets MCP sign-ins use a Client ID Metadata Document at <public-url>/zidane/oauth/client.json")
	cmd.Flags().StringArrayVar(&allowedHosts, "allowed-host", nil, "extra Host name (name or name:port) accepted on a loopback listener, e.g. the public name a reverse proxy forwards (repeatable; see docs/security.md)")
	cmd.Flags().StringArrayVar(&trustedProxies, "trusted-proxy", nil, "reverse proxy address or CIDR range (repeatable or comma-separated, e.g. 127.0.0.1/32): a request from it counts against the client its X-Forwarded-For (or Forwarded) header names, for the pairing lockout and --max-conns-per-address (default none: the TCP peer, headers ignored)")
	cmd.Flags().DurationVar(&tokenRecheck, "token-recheck", 30*time.Second, "how often open connections' and cached tokens are re-checked in the database (in case a revocation notice was lost), and how long a verified token stays cached")
	cmd.Flags().StringVar(&natsURL, "nats-url", "", "NATS server with JetStream (nats://host:4222): signals, $seq and the replay log shared by every replica on the same --database-url (docs/scaling.md); default the in-process hub, one server per database")
	cmd.Flags().StringVar(&natsStream, "nats-stream", "zidane-signals", "JetStream stream of the signals with --nats-url (its key-value bucket is <name>-seq); every replica of a deployment names the same")
	cmd.Flags().StringVar(&debugListen, "debug-listen", "", "serve GET /metrics without a token on this separate address (keep it private, e.g. 127.0.0.1:4381)")
	cmd.Flags().StringVar(&tlsCert, "tls-cert", "", "PEM certificate (chain) file: serve https:// and wss:// directly (with --tls-key)")
	cmd.Flags().StringVar(&tlsKey, "tls-key", "", "PEM private key file for --tls-cert")
	cmd.Flags().Int64Var(&limits.MaxMessageBytes, "max-message-bytes", 16<<20, "largest WebSocket message in either direction, in bytes (larger incoming: close 1009; larger answer: -32012)")
	cmd.Flags().IntVar(&limits.ConcurrentRequests, "concurrent-requests", 16, "requests one connection may run at once")
	cmd.Flags().Int64Var(&limits.InflightRequestBytes, "inflight-request-bytes", 0, "bytes of incoming WebSocket frames all connections together may have read and not yet answered; past it read loops wait (TCP backpressure) (default 16 times --max-message-bytes)")
	cmd.Flags().DurationVar(&limits.HelloTimeout, "hello-timeout", 30*time.Second, "close (1008) a connection that sends no ipc.hello within this time")
	cmd.Flags().DurationVar(&limits.RequestTimeout, "request-timeout", 60*time.Second, "longest a request's handler may run")
	cmd.Flags().IntVar(&limits.Replay.PerSessionSignals, "replay-signals", 2000, "signals the replay log of sessions.resume keeps per session (older ones answer gap: the client reloads)")
	cmd.Flags().IntVar(&limits.SendQueueBytes, "send-queue-bytes", 64<<20, "outgoing bytes queued per connection before it is closed with 1013 (the client resumes)")
	cmd.Flags().Int64Var(&limits.SendQueueTotalBytes, "send-queue-total-bytes", 0, "outgoing bytes queued on all WebSocket connections together before the one with the largest queue is closed with 1013 (default 16 times --send-queue-bytes)")
	cmd.Flags().IntVar(&limits.MaxConnsPerToken, "max-conns-per-token", 8192, "WebSocket connections and SSE streams one token may have open at once (past it: 429)")
	cmd.Flags().IntVar(&limits.MaxConnsPerAddress, "max-conns-per-address", 8192, "WebSocket connections and SSE streams one client address may have open at once (past it: 429)")
	cmd.Flags().StringVar(&sseBasePath, "sse-base-path", protocol.SSEDefaultBasePath, "serve the SSE protocol v1 (HTTP + Server-Sent Events, docs/protocol.md \"SSE protocol\") under this path; \"\" turns it off")
	cmd.Flags().DurationVar(&sseHeartbeat, "sse-heartbeat", 15*time.Second, "how often an idle SSE stream writes a comment line, so idle proxies keep it open")
	cmd.Flags().IntVar(&limits.MaxWatches, "max-watches", watch.DefaultMax, "folders (kernel inotify watches) the server's one file watcher holds for all connections together (git.watch); keep it below fs.inotify.max_user_watches")
	cmd.Flags().BoolVar(&allowCreateFolders, "allow-create-folders", false, "let chat tokens create folders in the workspace roots (fs.createFolder)")
	cmd.Flags().BoolVar(&allowRemoteInstalls, "allow-remote-installs", false, "let admin tokens install what the server will run (claudeImport.run copies ~/.claude's agents, commands, skills and MCP servers into ~/.zidane)")
	cmd.Flags().BoolVar(&allowClone, "allow-clone", false, "let chat tokens clone repositories into the workspace roots (git.clone)")
	cmd.Flags().StringArrayVar(&cloneSchemes, "clone-scheme", nil, "URL scheme git.clone and git.sync accept (repeatable; default https and ssh; local paths inside the roots always)")
	cmd.Flags().BoolVar(&webApp, "web-app", true, "serve the web app on every plain GET no other route takes (--web-app=false: those answer 404)")
	cmd.Flags().BoolVar(&projectTerminals, "project-terminals", false, "let admin tokens run terminals in the workspace roots (see docs/security.md)")
	cmd.Flags().IntVar(&pgSupervise.MaxRestarts, "managed-postgres-restarts", store.DefaultMaxRestarts, "restarts of the managed Postgres in a row that may fail before the server exits with status 1 (see docs/security.md)")
	cmd.Flags().DurationVar(&pgSupervise.Backoff, "managed-postgres-backoff", store.DefaultRestartBackoff, "wait before restarting the managed Postgres after it exited; doubles per restart up to 30s")
	cmd.Flags().BoolVar(&mcpSampling, "mcp-sampling", false, "let MCP servers' sampling requests (sampling/createMessage) run on the session's model, each under an approval; off, sampling is not advertised and a request is refused")
	cmd.Flags().StringVar(&mcpConfig, "mcp-config", "", "the server user's MCP servers file (default ~/.zidane/mcps.json; \"-\" for none)")
	cmd.Flags().DurationVar(&approvalTimeout, "approval-timeout", 30*time.Minute, "how long a tool approval request waits for an answer before it expires as a denial")
	cmd.Flags().DurationVar(&restoreWindow, "restore-window", server.DefaultRestoreWindow, "how long history.restore can bring back the exchanges history.rollback dropped (kept in the database, across restarts)")
	cmd.Flags().StringVar(&sbDefault, "sandbox", string(sandbox.WorkspaceWrite), "default sandbox policy of the agent's commands: workspace-write, workspace-write+network, read-only, or off (needs --sandbox-allow-off); an admin token changes it per session (sessions.setSandbox)")
	cmd.Flags().BoolVar(&sb.AllowOff, "sandbox-allow-off", false, "allow the off policy (commands run without a sandbox, with the server's user's rights) as default or per session")
	cmd.Flags().Uint64Var(&sb.Limits.CPUSeconds, "sandbox-cpu-seconds", sandbox.DefaultLimits.CPUSeconds, "CPU seconds per process of a sandboxed command (RLIMIT_CPU)")
	cmd.Flags().Uint64Var(&sb.Limits.MemoryBytes, "sandbox-memory-bytes", sandbox.DefaultLimits.MemoryBytes, "address space per process of a sandboxed command, in bytes (RLIMIT_AS)")
	cmd.Flags().Uint64Var(&sb.Limits.Processes, "sandbox-processes", sandbox.DefaultLimits.Processes, "processes and threads of one sandboxed command together")
	cmd.Flags().Uint64Var(&sb.Limits.FileBytes, "sandbox-file-bytes", sandbox.DefaultLimits.FileBytes, "largest file a sandboxed command may write, in bytes (RLIMIT_FSIZE)")
	cmd.Flags().StringArrayVar(&sb.Expose, "sandbox-expose", nil, "another file or folder sandboxed commands see, read-only (repeatable; they see the roots, the system folders and the PATH folders)")
	cmd.Flags().StringArrayVar(&sb.Hide, "sandbox-hide", nil, "another file or folder hidden from the agent's tools, clients and sandboxed commands, as if it did not exist (repeatable; the data dir and the user's credential files are always hidden)")
	cmd.Flags().BoolVar(&allowHomeRoot, "allow-home-root", false, "allow a workspace root that is the server user's home directory (the data dir and credential files inside it stay hidden)")
	cmd.Flags().StringArrayVar(&sbUnsupported, "sandbox-unsupported", nil, "treat a kernel feature as missing: landlock, namespaces, netns or all (repeatable; also $ZIDANE_SANDBOX_UNSUPPORTED, comma-separated; for tests)")
	cmd.Flags().MarkHidden("sandbox-unsupported")
	cmd.Flags().StringVar(&terminalSandbox, "terminal-sandbox", "", "run project terminals under this sandbox policy (workspace-write, workspace-write+network, read-only); default none")
	cmd.Flags().StringVar(&model, "model", "", "default model, provider/model (e.g. openai/gpt-4.1); default the config file's, else scripted/scripted (docs/providers.md)")
	cmd.Flags().StringVar(&configPath, "config", "", "config file of model providers, system prompt and run limits (default <data-dir>/config.json when it exists)")
	cmd.Flags().IntVar(&limitFlags.MaxTurns, "max-turns", 0, "model turns per run (default the config file's, else 50)")
	cmd.Flags().DurationVar(&limitFlags.MaxWallTime, "max-run-time", 0, "wall time per run (default the config file's, else 30m)")
	cmd.Flags().IntVar(&limitFlags.MaxOutputTokens, "max-output-tokens", 0, "output tokens per model turn (default the config file's, else 8192)")
	cmd.Flags().IntVar(&limitFlags.MaxTurnBytes, "max-turn-bytes", 0, "bytes of text, thinking and tool-call arguments one model turn may stream before the server closes it (default the config file's, else 4194304)")
	cmd.Flags().IntVar(&limitFlags.MaxConcurrentRuns, "max-concurrent-runs", 0, "runs talking to a model at once, server-wide; more prompts wait (default the config file's, else 8)")
	cmd.Flags().IntVar(&limitFlags.MaxTaskDepth, "max-task-depth", 0, "the deepest level of subagents' child sessions (the root session is 0): a task call from this level is refused (default 3)")
	cmd.Flags().IntVar(&limitFlags.MaxTaskChildren, "max-task-children", 0, "child sessions one run's task calls may start (default 8)")
	cmd.Flags().DurationVar(&stepDelay, "scripted-step-delay", 0, "pause between the scripted provider's streamed pieces (for demos and tests)")
	cmd.Flags().MarkHidden("scripted-step-delay")
	return cmd
}

// localTokenPrefix starts the name of the chat token each server mints for its daemon.json; the
// rest is the start of its signal epoch, so servers sharing a database never touch each other's.
const localTokenPrefix = "local-"

// dataDirInUse reports another live zidane-server that owns dataDir's daemon.json.
func dataDirInUse(dataDir string) error {
	d, err := client.ReadDaemonFile(dataDir)
	if err != nil || d.PID == os.Getpid() {
		return nil // none, or stale (its process is gone)
	}
	if comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", d.PID)); err == nil && !strings.HasPrefix(string(comm), "zidane-server") {
		return nil // the pid was reused by another program: stale
	}
	return fmt.Errorf("data dir %s is in use by zidane-server pid %d (%s); stop it, or give this server a data dir of its own: --data-dir DIR, or ZIDANE_SERVER_HOME=DIR (also with make run)",
		dataDir, d.PID, filepath.Join(dataDir, client.DaemonFileName))
}

// writeDaemonFile mints a chat token for local clients and writes <data-dir>/daemon.json (mode
// 0600). A stale file's token (a server that did not stop cleanly, or whose stop could not revoke
// it) is revoked first; when that revoke fails (not because the token is gone) the stale file stays
// and no new one is written, so no plaintext token is left untracked. The returned func revokes
// this server's token and then removes the file if it is still this server's; when the revoke fails
// (the database is down) the file stays for the next start to revoke (issue 22 item 4, T12).
func writeDaemonFile(ctx context.Context, st *store.Store, dataDir, scheme, addr, socket, epoch string, external bool, log *slog.Logger) (func(), error) {
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, err
	}
	path := filepath.Join(dataDir, client.DaemonFileName)
	if b, err := os.ReadFile(path); err == nil {
		var old client.DaemonFile
		if json.Unmarshal(b, &old) == nil && old.Token != "" {
			t, err := st.RevokeTokenSecret(ctx, old.Token, "operator")
			switch {
			case err == nil:
				log.Info("revoked the token of a stale daemon.json", "token", t.Name)
			case !errors.Is(err, store.ErrNotFound):
				return nil, fmt.Errorf("the stale %s holds a token that could not be revoked (%w); it stays for the next start to revoke", path, err)
			case old.ExternalDatabase != external:
				// The stale server used another database; its token lives there.
				log.Warn("the stale daemon.json's local token is in the database its server used, not this one: revoke it there (zidane-server token list / token revoke with that server's --database-url, or without one on this data dir)",
					"startedAt", time.UnixMilli(old.StartedAt).UTC().Format(time.RFC3339), "pid", old.PID)
			}
		}
	}
	name := localTokenPrefix + epoch[:8]
	plain, _, err := st.CreateToken(ctx, name, "chat")
	if err != nil {
		return nil, err
	}
	host, port, _ := net.SplitHostPort(addr)
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	p, _ := strconv.Atoi(port)
	d := client.DaemonFile{
		URL: scheme + "://" + net.JoinHostPort(host, port), Port: p, Socket: socket, PID: os.Getpid(),
		StartedAt: time.Now().UnixMilli(), ProtocolVersion: protocol.ProtocolVersion, Token: plain,
		ExternalDatabase: external,
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	_ = enc.Encode(d) // a struct of strings and numbers always encodes; Encode ends it in a newline
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b.Bytes(), 0o600); err != nil {
		return nil, err
	}
	if err := os.Rename(tmp, path); err != nil {
		return nil, err
	}
	return func() {
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := st.RevokeTokenSecret(cctx, plain, "operator"); err != nil && !errors.Is(err, store.ErrNotFound) {
			log.Warn("the local token could not be revoked; daemon.json stays, and the next start on this data dir revokes it",
				"token", name, "file", path, "err", err)
			return
		}
		if cur, err := client.ReadDaemonFile(dataDir); err == nil && cur.PID == os.Getpid() {
			os.Remove(path)
		}
	}, nil
}

func listenUnix(path string) (net.Listener, error) {
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return nil, fmt.Errorf("--unix-socket %s exists and is not a socket; remove it or pick another path", path)
		}
		if c, err := net.Dial("unix", path); err == nil {
			c.Close()
			return nil, fmt.Errorf("--unix-socket %s is in use by another server", path)
		}
		os.Remove(path)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("--unix-socket %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, err
	}
	return ln, nil
}

// binaries returns how to run this binary and the zidane client in printed commands: the bare
// name when PATH finds this very file, else its path (relative to the working directory when
// shorter, e.g. bin/zidane-server).
func binaries() (self, cli string) {
	self, cli = "zidane-server", "zidane"
	exe, err := os.Executable()
	if err != nil {
		return
	}
	exe, _ = filepath.EvalSymlinks(exe)
	if p, err := exec.LookPath("zidane-server"); err == nil {
		if rp, _ := filepath.EvalSymlinks(p); rp == exe {
			return
		}
	}
	short := func(p string) string {
		if wd, err := os.Getwd(); err == nil {
			if rel, err := filepath.Rel(wd, p); err == nil && !strings.HasPrefix(rel, "..") {
				return rel
			}
		}
		return p
	}
	self = short(exe)
	if c := filepath.Join(filepath.Dir(exe), "zidane"); isFile(c) {
		cli = short(c)
	}
	return
}

// absBinary is how adminCommands name the operator binary (seed "Handshake": run on the server's
// machine): its absolute path, so the command works from any folder, or its bare name when PATH
// finds this binary under it.
func absBinary(self string) string {
	if !strings.ContainsRune(self, filepath.Separator) && !isFile(self) {
		return self // found on PATH
	}
	if abs, err := filepath.Abs(self); err == nil {
		return abs
	}
	return self
}

func isFile(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir()
}

// checkRoots refuses workspace roots that would expose the server's own secrets (issue 21, case
// T03): a root that holds the data dir (daemon.json's token, the managed database), and a root
// that is the user's home directory unless allowHome is set; a data dir inside an allowed home
// root is hidden instead. viaMake: `make run` started the server (server.FlagHint).
func checkRoots(roots []string, dataDir string, allowHome, viaMake bool) error {
	home, _ := os.UserHomeDir()
	for _, r := range roots {
		isHome := home != "" && workspace.Holds(r, home) && workspace.Holds(home, r)
		if isHome && !allowHome {
			return fmt.Errorf("workspace root %s is the home directory of the server's user: the agent would read and write every file of the user; pass a project folder with %s, or %s to serve the whole home (the data dir and credential files inside it stay hidden)", r, server.FlagHint("--workspace-root DIR", viaMake, os.Getenv(server.MakeArgsEnv)), server.FlagHint("--allow-home-root", viaMake, os.Getenv(server.MakeArgsEnv)))
		}
		if !isHome && workspace.Holds(r, dataDir) {
			return fmt.Errorf("workspace root %s holds the data dir %s (daemon.json's token, the database): pass %s with a folder outside the workspace roots, or a --workspace-root that does not hold it", r, dataDir, server.FlagHint("--data-dir DIR", viaMake, os.Getenv(server.MakeArgsEnv)))
		}
	}
	return nil
}

func srvRoots(roots []string) []string {
	if len(roots) == 0 {
		wd, _ := os.Getwd()
		return []string{wd}
	}
	return roots
}

func tokenCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "token", Short: "Create, list and revoke access tokens"}
	var db dbFlags
	var name, scope string
	create := &cobra.Command{
		Use:   "create",
		Short: "Create a token and print it once",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if name == "" {
				return errors.New("--name is required")
			}
			if n := utf8.RuneCountInString(name); n > maxTokenName {
				return fmt.Errorf("--name is %d characters long: a token name has at most %d (as POST /zidane/pair allows)", n, maxTokenName)
			}
			if problem := oneline.Problem("a token name", name); problem != "" {
				return fmt.Errorf("--name %s: %s", oneline.Line(name), problem)
			}
			if !protocol.Scope(scope).IsKnown() || scope == "none" {
				return fmt.Errorf("--scope %q: use chat, admin or machine", scope)
			}
			st, closeDB, err := db.open(cmd.Context(), quietLogger())
			if err != nil {
				return err
			}
			defer closeDB()
			plain, t, err := st.CreateToken(cmd.Context(), name, scope)
			if errors.Is(err, store.ErrNameTaken) {
				return fmt.Errorf("a live token named %q exists; revoke it first (zidane-server token revoke %s) or pick another --name", name, name)
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "created %s token %q; it is shown only once:\n", t.Scope, t.Name)
			fmt.Println(plain)
			warnNoServer(&db, "the token")
			return nil
		},
	}
	db.add(create)
	create.Flags().StringVar(&name, "name", "", "a name for the token (unique among live tokens)")
	create.Flags().StringVar(&scope, "scope", "chat", "chat, admin or machine")

	var ldb dbFlags
	list := &cobra.Command{
		Use:   "list",
		Short: "List tokens (never their values)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, closeDB, err := ldb.open(cmd.Context(), quietLogger())
			if err != nil {
				return err
			}
			defer closeDB()
			ts, err := st.ListTokens(cmd.Context())
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tSCOPE\tCREATED\tLAST USED\tREVOKED\tEXPIRES")
			for _, t := range ts {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", oneline.Line(t.Name), t.Scope, t.CreatedAt.Format(time.RFC3339), fmtTime(t.LastUsedAt), fmtTime(t.RevokedAt), fmtTime(t.ExpiresAt))
			}
			return tw.Flush()
		},
	}
	ldb.add(list)

	var rdb dbFlags
	revoke := &cobra.Command{
		Use:   "revoke NAME",
		Short: "Revoke a live token by name",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, closeDB, err := rdb.open(cmd.Context(), quietLogger())
			if err != nil {
				return err
			}
			defer closeDB()
			t, err := st.RevokeToken(cmd.Context(), args[0])
			if errors.Is(err, store.ErrNotFound) {
				return fmt.Errorf("no live token named %q (see zidane-server token list)", args[0])
			}
			if err != nil {
				return err
			}
			fmt.Printf("revoked %s token %q\n", t.Scope, t.Name)
			return nil
		},
	}
	rdb.add(revoke)
	cmd.AddCommand(create, list, revoke)
	return cmd
}

// warnNoServer warns on stderr, after token create or pair stored what, when no server runs on
// the data dir whose managed Postgres holds it (no live daemon.json): a server the user runs on
// another data dir has its own database and would refuse it (README "A second server beside the
// first"). Still a success: a server may start on this data dir later. With --database-url the
// database is named, whichever data dir its servers use: no warning.
func warnNoServer(f *dbFlags, what string) {
	if f.databaseURL != "" {
		return
	}
	if _, err := client.ReadDaemonFile(f.dataDir); err == nil {
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "warning: no zidane-server is running on data dir %s (no live %s there): %s is stored in that data dir's database and works only with a server started on it.\n",
		f.dataDir, client.DaemonFileName, what)
	if def := client.DefaultDataDir(); filepath.Clean(def) != filepath.Clean(f.dataDir) {
		if d, err := client.ReadDaemonFile(def); err == nil {
			fmt.Fprintf(&b, "  a server runs on data dir %s (pid %d, %s).\n", def, d.PID, d.URL)
		}
	}
	b.WriteString("  For the server you run, pass its data dir (the one its start banner's pair line names): --data-dir DIR, or ZIDANE_SERVER_HOME=DIR.\n")
	os.Stderr.WriteString(b.String())
}

// maxTokenName is the longest token name, in characters, that token create and pairing take.
const maxTokenName = 200

func pairCmd() *cobra.Command {
	var db dbFlags
	var scope string
	var ttl, tokenTTL time.Duration
	cmd := &cobra.Command{
		Use:   "pair",
		Short: "Print a single-use pairing code that an app trades for a token at POST /zidane/pair",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if scope != "chat" && scope != "admin" && scope != "machine" {
				return fmt.Errorf("--scope %q: use chat, admin or machine", scope)
			}
			st, closeDB, err := db.open(cmd.Context(), quietLogger())
			if err != nil {
				return err
			}
			defer closeDB()
			if tokenTTL < 0 || (tokenTTL > 0 && tokenTTL < time.Second) || tokenTTL > store.MaxTokenTTL {
				return fmt.Errorf("--ttl-token %s: give a life between 1s and %s, or leave it out for a token that lasts until revoked", tokenTTL, store.MaxTokenTTL)
			}
			code, exp, err := st.CreatePairingCode(cmd.Context(), scope, ttl, tokenTTL)
			if err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "%s pairing code, single use, valid until %s (%s):\n", scope, exp.Format("2006-01-02 15:04:05 MST"), ttl)
			if tokenTTL > 0 {
				fmt.Fprintf(os.Stderr, "the token it trades for expires %s after pairing\n", tokenTTL)
			}
			fmt.Println(code)
			server := "http://<server>"
			if d, err := client.ReadDaemonFile(db.dataDir); err == nil {
				server = "http" + strings.TrimPrefix(d.URL, "ws")
			}
			fmt.Fprintf(os.Stderr, "redeem: curl -X POST %s/zidane/pair -d '{\"code\":\"%s\",\"name\":\"my-laptop\"}'\n", server, code)
			warnNoServer(&db, "the pairing code")
			return nil
		},
	}
	db.add(cmd)
	cmd.Flags().StringVar(&scope, "scope", "chat", "scope of the token the code trades for: chat, admin or machine")
	cmd.Flags().DurationVar(&ttl, "ttl", 10*time.Minute, "how long the code is valid (at most 24h)")
	cmd.Flags().DurationVar(&tokenTTL, "ttl-token", 0, "how long the paired token works, from the pairing (e.g. 720h; default: until revoked)")
	return cmd
}

func quietLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

func fmtTime(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.Format(time.RFC3339)
}

// overrideLimits applies the per-run limit flags that are set over the config file's limits.
func overrideLimits(file, flags agent.Limits) agent.Limits {
	if flags.MaxTurns > 0 {
		file.MaxTurns = flags.MaxTurns
	}
	if flags.MaxWallTime > 0 {
		file.MaxWallTime = flags.MaxWallTime
	}
	if flags.MaxOutputTokens > 0 {
		file.MaxOutputTokens = flags.MaxOutputTokens
	}
	if flags.MaxTaskDepth > 0 {
		file.MaxTaskDepth = flags.MaxTaskDepth
	}
	if flags.MaxTaskChildren > 0 {
		file.MaxTaskChildren = flags.MaxTaskChildren
	}
	if flags.MaxConcurrentRuns > 0 {
		file.MaxConcurrentRuns = flags.MaxConcurrentRuns
	}
	if flags.MaxTurnBytes > 0 {
		file.MaxTurnBytes = flags.MaxTurnBytes
	}
	return file
}

// checkLimitFlags refuses a negative count, size or duration among the flags given (every one of
// them is a limit or an interval), and a 0 for a flag whose default is not 0 (the server took it
// for the default without a word). A 0 for a flag whose default is 0 keeps its documented meaning
// ("the config file's, else …").
func checkLimitFlags(cmd *cobra.Command) error {
	var err error
	cmd.Flags().Visit(func(f *pflag.Flag) {
		if err != nil {
			return
		}
		var v int64
		switch f.Value.Type() {
		case "int", "int64":
			n, perr := strconv.ParseInt(f.Value.String(), 10, 64)
			if perr != nil {
				return
			}
			v = n
		case "duration":
			d, perr := time.ParseDuration(f.Value.String())
			if perr != nil {
				return
			}
			v = int64(d)
		default:
			return
		}
		zeroDefault := f.DefValue == "0" || f.DefValue == "0s"
		if v < 0 || (v == 0 && !zeroDefault) {
			def := " (" + f.DefValue + ")"
			if zeroDefault {
				def = "" // the config file's, else the runtime's: the flag's usage says which
			}
			err = fmt.Errorf("--%s %s: must be positive; give a positive value, or leave the flag out for its default%s", f.Name, f.Value.String(), def)
		}
	})
	return err
}
