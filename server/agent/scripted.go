package agent

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/zidane-server/zidane/protocol"
)

// scriptedProvider is the deterministic, offline provider: it greets in several markdown pieces,
// calls the lookup tool once, then answers with the tool's result.
type scriptedProvider struct {
	delay    time.Duration
	lastTurn string
}

const scriptedModel = "scripted"

func (p *scriptedProvider) pause(ctx context.Context) error {
	if p.delay <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(p.delay)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func tokens(s string) int64 { return int64(len(strings.Fields(s))) + 1 }

func (p *scriptedProvider) run(ctx context.Context, prompt string, emit func(protocol.StreamEvent), turnEnd func(string, protocol.Usage)) (protocol.RunSummary, error) {
	sum := protocol.RunSummary{ModelID: scriptedModel}
	stream := func(turnID string, pieces []string) (int64, error) {
		var out int64
		for _, piece := range pieces {
			if err := p.pause(ctx); err != nil {
				return out, err
			}
			emit(&protocol.MarkdownEvent{Text: piece, Streaming: true, TurnID: turnID})
			out += tokens(piece)
		}
		return out, nil
	}
	// Turn 1: greet, then call the tool.
	t1 := uuid.NewString()
	first := time.Now()
	out1, err := stream(t1, []string{"Hello! ", "Let me ", "look that up."})
	if err != nil {
		return sum, err
	}
	input, _ := protocol.Marshal(map[string]string{"query": prompt})
	callID := "call_" + uuid.NewString()[:8]
	emit(&protocol.ToolEvent{Tool: "lookup", CallID: callID, Text: fmt.Sprintf("lookup(%q)", truncate(prompt, 60)), Input: input, TurnID: t1})
	if err := p.pause(ctx); err != nil {
		return sum, err
	}
	result := lookup(prompt)
	emit(&protocol.ToolResultEvent{Tool: "lookup", CallID: callID, Text: result, TurnID: t1})
	in1 := tokens(prompt) + 8
	u1 := protocol.Usage{Input: in1, Output: out1, ModelID: scriptedModel, TimeToFirstTokenMs: ptr(int64(0)), StreamDurationMs: ptr(time.Since(first).Milliseconds())}
	turnEnd(t1, u1)
	// Turn 2: answer with the result.
	t2 := uuid.NewString()
	p.lastTurn = t2
	second := time.Now()
	out2, err := stream(t2, []string{"The lookup ", "found: ", result})
	if err != nil {
		return sum, err
	}
	in2 := in1 + out1 + tokens(result)
	turnEnd(t2, protocol.Usage{Input: in2, Output: out2, ModelID: scriptedModel, TimeToFirstTokenMs: ptr(int64(0)), StreamDurationMs: ptr(time.Since(second).Milliseconds())})
	sum.Turns = 2
	sum.TokensIn = in1 + in2
	sum.TokensOut = out1 + out2
	secs := time.Since(first).Seconds()
	if secs < 0.001 {
		secs = 0.001
	}
	sum.TokensPerSecond = float64(int64(float64(sum.TokensOut)/secs*10)) / 10
	return sum, nil
}

func ptr[T any](v T) *T { return &v }

func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}

// lookup is the scripted provider's one tool: deterministic and offline.
func lookup(query string) string {
	n := len(strings.Fields(query))
	return fmt.Sprintf("%d word(s) in %q; the scripted agent is ready.", n, truncate(query, 80))
}
