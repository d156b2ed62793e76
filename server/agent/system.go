package agent

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/zidane-server/zidane/server/agent/provider"
	"github.com/zidane-server/zidane/server/store"
)

// DefaultSystemPrompt is the built-in system prompt (issue 8, "System prompt"); %s are the
// workspace root and the session's working directory. Config.SystemPrompt replaces it.
const DefaultSystemPrompt = `You are Zidane, an agent working for the user on the machine of a zidane-server.
Workspace: %s. The session's working directory: %s. Paths you use are relative to the working directory and must stay inside the workspace.
Use the tools offered to you to look things up, read and change files and run commands; do not guess what a tool would tell you. Tools that change things ask the user for approval first: when a call is denied or cancelled, its result says so; respect it, do not repeat the same call, and ask the user what to do instead.
Answer in Markdown, briefly and precisely.`

// agentsFile is the project-instructions file of the field's convention.
const agentsFile = "AGENTS.md"

// maxAgentsBytes bounds each AGENTS.md read into the system prompt.
const maxAgentsBytes = 64 << 10

// systemPrompt builds a run's system prompt: the operator's override or the built-in default, the
// tools offered, then every AGENTS.md from the workspace root down to the session's cwd (the
// nearest last, so it has the last word), each under a heading naming its folder.
func (r *Runtime) systemPrompt(x store.Session, ag *runAgent, tools []provider.Tool) string {
	var b strings.Builder
	switch {
	case ag != nil && ag.def.Prompt != "":
		b.WriteString(ag.def.Prompt)
		fmt.Fprintf(&b, "\n\nWorkspace: %s. The session's working directory: %s.", x.ProjectRoot, x.Cwd)
	case r.cfg.SystemPrompt != "":
		b.WriteString(r.cfg.SystemPrompt)
	default:
		fmt.Fprintf(&b, DefaultSystemPrompt, x.ProjectRoot, x.Cwd)
	}
	if len(tools) > 0 {
		b.WriteString("\n\nTools: ")
		for i, t := range tools {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(t.Name)
		}
		b.WriteString(".")
	}
	if ag != nil {
		b.WriteString(ag.skillsPrompt())
	}
	for _, dir := range dirsDown(x.ProjectRoot, x.Cwd) {
		text, ok := r.readAgents(x, dir)
		if !ok {
			continue
		}
		rel, err := filepath.Rel(x.ProjectRoot, dir)
		if err != nil || rel == "." {
			rel = "the workspace root"
		}
		fmt.Fprintf(&b, "\n\n# Project instructions (%s in %s)\n\n%s", agentsFile, rel, strings.TrimSpace(text))
	}
	return b.String()
}

// dirsDown lists root, then each folder down to cwd (cwd must be root or below it).
func dirsDown(root, cwd string) []string {
	if root == "" {
		return nil
	}
	rel, err := filepath.Rel(root, cwd)
	if err != nil || strings.HasPrefix(rel, "..") {
		return []string{root}
	}
	out := []string{root}
	if rel == "." {
		return out
	}
	d := root
	for _, part := range strings.Split(rel, string(filepath.Separator)) {
		d = filepath.Join(d, part)
		out = append(out, d)
	}
	return out
}

// readAgents reads dir/AGENTS.md through the workspace (never outside the roots).
func (r *Runtime) readAgents(x store.Session, dir string) (string, bool) {
	if r.cfg.Workspace == nil {
		return "", false
	}
	data, _, truncated, err := r.cfg.Workspace.ReadFile(x.Cwd, filepath.Join(dir, agentsFile), maxAgentsBytes)
	if err != nil {
		return "", false
	}
	s := string(data)
	if truncated {
		s += fmt.Sprintf("\n[… %s cut at %d KiB]", agentsFile, maxAgentsBytes>>10)
	}
	return s, true
}
