package workspace

import (
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// DefaultHidden returns the credential files of the server's user that neither the agent, a
// client nor a sandboxed command ever needs (docs/security.md "Hidden paths"), absolute: under
// the user's home directory (git, cloud, container, package registry and shell credentials, the
// user's zidane-server config) and, when the server runs as root, the shadow and sudoers files.
// It is the one list the confinement point and the sandbox both use (issue 21, case T03).
func DefaultHidden() []string {
	var out []string
	if home, err := os.UserHomeDir(); err == nil && home != "/" && filepath.IsAbs(home) {
		for _, n := range []string{".ssh", ".gnupg", ".aws", ".azure", ".config/gcloud", ".config/gh", ".kube",
			".docker", ".netrc", ".git-credentials", ".pgpass", ".npmrc", ".pypirc", ".config/zidane-server",
			".cargo/credentials", ".cargo/credentials.toml", ".vault-token", ".terraform.d/credentials.tfrc.json",
			".config/containers/auth.json", ".local/share/keyrings", ".password-store"} {
			out = append(out, filepath.Join(home, n))
		}
	}
	if os.Geteuid() == 0 {
		out = append(out, "/etc/shadow", "/etc/gshadow", "/etc/sudoers", "/etc/sudoers.d")
	}
	return out
}

// Hidden is the set of paths hidden from every way into the workspace (tools, the fs and files
// groups, media, git answers) and from sandboxed commands: a hidden path and everything below it
// answers as if it did not exist. It is built once at start and never changes; safe for
// concurrent use.
type Hidden struct {
	paths []string            // as given, absolute and clean, without duplicates, in order
	forms map[string]struct{} // every absolute form of every path (as given, its folder's links resolved, fully resolved)
}

// NewHidden builds the set from paths (absolute, or relative to the process's working
// directory; "" is skipped). Each path is matched as given and with its symbolic links resolved,
// so a path reached through a link, or a link to a path, is matched too. A path that does not
// exist yet is hidden as well.
func NewHidden(paths ...string) *Hidden {
	h := &Hidden{forms: map[string]struct{}{}}
	for _, p := range paths {
		if p == "" {
			continue
		}
		a, err := filepath.Abs(p)
		if err != nil {
			continue
		}
		if _, ok := h.forms[a]; !ok {
			h.paths = append(h.paths, a)
		}
		h.forms[a] = struct{}{}
		parent := evalPartial(filepath.Dir(a))
		h.forms[filepath.Join(parent, filepath.Base(a))] = struct{}{}
		h.forms[evalPartial(a)] = struct{}{}
	}
	return h
}

// evalPartial resolves the symbolic links of the longest existing leading part of the clean
// absolute path a and appends the rest.
func evalPartial(a string) string {
	rest := ""
	for cur := a; ; {
		if r, err := filepath.EvalSymlinks(cur); err == nil {
			return filepath.Join(r, rest)
		}
		parent := filepath.Dir(cur)
		if parent == cur {
			return a
		}
		rest = filepath.Join(filepath.Base(cur), rest)
		cur = parent
	}
}

// Paths returns the hidden paths as given (absolute, clean), in order. It is what the sandbox
// covers.
func (h *Hidden) Paths() []string {
	if h == nil {
		return nil
	}
	return slices.Clone(h.paths)
}

// Contains reports whether the absolute path abs is hidden: it, or a folder holding it, is one
// of the set's paths in any of its forms. abs is compared lexically (resolve it first).
func (h *Hidden) Contains(abs string) bool {
	if h == nil || len(h.forms) == 0 {
		return false
	}
	for p := filepath.Clean(abs); ; {
		if _, ok := h.forms[p]; ok {
			return true
		}
		parent := filepath.Dir(p)
		if parent == p {
			return false
		}
		p = parent
	}
}

// Under returns the hidden paths that lie inside the folder dir (absolute, clean; its links
// resolved, as a repository's top is), relative to it with forward slashes, sorted: what a git
// answer about dir leaves out.
func (h *Hidden) Under(dir string) []string {
	if h == nil {
		return nil
	}
	rels, _ := h.within(filepath.Clean(dir))
	slices.Sort(rels)
	return slices.Compact(rels)
}

// within returns the paths of every form that lie inside dir (clean, absolute), relative to it
// and slash-separated; inside reports a form that is dir itself or holds it.
func (h *Hidden) within(dir string) (rels []string, holds string) {
	for f := range h.forms {
		if f == dir || strings.HasPrefix(dir, f+string(filepath.Separator)) || f == string(filepath.Separator) {
			holds = f
			continue
		}
		if rel, ok := strings.CutPrefix(f, dir+string(filepath.Separator)); ok {
			rels = append(rels, filepath.ToSlash(rel))
		}
	}
	return rels, holds
}

// rootHidden is the part of the hidden set inside one root, by root-relative slash path: hidden
// are the hidden paths, above every folder that holds one. A lookup costs one map access per
// component until it leaves the folders that hold hidden paths (one access for most paths).
type rootHidden struct {
	hidden map[string]bool
	above  map[string]bool
}

func newRootHidden(rels []string) *rootHidden {
	rh := &rootHidden{hidden: map[string]bool{}, above: map[string]bool{}}
	for _, r := range rels {
		rh.hidden[r] = true
		for d := path.Dir(r); ; d = path.Dir(d) {
			rh.above[d] = true
			if d == "." {
				break
			}
		}
	}
	return rh
}

// empty reports whether no hidden path lies inside the root.
func (rh *rootHidden) empty() bool { return rh == nil || len(rh.hidden) == 0 }

// covers reports whether rel (root-relative, slash-separated, clean; "." the root) is hidden or
// lies below a hidden path.
func (rh *rootHidden) covers(rel string) bool {
	if rh.empty() || rel == "." || rel == "" {
		return false
	}
	for i := 0; ; {
		j := strings.IndexByte(rel[i:], '/')
		if j < 0 {
			return rh.hidden[rel]
		}
		p := rel[:i+j]
		if rh.hidden[p] {
			return true
		}
		if !rh.above[p] {
			return false
		}
		i += j + 1
	}
}

// holds reports whether the folder rel holds a hidden path directly or deeper (its listing needs
// filtering).
func (rh *rootHidden) holds(rel string) bool {
	if rh.empty() {
		return false
	}
	if rel == "" {
		rel = "."
	}
	return rh.above[rel]
}

// filter drops the entries of the folder rel that are hidden.
func (rh *rootHidden) filter(rel string, des []fs.DirEntry) []fs.DirEntry {
	if !rh.holds(rel) {
		return des
	}
	out := des[:0:0]
	for _, de := range des {
		if !rh.hidden[path.Join(rel, de.Name())] {
			out = append(out, de)
		}
	}
	return out
}

// openedAt returns the absolute path the kernel has for the open file f (Linux: its
// /proc/self/fd link), or "" when it cannot tell.
func openedAt(f *os.File) string {
	sc, err := f.SyscallConn()
	if err != nil {
		return ""
	}
	var at string
	_ = sc.Control(func(fd uintptr) {
		at, _ = os.Readlink("/proc/self/fd/" + strconv.FormatUint(uint64(fd), 10))
	})
	if !filepath.IsAbs(at) {
		return ""
	}
	return at
}

// hiddenFS is a root's file system without its hidden paths: they are not listed, and opening
// or stating one fails with fs.ErrNotExist.
type hiddenFS struct {
	fsys fs.FS
	rh   *rootHidden
	dir  string // the root, absolute, symlinks resolved
}

func (h hiddenFS) notExist(op, name string) error {
	return &fs.PathError{Op: op, Path: name, Err: fs.ErrNotExist}
}

// Open implements fs.FS. A file that the kernel says is open at a hidden path (a link swapped in
// since the name was listed) is closed and reported missing.
func (h hiddenFS) Open(name string) (fs.File, error) {
	if h.rh.covers(name) {
		return nil, h.notExist("open", name)
	}
	f, err := h.fsys.Open(name)
	if err != nil {
		return nil, err
	}
	if of, ok := f.(*os.File); ok {
		if rel, ok := relTo(h.dir, openedAt(of)); ok && h.rh.covers(rel) {
			f.Close()
			return nil, h.notExist("open", name)
		}
	}
	if h.rh.holds(path.Clean(name)) {
		if d, ok := f.(fs.ReadDirFile); ok {
			return &hiddenDir{ReadDirFile: d, rel: path.Clean(name), rh: h.rh}, nil
		}
	}
	return f, nil
}

// ReadDir implements fs.ReadDirFS.
func (h hiddenFS) ReadDir(name string) ([]fs.DirEntry, error) {
	if h.rh.covers(name) {
		return nil, h.notExist("readdir", name)
	}
	if rf, ok := h.fsys.(regularFS); ok {
		des, err := rf.readDir(name, func(of *os.File) error {
			if rel, ok := relTo(h.dir, openedAt(of)); ok && h.rh.covers(rel) {
				return h.notExist("readdir", name)
			}
			return nil
		})
		if h.rh.holds(path.Clean(name)) {
			des = h.rh.filter(path.Clean(name), des)
		}
		return des, err
	}
	f, err := h.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	d, ok := f.(fs.ReadDirFile)
	if !ok {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: errNotDir}
	}
	des, err := d.ReadDir(-1)
	slices.SortFunc(des, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return des, err
}

// Stat implements fs.StatFS.
func (h hiddenFS) Stat(name string) (fs.FileInfo, error) {
	if h.rh.covers(name) {
		return nil, h.notExist("stat", name)
	}
	return fs.Stat(h.fsys, name)
}

// Lstat implements fs.ReadLinkFS (a hidden path is missing).
func (h hiddenFS) Lstat(name string) (fs.FileInfo, error) {
	if h.rh.covers(name) {
		return nil, h.notExist("lstat", name)
	}
	return fs.Lstat(h.fsys, name)
}

// ReadLink implements fs.ReadLinkFS (a hidden path is missing).
func (h hiddenFS) ReadLink(name string) (string, error) {
	if h.rh.covers(name) {
		return "", h.notExist("readlink", name)
	}
	return fs.ReadLink(h.fsys, name)
}

// ReadFile implements fs.ReadFileFS (through Open, so the opened file is checked).
func (h hiddenFS) ReadFile(name string) ([]byte, error) {
	f, err := h.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// hiddenDir is an open folder that holds hidden paths: its listing leaves them out.
type hiddenDir struct {
	fs.ReadDirFile
	rel string
	rh  *rootHidden
}

// ReadDir implements fs.ReadDirFile.
func (d *hiddenDir) ReadDir(n int) ([]fs.DirEntry, error) {
	for {
		des, err := d.ReadDirFile.ReadDir(n)
		des = d.rh.filter(d.rel, des)
		if len(des) > 0 || err != nil || n <= 0 {
			return des, err
		}
	}
}

// relTo returns abs relative to dir (slash-separated; "." for dir itself) when it lies inside.
func relTo(dir, abs string) (string, bool) {
	if abs == "" {
		return "", false
	}
	if abs == dir {
		return ".", true
	}
	rel, ok := strings.CutPrefix(abs, dir+string(filepath.Separator))
	return filepath.ToSlash(rel), ok
}

// Holds reports whether the folder dir is p or holds it, both compared with their symbolic links
// resolved (as far as they exist). Both are absolute or relative to the working directory.
func Holds(dir, p string) bool {
	d, err1 := filepath.Abs(dir)
	a, err2 := filepath.Abs(p)
	if err1 != nil || err2 != nil {
		return false
	}
	d, a = evalPartial(d), evalPartial(a)
	return a == d || strings.HasPrefix(a, d+string(filepath.Separator)) || d == string(filepath.Separator)
}
