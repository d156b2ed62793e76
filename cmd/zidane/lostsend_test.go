package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/assert"
)

// A chat.send whose answer is lost with the connection: the server did start the run, so after
// the reconnect the resume replays its run:start, and the CLI (in the session it created) takes
// that run as its own and prints it, once, without sending the prompt again.
func TestCLIAdoptsTheRunOfALostSend(t *testing.T) {
	var sends, conns atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{"zidane"}})
		if err != nil {
			return
		}
		defer ws.CloseNow()
		conns.Add(1)
		ctx := context.Background()
		for {
			_, b, err := ws.Read(ctx)
			if err != nil {
				return
			}
			var req struct {
				ID     json.RawMessage `json:"id"`
				Method string          `json:"method"`
			}
			json.Unmarshal(b, &req)
			answer := func(result string) {
				ws.Write(ctx, websocket.MessageText, []byte(`{"jsonrpc":"2.0","id":`+string(req.ID)+`,"result":`+result+`}`))
			}
			switch req.Method {
			case "ipc.hello":
				answer(`{"protocolVersion":16,"minProtocolVersion":16,"negotiatedProtocolVersion":16,"appVersion":"fs","pid":1,"startedAt":1,"buildId":"b","codeVersion":"c","hostId":"h","hostKind":"server","hostName":"fs","signalEpoch":"e","methods":[],"adminCommands":{"token":"t","pair":"p"}}`)
			case "sessions.create":
				answer(`{"id":"11111111-1111-1111-1111-111111111111","title":"t","projectRoot":"/","cwd":"/","agentId":"a","status":"idle","createdAt":1,"updatedAt":1,"archived":false,"hostId":"h"}`)
			case "sessions.resume":
				answer(`{"ok":true,"signals":[]}`)
				if sends.Load() == 1 && conns.Load() == 2 {
					sid := `"sessionId":"11111111-1111-1111-1111-111111111111","runId":"R"`
					for _, sig := range []string{
						`{"kind":"run:start",` + sid + `,"$seq":1}`,
						`{"kind":"event",` + sid + `,"event":{"kind":"markdown","text":"Adopted.","streaming":true,"turnId":"t"},"$seq":2}`,
						`{"kind":"run:end",` + sid + `,"ok":true,"$seq":3}`,
					} {
						ws.Write(ctx, websocket.MessageText, []byte(`{"jsonrpc":"2.0","method":"ipc.signal","params":`+sig+`}`))
					}
				}
			case "chat.send":
				sends.Add(1)
				return // the connection drops before the answer
			}
		}
	}))
	defer srv.Close()
	t.Setenv("ZIDANE_URL", "ws"+strings.TrimPrefix(srv.URL, "http"))
	t.Setenv("ZIDANE_TOKEN", "zds_x")
	var out, errb bytes.Buffer
	code := run([]string{"-c", "hi"}, &out, &errb)
	assert.Equal(t, exitOK, code, "stderr: %s", errb.String())
	assert.Equal(t, "Adopted.\n", out.String())
	assert.Contains(t, errb.String(), "the connection dropped while sending the prompt")
	assert.Equal(t, int32(1), sends.Load(), "the prompt is not sent again")
}
