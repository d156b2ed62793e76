package oneline

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
)

func TestLineEscapesWhatMovesTheCursor(t *testing.T) {
	for in, want := range map[string]string{
		"touch pwned #\rgit status":        `touch pwned #\rgit status`,
		"a\nb":                             `a\nb`,
		"a\tb":                             `a\tb`,
		"\x1b[2K\x1b[1Gls":                 `\x1b[2K\x1b[1Gls`,
		"ab\bc":                            `ab\x08c`,
		"a\x00b\x7f":                       `a\x00b\x7f`,
		"c1 \u0085 \u009b":                 `c1 \u0085 \u009b`,
		"x\u2028y\u2029z":                  `x\u2028y\u2029z`,
		"rm -rf \u202e/ gnp.txt":           `rm -rf \u202e/ gnp.txt`,
		"\u2066iso\u2069 \u200fmark\u200e": `\u2066iso\u2069 \u200fmark\u200e`,
		"bad \xff byte":                    `bad \xff byte`,
	} {
		got := Line(in)
		assert.Equal(t, want, got, "%q", in)
		assert.NotContains(t, got, "\r")
	}
}

func TestLineKeepsPlainText(t *testing.T) {
	for _, s := range []string{"", "git status", "write_file notes.md (12 lines)", "日本語 👩‍👩‍👧 🇫🇷 e\u0301", "a   b", `grep 'a\|b'`} {
		assert.Equal(t, s, Line(s))
	}
}

func TestLineCollapsesSpaceRuns(t *testing.T) {
	assert.Equal(t, "git status[200 spaces]&& rm -rf ~", Line("git status"+strings.Repeat(" ", 200)+"&& rm -rf ~"))
	assert.Equal(t, "a[4 spaces]b", Line("a  \u3000 b"))
	assert.Equal(t, "a   b", Line("a   b"), "three spaces are a gap, not a run")
}

func TestCutSaysHowMuchItHid(t *testing.T) {
	s := strings.Repeat("x", 250)
	got := Line(s)
	assert.Equal(t, strings.Repeat("x", 200)+"…[+50 chars]", got)

	got = Cut("abcdef\nline two", 8)
	assert.Equal(t, `abcdef\n…[+8 chars]`, got, "the newline shows and the rest is counted")

	got = Cut("ab\x1bcd", 4)
	assert.Equal(t, "ab…[+3 chars]", got, "an escape is never split")

	got = Cut("abc"+strings.Repeat(" ", 50)+"tail", 12)
	assert.Equal(t, "abc…[+54 chars]", got, "a collapsed run that does not fit is hidden whole")

	got = Cut("ab👩\u200d👧", 3)
	assert.Equal(t, "ab…[+3 chars]", got, "never inside an emoji sequence")
	got = Cut("abe\u0301x", 3)
	assert.Equal(t, "ab…[+3 chars]", got, "never before a combining mark")
	for _, s := range []string{strings.Repeat("é\u2028", 300), strings.Repeat("\x1b", 500)} {
		got := Line(s)
		assert.LessOrEqual(t, utf8.RuneCountInString(got), Max+len("…[+1000 chars]"))
		assert.True(t, strings.Contains(got, "…[+"), got)
	}
}

func TestProblem(t *testing.T) {
	assert.Empty(t, Problem("a token name", "my-laptop"))
	assert.Empty(t, Problem("a token name", "Ünïcödé 名前 👩‍💻"))
	for _, s := range []string{"evil\nrow", "tab\there", "esc\x1b[2K", "del\x7f", "c1\u0085", "ls\u2028", "bad\u202e", "iso\u2066x"} {
		assert.Contains(t, Problem("a token name", s), "a token name cannot hold", "%q", s)
	}
	assert.Contains(t, Problem("a title", " \u200b "), "needs a visible character")
}

// Invisible format characters are shown escaped and refused in names (a fresh user's token
// "cli\u200b" listed exactly like "cli"); the joiners of scripts and emoji stay as they are.
func TestInvisibleFormatCharacters(t *testing.T) {
	assert.Equal(t, `cli\u200b`, Line("cli\u200b"))
	assert.Equal(t, `a\u2060b\ufeff`, Line("a\u2060b\ufeff"))
	assert.Equal(t, "👩\u200d💻", Line("👩\u200d💻"))
	assert.Equal(t, "क्\u200dष", Line("क्\u200dष"))
	assert.Contains(t, Problem("a token name", "cli\u200b"), "U+200B")
	assert.Empty(t, Problem("a token name", "👩\u200d💻 dev"))
}
