//go:build !linux

package workspace

import (
	"io/fs"
	"os"
)

// readDirTyped lists the open folder f: os.File.ReadDir where the kernel's listing is not read
// directly.
func readDirTyped(f *os.File, _ *os.Root, _ string) ([]fs.DirEntry, error) { return f.ReadDir(-1) }
