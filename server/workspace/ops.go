package workspace

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
)

// The helpers below resolve (cwd, p) at the moment of use and then go through the root's os.Root,
// so nothing outside the roots is read or written even when a link is swapped in between an
// earlier check (an approval shown to a person) and the use.

// Stat resolves p against cwd and returns what it names (links inside the roots followed).
func (w *Workspace) Stat(cwd, p string) (Path, fs.FileInfo, error) {
	rp, err := w.Resolve(cwd, p)
	if err != nil {
		return Path{}, nil, err
	}
	fi, err := w.rootOf(rp).Stat(rp.name())
	if err != nil {
		return rp, nil, w.classify(rp, err)
	}
	return rp, fi, nil
}

// Open opens the regular file p for reading (openRegular: a folder is refused with ReasonIsDir, a
// named pipe, socket or device with ReasonNotRegular, at once). The caller closes the file.
func (w *Workspace) Open(cwd, p string) (*os.File, Path, error) {
	rp, err := w.Resolve(cwd, p)
	if err != nil {
		return nil, Path{}, err
	}
	f, err := openRegular(w.rootOf(rp), rp.name(), os.O_RDONLY, false)
	if err != nil {
		return nil, rp, w.classify(rp, err)
	}
	if w.openedHidden(rp, f) {
		f.Close()
		return nil, rp, w.hiddenErr(rp.Given)
	}
	return f, rp, nil
}

// openedHidden reports whether the kernel has f, just opened for rp, at a hidden path: a link
// swapped in since rp was resolved (os.Root follows links that stay inside the root).
func (w *Workspace) openedHidden(rp Path, f *os.File) bool {
	rh := w.roots[rp.idx].rh
	if rh.empty() {
		return false
	}
	rel, ok := relTo(w.roots[rp.idx].dir, openedAt(f))
	return ok && rh.covers(rel)
}

// ReadFile reads at most max bytes of the file p (max <= 0: no limit) and reports whether the file
// held more. A folder is refused with ReasonIsDir, a special file with ReasonNotRegular.
func (w *Workspace) ReadFile(cwd, p string, max int64) (data []byte, rp Path, truncated bool, err error) {
	f, rp, err := w.Open(cwd, p)
	if err != nil {
		return nil, rp, false, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, rp, false, w.classify(rp, err)
	}
	if fi.IsDir() {
		return nil, rp, false, w.fail(rp.Given, ReasonIsDir, nil)
	}
	var r io.Reader = f
	if max > 0 {
		r = io.LimitReader(f, max+1)
	}
	data, err = io.ReadAll(r)
	if err != nil {
		return nil, rp, false, w.classify(rp, err)
	}
	if max > 0 && int64(len(data)) > max {
		return data[:max], rp, true, nil
	}
	return data, rp, false, nil
}

// ReadDir lists the folder p, sorted by name. Entries that are links report the link itself.
// Hidden paths are left out, and so are links that lead to one.
func (w *Workspace) ReadDir(cwd, p string) (Path, []fs.DirEntry, error) {
	rp, err := w.Resolve(cwd, p)
	if err != nil {
		return Path{}, nil, err
	}
	des, err := fs.ReadDir(w.RootFS(rp), rp.Rel)
	var nr *notRegular
	if errors.As(err, &nr) {
		return rp, nil, w.fail(rp.Given, ReasonNotDir, nil)
	}
	if err != nil {
		return rp, nil, w.classify(rp, err)
	}
	if w.anyHidden {
		kept := des[:0]
		for _, de := range des {
			if de.Type()&fs.ModeSymlink != 0 {
				if _, err := w.Resolve(rp.Abs(), de.Name()); IsHidden(err) {
					continue
				}
			}
			kept = append(kept, de)
		}
		des = kept
	}
	return rp, des, nil
}

// IsHidden reports whether err is the answer for a hidden path (which reads as "does not exist").
func IsHidden(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.hidden
}

// WalkDir walks the tree at p (which must resolve to a folder) like fs.WalkDir over the root's
// file system: names passed to fn are slash paths relative to the ROOT (rp.Rel joined with the
// entry), links are reported and never followed, so the walk never leaves the root. Hidden paths
// are not visited.
func (w *Workspace) WalkDir(cwd, p string, fn func(rp Path, name string, d fs.DirEntry, err error) error) error {
	rp, err := w.Resolve(cwd, p)
	if err != nil {
		return err
	}
	fsys := w.RootFS(rp)
	return fs.WalkDir(fsys, rp.Rel, func(name string, d fs.DirEntry, err error) error {
		return fn(rp, name, d, err)
	})
}

// RootFS returns the file system of the root holding rp (for reads of names found by WalkDir). Its
// Open opens folders and regular files only, never blocking (openRegular). The hidden paths are
// left out: they are not listed, and opening or stating one answers fs.ErrNotExist. Names must be
// link-free, as WalkDir gives them.
func (w *Workspace) RootFS(rp Path) fs.FS {
	r := w.roots[rp.idx]
	if r.rh.empty() {
		return w.fsOf(rp)
	}
	return hiddenFS{fsys: w.fsOf(rp), rh: r.rh, dir: r.dir}
}

// WriteFile writes data to p, creating missing parent folders (mode 0o755) and the file (perm;
// an existing file keeps its mode). The data goes to a temporary file next to the target that is
// then renamed over it, so a reader never sees half a file and a link swapped in at the final name
// is replaced itself, never followed. A path ending in "/" or naming a folder is refused, one
// naming a named pipe, socket or device too (ReasonNotRegular), and a hidden path as outside the
// roots.
func (w *Workspace) WriteFile(cwd, p string, data []byte, perm fs.FileMode) (Path, error) {
	rp, err := w.ResolveWrite(cwd, p)
	if err != nil {
		return Path{}, err
	}
	if rp.dir || rp.Rel == "." {
		return rp, w.fail(rp.Given, ReasonIsDir, nil)
	}
	r := w.rootOf(rp)
	if fi, err := r.Stat(rp.Rel); err == nil {
		if fi.IsDir() {
			return rp, w.fail(rp.Given, ReasonIsDir, nil)
		}
		if !fi.Mode().IsRegular() {
			return rp, w.NotRegular(rp.Given, fi.Mode())
		}
		perm = fi.Mode().Perm()
	} else if !errors.Is(err, fs.ErrNotExist) {
		return rp, w.classify(rp, err)
	}
	if dir := path.Dir(rp.Rel); dir != "." {
		if err := r.MkdirAll(dir, 0o755); err != nil {
			return rp, w.classify(rp, err)
		}
	}
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	tmp := path.Join(path.Dir(rp.Rel), "."+path.Base(rp.Rel)+".zidane-"+hex.EncodeToString(rnd[:]))
	f, err := r.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return rp, w.classify(rp, err)
	}
	if w.openedHidden(rp, f) {
		f.Close()
		_ = r.Remove(tmp)
		return rp, w.fail(rp.Given, ReasonOutside, nil)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		_ = r.Remove(tmp)
		return rp, w.classify(rp, err)
	}
	if err := f.Close(); err != nil {
		_ = r.Remove(tmp)
		return rp, w.classify(rp, err)
	}
	if err := r.Rename(tmp, rp.Rel); err != nil {
		_ = r.Remove(tmp)
		return rp, w.classify(rp, err)
	}
	return rp, nil
}

// MkdirAll creates the folder p and any missing parents (a hidden path is refused as outside the
// roots).
func (w *Workspace) MkdirAll(cwd, p string, perm fs.FileMode) (Path, error) {
	rp, err := w.ResolveWrite(cwd, p)
	if err != nil {
		return Path{}, err
	}
	if err := w.rootOf(rp).MkdirAll(rp.Rel, perm); err != nil {
		return rp, w.classify(rp, err)
	}
	return rp, nil
}

// Remove removes the file or empty folder p (a link is removed itself; a hidden path is refused
// as outside the roots).
func (w *Workspace) Remove(cwd, p string) (Path, error) {
	rp, err := w.ResolveLink(cwd, p)
	if err != nil {
		return Path{}, w.writeErr(err)
	}
	if rp.Rel == "." {
		return rp, w.fail(rp.Given, ReasonInvalid, errors.New("a workspace root cannot be removed"))
	}
	if err := w.rootOf(rp).Remove(rp.Rel); err != nil {
		return rp, w.classify(rp, err)
	}
	return rp, nil
}
