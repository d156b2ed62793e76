// Package fileindex is the composer's index of a workspace root's files and folders for `@`
// mentions (issue 28, "Completions"): built by one walk of the root's confined file system
// (workspace.RootFS: the hidden set is out of sight), respecting .gitignore, bounded in entries
// and time, kept fresh through the server's shared watcher (workspace/watch) and a maximum age,
// and queried fuzzily, ranked by path segments and recency, within a time bound.
//
// It imports nothing of the transport.
package fileindex

import (
	"context"
	"io/fs"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/zidane-server/zidane/server/workspace"
	"github.com/zidane-server/zidane/server/workspace/watch"
)

// Bounds of an index.
const (
	// MaxEntries bounds the files and folders one index holds; a larger tree is cut (Query
	// reports it incomplete).
	MaxEntries = 500_000
	// MaxWalk bounds one walk of the root.
	MaxWalk = 10 * time.Second
	// MaxAge is how old an index may be before a query rebuilds it in the background (folders the
	// watcher does not follow change unseen until then).
	MaxAge = time.Minute
	// MaxWatches bounds the folders one index follows through the shared watcher: the root and
	// the shallowest folders under it.
	MaxWatches = 128
	// settle is how long the index waits after a watched change before it walks again.
	settle = 300 * time.Millisecond
)

// entry is one file or folder, root-relative with slashes.
type entry struct {
	rel   string
	lower string
	base  int    // where the base name starts in rel
	mask  uint64 // the letters and digits it holds (charMask)
	dir   bool
}

// snapshot is one walk's result.
type snapshot struct {
	entries []entry
	cut     bool // a bound cut the walk
	at      time.Time
	dirs    []string // folders in walk order (breadth first), for the watches
}

// Index is one root's index. Safe for concurrent use.
type Index struct {
	root  string
	fsys  fs.FS
	watch *watch.Watcher // nil: no watching

	mu       sync.Mutex
	snap     *snapshot
	building chan struct{} // closed when the walk in progress ends; nil when none runs
	dirty    bool
	sub      *watch.Sub
	closed   bool
	stop     chan struct{}
}

// New returns the index of root (absolute), read through fsys (the root's confined file system).
// w, when not nil, is the server's shared watcher it follows changes through. Nothing is read
// until Warm or the first Query.
func New(root string, fsys fs.FS, w *watch.Watcher) *Index {
	return &Index{root: root, fsys: fsys, watch: w, stop: make(chan struct{})}
}

// Warm starts a walk in the background unless the index has one or is being built.
func (x *Index) Warm() { x.rebuild() }

// Close stops following changes.
func (x *Index) Close() {
	x.mu.Lock()
	defer x.mu.Unlock()
	if !x.closed {
		x.closed = true
		close(x.stop)
		if x.sub != nil {
			x.sub.Close()
			x.sub = nil
		}
	}
}

// rebuild starts a walk unless one runs; it returns the channel closed when that walk ends.
func (x *Index) rebuild() chan struct{} {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.building != nil {
		return x.building
	}
	done := make(chan struct{})
	x.building, x.dirty = done, false
	go func() {
		s := walk(x.fsys)
		x.follow(s) // before the snapshot is out: a change after a query that saw it is seen
		x.mu.Lock()
		x.snap, x.building = s, nil
		x.mu.Unlock()
		close(done)
	}()
	return done
}

// follow watches the snapshot's shallowest folders and rebuilds after a change settles.
func (x *Index) follow(s *snapshot) {
	if x.watch == nil {
		return
	}
	x.mu.Lock()
	if x.closed {
		x.mu.Unlock()
		return
	}
	first := x.sub == nil
	if first {
		x.sub = x.watch.Subscribe()
	}
	sub := x.sub
	x.mu.Unlock()
	for i, d := range s.dirs {
		if i >= MaxWatches {
			break
		}
		if sub.Add(filepath.Join(x.root, filepath.FromSlash(d))) != nil {
			break // the server's watch bound: the rest ages out (MaxAge)
		}
	}
	if first {
		go x.listen(sub)
	}
}

func (x *Index) listen(sub *watch.Sub) {
	var timer <-chan time.Time
	for {
		select {
		case <-x.stop:
			return
		case <-sub.Events():
		case <-sub.Overflow():
		case <-timer:
			timer = nil
			x.rebuild()
			continue
		}
		x.mu.Lock()
		x.dirty = true
		x.mu.Unlock()
		if timer == nil {
			timer = time.After(settle)
		}
	}
}

// walkers is how many folders a walk reads at once: the walk is system calls, and the kernel
// serves several at a time.
const walkers = 4

// walk reads the tree breadth first, a level at a time with walkers folders read at once, in a
// deterministic order: .git folders, ignored paths (.gitignore) and links are left out, at most
// MaxEntries entries within MaxWalk.
func walk(fsys fs.FS) *snapshot {
	s := &snapshot{at: time.Now(), dirs: []string{"."}}
	deadline := time.Now().Add(MaxWalk)
	igs := make([]*workspace.Ignorer, walkers) // an Ignorer is not safe for concurrent use
	for i := range igs {
		igs[i] = workspace.NewIgnorer(fsys)
	}
	for lo := 0; lo < len(s.dirs); {
		level := s.dirs[lo:]
		lo = len(s.dirs)
		found := make([][]entry, len(level))
		var wg sync.WaitGroup
		for w := range walkers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := w; i < len(level); i += walkers {
					if time.Now().After(deadline) {
						return
					}
					found[i] = readLevel(fsys, igs[w], level[i])
				}
			}()
		}
		wg.Wait()
		for _, es := range found {
			for _, e := range es {
				if len(s.entries) >= MaxEntries {
					s.cut = true
					return s
				}
				s.entries = append(s.entries, e)
				if e.dir {
					s.dirs = append(s.dirs, e.rel)
				}
			}
		}
		if time.Now().After(deadline) {
			s.cut = true
			return s
		}
	}
	return s
}

// readLevel returns the entries of one folder that the index keeps.
func readLevel(fsys fs.FS, ig *workspace.Ignorer, dir string) []entry {
	des, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil
	}
	out := make([]entry, 0, len(des))
	for _, de := range des {
		name := de.Name()
		isDir := de.IsDir()
		if name == ".git" || (!isDir && !de.Type().IsRegular()) {
			continue
		}
		rel := name
		if dir != "." {
			rel = dir + "/" + name
		}
		if ig.Ignored(rel, isDir) {
			continue
		}
		lower := strings.ToLower(rel)
		out = append(out, entry{rel: rel, lower: lower, base: len(rel) - len(name), mask: charMask(lower), dir: isDir})
	}
	return out
}

// charMask has a bit per letter and digit in s (others share bit 63).
func charMask(s string) uint64 {
	var m uint64
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z':
			m |= 1 << (c - 'a')
		case c >= '0' && c <= '9':
			m |= 1 << (26 + c - '0')
		case c == '/' || c == '.' || c == '-' || c == '_' || c == ' ':
		default:
			m |= 1 << 63
		}
	}
	return m
}

// Match is one file or folder a query found.
type Match struct {
	Rel   string // root-relative, slash-separated
	Dir   bool
	Score int
}

// Result is a query's answer.
type Result struct {
	Matches    []Match
	Incomplete bool // the index was cut by a bound, or the query by its time
}

// Query returns the limit best matches of q (case-insensitive; every character of q in order,
// anywhere in the path), best first: a match in the base name, at the start of path segments and
// of words, contiguous, in a short path, and a recently modified file rank higher. An empty q
// lists the shallowest entries. The first query of an index waits for its walk (within ctx); a
// stale one (a watched change, or older than MaxAge) answers from the last walk while the next
// runs. Query stops scoring when ctx ends and says so.
func (x *Index) Query(ctx context.Context, q string, limit int) Result {
	x.mu.Lock()
	s, stale := x.snap, x.dirty || (x.snap != nil && time.Since(x.snap.at) > MaxAge)
	x.mu.Unlock()
	if s == nil {
		select {
		case <-x.rebuild():
		case <-ctx.Done():
			return Result{Matches: []Match{}, Incomplete: true}
		}
		x.mu.Lock()
		s = x.snap
		x.mu.Unlock()
	} else if stale {
		x.rebuild()
	}
	res := Result{Matches: []Match{}, Incomplete: s.cut}
	q = strings.ToLower(strings.TrimSpace(q))
	qm := charMask(q)
	keep := max(limit*3, 30)
	var top []Match
	worst := -1 << 31
	for i := range s.entries {
		if i&4095 == 4095 && ctx.Err() != nil {
			res.Incomplete = true
			break
		}
		e := &s.entries[i]
		if e.mask&qm != qm {
			continue
		}
		sc, ok := score(e, q)
		if !ok || (len(top) >= keep && sc <= worst) {
			continue
		}
		top = append(top, Match{Rel: e.rel, Dir: e.dir, Score: sc})
		if len(top) >= 2*keep {
			sortMatches(top)
			top = top[:keep]
			worst = top[keep-1].Score
		}
	}
	sortMatches(top)
	top = top[:min(len(top), keep)]
	x.recency(top)
	sortMatches(top)
	res.Matches = append(res.Matches, top[:min(len(top), limit)]...)
	return res
}

func sortMatches(ms []Match) {
	sort.Slice(ms, func(i, j int) bool {
		if ms[i].Score != ms[j].Score {
			return ms[i].Score > ms[j].Score
		}
		return ms[i].Rel < ms[j].Rel
	})
}

// recency adds to the score of the candidates modified lately (one stat each, for the few
// candidates only).
func (x *Index) recency(ms []Match) {
	now := time.Now()
	for i := range ms {
		fi, err := fs.Stat(x.fsys, ms[i].Rel)
		if err != nil {
			continue
		}
		switch age := now.Sub(fi.ModTime()); {
		case age < time.Hour:
			ms[i].Score += 30
		case age < 24*time.Hour:
			ms[i].Score += 20
		case age < 7*24*time.Hour:
			ms[i].Score += 10
		}
	}
}

// isStart reports whether position i of s starts a segment or a word.
func isStart(s string, i int) bool {
	if i == 0 {
		return true
	}
	switch s[i-1] {
	case '/', '.', '-', '_', ' ':
		return true
	}
	return false
}

// score rates e for q; ok is false when q is not a subsequence of the path.
func score(e *entry, q string) (int, bool) {
	depth := strings.Count(e.rel, "/")
	base := 0 - len(e.rel)/4 - 4*depth
	if q == "" {
		return base, true
	}
	name := e.lower[e.base:]
	switch {
	case name == q:
		return 1000 + base, true
	case strings.HasPrefix(name, q):
		return 800 + base, true
	case strings.Contains(name, q):
		return 600 + base, true
	case strings.HasSuffix(e.lower, q):
		return 550 + base, true
	case strings.Contains(e.lower, q):
		i := strings.Index(e.lower, q)
		bonus := 0
		if isStart(e.lower, i) {
			bonus = 100
		}
		return 400 + bonus + base, true
	}
	// A subsequence: points for matches at segment and word starts and for runs.
	sc, qi, prev := 0, 0, -2
	for i := 0; i < len(e.lower) && qi < len(q); i++ {
		if e.lower[i] != q[qi] {
			continue
		}
		switch {
		case i == prev+1:
			sc += 8
		case isStart(e.lower, i):
			sc += 10
		default:
			sc += 1
		}
		if i >= e.base {
			sc += 2
		}
		prev = i
		qi++
	}
	if qi < len(q) {
		return 0, false
	}
	return sc + base, true
}

// Set holds one index per root, made on first use.
type Set struct {
	ws    *workspace.Workspace
	watch *watch.Watcher
	mu    sync.Mutex
	m     map[string]*Index
}

// NewSet returns the indexes of ws's roots, following changes through w (nil: none).
func NewSet(ws *workspace.Workspace, w *watch.Watcher) *Set {
	return &Set{ws: ws, watch: w, m: map[string]*Index{}}
}

// Of returns the index of the root that holds p (a resolved workspace path), warming it.
func (s *Set) Of(p workspace.Path) *Index {
	s.mu.Lock()
	defer s.mu.Unlock()
	x := s.m[p.Root]
	if x == nil {
		root := p
		root.Rel = "."
		x = New(p.Root, s.ws.RootFS(root), s.watch)
		s.m[p.Root] = x
		x.Warm()
	}
	return x
}

// Close stops every index.
func (s *Set) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, x := range s.m {
		x.Close()
	}
	s.m = map[string]*Index{}
}

// Join is a match's absolute path under root.
func Join(root, rel string) string { return filepath.Join(root, filepath.FromSlash(path.Clean(rel))) }
