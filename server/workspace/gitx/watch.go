package gitx

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/zidane-server/zidane/server/workspace/watch"
)

// Refs is the state a ref watcher reports: HEAD's branch (empty when detached) and commit.
type Refs struct {
	Branch string
	Head   string
}

// RefWatchOptions tune WatchRefs. Zero fields take the defaults.
type RefWatchOptions struct {
	// Delay is the coalescing window after the first event; default 100 ms.
	Delay time.Duration
	// MaxFolders bounds the folders one repository's watch takes from the server's watcher: its
	// git folder, its common folder, refs/ and the folders below refs/ (breadth first); default
	// DefaultRefWatchFolders, at least 3. A repository with more ref folders is watched on the
	// first MaxFolders and its refs re-read every Poll besides (field case T10).
	MaxFolders int
	// Poll is how often the refs are re-read while some ref folders are not watched; default 2 s.
	Poll time.Duration
}

// DefaultRefWatchFolders is RefWatchOptions.MaxFolders' default.
const DefaultRefWatchFolders = 64

func (o *RefWatchOptions) defaults() {
	if o.Delay <= 0 {
		o.Delay = 100 * time.Millisecond
	}
	if o.MaxFolders <= 0 {
		o.MaxFolders = DefaultRefWatchFolders
	}
	if o.MaxFolders < 3 {
		o.MaxFolders = 3
	}
	if o.Poll <= 0 {
		o.Poll = 2 * time.Second
	}
}

// RefWatcher reports when a repository's refs move (a commit, a fetch, a branch switch, a
// reset), from any process, through the server's shared watcher (server/workspace/watch) on the
// ref folders (the git folder for HEAD and packed-refs, refs/**), at most MaxFolders of them,
// re-reading the refs every Poll while some are left unwatched. Bursts of file events are
// coalesced: after the first event it waits Delay, reads the refs and reports only when they
// differ from the last report.
type RefWatcher struct {
	r       *Runner
	repo    *Repo
	o       RefWatchOptions
	onMove  func(Refs)
	sub     *watch.Sub
	polling atomic.Bool // some ref folders are not watched: poll
	stop    chan struct{}
	done    chan struct{}
	last    string // the refs snapshot last reported
	closeMu sync.Once
}

// WatchRefs starts watching repo's refs on w; onMove runs (on the watcher's goroutine) once per
// coalesced move. Close stops it. Errors: the git folders cannot be watched (a *watch.LimitError
// when w holds its most kernel watches, wrapped; the system's inotify limits named).
func (r *Runner) WatchRefs(w *watch.Watcher, repo *Repo, o RefWatchOptions, onMove func(Refs)) (*RefWatcher, error) {
	o.defaults()
	sub := w.Subscribe()
	rw := &RefWatcher{r: r, repo: repo, o: o, onMove: onMove, sub: sub, stop: make(chan struct{}), done: make(chan struct{})}
	refs := filepath.Join(repo.CommonDir, "refs")
	dirs := []string{repo.GitDir}
	if repo.CommonDir != repo.GitDir {
		dirs = append(dirs, repo.CommonDir)
	}
	dirs = append(dirs, refs)
	for _, d := range dirs {
		if err := sub.Add(d); err != nil {
			sub.Close()
			return nil, err
		}
	}
	rw.addTree(refs)
	ctx, cancel := context.WithTimeout(context.Background(), r.timeout())
	rw.last, _ = rw.snapshot(ctx)
	cancel()
	go rw.loop()
	return rw, nil
}

// Folders is the number of folders the watch holds on the server's watcher.
func (rw *RefWatcher) Folders() int { return rw.sub.Len() }

// Polling tells whether some ref folders are left unwatched, so the refs are re-read every Poll.
func (rw *RefWatcher) Polling() bool { return rw.polling.Load() }

// addTree watches dir and the folders below it, breadth first, while the watch holds fewer than
// MaxFolders (the watcher does not recurse); a folder left out turns polling on.
func (rw *RefWatcher) addTree(dir string) {
	queue := []string{dir}
	for len(queue) > 0 {
		d := queue[0]
		queue = queue[1:]
		if !rw.sub.Watching(d) {
			if rw.sub.Len() >= rw.o.MaxFolders {
				rw.polling.Store(true)
				return
			}
			if err := rw.sub.Add(d); err != nil {
				var lim *watch.LimitError
				if errors.As(err, &lim) || errors.Is(err, syscall.ENOSPC) {
					rw.polling.Store(true)
					return
				}
				continue // gone meanwhile
			}
		}
		ents, err := os.ReadDir(d)
		if err != nil {
			continue
		}
		for _, e := range ents {
			if e.IsDir() {
				queue = append(queue, filepath.Join(d, e.Name()))
			}
		}
	}
}

// relevant tells whether a file event can move a ref.
func (rw *RefWatcher) relevant(ev watch.Event) bool {
	name := filepath.Base(ev.Name)
	if strings.HasSuffix(name, ".lock") {
		return false
	}
	dir := filepath.Dir(ev.Name)
	if dir == rw.repo.GitDir || dir == rw.repo.CommonDir {
		return name == "HEAD" || name == "packed-refs" || name == "refs"
	}
	return true // below refs/
}

func (rw *RefWatcher) loop() {
	defer close(rw.done)
	refs := filepath.Join(rw.repo.CommonDir, "refs")
	var timer *time.Timer
	var fire <-chan time.Time
	var ticker *time.Ticker
	var tick <-chan time.Time
	defer func() {
		if timer != nil {
			timer.Stop()
		}
		if ticker != nil {
			ticker.Stop()
		}
	}()
	schedule := func() {
		if fire == nil {
			timer = time.NewTimer(rw.o.Delay)
			fire = timer.C
		}
	}
	for {
		if tick == nil && rw.polling.Load() {
			ticker = time.NewTicker(rw.o.Poll)
			tick = ticker.C
		}
		select {
		case <-rw.stop:
			return
		case ev := <-rw.sub.Events():
			if ev.Has(watch.Create) && strings.HasPrefix(ev.Name, refs) {
				if fi, err := os.Stat(ev.Name); err == nil && fi.IsDir() {
					rw.addTree(ev.Name)
				}
			}
			if rw.relevant(ev) {
				schedule()
			}
		case <-rw.sub.Overflow(): // events were lost: watch what is new, read the refs
			rw.addTree(refs)
			schedule()
		case <-tick:
			schedule()
		case <-fire:
			fire = nil
			ctx, cancel := context.WithTimeout(context.Background(), rw.r.timeout())
			snap, err := rw.snapshot(ctx)
			cancel()
			if err != nil || snap == rw.last {
				continue
			}
			rw.last = snap
			rw.onMove(parseRefsHead(snap))
		}
	}
}

// snapshot lists HEAD and every ref with its commit, as one comparable string.
func (rw *RefWatcher) snapshot(ctx context.Context) (string, error) {
	head, _, err := rw.r.run(ctx, call{dir: rw.repo.Top, readOnly: true, allowed: map[int]bool{1: true, 128: true}, args: []string{"symbolic-ref", "--quiet", "HEAD"}})
	if err != nil {
		return "", err
	}
	sha, _, err := rw.r.run(ctx, call{dir: rw.repo.Top, readOnly: true, allowed: map[int]bool{1: true, 128: true}, args: []string{"rev-parse", "--verify", "--quiet", "HEAD"}})
	if err != nil {
		return "", err
	}
	refs, _, err := rw.r.run(ctx, call{dir: rw.repo.Top, readOnly: true, args: []string{"for-each-ref", "--format=%(refname) %(objectname)"}})
	if err != nil {
		return "", err
	}
	var b bytes.Buffer
	b.WriteString(strings.TrimSpace(string(head)) + "\n" + strings.TrimSpace(string(sha)) + "\n")
	b.Write(refs)
	return b.String(), nil
}

func parseRefsHead(snap string) Refs {
	lines := strings.SplitN(snap, "\n", 3)
	var r Refs
	if len(lines) >= 2 {
		r.Branch = strings.TrimPrefix(lines[0], "refs/heads/")
		r.Head = lines[1]
	}
	return r
}

// Close stops the watcher; onMove is not called after Close returns.
func (rw *RefWatcher) Close() error {
	rw.closeMu.Do(func() {
		close(rw.stop)
		<-rw.done
		rw.sub.Close()
	})
	return nil
}
