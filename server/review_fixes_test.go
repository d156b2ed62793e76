package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zidane-server/zidane/protocol"
)

// TestSessionIDsOnlyInTheirCanonicalSpelling: the server keys its in-memory state (running runs,
// replay log, $seq, session cache) by the id string, so an uppercase or urn:uuid: spelling of a
// session's id must not reach its row. Before the fix an uppercase id deleted a running session,
// resumed with {ok:true, signals:[]}, cancelled nothing and answered a watermark of 0.
func TestSessionIDsOnlyInTheirCanonicalSpelling(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.StepDelay = 100 * time.Millisecond })
	c := e.dial()
	c.hello()
	sid := c.newSession()
	c.result("chat.send", fmt.Sprintf(`{"sessionId":%q,"prompt":"Say hello."}`, sid))
	// getTurns while the run streams: the last page's turns end at total-1 (a streaming block that
	// starts a turn is counted; before the fix total was one short of the turns answered).
	for range 5 {
		g := c.result("sessions.getTurns", fmt.Sprintf(`{"sessionId":%q}`, sid))
		turns := g["turns"].([]any)
		require.NotEmpty(t, turns)
		last, _ := turns[len(turns)-1].(map[string]any)["position"].(json.Number).Int64()
		total, _ := g["total"].(json.Number).Int64()
		assert.Nil(t, g["next"])
		assert.Equal(t, last+1, total, "total counts every turn answered")
		time.Sleep(60 * time.Millisecond)
	}
	for _, id := range []string{strings.ToUpper(sid), "urn:uuid:" + sid, "{" + sid + "}"} {
		for _, m := range []string{"sessions.get", "sessions.delete", "sessions.loadEvents", "sessions.getTurns", "chat.cancel"} {
			a := c.call(m, fmt.Sprintf(`{"sessionId":%q}`, id))
			require.Equal(t, -32014, errCode(a), "%s %s: %v", m, id, a)
			assert.Contains(t, a["error"].(map[string]any)["message"], sid, "the message names the canonical spelling")
		}
		a := c.call("sessions.resume", fmt.Sprintf(`{"sessionId":%q,"epoch":"x","afterSeq":0}`, id))
		require.Equal(t, -32014, errCode(a), "resume %s: %v", id, a)
	}
	sigs := c.runSignals(sid)
	require.NotEmpty(t, sigs)
	assert.Equal(t, "run:end", sigs[len(sigs)-1].kind)
	c.result("sessions.get", fmt.Sprintf(`{"sessionId":%q}`, sid)) // still there
}

// TestSessionTitles: a title given at sessions.create is kept (the first prompt does not rename
// it); a title of only invisible characters is refused, and such a prompt names nothing.
func TestSessionTitles(t *testing.T) {
	e := newEnv(t, nil)
	c := e.dial()
	c.hello()
	x := c.result("sessions.create", `{"title":"Budget"}`)
	sid := x["id"].(string)
	c.result("chat.send", fmt.Sprintf(`{"sessionId":%q,"prompt":"Plan the trip"}`, sid))
	c.runSignals(sid)
	assert.Equal(t, "Budget", c.result("sessions.get", fmt.Sprintf(`{"sessionId":%q}`, sid))["title"])

	for _, title := range []string{`\u200b`, `\u0001\u0002`, `\u2060 \u200d`, `\u0301`, `a\nb`, `invoice \u202efdp.exe`} {
		a := c.call("sessions.rename", fmt.Sprintf(`{"sessionId":%q,"title":"%s"}`, sid, title))
		require.Equal(t, -32602, errCode(a), "%s: %v", title, a)
	}
	a := c.call("sessions.create", `{"title":"x\u2066y"}`)
	require.Equal(t, -32602, errCode(a), "a bidi isolate in a given title: %v", a)
	assert.Equal(t, "Budget", c.result("sessions.get", fmt.Sprintf(`{"sessionId":%q}`, sid))["title"])
	other := c.newSession()
	c.result("chat.send", fmt.Sprintf(`{"sessionId":%q,"prompt":"\u0001\u0002\u200b"}`, other))
	c.runSignals(other)
	assert.Equal(t, "New session", c.result("sessions.get", fmt.Sprintf(`{"sessionId":%q}`, other))["title"])

	// Pipelined prompts: the first names the session, not the follow-up queued behind it (which
	// is answered first; a fresh user's report).
	for i := range 5 {
		sid := c.newSession()
		c.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"chat.send","params":{"sessionId":%q,"prompt":"first"}}`, 900+2*i, sid))
		c.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"chat.send","params":{"sessionId":%q,"prompt":"second"}}`, 901+2*i, sid))
		for range 2 {
			require.Nil(t, decodeObj(t, c.nextAnswer())["error"])
		}
		c.runSignals(sid)
		c.runSignals(sid)
		assert.Equal(t, "first", c.result("sessions.get", fmt.Sprintf(`{"sessionId":%q}`, sid))["title"], "try %d", i)
	}
}

// TestHealthAnswersHEAD: load balancers probe with HEAD as well as GET.
func TestHealthAnswersHEAD(t *testing.T) {
	e := newEnv(t, nil)
	for _, p := range []string{"/healthz", "/health"} {
		resp, err := http.Head(e.hs.URL + p)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusOK, resp.StatusCode, p)
	}
}

// TestEmptySessionIDIsInvalidParams: a sessionId of "" is a malformed request, not an unknown
// session: every method's params schema says minLength 1, so it answers InvalidParams naming
// /sessionId (it answered -32014 "not found" before). The schema half guards methods added later.
func TestEmptySessionIDIsInvalidParams(t *testing.T) {
	var bundle struct {
		Methods map[string]struct {
			Params struct {
				Properties map[string]struct {
					MinLength *int `json:"minLength"`
				} `json:"properties"`
			} `json:"params"`
		} `json:"methods"`
	}
	require.NoError(t, json.Unmarshal(protocol.BundledSchema, &bundle))
	withID := 0
	for name, m := range bundle.Methods {
		if p, ok := m.Params.Properties["sessionId"]; ok {
			withID++
			require.NotNil(t, p.MinLength, "%s: params/sessionId has no minLength", name)
			require.Equal(t, 1, *p.MinLength, name)
		}
	}
	require.Greater(t, withID, 20)

	e := newEnv(t, nil)
	c := e.dial()
	c.hello()
	sid := c.newSession()
	for _, tc := range []struct{ method, params string }{
		{"chat.send", `{"sessionId":"","prompt":"hi"}`},
		{"chat.cancel", `{"sessionId":""}`},
		{"sessions.get", `{"sessionId":""}`},
		{"sessions.delete", `{"sessionId":""}`},
		{"sessions.loadEvents", `{"sessionId":""}`},
		{"sessions.getTurns", `{"sessionId":""}`},
		{"sessions.resume", `{"sessionId":"","epoch":"x","afterSeq":0}`},
		{"sessions.rename", `{"sessionId":"","title":"t"}`},
	} {
		a := c.call(tc.method, tc.params)
		require.Equal(t, -32602, errCode(a), "%s: %v", tc.method, a)
		er := a["error"].(map[string]any)
		assert.Equal(t, "/sessionId", er["data"].(map[string]any)["pointer"], "%s: %v", tc.method, a)
	}
	c.result("sessions.get", fmt.Sprintf(`{"sessionId":%q}`, sid)) // the connection still works
}
