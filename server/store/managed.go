package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// ErrPostgresNotFound: StartManaged found no PostgreSQL server binaries.
var ErrPostgresNotFound = errors.New("PostgreSQL server binaries (initdb, postgres) were not found on PATH or under /usr/lib/postgresql/*/bin; " +
	"install them (Debian/Ubuntu: apt-get install postgresql) or set DATABASE_URL to use an existing server")

// pgBinGlob is where distribution packages put versioned PostgreSQL binaries.
// Tests point it elsewhere.
var pgBinGlob = "/usr/lib/postgresql/*/bin"

const (
	managedUser   = "zidane" // database superuser created by initdb
	managedDB     = "zidane" // database created for the server
	socketName    = ".s.PGSQL.5432"
	maxSocketPath = 100 // bytes; sun_path is 108 on Linux
	readyTimeout  = 30 * time.Second
	stopTimeout   = 60 * time.Second
)

// Managed is a PostgreSQL server run by this process from the machine's
// binaries, with its cluster under <dataDir>/postgres and its unix socket in
// <dataDir>/run (no TCP listener). Create it with StartManaged.
type Managed struct {
	dataDir, clusterDir, runDir string
	log                         *slog.Logger
	bins                        pgBins
	as                          *runAs // the unprivileged user postgres runs as (root only), else nil
	logFile                     *os.File
	stopOnce                    sync.Once
	stopErr                     error

	mu       sync.Mutex
	cur      *child        // the postmaster we started last; Stop stops the one postmaster.pid names
	stopping bool          // Stop was called: Supervise starts nothing more
	stopCh   chan struct{} // closed by Stop
	// adopted is a live postmaster of the cluster this Managed did not start (pg_ctl) that
	// Supervise watches since adoptedAt; 0 when none.
	adopted   int
	adoptedAt time.Time
}

// child is one postmaster process this Managed started.
type child struct {
	cmd     *exec.Cmd
	started time.Time
	done    chan struct{} // closed when it has exited (and was reaped)
	err     error         // cmd.Wait's result, valid after done
}

// exited reports whether the child has exited (and was reaped).
func (c *child) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// pgBins are the PostgreSQL executables used by StartManaged.
type pgBins struct{ initdb, postgres string }

// findPGBinaries looks for initdb and postgres on PATH, then in the newest
// version directory matching pgBinGlob.
func findPGBinaries() (pgBins, error) {
	i, err1 := exec.LookPath("initdb")
	p, err2 := exec.LookPath("postgres")
	if err1 == nil && err2 == nil {
		return pgBins{initdb: i, postgres: p}, nil
	}
	dirs, _ := filepath.Glob(pgBinGlob)
	sort.SliceStable(dirs, func(a, b int) bool { return versionLess(dirs[b], dirs[a]) })
	for _, d := range dirs {
		b := pgBins{initdb: filepath.Join(d, "initdb"), postgres: filepath.Join(d, "postgres")}
		if isExecutable(b.initdb) && isExecutable(b.postgres) {
			return b, nil
		}
	}
	return pgBins{}, ErrPostgresNotFound
}

// versionLess compares the version component of two .../<version>/bin paths
// numerically ("9.6" < "15").
func versionLess(a, b string) bool {
	va := strings.Split(filepath.Base(filepath.Dir(a)), ".")
	vb := strings.Split(filepath.Base(filepath.Dir(b)), ".")
	for i := 0; i < len(va) || i < len(vb); i++ {
		var x, y int
		if i < len(va) {
			x, _ = strconv.Atoi(va[i])
		}
		if i < len(vb) {
			y, _ = strconv.Atoi(vb[i])
		}
		if x != y {
			return x < y
		}
	}
	return a < b
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}

// runAs is the unprivileged account PostgreSQL runs as when we are root.
type runAs struct {
	name     string
	uid, gid uint32
	groups   []uint32
}

func lookupRunAs() (*runAs, error) {
	var u *user.User
	var err error
	for _, name := range []string{"postgres", "nobody"} {
		if u, err = user.Lookup(name); err == nil {
			break
		}
	}
	if u == nil {
		return nil, fmt.Errorf("running as root, but neither a %q nor a %q user exists to run PostgreSQL as", "postgres", "nobody")
	}
	uid, _ := strconv.ParseUint(u.Uid, 10, 32)
	gid, _ := strconv.ParseUint(u.Gid, 10, 32)
	r := &runAs{name: u.Username, uid: uint32(uid), gid: uint32(gid)}
	if gids, err := u.GroupIds(); err == nil {
		for _, g := range gids {
			if n, err := strconv.ParseUint(g, 10, 32); err == nil {
				r.groups = append(r.groups, uint32(n))
			}
		}
	}
	return r, nil
}

// canSearch reports whether the user may traverse (execute) directory fi.
func (r *runAs) canSearch(fi fs.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return true
	}
	perm := fi.Mode().Perm()
	if st.Uid == r.uid {
		return perm&0o100 != 0
	}
	if st.Gid == r.gid || containsUint32(r.groups, st.Gid) {
		return perm&0o010 != 0
	}
	return perm&0o001 != 0
}

func containsUint32(xs []uint32, x uint32) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// checkTraverse verifies the user can reach dir through every ancestor
// (dir included).
func (r *runAs) checkTraverse(dir string) error {
	for d := dir; ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			return err
		}
		if !r.canSearch(fi) {
			st, _ := fi.Sys().(*syscall.Stat_t)
			var owner uint32
			if st != nil {
				owner = st.Uid
			}
			return fmt.Errorf("zidane-server runs as root, so PostgreSQL runs as the unprivileged user %q (uid %d), "+
				"but that user cannot enter %s (mode %04o, owner uid %d), which is on the path to the cluster directory %s; "+
				"use a data directory it can reach, e.g. --data-dir /var/lib/zidane-server (or ZIDANE_SERVER_HOME), "+
				"or make %s traversable (chmod o+x)",
				r.name, r.uid, d, fi.Mode().Perm(), owner, dir, d)
		}
		if d == filepath.Dir(d) {
			return nil
		}
	}
}

// checkClusterOwner refuses, as root, a cluster directory that an ordinary user's server made
// (owned by a uid that is neither root nor the user root runs Postgres as): taking it over
// would chown it away from that user, whose server then could not start.
func (r *runAs) checkClusterOwner(clusterDir string) error {
	fi, err := os.Lstat(clusterDir)
	if err != nil {
		return nil // not there yet: ours to make
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || st.Uid == 0 || st.Uid == r.uid {
		return nil
	}
	owner := fmt.Sprintf("uid %d", st.Uid)
	if u, err := user.LookupId(strconv.FormatUint(uint64(st.Uid), 10)); err == nil {
		owner = fmt.Sprintf("user %s (uid %d)", u.Username, st.Uid)
	}
	return fmt.Errorf("the managed Postgres in %s belongs to %s, whose server made it; running it as root would take it from that user: "+
		"run this command as that user (runuser -u <user> -- zidane-server …), or give root a data dir of its own (--data-dir)", clusterDir, owner)
}

// chownTree gives the tree at root to the user, walking it only when root
// itself is not already owned by the user.
func (r *runAs) chownTree(root string) error {
	fi, err := os.Lstat(root)
	if err != nil {
		return err
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Uid == r.uid && st.Gid == r.gid {
		return nil
	}
	return filepath.WalkDir(root, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, int(r.uid), int(r.gid))
	})
}

// childEnv is the environment for PostgreSQL processes: ours minus PG*
// variables, with the C locale.
func childEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "PG") || strings.HasPrefix(kv, "LC_") || strings.HasPrefix(kv, "LANG=") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "LC_ALL=C", "LANG=C")
}

// StartManaged starts (initialising on first use) a PostgreSQL cluster in
// <dataDir>/postgres listening only on a unix socket in <dataDir>/run, waits
// up to 30s for it to accept connections, creates database "zidane" if
// missing and returns the running server; call Stop to shut it down. When
// running as root, PostgreSQL runs as the "postgres" user (else "nobody").
// Errors: ErrPostgresNotFound; the cluster is already running; the socket
// path is too long; as root, an ancestor directory the unprivileged user
// cannot traverse; initdb or startup failures (with the server log's tail).
func StartManaged(ctx context.Context, dataDir string, log *slog.Logger) (*Managed, error) {
	if log == nil {
		log = slog.Default()
	}
	m, err := startManaged(ctx, dataDir, log)
	if err != nil {
		return nil, fmt.Errorf("managed postgres: %w", err)
	}
	return m, nil
}

func startManaged(ctx context.Context, dataDir string, log *slog.Logger) (*Managed, error) {
	bins, err := findPGBinaries()
	if err != nil {
		return nil, err
	}
	if dataDir, err = filepath.Abs(dataDir); err != nil {
		return nil, err
	}
	m := &Managed{
		dataDir:    dataDir,
		clusterDir: filepath.Join(dataDir, "postgres"),
		runDir:     filepath.Join(dataDir, "run"),
		log:        log,
		bins:       bins,
		stopCh:     make(chan struct{}),
	}
	if sock := filepath.Join(m.runDir, socketName); len(sock) >= maxSocketPath {
		return nil, fmt.Errorf("unix socket path %s is %d bytes, too long (limit %d); use a shorter data directory",
			sock, len(sock), maxSocketPath-1)
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, err
	}

	var as *runAs
	if os.Geteuid() == 0 {
		if as, err = lookupRunAs(); err != nil {
			return nil, err
		}
		m.as = as
		if err := as.checkClusterOwner(m.clusterDir); err != nil {
			return nil, err
		}
		// dataDir is ours: let the user traverse it (search only, no listing).
		if fi, err := os.Stat(dataDir); err == nil && !as.canSearch(fi) {
			if err := os.Chmod(dataDir, fi.Mode().Perm()|0o001); err != nil {
				return nil, err
			}
		}
		if err := as.checkTraverse(dataDir); err != nil {
			return nil, err
		}
	}
	for _, d := range []string{m.runDir, m.clusterDir} {
		if err := os.Mkdir(d, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			return nil, err
		}
		if as != nil {
			if err := as.chownTree(d); err != nil {
				return nil, fmt.Errorf("chown %s to %s: %w", d, as.name, err)
			}
		}
	}

	if err := m.checkNotRunning(); err != nil {
		return nil, err
	}

	if _, err := os.Stat(filepath.Join(m.clusterDir, "PG_VERSION")); errors.Is(err, fs.ErrNotExist) {
		log.Info("managed postgres: initialising cluster", "dir", m.clusterDir, "initdb", bins.initdb)
		cmd := exec.CommandContext(ctx, bins.initdb, "-D", m.clusterDir, "--auth=trust",
			"--username="+managedUser, "--encoding=UTF8", "--locale=C")
		m.prepare(cmd, as)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			return nil, fmt.Errorf("initdb %s: %w\n%s", m.clusterDir, err, tail(out.Bytes(), 2000))
		}
	} else if err != nil {
		return nil, err
	}

	logPath := m.LogPath()
	if m.logFile, err = os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600); err != nil {
		return nil, err
	}
	logStart, _ := m.logFile.Seek(0, 2)
	c, err := m.launch()
	if err != nil {
		m.logFile.Close()
		return nil, err
	}
	m.cur = c
	log.Info("managed postgres: starting", "pid", c.cmd.Process.Pid, "cluster", m.clusterDir, "socket_dir", m.runDir, "log", logPath)

	if err := m.waitReady(ctx, c); err != nil {
		_ = m.Stop()
		return nil, fmt.Errorf("%w\n%s: %s", err, logPath, m.logTail(logStart))
	}
	if err := m.ensureDatabase(ctx); err != nil {
		_ = m.Stop()
		return nil, err
	}
	log.Info("managed postgres: ready", "url", m.URL())
	return m, nil
}

// LogPath is the file the managed postgres writes its log to: <dataDir>/postgres.log.
func (m *Managed) LogPath() string { return filepath.Join(m.dataDir, "postgres.log") }

// launch starts a postmaster on the cluster, its output appended to the log file; it does not
// wait for it to accept connections.
func (m *Managed) launch() (*child, error) {
	cmd := exec.Command(m.bins.postgres, "-D", m.clusterDir, "-k", m.runDir,
		"-c", "listen_addresses=", "-c", "unix_socket_permissions=0700")
	m.prepare(cmd, m.as)
	cmd.Stdout, cmd.Stderr = m.logFile, m.logFile
	cmd.SysProcAttr.Setpgid = true             // our terminal's ^C is handled by Stop, not postgres
	cmd.SysProcAttr.Pdeathsig = syscall.SIGINT // fast shutdown if we die
	c := &child{cmd: cmd, started: time.Now(), done: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		// Pdeathsig fires when the starting thread exits: keep this goroutine
		// (and its locked thread) alive for postgres' lifetime.
		runtime.LockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			c.err = err
			close(c.done)
			return
		}
		started <- nil
		c.err = cmd.Wait()
		close(c.done)
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("start %s: %w", m.bins.postgres, err)
	}
	return c, nil
}

// prepare sets the working directory, environment and (as root) credentials.
func (m *Managed) prepare(cmd *exec.Cmd, as *runAs) {
	cmd.Dir = m.runDir
	cmd.Env = childEnv()
	cmd.SysProcAttr = &syscall.SysProcAttr{}
	if as != nil {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: as.uid, Gid: as.gid, Groups: as.groups}
	}
}

// checkNotRunning fails if postmaster.pid names a live postgres process (not a zombie: a killed
// postmaster whose parent has not reaped it yet) and removes it (and stale socket lock files)
// otherwise.
func (m *Managed) checkNotRunning() error {
	pidFile := filepath.Join(m.clusterDir, "postmaster.pid")
	b, err := os.ReadFile(pidFile)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	first, _, _ := strings.Cut(string(b), "\n")
	if pid, err := strconv.Atoi(strings.TrimSpace(first)); err == nil && pid > 0 && processIsPostgres(pid) && !processGone(pid) {
		return fmt.Errorf("the PostgreSQL cluster in %s is already running (pid %d, see %s); "+
			"is another zidane-server using data directory %s?", m.clusterDir, pid, pidFile, m.dataDir)
	}
	m.log.Warn("managed postgres: removing stale postmaster.pid", "file", pidFile, "pid", strings.TrimSpace(first))
	for _, p := range []string{pidFile, filepath.Join(m.runDir, socketName+".lock"), filepath.Join(m.runDir, socketName)} {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

// processIsPostgres reports whether pid is alive and is a postgres process.
func processIsPostgres(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	if err != nil {
		return !errors.Is(err, fs.ErrNotExist) // be conservative when unsure
	}
	return strings.HasPrefix(strings.TrimSpace(string(comm)), "postgres")
}

func (m *Managed) adminURL() string { return m.urlFor("postgres") }

func (m *Managed) urlFor(db string) string {
	u := url.URL{Scheme: "postgres", User: url.User(managedUser), Path: "/" + db,
		RawQuery: url.Values{"host": {m.runDir}, "sslmode": {"disable"}}.Encode()}
	return u.String()
}

// waitReady polls until the server accepts connections, c exits, or
// readyTimeout passes.
func (m *Managed) waitReady(ctx context.Context, c *child) error {
	deadline := time.Now().Add(readyTimeout)
	var last error
	for {
		select {
		case <-c.done:
			return fmt.Errorf("postgres exited during startup: %v", exitStatus(c.err))
		default:
		}
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		pc, err := pgx.Connect(cctx, m.adminURL())
		if err == nil {
			err = pc.Ping(cctx)
			pc.Close(cctx)
		}
		cancel()
		if err == nil {
			return nil
		}
		last = err
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("postgres not ready after %s: %w", readyTimeout, last)
		}
		select {
		case <-time.After(50 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		case <-c.done:
		}
	}
}

func (m *Managed) ensureDatabase(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	c, err := pgx.Connect(ctx, m.adminURL())
	if err != nil {
		return err
	}
	defer c.Close(ctx)
	var exists bool
	if err := c.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, managedDB).Scan(&exists); err != nil {
		return err
	}
	if exists {
		return nil
	}
	m.log.Info("managed postgres: creating database", "name", managedDB)
	if _, err := c.Exec(ctx, `CREATE DATABASE `+managedDB); err != nil {
		return fmt.Errorf("create database %s: %w", managedDB, err)
	}
	return nil
}

func (m *Managed) logTail(from int64) string {
	b, err := os.ReadFile(m.logFile.Name())
	if err != nil {
		return err.Error()
	}
	if from > int64(len(b)) {
		from = 0
	}
	return string(tail(b[from:], 2000))
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// URL returns the connection URL of database "zidane", e.g.
// postgres://zidane@/zidane?host=%2Fvar%2Flib%2Fzidane-server%2Frun&sslmode=disable.
func (m *Managed) URL() string { return m.urlFor(managedDB) }

// Stop shuts the cluster's postmaster down and waits until it is gone: the process that
// <cluster>/postmaster.pid names at stop time (issue 7 item 3), which is not necessarily the one
// this Managed started (an operator may have restarted the cluster with pg_ctl). It sends SIGINT
// (fast shutdown), SIGQUIT after stopTimeout, SIGKILL 10 s later, and polls until the process has
// exited (it may not be our child); our own child, if it still runs, is stopped the same way and
// reaped. The pid is trusted only if it is a postgres process whose working directory is the
// cluster (a postmaster chdirs there), so a stale file never signals an unrelated process. Safe to
// call repeatedly; later calls return the first result. Errors: the postmaster did not exit,
// or our child exited abnormally.
//
// Stop ends Supervise: nothing is restarted after it.
func (m *Managed) Stop() error {
	m.stopOnce.Do(func() {
		m.mu.Lock()
		m.stopping = true
		c := m.cur
		close(m.stopCh)
		m.mu.Unlock()
		defer m.logFile.Close()
		m.stopErr = m.stop(c)
	})
	return m.stopErr
}

func (m *Managed) stop(c *child) error {
	child := c.cmd.Process
	ownChild := !c.exited() // not reaped yet, so its pid is still ours to signal
	pm := m.postmasterPID()
	var others []int // processes that are not our running child: polled, not waited for
	if pm > 0 && (pm != child.Pid || !ownChild) {
		others = append(others, pm)
	}
	pids := append([]int(nil), others...) // for the log
	if ownChild {
		pids = append(pids, child.Pid)
	}
	gone := func() bool {
		if ownChild && !c.exited() {
			return false
		}
		for _, pid := range others {
			if !processGone(pid) {
				return false
			}
		}
		return true
	}
	signal := func(sig syscall.Signal) {
		for _, pid := range others {
			_ = syscall.Kill(pid, sig)
		}
		if ownChild && !c.exited() {
			_ = child.Signal(sig)
		}
	}
	signal(syscall.SIGINT)
	stopped := waitGone(c, gone, stopTimeout)
	if !stopped {
		m.log.Warn("managed postgres: fast shutdown timed out; sending SIGQUIT", "pids", pids)
		signal(syscall.SIGQUIT)
		if stopped = waitGone(c, gone, 10*time.Second); !stopped {
			signal(syscall.SIGKILL)
			stopped = waitGone(c, gone, 10*time.Second)
		}
	}
	var err error
	var ee *exec.ExitError
	switch {
	case !stopped:
		err = fmt.Errorf("managed postgres: the postmaster (pids %v) did not exit after SIGKILL", pids)
	case c.err != nil && !errors.As(c.err, &ee):
		err = c.err
	case ee != nil && !ee.Success():
		err = fmt.Errorf("managed postgres: exited with %v", ee)
	}
	m.log.Info("managed postgres: stopped", "postmaster", pm, "child", child.Pid, "err", err)
	return err
}

// waitGone polls gone every 20 ms (and wakes when child c exits) until it holds or d passes.
func waitGone(c *child, gone func() bool, d time.Duration) bool {
	deadline := time.Now().Add(d)
	done := c.done
	for !gone() {
		if time.Now().After(deadline) {
			return false
		}
		select {
		case <-done:
			done = nil // once closed it is ready for ever: poll from now on
		case <-time.After(20 * time.Millisecond):
		}
	}
	return true
}

// postmasterPID returns the pid of the first line of <cluster>/postmaster.pid when it is a live
// postgres process working in the cluster directory, else 0.
func (m *Managed) postmasterPID() int {
	b, err := os.ReadFile(filepath.Join(m.clusterDir, "postmaster.pid"))
	if err != nil {
		return 0
	}
	first, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(first))
	if err != nil || pid <= 0 || !processIsPostgres(pid) || processGone(pid) {
		return 0
	}
	if cwd, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid)); err == nil {
		want, werr := filepath.EvalSymlinks(m.clusterDir)
		if werr != nil {
			want = m.clusterDir
		}
		if cwd != want && cwd != m.clusterDir {
			m.log.Warn("managed postgres: postmaster.pid names a postgres of another cluster; not signalling it", "pid", pid, "cwd", cwd)
			return 0
		}
	}
	return pid
}

// processGone reports whether pid has exited: no such process, a zombie nobody reaped yet (a
// postmaster started by pg_ctl is not our child), or a process that is no longer postgres.
func processGone(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return errors.Is(err, fs.ErrNotExist)
	}
	// pid (comm) state ...: comm may hold spaces and parentheses; the state follows the last ')'.
	if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) {
		if st := b[i+2]; st == 'Z' || st == 'X' {
			return true
		}
	}
	return !processIsPostgres(pid)
}

// ManagedURL is the URL of the managed Postgres of dataDir, for a process that finds it already
// running (a token command while the server runs). It does not check that the server is up.
func ManagedURL(dataDir string) string {
	abs, err := filepath.Abs(dataDir)
	if err != nil {
		abs = dataDir
	}
	m := &Managed{runDir: filepath.Join(abs, "run")}
	return m.URL()
}

// ManagedSocket is the path of the managed Postgres's unix socket under dataDir.
func ManagedSocket(dataDir string) string {
	abs, err := filepath.Abs(dataDir)
	if err != nil {
		abs = dataDir
	}
	return filepath.Join(abs, "run", socketName)
}
