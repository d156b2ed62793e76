package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zidane-server/zidane/server/store/storetest"
)

// htmlEscapes are the escapes encoding/json writes for `<`, `>` and `&` by default.
var htmlEscapes = []string{`\u003c`, `\u003e`, `\u0026`, `\u003C`, `\u003E`}

// assertNoHTMLEscapes fails for every escape of `<`, `>` or `&` in b, naming where it came from.
func assertNoHTMLEscapes(t *testing.T, where string, b []byte) {
	t.Helper()
	for _, e := range htmlEscapes {
		assert.NotContains(t, string(b), e, "%s: %s", where, b)
	}
}

// TestFieldCase_B36_NoHTMLEscapesOnTheWire: a turn whose prompt, tool input and tool output hold
// `<b>&amp;</b>`, over the real binary: every line `zidane --json` prints, every frame a raw
// WebSocket client receives (the run's signals, the stored transcript read back, the answers),
// and the HTTP bodies the server writes hold `<`, `>` and `&` as themselves. The second turn's
// model is a script whose tool arguments arrive escaped (`\u003cb\u003e`, as some providers
// write them): the tool event's input, the approval's and the stored call show them unescaped.
func TestFieldCase_B36_NoHTMLEscapesOnTheWire(t *testing.T) {
	dir := t.TempDir()
	script := `{"loop":true,"turns":[{"steps":[{"text":"Reading <b>&amp;</b> "},` +
		`{"tool":{"name":"read_file","arguments":{"path":"\u003cb\u003e\u0026amp;\u003c/b\u003e.txt"}}},` +
		`{"tool":{"name":"write_file","arguments":{"path":"out.txt","content":"\u003cb\u003e\u0026amp;\n"}}}]},` +
		`{"steps":[{"text":"Done <b>&amp;</b>."}]}]}`
	require.NoError(t, os.WriteFile(filepath.Join(dir, "script.json"), []byte(script), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{"providers":[{"name":"demo","kind":"scripted","script":"script.json"}]}`), 0o644))
	s := startServer(t, serverOpts{dbURL: storetest.URL(t), extra: []string{"--config", filepath.Join(dir, "config.json")}})
	tok := s.mintToken("b36", "chat")
	const mine = "mine <b>&amp;</b>"

	// The CLI, with the built-in scripted model: lookup({"query": prompt}) and its result.
	code, out, errs := runCLI(t, s, tok, "-c", mine, "--json")
	require.Equal(t, 0, code, errs)
	assert.Contains(t, out, `"input":{"query":"mine <b>&amp;</b>"}`)
	for _, l := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		assertNoHTMLEscapes(t, "zidane --json", []byte(l))
	}

	// A raw WebSocket client that keeps every frame.
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, s.url(), dialOpts(tok))
	require.NoError(t, err)
	defer ws.CloseNow()
	ws.SetReadLimit(32 << 20)
	var frames [][]byte
	id := 0
	waiting := ""
	read := func(until func(b []byte) bool) []byte {
		for {
			_, b, err := ws.Read(ctx)
			require.NoError(t, err, "waiting for %s; frames so far:\n%s", waiting, bytes.Join(frames, []byte("\n")))
			frames = append(frames, b)
			if until(b) {
				return b
			}
		}
	}
	call := func(method, params string) map[string]any {
		id++
		waiting = "the answer to " + method
		require.NoError(t, ws.Write(ctx, websocket.MessageText, []byte(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`, id, method, params))))
		b := read(func(b []byte) bool { return bytes.HasPrefix(b, []byte(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,`, id))) })
		var m map[string]any
		require.NoError(t, json.Unmarshal(b, &m))
		require.Nil(t, m["error"], "%s", b)
		r, _ := m["result"].(map[string]any)
		return r
	}
	waitSignal := func(kind string) []byte {
		waiting = "signal " + kind
		return read(func(b []byte) bool {
			return bytes.Contains(b, []byte(`"method":"ipc.signal","params":{"kind":"`+kind+`"`))
		})
	}
	call("ipc.hello", fmt.Sprintf(`{"protocolVersion":%d,"client":{"name":"b36 <raw>","version":"1"}}`, protoVersion))
	sid := call("sessions.create", `{"cwd":""}`)["id"].(string)
	call("sessions.setModel", fmt.Sprintf(`{"sessionId":%q,"model":"demo/scripted"}`, sid))
	call("chat.send", fmt.Sprintf(`{"sessionId":%q,"prompt":"mine <b>&amp;</b>"}`, sid))
	req := waitSignal("approval:request")
	assert.Contains(t, string(req), `"content":"<b>&amp;\n"`, "the approval's input as the script meant it")
	var sig struct {
		Params struct {
			Request struct{ RequestID string }
		}
	}
	require.NoError(t, json.Unmarshal(req, &sig))
	call("approvals.answer", fmt.Sprintf(`{"sessionId":%q,"requestId":%q,"decision":"allow"}`, sid, sig.Params.Request.RequestID))
	waitSignal("run:end")
	events := call("sessions.loadEvents", fmt.Sprintf(`{"sessionId":%q}`, sid))
	call("sessions.get", fmt.Sprintf(`{"sessionId":%q}`, sid))

	all := bytes.Join(frames, []byte("\n"))
	for _, want := range []string{`"text":"mine <b>&amp;</b>"`, `"input":{"path":"<b>&amp;</b>.txt"}`, `<b>&amp;</b>.txt`, `Done <b>&amp;</b>.`} {
		assert.Contains(t, string(all), want)
	}
	assert.NotEmpty(t, events["events"])
	for _, f := range frames {
		assertNoHTMLEscapes(t, "frame", f)
	}
	b, err := os.ReadFile(filepath.Join(s.opts.root, "out.txt"))
	require.NoError(t, err)
	assert.Equal(t, "<b>&amp;\n", string(b))

	// HTTP bodies: the bundled schema and /version.
	for _, p := range []string{"/protocol.json", "/version"} {
		resp, err := http.Get("http://" + s.addr + p)
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, 200, resp.StatusCode, p)
		assertNoHTMLEscapes(t, p, body)
	}
}
