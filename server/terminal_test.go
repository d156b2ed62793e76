package server

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTerminalFlowControlKeepsTheConnection: a terminal printing 8 MB to a client that does
// not read for a while, through a 512 KiB send queue. The server stops reading the terminal while
// the queue is half full, so the program waits, the connection is never closed with 1013, and
// every byte arrives once the client reads.
func TestTerminalFlowControlKeepsTheConnection(t *testing.T) {
	e := newEnv(t, func(c *Config) {
		c.ProjectTerminals = true
		c.Limits.MaxMessageBytes = 256 << 10
		c.Limits.SendQueueBytes = 512 << 10
	})
	e.token = e.mint("admin")
	c := e.dialSmallBuffer()
	c.send(`{"jsonrpc":"2.0","id":1,"method":"ipc.hello","params":` + helloParams + `}`)
	c.send(`{"jsonrpc":"2.0","id":2,"method":"terminal.start","params":{"argv":["sh","-c","head -c 8000000 /dev/zero | tr '\\0' x; echo; echo END"]}}`)
	time.Sleep(2 * time.Second) // the client reads nothing meanwhile
	c.startReader()
	total, id := 0, ""
	for {
		f := c.next()
		m := decodeObj(t, f)
		if m["id"] != nil {
			require.Nil(t, m["error"], "%s", f)
			if r, _ := m["result"].(map[string]any); r != nil && r["terminalId"] != nil {
				id = r["terminalId"].(string)
			}
			continue
		}
		p := m["params"].(map[string]any)
		require.Equal(t, id, p["terminalId"], "the answer comes before the terminal's first signal")
		if p["kind"] == "workspace:exec:exit" {
			assert.Equal(t, json.Number("0"), p["exitCode"])
			break
		}
		data := p["data"].(string)
		total += strings.Count(data, "x")
	}
	assert.Equal(t, 8000000, total, "every byte arrived")
	r := c.result("$/ping", `{}`)
	assert.NotNil(t, r["now"], "the connection is still open")
}

// TestGitWatchersReleased: one ref watcher per watched repository, closed once no
// connection watches it (after git.unwatch, or when the connection drops).
func TestGitWatchersReleased(t *testing.T) {
	e := newEnv(t, nil)
	dir := e.srv.ws.Roots()[0]
	gitIn(t, dir, "init", "-q", "-b", "main")
	gitIn(t, dir, "commit", "-q", "--allow-empty", "-m", "x")
	watchers := func() int {
		e.srv.gitMu.Lock()
		defer e.srv.gitMu.Unlock()
		return len(e.srv.refWatchers)
	}
	cwd := fmt.Sprintf(`{"cwd":%q}`, dir)
	a, b := e.dial(), e.dial()
	a.hello()
	b.hello()
	a.result("git.watch", cwd)
	b.result("git.watch", cwd)
	assert.Equal(t, 1, watchers(), "one watcher for one repository")
	a.result("git.unwatch", cwd)
	assert.Equal(t, 1, watchers(), "b still watches")
	require.NoError(t, b.ws.CloseNow())
	require.Eventually(t, func() bool { return watchers() == 0 }, 5*time.Second, 20*time.Millisecond, "the dropped connection's watch released the watcher")
}

// TestTerminalLimitHoldsUnderPipelinedStarts (a break-it report): terminal.start counted the
// connection's terminals and added its own only after starting it, so 40 starts pipelined on one
// connection ran 17 terminals, past maxTerminalsPerConn (16). Now a start reserves its place
// before it runs the program.
func TestTerminalLimitHoldsUnderPipelinedStarts(t *testing.T) {
	e := newEnv(t, func(c *Config) {
		c.ProjectTerminals = true
		// A slow start (as under a sandbox policy) keeps the concurrent starts between their
		// check and their program's start together.
		c.TerminalPrepare = func(*exec.Cmd) error { time.Sleep(50 * time.Millisecond); return nil }
	})
	e.token = e.mint("admin")
	c := e.dial()
	c.hello()
	const n = 40
	for i := 0; i < n; i++ {
		c.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"terminal.start","params":{"argv":["sleep","30"]}}`, 1000+i))
	}
	ok, refused := 0, 0
	for ok+refused < n {
		m := decodeObj(t, c.next())
		if m["id"] == nil {
			continue // a signal
		}
		if m["error"] != nil {
			assert.Contains(t, m["error"].(map[string]any)["message"], "terminals; end one first")
			refused++
		} else {
			ok++
		}
	}
	assert.Equal(t, maxTerminalsPerConn, ok, "at most maxTerminalsPerConn run at once")
	assert.Len(t, c.result("terminal.list", `{}`)["terminals"], ok)
}

// A NUL in terminal.start's argv is InvalidParams naming the argument (break-it: it was -32014
// "fork/exec …: invalid argument").
func TestTerminalArgvNULIsInvalidParams(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.ProjectTerminals = true })
	e.token = e.mint("admin")
	c := e.dial()
	c.hello()
	m := c.call("terminal.start", `{"argv":["/bin/echo","a\u0000b"]}`)
	er, _ := m["error"].(map[string]any)
	require.NotNil(t, er, "%v", m)
	assert.Equal(t, "-32602", fmt.Sprint(er["code"]))
	assert.Contains(t, er["message"], "params/argv/1: an argument cannot hold a NUL character.")
	assert.Equal(t, "/argv/1", er["data"].(map[string]any)["pointer"])
}
