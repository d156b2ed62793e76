package storetest

import (
	"fmt"

	"github.com/zidane-server/zidane/server/store"
)

// BigTranscript returns the rows of a transcript of the given number of turns for sessionID,
// made for paging tests (issue 7, item 8). Turn i has turnId "t<i>" and follows i%5:
//
//	0: a user-prompt
//	1: markdown, then a tool call "c<i>" whose result is in the next turn (a split exchange)
//	2: the tool-result of "c<i-1>", then markdown
//	3: a tool call "c<i>" and its tool-result (one turn)
//	4: a run-summary
//
// Every event is valid against the schema's StreamEvent.
func BigTranscript(sessionID string, turns int) []store.EventRow {
	out := make([]store.EventRow, 0, turns*2)
	add := func(i int, kind, body string) {
		out = append(out, store.EventRow{SessionID: sessionID, TurnID: fmt.Sprintf("t%d", i), Kind: kind, Body: []byte(body)})
	}
	for i := range turns {
		tid := fmt.Sprintf("t%d", i)
		switch i % 5 {
		case 0:
			add(i, "user-prompt", fmt.Sprintf(`{"kind":"user-prompt","text":"prompt %d","turnId":%q}`, i, tid))
		case 1:
			add(i, "markdown", fmt.Sprintf(`{"kind":"markdown","text":"calling %d","streaming":false,"turnId":%q}`, i, tid))
			add(i, "tool", fmt.Sprintf(`{"kind":"tool","tool":"read","callId":"c%d","text":"read a.txt","input":{"path":"a.txt"},"turnId":%q}`, i, tid))
		case 2:
			add(i, "tool-result", fmt.Sprintf(`{"kind":"tool-result","tool":"read","callId":"c%d","text":"contents %d","turnId":%q}`, i-1, i, tid))
			add(i, "markdown", fmt.Sprintf(`{"kind":"markdown","text":"read %d","streaming":false,"turnId":%q}`, i, tid))
		case 3:
			add(i, "tool", fmt.Sprintf(`{"kind":"tool","tool":"exec","callId":"c%d","text":"ls","input":{"command":"ls"},"turnId":%q}`, i, tid))
			add(i, "tool-result", fmt.Sprintf(`{"kind":"tool-result","tool":"exec","callId":"c%d","text":"a.txt","turnId":%q}`, i, tid))
		case 4:
			add(i, "run-summary", fmt.Sprintf(`{"kind":"run-summary","text":"Mock","runSummary":{"modelId":"mock","durationMs":10,"turns":2,"tokensIn":10,"tokensOut":33,"tokensPerSecond":3300},"turnId":%q}`, tid))
		}
	}
	return out
}
