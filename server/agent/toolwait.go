package agent

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"
)

// A tool call blocked in the kernel never blocks its run (issue 21, T09): when the run's context
// ends (chat.cancel, the wall-time limit, shutdown) the run waits toolStopGrace for the call to
// return on its own (exec kills its process group and returns; the file tools open only regular
// files, without blocking) and then abandons it: the call gets a result saying so and the run
// ends with its run:end. The abandoned goroutine is counted (Runtime.AbandonedTools) and logged
// when it finally returns; its result is dropped.

// toolStopGrace is how long a run waits, once its context ended, for a tool call to return.
const toolStopGrace = 500 * time.Millisecond

// maxAbandonedTools bounds the abandoned tool calls still blocked: past it, further calls do not
// run (each may pin an OS thread) until some return.
const maxAbandonedTools = 64

// abandonedTools counts the tool calls abandoned and not yet returned, over all runtimes.
var abandonedTools atomic.Int64

// AbandonedTools returns how many tool calls were abandoned by their run's end (a cancel, a
// limit) and have not returned yet.
func AbandonedTools() int64 { return abandonedTools.Load() }

// callTool runs the call in its own goroutine and returns its result, or, when ctx ends and the
// call does not return within toolStopGrace, a result saying it was abandoned.
func (r *Runtime) callTool(ctx context.Context, runner ToolRunner, tc ToolCall) ToolResult {
	if n := abandonedTools.Load(); n >= maxAbandonedTools {
		return ToolResult{Text: fmt.Sprintf("The tool did not run: %d earlier tool calls are still blocked in the system after their runs ended; try again later, and tell the operator.", n), IsError: true}
	}
	const (
		running int32 = iota
		returned
		abandoned
	)
	var state atomic.Int32
	done := make(chan ToolResult, 1)
	start := time.Now()
	go func() {
		res := runner.Run(ctx, tc)
		done <- res
		if !state.CompareAndSwap(running, returned) {
			abandonedTools.Add(-1)
			r.log.Info("an abandoned tool call returned", "session", tc.Session.ID, "run", tc.RunID, "tool", tc.Call.Name, "after", time.Since(start).Round(time.Millisecond))
		}
	}()
	select {
	case res := <-done:
		return res
	case <-ctx.Done():
	}
	t := time.NewTimer(toolStopGrace)
	defer t.Stop()
	select {
	case res := <-done:
		return res
	case <-t.C:
	}
	if !state.CompareAndSwap(running, abandoned) {
		return <-done // it returned just now
	}
	n := abandonedTools.Add(1)
	r.log.Warn("a tool call did not return after its run ended; abandoned", "session", tc.Session.ID, "run", tc.RunID, "tool", tc.Call.Name, "grace", toolStopGrace, "abandoned", n)
	return ToolResult{Text: fmt.Sprintf("(the call did not return within %s and was abandoned; it may still finish in the background)", toolStopGrace), IsError: true}
}
