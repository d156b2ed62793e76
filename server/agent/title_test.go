package agent

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// A prompt's first line names the session: controls as spaces, format characters dropped but
// joiners (an emoji sequence stays whole), cut at 60 characters between two characters as a
// reader sees them; nothing when nothing in it shows (a break-it helper's cases).
func TestPromptTitle(t *testing.T) {
	family := "👨\u200D👩\u200D👧"
	for _, c := range []struct{ prompt, want string }{
		{"  Fix the build\nthen the docs", "Fix the build"},
		{"one\u2028two", "one"},
		{"one\rtwo", "one"},
		{"a\tb\x00c", "a b c"},
		{"invoice \u202Efdp.exe", "invoice fdp.exe"},
		{"\u2067שלום\u2069 world", "שלום world"},
		{"family " + family + " trip", "family " + family + " trip"},
		{strings.Repeat("\u200b", 60) + "Fix the login bug", "Fix the login bug"},
		{"\u202E\u200B \u2066", ""},
		{"\u0301\u0301", ""},
		{"\u3164\u2800\u115F", ""},
		{strings.Repeat("é", 70), strings.Repeat("é", 60) + "…"},
		{strings.Repeat("a", 58) + family + "z", strings.Repeat("a", 58) + "…"},
		{strings.Repeat("a", 59) + "e\u0301z", strings.Repeat("a", 59) + "…"},
		{strings.Repeat("a", 59) + "🇫🇷z", strings.Repeat("a", 59) + "…"},
		{strings.Repeat("a", 58) + "🇫🇷z", strings.Repeat("a", 58) + "🇫🇷…"},
	} {
		assert.Equal(t, c.want, PromptTitle(c.prompt), "%q", c.prompt)
	}
}

// A title a client sets shows something and holds no controls or bidi overrides.
func TestTitleProblem(t *testing.T) {
	assert.Empty(t, TitleProblem("Budget 2027 "+"👨\u200D👩"))
	assert.Empty(t, TitleProblem("שלום"))
	for _, bad := range []string{"", " \u200b", "\u0301", "a\nb", "a\tb", "bell\a", "x\u202Ey", "x\u2066y"} {
		assert.NotEmpty(t, TitleProblem(bad), "%q", bad)
	}
}
