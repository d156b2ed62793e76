package defs

import (
	"io/fs"
	"os"
	"path/filepath"

	"github.com/zidane-server/zidane/server/workspace"
)

// Set is what one project configures, merged with the server user's: agents (built-ins first),
// skills, commands, and every file that could not be used.
type Set struct {
	Agents   []Agent
	Skills   []Skill
	Commands []Command
	Problems []Problem
}

// Load reads the server user's definitions (from home; "" none) and the project's (from project,
// a source confined to the workspace; FS nil for none), the project's winning.
func Load(home string, project Source) *Set {
	var srcs []Source
	if home != "" {
		srcs = append(srcs, Source{Origin: OriginUser, FS: os.DirFS(home), Dir: home})
	}
	if project.FS != nil {
		project.Origin = OriginProject
		srcs = append(srcs, project)
	}
	s := &Set{}
	var p []Problem
	s.Agents, s.Problems = LoadAgents(srcs...)
	s.Skills, p = LoadSkills(srcs...)
	s.Problems = append(s.Problems, p...)
	s.Commands, p = LoadCommands(s.Skills, srcs...)
	s.Problems = append(s.Problems, p...)
	return s
}

// ProjectSource is the project root's source through the workspace: the root's confined FS
// (links stay inside the roots, hidden paths hidden), under the project's folder. FS is nil when
// the project is not inside the roots.
func ProjectSource(ws *workspace.Workspace, projectRoot string) Source {
	if ws == nil || projectRoot == "" {
		return Source{}
	}
	rp, err := ws.Folder(projectRoot)
	if err != nil {
		return Source{}
	}
	fsys := ws.RootFS(rp)
	if rp.Rel != "." {
		sub, err := fs.Sub(fsys, rp.Rel)
		if err != nil {
			return Source{}
		}
		fsys = sub
	}
	return Source{Origin: OriginProject, FS: fsys, Dir: filepath.Clean(rp.Abs())}
}

// Agent returns the agent named name.
func (s *Set) Agent(name string) (*Agent, bool) {
	for i := range s.Agents {
		if s.Agents[i].Name == name {
			return &s.Agents[i], true
		}
	}
	return nil, false
}

// Skill returns the skill named name.
func (s *Set) Skill(name string) (*Skill, bool) {
	for i := range s.Skills {
		if s.Skills[i].Name == name {
			return &s.Skills[i], true
		}
	}
	return nil, false
}

// Command returns the command named name.
func (s *Set) Command(name string) (*Command, bool) {
	for i := range s.Commands {
		if s.Commands[i].Name == name {
			return &s.Commands[i], true
		}
	}
	return nil, false
}
