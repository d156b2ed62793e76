package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zidane-server/zidane/client/clienttest"
	"github.com/zidane-server/zidane/server/store/storetest"
)

// cliProc is a running zidane CLI.
type cliProc struct {
	t      *testing.T
	cmd    *exec.Cmd
	stdout *syncBuf
	stderr *syncBuf
	done   chan struct{}
	code   int
}

// startCLI starts the real zidane binary with ZIDANE_URL=url and ZIDANE_TOKEN=tok.
func startCLI(t *testing.T, url, tok string, args ...string) *cliProc {
	t.Helper()
	return startCLIWith(t, url, tok, nil, args...)
}

// startCLIWith is startCLI with setup, when not nil, changing the command before it starts (its
// stdin, or a terminal for its stdin and stderr).
func startCLIWith(t *testing.T, url, tok string, setup func(*exec.Cmd), args ...string) *cliProc {
	t.Helper()
	p := &cliProc{t: t, stdout: &syncBuf{}, stderr: &syncBuf{}, done: make(chan struct{})}
	p.cmd = exec.Command(cliBin, args...)
	p.cmd.Env = env(false, "ZIDANE_URL="+url, "ZIDANE_TOKEN="+tok)
	p.cmd.Stdout, p.cmd.Stderr = p.stdout, p.stderr
	if setup != nil {
		setup(p.cmd)
	}
	require.NoError(t, p.cmd.Start())
	go func() {
		err := p.cmd.Wait()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			p.code = ee.ExitCode()
		} else if err != nil {
			p.code = -1
		}
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			p.cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("zidane stdout:\n%s\nzidane stderr:\n%s", p.stdout.String(), p.stderr.String())
		}
	})
	return p
}

// wait waits for the CLI to exit within d and returns its exit code.
func (p *cliProc) wait(d time.Duration) int {
	p.t.Helper()
	select {
	case <-p.done:
		return p.code
	case <-time.After(d):
		p.t.Fatalf("zidane did not exit within %s", d)
	}
	return 0
}

var sessionLine = regexp.MustCompile(`session ([0-9a-f-]{36})`)

// session waits for the CLI's "session ID" line on stderr.
func (p *cliProc) session() string {
	p.t.Helper()
	var sid string
	require.Eventually(p.t, func() bool {
		m := sessionLine.FindStringSubmatch(p.stderr.String())
		if m != nil {
			sid = m[1]
		}
		return m != nil
	}, waitTimeout, 5*time.Millisecond, "no session line; stderr: %s", p.stderr.String())
	return sid
}

// watchSignal waits on a watcher connection for a signal of kind whose sessionId or runId is id,
// and returns its params.
func watchSignal(t *testing.T, c *wsConn, kind, id string) (signal, map[string]any) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for {
		f := c.next(time.Until(deadline))
		var s signal
		if f.Method == "ipc.signal" && json.Unmarshal(f.Params, &s) == nil && s.Kind == kind && (s.SessionID == id || s.RunID == id) {
			var m map[string]any
			require.NoError(t, json.Unmarshal(f.Params, &m))
			return s, m
		}
	}
}

// scriptedAnswer is the whole text the scripted provider answers to prompt, as the CLI prints it.
func scriptedAnswer(prompt string) string {
	n := len(strings.Fields(prompt))
	return "Hello! Let me look that up.\nThe lookup found: " + strconv.Itoa(n) + " word(s) in " + strconv.Quote(prompt) + "; the scripted agent is ready.\n"
}

// TestCLISurvivesADroppedConnection (issue 7, "must show"): the server's side of the CLI's
// connection is reset twice while the prompt runs (a real TCP drop, not a restart); the CLI
// reconnects, resumes, finishes and prints the whole answer exactly once. With --json every
// $seq of its run comes once, in order.
func TestCLISurvivesADroppedConnection(t *testing.T) {
	s := startServer(t, serverOpts{dbURL: storetest.URL(t), extra: []string{"--scripted-step-delay", "250ms"}})
	tok := s.mintToken("cli-drop", "chat")
	px := clienttest.Start(t, s.addr)
	const prompt = "Survive the drop."

	cli := startCLI(t, px.URL(), tok, "-c", prompt)
	require.Eventually(t, func() bool { return strings.Contains(cli.stdout.String(), "Hello! ") }, waitTimeout, 5*time.Millisecond)
	px.RST() // during the first turn
	require.Eventually(t, func() bool { return strings.Contains(cli.stdout.String(), "The lookup ") }, waitTimeout, 5*time.Millisecond)
	px.RST() // during the second turn
	assert.Equal(t, 0, cli.wait(waitTimeout), "stderr: %s", cli.stderr.String())
	assert.Equal(t, scriptedAnswer(prompt), cli.stdout.String(), "the whole answer, once")
	assert.Contains(t, cli.stderr.String(), "reconnecting")
	assert.GreaterOrEqual(t, px.Accepted(), 3)

	cli = startCLI(t, px.URL(), tok, "-c", prompt, "--json")
	sid := cli.session()
	require.Eventually(t, func() bool { return strings.Count(cli.stdout.String(), "\n") >= 3 }, waitTimeout, 5*time.Millisecond)
	px.RST()
	assert.Equal(t, 0, cli.wait(waitTimeout), "stderr: %s", cli.stderr.String())
	var seqs []int64
	for _, line := range strings.Split(strings.TrimRight(cli.stdout.String(), "\n"), "\n") {
		var sg signal
		require.NoError(t, json.Unmarshal([]byte(line), &sg), "line %q", line)
		assert.Equal(t, sid, sg.SessionID)
		require.NotNil(t, sg.Seq, "line %q", line)
		seqs = append(seqs, *sg.Seq)
	}
	require.NotEmpty(t, seqs)
	for i := range seqs {
		assert.Equal(t, int64(i+1), seqs[i], "every $seq once, in order: %v", seqs)
	}
}

// TestFieldCase_B36_CLIPrintsOnlyItsRun: while another connection runs a prompt in another
// session, `zidane --json` prints only its own run's signals (its session, its runId, no
// presence), and the text output holds only its own answer.
func TestFieldCase_B36_CLIPrintsOnlyItsRun(t *testing.T) {
	s := startServer(t, serverOpts{dbURL: storetest.URL(t), extra: []string{"--scripted-step-delay", "40ms"}})
	tok := s.mintToken("b36", "chat")
	other := dial(t, s, tok)
	other.hello()
	o, _ := createSession(t, other)

	for _, asJSON := range []bool{true, false} {
		sendPrompt(t, other, o, "Someone else's prompt.")
		args := []string{"-c", "mine"}
		if asJSON {
			args = append(args, "--json")
		}
		cli := startCLI(t, s.url(), tok, args...)
		sid := cli.session()
		time.Sleep(100 * time.Millisecond)
		sendPrompt(t, other, o, "Another one, while the CLI runs.")
		require.Equal(t, 0, cli.wait(waitTimeout), "stderr: %s", cli.stderr.String())
		out := cli.stdout.String()
		assert.NotContains(t, out, "Someone else")
		assert.NotContains(t, out, "Another one")
		if !asJSON {
			assert.Equal(t, scriptedAnswer("mine"), out)
			continue
		}
		lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
		var runID string
		ends := 0
		for i, line := range lines {
			var sg signal
			require.NoError(t, json.Unmarshal([]byte(line), &sg), "line %q", line)
			assert.Equal(t, sid, sg.SessionID, "line %d is another session's: %s", i, line)
			switch sg.Kind {
			case "run:start":
				assert.Equal(t, 0, i, "run:start comes first")
				runID = sg.RunID
			case "run:end":
				ends++
				assert.Equal(t, runID, sg.RunID)
				assert.Equal(t, len(lines)-1, i, "run:end comes last")
			case "event", "turn:end", "plans:snapshot": // run-scoped: they carry the run's id
				assert.Equal(t, runID, sg.RunID, "line %d", i)
			default:
				t.Errorf("line %d: a %s signal is not part of the run: %s", i, sg.Kind, line)
			}
		}
		assert.Equal(t, 1, ends)
		assert.NotEmpty(t, runID)
		assert.Greater(t, len(lines), 8)
	}

	// --session: another run of the same session streams first; the CLI's run is queued behind
	// it, and only the CLI's run is printed, its prompt without HTML escaping.
	sendPrompt(t, other, o, "Someone else's prompt in the same session.")
	cli := startCLI(t, s.url(), tok, "-c", "<mine> & yours", "--json", "--session", o)
	require.Equal(t, 0, cli.wait(waitTimeout), "stderr: %s", cli.stderr.String())
	out := cli.stdout.String()
	// The other run's prompt is not printed (the CLI's own answer may quote it: the scripted
	// model greets with the session's previous prompt).
	assert.NotContains(t, out, `"text":"Someone else`)
	assert.Contains(t, out, `"text":"<mine> & yours"`)
	runIDs := map[string]bool{}
	for _, line := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		var sg signal
		require.NoError(t, json.Unmarshal([]byte(line), &sg), "line %q", line)
		assert.Equal(t, o, sg.SessionID)
		runIDs[sg.RunID] = true
	}
	assert.Len(t, runIDs, 1, "one run's signals, each carrying its runId: %v", runIDs)
}

// TestFieldCase_B37_CtrlCCancelsTheRun: the first Ctrl-C sends chat.cancel for the CLI's run;
// another connection sees its run:end interrupted; the CLI says so and exits 130. A second Ctrl-C
// exits at once even when the cancel cannot get through.
func TestFieldCase_B37_CtrlCCancelsTheRun(t *testing.T) {
	s := startServer(t, serverOpts{dbURL: storetest.URL(t), extra: []string{"--scripted-step-delay", "300ms"}})
	tok := s.mintToken("b37", "chat")
	watcher := dial(t, s, tok)
	watcher.hello()

	cli := startCLI(t, s.url(), tok, "-c", "A long prompt.")
	sid := cli.session()
	started, _ := watchSignal(t, watcher, "run:start", sid)
	runID := started.RunID
	time.Sleep(400 * time.Millisecond)
	require.NoError(t, cli.cmd.Process.Signal(syscall.SIGINT))
	_, end := watchSignal(t, watcher, "run:end", runID)
	assert.Equal(t, false, end["ok"])
	assert.Equal(t, true, end["interrupted"])
	assert.Equal(t, "The run was cancelled.", end["error"])
	assert.Equal(t, 130, cli.wait(waitTimeout))
	assert.Contains(t, cli.stderr.String(), "cancelling the run")
	assert.Contains(t, cli.stderr.String(), "the run was cancelled on the server")
	assert.NotContains(t, cli.stderr.String(), "The run was cancelled.", "the expected run:end error is not shown as a failure")
	assert.NotContains(t, cli.stdout.String(), "The lookup found", "the run stopped")

	// A second Ctrl-C does not wait: the cancel is stuck in a black hole.
	px := clienttest.Start(t, s.addr)
	cli = startCLI(t, px.URL(), tok, "-c", "Another long prompt.", "--cancel-wait", "60s")
	require.Eventually(t, func() bool { return strings.Contains(cli.stdout.String(), "Hello! ") }, waitTimeout, 5*time.Millisecond)
	px.Blackhole()
	require.NoError(t, cli.cmd.Process.Signal(syscall.SIGINT))
	time.Sleep(200 * time.Millisecond)
	start := time.Now()
	require.NoError(t, cli.cmd.Process.Signal(syscall.SIGINT))
	assert.Equal(t, 130, cli.wait(15*time.Second))
	// It exits on the second Ctrl-C, long before the 60 s --cancel-wait (loaded CI machines are
	// slow to schedule the process, hence the margin).
	assert.Less(t, time.Since(start), 10*time.Second, "the second Ctrl-C exits at once")
	assert.Contains(t, cli.stderr.String(), "interrupted again")
}

// TestFieldCase_B43_CLIStaleDaemonFile: a daemon.json whose pid now belongs to another program
// is called stale, with what to do, instead of a raw "connection refused".
func TestFieldCase_B43_CLIStaleDaemonFile(t *testing.T) {
	data := t.TempDir()
	sleep := exec.Command("sleep", "60")
	require.NoError(t, sleep.Start())
	t.Cleanup(func() { sleep.Process.Kill(); sleep.Wait() })
	d := map[string]any{"url": "ws://" + freeAddr(t), "port": 1, "pid": sleep.Process.Pid, "startedAt": 1, "protocolVersion": 16, "token": "zds_stale"}
	b, _ := json.Marshal(d)
	require.NoError(t, os.WriteFile(filepath.Join(data, "daemon.json"), b, 0o600))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cli := exec.CommandContext(ctx, cliBin, "-c", "Hello?")
	cli.Env = env(true, "ZIDANE_SERVER_HOME="+data)
	out, err := cli.CombinedOutput()
	require.Error(t, err)
	assert.Contains(t, string(out), "is stale")
	assert.Contains(t, string(out), "another program (sleep)")
	assert.Contains(t, string(out), "Start the server again")
	assert.NotContains(t, string(out), "connection refused")
}

// TestCLITokenRefusedSaysHowToMint: a refused token is named as such, with the command that mints
// one; --help names the environment and the discovery file; `zidane version` prints versions.
func TestCLITokenRefusedSaysHowToMint(t *testing.T) {
	s := startServer(t, serverOpts{dbURL: storetest.URL(t)})
	code, out, errs := runCLI(t, s, "zds_bad", "-c", "Say hello.")
	assert.Equal(t, 1, code)
	assert.Empty(t, out)
	assert.Contains(t, errs, "the server refused the token (401)")
	assert.Contains(t, errs, "zidane-server token create --name cli --scope chat")

	code, out, _ = runCLI(t, s, "zds_bad", "--help")
	assert.Equal(t, 0, code)
	for _, want := range []string{"ZIDANE_URL", "ZIDANE_TOKEN", "daemon.json", "--json", "--session", "version"} {
		assert.Contains(t, out, want)
	}
	code, out, _ = runCLI(t, s, "zds_bad", "version")
	assert.Equal(t, 0, code)
	assert.Regexp(t, `^zidane \S+ \(protocol \d+, min \d+, schema [0-9a-f]{12}\)\n$`, out)
}

// TestCLIServerKilledMidRun: the server is killed while the CLI's run streams and a new server
// process takes its place; the CLI reconnects, its resume answers epoch, and from the reloaded
// transcript it tells that the run ended unfinished instead of waiting for a run:end that cannot
// come.
func TestCLIServerKilledMidRun(t *testing.T) {
	db, data, root := storetest.URL(t), t.TempDir(), t.TempDir()
	s1 := startServer(t, serverOpts{dbURL: db, dataDir: data, root: root, extra: []string{"--scripted-step-delay", "300ms"}})
	tok := s1.mintToken("killed", "chat")
	px := clienttest.Start(t, s1.addr)
	cli := startCLI(t, px.URL(), tok, "-c", "Outlive me.")
	require.Eventually(t, func() bool { return strings.Contains(cli.stdout.String(), "Hello! ") }, waitTimeout, 5*time.Millisecond)
	require.NoError(t, s1.cmd.Process.Kill())
	<-s1.done
	s1.stopped = true
	s2 := startServer(t, serverOpts{dbURL: db, dataDir: data, root: root})
	px.SetTarget(s2.addr)
	assert.Equal(t, 1, cli.wait(waitTimeout))
	assert.Contains(t, cli.stderr.String(), "reloaded the transcript")
	// The drop is said in a sentence, not as a chain of wrapped errors.
	assert.Contains(t, cli.stderr.String(), "zidane: lost the connection to "+px.URL()+": ")
	assert.NotContains(t, cli.stderr.String(), "failed to get reader")
	// The new server closes the interrupted run in the transcript with an error event, which the
	// CLI reports; without it the CLI says the run did not finish.
	assert.Regexp(t, `The server stopped during the run|the run did not finish`, cli.stderr.String())
	assert.Equal(t, 1, strings.Count(cli.stdout.String(), "Hello! "), "nothing printed twice")
}

// TestClientCase_C12_RevokedTokenStopsTheCLI: revoking the CLI's token while its run streams
// closes its connection (1008); the CLI says the token was refused and how to mint one, and
// does not retry.
func TestClientCase_C12_RevokedTokenStopsTheCLI(t *testing.T) {
	s := startServer(t, serverOpts{dbURL: storetest.URL(t), extra: []string{"--scripted-step-delay", "300ms"}})
	admin := dial(t, s, s.mintToken("ops", "admin"))
	admin.hello()
	px := clienttest.Start(t, s.addr)
	cli := startCLI(t, px.URL(), s.mintToken("doomed", "chat"), "-c", "Revoke me.")
	require.Eventually(t, func() bool { return strings.Contains(cli.stdout.String(), "Hello! ") }, waitTimeout, 5*time.Millisecond)
	admin.result("tokens.revoke", map[string]any{"name": "doomed"}, nil)
	assert.Equal(t, 1, cli.wait(waitTimeout))
	assert.Contains(t, cli.stderr.String(), "the server refused the token (401)")
	assert.Contains(t, cli.stderr.String(), "zidane-server token create --name cli --scope chat")
	assert.NotContains(t, cli.stderr.String(), "reconnecting")
	assert.Equal(t, 1, px.Accepted(), "no retry after a revocation")
}

// TestCLIDaemonFileNamingNoServerExits2: daemon.json names a live zidane-server process but an
// address where nothing answers (a reused data dir, a killed server not yet reaped): the CLI says
// so and exits 2, "no server found", as the README documents.
func TestCLIDaemonFileNamingNoServerExits2(t *testing.T) {
	s := startServer(t, serverOpts{dbURL: storetest.URL(t)})
	data := t.TempDir()
	d := map[string]any{"url": "ws://" + freeAddr(t), "port": 1, "pid": s.cmd.Process.Pid, "startedAt": 1, "protocolVersion": 16, "token": "zds_stale"}
	b, _ := json.Marshal(d)
	require.NoError(t, os.WriteFile(filepath.Join(data, "daemon.json"), b, 0o600))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cli := exec.CommandContext(ctx, cliBin, "-c", "Hello?")
	cli.Env = env(true, "ZIDANE_SERVER_HOME="+data)
	out, err := cli.CombinedOutput()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee, "%s", out)
	assert.Equal(t, 2, ee.ExitCode(), "%s", out)
	assert.Contains(t, string(out), "no server answers")
}

// TestCLIRefusedModelLeavesNoSession: an unknown --model is refused with one clear message (not
// "models.list" twice), and the session the CLI made for the prompt does not stay behind empty.
func TestCLIRefusedModelLeavesNoSession(t *testing.T) {
	s := startServer(t, serverOpts{dbURL: storetest.URL(t)})
	tok := s.mintToken("cli", "chat")
	code, _, errs := runCLI(t, s, tok, "--model", "nope/x", "-c", "hi")
	assert.Equal(t, 1, code)
	assert.Contains(t, errs, `no provider "nope" is configured`)
	assert.Equal(t, 1, strings.Count(errs, "models.list"), "stderr: %s", errs)

	c := dial(t, s, tok)
	c.hello()
	var list struct {
		Sessions []json.RawMessage `json:"sessions"`
	}
	c.result("sessions.list", map[string]any{}, &list)
	assert.Empty(t, list.Sessions, "the refused prompt's session was removed")
}

// TestCLIUnknownSessionSaysLeaveItOut: --session with an id the server does not have says so and
// how to start a new session (exit 2, bad usage), instead of the server's sessions.list hint.
func TestCLIUnknownSessionSaysLeaveItOut(t *testing.T) {
	s := startServer(t, serverOpts{dbURL: storetest.URL(t)})
	tok := s.mintToken("cli", "chat")
	const id = "8f2d4c1e-0000-4000-8000-000000000000"
	code, _, errs := runCLI(t, s, tok, "--session", id, "-c", "hi")
	assert.Equal(t, 2, code, "stderr: %s", errs)
	assert.Contains(t, errs, "the server has no session "+id+": leave --session out")
}

// TestCLIModelsTakesDataDir: `zidane models --data-dir DIR` finds the local server through
// DIR/daemon.json, as the prompt command does.
func TestCLIModelsTakesDataDir(t *testing.T) {
	data := t.TempDir()
	startServer(t, serverOpts{dbURL: storetest.URL(t), dataDir: data})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, cliBin, "models", "--data-dir", data)
	cmd.Env = env(true)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Contains(t, string(out), "scripted/")
}

// TestCLITokenWhitespace: a ZIDANE_TOKEN read with $(cat file) or pasted with a newline or spaces
// around it works (they are not part of a token); one with a control character inside is bad
// usage saying so, not "no server answers" (a fresh user's report).
func TestCLITokenWhitespace(t *testing.T) {
	s := startServer(t, serverOpts{dbURL: storetest.URL(t)})
	tok := s.mintToken("ws-cli", "chat")
	code, out, errs := runCLI(t, s, " "+tok+"\r\n", "-c", "Say hello.")
	assert.Equal(t, 0, code, "stderr: %s", errs)
	assert.NotEmpty(t, out)
	code, _, errs = runCLI(t, s, tok[:8]+"\n"+tok[8:], "-c", "Say hello.")
	assert.Equal(t, 2, code)
	assert.Contains(t, errs, "ZIDANE_TOKEN holds a space or a control character")
}
