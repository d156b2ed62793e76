package server

import (
	"context"
	"errors"
	"time"

	"github.com/zidane-server/zidane/protocol"
	"github.com/zidane-server/zidane/server/workspace/gitx"
)

// refWatchDelay coalesces a burst of ref file events (one commit writes several) into one
// git:refs.
const refWatchDelay = 100 * time.Millisecond

// Watch implements git.watch: the connection receives git:refs for the repository (keyed by its
// top folder) once its refs move, from any process, until git.unwatch or the connection ends.
// One fsnotify watcher serves every connection that watches the same repository.
func (h gitHandler) Watch(ctx context.Context, p *protocol.GitWatchParams) (*protocol.GitWatchResult, error) {
	s := h.s
	c := connFrom(ctx)
	if c == nil {
		return nil, errors.New("no connection")
	}
	repo, err := s.gitRepo(ctx, p.Cwd)
	if err != nil {
		return nil, err
	}
	st, err := s.git.Status(ctx, repo.Top)
	if err != nil {
		return nil, gitErr(err, repo.Top)
	}
	s.gitMu.Lock()
	defer s.gitMu.Unlock()
	if s.refWatchers[repo.Top] == nil {
		top := repo.Top
		w, err := s.git.WatchRefs(repo, refWatchDelay, func(r gitx.Refs) {
			sig := &protocol.GitRefsSignal{Root: top}
			if r.Branch != "" {
				sig.Branch = ptr(r.Branch)
			}
			if r.Head != "" {
				sig.Head = ptr(r.Head)
			}
			if _, err := s.hub.publish(sig, nil, top); err != nil {
				s.log.Warn("git:refs not sent", "err", err)
			}
		})
		if err != nil {
			return nil, protocol.NewHandlerFailedError("Cannot watch the repository's refs: " + err.Error())
		}
		s.refWatchers[repo.Top] = w
	}
	s.hub.watch(c, repo.Top)
	if !s.refWatching[c] {
		s.refWatching[c] = true
		go func() {
			<-c.ctx.Done() // the hub dropped the connection's watches before this
			s.gitMu.Lock()
			delete(s.refWatching, c)
			s.gitMu.Unlock()
			s.stopIdleRefWatchers()
		}()
	}
	out := &protocol.GitWatchResult{Root: repo.Top}
	if st.Branch != "" {
		out.Branch = ptr(st.Branch)
	}
	if st.Head != "" {
		out.Head = ptr(st.Head)
	}
	return out, nil
}

// Unwatch implements git.unwatch.
func (h gitHandler) Unwatch(ctx context.Context, p *protocol.GitUnwatchParams) (*protocol.GitUnwatchResult, error) {
	s := h.s
	c := connFrom(ctx)
	repo, err := s.gitRepo(ctx, p.Cwd)
	if err != nil {
		return nil, err
	}
	s.hub.unwatch(c, repo.Top)
	s.stopIdleRefWatchers()
	return &protocol.GitUnwatchResult{Root: repo.Top}, nil
}

// stopIdleRefWatchers closes the ref watchers no connection watches any more.
func (s *Server) stopIdleRefWatchers() {
	s.gitMu.Lock()
	var idle []*gitx.RefWatcher
	for top, w := range s.refWatchers {
		if s.hub.watchCount(top) == 0 {
			idle = append(idle, w)
			delete(s.refWatchers, top)
		}
	}
	s.gitMu.Unlock()
	for _, w := range idle {
		w.Close()
	}
}
