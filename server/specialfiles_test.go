package server

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zidane-server/zidane/server/agent"
	"github.com/zidane-server/zidane/server/agent/tools"
)

// Files that are not files (issue 21, field cases T09 and T11): a real Server on a real Postgres
// over a real WebSocket, the model played by the scripted provider.

// mkfifo makes a named pipe at path and, at the test's end, opens it for writing without blocking
// once, so a reader still blocked in open(2) (old code) is let go.
func mkfifo(t *testing.T, path string) {
	t.Helper()
	require.NoError(t, syscall.Mkfifo(path, 0o644))
	t.Cleanup(func() { releaseFIFO(path) })
}

func releaseFIFO(path string) {
	if fd, err := syscall.Open(path, syscall.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
		syscall.Close(fd)
	}
}

// stuckTool is a read tool whose Run blocks in the kernel, ignoring its context: an open(2) of a
// FIFO without O_NONBLOCK, which waits for a writer.
type stuckTool struct {
	fifo    string
	entered chan struct{} // closed when Run is about to block
}

func (s stuckTool) Spec() tools.Spec {
	return tools.Spec{Name: "stuck", Description: "blocks in open(2)", InputSchema: json.RawMessage(`{"type":"object"}`)}
}
func (stuckTool) Kind() tools.Kind { return tools.KindRead }
func (stuckTool) Check(context.Context, *tools.Env, json.RawMessage) (*tools.Call, error) {
	return &tools.Call{Summary: "stuck"}, nil
}
func (s stuckTool) Run(context.Context, *tools.Env, json.RawMessage) (*tools.Result, error) {
	close(s.entered)
	fd, err := syscall.Open(s.fifo, syscall.O_RDONLY, 0)
	if err == nil {
		syscall.Close(fd)
	}
	return &tools.Result{Content: "unblocked"}, nil
}

// timedRun sends prompt and returns its run:end and how long it took.
func timedRun(c *testConn, sid, prompt string) (map[string]any, time.Duration) {
	start := time.Now()
	c.prompt(sid, prompt)
	end := c.runEnd(sid)
	return end, time.Since(start)
}

// TestFieldCase_T09_SpecialFilesNeverHang: named pipes (and a socket) in the root. read_file,
// grep and list_dir on them answer at once with a clear error; write_file and edit_file on a FIFO
// fail before any approval; a media GET on one answers at once; a tool blocked in the kernel
// does not block chat.cancel (run:end within a second) and the session stays usable (a next
// prompt runs, the session can be deleted).
func TestFieldCase_T09_SpecialFilesNeverHang(t *testing.T) {
	var e *agentEnv
	e = newAgentEnv(t, script(t,
		[]string{toolStep("read_file", `{"path":"pipe.txt"}`), toolStep("grep", `{"pattern":"x","path":"pipe.txt"}`),
			toolStep("list_dir", `{"path":"pipe.txt"}`), toolStep("read_file", `{"path":"s.sock"}`)},
		[]string{textStep("read done")},
		[]string{toolStep("write_file", `{"path":"fifo2.txt","content":"x"}`), toolStep("edit_file", `{"path":"pipe.txt","old":"a","new":"b"}`)},
		[]string{textStep("write done")},
		[]string{toolStep("stuck", `{}`)},
		[]string{textStep("still here")},
	), nil)
	ws := e.L.WS
	for _, n := range []string{"pipe.txt", "pipe.png", "fifo2.txt", "stuck.fifo"} {
		mkfifo(t, filepath.Join(ws, n))
	}
	ln, err := net.Listen("unix", filepath.Join(ws, "s.sock"))
	require.NoError(t, err)
	defer ln.Close()
	stuck := stuckTool{fifo: filepath.Join(ws, "stuck.fifo"), entered: make(chan struct{})}
	e.srv.tools.Registry = tools.NewRegistry(append(allTools(), stuck)...)

	c := e.dial()
	c.hello()
	sid := c.newSession()
	t0 := time.Now()
	defer func() { t.Logf("test body %s", time.Since(t0)) }()

	// (a) Reads: each call answers at once with what the file is.
	end, took := timedRun(c, sid, "read the pipe")
	t.Logf("4 reads of special files: run:end in %s", took.Round(time.Millisecond))
	require.Equal(t, true, end["ok"], "%v", end)
	assert.Less(t, took, 3*time.Second*raceSlowdown)
	trs := c.toolResults(sid)
	require.Len(t, trs, 4)
	for i, want := range []string{`"pipe.txt" is a named pipe, not a regular file`, `"pipe.txt" is a named pipe, not a regular file`, `"pipe.txt" is not a folder`, `"s.sock" is a socket, not a regular file`} {
		assert.Equal(t, true, trs[i]["isError"], "%v", trs[i])
		assert.Contains(t, trs[i]["text"], want)
	}

	// (d) Writes: refused before any approval request (the session asks for edits).
	end, took = timedRun(c, sid, "write the pipe")
	t.Logf("2 writes of special files: run:end in %s", took.Round(time.Millisecond))
	require.Equal(t, true, end["ok"], "%v", end)
	trs = c.toolResults(sid)[4:]
	require.Len(t, trs, 2)
	assert.Contains(t, trs[0]["text"], `"fifo2.txt" is a named pipe, not a regular file`)
	assert.Contains(t, trs[1]["text"], `"pipe.txt" is a named pipe, not a regular file`)
	fi, err := os.Lstat(filepath.Join(ws, "fifo2.txt"))
	require.NoError(t, err)
	assert.Equal(t, os.ModeNamedPipe, fi.Mode().Type(), "the FIFO is left as it was")

	// (e) Media: every GET of a FIFO answers at once, none stays blocked.
	ticket := randomTicket(t)
	c.result("files.mediaTicket", fmt.Sprintf(`{"ticket":%q}`, ticket))
	hc := &http.Client{Timeout: 3 * time.Second}
	start := time.Now()
	var wg sync.WaitGroup
	codes := make([]int, 20)
	for i := range codes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := hc.Get(e.hs.URL + "/zidane/media?" + mq(ticket, "", "pipe.png"))
			if err != nil {
				codes[i] = -1
				return
			}
			resp.Body.Close()
			codes[i] = resp.StatusCode
		}()
	}
	wg.Wait()
	t.Logf("20 media GETs of a FIFO: answered in %s", time.Since(start).Round(time.Millisecond))
	for _, code := range codes {
		assert.Equal(t, http.StatusNotFound, code, "a FIFO is not served, and the answer comes at once")
	}

	// (b) A tool blocked in the kernel: chat.cancel ends the run within a second.
	c.prompt(sid, "get stuck")
	select {
	case <-stuck.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the stuck tool did not run")
	}
	start = time.Now()
	assert.Equal(t, true, c.result("chat.cancel", fmt.Sprintf(`{"sessionId":%q}`, sid))["cancelled"])
	end = c.runEnd(sid)
	took = time.Since(start)
	t.Logf("cancel of a tool blocked in open(2) → run:end in %s", took.Round(time.Millisecond))
	assert.Equal(t, false, end["ok"])
	assert.Less(t, took, time.Second*raceSlowdown, "docs/security.md: a cancel stops a run within a second")
	trs = c.toolResults(sid)
	require.Len(t, trs, 7)
	assert.Contains(t, trs[6]["text"], "cancelled")
	assert.Contains(t, trs[6]["text"], "abandoned")
	assert.Equal(t, int64(1), agent.AbandonedTools())

	t.Log("cancel checked")
	// (c) The session is usable: a next prompt runs, then the session is deleted.
	end, _ = timedRun(c, sid, "again")
	assert.Equal(t, true, end["ok"], "%v", end)
	c.result("sessions.delete", fmt.Sprintf(`{"sessionId":%q}`, sid))

	t.Log("session usable")
	// The abandoned call returns once the FIFO gets a writer, and is counted off.
	releaseFIFO(filepath.Join(ws, "stuck.fifo"))
	require.Eventually(t, func() bool { return agent.AbandonedTools() == 0 }, 5*time.Second, 5*time.Millisecond)
}

// TestFieldCase_T09_FilesSearchSkipsFIFOs: the second variant, over files.* and the walking
// tools: a FIFO named .gitignore (read by every walk) and FIFOs among the files leave
// files.search, grep and glob answering at once.
func TestFieldCase_T09_FilesSearchSkipsFIFOs(t *testing.T) {
	e := newAgentEnv(t, script(t,
		[]string{toolStep("grep", `{"pattern":"needle","path":"sub"}`), toolStep("glob", `{"pattern":"**","path":"sub"}`)},
		[]string{textStep("done")},
	), nil)
	sub := filepath.Join(e.L.WS, "sub")
	mkfifo(t, filepath.Join(sub, ".gitignore"))
	mkfifo(t, filepath.Join(sub, "pipe.txt"))
	require.NoError(t, os.WriteFile(filepath.Join(sub, "a.txt"), []byte("a needle\n"), 0o644))
	c := e.dial()
	c.hello()
	start := time.Now()
	r := c.result("files.search", fmt.Sprintf(`{"cwd":%q,"pattern":"needle"}`, sub))
	t.Logf("files.search beside FIFOs: %s", time.Since(start).Round(time.Millisecond))
	ms := r["matches"].([]any)
	require.Len(t, ms, 1)
	assert.Equal(t, "a.txt", ms[0].(map[string]any)["path"])

	sid := c.newSession()
	end, took := timedRun(c, sid, "search")
	t.Logf("grep and glob beside FIFOs: run:end in %s", took.Round(time.Millisecond))
	require.Equal(t, true, end["ok"], "%v", end)
	trs := c.toolResults(sid)
	require.Len(t, trs, 2)
	assert.Contains(t, trs[0]["text"], "sub/a.txt:1:a needle")
	assert.Contains(t, trs[1]["text"], "sub/a.txt")
	assert.NotContains(t, trs[1]["text"], "pipe.txt", "glob lists regular files")
}

// allTools is the default registry's tools.
func allTools() []tools.Tool {
	var out []tools.Tool
	all := tools.All()
	for _, n := range all.Names() {
		tl, _ := all.Get(n)
		out = append(out, tl)
	}
	return out
}

// peakRSSGrowth resets the process's peak RSS (/proc/self/clear_refs "5"), runs f and returns
// how far the peak rose above the RSS at the start, in bytes, and the bytes allocated meanwhile.
func peakRSSGrowth(t *testing.T, f func()) (rss, alloc uint64) {
	t.Helper()
	debug.FreeOSMemory()
	require.NoError(t, os.WriteFile("/proc/self/clear_refs", []byte("5"), 0), "resetting the peak RSS")
	base := procStatus(t, "VmRSS")
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	f()
	runtime.ReadMemStats(&m1)
	peak := procStatus(t, "VmHWM")
	if peak < base {
		peak = base
	}
	return peak - base, m1.TotalAlloc - m0.TotalAlloc
}

// procStatus reads a kB field of /proc/self/status, in bytes.
func procStatus(t *testing.T, field string) uint64 {
	t.Helper()
	f, err := os.Open("/proc/self/status")
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			n, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			require.NoError(t, err)
			return n << 10
		}
	}
	t.Fatalf("no %s in /proc/self/status", field)
	return 0
}

// writeShape writes size bytes of b repeated to path, in 1 MiB pieces (so the test itself does
// not hold the file in memory).
func writeShape(t *testing.T, path string, b byte, size int) {
	t.Helper()
	f, err := os.Create(path)
	require.NoError(t, err)
	chunk := []byte(strings.Repeat(string(b), 1<<20))
	for n := 0; n < size; n += len(chunk) {
		_, err := f.Write(chunk)
		require.NoError(t, err)
	}
	require.NoError(t, f.Close())
}

// memBound is what one turn of the calls below may add to the server's peak memory (RSS) and
// allocate: a few MiB of buffers and output, never the file's size.
const memBound = 16 << 20

// TestFieldCase_T11_ReadFileMemoryBounded: 64 MiB of newlines, one turn with 4 read_file
// {offset 1, limit 1} calls: the answer says "[lines 1-1 shown of 67108864 …]" and the server's
// peak RSS and its allocations grow by a few MiB, not by 600 MiB a call.
func TestFieldCase_T11_ReadFileMemoryBounded(t *testing.T) {
	call := toolStep("read_file", `{"path":"newlines.txt","offset":1,"limit":1}`)
	e := newAgentEnv(t, script(t, []string{call, call, call, call}, []string{textStep("done")}), nil)
	writeShape(t, filepath.Join(e.L.WS, "newlines.txt"), '\n', 64<<20)
	trs := boundedRun(t, e, "4 × read_file of 64 MiB of newlines")
	require.Len(t, trs, 4)
	for _, tr := range trs {
		assert.Equal(t, "     1\t\n[lines 1-1 shown of 67108864; read on with offset 2]\n", tr["text"])
	}
}

// boundedRun runs one prompt in a new session of e, checks that it ended ok within memBound of
// peak RSS growth and allocations, and returns the tool results.
func boundedRun(t *testing.T, e *agentEnv, what string) []map[string]any {
	t.Helper()
	c := e.dial()
	c.hello()
	sid := c.newSession()
	var end map[string]any
	var took time.Duration
	rss, alloc := peakRSSGrowth(t, func() { end, took = timedRun(c, sid, "read") })
	t.Logf("%s: %s, peak RSS +%d MiB, allocated %d MiB", what, took.Round(time.Millisecond), rss>>20, alloc>>20)
	require.Equal(t, true, end["ok"], "%v", end)
	assert.Less(t, rss, uint64(memBound), "peak RSS growth")
	assert.Less(t, alloc, uint64(memBound), "bytes allocated")
	return c.toolResults(sid)
}

// TestFieldCase_T11_OneLongLineMemoryBounded: the second variant, a file of one 32 MiB line,
// read by read_file, and one of 2 MiB searched by grep (its file bound raised past the file, the
// 64 MiB of newlines too): all stay within the same bound (a long line is matched as a stream
// and only its start kept).
func TestFieldCase_T11_OneLongLineMemoryBounded(t *testing.T) {
	e := newAgentEnv(t, script(t,
		[]string{toolStep("read_file", `{"path":"line.txt","offset":1,"limit":1}`), toolStep("grep", `{"pattern":"xy$","path":"grepline.txt"}`),
			toolStep("grep", `{"pattern":"^$","path":"newlines.txt","max_results":2}`)},
		[]string{textStep("done")},
	), func(c *Config) { c.Tools.GrepMaxFileBytes, c.Tools.ReadMaxBytes = 128<<20, 16<<10 })
	for name, size := range map[string]int{"line.txt": 32 << 20, "grepline.txt": 2 << 20} {
		writeShape(t, filepath.Join(e.L.WS, name), 'x', size)
		f, err := os.OpenFile(filepath.Join(e.L.WS, name), os.O_APPEND|os.O_WRONLY, 0)
		require.NoError(t, err)
		_, err = f.WriteString("y\n")
		require.NoError(t, err)
		require.NoError(t, f.Close())
	}
	writeShape(t, filepath.Join(e.L.WS, "newlines.txt"), '\n', 64<<20)
	trs := boundedRun(t, e, "read_file of a 32 MiB line, grep of a 2 MiB line and of 64 MiB of newlines")
	require.Len(t, trs, 3)
	read := trs[0]["text"].(string)
	assert.True(t, strings.HasPrefix(read, "     1\txxxx"), "the line's start is shown")
	assert.True(t, strings.HasSuffix(read, "\n[output cut at 16384 bytes: line 1 is 33554433 bytes long and only its start is shown; 1 lines in all]\n"), "%.100s", read[max(0, len(read)-200):])
	assert.LessOrEqual(t, len(read), 16384+200)
	assert.Contains(t, trs[1]["text"], "grepline.txt:1:xxxx")
	assert.Contains(t, trs[1]["text"], "[line cut]")
	assert.Contains(t, trs[2]["text"], "newlines.txt:1:\nnewlines.txt:2:\n")
}

// TestFieldCase_T09_GitAlternatesFIFO: a variant through the server's own reads: a repository
// whose objects/info/alternates is a named pipe. git.log and a media GET of its work tree's side
// answer at once (the check of borrowed object stores reads through the confinement point).
func TestFieldCase_T09_GitAlternatesFIFO(t *testing.T) {
	root := realDir(t)
	repo := filepath.Join(root, "r")
	out, err := exec.Command("git", "init", "-q", repo).CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.NoError(t, os.WriteFile(filepath.Join(repo, "p.png"), pngBytes(t), 0o644))
	mkfifo(t, filepath.Join(repo, ".git", "objects", "info", "alternates"))
	e, c := filesEnv(t, root, nil)
	start := time.Now()
	m := c.call("git.log", fmt.Sprintf(`{"cwd":%q}`, repo))
	require.Equal(t, -32014, errCode(m), "%v", m)
	assert.Contains(t, errMsg(m), "outside the workspace roots", "an unreadable alternates is refused, not guessed")
	ticket := randomTicket(t)
	c.result("files.mediaTicket", fmt.Sprintf(`{"ticket":%q}`, ticket))
	resp, _ := mediaGet(t, e.hs, mq(ticket, repo, "p.png", "side=new"), nil)
	assert.Equal(t, 404, resp.StatusCode)
	t.Logf("git.log and a media GET beside a FIFO alternates: %s", time.Since(start).Round(time.Millisecond))
	assert.Less(t, time.Since(start), 5*time.Second*raceSlowdown)
}

// TestFieldCase_T09_WallTimeEndsStuckTool: the run's limits end a run whose tool is blocked in
// the kernel as a cancel does: --max-run-time 1 s, a tool stuck in open(2), run:end (not ok,
// saying the limit) within the limit and the grace.
func TestFieldCase_T09_WallTimeEndsStuckTool(t *testing.T) {
	e := newAgentEnv(t, script(t, []string{toolStep("stuck", `{}`)}, []string{textStep("never")}), func(c *Config) {
		c.RunLimits.MaxWallTime = time.Second
	})
	stuck := stuckTool{fifo: filepath.Join(e.L.WS, "stuck.fifo"), entered: make(chan struct{})}
	mkfifo(t, stuck.fifo)
	e.srv.tools.Registry = tools.NewRegistry(append(allTools(), stuck)...)
	c := e.dial()
	c.hello()
	sid := c.newSession()
	end, took := timedRun(c, sid, "get stuck")
	t.Logf("a tool blocked in open(2) under a 1 s run limit: run:end in %s", took.Round(time.Millisecond))
	assert.Equal(t, false, end["ok"])
	assert.Contains(t, end["error"], "limit of 1s per run")
	assert.Less(t, took, 2*time.Second*raceSlowdown)
	trs := c.toolResults(sid)
	require.Len(t, trs, 1)
	assert.Contains(t, trs[0]["text"], "time limit")
	assert.Contains(t, trs[0]["text"], "abandoned")
	releaseFIFO(stuck.fifo)
	require.Eventually(t, func() bool { return agent.AbandonedTools() == 0 }, 5*time.Second, 5*time.Millisecond)
}
