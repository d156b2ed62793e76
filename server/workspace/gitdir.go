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
// It reads the file system at the time of the call.
func (p Path) InGitDir() bool {
	if p.HasComponent(".git") {
		return true
	}
	dir := p.Root
	if IsGitDir(dir) {
		return true
	}
	parts := strings.Split(p.Rel, "/")
	for _, c := range parts[:len(parts)-1] {
		dir = filepath.Join(dir, c)
		if IsGitDir(dir) {
			return true
		}
	}
	return false
}
