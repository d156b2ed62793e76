package agent

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// A chunked text is the concatenation of its pieces across chunk boundaries, whatever their sizes
// (empty, one byte, a chunk and a half, larger than the largest chunk).
func TestChunkedTextIsItsPieces(t *testing.T) {
	var c chunkedText
	var want strings.Builder
	for i, n := range []int{0, 1, 3, textChunkSize - 4, 7, textChunkSize + textChunkSize/2, 2 << 20, 5} {
		p := strings.Repeat(string(rune('a'+i)), n)
		c.add(p)
		want.WriteString(p)
		assert.Equal(t, want.Len(), c.Len())
	}
	assert.Equal(t, want.String(), c.String())
	for _, ch := range c.chunks[:len(c.chunks)-1] {
		assert.Equal(t, cap(ch), len(ch), "every chunk but the last is full")
	}
}
