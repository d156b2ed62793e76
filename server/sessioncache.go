package server

import (
	"context"
	"errors"
	"sync"

	"github.com/zidane-server/zidane/server/store"
)

// maxCachedSessions bounds the session cache; past it the cache starts over.
const maxCachedSessions = 4096

// sessionCache keeps the sessions chat.send starts runs in, so that its path to run:start makes no
// Postgres round trip but the prompt's durable write (issue 10, "chat.send → run:start": a lookup
// per prompt cost one round trip of three), and those sessions.resume resumes (a reconnecting
// client's first request). One cache per server serves every connection.
//
// It is kept correct by the server's session writes: every change of a session goes out as
// session:updated through publishSession, which stores the new session here (rename, archive,
// setModel, the title from the first prompt, the runtime's status changes), and sessions.delete
// drops it. What it may hold stale is updated_at and Version (the transcript writer bumps them
// without a signal), which chat.send does not use; sessions.get and the other reads still ask the
// store. A session deleted behind its back is caught by the run's durable write (ErrNotFound), which
// drops the entry. Snapshots are ordered by store.Session.Version: a writer whose answer arrives
// late (a run's start, told after the run went on, after the run's end) never replaces a newer one, here or on the
// wire (published). A dropped session (deleted) is remembered as gone: a snapshot of it that
// arrives late (a run's start, told after the run went on; a read that raced the delete) is
// neither cached nor sent, so session:updated deleted:true stays its last word.
type sessionCache struct {
	mu   sync.Mutex
	m    map[string]store.Session
	gone map[string]bool // dropped sessions (ids are never reused); bounded like m

	// pubMu orders session:updated: a snapshot is checked against published and sent under it.
	pubMu     sync.Mutex
	published map[string]int64 // by session: the Version last sent as session:updated
}

func (c *sessionCache) get(id string) (store.Session, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	x, ok := c.m[id]
	return x, ok
}

// put caches x unless a later write's session is cached; false when the session was dropped
// (deleted): then nothing of it is cached.
func (c *sessionCache) put(x store.Session) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gone[x.ID] {
		return false
	}
	if old, ok := c.m[x.ID]; ok && old.Version > x.Version {
		return true // a later write's session is already here
	}
	if c.m == nil || len(c.m) >= maxCachedSessions {
		c.m = map[string]store.Session{}
	}
	c.m[x.ID] = x
	return true
}

// drop forgets a deleted session and remembers it as gone. A publish that passed its check
// before finishes first (drop waits for pubMu), so the caller's deleted:true goes out after it.
func (c *sessionCache) drop(id string) {
	c.mu.Lock()
	delete(c.m, id)
	if c.gone == nil || len(c.gone) >= maxCachedSessions {
		c.gone = map[string]bool{}
	}
	c.gone[id] = true
	c.mu.Unlock()
	c.pubMu.Lock()
	delete(c.published, id)
	c.pubMu.Unlock()
}

// publish calls send with x unless the session was dropped, or a later snapshot of it (a larger
// Version) or this one was sent already; it caches x either way (put keeps the later one). A
// send that fails (false) is not recorded: the same snapshot may go again.
func (c *sessionCache) publish(x store.Session, send func(store.Session) bool) {
	c.pubMu.Lock()
	defer c.pubMu.Unlock()
	if !c.put(x) {
		return
	}
	if v, ok := c.published[x.ID]; ok && v >= x.Version {
		return
	}
	if c.published == nil || len(c.published) >= maxCachedSessions {
		c.published = map[string]int64{}
	}
	if send(x) {
		c.published[x.ID] = x.Version
	}
}

// cachedSession is getSession through the session cache (chat.send's and sessions.resume's lookup).
func (s *Server) cachedSession(ctx context.Context, id, hint string) (store.Session, error) {
	if x, ok := s.sessions.get(id); ok {
		return x, nil
	}
	x, err := s.getSession(ctx, id, hint)
	if err == nil {
		s.sessions.put(x)
	}
	return x, err
}

// notFoundAfterCache answers a store ErrNotFound met after a cached lookup (the session was
// deleted meanwhile) as getSession would have, and drops the entry.
func (s *Server) notFoundAfterCache(id, hint string, err error) error {
	if !errors.Is(err, store.ErrNotFound) {
		return err
	}
	s.sessions.drop(id)
	return sessionNotFound(id, hint)
}
