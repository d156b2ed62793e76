package defs

import (
	"io/fs"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func link(target string) *fstest.MapFile {
	return &fstest.MapFile{Data: []byte(target), Mode: fs.ModeSymlink | 0o777}
}

// TestInsideResolvesLinksWithinTheProject: a project's definition path is resolved through its
// links (relative, absolute into the project, and after a missing folder) to the path inside the
// project it names; a link leading out is an *outsideError naming that link's target, a loop is
// refused with a message, and the server user's sources are returned as they are.
func TestInsideResolvesLinksWithinTheProject(t *testing.T) {
	project := Source{Origin: OriginProject, Dir: "/ws/p", FS: fstest.MapFS{
		"shared/a.md":           file("A"),
		".zidane/agents/rel.md": link("../../shared/a.md"),
		".zidane/agents/abs.md": link("/ws/p/shared/a.md"),
		".zidane/agents/up.md":  link("../../../elsewhere/x.md"),
		".zidane/agents/out.md": link("/home/u/secret.md"),
		".zidane/agents/sib.md": link("/ws/p-sibling/x.md"),
		".zidane/agents/l1.md":  link("l2.md"),
		".zidane/agents/l2.md":  link("l1.md"),
		"to-up":                 link(".."),
	}}
	for rel, want := range map[string]string{
		".zidane/agents/rel.md": "shared/a.md", ".zidane/agents/abs.md": "shared/a.md",
		".zidane/agents/none.md": ".zidane/agents/none.md", "missing/../.zidane/agents/rel.md": "shared/a.md",
		"": ".", "shared/./a.md": "shared/a.md",
	} {
		got, err := project.inside(rel)
		require.NoError(t, err, rel)
		assert.Equal(t, want, got, rel)
	}
	for rel, target := range map[string]string{
		".zidane/agents/up.md": "../../../elsewhere/x.md", ".zidane/agents/out.md": "/home/u/secret.md",
		".zidane/agents/sib.md": "/ws/p-sibling/x.md", "to-up/x.md": "..", "../x.md": "../x.md",
		"missing/../../x.md": "missing/../../x.md",
	} {
		_, err := project.inside(rel)
		var o *outsideError
		require.ErrorAs(t, err, &o, rel)
		assert.Equal(t, target, o.target, rel)
	}
	_, err := project.inside(".zidane/agents/l1.md")
	assert.EqualError(t, err, "more than 40 links on the way to .zidane/agents/l1.md; ignored")
	noDir := project
	noDir.Dir = ""
	_, err = noDir.inside(".zidane/agents/abs.md")
	assert.IsType(t, &outsideError{}, err, "an absolute link is outside a project of no known folder")
	user := Source{Origin: OriginUser, Dir: "/home/u", FS: project.FS}
	got, err := user.inside(".zidane/agents/out.md")
	require.NoError(t, err)
	assert.Equal(t, ".zidane/agents/out.md", got, "the server user's links are theirs")
}
