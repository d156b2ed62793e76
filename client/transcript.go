package client

import "github.com/zidane-server/zidane/protocol"

// Transcript rebuilds one session's transcript from its signal stream with the server's rule
// (schema chat.json StreamEvent): a markdown event with streaming true, or a streaming thinking
// event, extends the open block of the same kind and turn; any other event closes it and is its
// own row; turn:end and run:end close it. Blocks are kept with streaming false, as
// sessions.loadEvents answers them, so after a run:end Events equals sessions.loadEvents.
// A Reload replaces everything. It is not safe for concurrent use.
type Transcript struct {
	// SessionID is the session whose signals Apply takes; others are ignored.
	SessionID string
	events    []protocol.StreamEvent
	open      int // index of the open block in events; -1 when none
	openKind  string
	openTurn  string
}

// NewTranscript returns an empty transcript of sessionID.
func NewTranscript(sessionID string) *Transcript {
	return &Transcript{SessionID: sessionID, open: -1}
}

// Events returns the transcript's events (shared: do not modify them).
func (t *Transcript) Events() []protocol.StreamEvent {
	if t.events == nil {
		return []protocol.StreamEvent{}
	}
	return t.events
}

// Apply takes one item of Client.Signals.
func (t *Transcript) Apply(ev SignalEvent) {
	if ev.SessionID != t.SessionID {
		return
	}
	if ev.Reload != nil {
		t.events = append([]protocol.StreamEvent(nil), ev.Reload.Events...)
		t.open = -1
		// A block the run still streams ends the snapshot with streaming true: it stays open, so
		// the pieces signalled after the watermark extend it.
		if n := len(t.events); n > 0 {
			last := t.events[n-1]
			t.events = t.events[:n-1]
			t.add(last)
		}
		return
	}
	switch s := ev.Signal.(type) {
	case *protocol.EventSignal:
		t.add(s.Event)
	case *protocol.TurnEndSignal, *protocol.RunEndSignal:
		t.open = -1
	}
}

func (t *Transcript) add(e protocol.StreamEvent) {
	kind, turn, text, streaming := "", "", "", false
	switch x := e.(type) {
	case *protocol.MarkdownEvent:
		kind, turn, text, streaming = "markdown", x.TurnID, x.Text, x.Streaming
	case *protocol.ThinkingEvent:
		kind, turn, text, streaming = "thinking", x.TurnID, x.Text, x.Streaming
	}
	if !streaming {
		t.open = -1
		t.events = append(t.events, e)
		return
	}
	if t.open >= 0 && t.openKind == kind && t.openTurn == turn {
		switch b := t.events[t.open].(type) {
		case *protocol.MarkdownEvent:
			nb := *b
			nb.Text += text
			t.events[t.open] = &nb
		case *protocol.ThinkingEvent:
			nb := *b
			nb.Text += text
			t.events[t.open] = &nb
		}
		return
	}
	var block protocol.StreamEvent
	if kind == "thinking" {
		x := *e.(*protocol.ThinkingEvent)
		x.Streaming = false
		block = &x
	} else {
		x := *e.(*protocol.MarkdownEvent)
		x.Streaming = false
		block = &x
	}
	t.events = append(t.events, block)
	t.open, t.openKind, t.openTurn = len(t.events)-1, kind, turn
}
