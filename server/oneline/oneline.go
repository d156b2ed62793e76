// Package oneline turns text a model, a client or a file controls into one line a person can
// trust (issue 21, cases R25 and T15): every summary and label the server or its CLIs show
// (approval summaries, audit text, tool event text, token and pairing names, safelist labels)
// goes through Line or Cut, and every name a client or an operator sets through Problem. It
// imports only the standard library, so the agent, its tools, the store, the transport and the
// commands may all use it.
package oneline

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Max is the length, in characters, that Line cuts at.
const Max = 200

// minRun is the shortest run of spaces that Line collapses.
const minRun = 4

// Line is Cut(s, Max).
func Line(s string) string { return Cut(s, Max) }

// Cut returns s as one line of at most max characters (runes, max ≥ 1) plus the cut mark:
//   - C0 and C1 control characters and DEL are shown escaped (`\n`, `\r`, `\t`, `\x1b`, `\x7f`,
//     `\u0085`), as are the line and paragraph separators (`\u2028`, `\u2029`), the bidi
//     embeddings, overrides, isolates and marks (`\u202e`, `\u2066`, `\u200f`, …) and bytes that
//     are not UTF-8 (`\xff`): nothing can move the cursor, erase the line, start another line or
//     reorder what follows;
//   - a run of 4 or more spaces (any Unicode space) is shown as `[N spaces]`, so no run of blanks
//     pushes the rest of a line out of view;
//   - when the line is longer than max it is cut between two characters as a reader sees them
//     (never inside an escape, an emoji sequence or before a combining mark), and ends in
//     `…[+N chars]`, N the number of characters of s it hides.
//
// Text that needs none of this comes back unchanged. Backslashes are not doubled: the exact text
// is in the field the protocol carries it in (an approval's `input`, a token's stored name).
func Cut(s string, max int) string {
	if max < 1 {
		max = 1
	}
	if plain(s, max) {
		return s
	}
	type unit struct {
		show  string
		first rune // the first character of s it stands for
		runes int  // how many characters of s it stands for
	}
	var units []unit
	total := 0 // characters of the output
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		u := unit{first: r, runes: 1}
		switch {
		case r == utf8.RuneError && n == 1:
			u.show = fmt.Sprintf(`\x%02x`, s[i])
		case isSpace(r):
			j := i
			for j < len(s) {
				rr, nn := utf8.DecodeRuneInString(s[j:])
				if !isSpace(rr) {
					break
				}
				j += nn
			}
			u.runes = utf8.RuneCountInString(s[i:j])
			if u.runes >= minRun {
				u.show = fmt.Sprintf("[%d spaces]", u.runes)
			} else {
				u.show = s[i:j]
			}
			n = j - i
		default:
			u.show = escape(r)
		}
		units = append(units, u)
		total += utf8.RuneCountInString(u.show)
		i += n
	}
	if total <= max {
		var b strings.Builder
		for _, u := range units {
			b.WriteString(u.show)
		}
		return b.String()
	}
	k, shown := 0, 0
	for k < len(units) && shown+utf8.RuneCountInString(units[k].show) <= max {
		shown += utf8.RuneCountInString(units[k].show)
		k++
	}
	for k > 1 && (extendsCluster(units[k].first) || units[k-1].first == '\u200D') {
		k--
	}
	var b strings.Builder
	kept := 0
	for _, u := range units[:k] {
		b.WriteString(u.show)
		kept += u.runes
	}
	return b.String() + fmt.Sprintf("…[+%d chars]", utf8.RuneCountInString(s)-kept)
}

// plain reports whether s is already one short line: valid UTF-8 of at most max characters with
// nothing Cut escapes and no long run of spaces.
func plain(s string, max int) bool {
	count, run := 0, 0
	for _, r := range s {
		count++
		if count > max || r == utf8.RuneError || escape(r) != string(r) {
			return false
		}
		if isSpace(r) {
			run++
			if run >= minRun {
				return false
			}
		} else {
			run = 0
		}
	}
	return true
}

// escape returns r as Cut shows it.
func escape(r rune) string {
	switch r {
	case '\n':
		return `\n`
	case '\r':
		return `\r`
	case '\t':
		return `\t`
	}
	switch {
	case r < 0x20 || r == 0x7F:
		return fmt.Sprintf(`\x%02x`, r)
	case (r >= 0x80 && r <= 0x9F) || r == '\u2028' || r == '\u2029' || IsBidiControl(r) || isBidiMark(r) || isInvisibleFormat(r):
		return fmt.Sprintf(`\u%04x`, r)
	}
	return string(r)
}

// isInvisibleFormat reports the format characters (Unicode Cf) that draw nothing and so let one
// name pass for another (`cli` and `cli\u200b`): the zero-width space, word joiner, BOM, soft
// hyphen and the like. The joiners U+200C/U+200D and the emoji tag characters are left alone:
// scripts and emoji sequences need them to show as they should.
func isInvisibleFormat(r rune) bool {
	return unicode.Is(unicode.Cf, r) && r != '\u200C' && r != '\u200D' && !(r >= 0xE0020 && r <= 0xE007F) && !IsBidiControl(r) && !isBidiMark(r)
}

// IsBidiControl reports whether r opens or closes a bidi embedding, override or isolate
// (U+202A–U+202E, U+2066–U+2069).
func IsBidiControl(r rune) bool {
	return (r >= 0x202A && r <= 0x202E) || (r >= 0x2066 && r <= 0x2069)
}

// isBidiMark reports the invisible direction marks (LRM, RLM, ALM).
func isBidiMark(r rune) bool { return r == '\u200E' || r == '\u200F' || r == '\u061C' }

// isSpace reports the blanks a run of which Cut collapses: the space and the other Unicode
// spaces (not the controls, which are escaped).
func isSpace(r rune) bool { return r == ' ' || unicode.Is(unicode.Zs, r) }

// extendsCluster reports whether r continues the character before it: a combining mark, a
// joiner, a tag, an emoji modifier or a variation selector.
func extendsCluster(r rune) bool {
	return unicode.In(r, unicode.Mn, unicode.Me, unicode.Mc) || r == '\u200D' || r == '\u200C' ||
		(r >= 0xE0020 && r <= 0xE007F) || (r >= 0x1F3FB && r <= 0x1F3FF) || (r >= 0xFE00 && r <= 0xFE0F)
}

// Problem says what keeps s from being a name or title a client or an operator sets and people
// then read on one line (a session title, a token's name, a pairing's name), "" when nothing. what
// names the value in the answer ("a title", "a token name"). s needs a character that shows
// (Visible), and may hold no control characters (line breaks, tabs, NUL, ESC, DEL, C1, the line
// and paragraph separators) and no bidi embeddings, overrides or isolates, which would reorder
// the row every table or app shows it in.
func Problem(what, s string) string {
	if !Visible(s) {
		return what + " needs a visible character (not only spaces, control, zero-width or combining characters)"
	}
	for _, r := range s {
		switch {
		case unicode.IsControl(r) || r == '\u2028' || r == '\u2029':
			return what + " cannot hold control characters (line breaks, tabs, NUL, escape sequences); send it on one line"
		case IsBidiControl(r):
			return what + " cannot hold bidi embeddings, overrides or isolates (U+202A–U+202E, U+2066–U+2069)"
		case isInvisibleFormat(r):
			return what + fmt.Sprintf(" cannot hold invisible format characters (U+%04X here; zero-width space, word joiner, BOM), which make one name look like another", r)
		}
	}
	return ""
}

// Visible reports whether s has a character that shows: a graphic rune that is neither a space,
// a format character (zero-width space, joiners, direction marks), a combining mark on its own,
// nor a blank that draws nothing (Hangul fillers, the Braille blank).
func Visible(s string) bool {
	for _, r := range s {
		if unicode.IsGraphic(r) && !unicode.IsSpace(r) && !unicode.In(r, unicode.Cf, unicode.Mn, unicode.Me, unicode.Mc) && !isBlank(r) {
			return true
		}
	}
	return false
}

func isBlank(r rune) bool {
	switch r {
	case '\u115F', '\u1160', '\u3164', '\uFFA0', '\u2800':
		return true
	}
	return false
}
