package agent

import "strings"

// textChunkSize is the size of a chunkedText's chunks.
const textChunkSize = 64 << 10

// chunkedText is a streamed block's text as it grows: pieces are appended to fixed-size chunks,
// so a block of n bytes costs n bytes and one partial chunk, and no piece copies what came before
// (an append-grown buffer reallocated and copied the whole text at every growth: a block of n
// bytes cost about 5n in allocations, and held up to 1.25n).
type chunkedText struct {
	chunks [][]byte
	n      int
}

// add appends s.
func (t *chunkedText) add(s string) {
	t.n += len(s)
	for len(s) > 0 {
		if k := len(t.chunks); k == 0 || len(t.chunks[k-1]) == cap(t.chunks[k-1]) {
			t.chunks = append(t.chunks, make([]byte, 0, max(textChunkSize, min(len(s), 1<<20))))
		}
		last := &t.chunks[len(t.chunks)-1]
		m := min(len(s), cap(*last)-len(*last))
		*last = append(*last, s[:m]...)
		s = s[m:]
	}
}

// Len is the text's length in bytes.
func (t *chunkedText) Len() int { return t.n }

// String returns the text (one allocation of its exact size).
func (t *chunkedText) String() string {
	var b strings.Builder
	b.Grow(t.n)
	for _, c := range t.chunks {
		b.Write(c)
	}
	return b.String()
}
