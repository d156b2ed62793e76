package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/zidane-server/zidane/protocol"
	"github.com/zidane-server/zidane/server/workspace/gitx"
	"github.com/zidane-server/zidane/server/workspace/watch"
)

// refWatchDelay coalesces a burst of ref file events (one commit writes several) into one
// git:refs.
const refWatchDelay = 100 * time.Millisecond

// maxWatchesPerConn bounds the repositories one connection watches at once (git.watch; field
// case T10, docs/security.md "Limits"): one past it is refused with HandlerFailed.
const maxWatchesPerConn = 32

// Watch implements git.watch: the connection receives git:refs for the repository (keyed by its
// top folder) once its refs move, from any process, until git.unwatch or the connection ends.
// One ref watcher, on the server's one file watcher (Limits.MaxWatches), serves every connection
// that watches the same repository. Errors (HandlerFailed): the connection watches
// maxWatchesPerConn repositories, or the server its MaxWatches folders.
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
	mine := s.refWatching[c]
	if _, ok := mine[repo.Top]; !ok && len(mine) >= maxWatchesPerConn {
		return nil, protocol.NewHandlerFailedError(fmt.Sprintf("This connection already watches %d repositories, its limit; unwatch one first (git.unwatch).", len(mine)))
	}
	if s.refWatchers[repo.Top] == nil {
		top := repo.Top
		lim := s.cfg.Limits
		o := gitx.RefWatchOptions{Delay: refWatchDelay, MaxFolders: lim.RefWatchFolders, Poll: lim.RefPoll}
		w, err := s.git.WatchRefs(s.watcher, repo, o, func(r gitx.Refs) {
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
		var full *watch.LimitError
		if errors.As(err, &full) {
			return nil, protocol.NewHandlerFailedError(fmt.Sprintf("The server watches %d folders, its limit (--max-watches); unwatch repositories no longer needed, or ask the operator to raise --max-watches.", full.Max))
		}
		if err != nil {
			return nil, protocol.NewHandlerFailedError("Cannot watch the repository's refs: " + err.Error())
		}
		s.refWatchers[repo.Top] = w
	}
	s.hub.watch(c, repo.Top)
	if mine == nil {
		mine = map[string]struct{}{}
		s.refWatching[c] = mine
		go func() {
			<-c.ctx.Done() // the hub dropped the connection's watches before this
			s.gitMu.Lock()
			delete(s.refWatching, c)
			s.gitMu.Unlock()
			s.stopIdleRefWatchers()
		}()
	}
	mine[repo.Top] = struct{}{}
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
	if c == nil {
		return nil, errors.New("no connection")
	}
	repo, err := s.gitRepo(ctx, p.Cwd)
	if err != nil {
		return nil, err
	}
	s.gitMu.Lock()
	delete(s.refWatching[c], repo.Top)
	s.gitMu.Unlock()
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

// closeRefWatchers closes every ref watcher (at shutdown), which closes the server's inotify
// instance.
func (s *Server) closeRefWatchers() {
	s.gitMu.Lock()
	ws := s.refWatchers
	s.refWatchers = map[string]*gitx.RefWatcher{}
	s.gitMu.Unlock()
	for _, w := range ws {
		w.Close()
	}
}
