package server

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zidane-server/zidane/protocol"
)

// publishN publishes n run:start signals of session sid (padded to about pad bytes each) and
// returns the last $seq.
func publishN(t *testing.T, h *hub, sid string, n, pad int) int64 {
	t.Helper()
	var seq int64
	for i := 0; i < n; i++ {
		run := fmt.Sprintf("run-%d-%s", i, strings.Repeat("x", pad))
		s, err := h.publish(&protocol.RunStartSignal{SessionID: sid, RunID: run}, nil, "")
		require.NoError(t, err)
		seq = s
	}
	return seq
}

// resume calls sessions.resume over the WebSocket and returns ok, reason and the replayed $seqs.
func resume(c *testConn, sid, epoch string, after int64) (bool, string, []int64) {
	c.t.Helper()
	r := c.result("sessions.resume", fmt.Sprintf(`{"sessionId":%q,"epoch":%q,"afterSeq":%d}`, sid, epoch, after))
	ok, _ := r["ok"].(bool)
	reason, _ := r["reason"].(string)
	var seqs []int64
	sigs, _ := r["signals"].([]any)
	for _, x := range sigs {
		n, _ := x.(map[string]any)["seq"].(interface{ Int64() (int64, error) }).Int64()
		seqs = append(seqs, n)
	}
	return ok, reason, seqs
}

func seqRange(from, to int64) []int64 {
	var out []int64
	for i := from; i <= to; i++ {
		out = append(out, i)
	}
	return out
}

// TestReplayGapAfterEachLimit: each eviction limit of the replay log (per-session count,
// per-session bytes, total bytes) turns a resume from before the evicted signals into
// ok:false reason gap, while a resume after them replays exactly the kept ones.
func TestReplayGapAfterEachLimit(t *testing.T) {
	e := newEnv(t, func(c *Config) {
		c.Limits.Replay = ReplayLimits{PerSessionSignals: 10, PerSessionBytes: 4 << 10, TotalBytes: 16 << 10}
	})
	c, _ := e.dialScoped("chat")
	h := e.srv.hub

	t.Run("per-session count", func(t *testing.T) {
		sid := c.newSession()
		last := publishN(t, h, sid, 15, 0) // 10 kept: 6..15
		ok, reason, _ := resume(c, sid, e.srv.epoch, 4)
		assert.False(t, ok)
		assert.Equal(t, "gap", reason)
		ok, _, seqs := resume(c, sid, e.srv.epoch, 5)
		assert.True(t, ok)
		assert.Equal(t, seqRange(6, last), seqs)
	})
	t.Run("per-session bytes", func(t *testing.T) {
		sid := c.newSession()
		last := publishN(t, h, sid, 8, 900) // ~1 KiB each: 4 KiB keeps 3 or 4 of them
		ok, reason, _ := resume(c, sid, e.srv.epoch, 0)
		assert.False(t, ok)
		assert.Equal(t, "gap", reason)
		ok, _, seqs := resume(c, sid, e.srv.epoch, last-3)
		assert.True(t, ok, "the newest ones are kept")
		assert.Equal(t, seqRange(last-2, last), seqs)
	})
	t.Run("total bytes", func(t *testing.T) {
		old := c.newSession()
		publishN(t, h, old, 3, 900)
		ok, _, seqs := resume(c, old, e.srv.epoch, 0)
		require.True(t, ok)
		require.Len(t, seqs, 3)
		for i := 0; i < 6; i++ { // later sessions fill the 16 KiB total; the least recently written goes
			publishN(t, h, c.newSession(), 3, 900)
		}
		ok, reason, _ := resume(c, old, e.srv.epoch, 0)
		assert.False(t, ok)
		assert.Equal(t, "gap", reason)
		// Nothing was missed after its last $seq: still ok and empty.
		ok, _, seqs = resume(c, old, e.srv.epoch, 3)
		assert.True(t, ok)
		assert.Empty(t, seqs)
	})
}

// TestReplayEpochAndNewestSeq: a resume from the newest $seq replays nothing; one with another
// epoch (the previous server process) answers reason epoch; a new server on the same database
// has a new epoch, so a client from the old one reloads (issue 7 "epoch after a restart").
func TestReplayEpochAndNewestSeq(t *testing.T) {
	e := newEnv(t, nil)
	c, _ := e.dialScoped("chat")
	sid := c.newSession()
	last := publishN(t, e.srv.hub, sid, 5, 0)
	ok, _, seqs := resume(c, sid, e.srv.epoch, last)
	assert.True(t, ok)
	assert.Empty(t, seqs, "resume from the newest $seq")
	ok, _, seqs = resume(c, sid, e.srv.epoch, last-2)
	assert.True(t, ok)
	assert.Equal(t, seqRange(last-1, last), seqs)
	m := c.call("sessions.resume", fmt.Sprintf(`{"sessionId":%q,"epoch":%q,"afterSeq":%d}`, sid, e.srv.epoch, last+1))
	assert.Equal(t, -32602, errCode(m), "a cursor past the newest $seq")

	// A restart: another Server on the same store.
	e2 := newEnvOn(t, e)
	require.NotEqual(t, e.srv.epoch, e2.srv.epoch)
	c2, _ := e2.dialScoped("chat")
	ok, reason, _ := resume(c2, sid, e.srv.epoch, last)
	assert.False(t, ok)
	assert.Equal(t, "epoch", reason)
}
