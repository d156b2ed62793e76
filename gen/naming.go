package main

import (
	"strings"
	"unicode"
)

// initialisms is the one list of words written in capitals in Go and TypeScript names.
var initialisms = map[string]bool{
	"ID": true, "URL": true, "URI": true, "JSON": true, "HTTP": true, "HTTPS": true,
	"API": true, "UUID": true, "IPC": true, "RPC": true, "TTL": true, "UI": true,
	"OS": true, "PID": true, "OK": true, "SHA": true, "CPU": true, "SQL": true, "TLS": true,
	"SSE": true,
}

// words splits s at punctuation and at lower→upper case changes:
// "sessions.loadEvents" → [sessions load Events]; "$seq" → [seq].
func words(s string) []string {
	var out []string
	var cur []rune
	flush := func() {
		if len(cur) > 0 {
			out = append(out, string(cur))
			cur = cur[:0]
		}
	}
	rs := []rune(s)
	for i, r := range rs {
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) {
			flush()
			continue
		}
		if unicode.IsUpper(r) && len(cur) > 0 {
			prev := rs[i-1]
			nextLower := i+1 < len(rs) && unicode.IsLower(rs[i+1])
			if unicode.IsLower(prev) || unicode.IsDigit(prev) || (unicode.IsUpper(prev) && nextLower) {
				flush()
			}
		}
		cur = append(cur, r)
	}
	flush()
	return out
}

// goName turns a wire name into an exported Go identifier using the initialism list.
// It returns "" when s has no letters or digits.
func goName(s string) string {
	var b strings.Builder
	for _, w := range words(s) {
		up := strings.ToUpper(w)
		if initialisms[up] {
			b.WriteString(up)
			continue
		}
		rs := []rune(w)
		rs[0] = unicode.ToUpper(rs[0])
		b.WriteString(string(rs))
	}
	name := b.String()
	if name != "" && unicode.IsDigit([]rune(name)[0]) {
		name = "N" + name
	}
	return name
}
