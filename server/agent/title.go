package agent

import (
	"strings"
	"unicode"
)

// maxTitleRunes bounds a title taken from a prompt; a longer first line is cut and ends in "…".
const maxTitleRunes = 60

// PromptTitle is the title a session's first prompt gives it: the prompt's first line, control
// characters as spaces, trimmed, at most 60 characters; "" when nothing in it shows (Visible), and
// then the session keeps its title. The runtime writes it with the prompt (store.StartRun), so the
// first prompt stored names the session, also when prompts are pipelined.
func PromptTitle(prompt string) string {
	line := strings.TrimSpace(strings.SplitN(strings.TrimSpace(prompt), "\n", 2)[0])
	line = strings.TrimSpace(strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
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
