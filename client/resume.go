package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/zidane-server/zidane/protocol"
)

// This file implements the seed's "Reconnect and resume" for followed sessions: hold the live
// signals of a session while sessions.resume runs, apply the replay, then apply the held signals
// the replay did not carry; on ok:false (epoch, gap) reload with sessions.loadEvents.

// syncTimeout bounds one sessions.resume or sessions.loadEvents of a syncer.
const syncTimeout = 30 * time.Second

// onLive handles a live signal read on w.
func (c *Client) onLive(w *wire, ev SignalEvent) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f := c.follows[ev.SessionID]
	if f == nil || ev.Seq == 0 || ev.SessionID == "" {
		c.enqueueLocked(ev) // not followed, or a signal outside the session's sequence
		return
	}
	if f.syncedGen != w.gen {
		// The session is not (yet) in order on this connection: hold it for its syncer.
		f.held = append(f.held, ev)
		if !f.syncing && c.cur == w {
			c.startSyncLocked(f, w)
		}
		return
	}
	switch {
	case f.seq == FromNow:
		f.seq, f.epoch = ev.Seq, w.epoch
		c.applyLocked(f, ev)
	case ev.Seq <= f.seq:
		// Already applied.
	case ev.Seq == f.seq+1:
		f.seq = ev.Seq
		c.applyLocked(f, ev)
	default:
		// A hole on a live connection: resume from the last applied $seq.
		f.syncedGen = 0
		f.held = append(f.held, ev)
		c.startSyncLocked(f, w)
	}
}

// applyLocked delivers a followed session's signal whose $seq was just taken, and schedules the
// refresh reload at run:end when one is due.
func (c *Client) applyLocked(f *follow, ev SignalEvent) {
	c.enqueueLocked(ev)
	if _, reset := ev.Signal.(*protocol.SessionResetSignal); reset {
		// The transcript changed other than by appending (a rollback, a restore, a compaction):
		// what was shown is reloaded (issue 28).
		f.refresh = false
		f.reload = "reset"
		f.syncedGen = 0
		if c.cur != nil {
			c.startSyncLocked(f, c.cur)
		}
		return
	}
	if _, end := ev.Signal.(*protocol.RunEndSignal); end && f.refresh {
		f.refresh = false
		f.reload = "refresh"
		f.syncedGen = 0
		if c.cur != nil {
			c.startSyncLocked(f, c.cur)
		}
	}
}

// startSyncLocked starts f's syncer on w unless one runs.
func (c *Client) startSyncLocked(f *follow, w *wire) {
	if f.syncing {
		return
	}
	f.syncing = true
	f.syncedGen = 0
	c.loopWG.Add(1)
	go c.syncer(f, w)
}

// syncer brings f in order on w: resume (or reload), then the held signals; it repeats while the
// held signals show a hole, and gives up when w dies (the next connection starts again).
func (c *Client) syncer(f *follow, w *wire) {
	defer c.loopWG.Done()
	reloads := 0
	for {
		c.mu.Lock()
		if !c.liveLocked(f, w) {
			c.endSyncLocked(f, w)
			c.mu.Unlock()
			return
		}
		reason := f.reload
		if reason == "" && f.seq == FromNow {
			reason = "cursor"
		}
		epoch, after := f.epoch, f.seq
		if epoch == "" {
			epoch = w.epoch
		}
		c.mu.Unlock()

		if reason == "" {
			// The result as protocol.SessionsResumeResult, with each replayed signal kept as the
			// bytes the server sent (fields this build does not know survive).
			var res struct {
				OK      bool                    `json:"ok"`
				Reason  *protocol.ResumeFailure `json:"reason"`
				Signals []struct {
					Seq    int64           `json:"seq"`
					Signal json.RawMessage `json:"signal"`
				} `json:"signals"`
			}
			ctx, cancel := context.WithTimeout(c.ctx, syncTimeout)
			err := c.call(ctx, w, protocol.MethodSessionsResume, &protocol.SessionsResumeParams{SessionID: f.id, Epoch: epoch, AfterSeq: after}, &res)
			cancel()
			if err != nil {
				var rpcErr *protocol.Error
				if !errors.As(err, &rpcErr) {
					c.giveUp(f, w)
					return // the connection died: the next one resumes
				}
				reason = "cursor" // the server does not know the cursor (InvalidParams): reload
			} else if !res.OK {
				reason = "gap"
				if res.Reason != nil {
					reason = string(*res.Reason)
				}
			} else {
				c.mu.Lock()
				if !c.liveLocked(f, w) {
					c.endSyncLocked(f, w)
					c.mu.Unlock()
					return
				}
				for _, r := range res.Signals {
					ev, ok := decodeSignal(r.Signal, r.Seq)
					if !ok {
						continue
					}
					ev.Replayed = true
					if ev.Seq == f.seq+1 {
						f.seq = ev.Seq
						c.applyLocked(f, ev)
					}
				}
				f.epoch = w.epoch
				if c.drainHeldLocked(f, w) {
					c.mu.Unlock()
					return
				}
				c.mu.Unlock()
				continue // a hole after the replay: resume again from the last applied
			}
		}

		// Reload: the server cannot fill the gap.
		reloads++
		snap, err := c.loadSnapshot(w, f.id)
		if err != nil {
			var rpcErr *protocol.Error
			if !errors.As(err, &rpcErr) || reloads > 3 {
				c.giveUp(f, w)
				return
			}
			continue
		}
		c.mu.Lock()
		if !c.liveLocked(f, w) {
			c.endSyncLocked(f, w)
			c.mu.Unlock()
			return
		}
		exact := snap.watermark != nil && (snap.epoch == "" || snap.epoch == w.epoch)
		c.enqueueLocked(SignalEvent{SessionID: f.id, Reload: &Reload{SessionID: f.id, Reason: reason, Events: snap.events, Exact: exact}})
		f.reload = ""
		f.epoch = w.epoch
		if exact && reloads <= 3 {
			// The snapshot holds every signal up to the watermark: continue from it (resume
			// fetches what came after, the held signals fill in).
			// Every signal after the watermark was published after the snapshot was read, so
			// after this connection began holding the session's live signals: the held signals
			// complete it without another resume (which, behind a short replay log, could answer
			// gap again and again while the run streams).
			f.seq = *snap.watermark
			f.refresh = false
			if c.drainHeldLocked(f, w) {
				c.mu.Unlock()
				return
			}
			c.mu.Unlock()
			continue
		}
		// Without a watermark the held signals may or may not be in the snapshot: deliver them
		// (a consumer waits for run:end), continue live, and reload once more when the run that
		// streams ends, or at once when it ended while this reload ran.
		f.seq = FromNow
		ended := false
		for _, ev := range f.held {
			if f.seq == FromNow || ev.Seq > f.seq {
				f.seq = ev.Seq
				c.enqueueLocked(ev)
				_, end := ev.Signal.(*protocol.RunEndSignal)
				ended = ended || end
			}
		}
		f.held = nil
		if ended && reloads <= 3 {
			f.reload = "refresh"
			c.mu.Unlock()
			continue
		}
		f.refresh = !ended
		f.syncedGen = w.gen
		f.syncing = false
		c.mu.Unlock()
		return
	}
}

// liveLocked reports whether f is still followed and w is still the live connection.
func (c *Client) liveLocked(f *follow, w *wire) bool {
	return c.follows[f.id] == f && c.cur == w && c.ctx.Err() == nil
}

// giveUp ends a syncer whose connection died.
func (c *Client) giveUp(f *follow, w *wire) {
	c.mu.Lock()
	c.endSyncLocked(f, w)
	c.mu.Unlock()
}

// endSyncLocked ends f's syncer on w, which is no longer f's connection to sync on. When a newer
// connection became current while it ran, that connection's serve found the syncer busy and
// started none: start it now, or the session would wait for its next live signal to resume.
func (c *Client) endSyncLocked(f *follow, w *wire) {
	f.syncing = false
	if c.follows[f.id] == f && c.cur != nil && c.cur != w && c.ctx.Err() == nil && f.syncedGen != c.cur.gen {
		c.startSyncLocked(f, c.cur)
	}
}

// drainHeldLocked applies the held signals that follow f's $seq in order and drops those
// already applied. It reports true when f is in order on w (no hole left); false leaves the
// signals past a hole held.
func (c *Client) drainHeldLocked(f *follow, w *wire) bool {
	held := f.held
	f.held = nil
	for i, ev := range held {
		switch {
		case ev.Seq <= f.seq:
		case ev.Seq == f.seq+1:
			f.seq = ev.Seq
			c.applyLocked(f, ev)
		default:
			f.held = held[i:]
			return false
		}
	}
	if f.reload != "" {
		return false // run:end asked for a refresh while draining
	}
	f.syncedGen = w.gen
	f.syncing = false
	return true
}

// snapshot is a sessions.loadEvents answer with the consistency fields of a reload.
type snapshot struct {
	events    []protocol.StreamEvent
	epoch     string
	watermark *int64
}

// loadSnapshot reads the whole transcript: in one answer, or, when that is too large for one
// message (ResponseTooLarge), page by page from the end (older pages do not change). A server
// that answers the $seq its events are consistent with (and its signalEpoch) makes the reload
// exact; the newest page carries it.
func (c *Client) loadSnapshot(w *wire, sessionID string) (snapshot, error) {
	ctx, cancel := context.WithTimeout(c.ctx, syncTimeout)
	defer cancel()
	params := &protocol.SessionsLoadEventsParams{SessionID: sessionID}
	var s snapshot
	var pages [][]protocol.StreamEvent
	limit := 0
	for {
		var raw json.RawMessage
		err := c.call(ctx, w, protocol.MethodSessionsLoadEvents, params, &raw)
		var rpcErr *protocol.Error
		if errors.As(err, &rpcErr) && rpcErr.Code == protocol.CodeResponseTooLarge && limit != 1 {
			switch {
			case limit == 0:
				limit = 200
			default:
				limit /= 2
			}
			params.Limit = &limit
			continue
		}
		if err != nil {
			return snapshot{}, err
		}
		var res protocol.SessionsLoadEventsResult
		if err := json.Unmarshal(raw, &res); err != nil {
			return snapshot{}, fmt.Errorf("zidane client: decode sessions.loadEvents: %w", err)
		}
		if pages == nil {
			// The newest page's watermark: every signal up to $seq of signalEpoch is in the events.
			var extra struct {
				SignalEpoch string `json:"signalEpoch"`
				Seq         *int64 `json:"$seq"`
			}
			_ = json.Unmarshal(raw, &extra)
			s.epoch, s.watermark = extra.SignalEpoch, extra.Seq
		}
		pages = append(pages, res.Events)
		if limit == 0 || res.Cursor == nil {
			break
		}
		params.Before = res.Cursor
	}
	s.events = []protocol.StreamEvent{}
	for i := len(pages) - 1; i >= 0; i-- {
		s.events = append(s.events, pages[i]...)
	}
	return s, nil
}

// enqueueLocked adds ev to the delivery queue.
func (c *Client) enqueueLocked(ev SignalEvent) {
	c.queue = append(c.queue, ev)
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// deliver feeds the Signals channel from the queue, in order. On Close it stops at once; on
// another terminal state it delivers what is queued, then closes the channel.
func (c *Client) deliver() {
	defer c.loopWG.Done()
	defer close(c.signals)
	for {
		c.mu.Lock()
		q := c.queue
		c.queue = nil
		stopped := c.ctx.Err() != nil
		c.mu.Unlock()
		if len(q) == 0 {
			if stopped {
				return
			}
			select {
			case <-c.wake:
			case <-c.ctx.Done():
			}
			continue
		}
		for _, ev := range q {
			select {
			case c.signals <- ev:
			case <-c.closedC:
				return
			}
		}
	}
}
