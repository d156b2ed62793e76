package agent

import (
	"context"
	"sort"
	"sync"
	"time"

	"github.com/zidane-server/zidane/protocol"
)

// maxCachedConversations bounds the conversations kept in memory; past it the least recently
// used one of a session without a run is dropped (and read from the store again when needed).
const maxCachedConversations = 256

// conversations keeps the transcript of each active session in memory, as closed events (streamed
// pieces merged into blocks, exactly as the store keeps them), so a model turn builds its request
// without reading the store and never misses a batched write (issue 8, "History"). A session's
// events are read from the store once, at its first run after a start.
type conversations struct {
	mu sync.Mutex
	m  map[string]*conversation
}

type conversation struct {
	events []protocol.StreamEvent // closed events
	// The block still streaming, if openKind is set: it follows events.
	openKind, openTurn string
	openText           chunkedText
	used               time.Time
	// hist is historyPrefix(events[:histN]), counted, where events[histN] is a user prompt (or
	// histN is 0): a turn rebuilds only the history after it (history), not the whole session's.
	hist  countedHistory
	histN int
}

// closeOpen moves the open block, if any, to events.
func (c *conversation) closeOpen() {
	if c.openKind != "" {
		c.events = append(c.events, blockEvent(c.openKind, c.openTurn, c.openText.String()))
		c.openKind, c.openTurn, c.openText = "", "", chunkedText{}
	}
}

func newConversations() *conversations { return &conversations{m: map[string]*conversation{}} }

// load makes sure the session's conversation is in memory, reading it with read (the store, after
// a flush) when it is not. keep says which sessions must not be evicted.
func (cs *conversations) load(ctx context.Context, sessionID string, read func(context.Context) ([]protocol.StreamEvent, error), keep func(string) bool) error {
	cs.mu.Lock()
	if c := cs.m[sessionID]; c != nil {
		c.used = time.Now()
		cs.mu.Unlock()
		return nil
	}
	cs.mu.Unlock()
	evs, err := read(ctx)
	if err != nil {
		return err
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.m[sessionID] == nil {
		cs.m[sessionID] = &conversation{events: evs, used: time.Now()}
	}
	if len(cs.m) > maxCachedConversations {
		ids := make([]string, 0, len(cs.m))
		for id := range cs.m {
			ids = append(ids, id)
		}
		sort.Slice(ids, func(i, j int) bool { return cs.m[ids[i]].used.Before(cs.m[ids[j]].used) })
		for _, id := range ids {
			if len(cs.m) <= maxCachedConversations {
				break
			}
			if id != sessionID && !keep(id) {
				delete(cs.m, id)
			}
		}
	}
	return nil
}

// add appends an event of a session whose conversation is in memory (others are read whole at
// their next load). Streamed pieces extend the open block like the transcript writer does.
func (cs *conversations) add(sessionID string, ev protocol.StreamEvent) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	c := cs.m[sessionID]
	if c == nil {
		return
	}
	kind, turnID, text, ok := streamedPiece(ev)
	if !ok || kind != c.openKind || turnID != c.openTurn {
		c.closeOpen()
	}
	if !ok {
		c.events = append(c.events, ev)
		return
	}
	c.openKind, c.openTurn = kind, turnID
	c.openText.add(text)
}

// closeBlock ends the session's open block: the next piece starts a new one.
func (cs *conversations) closeBlock(sessionID string) {
	cs.mu.Lock()
	if c := cs.m[sessionID]; c != nil {
		c.closeOpen()
	}
	cs.mu.Unlock()
}

// snapshot returns the session's events so far (nil when not in memory). The slice is the
// caller's; the events are never changed.
func (cs *conversations) snapshot(sessionID string) []protocol.StreamEvent {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	c := cs.m[sessionID]
	if c == nil {
		return nil
	}
	c.used = time.Now()
	out := append(make([]protocol.StreamEvent, 0, len(c.events)+1), c.events...)
	if c.openKind != "" {
		out = append(out, blockEvent(c.openKind, c.openTurn, c.openText.String()))
	}
	return out
}

// history returns the session's provider history, historyFrom(snapshot(sessionID)), counted,
// rebuilding only what follows the last user prompt it had seen: a long session's every turn
// rebuilt it whole (the fan-out figure's CPU profile of docs/benchmarks.md).
func (cs *conversations) history(sessionID string) countedHistory {
	cs.mu.Lock()
	c := cs.m[sessionID]
	if c == nil {
		cs.mu.Unlock()
		return countedHistory{}
	}
	c.used = time.Now()
	k := len(c.events) - 1
	comp := -1 // the last compaction after the cached prefix
	for i := k; i >= c.histN; i-- {
		if _, ok := c.events[i].(*protocol.CompactionEvent); ok {
			comp = i
			break
		}
	}
	for k > c.histN {
		if _, ok := c.events[k].(*protocol.UserPromptEvent); ok {
			break
		}
		k--
	}
	if comp >= k || (comp >= 0 && k <= c.histN) {
		// A compaction in the last exchange replaces what came before it, the cached prefix
		// too: the history is built whole until the next prompt.
		evs := c.events
		if c.openKind != "" {
			evs = append(append(make([]protocol.StreamEvent, 0, len(evs)+1), evs...), blockEvent(c.openKind, c.openTurn, c.openText.String()))
		}
		var out countedHistory
		out.add(historyFrom(evs)...)
		cs.mu.Unlock()
		return out
	}
	if k > c.histN {
		if comp >= 0 { // a compaction in the new prefix replaces the cached one
			c.hist, c.histN = countedHistory{}, 0
		}
		c.hist.add(historyPrefix(c.events[c.histN:k])...)
		c.histN = k
	}
	tail := append(make([]protocol.StreamEvent, 0, len(c.events)-c.histN+1), c.events[c.histN:]...)
	if c.openKind != "" {
		tail = append(tail, blockEvent(c.openKind, c.openTurn, c.openText.String()))
	}
	// The tail's messages are written after the prefix, into the cache's spare capacity: copying
	// a long session's whole history per turn was 14 % of a run's CPU at 1500 runs (the chat.send
	// figures of docs/benchmarks.md). The history returned is valid until the session's next
	// history call, which reuses that space: turns call it one at a time, and a turn's request is
	// done with when the next turn begins.
	out := c.hist
	out.add(historyFrom(tail)...)
	c.hist = out.head(len(c.hist.msgs)) // grown: the cache moves to the new arrays, with their room
	cs.mu.Unlock()
	return out
}

// forget drops a session's conversation (it was deleted).
func (cs *conversations) forget(sessionID string) {
	cs.mu.Lock()
	delete(cs.m, sessionID)
	cs.mu.Unlock()
}
