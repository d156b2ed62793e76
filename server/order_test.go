package server

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/zidane-server/zidane/server/store"
)

// Two prompts pipelined on one connection run in the order sent, even when the first waits
// before its run can start (here: its model change waits on a row another database client
// holds, so the read loop hands it off and reads the second meanwhile), and a chat.cancel sent
// right behind them finds the first's run (CI once saw the second prompt start first).
func TestPipelinedPromptsKeepTheirOrder(t *testing.T) {
	url, _, e := ownStoreEnv(t, store.Options{}, func(c *Config) { c.StepDelay = 100 * time.Millisecond })
	a := e.dial()
	a.hello()
	sid := a.newSession()
	release := lockSessions(t, url, sid)
	a.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"chat.send","params":{"sessionId":%q,"prompt":"first","model":"scripted/scripted"}}`, sid))
	a.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"chat.send","params":{"sessionId":%q,"prompt":"second"}}`, sid))
	a.send(`{"jsonrpc":"2.0","id":3,"method":"$/ping","params":{}}`)
	requireID(t, decodeObj(t, a.nextAnswer()), `3`) // read and answered while the prompts wait
	a.expectNothing(200 * time.Millisecond)
	release()

	answers := map[string]map[string]any{}
	for len(answers) < 2 {
		m := decodeObj(t, a.nextAnswer())
		answers[fmt.Sprint(m["id"])] = m
	}
	require.Nil(t, answers["1"]["error"], "%v", answers["1"])
	require.Nil(t, answers["2"]["error"], "%v", answers["2"])
	for _, want := range []string{"first", "second"} {
		sigs := a.runSignals(sid)
		var prompt string
		for _, s := range sigs {
			if strings.Contains(string(s.raw), `"user-prompt"`) {
				prompt = string(s.raw)
				break
			}
		}
		require.Contains(t, prompt, fmt.Sprintf(`"text":%q`, want), "runs out of order")
		require.Contains(t, string(sigs[len(sigs)-1].raw), `"ok":true`)
	}

	// A cancel pipelined behind a prompt whose start waits cancels that prompt's run.
	release = lockSessions(t, url, sid)
	a.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":4,"method":"chat.send","params":{"sessionId":%q,"prompt":"third","model":"scripted/scripted"}}`, sid))
	a.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":5,"method":"chat.cancel","params":{"sessionId":%q}}`, sid))
	time.Sleep(200 * time.Millisecond)
	release()
	answers = map[string]map[string]any{}
	for len(answers) < 2 {
		m := decodeObj(t, a.nextAnswer())
		answers[fmt.Sprint(m["id"])] = m
	}
	require.Equal(t, true, answers["5"]["result"].(map[string]any)["cancelled"], "%v", answers["5"])
	sigs := a.runSignals(sid)
	require.Contains(t, string(sigs[len(sigs)-1].raw), "cancelled")

	// The same cancel sent as a notification: it waits for the prompt as the request did, and the
	// read loop does not wait with it (a break-it helper saw pings, and so pongs, go unread).
	release = lockSessions(t, url, sid)
	a.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":6,"method":"chat.send","params":{"sessionId":%q,"prompt":"fourth","model":""}}`, sid)) // back to the default: a write again
	a.send(fmt.Sprintf(`{"jsonrpc":"2.0","method":"chat.cancel","params":{"sessionId":%q}}`, sid))
	a.send(`{"jsonrpc":"2.0","id":7,"method":"$/ping","params":{}}`)
	requireID(t, decodeObj(t, a.nextAnswer()), `7`) // before the release: read while the prompt waits
	release()
	requireID(t, decodeObj(t, a.nextAnswer()), `6`)
	sigs = a.runSignals(sid)
	require.Contains(t, string(sigs[len(sigs)-1].raw), "cancelled")
}
