package defs

import (
	"strings"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func file(s string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(s)} }

func TestAgentsFromUserAndProject(t *testing.T) {
	user := Source{Origin: OriginUser, Dir: "/home/u", FS: fstest.MapFS{
		".zidane/agents/reviewer.md": file("---\nname: reviewer\ndescription: Reviews\ntools: read_file, grep\nmodel: openai/gpt-4o\napprovalMode: auto-edit\n---\nYou review code.\n"),
		".zidane/agents/loose.md":    file("---\nsandbox: workspace-write+network\n---\nUser may loosen.\n"),
	}}
	project := Source{Origin: OriginProject, Dir: "/ws/p", FS: fstest.MapFS{
		".zidane/agents/reviewer.md": file("---\nname: reviewer\ntools:\n  - read_file\n  - mcp__gh__*\napprovalMode: auto-edit\nsandbox: read-only\n---\nProject reviewer.\n"),
		".zidane/agents/plan.md":     file("---\ntools: write_file\n---\nI am plan now.\n"),
		".zidane/agents/broken.md":   file("---\nname: [unclosed\n---\nbody\n"),
		".zidane/agents/nofm.md":     file("Just a prompt."),
		".zidane/agents/bad name.md": file("x"),
	}}
	agents, problems := LoadAgents(user, project)
	names := map[string]Agent{}
	for _, a := range agents {
		names[a.Name] = a
	}
	require.Contains(t, names, "build")
	require.Contains(t, names, "plan")
	assert.Equal(t, OriginBuiltin, names["plan"].Origin, "a project file never replaces a built-in")
	r := names["reviewer"]
	assert.Equal(t, OriginProject, r.Origin, "the project's definition wins")
	assert.Equal(t, "Project reviewer.", r.Prompt)
	assert.True(t, r.Offers("read_file") && r.Offers("mcp__gh__create_issue"))
	assert.False(t, r.Offers("write_file") || r.Offers("exec"))
	mode, policy := r.Narrow("ask", "workspace-write")
	assert.Equal(t, "ask", mode, "a project file's looser mode is ignored")
	assert.Equal(t, "read-only", policy, "a project file may narrow")
	assert.Len(t, r.Loosens("ask", "workspace-write"), 1)
	l := names["loose"]
	_, policy = l.Narrow("ask", "workspace-write")
	assert.Equal(t, "workspace-write+network", policy, "the server user's file may loosen")
	assert.True(t, names["nofm"].AllTools)
	assert.False(t, names["nofm"].Offers("task"), "task and skill are offered only when named")
	msgs := map[string]string{}
	for _, p := range problems {
		msgs[p.Path] = p.Message
	}
	assert.Contains(t, msgs["/ws/p/.zidane/agents/plan.md"], "built-in")
	assert.Contains(t, msgs["/ws/p/.zidane/agents/broken.md"], "front matter")
	assert.Contains(t, msgs["/ws/p/.zidane/agents/bad name.md"], "name")
}

func TestPlanNarrowsEvenALooseSession(t *testing.T) {
	plan := Builtins()[1]
	mode, policy := plan.Narrow("auto-edit", "off")
	assert.Equal(t, "locked", mode)
	assert.Equal(t, "read-only", policy)
	assert.False(t, plan.Offers("write_file") || plan.Offers("edit_file") || plan.Offers("exec"))
}

func TestSkillsAndCommands(t *testing.T) {
	project := Source{Origin: OriginProject, Dir: "/ws/p", FS: fstest.MapFS{
		".zidane/skills/pdf/SKILL.md":        file("---\nname: pdf\ndescription: Work with PDFs\nallowed-tools: read_file grep\n---\nUse pdftotext.\n"),
		".zidane/skills/pdf/scripts/x.sh":    file("echo"),
		".claude/skills/legacy/SKILL.md":     file("---\ndescription: Old one\n---\nLegacy body.\n"),
		".claude/skills/nodesc/SKILL.md":     file("---\nname: nodesc\n---\nbody\n"),
		".zidane/skills/notaskill/README.md": file("x"),
		".zidane/commands/review.md":         file("---\ndescription: Review a file\nargument-hint: <file> [focus]\nagent: plan\n---\nReview $1 with a focus on $2. All: $ARGUMENTS\n"),
		".zidane/commands/empty.md":          file("---\ndescription: nothing\n---\n"),
		".claude/commands/plain.md":          file("Say hi."),
	}}
	skills, problems := LoadSkills(project)
	require.Len(t, skills, 2)
	assert.Equal(t, "legacy", skills[0].Name)
	assert.Equal(t, []string{"read_file", "grep"}, skills[1].AllowedTools)
	body, err := skills[1].Body()
	require.NoError(t, err)
	assert.Equal(t, "Use pdftotext.", body)
	files, _, err := skills[1].Files()
	require.NoError(t, err)
	assert.Equal(t, []string{"scripts/x.sh"}, files)
	_, err = skills[1].ReadFile("../legacy/SKILL.md")
	assert.Error(t, err, "a skill's files stay in its folder")
	require.Len(t, problems, 1)
	assert.Contains(t, problems[0].Message, "description")

	cmds, problems := LoadCommands(skills, project)
	byName := map[string]Command{}
	for _, c := range cmds {
		byName[c.Name] = c
	}
	require.Contains(t, byName, "review")
	require.Contains(t, byName, "plain")
	require.Contains(t, byName, "pdf", "an invocable skill is a command")
	assert.Equal(t, KindSkill, byName["pdf"].Kind)
	require.Len(t, problems, 1)
	assert.Contains(t, problems[0].Message, "no prompt")
	rv := byName["review"]
	out, err := rv.Expand(`"src/main.go" 'error handling' extra`)
	require.NoError(t, err)
	assert.Equal(t, `Review src/main.go with a focus on error handling. All: "src/main.go" 'error handling' extra`, out)
	pl := byName["plain"]
	out, err = pl.Expand("now")
	require.NoError(t, err)
	assert.Equal(t, "Say hi.\n\nnow", out, "arguments a template does not name are appended")
	_, err = rv.Expand(`"open`)
	assert.ErrorContains(t, err, "not closed")
}

func TestSplitWords(t *testing.T) {
	for in, want := range map[string][]string{
		``:                 nil,
		`a b  c`:           {"a", "b", "c"},
		`"a b" c`:          {"a b", "c"},
		`'it''s'`:          {"its"},
		`a\ b`:             {"a b"},
		`"say \"hi\" \$x"`: {`say "hi" $x`},
		`"$HOME" '$(id)'`:  {"$HOME", "$(id)"},
		"tab\tsep\nnl":     {"tab", "sep", "nl"},
	} {
		got, err := SplitWords(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
}

// TestDefinitionTextBounds (a break-it case): a binary command file and a 60 KB description are
// listed as problems, not served to every client.
func TestDefinitionTextBounds(t *testing.T) {
	src := Source{Origin: OriginProject, Dir: "/ws", FS: fstest.MapFS{
		".zidane/commands/binary.md": &fstest.MapFile{Data: []byte("Say \x00\x1b[31m hi")},
		".zidane/commands/long.md":   file("---\ndescription: " + strings.Repeat("x", 60000) + "\n---\nHi.\n"),
		".zidane/commands/bidi.md":   file("---\ndescription: \"safe \u202e txt\"\n---\nHi.\n"),
		".zidane/commands/ok.md":     file("---\ndescription: fine\n---\nHi.\n"),
	}}
	cmds, problems := LoadCommands(nil, src)
	require.Len(t, cmds, 1)
	assert.Equal(t, "ok", cmds[0].Name)
	require.Len(t, problems, 3)
	msgs := map[string]string{}
	for _, p := range problems {
		msgs[p.Path] = p.Message
	}
	assert.Contains(t, msgs["/ws/.zidane/commands/binary.md"], "UTF-8")
	assert.Contains(t, msgs["/ws/.zidane/commands/long.md"], "at most 1024")
	assert.Contains(t, msgs["/ws/.zidane/commands/bidi.md"], "format character")
}
