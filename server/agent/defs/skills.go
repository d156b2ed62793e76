package defs

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"
)

// Skill is a folder holding a SKILL.md (the open Agent Skills format): the model sees its name and
// description, and loads its body and lists its files with the `skill` tool when it needs them.
type Skill struct {
	Name, Description string
	// AllowedTools, when set, narrows the tools offered while the skill is in use (the rest of the
	// run after the skill tool loaded it). It never pre-approves a call.
	AllowedTools []string
	// Dir is the skill's folder relative to its source's FS; Path the SKILL.md's absolute path.
	Dir, Path string
	Origin    Origin
	// FS is the source's FS, to read the skill's body and files again at use.
	FS fs.FS `json:"-"`
	// src is the Source it was read from (for Body).
	src Source
}

// skillDirs are the folders skills are found in under a source, in precedence order (the first
// holding a name wins within one source).
var skillDirs = []string{".zidane/skills", ".claude/skills"}

// parseSkill reads dir/SKILL.md of src.
func parseSkill(src Source, dir string) (Skill, string, error) {
	rel := path.Join(dir, "SKILL.md")
	data, err := src.readDef(rel)
	if err != nil {
		return Skill{}, "", err
	}
	meta, body, err := frontMatter(data)
	if err != nil {
		return Skill{}, "", err
	}
	sk := Skill{Dir: dir, Path: path.Join(src.Dir, rel), Origin: src.Origin, FS: src.FS, src: src}
	if sk.Name, err = str(meta, "name"); err != nil {
		return Skill{}, "", err
	}
	if sk.Name == "" {
		sk.Name = path.Base(dir)
	}
	if err := CheckName(sk.Name); err != nil {
		return Skill{}, "", err
	}
	if sk.Description, err = label(meta, "description"); err != nil {
		return Skill{}, "", err
	}
	if sk.Description == "" {
		return Skill{}, "", errors.New("description is required: the model picks a skill by it")
	}
	if sk.AllowedTools, _, err = list(meta, "allowed-tools", "allowedTools"); err != nil {
		return Skill{}, "", err
	}
	return sk, strings.TrimSpace(body), nil
}

// LoadSkills reads the skills of srcs (lowest precedence first); a later source's skill replaces
// an earlier one of the same name.
func LoadSkills(srcs ...Source) (skills []Skill, problems []Problem) {
	byName := map[string]int{}
	for _, src := range srcs {
		if src.FS == nil {
			continue
		}
		seen := map[string]bool{}
		for _, sdir := range skillDirs {
			base, err := src.inside(sdir)
			if err != nil {
				problems = append(problems, Problem{Path: path.Join(src.Dir, sdir), Message: err.Error()})
				continue
			}
			ents, err := fs.ReadDir(src.FS, base)
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				problems = append(problems, Problem{Path: path.Join(src.Dir, base), Message: err.Error()})
				continue
			}
			n := 0
			for _, e := range ents {
				link := e.Type()&fs.ModeSymlink != 0
				if !e.IsDir() && !link {
					continue
				}
				if n++; n > MaxEntries {
					problems = append(problems, Problem{Path: path.Join(src.Dir, base), Message: fmt.Sprintf("more skill folders than %d: the rest were not read", MaxEntries)})
					break
				}
				dir := path.Join(base, e.Name())
				if link {
					// A linked skill folder: followed only while it stays inside the project.
					to, err := src.inside(dir)
					if err != nil {
						problems = append(problems, Problem{Path: path.Join(src.Dir, dir), Message: err.Error()})
						continue
					}
					if fi, err := fs.Stat(src.FS, to); err != nil || !fi.IsDir() {
						continue // a link to a file (or to nothing) is not a skill folder
					}
					dir = to
				}
				sk, _, err := parseSkill(src, dir)
				if errors.Is(err, fs.ErrNotExist) {
					continue // a folder without SKILL.md is not a skill
				}
				if err != nil {
					problems = append(problems, Problem{Path: path.Join(src.Dir, dir, "SKILL.md"), Message: err.Error()})
					continue
				}
				if seen[sk.Name] {
					continue
				}
				seen[sk.Name] = true
				if i, ok := byName[sk.Name]; ok {
					skills[i] = sk
					continue
				}
				byName[sk.Name] = len(skills)
				skills = append(skills, sk)
			}
		}
	}
	sort.Slice(skills, func(i, j int) bool { return skills[i].Name < skills[j].Name })
	return skills, problems
}

// Body reads the skill's SKILL.md body again (it may have changed since it was listed).
func (s *Skill) Body() (string, error) {
	_, body, err := parseSkill(s.src, s.Dir)
	return body, err
}

// Files lists the skill's files (relative to its folder, SKILL.md left out), at most
// MaxSkillFiles; more sets truncated.
func (s *Skill) Files() (files []string, truncated bool, err error) {
	err = fs.WalkDir(s.FS, s.Dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // an unreadable entry is left out
		}
		if d.IsDir() || !d.Type().IsRegular() {
			return nil
		}
		rel := strings.TrimPrefix(p, s.Dir+"/")
		if rel == "SKILL.md" {
			return nil
		}
		if len(files) == MaxSkillFiles {
			truncated = true
			return fs.SkipAll
		}
		files = append(files, rel)
		return nil
	})
	return files, truncated, err
}

// ReadFile reads one file of the skill's folder (rel must stay inside it), at most MaxFileBytes.
func (s *Skill) ReadFile(rel string) ([]byte, error) {
	clean := path.Clean(rel)
	if !fs.ValidPath(clean) || clean == "." || strings.HasPrefix(clean, "../") {
		return nil, fmt.Errorf("%q is not a file of the skill %q: name one of the files it lists", rel, s.Name)
	}
	return s.src.readDef(path.Join(s.Dir, clean))
}
