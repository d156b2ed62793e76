package main

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/zidane-server/zidane/protocol"
)

// TestParseTyped: a line typed at the terminal answers a question with option numbers (one, or
// several when it allows several), with text when it allows text, dismisses it when empty, and
// anything else says what to type.
func TestParseTyped(t *testing.T) {
	one := &protocol.InteractionRequest{Options: []string{"red", "blue"}}
	many := &protocol.InteractionRequest{Options: []string{"red", "blue", "green"}, Multiple: true}
	text := &protocol.InteractionRequest{Options: []string{"red"}, AllowText: true}
	for _, c := range []struct {
		q       *protocol.InteractionRequest
		line    string
		choices []string
		text    string
		problem string
	}{
		{q: one, line: " 2 ", choices: []string{"blue"}},
		{q: one, line: "1,2", problem: "choose one option: this question takes one"},
		{q: one, line: "3", problem: "this question takes the number of an option, from 1 to 2"},
		{q: one, line: "blue", problem: "this question takes the number of an option, from 1 to 2"},
		{q: many, line: "1, 3", choices: []string{"red", "green"}},
		{q: text, line: "1", choices: []string{"red"}},
		{q: text, line: "2 reds", text: "2 reds"},
		{q: one, line: "  "},
	} {
		ans, problem := parseTyped(c.q, c.line)
		assert.Equal(t, c.problem, problem, "%q", c.line)
		switch {
		case c.choices != nil:
			if assert.NotNil(t, ans, "%q", c.line) {
				assert.Equal(t, c.choices, ans.Choices, "%q", c.line)
			}
		case c.text != "":
			if assert.NotNil(t, ans, "%q", c.line) && assert.NotNil(t, ans.Text) {
				assert.Equal(t, c.text, *ans.Text)
			}
		default:
			assert.Nil(t, ans, "%q: dismissed or refused", c.line)
		}
	}
}
