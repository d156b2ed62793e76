package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zidane-server/zidane/protocol"
	"github.com/zidane-server/zidane/server/store/storetest"
)

// termOutput collects a terminal's workspace:exec:data on c until until holds for the text
// so far, or its workspace:exec:exit arrives (returned, else nil).
func termOutput(c *wsConn, id string, until func(string) bool) (string, map[string]any) {
	c.t.Helper()
	var text strings.Builder
	deadline := time.Now().Add(waitTimeout)
	for {
		f := c.next(time.Until(deadline))
		if f.Method != "ipc.signal" {
			continue
		}
		m := parseParams(c.t, f.Params)
		if m["terminalId"] != id {
			continue
		}
		switch m["kind"] {
		case "workspace:exec:data":
			text.WriteString(m["data"].(string))
			if until != nil && until(text.String()) {
				return text.String(), nil
			}
		case "workspace:exec:exit":
			return text.String(), m
		}
	}
}

func parseParams(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m))
	return m
}

func contains(s string) func(string) bool {
	return func(x string) bool { return strings.Contains(x, s) }
}

// processGone tells whether pid has ended (not running, or a zombie nobody reaped yet).
func processGone(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return true
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i > 0 && strings.HasPrefix(strings.TrimSpace(s[i+1:]), "Z")
}

func TestTerminalPrintfReadResizeExitAndDrop(t *testing.T) {
	s := startServer(t, serverOpts{dbURL: storetest.URL(t), extra: []string{"--project-terminals"}})
	chat := dial(t, s, s.mintToken("term-chat", "chat"))
	chat.hello()
	e := chat.callErr("terminal.start", map[string]any{"argv": []string{"true"}})
	assert.Equal(t, protocol.CodeForbidden, e.Code, "terminals need an admin token")

	a := dial(t, s, s.mintToken("term-a", "admin"))
	var h struct {
		ProjectTerminals *bool `json:"projectTerminals"`
	}
	a.result("ipc.hello", map[string]any{"protocolVersion": protoVersion}, &h)
	require.NotNil(t, h.ProjectTerminals)
	assert.True(t, *h.ProjectTerminals)
	b := dial(t, s, s.mintToken("term-b", "admin"))
	b.hello()

	// printf and read: the typed input is echoed, the exit code comes back.
	var st protocol.TerminalStartResult
	a.result("terminal.start", map[string]any{"argv": []string{"sh", "-c", `printf 'name? '; read x; printf 'hi %s\n' "$x"; exit 3`}}, &st)
	out, _ := termOutput(a, st.TerminalID, contains("name? "))
	a.result("terminal.input", map[string]any{"terminalId": st.TerminalID, "data": "ada\r"}, nil)
	more, exit := termOutput(a, st.TerminalID, nil)
	out += more
	assert.Contains(t, out, "name? ada", "the terminal echoes the input")
	assert.Contains(t, out, "hi ada")
	require.NotNil(t, exit)
	assert.EqualValues(t, 3, exit["exitCode"])
	assert.Nil(t, exit["signal"])
	e = a.callErr("terminal.input", map[string]any{"terminalId": st.TerminalID, "data": "x"})
	assert.Equal(t, protocol.CodeHandlerFailed, e.Code)

	// A resize seen by stty size.
	a.result("terminal.start", map[string]any{"argv": []string{"sh", "-c", `stty size; read x; stty size`}, "cols": 100, "rows": 30, "cwd": s.opts.root}, &st)
	termOutput(a, st.TerminalID, contains("30 100"))
	var rs protocol.TerminalResizeResult
	a.result("terminal.resize", map[string]any{"terminalId": st.TerminalID, "cols": 132, "rows": 43}, &rs)
	a.result("terminal.input", map[string]any{"terminalId": st.TerminalID, "data": "\r"}, nil)
	out, exit = termOutput(a, st.TerminalID, nil)
	assert.Contains(t, out, "43 132")
	require.NotNil(t, exit)
	assert.EqualValues(t, 0, exit["exitCode"])

	// A shell with a background job; another connection cannot touch it.
	a.result("terminal.start", map[string]any{"argv": []string{"bash", "--norc", "--noprofile", "-i"}}, &st)
	a.result("terminal.input", map[string]any{"terminalId": st.TerminalID, "data": "sleep 300 & echo JOB=$!\r"}, nil)
	jobRE := regexp.MustCompile(`JOB=(\d+)`)
	out, _ = termOutput(a, st.TerminalID, func(x string) bool { return jobRE.MatchString(x) })
	job, err := strconv.Atoi(jobRE.FindStringSubmatch(out)[1])
	require.NoError(t, err)
	shell := int(st.PID)
	require.False(t, processGone(shell))
	require.False(t, processGone(job))
	var list protocol.TerminalListResult
	a.result("terminal.list", map[string]any{}, &list)
	require.Len(t, list.Terminals, 1)
	assert.Equal(t, st.PID, list.Terminals[0].PID)
	b.result("terminal.list", map[string]any{}, &list)
	assert.Empty(t, list.Terminals, "another connection's terminals are not listed")
	e = b.callErr("terminal.input", map[string]any{"terminalId": st.TerminalID, "data": "exit\r"})
	assert.Equal(t, protocol.CodeHandlerFailed, e.Code)
	// terminal.kill of another connection's terminal is HandlerFailed, as schema/terminal.json
	// says, worded as for an id that names no terminal.
	e = b.callErr("terminal.kill", map[string]any{"terminalId": st.TerminalID})
	assert.Equal(t, protocol.CodeHandlerFailed, e.Code)
	assert.Contains(t, e.Message, "No running terminal")
	require.False(t, processGone(shell), "another connection's kill touched nothing")
	var k protocol.TerminalKillResult
	b.result("terminal.kill", map[string]any{"terminalId": "no-such-terminal"}, &k)
	assert.False(t, k.Killed, "an id that names no running terminal (ended, or never started) answers killed:false")

	// The connection drops: the shell and its job are gone.
	require.NoError(t, a.ws.CloseNow())
	require.Eventually(t, func() bool { return processGone(shell) && processGone(job) }, 10*time.Second, 50*time.Millisecond, "shell %d and job %d must be gone after the connection dropped", shell, job)

	// The second connection received no terminal signal of the first.
	b.result("$/ping", map[string]any{}, nil)
	assert.Empty(t, signalsOf(b, 300*time.Millisecond, "workspace:exec"))
}

func TestTerminalKillAndSignal(t *testing.T) {
	s := startServer(t, serverOpts{dbURL: storetest.URL(t), extra: []string{"--project-terminals"}})
	a := dial(t, s, s.mintToken("kill-a", "admin"))
	a.hello()
	var st protocol.TerminalStartResult
	a.result("terminal.start", map[string]any{"argv": []string{"sleep", "300"}}, &st)
	var k protocol.TerminalKillResult
	a.result("terminal.kill", map[string]any{"terminalId": st.TerminalID, "signal": "SIGTERM"}, &k)
	assert.True(t, k.Killed)
	_, exit := termOutput(a, st.TerminalID, nil)
	require.NotNil(t, exit)
	assert.Equal(t, "SIGTERM", exit["signal"])
	assert.Nil(t, exit["exitCode"])
	e := a.callErr("terminal.start", map[string]any{"argv": []string{"no-such-program-zidane"}})
	assert.Contains(t, e.Message, "no-such-program-zidane")
	e = a.callErr("terminal.start", map[string]any{"cwd": "/", "argv": []string{"true"}})
	assert.Contains(t, e.Message, "outside the workspace roots")

	// A server that stops takes its terminals with it.
	a.result("terminal.start", map[string]any{"argv": []string{"sleep", "300"}}, &st)
	require.False(t, processGone(int(st.PID)))
	s.stop()
	assert.True(t, processGone(int(st.PID)), "the terminal ended before the server exited")
}

// TestTerminalUnderSandboxPolicy: with --terminal-sandbox workspace-write a terminal writes inside
// the workspace roots but not elsewhere, and does not see the server's data dir.
func TestTerminalUnderSandboxPolicy(t *testing.T) {
	outside := t.TempDir()
	s := startServer(t, serverOpts{dbURL: storetest.URL(t), extra: []string{"--project-terminals", "--terminal-sandbox", "workspace-write"}})
	a := dial(t, s, s.mintToken("sb-admin", "admin"))
	a.hello()
	script := `touch inside.txt && echo INSIDE-OK; touch ` + outside + `/escaped.txt 2>/dev/null && echo OUTSIDE-WROTE || echo OUTSIDE-REFUSED; grep -q token ` + s.opts.dataDir + `/daemon.json 2>/dev/null && echo DAEMON-READ || echo DAEMON-HIDDEN`
	var st protocol.TerminalStartResult
	a.result("terminal.start", map[string]any{"argv": []string{"sh", "-c", script}, "cwd": s.opts.root}, &st)
	out, exit := termOutput(a, st.TerminalID, nil)
	require.NotNil(t, exit, "output: %s", out)
	assert.EqualValues(t, 0, exit["exitCode"], "output: %s", out)
	assert.Contains(t, out, "INSIDE-OK")
	assert.Contains(t, out, "OUTSIDE-REFUSED")
	assert.Contains(t, out, "DAEMON-HIDDEN", "the data dir (daemon.json's token) is hidden")
	assert.FileExists(t, filepath.Join(s.opts.dataDir, "daemon.json"))
	assert.FileExists(t, filepath.Join(s.opts.root, "inside.txt"))
	assert.NoFileExists(t, filepath.Join(outside, "escaped.txt"))
}
