package e2e

import (
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zidane-server/zidane/server/store/storetest"
)

// askCommand is the command the scripted model asks to run in the CLI tests: it writes ran.txt,
// and its second line holds what a terminal would act on (a title-setting escape, BEL, a bidi
// override), which the prompt shows escaped.
const askCommand = "echo ran > ran.txt\n# \x1b]0;pwned\x07 \u202e"

// askCommandShown is askCommand as the terminal prompt shows it.
const askCommandShown = `echo ran > ran.txt\n# \x1b]0;pwned\x07 \u202e`

// answerServer starts a server whose scripted providers ask: demo/scripted runs askCommand with
// exec, then asks "Which colour?" (red or blue), then says done; solo/scripted only runs
// askCommand. Extra server flags come after. It returns the server, a chat token and the root.
func answerServer(t *testing.T, extra ...string) (*serverProc, string, string) {
	t.Helper()
	dir := t.TempDir()
	exec := map[string]any{"tool": map[string]any{"name": "exec", "arguments": map[string]any{"command": askCommand}, "id": "c1"}}
	ask := map[string]any{"ask": map[string]any{"prompt": "Which colour?", "options": []string{"red", "blue"}}}
	done := map[string]any{"steps": []any{map[string]any{"text": "done"}}}
	write := func(name string, turns ...any) {
		b, err := json.Marshal(map[string]any{"turns": turns})
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), b, 0o644))
	}
	write("demo.json", map[string]any{"steps": []any{map[string]any{"text": "Running it."}, exec}},
		map[string]any{"steps": []any{ask}}, done)
	write("solo.json", map[string]any{"steps": []any{exec}}, done)
	cfg := `{"providers":[{"name":"demo","kind":"scripted","script":"demo.json"},{"name":"solo","kind":"scripted","script":"solo.json"}]}`
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.json"), []byte(cfg), 0o644))
	root, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	s := startServer(t, serverOpts{dbURL: storetest.URL(t), root: root, extra: append([]string{"--config", filepath.Join(dir, "config.json")}, extra...)})
	return s, s.mintToken("cli-answer", "chat"), root
}

// eventually waits until buf holds want.
func eventually(t *testing.T, buf *syncBuf, want string) {
	t.Helper()
	require.Eventually(t, func() bool { return strings.Contains(buf.String(), want) }, waitTimeout, 5*time.Millisecond,
		"waiting for %q in:\n%s", want, buf.String())
}

// TestCLIAnswersApprovalOnTerminal (issue 22 item 8): the CLI's stdin and stderr are a
// pseudo-terminal. The exec approval is shown with the command exactly, its control characters
// and bidi override escaped (none reaches the terminal raw), the cwd and what always would store;
// a line it cannot use asks again, `a` allows it once and the command runs. A second run
// answered `d` is denied and the command does not run; its question is shown with its options
// numbered, a number out of range asks again, and `2` answers it.
func TestCLIAnswersApprovalOnTerminal(t *testing.T) {
	s, tok, root := answerServer(t)
	ran := filepath.Join(root, "ran.txt")

	// onTerminal runs the CLI on model with a terminal; steps are pairs: what the terminal shows,
	// then the line typed.
	onTerminal := func(model string, steps ...string) (*cliProc, *syncBuf) {
		ptmx, tty, err := pty.Open()
		require.NoError(t, err)
		term := &syncBuf{}
		go io.Copy(term, ptmx) // ends with EIO once the CLI has exited and tty is closed
		cli := startCLIWith(t, s.url(), tok, func(cmd *exec.Cmd) { cmd.Stdin, cmd.Stderr = tty, tty },
			"-c", "Run it.", "--model", model)
		require.NoError(t, tty.Close())
		t.Cleanup(func() { ptmx.Close() })
		for i := 0; i+1 < len(steps); i += 2 {
			eventually(t, term, steps[i])
			_, err := ptmx.Write([]byte(steps[i+1] + "\n"))
			require.NoError(t, err)
		}
		require.Equal(t, 0, cli.wait(waitTimeout), "terminal:\n%s", term.String())
		return cli, term
	}

	cli, term := onTerminal("solo/scripted", "[d]eny? ", "maybe", "or d (deny)", "a")
	out := term.String()
	assert.Contains(t, out, "zidane: the run waits for your answer (it expires as a denial at ")
	assert.Contains(t, out, "The agent asks to run: "+askCommandShown+"\r\n", "the command exactly, escaped")
	assert.Contains(t, out, "(the command holds line breaks or control characters, shown escaped")
	assert.Contains(t, out, "  in "+root+"\r\n")
	assert.Contains(t, out, "[a]llow once, al[w]ays (stores nothing for this call: acts as allow), [d]eny? ")
	assert.Contains(t, out, "zidane: type a (allow once), w (always) or d (deny)")
	assert.Contains(t, out, "zidane: allowed once: exec ")
	for _, raw := range []string{"\x1b]", "\x07", "\u202e"} {
		assert.NotContains(t, out, raw, "nothing the model wrote reaches the terminal raw")
	}
	assert.Equal(t, "done\n", cli.stdout.String())
	b, err := os.ReadFile(ran)
	require.NoError(t, err, "allowed: the command ran")
	assert.Equal(t, "ran\n", string(b))

	require.NoError(t, os.Remove(ran))
	cli, term = onTerminal("demo/scripted", "[d]eny? ", "d", "dismisses it: ", "3", "from 1 to 2", "2")
	out = term.String()
	assert.Contains(t, out, "zidane: denied: exec ")
	assert.NoFileExists(t, ran, "denied: the command did not run")
	assert.Contains(t, out, "The agent asks: Which colour?\r\n  1) red\r\n  2) blue\r\n  Type a number from 1 to 2; an empty line dismisses it: ")
	assert.Contains(t, out, "zidane: this question takes the number of an option, from 1 to 2")
	assert.Contains(t, out, `zidane: answered the question "Which colour?"`)
	assert.Equal(t, "Running it.\ndone\n", cli.stdout.String())
}

// TestCLIAnswersApprovalFromJSONLine (issue 22 item 8): with --json and stdin a pipe, the CLI
// prints the approval:request as a line, says once on stderr that the run waits and how to
// answer, reports each line it cannot use (not JSON, an unknown requestId, a bad decision, a
// decision for a question) without ending the run, and takes {"requestId","decision":"allow"}:
// the command runs. The question that follows is answered by a line without requestId (one
// waits) choosing "blue", which reaches the server.
func TestCLIAnswersApprovalFromJSONLine(t *testing.T) {
	s, tok, root := answerServer(t)
	var stdin io.WriteCloser
	cli := startCLIWith(t, s.url(), tok, func(cmd *exec.Cmd) {
		var err error
		stdin, err = cmd.StdinPipe()
		require.NoError(t, err)
	}, "-c", "Run it.", "--model", "demo/scripted", "--json")
	send := func(line string) {
		_, err := io.WriteString(stdin, line+"\n")
		require.NoError(t, err)
	}
	requestID := func(kind string) string {
		var id string
		require.Eventually(t, func() bool {
			for _, l := range strings.Split(cli.stdout.String(), "\n") {
				var sig struct {
					Kind    string
					Request struct{ RequestID string }
				}
				if json.Unmarshal([]byte(l), &sig) == nil && sig.Kind == kind {
					id = sig.Request.RequestID
					return true
				}
			}
			return false
		}, waitTimeout, 5*time.Millisecond, "no %s line on stdout:\n%s", kind, cli.stdout.String())
		return id
	}

	id := requestID("approval:request")
	eventually(t, cli.stderr, `zidane: the run waits for an answer to exec `)
	assert.Contains(t, cli.stderr.String(), `answer on stdin with a JSON line such as {"requestId":"`+id+`","decision":"allow"}`)
	send("allow")
	eventually(t, cli.stderr, "zidane: stdin: not an answer line")
	send(`{"requestId":"nope","decision":"allow"}`)
	eventually(t, cli.stderr, `zidane: stdin: no request "nope" waits for an answer here (waiting: `+id+`)`)
	send(`{"requestId":"` + id + `","decision":"maybe"}`)
	eventually(t, cli.stderr, `zidane: stdin: decision "maybe" is not allow, always or deny`)
	send(`{"requestId":"` + id + `","answer":{"text":"x"}}`)
	eventually(t, cli.stderr, `is an approval: answer it with`)
	send(`{"requestId":"` + id + `","decision":"allow"}`)
	eventually(t, cli.stderr, "zidane: allowed once: exec ")
	assert.Equal(t, 1, strings.Count(cli.stderr.String(), "the run waits for an answer to exec"), "said once")

	qid := requestID("interaction:request")
	eventually(t, cli.stderr, `zidane: the run waits for an answer to the question "Which colour?": answer on stdin with a JSON line such as {"requestId":"`+qid+`","answer":{"choices":["red"]}}, or`)
	send(`{"answer":{"choices":["blue"]}}`)
	require.NoError(t, stdin.Close())
	require.Equal(t, 0, cli.wait(waitTimeout), "stderr: %s", cli.stderr.String())
	out := cli.stdout.String()
	assert.Contains(t, out, `"kind":"approval:resolved"`)
	assert.Contains(t, out, `"resolution":"allow"`)
	assert.Contains(t, out, `"resolution":"answered","answer":{"choices":["blue"]}`)
	b, err := os.ReadFile(filepath.Join(root, "ran.txt"))
	require.NoError(t, err, "allowed: the command ran")
	assert.Equal(t, "ran\n", string(b))
}

// TestCLIApproveNever (issue 22 item 8): unattended. --approve never denies the approval and
// dismisses the question (the command does not run); --approve allow allows it once and
// dismisses the question (it runs); a bad --approve is exit 2. Without --approve, no terminal and
// stdin at its end, the CLI says the run waits and that nothing can answer, then that the
// request expired (the server's --approval-timeout), and the run goes on denied.
func TestCLIApproveNever(t *testing.T) {
	s, tok, root := answerServer(t, "--approval-timeout", "1500ms")
	ran := filepath.Join(root, "ran.txt")

	code, out, errs := runCLI(t, s, tok, "-c", "Run it.", "--model", "demo/scripted", "--approve", "never")
	require.Equal(t, 0, code, errs)
	assert.Equal(t, "Running it.\ndone\n", out)
	assert.Contains(t, errs, "zidane: denied (--approve never): exec ")
	assert.Contains(t, errs, `zidane: dismissed (--approve never) the question "Which colour?"`)
	assert.NotContains(t, errs, "waits for an answer")
	assert.NoFileExists(t, ran)

	code, _, errs = runCLI(t, s, tok, "-c", "Run it.", "--model", "demo/scripted", "--approve", "allow")
	require.Equal(t, 0, code, errs)
	assert.Contains(t, errs, "zidane: allowed once (--approve allow): exec ")
	assert.Contains(t, errs, `zidane: dismissed (--approve allow) the question "Which colour?"`)
	assert.FileExists(t, ran)
	require.NoError(t, os.Remove(ran))

	code, _, errs = runCLI(t, s, tok, "-c", "Run it.", "--approve", "sometimes")
	assert.Equal(t, 2, code)
	assert.Contains(t, errs, `zidane: --approve "sometimes": use ask (the default), allow or never`)

	code, out, errs = runCLI(t, s, tok, "-c", "Run it.", "--model", "solo/scripted")
	require.Equal(t, 0, code, errs)
	assert.Equal(t, "done\n", out)
	assert.Contains(t, errs, "zidane: the run waits for an answer to exec ")
	assert.Contains(t, errs, "or rerun with --approve allow|never")
	assert.Contains(t, errs, "zidane: stdin has ended")
	assert.Contains(t, errs, "expired unanswered: it counts as a denial")
	assert.NoFileExists(t, ran)
}
