package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/zidane-server/zidane/server/agent/defs"
	"github.com/zidane-server/zidane/server/agent/provider"
	"github.com/zidane-server/zidane/server/oneline"
	"github.com/zidane-server/zidane/server/store"
)

// Subagents (issue 27 item 4): the task tool hands a piece of work to another agent definition in
// a child session, runs it there in the parent's run slot, and answers the child's final text.

// taskTool is the task tool's spec; its description lists the project's agents (taskSpec).
var taskTool = provider.Tool{
	Name: "task",
	InputSchema: json.RawMessage(`{"type":"object","required":["agent","prompt"],"properties":{` +
		`"agent":{"type":"string","description":"The agent definition to hand the work to."},` +
		`"prompt":{"type":"string","description":"The work, complete: the subagent sees nothing of this conversation."},` +
		`"description":{"type":"string","description":"A few words naming the work (the child session's title)."}},"additionalProperties":false}`),
}

// taskSpec is the task tool offered in a run of a project whose agents are names.
func taskSpec(names []string) provider.Tool {
	t := taskTool
	t.Description = "Hand a self-contained piece of work to another agent, which runs it in a child session the user can open, and answer its final report. The agents: " + strings.Join(names, ", ") + "."
	return t
}

// maxTaskAnswer bounds the child's answer the parent's model reads.
const maxTaskAnswer = 64 << 10

// depth is x's level: 0 for a root session, its parent's plus one for a child. A chain longer
// than limit+1 stops counting there.
func (r *Runtime) depth(ctx context.Context, x store.Session, limit int) (int, error) {
	d := 0
	for x.ParentSessionID != "" && d <= limit {
		p, err := r.st.GetSession(ctx, x.ParentSessionID)
		if err != nil {
			return 0, err
		}
		x = p
		d++
	}
	return d, nil
}

// runTask runs one task call of ru: it creates the child session, starts its run with the
// parent's agent as its ceiling and waits for its run:end. Cancelling ru cancels the child.
func (r *Runtime) runTask(ctx context.Context, ru *run, ag *runAgent, offered []provider.Tool, c provider.ToolCall) ToolResult {
	var in struct {
		Agent, Prompt, Description string
	}
	if err := json.Unmarshal(c.Arguments, &in); err != nil || strings.TrimSpace(in.Agent) == "" || strings.TrimSpace(in.Prompt) == "" {
		return ToolResult{Text: `task needs {"agent": string, "prompt": string, "description"?: string}.`, IsError: true}
	}
	lim := r.cfg.Limits
	level, err := r.depth(ctx, ru.session, lim.MaxTaskDepth)
	if err != nil {
		return ToolResult{Text: "task: the session's place among its parents could not be read (" + err.Error() + "); try again.", IsError: true}
	}
	if level >= lim.MaxTaskDepth {
		return ToolResult{Text: fmt.Sprintf("Refused: this session is at level %d of subagents, the deepest allowed (the operator's --max-task-depth is %d); do the work here instead.", level, lim.MaxTaskDepth), IsError: true}
	}
	if ru.children >= lim.MaxTaskChildren {
		return ToolResult{Text: fmt.Sprintf("Refused: this run already started %d subagents, the most one run may (the operator's --max-task-children); do the rest here.", lim.MaxTaskChildren), IsError: true}
	}
	set := r.Definitions(ru.session.ProjectRoot)
	def, ok := set.Agent(in.Agent)
	if !ok {
		return ToolResult{Text: fmt.Sprintf("There is no agent %q; the agents are: %s.", in.Agent, strings.Join(ag.agents, ", ")), IsError: true}
	}
	ru.children++
	title := in.Description
	if strings.TrimSpace(title) == "" {
		title = in.Prompt
	}
	x, err := r.st.CreateSession(ctx, store.Session{Title: oneline.Cut(title, 60), TitleSet: true, ProjectRoot: ru.session.ProjectRoot, Cwd: ru.session.Cwd,
		AgentID: def.Name, Status: "idle", Model: ru.session.Model, ParentSessionID: ru.sessionID, ParentRunID: ru.id})
	if err != nil {
		return ToolResult{Text: "task: the child session could not be created (" + err.Error() + "); try again.", IsError: true}
	}
	// The child starts from the parent session's guards; its definition can only narrow them.
	if mode, err := r.st.ApprovalMode(ctx, ru.sessionID); err == nil && mode != store.ModeAsk {
		err = r.st.SetApprovalMode(ctx, x.ID, mode, "subagent of "+ru.sessionID)
		if err != nil {
			return ToolResult{Text: "task: the child session's approval mode could not be set (" + err.Error() + "); the work did not start.", IsError: true}
		}
	}
	if p, err := r.st.SessionSandbox(ctx, ru.sessionID); err != nil || p != "" {
		if err == nil {
			err = r.st.SetSessionSandbox(ctx, x.ID, p)
		}
		if err != nil {
			return ToolResult{Text: "task: the child session's sandbox policy could not be set (" + err.Error() + "); the work did not start.", IsError: true}
		}
	}
	r.rep.SessionChanged(x)
	ceiling := &runAgent{def: ag.def, ceiling: map[string]bool{}}
	for _, t := range offered {
		ceiling.ceiling[t.Name] = true
	}
	child, err := r.startRun(ctx, x, Prompt{Text: in.Prompt}, ru.origin, ceiling)
	if err != nil {
		return ToolResult{Text: "task: the subagent's run did not start: " + err.Error(), IsError: true}
	}
	select {
	case <-child.finished:
	case <-ctx.Done():
		r.Cancel(x.ID, child.id)
		select {
		case <-child.finished:
		case <-time.After(10 * time.Second):
		}
		return ToolResult{Text: fmt.Sprintf("The subagent in session %s was stopped: %s", x.ID, r.stopReason(ctx, ru)), IsError: true}
	}
	answer := child.answer.String()
	if len(answer) > maxTaskAnswer {
		answer = answer[:maxTaskAnswer] + fmt.Sprintf("\n[… cut at %d KiB; the whole answer is in session %s]", maxTaskAnswer>>10, x.ID)
	}
	if !child.ok {
		return ToolResult{Text: fmt.Sprintf("The subagent %q in session %s ended without finishing (its transcript says why). What it answered last:\n%s", def.Name, x.ID, answer), IsError: true}
	}
	return ToolResult{Text: fmt.Sprintf("%s\n\n(The subagent %q worked in session %s.)", strings.TrimSpace(answer), def.Name, x.ID)}
}

// agentNames lists set's agents, sorted, for the task tool.
func agentNames(set *defs.Set) []string {
	out := make([]string, 0, len(set.Agents))
	for _, a := range set.Agents {
		out = append(out, a.Name)
	}
	sort.Strings(out)
	return out
}

// capped is child's definition under parent's: it may only narrow (as a project file), and never
// past the parent's own approval mode and sandbox policy.
func capped(child, parent defs.Agent) defs.Agent {
	child.Origin = defs.OriginProject
	child.ApprovalMode = defs.Stricter(defs.ApprovalModes, child.ApprovalMode, parent.ApprovalMode)
	child.Sandbox = defs.Stricter(defs.SandboxPolicies, child.Sandbox, parent.Sandbox)
	return child
}
