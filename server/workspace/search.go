package workspace

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"path"
	"regexp"
	"sort"
	"strings"
	"unicode/utf8"

	ignore "github.com/sabhiram/go-gitignore"
)

// Ignorer answers whether a path is ignored by the .gitignore files of its folders, from the root
// down (each file's patterns apply to paths relative to its folder). It reads through the root's
// file system, so a .gitignore cannot be a link out of the roots. Not safe for concurrent use.
type Ignorer struct {
	fsys  fs.FS
	cache map[string]*ignore.GitIgnore // by folder (root-relative); nil: none
}

// NewIgnorer returns an Ignorer over a root's file system (RootFS).
func NewIgnorer(fsys fs.FS) *Ignorer {
	return &Ignorer{fsys: fsys, cache: map[string]*ignore.GitIgnore{}}
}

func (g *Ignorer) load(dir string) *ignore.GitIgnore {
	if gi, ok := g.cache[dir]; ok {
		return gi
	}
	var gi *ignore.GitIgnore
	if b, err := readAtMost(g.fsys, path.Join(dir, ".gitignore"), 1<<20); err == nil {
		gi = ignore.CompileIgnoreLines(strings.Split(string(b), "\n")...)
	}
	g.cache[dir] = gi
	return gi
}

// readAtMost reads the file name of fsys when it holds at most max bytes (a larger one is an
// error, and only max+1 bytes of it are read).
func readAtMost(fsys fs.FS, name string, max int64) ([]byte, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err == nil && int64(len(b)) > max {
		err = errors.New("too large")
	}
	return b, err
}

// Ignored reports whether name (root-relative, slash-separated) is ignored; isDir marks folders.
func (g *Ignorer) Ignored(name string, isDir bool) bool {
	dir := path.Dir(name)
	for {
		if gi := g.load(dir); gi != nil {
			rel := name
			if dir != "." {
				rel = strings.TrimPrefix(name, dir+"/")
			}
			if gi.MatchesPath(rel) || (isDir && gi.MatchesPath(rel+"/")) {
				return true
			}
		}
		if dir == "." {
			return false
		}
		dir = path.Dir(dir)
	}
}

// TextMatch is one line that matched Grep.
type TextMatch struct {
	Path string // the file, relative to the folder searched, slash-separated
	Line int    // from 1
	Text string // the line, cut to GrepOptions.MaxLineChars characters
}

// GrepOptions bound a Grep. Zero fields take the defaults in brackets.
type GrepOptions struct {
	MaxMatches   int   // [200]
	MaxFiles     int   // files read [20,000]
	MaxFileBytes int64 // larger files are skipped [1 MiB]
	MaxLineChars int   // [500]
}

var errEnough = errors.New("enough")

// Grep matches re line by line in the files below dir (an absolute folder inside the roots),
// skipping .git folders, paths its .gitignore files ignore, links, binary files (a NUL in the
// first 8 KiB) and files over MaxFileBytes. It stops at MaxMatches, MaxFiles or when ctx ends
// (a deadline is a bound, not an error) and reports truncated then. Matches come in path order.
func (w *Workspace) Grep(ctx context.Context, dir string, re *regexp.Regexp, o GrepOptions) (matches []TextMatch, truncated bool, err error) {
	if o.MaxMatches <= 0 {
		o.MaxMatches = 200
	}
	if o.MaxFiles <= 0 {
		o.MaxFiles = 20000
	}
	if o.MaxFileBytes <= 0 {
		o.MaxFileBytes = 1 << 20
	}
	if o.MaxLineChars <= 0 {
		o.MaxLineChars = 500
	}
	rp, err := w.Folder(dir)
	if err != nil {
		return nil, false, err
	}
	fsys := w.RootFS(rp)
	ig := NewIgnorer(fsys)
	files := 0
	matches = []TextMatch{}
	err = fs.WalkDir(fsys, rp.Rel, func(name string, d fs.DirEntry, err error) error {
		if ctx.Err() != nil {
			truncated = true
			return errEnough
		}
		if err != nil {
			if name == rp.Rel {
				return err
			}
			return nil // an unreadable entry is skipped
		}
		if name == rp.Rel {
			return nil
		}
		if d.IsDir() {
			if d.Name() == ".git" || ig.Ignored(name, true) {
				return fs.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() || ig.Ignored(name, false) {
			return nil
		}
		if files >= o.MaxFiles {
			truncated = true
			return errEnough
		}
		files++
		rel := strings.TrimPrefix(strings.TrimPrefix(name, rp.Rel), "/")
		if rp.Rel == "." {
			rel = name
		}
		full, err := grepFile(fsys, name, rel, re, o, o.MaxMatches-len(matches))
		matches = append(matches, full...)
		if err == errEnough || len(matches) >= o.MaxMatches {
			truncated = true
			return errEnough
		}
		return nil
	})
	if errors.Is(err, errEnough) {
		err = nil
	}
	if err != nil {
		return nil, false, w.classify(rp, err)
	}
	sort.SliceStable(matches, func(i, j int) bool { return matches[i].Path < matches[j].Path })
	return matches, truncated, nil
}

func grepFile(fsys fs.FS, name, rel string, re *regexp.Regexp, o GrepOptions, room int) ([]TextMatch, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return nil, nil
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() || fi.Size() > o.MaxFileBytes {
		return nil, nil
	}
	br := bufio.NewReaderSize(f, 64<<10)
	head, _ := br.Peek(8 << 10)
	if bytes.IndexByte(head, 0) >= 0 {
		return nil, nil // binary
	}
	var out []TextMatch
	sc := bufio.NewScanner(br)
	sc.Buffer(make([]byte, 64<<10), int(o.MaxFileBytes)+1)
	for line := 1; sc.Scan(); line++ {
		b := sc.Bytes()
		if !re.Match(b) {
			continue
		}
		out = append(out, TextMatch{Path: rel, Line: line, Text: cutLine(b, o.MaxLineChars)})
		if len(out) >= room {
			return out, errEnough
		}
	}
	return out, nil
}

// cutLine returns at most n characters of b as valid UTF-8.
func cutLine(b []byte, n int) string {
	s := strings.ToValidUTF8(string(b), "\uFFFD")
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n])
}

// FindFolders searches the folders below each of dirs (absolute folders inside the roots), breadth
// first, for names holding query (case-insensitive), skipping hidden folders, node_modules and
// links. It returns at most limit folders, visits at most maxVisit folders, and stops when ctx
// ends; truncated says a bound cut it.
func (w *Workspace) FindFolders(ctx context.Context, dirs []string, query string, limit, maxVisit int) (found []Path, truncated bool, err error) {
	q := strings.ToLower(query)
	type item struct {
		p   Path
		rel string
	}
	var queue []item
	for _, d := range dirs {
		rp, err := w.Folder(d)
		if err != nil {
			return nil, false, err
		}
		queue = append(queue, item{rp, rp.Rel})
	}
	visited := 0
	found = []Path{}
	for len(queue) > 0 {
		if ctx.Err() != nil || visited >= maxVisit {
			return found, true, nil
		}
		it := queue[0]
		queue = queue[1:]
		visited++
		des, err := fs.ReadDir(w.RootFS(it.p), it.rel)
		if err != nil {
			continue
		}
		for _, de := range des {
			if !de.IsDir() || strings.HasPrefix(de.Name(), ".") || de.Name() == "node_modules" {
				continue
			}
			rel := path.Join(it.rel, de.Name())
			child := Path{Root: it.p.Root, Rel: rel, idx: it.p.idx}
			if strings.Contains(strings.ToLower(de.Name()), q) {
				found = append(found, child)
				if len(found) >= limit {
					return found, true, nil
				}
			}
			queue = append(queue, item{child, rel})
		}
	}
	return found, false, nil
}
