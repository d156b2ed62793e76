package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/zidane-server/zidane/protocol"
	"github.com/zidane-server/zidane/server/agent/provider"
)

// historyModel drives conversations with a random mix of events over several sessions, calling
// history at random points, evicting and re-reading sessions, and checks every counted history
// against one pass over the whole transcript (historyFrom + trimByPass), and that the history a
// session's last call returned is intact until that session's next call (other sessions' calls,
// adds and evictions must not touch it).
type historyModel struct {
	t     testing.TB
	cs    *conversations
	next  func(n int) int // random in [0, n)
	held  map[string]heldHistory
	turns int
	calls map[string][]string // open call ids of a session's current turn
	turn  map[string]string
}

type heldHistory struct {
	h    countedHistory
	msgs []provider.Message // deep copy of h.msgs at return
	cum  []int
	st   []int
}

func deepMsgs(ms []provider.Message) []provider.Message {
	if ms == nil {
		return nil
	}
	out := make([]provider.Message, len(ms))
	for i, m := range ms {
		m.ToolCalls = append([]provider.ToolCall(nil), m.ToolCalls...)
		out[i] = m
	}
	return out
}

func newHistoryModel(t testing.TB, next func(int) int) *historyModel {
	return &historyModel{t: t, cs: newConversations(), next: next, held: map[string]heldHistory{},
		calls: map[string][]string{}, turn: map[string]string{}}
}

func (hm *historyModel) ensure(sid string, evs []protocol.StreamEvent) {
	require.NoError(hm.t, hm.cs.load(context.Background(), sid, func(context.Context) ([]protocol.StreamEvent, error) {
		return evs, nil
	}, func(string) bool { return false }))
}

// text returns a text of a random size: sometimes empty, sometimes large.
func (hm *historyModel) text(prefix string) string {
	switch hm.next(6) {
	case 0:
		return ""
	case 1:
		return prefix + strings.Repeat("x", hm.next(2000))
	default:
		return prefix + strings.Repeat("y", hm.next(40))
	}
}

func (hm *historyModel) newTurn(sid string) string {
	hm.turns++
	hm.turn[sid] = fmt.Sprintf("t%d", hm.turns)
	hm.calls[sid] = nil
	return hm.turn[sid]
}

func (hm *historyModel) randomEvent(sid string) protocol.StreamEvent {
	turn := hm.turn[sid]
	if turn == "" || hm.next(5) == 0 {
		turn = hm.newTurn(sid)
	}
	isErr := true
	switch hm.next(12) {
	case 0, 1:
		hm.newTurn(sid)
		return &protocol.UserPromptEvent{Text: hm.text("p"), TurnID: hm.turn[sid]}
	case 2:
		return &protocol.MarkdownEvent{Text: hm.text("m"), Streaming: hm.next(2) == 0, TurnID: turn}
	case 3:
		return &protocol.ThinkingEvent{Text: hm.text("th"), Streaming: hm.next(2) == 0, TurnID: turn}
	case 4, 5:
		id := fmt.Sprintf("c%d", hm.next(1000000))
		hm.calls[sid] = append(hm.calls[sid], id)
		in := `{"q":"` + hm.text("a") + `"}`
		if hm.next(6) == 0 {
			in = "not json"
		}
		return &protocol.ToolEvent{Tool: "lookup", CallID: id, Input: json.RawMessage(in), TurnID: turn}
	case 6, 7:
		id := "orphan"
		if cs := hm.calls[sid]; len(cs) > 0 && hm.next(5) != 0 {
			id = cs[hm.next(len(cs))]
		}
		ev := &protocol.ToolResultEvent{Tool: "lookup", CallID: id, Text: hm.text("r"), TurnID: turn}
		if hm.next(4) == 0 {
			ev.IsError = &isErr
		}
		return ev
	case 8:
		return &protocol.ErrorEvent{Message: "boom"}
	case 9:
		return &protocol.RunSummaryEvent{Text: "s", TurnID: turn}
	default:
		return &protocol.MarkdownEvent{Text: hm.text("m"), Streaming: true, TurnID: turn}
	}
}

func (hm *historyModel) checkHeld() {
	for sid, hh := range hm.held {
		require.Equal(hm.t, hh.msgs, hh.h.msgs, "session %s: the history its last call returned changed before its next call", sid)
		require.Equal(hm.t, hh.cum, hh.h.cum, "session %s: cum changed", sid)
		require.Equal(hm.t, hh.st, hh.h.starts, "session %s: starts changed", sid)
	}
}

func (hm *historyModel) check(sid string) {
	t := hm.t
	whole := historyFrom(hm.cs.snapshot(sid))
	h := hm.cs.history(sid)
	hm.held[sid] = heldHistory{h: h, msgs: deepMsgs(h.msgs), cum: append([]int(nil), h.cum...), st: append([]int(nil), h.starts...)}
	requireCountedAgrees(t, whole, h, "session "+sid, func(total int) []int {
		var out []int
		for range 40 {
			out = append(out, hm.next(total+2))
		}
		return out
	})
}

// step does one random action.
func (hm *historyModel) step(sids []string) {
	sid := sids[hm.next(len(sids))]
	switch r := hm.next(20); {
	case r < 11:
		hm.cs.add(sid, hm.randomEvent(sid))
	case r < 13:
		hm.cs.closeBlock(sid)
	case r < 18:
		hm.check(sid)
	case r == 18:
		// Evicted and re-read from the store: the store holds the closed events (the open
		// block as its checkpoint, streaming once closed).
		evs := hm.cs.snapshot(sid)
		hm.cs.forget(sid)
		hm.ensure(sid, evs)
		if hm.next(2) == 0 {
			hm.check(sid)
		}
	default:
		// Many other sessions come and go: the LRU evicts (keep says no session is running).
		for i := range hm.next(300) {
			hm.ensure(fmt.Sprintf("other-%d", i), nil)
		}
		for _, s := range sids {
			if hm.cs.snapshot(s) == nil {
				hm.ensure(s, nil) // a session evicted before any event was stored
				delete(hm.held, s)
				hm.turn[s], hm.calls[s] = "", nil
			}
		}
	}
	hm.checkHeld()
}

// TestHistoryRandomizedEqualsPass: random events, blocks closed, evictions and re-reads over three
// sessions; every counted history and its trim at many budgets agree with one pass over the whole
// transcript, and a history handed out stays intact until its session's next call.
func TestHistoryRandomizedEqualsPass(t *testing.T) {
	for seed := range uint64(5) {
		rng := rand.New(rand.NewPCG(seed, seed*7+1))
		hm := newHistoryModel(t, func(n int) int {
			if n <= 0 {
				return 0
			}
			return rng.IntN(n)
		})
		sids := []string{"a", "b", "c"}
		for _, s := range sids {
			hm.ensure(s, nil)
		}
		for range 400 {
			hm.step(sids)
		}
		for _, s := range sids {
			hm.check(s)
		}
	}
}

// TestHistoryNoLeadingPrompt: a session whose stored events do not start with a prompt (an event
// that did not decode was left out, or an old transcript): its first message starts an exchange in
// both counts.
func TestHistoryNoLeadingPrompt(t *testing.T) {
	for _, first := range []protocol.StreamEvent{
		&protocol.MarkdownEvent{Text: "orphan answer", TurnID: "x"},
		&protocol.ToolEvent{Tool: "t", CallID: "c0", Input: json.RawMessage(`{}`), TurnID: "x"},
		&protocol.ErrorEvent{Message: "e"},
	} {
		hm := newHistoryModel(t, func(n int) int { return 0 })
		hm.ensure("s", []protocol.StreamEvent{first, &protocol.MarkdownEvent{Text: "more", TurnID: "y"}})
		hm.check("s")
		hm.cs.add("s", &protocol.UserPromptEvent{Text: "p1", TurnID: "p1"})
		hm.check("s")
		hm.cs.add("s", &protocol.MarkdownEvent{Text: "a1", TurnID: "a1"})
		hm.cs.add("s", &protocol.UserPromptEvent{Text: "p2", TurnID: "p2"})
		hm.check("s")
	}
}

// FuzzHistoryCounted: TestHistoryRandomizedEqualsPass with the random actions taken from the
// fuzzer's bytes.
func FuzzHistoryCounted(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19})
	f.Add([]byte(strings.Repeat("\x00\x05\x0f\x02\x11", 30)))
	f.Fuzz(func(t *testing.T, data []byte) {
		i := 0
		hm := newHistoryModel(t, func(n int) int {
			if n <= 0 || i >= len(data) {
				return 0
			}
			b := int(data[i])
			i++
			if n > 256 {
				b *= 8 // large texts and budgets
			}
			return b % n
		})
		sids := []string{"a", "b"}
		for _, s := range sids {
			hm.ensure(s, nil)
		}
		for i < len(data) {
			hm.step(sids)
		}
		for _, s := range sids {
			hm.check(s)
		}
	})
}
