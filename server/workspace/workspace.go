// Package workspace is the one confinement point for paths inside the server's workspace roots
// (DESIGN "Layout": server/workspace/). Every tool, and the fs, files and git groups, resolve a
// path here and read or write it through the helpers below, which go through os.Root.
//
// A path is resolved against a session's cwd (itself a folder inside a root). Resolution walks the
// path one component at a time from the root, reading every symbolic link it meets: a link that
// stays inside a root (relative, or absolute into any root) is followed, one that leads outside is
// refused, as are ".." past a root and absolute paths outside every root. The result names a root
// and a path inside it with no link left in it. Every use then opens that path through the root's
// os.Root, which refuses any symbolic link swapped in since the check that leads outside the root
// (the check-then-use race, runtime case R19) and never follows an absolute link. A refusal is an
// *Error whose message a model or a client can read and act on.
//
// The hidden paths (Hidden: the data dir, --sandbox-hide paths, the server user's credential
// files) answer as if they did not exist, whichever way they are reached: a path that is, lies
// below, or passes through a hidden path (a link to one included) reads "does not exist", is left
// out of listings, walks and searches, and is refused as outside the roots on write (issue 21,
// case T03).
//
// The package imports nothing of the transport.
package workspace

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/zidane-server/zidane/server/workspace/linkwalk"
)

// Errors of the system calls os.Root makes, to classify its failures.
var (
	errNotDir error = syscall.ENOTDIR
	errIsDir  error = syscall.EISDIR
	errLoop   error = syscall.ELOOP
)

// Reason says why a path was refused or could not be used.
type Reason string

const (
	// ReasonOutside: the path, or a symbolic link on the way, leads outside the workspace roots.
	ReasonOutside Reason = "outside"
	// ReasonNotExist: nothing exists at the path (it is inside the roots).
	ReasonNotExist Reason = "not-exist"
	// ReasonNotDir: the path names a file where a folder is needed.
	ReasonNotDir Reason = "not-dir"
	// ReasonIsDir: the path names a folder where a file is needed.
	ReasonIsDir Reason = "is-dir"
	// ReasonNotRegular: the path names a named pipe, a socket, a device or another special file
	// where a regular file is needed (Err says which kind); such files are never opened to read
	// or write.
	ReasonNotRegular Reason = "not-regular"
	// ReasonInvalid: the path itself is malformed (empty where a name is needed, a NUL byte, too
	// many symbolic links).
	ReasonInvalid Reason = "invalid"
)

// Error is a refused or failed path. Its message names the path as the caller gave it and says what
// to do; it never names where an outside link points.
type Error struct {
	// Path is the path as given (relative to the cwd, or absolute).
	Path string
	// Reason classifies the failure.
	Reason Reason
	// Roots are the workspace roots, for the message.
	Roots []string
	// Err is the underlying error, if any (never shown for ReasonOutside).
	Err error
	// hidden: the path is hidden (Reason is ReasonNotExist; a write reports ReasonOutside).
	hidden bool
}

// Error implements error.
func (e *Error) Error() string {
	roots := strings.Join(e.Roots, ", ")
	switch e.Reason {
	case ReasonOutside:
		return fmt.Sprintf("%q is outside the workspace roots (%s); use a path inside them.", e.Path, roots)
	case ReasonNotExist:
		return fmt.Sprintf("%q does not exist; pass an existing path inside the workspace roots (%s).", e.Path, roots)
	case ReasonNotDir:
		return fmt.Sprintf("%q is not a folder; pass a folder inside the workspace roots.", e.Path)
	case ReasonIsDir:
		return fmt.Sprintf("%q is a folder; pass a file.", e.Path)
	case ReasonNotRegular:
		return fmt.Sprintf("%q is %v; only regular files are read or written, pass one.", e.Path, e.Err)
	}
	if e.Err != nil {
		return fmt.Sprintf("%q: %v", e.Path, e.Err)
	}
	return fmt.Sprintf("%q is not a valid path.", e.Path)
}

// Unwrap returns the underlying error; for ReasonNotExist it matches fs.ErrNotExist.
func (e *Error) Unwrap() error {
	if e.Reason == ReasonNotExist {
		return fs.ErrNotExist
	}
	return e.Err
}

// IsOutside reports whether err is a refusal because a path leads outside the workspace roots.
func IsOutside(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Reason == ReasonOutside
}

// Workspace is a set of workspace roots, each opened as an os.Root. It is safe for concurrent use.
type Workspace struct {
	roots  []root
	hidden *Hidden
	// anyHidden: some hidden path lies inside a root (listings then check links).
	anyHidden bool
}

type root struct {
	dir   string      // absolute, symlinks resolved
	alias string      // the root as configured (absolute, maybe through a link); "" when equal to dir
	r     *os.Root    // opened once at New
	rh    *rootHidden // the hidden paths inside this root
}

// New opens the workspace roots (absolute or relative to the process's working directory; a root
// that is itself a symbolic link is resolved) with hidden and DefaultHidden as the hidden set. It
// fails when a root does not exist, is not a folder, or is itself hidden or inside a hidden path.
// Close releases the roots.
func New(roots []string, hidden ...string) (*Workspace, error) {
	if len(roots) == 0 {
		return nil, errors.New("workspace: no workspace roots")
	}
	w := &Workspace{hidden: NewHidden(append(slices.Clone(hidden), DefaultHidden()...)...)}
	for _, r := range roots {
		a, err := filepath.Abs(r)
		if err != nil {
			return nil, err
		}
		d, err := filepath.EvalSymlinks(a)
		if err != nil {
			w.Close()
			return nil, fmt.Errorf("workspace root %q does not exist; create it or pass another --workspace-root", r)
		}
		rt, err := os.OpenRoot(d)
		if err != nil {
			w.Close()
			return nil, fmt.Errorf("workspace root %q cannot be opened: %w", r, err)
		}
		if fi, err := rt.Stat("."); err != nil || !fi.IsDir() {
			rt.Close()
			w.Close()
			return nil, fmt.Errorf("workspace root %q is not a folder", r)
		}
		alias := filepath.Clean(a)
		if alias == d {
			alias = ""
		}
		rels, holds := w.hidden.within(d)
		if alias != "" {
			more, h := w.hidden.within(alias)
			rels = append(rels, more...)
			holds = cmp.Or(holds, h)
		}
		if holds != "" {
			rt.Close()
			w.Close()
			return nil, fmt.Errorf("workspace root %q is hidden: it is or lies inside %q (the data dir, a --sandbox-hide path or a credential folder); choose a root outside it", r, holds)
		}
		rh := newRootHidden(rels)
		w.anyHidden = w.anyHidden || !rh.empty()
		w.roots = append(w.roots, root{dir: d, alias: alias, r: rt, rh: rh})
	}
	return w, nil
}

// Hidden returns the hidden set (the paths given to New and DefaultHidden): the sandbox covers
// the same paths.
func (w *Workspace) Hidden() *Hidden { return w.hidden }

// HiddenInRoots returns the hidden paths that lie inside a root, absolute and clean, sorted: the
// ones the confinement point has to hide (the others are outside the roots anyway).
func (w *Workspace) HiddenInRoots() []string {
	var out []string
	for _, p := range w.hidden.Paths() {
		for _, f := range []string{p, evalPartial(p)} {
			if _, _, ok := w.locate(f); ok {
				out = append(out, p)
				break
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Close closes every root. Methods called afterwards fail.
func (w *Workspace) Close() error {
	var first error
	for _, r := range w.roots {
		if err := r.r.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// Roots returns the roots, absolute with symlinks resolved, in configuration order.
func (w *Workspace) Roots() []string {
	out := make([]string, len(w.roots))
	for i, r := range w.roots {
		out[i] = r.dir
	}
	return out
}

// Path is a resolved location inside a workspace root: no symbolic link is left in it (except a
// final component that did not exist when it was resolved and one swapped in since, which the
// helpers refuse at use when it leads out).
type Path struct {
	// Root is the root holding the path (absolute, symlinks resolved).
	Root string
	// Rel is the path inside Root, slash-separated and clean; "." is the root itself.
	Rel string
	// Given is the path as the caller passed it, for messages.
	Given string
	// dir is set when the caller's path ended in "/": the path must be a folder.
	dir bool
	idx int
}

// Abs returns the absolute path (Root joined with Rel).
func (p Path) Abs() string { return filepath.Join(p.Root, filepath.FromSlash(p.Rel)) }

// name is what is handed to os.Root: Rel, with the trailing slash kept (so a file is refused).
func (p Path) name() string {
	if p.dir && p.Rel != "." {
		return p.Rel + "/"
	}
	return p.Rel
}

// Under reports whether the path is dir or lies below it; dir is slash-separated and relative to
// the root (e.g. ".git").
func (p Path) Under(dir string) bool {
	return p.Rel == dir || strings.HasPrefix(p.Rel, dir+"/")
}

// HasComponent reports whether any component of the path inside its root equals name (e.g.
// ".git", to find writes into any repository's metadata, nested ones included).
func (p Path) HasComponent(name string) bool {
	for _, c := range strings.Split(p.Rel, "/") {
		if c == name {
			return true
		}
	}
	return false
}

func (w *Workspace) fail(given string, reason Reason, err error) error {
	return &Error{Path: given, Reason: reason, Roots: w.Roots(), Err: err}
}

// hiddenErr is the answer for a hidden path: it does not exist.
func (w *Workspace) hiddenErr(given string) error {
	return &Error{Path: given, Reason: ReasonNotExist, Roots: w.Roots(), hidden: true}
}

// writeErr turns the "does not exist" of a hidden path into the refusal of a path outside the
// roots, which is what a write of one answers.
func (w *Workspace) writeErr(err error) error {
	var e *Error
	if errors.As(err, &e) && e.hidden {
		return w.fail(e.Path, ReasonOutside, nil)
	}
	return err
}

// locate finds the root that lexically holds the clean absolute path abs (by its resolved path or
// its configured alias) and returns its index and the slash path inside it.
func (w *Workspace) locate(abs string) (int, string, bool) {
	for i, r := range w.roots {
		for _, d := range []string{r.dir, r.alias} {
			if d == "" {
				continue
			}
			if abs == d {
				return i, ".", true
			}
			if rel, ok := strings.CutPrefix(abs, d+string(filepath.Separator)); ok {
				return i, filepath.ToSlash(rel), true
			}
		}
	}
	return 0, "", false
}

// Resolve resolves p against cwd. cwd is an absolute folder inside the roots ("" means the first
// root); p is relative to cwd, or absolute. Every symbolic link on the way is read: one that leads
// outside the roots is refused (ReasonOutside). A path whose tail does not exist yet resolves (so
// a file can be created); a caller that needs it to exist stats it. Use the helpers below to read
// or write it, so the check is made again at use.
// A hidden path answers ReasonNotExist, as if it did not exist.
func (w *Workspace) Resolve(cwd, p string) (Path, error) {
	return w.resolve(cwd, p, true)
}

// ResolveWrite is Resolve for a path about to be written: a hidden path is refused as outside
// the roots (ReasonOutside), like any path a write may not reach, whether it exists or not.
func (w *Workspace) ResolveWrite(cwd, p string) (Path, error) {
	rp, err := w.resolve(cwd, p, true)
	return rp, w.writeErr(err)
}

// ResolveLink is Resolve except that a link at the final component is not followed: the Path
// names the link itself (for removing or describing it).
func (w *Workspace) ResolveLink(cwd, p string) (Path, error) {
	return w.resolve(cwd, p, false)
}

func (w *Workspace) resolve(cwd, p string, follow bool) (Path, error) {
	given := p
	if strings.ContainsRune(p, 0) || strings.ContainsRune(cwd, 0) {
		return Path{}, w.fail(given, ReasonInvalid, errors.New("a path cannot hold a NUL character"))
	}
	if cwd == "" {
		cwd = w.roots[0].dir
	}
	var full string
	if filepath.IsAbs(p) {
		full = filepath.Clean(p)
	} else {
		if !filepath.IsAbs(cwd) {
			return Path{}, w.fail(given, ReasonInvalid, errors.New("the cwd must be absolute"))
		}
		// The cwd itself is walked from its root below, so a cwd swapped for a link is caught too;
		// p's own ".." are applied to resolved folders, never lexically to the cwd.
		idx, crel, ok := w.locate(filepath.Clean(cwd))
		if !ok {
			return Path{}, w.fail(given, ReasonOutside, nil)
		}
		return w.walk(idx, crel+"/"+filepath.ToSlash(p), given, strings.HasSuffix(p, "/"), follow)
	}
	idx, rel, ok := w.locate(full)
	if !ok {
		return Path{}, w.fail(given, ReasonOutside, nil)
	}
	return w.walk(idx, rel, given, strings.HasSuffix(p, "/"), follow)
}

// walk resolves rel (slash-separated, relative to root idx) one component at a time through
// linkwalk: every component is looked at through the root's os.Root (a hidden one, or one passed
// through on the way, answers as hidden), an absolute link target goes on in the root that holds
// it. With follow false (and no trailing "/") a link at the last component is kept as it is.
func (w *Workspace) walk(idx int, rel, given string, dir, follow bool) (Path, error) {
	lw := linkwalk.Walker[int]{
		Lstat: func(i int, cand string) (bool, error) {
			fi, err := w.roots[i].r.Lstat(cand)
			if err != nil {
				switch {
				case errors.Is(err, fs.ErrNotExist):
					// Nothing exists here (it names what a write creates). The walk goes on: what
					// lies below fails the same way, and a ".." back out of it reaches existing
					// folders again, whose links and hidden paths must be read, not passed lexically.
					return false, nil
				case isEscape(err):
					return false, w.fail(given, ReasonOutside, nil)
				case errors.Is(err, errNotDir):
					return false, w.fail(given, ReasonNotDir, nil)
				}
				return false, w.fail(given, ReasonInvalid, err)
			}
			if w.roots[i].rh.covers(cand) {
				// Hidden, or passed through on the way (a link into a hidden folder and ".." out).
				return false, w.hiddenErr(given)
			}
			return fi.Mode()&fs.ModeSymlink != 0, nil
		},
		Readlink: func(i int, cand string) (string, error) {
			target, err := w.roots[i].r.Readlink(cand)
			if err != nil {
				return "", w.fail(given, ReasonInvalid, err)
			}
			return target, nil
		},
		Absolute: func(target string) (int, string, error) {
			i, trel, ok := w.locate(filepath.Clean(target))
			if !ok {
				return 0, "", w.fail(given, ReasonOutside, nil)
			}
			return i, trel, nil
		},
		KeepLast: !follow && !dir,
	}
	idx, out, err := lw.Walk(idx, rel)
	switch {
	case errors.Is(err, linkwalk.ErrEscapes):
		return Path{}, w.fail(given, ReasonOutside, nil)
	case errors.Is(err, linkwalk.ErrTooManyLinks):
		return Path{}, w.fail(given, ReasonInvalid, errors.New("too many levels of symbolic links"))
	case err != nil:
		return Path{}, err
	}
	if w.roots[idx].rh.covers(out) {
		return Path{}, w.hiddenErr(given)
	}
	return Path{Root: w.roots[idx].dir, Rel: out, Given: given, dir: dir, idx: idx}, nil
}

// isEscape reports whether an os.Root error is its refusal of a path leading out of the root
// (the standard library does not export that error).
func isEscape(err error) bool {
	return err != nil && strings.Contains(err.Error(), "path escapes from parent")
}

// classify turns an os.Root error on p into an *Error (or returns err unchanged when it is not
// about the path).
func (w *Workspace) classify(p Path, err error) error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return err
	}
	var nr *notRegular
	switch {
	case errors.As(err, &nr) && nr.mode.IsDir():
		return w.fail(p.Given, ReasonIsDir, nil)
	case errors.As(err, &nr):
		return w.fail(p.Given, ReasonNotRegular, nr)
	case isEscape(err):
		return w.fail(p.Given, ReasonOutside, nil)
	case errors.Is(err, fs.ErrNotExist):
		return w.fail(p.Given, ReasonNotExist, nil)
	case errors.Is(err, errNotDir):
		return w.fail(p.Given, ReasonNotDir, nil)
	case errors.Is(err, errIsDir):
		return w.fail(p.Given, ReasonIsDir, nil)
	case errors.Is(err, errLoop):
		// A final-component link swapped in: os.Root opened with O_NOFOLLOW semantics refuses it.
		return w.fail(p.Given, ReasonOutside, nil)
	}
	return w.fail(p.Given, ReasonInvalid, err)
}

func (w *Workspace) rootOf(p Path) *os.Root { return w.roots[p.idx].r }

// Folder resolves dir (absolute, or relative to the first root; "" is the first root) to an
// existing folder inside the roots. It is what a session's cwd is checked with.
func (w *Workspace) Folder(dir string) (Path, error) {
	p, err := w.Resolve("", dir)
	if err != nil {
		return Path{}, err
	}
	fi, err := w.rootOf(p).Stat(p.name())
	if err != nil {
		return Path{}, w.classify(p, err)
	}
	if !fi.IsDir() {
		return Path{}, w.fail(p.Given, ReasonNotDir, nil)
	}
	return p, nil
}
