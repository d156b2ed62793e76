package gitx

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
)

// Refs is the state a ref watcher reports: HEAD's branch (empty when detached) and commit.
type Refs struct {
	Branch string
	Head   string
}

// RefWatcher reports when a repository's refs move (a commit, a fetch, a branch switch, a
// reset), from any process, through fsnotify on the ref files (HEAD, packed-refs, refs/**).
// Bursts of file events are coalesced: after the first event it waits Delay, reads the refs and
// reports only when they differ from the last report.
type RefWatcher struct {
	r       *Runner
	repo    *Repo
	delay   time.Duration
	onMove  func(Refs)
	w       *fsnotify.Watcher
	stop    chan struct{}
	done    chan struct{}
	mu      sync.Mutex
	last    string // the refs snapshot last reported
	closeMu sync.Once
}

// WatchRefs starts watching repo's refs; onMove runs (on the watcher's goroutine) once per
// coalesced move. delay is the coalescing window (default 100 ms). Close stops it.
func (r *Runner) WatchRefs(repo *Repo, delay time.Duration, onMove func(Refs)) (*RefWatcher, error) {
	if delay <= 0 {
		delay = 100 * time.Millisecond
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, err
	}
	rw := &RefWatcher{r: r, repo: repo, delay: delay, onMove: onMove, w: w, stop: make(chan struct{}), done: make(chan struct{})}
	dirs := []string{repo.GitDir}
	if repo.CommonDir != repo.GitDir {
		dirs = append(dirs, repo.CommonDir)
	}
	for _, d := range dirs {
		if err := w.Add(d); err != nil {
			w.Close()
			return nil, err
		}
	}
	rw.addTree(filepath.Join(repo.CommonDir, "refs"))
	ctx, cancel := context.WithTimeout(context.Background(), r.timeout())
	rw.last, _ = rw.snapshot(ctx)
	cancel()
	go rw.loop()
	return rw, nil
}

// addTree watches dir and every folder below it (fsnotify does not recurse).
func (rw *RefWatcher) addTree(dir string) {
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			rw.w.Add(p)
		}
		return nil
	})
}

// relevant tells whether a file event can move a ref.
func (rw *RefWatcher) relevant(ev fsnotify.Event) bool {
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
	var timer *time.Timer
	var fire <-chan time.Time
	for {
		select {
		case <-rw.stop:
			if timer != nil {
				timer.Stop()
			}
			return
		case ev, ok := <-rw.w.Events:
			if !ok {
				return
			}
			if ev.Has(fsnotify.Create) {
				if fi, err := os.Stat(ev.Name); err == nil && fi.IsDir() && strings.HasPrefix(ev.Name, filepath.Join(rw.repo.CommonDir, "refs")) {
					rw.addTree(ev.Name)
				}
			}
			if !rw.relevant(ev) || fire != nil {
				continue
			}
			timer = time.NewTimer(rw.delay)
			fire = timer.C
		case <-rw.w.Errors:
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
	var err error
	rw.closeMu.Do(func() {
		close(rw.stop)
		<-rw.done
		err = rw.w.Close()
	})
	return err
}
