package tools

import (
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// splitReadFile is read_file as it was before it streamed (strings.SplitAfter over the whole
// file): the oracle the streaming version must agree with, for files under the read bound whose
// first line fits the output cap.
func splitReadFile(data, path string, offset, limit, maxBytes int) (string, bool) {
	lines := strings.SplitAfter(data, "\n")
	if len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	if len(lines) == 0 {
		return path + " is empty.", false
	}
	if offset > len(lines) {
		return fmt.Sprintf("%s has %d lines; offset %d is past the end.", path, len(lines), offset), true
	}
	var b strings.Builder
	end := min(offset-1+limit, len(lines))
	for i := offset - 1; i < end; i++ {
		line := fmt.Sprintf("%6d\t%s", i+1, strings.TrimRight(lines[i], "\n"))
		if b.Len()+len(line)+1 > maxBytes {
			fmt.Fprintf(&b, "[output cut at %d bytes: lines %d-%d shown of %d; read on with offset %d]\n", maxBytes, offset, i, len(lines), i+1)
			return b.String(), false
		}
		b.WriteString(line)
		b.WriteByte('\n')
	}
	if end < len(lines) {
		fmt.Fprintf(&b, "[lines %d-%d shown of %d; read on with offset %d]\n", offset, end, len(lines), end+1)
	}
	return b.String(), false
}

// TestReadFileStreamsLikeSplit: the streaming read_file (issue 21, T11) answers exactly what the
// whole-file split did, over random files of short and long lines, \r, empty lines, no final
// newline, and random offsets, limits and output caps.
func TestReadFileStreamsLikeSplit(t *testing.T) {
	f := newFixture(t)
	rng := rand.New(rand.NewSource(21))
	skipped := 0
	pieces := []string{"\n", "\n", "a", "bc", "\r\n", "é", strings.Repeat("x", 70<<10), strings.Repeat("y", 300)}
	for i := 0; i < 300; i++ {
		var b strings.Builder
		for n := rng.Intn(40); n > 0; n-- {
			b.WriteString(pieces[rng.Intn(len(pieces))])
		}
		data := b.String()
		require.NoError(t, os.WriteFile(filepath.Join(f.ws, "f.txt"), []byte(data), 0o644))
		offset, limit, maxBytes := 1+rng.Intn(12), 1+rng.Intn(12), 40+rng.Intn(200<<10)
		f.env.Config = &Config{ReadMaxBytes: maxBytes}
		want, wantErr := splitReadFile(data, "f.txt", offset, limit, maxBytes)
		if strings.HasPrefix(want, "[output cut") {
			skipped++
			continue // the first line over the cap: now its start is shown (below)
		}
		res := f.run(t, "read_file", fmt.Sprintf(`{"path":"f.txt","offset":%d,"limit":%d}`, offset, limit))
		require.Equal(t, want, res.Content, "case %d: %q offset %d limit %d cap %d", i, data[:min(len(data), 80)], offset, limit, maxBytes)
		assert.Equal(t, wantErr, res.IsError)
	}

	assert.Less(t, skipped, 150, "most cases are compared")

	// A first line over the cap shows its start and says so.
	require.NoError(t, os.WriteFile(filepath.Join(f.ws, "f.txt"), []byte(strings.Repeat("z", 1000)+"\nnext\n"), 0o644))
	f.env.Config = &Config{ReadMaxBytes: 100}
	res := f.run(t, "read_file", `{"path":"f.txt"}`)
	assert.Equal(t, "     1\t"+strings.Repeat("z", 92)+"\n[output cut at 100 bytes: line 1 is 1000 bytes long and only its start is shown; 2 lines in all; read on with offset 2]\n", res.Content)
}

// TestGrepLongLines: a line longer than grep's read buffer is matched whole (a match at its end is
// found, its start shown and cut), and the lines after it keep their numbers.
func TestGrepLongLines(t *testing.T) {
	f := newFixture(t)
	long := strings.Repeat("é", 60<<10) + "needle"
	f.Write(t, "l.txt", "first\r\n"+long+"\n"+strings.Repeat("q", 200<<10)+"\nagain needle\r\nlast needle")
	res := f.run(t, "grep", `{"pattern":"needle$","path":"l.txt"}`)
	lines := strings.Split(strings.TrimSuffix(res.Content, "\n"), "\n")
	require.Len(t, lines, 3, res.Content)
	assert.True(t, strings.HasPrefix(lines[0], "l.txt:2:éé"), lines[0][:20])
	assert.True(t, strings.HasSuffix(lines[0], " [line cut]"))
	assert.Less(t, len(lines[0]), 400)
	assert.Equal(t, "l.txt:4:again needle", lines[1], "\\r\\n ends a line")
	assert.Equal(t, "l.txt:5:last needle", lines[2])
}
