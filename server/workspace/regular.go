package workspace

import (
	"errors"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"syscall"
)

// Files that are not files (issue 21, field cases T09 and T11). A named pipe, a socket or a device
// inside the roots (a sandboxed command, a test run or the user can make a FIFO with mkfifo) is
// never read or written: every open here goes through openRegular, which opens without blocking
// (O_NONBLOCK: open(2) of a FIFO with no writer would wait for one for ever, O_NOCTTY: a terminal
// never becomes the server's), checks the type on the open descriptor (so a file swapped in since
// an earlier check is caught) and refuses anything but a regular file (and a folder where one is
// listed or walked). O_NONBLOCK has no effect on reads of regular files and folders.

// notRegular is the error of an open that found a special file.
type notRegular struct{ mode fs.FileMode }

func (e *notRegular) Error() string { return FileKind(e.mode) + ", not a regular file" }

// FileKind names the type of mode in words for messages: "a named pipe", "a socket", "a
// character device", "a device", "a symbolic link", "a folder", "a regular file" or "a special
// file".
func FileKind(mode fs.FileMode) string {
	switch {
	case mode.IsRegular():
		return "a regular file"
	case mode.IsDir():
		return "a folder"
	case mode&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case mode&fs.ModeSocket != 0:
		return "a socket"
	case mode&fs.ModeCharDevice != 0:
		return "a character device"
	case mode&fs.ModeDevice != 0:
		return "a device"
	case mode&fs.ModeSymlink != 0:
		return "a symbolic link"
	}
	return "a special file"
}

// NotRegular returns the refusal of the path given, which names a file of mode that is not a
// regular file (for callers that found it by a walk or a stat rather than an open).
func (w *Workspace) NotRegular(given string, mode fs.FileMode) error {
	return w.fail(given, ReasonNotRegular, &notRegular{mode})
}

// openRegular opens name in r with flag (O_RDONLY or O_WRONLY, no O_CREATE) without blocking,
// and returns it only when the open descriptor is a regular file, or a folder when dirOK. A
// special file is refused with a *fs.PathError wrapping *notRegular (classify makes it
// ReasonNotRegular).
func openRegular(r *os.Root, name string, flag int, dirOK bool) (*os.File, error) {
	f, err := r.OpenFile(name, flag|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if errors.Is(err, syscall.ENXIO) {
		// O_WRONLY|O_NONBLOCK of a FIFO with no reader, or a device with nothing behind it.
		if fi, serr := r.Stat(name); serr == nil && !fi.Mode().IsRegular() {
			err = &notRegular{fi.Mode()}
		}
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if m := fi.Mode(); !m.IsRegular() && !(dirOK && m.IsDir()) {
		f.Close()
		return nil, &fs.PathError{Op: "open", Path: name, Err: &notRegular{m}}
	}
	return f, nil
}

// regularFS is a root's file system (RootFS, and what ReadDir, WalkDir and the searches read
// through) whose Open is openRegular: folders and regular files only. Stat does not open.
type regularFS struct{ r *os.Root }

// Open implements fs.FS.
func (f regularFS) Open(name string) (fs.File, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrInvalid}
	}
	file, err := openRegular(f.r, name, os.O_RDONLY, true)
	if err != nil {
		return nil, err // a nil *os.File must not become a non-nil fs.File
	}
	return file, nil
}

// ReadDir implements fs.ReadDirFS: the folder's entries sorted by name, typed from the kernel's
// listing (readDirTyped).
func (f regularFS) ReadDir(name string) ([]fs.DirEntry, error) { return f.readDir(name, nil) }

// readDir opens the folder name through the root, calls check with it (nil: none; an error ends
// the listing with it), and lists it sorted by name.
func (f regularFS) readDir(name string, check func(*os.File) error) ([]fs.DirEntry, error) {
	file, err := f.Open(name)
	if err != nil {
		return nil, err
	}
	of := file.(*os.File)
	defer of.Close()
	if check != nil {
		if err := check(of); err != nil {
			return nil, err
		}
	}
	if fi, err := of.Stat(); err != nil || !fi.IsDir() {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: errNotDir}
	}
	des, err := readDirTyped(of, f.r, path.Clean(name))
	slices.SortFunc(des, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return des, err
}

// Stat implements fs.StatFS (links inside the root followed, nothing opened).
func (f regularFS) Stat(name string) (fs.FileInfo, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "stat", Path: name, Err: fs.ErrInvalid}
	}
	return f.r.Stat(name)
}

// Lstat implements fs.ReadLinkFS: name itself, a link not followed (links before it inside the
// root are).
func (f regularFS) Lstat(name string) (fs.FileInfo, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "lstat", Path: name, Err: fs.ErrInvalid}
	}
	return f.r.Lstat(name)
}

// ReadLink implements fs.ReadLinkFS: the link's target as written (it is not followed, so a
// target outside the root is told, never reached).
func (f regularFS) ReadLink(name string) (string, error) {
	if !fs.ValidPath(name) {
		return "", &fs.PathError{Op: "readlink", Path: name, Err: fs.ErrInvalid}
	}
	return f.r.Readlink(name)
}

// fsOf returns the regular-only file system of the root holding p.
func (w *Workspace) fsOf(p Path) fs.FS { return regularFS{w.rootOf(p)} }
