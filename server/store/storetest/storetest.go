// Package storetest gives tests a fresh, empty PostgreSQL database each. With
// DATABASE_URL set, databases are created on that server; otherwise one
// managed PostgreSQL (store.StartManaged in a temp dir) is started per test
// process. Packages using it without DATABASE_URL should call Main from
// TestMain so the managed server is stopped at the end.
package storetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/zidane-server/zidane/server/store"
)

var (
	once     sync.Once
	adminURL string
	startErr error
	managed  *store.Managed
	tmpDir   string
	mu       sync.Mutex
)

// Main runs the tests (m.Run), stops the managed PostgreSQL if one was
// started, and exits with the tests' code. Call it from TestMain.
func Main(m *testing.M) {
	code := m.Run()
	Shutdown()
	os.Exit(code)
}

// Shutdown stops the managed PostgreSQL started by this package, if any, and
// removes its directory. Main calls it.
func Shutdown() {
	mu.Lock()
	defer mu.Unlock()
	if managed != nil {
		if err := managed.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "storetest: stop managed postgres:", err)
		}
		managed = nil
	}
	for _, drop := range sharedDrops {
		drop()
	}
	sharedDrops, shared = nil, nil
	if tmpDir != "" {
		_ = os.RemoveAll(tmpDir)
		tmpDir = ""
	}
}

var (
	shared      map[string]string // SharedURL's databases by key
	sharedDrops []func()
)

// SharedURL is URL for a database that lives until Shutdown (Main), one per key: benchmarks
// that build a large corpus once for every repetition (-count) take it. fill runs once, on the
// fresh database, when the key is first asked for; if it fails the database is dropped and t
// fails.
func SharedURL(t testing.TB, key string, fill func(url string) error) string {
	t.Helper()
	mu.Lock()
	u, ok := shared[key]
	mu.Unlock()
	if ok {
		return u
	}
	base, err := admin()
	if err != nil {
		t.Fatalf("storetest: %v", err)
	}
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	name := "zt_shared_" + hex.EncodeToString(rnd[:])
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("storetest: connect %s: %v", redact(base), err)
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, `CREATE DATABASE `+name+` TEMPLATE template0 ENCODING 'UTF8' LC_COLLATE 'C' LC_CTYPE 'C'`); err != nil {
		t.Fatalf("storetest: create database %s: %v", name, err)
	}
	drop := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if c, err := pgx.Connect(ctx, base); err == nil {
			_, _ = c.Exec(ctx, `DROP DATABASE IF EXISTS `+name+` WITH (FORCE)`)
			c.Close(ctx)
		}
	}
	if u, err = withDatabase(base, name); err == nil {
		err = fill(u)
	}
	if err != nil {
		drop()
		t.Fatalf("storetest: shared database %s: %v", key, err)
	}
	mu.Lock()
	if shared == nil {
		shared = map[string]string{}
	}
	shared[key] = u
	sharedDrops = append(sharedDrops, drop)
	mu.Unlock()
	return u
}

func admin() (string, error) {
	once.Do(func() {
		if u := os.Getenv("DATABASE_URL"); u != "" {
			adminURL = u
			return
		}
		mu.Lock()
		defer mu.Unlock()
		dir, err := os.MkdirTemp("", "zt-pg-")
		if err != nil {
			startErr = err
			return
		}
		// When root, PostgreSQL runs as an unprivileged user that must be able
		// to traverse this directory.
		if err := os.Chmod(dir, 0o711); err != nil {
			startErr = err
			return
		}
		tmpDir = dir
		log := slog.New(slog.NewTextHandler(io.Discard, nil))
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		managed, startErr = store.StartManaged(ctx, dir, log)
		if startErr != nil {
			_ = os.RemoveAll(dir)
			tmpDir = ""
			return
		}
		adminURL = managed.URL()
	})
	return adminURL, startErr
}

// URL returns the URL of a new, empty database (zt_<random>, UTF8, C locale)
// that is dropped when t finishes. It fails t if no server is available.
func URL(t testing.TB) string {
	t.Helper()
	base, err := admin()
	if err != nil {
		t.Fatalf("storetest: %v", err)
	}
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	name := "zt_" + hex.EncodeToString(rnd[:])

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("storetest: connect %s: %v", redact(base), err)
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, `CREATE DATABASE `+name+` TEMPLATE template0 ENCODING 'UTF8' LC_COLLATE 'C' LC_CTYPE 'C'`); err != nil {
		t.Fatalf("storetest: create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, base)
		if err != nil {
			t.Errorf("storetest: drop database %s: %v", name, err)
			return
		}
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, `DROP DATABASE IF EXISTS `+name+` WITH (FORCE)`); err != nil {
			t.Errorf("storetest: drop database %s: %v", name, err)
		}
	})

	u, err := withDatabase(base, name)
	if err != nil {
		t.Fatalf("storetest: %v", err)
	}
	return u
}

// New opens a migrated store on a fresh database (see URL), closed when t
// finishes.
func New(t testing.TB) *store.Store {
	t.Helper()
	u := URL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := store.Open(ctx, u, store.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatalf("storetest: open store: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

// withDatabase returns base with its database name replaced by db. base may
// be a URL or a key=value DSN.
func withDatabase(base, db string) (string, error) {
	if u, err := url.Parse(base); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		u.Path = "/" + db
		u.RawPath = ""
		return u.String(), nil
	}
	// key=value DSN: a later dbname wins.
	return base + " dbname=" + db, nil
}

func redact(u string) string {
	if p, err := url.Parse(u); err == nil && p.User != nil {
		if _, ok := p.User.Password(); ok {
			p.User = url.UserPassword(p.User.Username(), "xxxxx")
		}
		return p.String()
	}
	return u
}

// ShortTempDir returns a new temp dir with a short path (a managed Postgres's unix socket path is
// limited to about 100 bytes) that the unprivileged user PostgreSQL runs as under root may
// traverse (mode 0711), removed when t finishes.
func ShortTempDir(t testing.TB) string {
	t.Helper()
	d, err := os.MkdirTemp("", "ztm-")
	if err != nil {
		t.Fatalf("storetest: %v", err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(d) })
	if err := os.Chmod(d, 0o711); err != nil {
		t.Fatalf("storetest: %v", err)
	}
	return d
}

// PostmasterPID returns the pid on the first line of <clusterDir>/postmaster.pid (the cluster's
// postmaster while it runs), failing t when there is none.
func PostmasterPID(t testing.TB, clusterDir string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(clusterDir, "postmaster.pid"))
	if err != nil {
		t.Fatalf("storetest: %v", err)
	}
	first, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(first))
	if err != nil {
		t.Fatalf("storetest: postmaster.pid of %s: %v", clusterDir, err)
	}
	return pid
}
