package defs

import (
	"errors"
	"fmt"
	"path"
	"sort"
	"strings"
)

// Command kinds (commands.list's kind).
const (
	// KindFile is a command file (`.zidane/commands/<name>.md`).
	KindFile = "file"
	// KindSkill is a skill invoked by name: its prompt asks the model to load and follow it.
	KindSkill = "skill"
	// KindMCP is an MCP server's prompt (`mcp__<server>__<prompt>`).
	KindMCP = "mcp"
)

// Command is a slash command: a prompt template the composer offers after `/`.
type Command struct {
	Name, Description string
	// ArgumentHint is shown after the name in the composer (e.g. "<file> [focus]").
	ArgumentHint string
	// Agent and Model, when set, run the command's prompt with that agent and model.
	Agent, Model string
	// Template is the prompt, with $ARGUMENTS and $1…$9 replaced by Expand.
	Template string
	Kind     string
	Origin   Origin
	Path     string
}

// commandDirs are the folders command files are read from under a source.
var commandDirs = []string{".zidane/commands", ".claude/commands"}

func parseCommand(src Source, rel string, data []byte) (Command, error) {
	meta, body, err := frontMatter(data)
	if err != nil {
		return Command{}, err
	}
	c := Command{Kind: KindFile, Origin: src.Origin, Path: path.Join(src.Dir, rel), Template: strings.TrimSpace(body)}
	c.Name = strings.TrimSuffix(path.Base(rel), ".md")
	if err := CheckName(c.Name); err != nil {
		return Command{}, err
	}
	if c.Template == "" {
		return Command{}, errors.New("the file has no prompt: write the prompt below the front matter")
	}
	if c.Description, err = label(meta, "description"); err != nil {
		return Command{}, err
	}
	if c.ArgumentHint, err = label(meta, "argument-hint", "argumentHint"); err != nil {
		return Command{}, err
	}
	if c.Agent, err = str(meta, "agent"); err != nil {
		return Command{}, err
	}
	if c.Model, err = str(meta, "model"); err != nil {
		return Command{}, err
	}
	if c.Model != "" && !strings.Contains(c.Model, "/") {
		return Command{}, fmt.Errorf("model %q is not a provider/model id (models.list shows them)", c.Model)
	}
	return c, nil
}

// LoadCommands reads the command files of srcs (lowest precedence first; a later source's
// command replaces an earlier one of the same name) and adds one command per skill that no file
// names. The list is sorted by name.
func LoadCommands(skills []Skill, srcs ...Source) (cmds []Command, problems []Problem) {
	byName := map[string]int{}
	for _, src := range srcs {
		if src.FS == nil {
			continue
		}
		seen := map[string]bool{}
		for _, cdir := range commandDirs {
			dir, err := src.inside(cdir)
			if err != nil {
				problems = append(problems, Problem{Path: path.Join(src.Dir, cdir), Message: err.Error()})
				continue
			}
			names, extra, err := mdFiles(src.FS, dir)
			if err != nil {
				problems = append(problems, Problem{Path: path.Join(src.Dir, dir), Message: err.Error()})
				continue
			}
			if extra > 0 {
				problems = append(problems, Problem{Path: path.Join(src.Dir, dir), Message: fmt.Sprintf("%d more command files were not read (at most %d a folder)", extra, MaxEntries)})
			}
			for _, n := range names {
				rel := path.Join(dir, n)
				data, err := src.readDef(rel)
				var c Command
				if err == nil {
					c, err = parseCommand(src, rel, data)
				}
				if err != nil {
					problems = append(problems, Problem{Path: path.Join(src.Dir, rel), Message: err.Error()})
					continue
				}
				if seen[c.Name] {
					continue // .zidane/ wins over .claude/ within one source
				}
				seen[c.Name] = true
				if i, ok := byName[c.Name]; ok {
					cmds[i] = c
					continue
				}
				byName[c.Name] = len(cmds)
				cmds = append(cmds, c)
			}
		}
	}
	for _, sk := range skills {
		if _, ok := byName[sk.Name]; ok {
			continue
		}
		byName[sk.Name] = len(cmds)
		cmds = append(cmds, Command{Name: sk.Name, Description: sk.Description, Kind: KindSkill, Origin: sk.Origin, Path: sk.Path,
			Template: fmt.Sprintf("Load the skill %q with the skill tool and follow it.\n\n$ARGUMENTS", sk.Name)})
	}
	sort.Slice(cmds, func(i, j int) bool { return cmds[i].Name < cmds[j].Name })
	return cmds, problems
}

// Expand fills the command's template: $ARGUMENTS is the arguments as given, $1…$9 their words
// as a shell splits them (quotes group, a backslash escapes; a missing word is ""). A template
// that names neither gets the arguments appended after a blank line, so none are lost.
func (c Command) Expand(arguments string) (string, error) {
	words, err := SplitWords(arguments)
	if err != nil {
		return "", err
	}
	used := false
	var b strings.Builder
	t := c.Template
	for i := 0; i < len(t); i++ {
		if t[i] == '$' {
			if strings.HasPrefix(t[i:], "$ARGUMENTS") {
				b.WriteString(arguments)
				i += len("$ARGUMENTS") - 1
				used = true
				continue
			}
			if i+1 < len(t) && t[i+1] >= '1' && t[i+1] <= '9' {
				n := int(t[i+1] - '1')
				if n < len(words) {
					b.WriteString(words[n])
				}
				i++
				used = true
				continue
			}
		}
		b.WriteByte(t[i])
	}
	out := strings.TrimSpace(b.String())
	if !used && strings.TrimSpace(arguments) != "" {
		out += "\n\n" + arguments
	}
	return out, nil
}

// SplitWords splits s into words as a POSIX shell does, without any expansion: white space
// separates, '…' is literal, "…" keeps spaces and honours \" \\ \$ \`, a backslash outside quotes
// escapes the next character. An unterminated quote is an error naming it.
func SplitWords(s string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case ch == ' ' || ch == '\t' || ch == '\n':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		case ch == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, errors.New("arguments: a ' quote is not closed")
			}
			cur.WriteString(s[i+1 : i+1+j])
			i += j + 1
			inWord = true
		case ch == '"':
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) && strings.IndexByte("\"\\$`", s[i+1]) >= 0 {
					i++
				}
				cur.WriteByte(s[i])
			}
			if i >= len(s) {
				return nil, errors.New(`arguments: a " quote is not closed`)
			}
			inWord = true
		case ch == '\\' && i+1 < len(s):
			i++
			cur.WriteByte(s[i])
			inWord = true
		default:
			cur.WriteByte(ch)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}
