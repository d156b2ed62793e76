package agent

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/zidane-server/zidane/protocol"
	"github.com/zidane-server/zidane/server/agent/defs"
	"github.com/zidane-server/zidane/server/agent/provider"
	"github.com/zidane-server/zidane/server/agent/provider/scripted"
	"github.com/zidane-server/zidane/server/oneline"
	"github.com/zidane-server/zidane/server/store"
)

// Prompt is what chat.send hands the runtime: the text the model reads and, for a command, the
// command and its arguments the user-prompt event records (issue 27 item 3).
type Prompt struct {
	Text               string
	Command, Arguments string
	// Attachments are the files sent with it (chat.send's attachments, checked by
	// CheckAttachments): stored in its user-prompt event and passed to the model.
	Attachments []protocol.Attachment
	// Mentions are the files and folders the user attached (chat.send's mentions; issue 28):
	// the run reads each through the file tools before the model's first turn (mentionEvents).
	Mentions []string
}

// Definitions reads the agents, skills and commands of x's project merged with the server
// user's (Config.DefsHome). It reads the files each time: they are few and small, and a change
// takes effect at the next run without a watcher.
func (r *Runtime) Definitions(projectRoot string) *defs.Set {
	return defs.Load(r.cfg.DefsHome, defs.ProjectSource(r.cfg.Workspace, projectRoot))
}

// runAgent is what a run uses of its agent: the definition and the skills its project offers.
type runAgent struct {
	def    defs.Agent
	skills []defs.Skill
	// narrow, once a skill with allowed-tools is loaded, limits the tools for the rest of the run.
	narrow []string
	// agents are the project's agent names (the task tool's description).
	agents []string
	// ceiling, for a subagent's run, is the tools its parent's run offered: never more.
	ceiling map[string]bool
}

// agentOf resolves the run's agent. An agent that is gone (its file deleted or broken since
// sessions.setAgent) is an error the run ends with, never a silent fallback to a looser one.
func (r *Runtime) agentOf(x store.Session, parent *runAgent) (*runAgent, error) {
	set := r.Definitions(x.ProjectRoot)
	name := x.AgentID
	if name == "" {
		name = defs.Build
	}
	a, ok := set.Agent(name)
	if !ok {
		return nil, &runError{fmt.Sprintf("The session's agent %q is not defined any more (agents.list shows the agents and any file that could not be used); pick one with sessions.setAgent.", name)}
	}
	ra := &runAgent{def: *a, agents: agentNames(set)}
	if parent != nil {
		ra.def, ra.ceiling = capped(*a, parent.def), parent.ceiling
	}
	if ra.def.Offers(skillTool.Name) && (ra.ceiling == nil || ra.ceiling[skillTool.Name]) {
		ra.skills = set.Skills
	}
	return ra, nil
}

// offers reports whether the run offers the tool now.
func (ra *runAgent) offers(name string) bool {
	if name == scripted.LookupTool.Name {
		return true // the offline scripted provider's own demo tool (withLookup adds it for that provider only)
	}
	if ra.ceiling != nil && !ra.ceiling[name] {
		return false
	}
	if name == skillTool.Name {
		return len(ra.skills) > 0
	}
	if !ra.def.Offers(name) {
		return false
	}
	if ra.narrow == nil {
		return true
	}
	for _, t := range ra.narrow {
		if t == name {
			return true
		}
	}
	return false
}

// offersPrefix reports whether the run could offer a tool whose name begins with prefix (an
// MCP server's mcp__<server>__, before its tools are listed): the agent offers all tools, names
// one with that prefix, or names a pattern (name*) that covers it; a task's ceiling bounds it.
func (ra *runAgent) offersPrefix(prefix string) bool {
	match := func(t string) bool {
		return strings.HasPrefix(t, prefix) || (strings.HasSuffix(t, "*") && strings.HasPrefix(prefix, strings.TrimSuffix(t, "*")))
	}
	if ra.ceiling != nil {
		ok := false
		for t, allowed := range ra.ceiling {
			if allowed && match(t) {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	if ra.narrow != nil {
		ok := false
		for _, t := range ra.narrow {
			if match(t) {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	if ra.def.AllTools {
		return true
	}
	for _, t := range ra.def.Tools {
		if match(t) {
			return true
		}
	}
	return false
}

// tools filters the host's tools to the run's, adding the skill tool when skills are offered.
func (ra *runAgent) tools(all []provider.Tool) []provider.Tool {
	out := make([]provider.Tool, 0, len(all)+1)
	for _, t := range all {
		if ra.offers(t.Name) {
			out = append(out, t)
		}
	}
	if ra.offers(skillTool.Name) {
		out = append(out, skillTool)
	}
	if ra.offers(taskTool.Name) {
		out = append(out, taskSpec(ra.agents))
	}
	return out
}

// notOffered is the result of a call of a tool the run does not offer.
func (ra *runAgent) notOffered(name string, offered []provider.Tool) ToolResult {
	names := make([]string, 0, len(offered))
	for _, t := range offered {
		names = append(names, t.Name)
	}
	sort.Strings(names)
	return ToolResult{Text: fmt.Sprintf("The tool %q is not offered to the agent %q in this run; it did not run. The tools are: %s.", name, ra.def.Name, strings.Join(names, ", ")), IsError: true}
}

// skillTool loads a skill: its body and files, or one of its files.
var skillTool = provider.Tool{
	Name:        "skill",
	Description: "Load a skill by name: answers its instructions and the files it holds; with file, answers that file of the skill. Load a skill when its description fits the task, then follow it.",
	InputSchema: json.RawMessage(`{"type":"object","required":["name"],"properties":{"name":{"type":"string","description":"The skill's name, as the system prompt lists it."},"file":{"type":"string","description":"A file of the skill, relative to its folder, as the skill's listing names it."}},"additionalProperties":false}`),
}

// runSkill runs a skill tool call.
func (ra *runAgent) runSkill(arguments json.RawMessage) ToolResult {
	var in struct {
		Name string `json:"name"`
		File string `json:"file"`
	}
	if err := json.Unmarshal(arguments, &in); err != nil || in.Name == "" {
		return ToolResult{Text: `skill needs {"name": string, "file"?: string}.`, IsError: true}
	}
	var sk *defs.Skill
	for i := range ra.skills {
		if ra.skills[i].Name == in.Name {
			sk = &ra.skills[i]
		}
	}
	if sk == nil {
		names := make([]string, 0, len(ra.skills))
		for _, s := range ra.skills {
			names = append(names, s.Name)
		}
		return ToolResult{Text: fmt.Sprintf("There is no skill %q; the skills are: %s.", in.Name, strings.Join(names, ", ")), IsError: true}
	}
	if in.File != "" {
		data, err := sk.ReadFile(in.File)
		if err != nil {
			return ToolResult{Text: "skill: " + err.Error(), IsError: true}
		}
		return ToolResult{Text: string(data)}
	}
	body, err := sk.Body()
	if err != nil {
		return ToolResult{Text: fmt.Sprintf("skill %q could not be read: %v", sk.Name, err), IsError: true}
	}
	files, truncated, _ := sk.Files()
	var b strings.Builder
	fmt.Fprintf(&b, "# Skill %s\n\n%s\n", sk.Name, body)
	if len(files) > 0 {
		b.WriteString("\nFiles of the skill (read one with skill and file):\n")
		for _, f := range files {
			b.WriteString("- " + f + "\n")
		}
		if truncated {
			fmt.Fprintf(&b, "- … (more than %d files)\n", defs.MaxSkillFiles)
		}
	}
	if len(sk.AllowedTools) > 0 {
		ra.narrow = append(append([]string(nil), sk.AllowedTools...), skillTool.Name)
		fmt.Fprintf(&b, "\nWhile this skill is in use, the tools are narrowed to: %s.\n", strings.Join(sk.AllowedTools, ", "))
	}
	return ToolResult{Text: b.String()}
}

// skillsPrompt is the system prompt's list of the skills offered.
func (ra *runAgent) skillsPrompt() string {
	if len(ra.skills) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("\n\n# Skills\n\nLoad a skill with the skill tool when its description fits the task:\n")
	for _, s := range ra.skills {
		fmt.Fprintf(&b, "- %s: %s\n", s.Name, oneline.Cut(s.Description, 300))
	}
	return strings.TrimRight(b.String(), "\n")
}
