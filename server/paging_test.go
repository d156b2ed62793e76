package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zidane-server/zidane/server/store/storetest"
)

// canon re-encodes a decoded JSON value (object keys sorted), to compare events byte for byte.
func canon(t *testing.T, v any) string {
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

// pageStats prints how long the pages of a walk took (no timed assertion: the machine is shared).
func pageStats(t *testing.T, name string, d []time.Duration) {
	var total, worst time.Duration
	for _, x := range d {
		total += x
		worst = max(worst, x)
	}
	t.Logf("%s: %d pages, %v in all, %v per page on average, slowest %v", name, len(d), total, total/time.Duration(len(d)), worst)
}

// checkExchanges fails when a page holds a tool-result whose tool call is not in the page.
func checkExchanges(t *testing.T, name string, page []map[string]any) {
	calls := map[string]bool{}
	for _, e := range page {
		if e["kind"] == "tool" {
			calls[e["callId"].(string)] = true
		}
	}
	for _, e := range page {
		if e["kind"] == "tool-result" && !calls[e["callId"].(string)] {
			t.Fatalf("%s: the tool-result of %v is on a page without its call", name, e["callId"])
		}
	}
}

func asEvents(v any) []map[string]any {
	out := []map[string]any{}
	for _, e := range v.([]any) {
		out = append(out, e.(map[string]any))
	}
	return out
}

// TestPagingTenThousandTurns walks every page of sessions.loadEvents (backwards, by cursor) and
// sessions.getTurns (forwards, by next) of a 10,000-turn transcript over a real WebSocket, with
// limits that put tool calls exactly on page edges (storetest.BigTranscript splits one exchange
// in five over two turns): the pages put together are the transcript, nothing missing or twice,
// and no page holds a tool-result without its call (issue 7, item 8). A page over the message
// size answers ResponseTooLarge.
func TestPagingTenThousandTurns(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.Limits.MaxMessageBytes = 64 << 10 })
	c := e.dial()
	c.hello()
	sid := c.newSession()
	rows := storetest.BigTranscript(sid, 10000)
	t0 := time.Now()
	for i := 0; i < len(rows); i += 5000 {
		require.NoError(t, e.st.AppendEvents(context.Background(), rows[i:min(i+5000, len(rows))]))
	}
	t.Logf("loaded %d events in %d turns in %v", len(rows), 10000, time.Since(t0))
	want := make([]string, len(rows))
	for i, r := range rows {
		var v any
		d := json.NewDecoder(bytes.NewReader(r.Body))
		d.UseNumber()
		require.NoError(t, d.Decode(&v))
		want[i] = canon(t, v)
	}

	for _, limit := range []int{7, 202, 1000} {
		// sessions.loadEvents, from the end backwards.
		var pages [][]map[string]any
		var times []time.Duration
		params := fmt.Sprintf(`{"sessionId":%q,"limit":%d}`, sid, limit)
		for {
			t1 := time.Now()
			m := c.call("sessions.loadEvents", params)
			times = append(times, time.Since(t1))
			if limit == 1000 {
				require.Equal(t, -32012, errCode(m), "a page over the message size: %v", m["error"])
				break
			}
			require.Nil(t, m["error"], "%v", m["error"])
			r := m["result"].(map[string]any)
			assert.Equal(t, e.srv.hub.epoch, r["signalEpoch"])
			assert.Equal(t, json.Number("0"), r["$seq"])
			page := asEvents(r["events"])
			checkExchanges(t, fmt.Sprintf("loadEvents limit %d page %d", limit, len(pages)), page)
			pages = append(pages, page)
			cur, ok := r["cursor"]
			if !ok {
				break
			}
			params = fmt.Sprintf(`{"sessionId":%q,"limit":%d,"before":%s}`, sid, limit, cur)
			require.Less(t, len(pages), 20000, "the walk ends")
		}
		if limit == 1000 {
			continue
		}
		got := []string{}
		for i := len(pages) - 1; i >= 0; i-- {
			for _, ev := range pages[i] {
				got = append(got, canon(t, ev))
			}
		}
		require.Equal(t, len(want), len(got), "loadEvents limit %d", limit)
		require.Equal(t, want, got, "loadEvents limit %d: the pages make the transcript", limit)
		pageStats(t, fmt.Sprintf("loadEvents limit %d", limit), times)

		// sessions.getTurns, from the start forwards.
		got, times = got[:0], nil
		pos := 0
		params = fmt.Sprintf(`{"sessionId":%q,"limit":%d}`, sid, limit)
		for n := 0; ; n++ {
			t1 := time.Now()
			m := c.call("sessions.getTurns", params)
			times = append(times, time.Since(t1))
			require.Nil(t, m["error"], "%v", m["error"])
			r := m["result"].(map[string]any)
			assert.Equal(t, json.Number("10000"), r["total"])
			var page []map[string]any
			for _, x := range r["turns"].([]any) {
				turn := x.(map[string]any)
				require.Equal(t, json.Number(fmt.Sprint(pos)), turn["position"], "turns in order, none missing or twice")
				require.Equal(t, fmt.Sprintf("t%d", pos), turn["turnId"])
				role := "assistant"
				if pos%5 == 0 {
					role = "user"
				}
				require.Equal(t, role, turn["role"])
				pos++
				page = append(page, asEvents(turn["events"])...)
			}
			checkExchanges(t, fmt.Sprintf("getTurns limit %d page %d", limit, n), page)
			for _, ev := range page {
				got = append(got, canon(t, ev))
			}
			next, ok := r["next"]
			if !ok {
				break
			}
			require.Equal(t, json.Number(fmt.Sprint(pos)), next)
			params = fmt.Sprintf(`{"sessionId":%q,"limit":%d,"from":%s}`, sid, limit, next)
		}
		require.Equal(t, 10000, pos)
		require.Equal(t, want, got, "getTurns limit %d: the pages make the transcript", limit)
		pageStats(t, fmt.Sprintf("getTurns limit %d", limit), times)
	}

	m := c.call("sessions.getTurns", fmt.Sprintf(`{"sessionId":%q,"limit":1000}`, sid))
	require.Equal(t, -32012, errCode(m), "a getTurns page over the message size: %v", m["error"])
	m = c.call("sessions.getTurns", fmt.Sprintf(`{"sessionId":%q,"limit":0}`, sid))
	require.Equal(t, -32602, errCode(m), "limit below 1: %v", m["error"])
	m = c.call("sessions.getTurns", fmt.Sprintf(`{"sessionId":%q,"from":-1}`, sid))
	require.Equal(t, -32602, errCode(m), "from below 0: %v", m["error"])
	r := c.result("sessions.getTurns", fmt.Sprintf(`{"sessionId":%q,"from":20000}`, sid))
	assert.Empty(t, r["turns"], "past the end: an empty page")
	assert.NotContains(t, r, "next")
}
