package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// DaemonFile is <data-dir>/daemon.json, written by a running zidane-server for local clients
// (mode 0600, removed on clean exit).
type DaemonFile struct {
	// URL is the WebSocket URL to dial (ws://127.0.0.1:<port>).
	URL string `json:"url"`
	// Port is the TCP port.
	Port int `json:"port"`
	// Socket is the unix socket path when the server also serves one (--unix-socket).
	Socket string `json:"socket,omitempty"`
	// PID is the server's process id.
	PID int `json:"pid"`
	// StartedAt is when the server started, in milliseconds since the Unix epoch.
	StartedAt int64 `json:"startedAt"`
	// ProtocolVersion is the server's newest protocol version.
	ProtocolVersion int `json:"protocolVersion"`
	// Token is a chat token minted for local clients; revoked when the server stops.
	Token string `json:"token"`
	// ExternalDatabase is set when the server uses the database of its --database-url (or
	// DATABASE_URL), not the managed Postgres under the data dir: an operator command on the same
	// data dir needs the same URL. The URL itself is not written here (it may hold a password).
	ExternalDatabase bool `json:"externalDatabase,omitempty"`
}

// DaemonFileName is the file's name inside the data directory.
const DaemonFileName = "daemon.json"

// DefaultDataDir is the server's default data directory: $ZIDANE_SERVER_HOME, else
// /var/lib/zidane-server for root, else $XDG_DATA_HOME/zidane-server or
// ~/.local/share/zidane-server. It matches zidane-server's default.
func DefaultDataDir() string {
	if d := os.Getenv("ZIDANE_SERVER_HOME"); d != "" {
		return d
	}
	if os.Geteuid() == 0 {
		return "/var/lib/zidane-server"
	}
	if d := os.Getenv("XDG_DATA_HOME"); d != "" {
		return filepath.Join(d, "zidane-server")
	}
	home, err := os.UserHomeDir()
	if err != nil || home == "" {
		home = "."
	}
	return filepath.Join(home, ".local", "share", "zidane-server")
}

// ReadDaemonFile reads dataDir/daemon.json and checks that its server process is alive.
func ReadDaemonFile(dataDir string) (*DaemonFile, error) {
	path := filepath.Join(dataDir, DaemonFileName)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("no running zidane-server found (%s does not exist); start one with `make run`, or set ZIDANE_URL and ZIDANE_TOKEN", path)
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	var d DaemonFile
	if err := json.Unmarshal(b, &d); err != nil || d.URL == "" || d.Token == "" {
		return nil, fmt.Errorf("%s is not a valid daemon file; restart the server", path)
	}
	if d.PID > 0 {
		if err := syscall.Kill(d.PID, 0); errors.Is(err, syscall.ESRCH) || exited(d.PID) {
			return nil, &StaleDaemonFileError{Path: path, PID: d.PID}
		}
		// The pid may have been reused by another program since the server died.
		if comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", d.PID)); err == nil {
			if name := strings.TrimSpace(string(comm)); !strings.HasPrefix(name, "zidane-server") {
				return nil, &StaleDaemonFileError{Path: path, PID: d.PID, Program: name}
			}
		}
	}
	return &d, nil
}

// StaleDaemonFileError: daemon.json names a server process that is gone: the pid runs no process,
// or (Program set) it now belongs to another program. The server stopped without removing it.
type StaleDaemonFileError struct {
	// Path is the daemon.json read; PID the process it names.
	Path string
	PID  int
	// Program is the name of the other program that now has the pid; "" when none runs.
	Program string
}

// Error says the file is stale, why, and what to do.
func (e *StaleDaemonFileError) Error() string {
	now := "which is not running"
	if e.Program != "" {
		now = fmt.Sprintf("which is now another program (%s), not zidane-server", e.Program)
	}
	return fmt.Sprintf("%s is stale: it names process %d, %s; the server stopped without cleaning up. Start the server again (`make run` or `zidane-server start`; it replaces the file), or set ZIDANE_URL and ZIDANE_TOKEN", e.Path, e.PID, now)
}

// unixClient returns an HTTP client whose connections go to a unix socket, and the ws:// URL to
// dial through it.
func unixClient(url string) (*http.Client, string) {
	path := strings.TrimPrefix(url, "unix://")
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", path)
	}}
	return &http.Client{Transport: tr}, "ws://localhost/"
}

// exited reports whether pid is a process that has exited but was not reaped yet (a zombie, state
// Z or X in /proc/<pid>/stat): a server killed a moment ago whose parent has not waited for it.
// Where /proc cannot tell, the process counts as running.
func exited(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')') // the command name, in parentheses, may hold anything
	if i < 0 || i+2 >= len(b) {
		return false
	}
	return b[i+2] == 'Z' || b[i+2] == 'X'
}
