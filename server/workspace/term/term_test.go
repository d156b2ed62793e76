package term

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// capture collects a terminal's output and its exit.
type capture struct {
	mu   sync.Mutex
	out  strings.Builder
	exit chan Exit
}

func newCapture() *capture { return &capture{exit: make(chan Exit, 1)} }

func (c *capture) output(s string) { c.mu.Lock(); c.out.WriteString(s); c.mu.Unlock() }
func (c *capture) exited(e Exit)   { c.exit <- e }
func (c *capture) text() string    { c.mu.Lock(); defer c.mu.Unlock(); return c.out.String() }

// waitFor waits until the output contains s.
func (c *capture) waitFor(t *testing.T, s string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(c.text(), s) {
		if time.Now().After(deadline) {
			t.Fatalf("output never contained %q; got %q", s, c.text())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (c *capture) waitExit(t *testing.T) Exit {
	t.Helper()
	select {
	case e := <-c.exit:
		return e
	case <-time.After(10 * time.Second):
		t.Fatalf("no exit; output %q", c.text())
	}
	return Exit{}
}

func TestPrintfReadEchoAndExitCode(t *testing.T) {
	c := newCapture()
	tm, err := Start(Options{Dir: t.TempDir(), Argv: []string{"sh", "-c", `printf 'name? '; read x; printf 'hello %s\n' "$x"; exit 7`}}, c.output, c.exited)
	require.NoError(t, err)
	c.waitFor(t, "name? ")
	require.NoError(t, tm.Write([]byte("ada\r")))
	c.waitFor(t, "hello ada")
	assert.Contains(t, c.text(), "name? ada", "the typed input is echoed by the terminal")
	assert.Equal(t, Exit{Code: 7}, c.waitExit(t))
	assert.ErrorIs(t, tm.Write([]byte("x")), ErrClosed)
}

func TestResizeSeenByStty(t *testing.T) {
	c := newCapture()
	tm, err := Start(Options{Dir: t.TempDir(), Argv: []string{"sh", "-c", `stty size; read x; stty size`}, Cols: 100, Rows: 30}, c.output, c.exited)
	require.NoError(t, err)
	c.waitFor(t, "30 100")
	require.NoError(t, tm.Resize(132, 43))
	require.NoError(t, tm.Write([]byte("\r")))
	c.waitFor(t, "43 132")
	assert.Equal(t, Exit{Code: 0}, c.waitExit(t))
}

func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	if err != nil {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	return err == nil && !strings.Contains(string(b), ") Z ")
}

func TestCloseKillsTheSessionAndItsJobs(t *testing.T) {
	c := newCapture()
	// An interactive shell with job control puts the background job in its own process group.
	tm, err := Start(Options{Dir: t.TempDir(), Argv: []string{"bash", "--norc", "-i"}}, c.output, c.exited)
	require.NoError(t, err)
	require.NoError(t, tm.Write([]byte("sleep 300 & echo JOB=$!\r")))
	c.waitFor(t, "JOB=")
	var job int
	jobRE := regexp.MustCompile(`JOB=(\d+)`)
	require.Eventually(t, func() bool {
		m := jobRE.FindStringSubmatch(c.text())
		if m == nil {
			return false
		}
		job, _ = strconv.Atoi(m[1])
		return true
	}, 5*time.Second, 20*time.Millisecond)
	assert.True(t, alive(job))
	assert.Contains(t, SessionMembers(tm.Pid()), job)
	tm.Close()
	assert.Eventually(t, func() bool { return !alive(job) && !alive(tm.Pid()) }, 5*time.Second, 20*time.Millisecond, "the shell and its job are gone")
	e := c.waitExit(t)
	assert.Equal(t, "SIGKILL", e.Signal)
	assert.Equal(t, -1, e.Code)
}

func TestFlowControlBlocksTheProgram(t *testing.T) {
	gate := make(chan struct{})
	var mu sync.Mutex
	total := 0
	exit := make(chan Exit, 1)
	tm, err := Start(Options{Dir: t.TempDir(), Argv: []string{"sh", "-c", `head -c 4000000 /dev/zero | tr '\0' x; echo; echo END`}},
		func(s string) {
			<-gate
			mu.Lock()
			total += len(s)
			mu.Unlock()
		}, func(e Exit) { exit <- e })
	require.NoError(t, err)
	// While output is not taken, the program cannot finish: it blocks writing to the terminal.
	select {
	case <-exit:
		t.Fatal("the program finished while its output was held")
	case <-time.After(500 * time.Millisecond):
	}
	close(gate)
	select {
	case e := <-exit:
		assert.Equal(t, 0, e.Code)
	case <-time.After(20 * time.Second):
		t.Fatal("no exit after the output was released")
	}
	mu.Lock()
	defer mu.Unlock()
	assert.GreaterOrEqual(t, total, 4000000)
	tm.Close()
}

func TestCleanEnvHasNoServerSecrets(t *testing.T) {
	t.Setenv("DATABASE_URL", "postgres://secret")
	c := newCapture()
	_, err := Start(Options{Dir: t.TempDir(), Argv: []string{"sh", "-c", `env; echo DONE`}}, c.output, c.exited)
	require.NoError(t, err)
	c.waitExit(t)
	assert.NotContains(t, c.text(), "secret")
	assert.Contains(t, c.text(), "TERM=xterm-256color")
}

func TestUTF8SplitAcrossReadsStaysWhole(t *testing.T) {
	assert.Equal(t, 3, completeUTF8([]byte("abc")))
	assert.Equal(t, 1, completeUTF8([]byte("a\xe2\x82")))     // "€" cut after 2 of 3 bytes
	assert.Equal(t, 4, completeUTF8([]byte("a\xe2\x82\xac"))) // whole
	assert.Equal(t, 2, completeUTF8([]byte("a\xff")))         // invalid: not held
}
