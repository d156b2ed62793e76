package workspace

import (
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSpecialFilesRefused: every open of the confinement point refuses a named pipe and a socket
// at once (a FIFO with no writer would block open(2) for ever), with an error naming the kind;
// a write over one is refused and leaves it; listing one says it is no folder.
func TestSpecialFilesRefused(t *testing.T) {
	root, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	fifo := filepath.Join(root, "p")
	require.NoError(t, syscall.Mkfifo(fifo, 0o644))
	t.Cleanup(func() { // let go of a reader still blocked (a failing run of this test)
		if fd, err := syscall.Open(fifo, syscall.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			syscall.Close(fd)
		}
	})
	ln, err := net.Listen("unix", filepath.Join(root, "s"))
	require.NoError(t, err)
	defer ln.Close()
	require.NoError(t, os.Symlink("p", filepath.Join(root, "link")))
	w, err := New([]string{root})
	require.NoError(t, err)
	defer w.Close()

	done := make(chan struct{})
	go func() {
		defer close(done)
		for name, kind := range map[string]string{"p": "a named pipe", "s": "a socket", "link": "a named pipe"} {
			_, _, err := w.Open(root, name)
			var we *Error
			if !assert.True(t, errors.As(err, &we), "%s: %v", name, err) {
				continue
			}
			assert.Equal(t, ReasonNotRegular, we.Reason)
			assert.Equal(t, `"`+name+`" is `+kind+", not a regular file; only regular files are read or written, pass one.", err.Error())

			_, _, _, err = w.ReadFile(root, name, 0)
			assert.ErrorAs(t, err, &we)
			_, err = w.WriteFile(root, name, []byte("x"), 0o644)
			assert.ErrorAs(t, err, &we, name)
			assert.Equal(t, ReasonNotRegular, we.Reason)
			_, _, err = w.ReadDir(root, name)
			assert.ErrorAs(t, err, &we)
			assert.Equal(t, ReasonNotDir, we.Reason)
			_, err = w.RootFS(Path{}).Open(name)
			assert.Error(t, err)
			_, err = fs.ReadFile(w.RootFS(Path{}), name)
			assert.Error(t, err)
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("an open of a special file blocked")
	}
	fi, err := os.Lstat(fifo)
	require.NoError(t, err)
	assert.Equal(t, fs.ModeNamedPipe, fi.Mode().Type(), "the FIFO is left as it was")
	_, _, err = w.Open(root, ".")
	assert.ErrorContains(t, err, "is a folder")
}
