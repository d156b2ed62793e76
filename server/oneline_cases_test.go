package server

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// untrusted reports the first rune of s no one-line text a person reads may hold: a C0 or C1
// control, DEL, U+2028/2029 or a bidi control, or a run of 4 spaces; "" when none.
func untrusted(s string) string {
	if strings.Contains(s, "    ") {
		return "a run of spaces"
	}
	for _, r := range s {
		if r < 0x20 || (r >= 0x7F && r <= 0x9F) || r == '\u2028' || r == '\u2029' || (r >= 0x202A && r <= 0x202E) || (r >= 0x2066 && r <= 0x2069) {
			return fmt.Sprintf("%U", r)
		}
	}
	return ""
}

// TestFieldCase_R25_ApprovalSummaryIsOneLine: the model calls exec with a carriage return, ANSI
// sequences, a bidi override, a line separator, 200 spaces and a newline, and write_file with a
// carriage return in its path. Every approval:request's summary, the tool events' text and the
// audit entries the denials wrote show those escaped, on one line, with a cut saying how much it
// hid; the request's input keeps the command exact.
func TestFieldCase_R25_ApprovalSummaryIsOneLine(t *testing.T) {
	long := "echo " + strings.Repeat("x", 300)
	cases := []struct{ tool, args, want string }{
		{"exec", execArgs("touch pwned #\rgit status"), `exec touch pwned #\rgit status`},
		{"exec", execArgs("touch pwned #\x1b[2K\x1b[1Ggit status"), `exec touch pwned #\x1b[2K\x1b[1Ggit status`},
		{"exec", execArgs("rm -rf ~ #\b\b\b\x7f"), `exec rm -rf ~ #\x08\x08\x08\x7f`},
		{"exec", execArgs("cat \u202etxt.exe"), `exec cat \u202etxt.exe`},
		{"exec", execArgs("git status\u2028rm -rf ~"), `exec git status\u2028rm -rf ~`},
		{"exec", execArgs("git status" + strings.Repeat(" ", 200) + "; rm -rf ~"), `exec git status[200 spaces]; rm -rf ~`},
		{"exec", execArgs("git status\nrm -rf ~"), `exec git status\nrm -rf ~`},
		{"exec", execArgs(long), "exec " + long[:195] + "…[+110 chars]"},
		{"write_file", `{"path":"ok.txt\rnotes.md","content":"x\n"}`, `write_file ok.txt\rnotes.md (1 lines)`},
	}
	var turns [][]string
	for _, c := range cases {
		turns = append(turns, []string{toolStep(c.tool, c.args)})
	}
	turns = append(turns, []string{textStep("done")})
	e := newAgentEnv(t, script(t, turns...), nil)
	c := e.dial()
	c.hello()
	sid := c.newSession()
	c.prompt(sid, "go")
	for _, tc := range cases {
		var text string
		for text == "" {
			s := c.nextSignal()
			if s.kind != "event" || s.session != sid {
				continue
			}
			if ev := s.params(t)["event"].(map[string]any); ev["kind"] == "tool" {
				text = ev["text"].(string)
			}
		}
		assert.Empty(t, untrusted(text), "tool event text %q", text)
		req := c.approval(sid)
		assert.Equal(t, tc.want, req["summary"])
		if tc.tool == "exec" {
			assert.Equal(t, tc.args, execArgs(req["input"].(map[string]any)["command"].(string)), "input.command stays exact")
		}
		if note, ok := req["note"].(string); ok {
			assert.Empty(t, untrusted(note), "note %q", note)
		}
		c.answer(sid, req, "deny")
	}
	require.Equal(t, true, c.runEnd(sid)["ok"])

	admin := e.dialAs(e.mint("admin"))
	entries := admin.result("audit.list", fmt.Sprintf(`{"sessionId":%q}`, sid))["entries"].([]any)
	require.Len(t, entries, len(cases))
	for _, x := range entries {
		d := x.(map[string]any)["detail"].(string)
		assert.Empty(t, untrusted(d), "audit detail %q", d)
		assert.True(t, strings.HasPrefix(d, "deny "), d)
	}
}
