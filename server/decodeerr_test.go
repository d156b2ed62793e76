package server

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zidane-server/zidane/server/agent/provider/openai/openaitest"
)

// goTypeWords are what encoding/json's own messages say and the protocol never does.
var goTypeWords = []string{"protocol.", "Go struct", "Go value", "interface {}", "map[string]", "json: "}

// assertProtocolWords asserts msg names no Go type.
func assertProtocolWords(t *testing.T, msg, what string) {
	t.Helper()
	for _, w := range goTypeWords {
		assert.NotContains(t, msg, w, "%s: %s", what, msg)
	}
}

// The SSE routes' 400s say what is wrong with the body in the protocol's words (the member, the
// JSON type it must be, the body to send), never the Go type it decodes into: they said "the
// body is not a SendBody … json: cannot unmarshal array into Go value of type protocol.SendBody"
// (a break-it helper's report).
func TestSSEBodyErrorsSpeakTheProtocol(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.SSEBasePath = "/api/chat" })
	c := e.dial()
	c.hello()
	sid := c.newSession()
	post := func(route, body string) (int, string) {
		req, err := http.NewRequest("POST", e.hs.URL+"/api/chat/sessions"+route, strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+e.token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, tc := range []struct{ route, body, want string }{
		{"/" + sid + "/send", `[1]`, "body must be an object, not a JSON array"},
		{"/" + sid + "/send", `{"prompt":5}`, "body/prompt must be a string, not a JSON number"},
		{"/" + sid + "/send", `{"prompt":"hi","attachments":{}}`, "body/attachments must be an array, not a JSON object"},
		{"/" + sid + "/send", `{"prompt":`, "body is not valid JSON"},
		{"/" + sid + "/answer", `{"requestId":7}`, "body/requestId must be a string, not a JSON number"},
		{"/" + sid + "/cancel", `"x"`, "body must be an object, not a JSON string"},
		{"", `{"title":true}`, "body/title must be a string, not a JSON boolean"},
	} {
		code, msg := post(tc.route, tc.body)
		what := tc.route + " " + tc.body
		assert.Equal(t, http.StatusBadRequest, code, what)
		assert.Contains(t, msg, tc.want, what)
		assert.Contains(t, msg, "send a JSON object", what)
		assertProtocolWords(t, msg, what)
	}
	_, msg := post("/"+sid+"/answer", `{"requestId":"r"}`)
	assert.Contains(t, msg, "the body holds exactly one of approval")
	assertProtocolWords(t, msg, "answer without approval or question")
}

// TestSSEBodyDeadline (break-it): an SSE POST whose body is withheld after its headers is
// answered 408 in the protocol's ErrorBody once the body timeout (the request timeout) passes,
// and the connection closes; it held the connection for ever, outside every connection bound.
func TestSSEBodyDeadline(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.SSEBasePath, c.Limits.RequestTimeout = "/api/chat", 2*time.Second })
	resp := withheldBody(t, e.hs.URL, "/api/chat/sessions", e.token)
	assert.Equal(t, http.StatusRequestTimeout, resp.StatusCode)
	b, _ := io.ReadAll(resp.Body)
	assert.Contains(t, string(b), `"status":408`)
	assert.Contains(t, string(b), "did not arrive within 2s")
	assert.True(t, resp.Close, "the connection is not kept for another request")
}

// A tool input the model wrote with a wrong type is answered, to the model, in JSON words: it
// read "json: cannot unmarshal number into Go struct field …".
func TestToolInputErrorsSpeakJSON(t *testing.T) {
	e, _ := newFakeAgentEnv(t,
		openaitest.CallReply(10, 5, openaitest.Call{ID: "c1", Name: "read_file", Args: `{"path":5}`}),
		openaitest.Reply("Done.", 20, 5))
	c := e.dial()
	c.hello()
	sid := c.newSession()
	c.prompt(sid, "read it")
	require.Equal(t, true, c.runEnd(sid)["ok"])
	res := c.toolResults(sid)
	require.Len(t, res, 1)
	text := fmt.Sprint(res[0]["text"])
	assert.Contains(t, text, "input/path must be a string, not a JSON number")
	assertProtocolWords(t, text, "read_file's result")
}
