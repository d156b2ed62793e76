package server

import (
	"context"
	"fmt"
	"strings"

	"github.com/zidane-server/zidane/protocol"
	"github.com/zidane-server/zidane/server/agent"
	"github.com/zidane-server/zidane/server/agent/defs"
	"github.com/zidane-server/zidane/server/agent/mcp"
	"github.com/zidane-server/zidane/server/store"
)

// The agents, skills and commands groups (issue 27 items 1–3): the definitions of a project,
// read by the runtime from its .zidane/ folders and the server user's.

type (
	agentsHandler   struct{ s *Server }
	skillsHandler   struct{ s *Server }
	commandsHandler struct{ s *Server }
)

// Agents returns the agents group's handler.
func (h *handlers) Agents() protocol.AgentsHandler { return agentsHandler{h.s} }

// Skills returns the skills group's handler.
func (h *handlers) Skills() protocol.SkillsHandler { return skillsHandler{h.s} }

// Commands returns the commands group's handler.
func (h *handlers) Commands() protocol.CommandsHandler { return commandsHandler{h.s} }

// definitions reads the definitions of cwd's project (” or nil: the first root).
func (s *Server) definitions(cwd *string) (*defs.Set, error) {
	c := ""
	if cwd != nil {
		c = *cwd
	}
	root, _, err := s.resolveCwd(c)
	if err != nil {
		return nil, err
	}
	s.defsWatch.track(root)
	return s.runs.Definitions(root), nil
}

func problemsOut(ps []defs.Problem) []protocol.DefinitionProblem {
	out := make([]protocol.DefinitionProblem, 0, len(ps))
	for _, p := range ps {
		out = append(out, protocol.DefinitionProblem{Path: p.Path, Message: p.Message})
	}
	return out
}

// agentOut is a's AgentInfo for a session whose approval mode and sandbox policy are mode and
// policy: a project definition's looser approvalMode or sandbox is shown as the session's, which
// is the one in force, and its problems say what was ignored (issue 27: a project file may only
// narrow).
func agentOut(a defs.Agent, withPrompt bool, mode, policy string) protocol.AgentInfo {
	loosens := a.Loosens(mode, policy)
	if len(loosens) > 0 {
		m, pol := a.Narrow(mode, policy)
		if a.ApprovalMode != "" {
			a.ApprovalMode = m
		}
		if a.Sandbox != "" {
			a.Sandbox = pol
		}
	}
	out := protocol.AgentInfo{ID: a.Name, Description: a.Description, Origin: protocol.DefinitionOrigin(a.Origin),
		Path: optString(a.Path), Model: optString(a.Model), AllTools: a.AllTools, Tools: append([]string{}, a.Tools...),
		ApprovalMode: optString(a.ApprovalMode), Sandbox: optString(a.Sandbox), Problems: append(append([]string{}, a.Problems...), loosens...)}
	if withPrompt {
		out.Prompt = &a.Prompt
	}
	return out
}

// List implements agents.list.
func (h agentsHandler) List(ctx context.Context, p *protocol.AgentsListParams) (*protocol.AgentsListResult, error) {
	cwd := p.Cwd
	var mode, policy string
	if p.SessionID != nil {
		x, err := h.s.cachedSession(ctx, *p.SessionID, "List the sessions with sessions.list.")
		if err != nil {
			return nil, err
		}
		cwd = &x.Cwd
		if mode, err = h.s.store.ApprovalMode(ctx, x.ID); err != nil {
			return nil, storeErr(err, "")
		}
		pol, _, err := h.s.sessionPolicy(ctx, x.ID)
		if err != nil {
			return nil, storeErr(err, "")
		}
		policy = string(pol)
	}
	set, err := h.s.definitions(cwd)
	if err != nil {
		return nil, err
	}
	if p.SessionID == nil {
		mode, policy = store.ModeAsk, string(h.s.cfg.Sandbox.Default)
	}
	res := &protocol.AgentsListResult{Problems: problemsOut(set.Problems)}
	for _, a := range set.Agents {
		res.Agents = append(res.Agents, agentOut(a, false, mode, policy))
	}
	return res, nil
}

// unknownDef is the InvalidParams answer for a name that names no definition.
func unknownDef(kind, name, list, pointer string, names []string) error {
	return protocol.NewInvalidParamsError(fmt.Sprintf("params%s: there is no %s %q here; %s lists them (%s).", pointer, kind, name, list, strings.Join(names, ", ")),
		&protocol.InvalidParamsErrorData{Pointer: pointer})
}

func agentNames(set *defs.Set) []string {
	var n []string
	for _, a := range set.Agents {
		n = append(n, a.Name)
	}
	return n
}

// Get implements agents.get.
func (h agentsHandler) Get(ctx context.Context, p *protocol.AgentsGetParams) (*protocol.AgentInfo, error) {
	set, err := h.s.definitions(p.Cwd)
	if err != nil {
		return nil, err
	}
	a, ok := set.Agent(p.AgentID)
	if !ok {
		return nil, unknownDef("agent", p.AgentID, "agents.list", "/agentId", agentNames(set))
	}
	out := agentOut(*a, true, store.ModeAsk, string(h.s.cfg.Sandbox.Default))
	return &out, nil
}

// SetAgent implements sessions.setAgent.
func (h sessionsHandler) SetAgent(ctx context.Context, p *protocol.SessionsSetAgentParams) (*protocol.Session, error) {
	x, err := h.s.cachedSession(ctx, p.SessionID, "List the sessions with sessions.list.")
	if err != nil {
		return nil, err
	}
	set := h.s.runs.Definitions(x.ProjectRoot)
	if _, ok := set.Agent(p.AgentID); !ok {
		return nil, unknownDef("agent", p.AgentID, "agents.list", "/agentId", agentNames(set))
	}
	x, err = h.s.store.SetSessionAgent(ctx, p.SessionID, p.AgentID)
	return h.s.sessionDone(p.SessionID, x, err, "params/agentId")
}

func skillOut(sk defs.Skill) protocol.SkillInfo {
	return protocol.SkillInfo{Name: sk.Name, Description: sk.Description, AllowedTools: sk.AllowedTools, Origin: protocol.DefinitionOrigin(sk.Origin), Path: sk.Path}
}

// List implements skills.list.
func (h skillsHandler) List(ctx context.Context, p *protocol.SkillsListParams) (*protocol.SkillsListResult, error) {
	set, err := h.s.definitions(p.Cwd)
	if err != nil {
		return nil, err
	}
	res := &protocol.SkillsListResult{Problems: problemsOut(set.Problems)}
	for _, sk := range set.Skills {
		res.Skills = append(res.Skills, skillOut(sk))
	}
	return res, nil
}

// Get implements skills.get.
func (h skillsHandler) Get(ctx context.Context, p *protocol.SkillsGetParams) (*protocol.SkillsGetResult, error) {
	set, err := h.s.definitions(p.Cwd)
	if err != nil {
		return nil, err
	}
	sk, ok := set.Skill(p.Name)
	if !ok {
		var names []string
		for _, s := range set.Skills {
			names = append(names, s.Name)
		}
		return nil, unknownDef("skill", p.Name, "skills.list", "/name", names)
	}
	body, err := sk.Body()
	if err != nil {
		return nil, protocol.NewHandlerFailedError(fmt.Sprintf("The skill %q could not be read: %v", sk.Name, err))
	}
	files, _, err := sk.Files()
	if err != nil {
		return nil, protocol.NewHandlerFailedError(fmt.Sprintf("The skill %q's files could not be listed: %v", sk.Name, err))
	}
	return &protocol.SkillsGetResult{Skill: skillOut(*sk), Body: body, Files: files}, nil
}

// List implements commands.list.
func (h commandsHandler) List(ctx context.Context, p *protocol.CommandsListParams) (*protocol.CommandsListResult, error) {
	set, err := h.s.definitions(p.Cwd)
	if err != nil {
		return nil, err
	}
	res := &protocol.CommandsListResult{Problems: problemsOut(set.Problems)}
	for _, c := range set.Commands {
		res.Commands = append(res.Commands, protocol.CommandInfo{Name: c.Name, Description: c.Description, ArgumentHint: optString(c.ArgumentHint),
			Kind: protocol.CommandInfoKind(c.Kind), Agent: optString(c.Agent), Model: optString(c.Model), Origin: protocol.DefinitionOrigin(c.Origin), Path: optString(c.Path)})
	}
	root := ""
	if p.Cwd != nil && *p.Cwd != "" {
		if r, _, err := h.s.resolveCwd(*p.Cwd); err == nil {
			root = r
		}
	}
	res.Commands = append(res.Commands, h.s.mcpCommands(ctx, root)...) // MCP prompts (issue 23)
	return res, nil
}

// commandPrompt builds a chat.send's prompt: the text as sent, or a command's template filled
// with its arguments; x comes back with the command's agent and model applied for this run only.
func (s *Server) commandPrompt(ctx context.Context, x store.Session, p *protocol.ChatSendParams) (store.Session, agent.Prompt, error) {
	if p.Command == nil {
		if p.Prompt == nil {
			return x, agent.Prompt{}, protocol.NewInvalidParamsError("params: send a prompt, or a command (commands.list) with its arguments.", &protocol.InvalidParamsErrorData{Pointer: "/prompt"})
		}
		return x, agent.Prompt{Text: *p.Prompt}, nil
	}
	set := s.runs.Definitions(x.ProjectRoot)
	c, ok := set.Command(*p.Command)
	if !ok && strings.HasPrefix(*p.Command, mcp.ToolPrefix) { // an MCP server's prompt (issue 23)
		args := ""
		if p.Arguments != nil {
			args = *p.Arguments
		}
		text, found, err := s.mcpPromptText(ctx, x.ProjectRoot, *p.Command, args)
		if err != nil {
			return x, agent.Prompt{}, err
		}
		if found {
			if text == "" {
				return x, agent.Prompt{}, protocol.NewInvalidParamsError(fmt.Sprintf("params/command: %q makes an empty prompt.", *p.Command), &protocol.InvalidParamsErrorData{Pointer: "/command"})
			}
			return x, agent.Prompt{Text: text, Command: *p.Command, Arguments: args}, nil
		}
	}
	if !ok {
		var names []string
		for _, c := range set.Commands {
			names = append(names, c.Name)
		}
		return x, agent.Prompt{}, unknownDef("command", *p.Command, "commands.list", "/command", names)
	}
	args := ""
	if p.Arguments != nil {
		args = *p.Arguments
	}
	text, err := c.Expand(args)
	if err != nil {
		return x, agent.Prompt{}, protocol.NewInvalidParamsError("params/"+err.Error()+": close it, or escape it with a backslash.", &protocol.InvalidParamsErrorData{Pointer: "/arguments"})
	}
	if text == "" {
		return x, agent.Prompt{}, protocol.NewInvalidParamsError(fmt.Sprintf("params/command: %q makes an empty prompt with these arguments.", c.Name), &protocol.InvalidParamsErrorData{Pointer: "/command"})
	}
	if len(text) > 1<<20 {
		return x, agent.Prompt{}, protocol.NewInvalidParamsError(fmt.Sprintf("params/arguments: %q makes a prompt of %d bytes, over the 1 MiB a prompt may have.", c.Name, len(text)), &protocol.InvalidParamsErrorData{Pointer: "/arguments"})
	}
	if c.Agent != "" {
		if _, ok := set.Agent(c.Agent); !ok {
			return x, agent.Prompt{}, protocol.NewHandlerFailedError(fmt.Sprintf("The command %q names the agent %q, which is not defined (agents.list shows the agents); fix %s.", c.Name, c.Agent, c.Path))
		}
		// A command file (possibly the project's) must not move a session off a narrower agent:
		// its agent replaces only build, the default, which every other agent narrows.
		cur := x.AgentID
		if cur == "" {
			cur = defs.Build
		}
		if c.Agent != cur && cur != defs.Build {
			return x, agent.Prompt{}, protocol.NewHandlerFailedError(fmt.Sprintf("The command %q runs with the agent %q, but this session runs %q, and a command may replace only the build agent; switch the session with sessions.setAgent first, or send the prompt without the command.", c.Name, c.Agent, cur))
		}
		x.AgentID = c.Agent
	}
	if c.Model != "" {
		if _, _, err := s.runs.Models().Resolve(ctx, c.Model); err != nil {
			return x, agent.Prompt{}, protocol.NewHandlerFailedError(fmt.Sprintf("The command %q names the model %q: %v; fix %s.", c.Name, c.Model, err, c.Path))
		}
		x.Model = c.Model
	}
	return x, agent.Prompt{Text: text, Command: c.Name, Arguments: args}, nil
}

type orchestrationHandler struct{ s *Server }

// Orchestration returns the orchestration group's handler.
func (h *handlers) Orchestration() protocol.OrchestrationHandler { return orchestrationHandler{h.s} }

// List implements orchestration.list: the session's child sessions, oldest first.
func (h orchestrationHandler) List(ctx context.Context, p *protocol.OrchestrationListParams) (*protocol.OrchestrationListResult, error) {
	if _, err := h.s.cachedSession(ctx, p.SessionID, "List the sessions with sessions.list."); err != nil {
		return nil, err
	}
	kids, err := h.s.store.ListChildren(ctx, p.SessionID)
	if err != nil {
		return nil, storeErr(err, "")
	}
	res := &protocol.OrchestrationListResult{Children: make([]protocol.Session, 0, len(kids))}
	for _, k := range kids {
		res.Children = append(res.Children, *h.s.sessionOut(k))
	}
	return res, nil
}

type claudeImportHandler struct{ s *Server }

// ClaudeImport returns the claudeImport group's handler.
func (h *handlers) ClaudeImport() protocol.ClaudeImportHandler { return claudeImportHandler{h.s} }

// home is the server user's home for the import; "" refuses (the server runs without one).
func (h claudeImportHandler) home() (string, error) {
	if h.s.cfg.UserHome == "" {
		return "", protocol.NewHandlerFailedError("The server runs without a user home (Config.UserHome), so there is no Claude Code setup to import.")
	}
	return h.s.cfg.UserHome, nil
}

// Detect implements claudeImport.detect.
func (h claudeImportHandler) Detect(ctx context.Context, _ *protocol.ClaudeImportDetectParams) (*protocol.ClaudeImportDetectResult, error) {
	if h.s.cfg.UserHome == "" {
		return &protocol.ClaudeImportDetectResult{Paths: []string{}}, nil
	}
	found, paths := defs.DetectClaude(h.s.cfg.UserHome)
	return &protocol.ClaudeImportDetectResult{Found: found, Paths: append([]string{}, paths...)}, nil
}

func importOut(items []defs.ImportItem) *protocol.ClaudeImportResult {
	out := &protocol.ClaudeImportResult{Items: make([]protocol.ClaudeImportItem, 0, len(items))}
	for _, it := range items {
		out.Items = append(out.Items, protocol.ClaudeImportItem{Kind: protocol.ClaudeImportItemKind(it.Kind), Name: it.Name, From: it.From,
			To: optString(it.To), Action: protocol.ClaudeImportItemAction(it.Action), Reason: optString(it.Reason), Done: it.Done})
	}
	return out
}

// Preview implements claudeImport.preview.
func (h claudeImportHandler) Preview(ctx context.Context, _ *protocol.ClaudeImportPreviewParams) (*protocol.ClaudeImportResult, error) {
	home, err := h.home()
	if err != nil {
		return nil, err
	}
	return importOut(defs.PlanImport(home)), nil
}

// Run implements claudeImport.run (behind --allow-remote-installs).
func (h claudeImportHandler) Run(ctx context.Context, _ *protocol.ClaudeImportRunParams) (*protocol.ClaudeImportResult, error) {
	if !h.s.cfg.AllowRemoteInstalls {
		return nil, protocol.NewHandlerFailedError("The import copies commands the server will run, so it needs the operator's " + FlagHint("--allow-remote-installs", h.s.cfg.ViaMakeRun, h.s.cfg.MakeArgs) + "; claudeImport.preview shows what it would copy.")
	}
	home, err := h.home()
	if err != nil {
		return nil, err
	}
	return importOut(defs.RunImport(home)), nil
}
