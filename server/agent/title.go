package agent

import (
	"strings"
	"unicode"

	"github.com/zidane-server/zidane/server/oneline"
)

// maxTitleRunes bounds a title taken from a prompt; a longer first line is cut and ends in "…".
const maxTitleRunes = 60

// PromptTitle is the title a session's first prompt gives it: the prompt's first line (up to a
// line feed, carriage return, U+0085, U+2028 or U+2029), other control characters as spaces,
// format characters dropped but the joiners and tags that hold emoji and scripts together (a
// zero-width space, a soft hyphen, a direction mark, a bidi override: none shows, and an override
// the cut left open would reverse the rest of the row an app shows it in), trimmed, at most 60
// characters, cut between two characters as a reader sees them (never inside an emoji sequence
// or before a combining mark); "" when nothing in it shows (Visible), and then the session keeps
// its title. The runtime writes it with the prompt (store.StartRun), so the first prompt stored
// names the session, also when prompts are pipelined.
func PromptTitle(prompt string) string {
	line := strings.TrimSpace(prompt)
	if i := strings.IndexFunc(line, isLineBreak); i >= 0 {
		line = line[:i]
	}
	line = strings.TrimSpace(strings.Map(func(r rune) rune {
		switch {
		case unicode.IsControl(r):
			return ' '
		case unicode.In(r, unicode.Cf) && !keepsTogether(r):
			return -1
		}
		return r
	}, line))
	if !Visible(line) {
		return ""
	}
	if r := []rune(line); len(r) > maxTitleRunes {
		cut := maxTitleRunes
		for cut > 1 && (extendsCluster(r[cut]) || r[cut-1] == zwj) {
			cut--
		}
		ri := 0 // regional indicators pair into flags: an odd run before the cut splits one
		for i := cut - 1; i >= 0 && isRegionalIndicator(r[i]); i-- {
			ri++
		}
		if ri%2 == 1 && isRegionalIndicator(r[cut]) {
			cut--
		}
		line = strings.TrimSpace(string(r[:cut])) + "…"
	}
	return line
}

const zwj = '\u200D'

func isRegionalIndicator(r rune) bool { return r >= 0x1F1E6 && r <= 0x1F1FF }

func isLineBreak(r rune) bool {
	return r == '\n' || r == '\r' || r == '\u0085' || r == '\u2028' || r == '\u2029'
}

// keepsTogether reports the format characters a title keeps: the zero-width joiner and
// non-joiner (emoji sequences, Persian and Indic scripts) and the tag characters of subdivision
// flags.
func keepsTogether(r rune) bool {
	return r == zwj || r == '\u200C' || (r >= 0xE0020 && r <= 0xE007F)
}

// extendsCluster reports whether r continues the character before it: a combining mark, a
// joiner, an emoji modifier or variation selector, a tag.
func extendsCluster(r rune) bool {
	return unicode.In(r, unicode.Mn, unicode.Me, unicode.Mc) || keepsTogether(r) || (r >= 0x1F3FB && r <= 0x1F3FF)
}

// Visible reports whether s has a character that shows (oneline.Visible).
func Visible(s string) bool { return oneline.Visible(s) }

// TitleProblem says what keeps s from being a title a client sets (sessions.create,
// sessions.rename), "" when nothing: oneline.Problem, the one check of every name people read on
// one line (a character that shows, no control characters, no bidi embeddings, overrides or
// isolates).
func TitleProblem(s string) string { return oneline.Problem("a title", s) }
