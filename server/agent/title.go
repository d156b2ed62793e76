package agent

import (
	"strings"
	"unicode"
)

// maxTitleRunes bounds a title taken from a prompt; a longer first line is cut and ends in "…".
const maxTitleRunes = 60

// PromptTitle is the title a session's first prompt gives it: the prompt's first line, control
// characters as spaces, bidi embeddings, overrides and isolates dropped (one the cut leaves open,
// or any from pasted text, would reverse the rest of the line an app shows it in), trimmed, at most 60 characters; "" when nothing in it shows (Visible), and
// then the session keeps its title. The runtime writes it with the prompt (store.StartRun), so the
// first prompt stored names the session, also when prompts are pipelined.
func PromptTitle(prompt string) string {
	line := strings.TrimSpace(strings.SplitN(strings.TrimSpace(prompt), "\n", 2)[0])
	line = strings.TrimSpace(strings.Map(func(r rune) rune {
		switch {
		case unicode.IsControl(r):
			return ' '
		case isBidiControl(r):
			return -1
		}
		return r
	}, line))
	if !Visible(line) {
		return ""
	}
	if r := []rune(line); len(r) > maxTitleRunes {
		line = strings.TrimSpace(string(r[:maxTitleRunes])) + "…"
	}
	return line
}

// Visible reports whether s has a character that shows: a graphic rune that is neither a space
// nor a format character (zero-width space, joiners, direction marks).
func Visible(s string) bool {
	for _, r := range s {
		if unicode.IsGraphic(r) && !unicode.IsSpace(r) && !unicode.In(r, unicode.Cf) {
			return true
		}
	}
	return false
}

// isBidiControl reports whether r opens or closes a bidi embedding, override or isolate
// (U+202A–U+202E, U+2066–U+2069). Marks (U+200E, U+200F) and joiners stay: they open nothing.
func isBidiControl(r rune) bool {
	return (r >= 0x202A && r <= 0x202E) || (r >= 0x2066 && r <= 0x2069)
}
