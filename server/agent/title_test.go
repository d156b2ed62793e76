package agent

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// A prompt's first line names the session: controls as spaces, bidi embeddings, overrides and
// isolates dropped, joiners kept (an emoji sequence stays whole), cut at 60 characters.
func TestPromptTitle(t *testing.T) {
	for _, c := range []struct{ prompt, want string }{
		{"  Fix the build\nthen the docs", "Fix the build"},
		{"a\tb\x00c", "a b c"},
		{"invoice \u202Efdp.exe", "invoice fdp.exe"},
		{"\u2067שלום\u2069 world", "שלום world"},
		{"family 👨\u200D👩\u200D👧 trip", "family 👨\u200D👩\u200D👧 trip"},
		{"\u202E\u200B \u2066", ""},
		{strings.Repeat("é", 70), strings.Repeat("é", 60) + "…"},
	} {
		assert.Equal(t, c.want, PromptTitle(c.prompt), "%q", c.prompt)
	}
}
