package workspace

import (
	"bytes"
	"io/fs"
	"os"
	"path"
	"syscall"
	"unsafe"
)

// readDirTyped lists the open folder f (dir, slash-separated, inside root r) with the entry types
// the kernel's listing gives (d_type). os.File.ReadDir lstat's every entry of a folder opened in
// an os.Root (it cannot make the lstat lazy there), which made a walk of 100,000 files 100,000
// system calls slower; here only an entry whose type the file system does not report is lstat'ed,
// through r. Info stays confined: it is r.Lstat of the entry, made when asked.
func readDirTyped(f *os.File, r *os.Root, dir string) ([]fs.DirEntry, error) {
	var out []fs.DirEntry
	buf := make([]byte, 32<<10)
	fd := int(f.Fd())
	for {
		n, err := syscall.ReadDirent(fd, buf)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return out, &fs.PathError{Op: "readdirent", Path: dir, Err: err}
		}
		if n <= 0 {
			return out, nil
		}
		for off := 0; off < n; {
			d := (*syscall.Dirent)(unsafe.Pointer(&buf[off]))
			rec := buf[off : off+int(d.Reclen)]
			off += int(d.Reclen)
			if d.Ino == 0 {
				continue
			}
			nameOff := int(unsafe.Offsetof(d.Name))
			raw := rec[nameOff:]
			if i := bytes.IndexByte(raw, 0); i >= 0 {
				raw = raw[:i]
			}
			name := string(raw)
			if name == "." || name == ".." {
				continue
			}
			e := &typedEntry{name: name, rel: path.Join(dir, name), r: r}
			switch d.Type {
			case syscall.DT_DIR:
				e.typ = fs.ModeDir
			case syscall.DT_REG:
				e.typ = 0
			case syscall.DT_LNK:
				e.typ = fs.ModeSymlink
			case syscall.DT_FIFO:
				e.typ = fs.ModeNamedPipe
			case syscall.DT_SOCK:
				e.typ = fs.ModeSocket
			case syscall.DT_CHR:
				e.typ = fs.ModeDevice | fs.ModeCharDevice
			case syscall.DT_BLK:
				e.typ = fs.ModeDevice
			default: // DT_UNKNOWN: the file system does not say
				fi, err := r.Lstat(e.rel)
				if err != nil {
					continue // gone since it was listed
				}
				e.typ, e.info = fi.Mode().Type(), fi
			}
			out = append(out, e)
		}
	}
}

// typedEntry is an fs.DirEntry of readDirTyped.
type typedEntry struct {
	name, rel string
	typ       fs.FileMode
	r         *os.Root
	info      fs.FileInfo
}

func (e *typedEntry) Name() string      { return e.name }
func (e *typedEntry) IsDir() bool       { return e.typ.IsDir() }
func (e *typedEntry) Type() fs.FileMode { return e.typ }
func (e *typedEntry) String() string    { return fs.FormatDirEntry(e) }

// Info is the entry's lstat through the root (links not followed), as os.DirEntry's is.
func (e *typedEntry) Info() (fs.FileInfo, error) {
	if e.info != nil {
		return e.info, nil
	}
	return e.r.Lstat(e.rel)
}
