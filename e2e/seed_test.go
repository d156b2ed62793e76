package e2e

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zidane-server/zidane/server/store/storetest"
)

// TestSeedHelloSaysWhatTheServerOffers (issue 22 item 9, seed "Handshake"): ipc.hello says
// sync: true (drafts, prefs and the sidebar are shared) and machineServe: true (machine tokens
// are served), and adminCommands name the binary and the data dir by absolute paths, so the
// command they show works from any folder: run from another folder, it mints an admin token.
func TestSeedHelloSaysWhatTheServerOffers(t *testing.T) {
	s := startServer(t, serverOpts{dbURL: storetest.URL(t)})
	c := dial(t, s, s.mintToken("seed-hello", "chat"))
	var h struct {
		Sync          *bool `json:"sync"`
		MachineServe  *bool `json:"machineServe"`
		AdminCommands struct {
			Token string `json:"token"`
			Pair  string `json:"pair"`
		} `json:"adminCommands"`
	}
	c.result("ipc.hello", map[string]any{"protocolVersion": protoVersion}, &h)
	require.NotNil(t, h.Sync)
	assert.True(t, *h.Sync)
	require.NotNil(t, h.MachineServe)
	assert.True(t, *h.MachineServe)
	for _, cmd := range []string{h.AdminCommands.Token, h.AdminCommands.Pair} {
		bin, _, _ := strings.Cut(cmd, " ")
		assert.True(t, filepath.IsAbs(strings.Trim(bin, "'")), "the binary by its absolute path: %s", cmd)
		assert.Contains(t, cmd, "--database-url ", "the server runs on DATABASE_URL: the command names it")
	}
	// The token command, as shown, works from another folder (it names a redacted URL only when
	// the URL holds a password; the test database's has none).
	run := exec.Command("sh", "-c", strings.Replace(h.AdminCommands.Token, "--name admin", "--name seed-admin", 1))
	run.Dir = t.TempDir()
	run.Env = env(true)
	out, err := run.CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Contains(t, string(out), "zds_")
}

// TestSeedLoadEventsWholeTranscript (issue 22 item 9, seed "Paging"): sessions.loadEvents
// without before or limit answers the whole transcript as its events array, with no cursor and
// the same watermark as a page; the pages of the same transcript put together equal it.
func TestSeedLoadEventsWholeTranscript(t *testing.T) {
	s := startServer(t, serverOpts{dbURL: storetest.URL(t)})
	c := dial(t, s, s.mintToken("seed-load", "chat"))
	c.hello()
	sid, _ := createSession(t, c)
	for _, p := range []string{"One.", "Two.", "Three."} {
		waitRunEnd(t, c, func() {}, sendPrompt(t, c, sid, p))
	}
	type page struct {
		Events      []json.RawMessage `json:"events"`
		Cursor      *int              `json:"cursor"`
		Start       int               `json:"start"`
		SignalEpoch string            `json:"signalEpoch"`
		Seq         int64             `json:"$seq"`
	}
	var whole page
	c.result("sessions.loadEvents", map[string]any{"sessionId": sid}, &whole)
	assert.Nil(t, whole.Cursor, "the whole transcript has no cursor")
	assert.Zero(t, whole.Start)
	require.NotEmpty(t, whole.Events)
	assert.Positive(t, whole.Seq)

	var pages [][]json.RawMessage
	var before *int
	for {
		args := map[string]any{"sessionId": sid, "limit": 1}
		if before != nil {
			args["before"] = *before
		}
		var p page
		c.result("sessions.loadEvents", args, &p)
		assert.Equal(t, whole.SignalEpoch, p.SignalEpoch)
		assert.Equal(t, whole.Seq, p.Seq, "a page's watermark is the whole answer's")
		pages = append([][]json.RawMessage{p.Events}, pages...)
		if p.Cursor == nil {
			break
		}
		before = p.Cursor
	}
	require.Greater(t, len(pages), 1)
	var joined []json.RawMessage
	for _, p := range pages {
		joined = append(joined, p...)
	}
	a, _ := json.Marshal(joined)
	b, _ := json.Marshal(whole.Events)
	assert.JSONEq(t, string(b), string(a), "the pages put together are the whole transcript")
}
