package defs

import (
	"fmt"
	"path"
	"strings"
)

// Approval modes and sandbox policies, strictest first: the values an agent definition may name
// (they mirror store.Mode* and sandbox.Policy*, which this package does not import).
var (
	// ApprovalModes, strictest first.
	ApprovalModes = []string{"locked", "ask", "auto-edit"}
	// SandboxPolicies, strictest first.
	SandboxPolicies = []string{"read-only", "workspace-write", "workspace-write+network", "off"}
)

// rank is v's place in order (0 strictest), or -1 when v is not in it.
func rank(order []string, v string) int {
	for i, o := range order {
		if o == v {
			return i
		}
	}
	return -1
}

// Stricter returns the stricter of a and b in order (ApprovalModes or SandboxPolicies); "" or an
// unknown value counts as absent.
func Stricter(order []string, a, b string) string {
	ra, rb := rank(order, a), rank(order, b)
	switch {
	case ra < 0:
		return b
	case rb < 0:
		return a
	case ra <= rb:
		return a
	default:
		return b
	}
}

// Agent is an agent definition: what a session running it sends as its system prompt, which
// model it defaults to, which tools it offers, and the guards it asks for.
type Agent struct {
	// Name is the id sessions.setAgent takes and Session.agentId holds.
	Name        string
	Description string
	// Model is the provider/model id runs default to when the session names none; "" none.
	Model string
	// Tools are exactly the tools offered, by name (a name ending in `*` matches by prefix, as
	// `mcp__github__*`); AllTools also offers every tool of the host except `skill` and `task`,
	// which a definition names to get.
	Tools    []string
	AllTools bool
	// ApprovalMode and Sandbox are the mode and sandbox policy the definition asks for ("" none).
	// For a project definition they only ever narrow (see Narrow).
	ApprovalMode, Sandbox string
	// Prompt is the system prompt (the file's body); "" keeps the server's.
	Prompt string
	// Origin and Path say where it comes from (Path "" for a built-in).
	Origin Origin
	Path   string
	// Problems are what was wrong with the file: the fields listed here were ignored. A
	// definition with Problems still runs with the rest.
	Problems []string
}

// Built-in agents (issue 27 item 1).
const (
	// Build is today's agent: every tool, the server's system prompt.
	Build = "build"
	// Plan reads and plans: read-only tools, no exec, no writes (mode locked, sandbox read-only).
	Plan = "plan"
)

// planPrompt leads the plan agent's system prompt.
const planPrompt = `You are Zidane in plan mode: you read the workspace and make a plan; you change nothing. You cannot write files or run commands in this mode. Look things up with the read-only tools, keep the plan with update_plan, ask the user with ask_user when a choice is theirs, and end with the plan and what it would change.`

// Builtins are the server's agents, build first.
func Builtins() []Agent {
	return []Agent{
		{Name: Build, Description: "The default agent: reads, edits and runs commands, asking for approval as the session's mode says.", AllTools: true, Tools: []string{"skill"}, Origin: OriginBuiltin},
		{Name: Plan, Description: "Reads the workspace and makes a plan; cannot write files or run commands.",
			Tools: []string{"read_file", "list_dir", "glob", "grep", "ask_user", "update_plan", "skill"}, ApprovalMode: "locked", Sandbox: "read-only",
			Prompt: planPrompt, Origin: OriginBuiltin},
	}
}

// Offers reports whether the agent offers the tool named name.
func (a Agent) Offers(name string) bool {
	for _, t := range a.Tools {
		if t == name || (strings.HasSuffix(t, "*") && strings.HasPrefix(name, strings.TrimSuffix(t, "*"))) {
			return true
		}
	}
	return a.AllTools && name != "skill" && name != "task"
}

// Narrow returns the approval mode and sandbox policy a run of this agent uses in a session whose
// own are mode and policy. A built-in's or the server user's definition sets them as it says; a
// project definition's only ever tightens them (a looser value is ignored: listed by Loosens).
func (a Agent) Narrow(mode, policy string) (string, string) {
	if a.Origin != OriginUser {
		// A built-in narrows too: plan never reaches writes, whatever the session allows.
		return Stricter(ApprovalModes, mode, a.ApprovalMode), Stricter(SandboxPolicies, policy, a.Sandbox)
	}
	if a.ApprovalMode != "" {
		mode = a.ApprovalMode
	}
	if a.Sandbox != "" {
		policy = a.Sandbox
	}
	return mode, policy
}

// Loosens lists, for a project definition, the fields that would loosen a session whose mode and
// policy are these, and so are ignored (nil for other origins).
func (a Agent) Loosens(mode, policy string) []string {
	if a.Origin != OriginProject {
		return nil
	}
	var out []string
	if a.ApprovalMode != "" && Stricter(ApprovalModes, mode, a.ApprovalMode) != a.ApprovalMode {
		out = append(out, fmt.Sprintf("approvalMode %q is looser than the session's %q: ignored (a project file may only narrow; the server user's ~/.zidane/agents/ or an admin's approvals.setMode may loosen)", a.ApprovalMode, mode))
	}
	if a.Sandbox != "" && Stricter(SandboxPolicies, policy, a.Sandbox) != a.Sandbox {
		out = append(out, fmt.Sprintf("sandbox %q is looser than the session's %q: ignored (a project file may only narrow; the server user's ~/.zidane/agents/ or an admin's sessions.setSandbox may loosen)", a.Sandbox, policy))
	}
	return out
}

// parseAgent reads one agent file (its name from the front matter, else the file's name).
func parseAgent(src Source, rel string, data []byte) (Agent, error) {
	meta, body, err := frontMatter(data)
	if err != nil {
		return Agent{}, err
	}
	a := Agent{Origin: src.Origin, Path: path.Join(src.Dir, rel), Prompt: strings.TrimSpace(body)}
	if a.Name, err = str(meta, "name"); err != nil {
		return Agent{}, err
	}
	if a.Name == "" {
		a.Name = strings.TrimSuffix(path.Base(rel), ".md")
	}
	if err := CheckName(a.Name); err != nil {
		return Agent{}, err
	}
	if a.Description, err = label(meta, "description"); err != nil {
		return Agent{}, err
	}
	model, err := str(meta, "model")
	if err != nil {
		return Agent{}, err
	}
	switch {
	case model == "" || model == "inherit":
	case strings.Contains(model, "/"):
		a.Model = model
	default:
		a.Problems = append(a.Problems, fmt.Sprintf("model %q is not a provider/model id (models.list shows them): ignored, the session's model is used", model))
	}
	tools, present, err := list(meta, "tools")
	if err != nil {
		return Agent{}, err
	}
	a.Tools, a.AllTools = tools, !present
	if a.Tools == nil && present {
		a.Tools = []string{}
	}
	mode, err := str(meta, "approvalMode", "approval-mode", "approval_mode")
	if err != nil {
		return Agent{}, err
	}
	if mode != "" && rank(ApprovalModes, mode) < 0 {
		a.Problems = append(a.Problems, fmt.Sprintf("approvalMode %q is not one of %s: ignored", mode, strings.Join(ApprovalModes, ", ")))
	} else {
		a.ApprovalMode = mode
	}
	sb, err := str(meta, "sandbox", "sandboxPolicy", "sandbox-policy")
	if err != nil {
		return Agent{}, err
	}
	if sb != "" && rank(SandboxPolicies, sb) < 0 {
		a.Problems = append(a.Problems, fmt.Sprintf("sandbox %q is not one of %s: ignored", sb, strings.Join(SandboxPolicies, ", ")))
	} else {
		a.Sandbox = sb
	}
	return a, nil
}

// LoadAgents reads the agent definitions of srcs (lowest precedence first: the user's, then the
// project's) beside the built-ins. A later source's definition replaces an earlier one of the same
// name; a built-in's name is never replaced (listed as a problem). Files that do not parse are
// returned as problems.
func LoadAgents(srcs ...Source) (agents []Agent, problems []Problem) {
	byName := map[string]int{}
	for _, b := range Builtins() {
		byName[b.Name] = len(agents)
		agents = append(agents, b)
	}
	for _, src := range srcs {
		if src.FS == nil {
			continue
		}
		dir, err := src.inside(".zidane/agents")
		if err != nil {
			problems = append(problems, Problem{Path: path.Join(src.Dir, ".zidane/agents"), Message: err.Error()})
			continue
		}
		names, extra, err := mdFiles(src.FS, dir)
		if err != nil {
			problems = append(problems, Problem{Path: path.Join(src.Dir, dir), Message: err.Error()})
			continue
		}
		if extra > 0 {
			problems = append(problems, Problem{Path: path.Join(src.Dir, dir), Message: fmt.Sprintf("%d more agent files were not read (at most %d a folder)", extra, MaxEntries)})
		}
		for _, n := range names {
			rel := path.Join(dir, n)
			data, err := src.readDef(rel)
			var a Agent
			if err == nil {
				a, err = parseAgent(src, rel, data)
			}
			if err != nil {
				problems = append(problems, Problem{Path: path.Join(src.Dir, rel), Message: err.Error()})
				continue
			}
			if i, ok := byName[a.Name]; ok {
				if agents[i].Origin == OriginBuiltin {
					problems = append(problems, Problem{Path: a.Path, Message: fmt.Sprintf("%q is a built-in agent's name; rename the definition", a.Name)})
					continue
				}
				if agents[i].Origin == src.Origin {
					problems = append(problems, Problem{Path: a.Path, Message: fmt.Sprintf("a second definition of %q (the first is %s); rename one", a.Name, agents[i].Path)})
					continue
				}
				agents[i] = a
				continue
			}
			byName[a.Name] = len(agents)
			agents = append(agents, a)
		}
	}
	return agents, problems
}
