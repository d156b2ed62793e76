package agent

import (
	"github.com/zidane-server/zidane/protocol"
)

// Queue returns the session's queued follow-ups, in the order they will run (queue.list).
func (r *Runtime) Queue(sessionID string) []protocol.QueuedPrompt {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.queueLocked(sessionID)
}

func (r *Runtime) queueLocked(sessionID string) []protocol.QueuedPrompt {
	q := r.pending[sessionID]
	out := make([]protocol.QueuedPrompt, 0, len(q))
	for _, ru := range q {
		out = append(out, protocol.QueuedPrompt{RunID: ru.id, Prompt: ru.prompt, QueuedAt: ru.queuedAt.UnixMilli()})
	}
	return out
}

// RemoveQueued drops the queued follow-up runID of the session (queue.remove) as Cancel drops a
// queued run; the running prompt is never touched. It reports whether the follow-up was queued.
func (r *Runtime) RemoveQueued(sessionID, runID string) bool {
	r.mu.Lock()
	queued := false
	for _, ru := range r.pending[sessionID] {
		queued = queued || ru.id == runID
	}
	r.mu.Unlock()
	return queued && r.Cancel(sessionID, runID)
}

// publishQueue publishes queue:changed with the session's queue as it is now. Called after every
// change of the queue, outside r.mu.
func (r *Runtime) publishQueue(sessionID string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.publishQueueLocked(sessionID)
}

// publishQueueLocked is publishQueue for a caller that holds r.mu.
func (r *Runtime) publishQueueLocked(sessionID string) {
	if _, err := r.rep.Publish(&protocol.QueueChangedSignal{SessionID: sessionID, Items: r.queueLocked(sessionID)}, nil); err != nil {
		r.log.Warn("queue:changed not sent", "session", sessionID, "err", err)
	}
}
