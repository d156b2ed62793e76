// Package watch is the server's one file-system watcher (issue 22 item 2, field case T10): one
// inotify instance (fsnotify) for the whole process, whoever watches, with the kernel watches
// reference-counted per folder, so two subscribers of the same folder share one kernel watch, and
// a cap on the kernel watches the server holds in all. Every watch kind of the server (git.watch's
// ref watchers today) subscribes here; nothing a client asks for opens another inotify instance.
//
// It imports nothing of the server: the transport and the agent side both use it.
package watch

import (
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"syscall"

	"github.com/fsnotify/fsnotify"
)

// DefaultMax is the default cap on the kernel watches one Watcher holds: well below the smallest
// default fs.inotify.max_user_watches (8192 on kernels before 5.11 and on small machines), so the
// server's user keeps watches for its other programs.
const DefaultMax = 4096

// Event is a file event: Name is the path of the file or folder it happened to.
type Event = fsnotify.Event

// The operations an Event carries (Event.Has).
const (
	Create = fsnotify.Create
	Write  = fsnotify.Write
	Remove = fsnotify.Remove
	Rename = fsnotify.Rename
	Chmod  = fsnotify.Chmod
)

// LimitError is Add's answer when the Watcher already holds Max kernel watches.
type LimitError struct {
	// Max is the Watcher's cap on kernel watches.
	Max int
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("the server watches %d folders, its limit (--max-watches)", e.Max)
}

// Watcher is one inotify instance shared by its subscribers. The zero value is not usable: New.
// The instance is opened by the first Add and closed when the last kernel watch goes, so a server
// nobody watches through holds none.
type Watcher struct {
	max int

	mu   sync.Mutex
	fw   *fsnotify.Watcher            // nil while no folder is watched
	refs map[string]map[*Sub]struct{} // folder → its subscribers; one kernel watch each
}

// New returns a Watcher that holds at most max kernel watches (DefaultMax when max ≤ 0).
func New(max int) *Watcher {
	if max <= 0 {
		max = DefaultMax
	}
	return &Watcher{max: max, refs: map[string]map[*Sub]struct{}{}}
}

// Max is the cap on kernel watches.
func (w *Watcher) Max() int { return w.max }

// Watches is the number of kernel watches held now (folders watched by any subscriber).
func (w *Watcher) Watches() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.refs)
}

// Open tells whether the inotify instance is open (some folder is watched).
func (w *Watcher) Open() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.fw != nil
}

// subBuffer is how many events a subscriber may leave unread before it gets Overflow instead.
const subBuffer = 256

// Subscribe returns a new subscriber; it watches nothing until Add. Close it when done.
func (w *Watcher) Subscribe() *Sub {
	return &Sub{w: w, paths: map[string]struct{}{}, events: make(chan Event, subBuffer), overflow: make(chan struct{}, 1)}
}

// Sub is one subscriber: the folders it added, and the events of those folders (a folder's
// own events and those of the files in it).
type Sub struct {
	w        *Watcher
	paths    map[string]struct{} // under w.mu
	events   chan Event
	overflow chan struct{}
	closed   bool // under w.mu
}

// Events delivers the events of the subscriber's folders. It is never closed.
func (s *Sub) Events() <-chan Event { return s.events }

// Overflow receives a value when events were lost (the subscriber read too slowly, or the
// kernel's queue overflowed): the subscriber should re-read what it watches.
func (s *Sub) Overflow() <-chan struct{} { return s.overflow }

// Len is the number of folders the subscriber watches.
func (s *Sub) Len() int {
	s.w.mu.Lock()
	defer s.w.mu.Unlock()
	return len(s.paths)
}

// Watching tells whether the subscriber watches dir.
func (s *Sub) Watching(dir string) bool {
	s.w.mu.Lock()
	defer s.w.mu.Unlock()
	_, ok := s.paths[filepath.Clean(dir)]
	return ok
}

// Add watches the folder dir (not recursively). A folder the subscriber already watches is a
// no-op; a folder another subscriber watches shares its kernel watch. Errors: *LimitError when
// the Watcher holds Max kernel watches; the system's errors (its inotify limits named) otherwise.
func (s *Sub) Add(dir string) error {
	dir = filepath.Clean(dir)
	w := s.w
	w.mu.Lock()
	defer w.mu.Unlock()
	if s.closed {
		return errors.New("watch: subscriber closed")
	}
	if _, ok := s.paths[dir]; ok {
		return nil
	}
	if subs := w.refs[dir]; subs != nil {
		subs[s] = struct{}{}
		s.paths[dir] = struct{}{}
		return nil
	}
	if len(w.refs) >= w.max {
		return &LimitError{Max: w.max}
	}
	if w.fw == nil {
		fw, err := fsnotify.NewWatcher()
		if err != nil {
			if errors.Is(err, syscall.EMFILE) {
				return fmt.Errorf("the server cannot open its file watcher: the system's limit of inotify instances for its user (fs.inotify.max_user_instances) is reached by other programs: %w", err)
			}
			return fmt.Errorf("the server cannot open its file watcher: %w", err)
		}
		w.fw = fw
		go w.loop(fw)
	}
	if err := w.fw.Add(dir); err != nil {
		if len(w.refs) == 0 {
			w.closeLocked()
		}
		if errors.Is(err, syscall.ENOSPC) {
			return fmt.Errorf("the system's limit of inotify watches for the server's user (fs.inotify.max_user_watches) is reached: %w", err)
		}
		return err
	}
	w.refs[dir] = map[*Sub]struct{}{s: {}}
	s.paths[dir] = struct{}{}
	return nil
}

// Remove stops watching dir; the kernel watch goes with its last subscriber. A folder the
// subscriber does not watch is a no-op.
func (s *Sub) Remove(dir string) {
	s.w.mu.Lock()
	defer s.w.mu.Unlock()
	s.removeLocked(filepath.Clean(dir))
}

func (s *Sub) removeLocked(dir string) {
	w := s.w
	if _, ok := s.paths[dir]; !ok {
		return
	}
	delete(s.paths, dir)
	subs := w.refs[dir]
	delete(subs, s)
	if len(subs) == 0 {
		delete(w.refs, dir)
		if w.fw != nil {
			_ = w.fw.Remove(dir) // gone already when the folder was deleted
		}
		if len(w.refs) == 0 {
			w.closeLocked()
		}
	}
}

// Close removes every folder of the subscriber; no event is delivered after it returns.
func (s *Sub) Close() {
	s.w.mu.Lock()
	defer s.w.mu.Unlock()
	for dir := range s.paths {
		s.removeLocked(dir)
	}
	s.closed = true
}

// closeLocked closes the inotify instance; callers hold mu.
func (w *Watcher) closeLocked() {
	if w.fw != nil {
		_ = w.fw.Close()
		w.fw = nil
	}
}

// loop delivers fw's events to the subscribers of the folder they happened in (or to).
func (w *Watcher) loop(fw *fsnotify.Watcher) {
	for {
		select {
		case ev, ok := <-fw.Events:
			if !ok {
				return
			}
			w.deliver(fw, ev)
		case err, ok := <-fw.Errors:
			if !ok {
				return
			}
			if errors.Is(err, fsnotify.ErrEventOverflow) {
				w.mu.Lock()
				if w.fw == fw {
					seen := map[*Sub]bool{}
					for _, subs := range w.refs {
						for s := range subs {
							if !seen[s] {
								seen[s] = true
								s.lost()
							}
						}
					}
				}
				w.mu.Unlock()
			}
		}
	}
}

func (w *Watcher) deliver(fw *fsnotify.Watcher, ev Event) {
	name := filepath.Clean(ev.Name)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.fw != fw {
		return // a closed instance's last events
	}
	to := map[*Sub]struct{}{}
	for s := range w.refs[filepath.Dir(name)] {
		to[s] = struct{}{}
	}
	for s := range w.refs[name] {
		to[s] = struct{}{}
	}
	for s := range to {
		select {
		case s.events <- ev:
		default:
			s.lost()
		}
	}
	// A watched folder deleted or moved away has lost its kernel watch: forget it, so the count
	// stays the kernel's (a subscriber adds it again when it is created anew).
	if ev.Has(Remove) || ev.Has(Rename) {
		if subs := w.refs[name]; subs != nil {
			for s := range subs {
				delete(s.paths, name)
			}
			delete(w.refs, name)
			_ = fw.Remove(name)
			if len(w.refs) == 0 {
				w.closeLocked()
			}
		}
	}
}

func (s *Sub) lost() {
	select {
	case s.overflow <- struct{}{}:
	default:
	}
}
