package workspace

import (
	"os"
	"path/filepath"
	"strings"
)

// IsGitDir reports whether dir is a repository's git folder by what it holds, whatever its name:
// a HEAD (file or link) beside an objects/ and a refs/ folder, or beside a commondir file (a
// linked worktree's folder), as git itself recognizes one. A bare repository (`up.git`, or named
// without the suffix) and a checkout's `.git` folder both are; a work tree is not.
func IsGitDir(dir string) bool {
	if fi, err := os.Lstat(filepath.Join(dir, "HEAD")); err != nil || fi.IsDir() {
		return false
	}
	if fi, err := os.Lstat(filepath.Join(dir, "commondir")); err == nil && fi.Mode().IsRegular() {
		return true
	}
	for _, sub := range []string{"objects", "refs"} {
		if fi, err := os.Stat(filepath.Join(dir, sub)); err != nil || !fi.IsDir() {
			return false
		}
	}
	return true
}

// InGitDir reports whether the path lies in a repository's git folder: a component is ".git", or
// a folder from the root down to the path's parent is one by what it holds (IsGitDir), so a
// write into a bare repository's hooks or config is found whatever the repository is called.
// It reads the file system at the time of the call, and counts the path as written (a file, its
// missing parents as folders): a write that would complete a git folder (its HEAD, objects/ or
// refs/ written last, after a planted config) is one too.
func (p Path) InGitDir() bool {
	if p.HasComponent(".git") {
		return true
	}
	dir := p.Root
	parts := strings.Split(p.Rel, "/")
	if p.Rel == "." || p.Rel == "" {
		parts = nil
	}
	for i := 0; ; i++ {
		next, last := "", false
		if i < len(parts) {
			next, last = parts[i], i == len(parts)-1
		}
		if IsGitDir(dir) || (next != "" && gitDirOnceWritten(dir, next, last)) {
			return true
		}
		if i >= len(parts)-1 {
			return false
		}
		dir = filepath.Join(dir, next)
	}
}

// gitDirOnceWritten reports whether dir would be a git folder (IsGitDir) once its entry name is
// written: a file when file, else a folder.
func gitDirOnceWritten(dir, name string, file bool) bool {
	has := func(n string, wantDir bool) bool {
		if n == name {
			return file != wantDir
		}
		fi, err := os.Stat(filepath.Join(dir, n))
		return err == nil && fi.IsDir() == wantDir
	}
	return has("HEAD", false) && (has("commondir", false) || (has("objects", true) && has("refs", true)))
}
