package defs

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func writeAt(t *testing.T, root, rel, content string) {
	t.Helper()
	p := filepath.Join(root, rel)
	require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
}

// TestClaudeImport: a sample ~/.claude tree; the preview lists every piece, the run copies what
// it said, credentials never, and a second run overwrites nothing.
func TestClaudeImport(t *testing.T) {
	home := t.TempDir()
	writeAt(t, home, ".claude/agents/reviewer.md", "---\nname: reviewer\ndescription: Reviews\ntools: Read, Grep\n---\nReview.\n")
	writeAt(t, home, ".claude/agents/dup.md", "---\ndescription: mine\n---\nClaude's.\n")
	writeAt(t, home, ".zidane/agents/dup.md", "---\ndescription: kept\n---\nZidane's.\n")
	writeAt(t, home, ".claude/agents/broken.md", "---\nname: [x\n---\n")
	writeAt(t, home, ".claude/commands/fix.md", "---\ndescription: Fix it\n---\nFix $ARGUMENTS.\n")
	writeAt(t, home, ".claude/skills/pdf/SKILL.md", "---\nname: pdf\ndescription: PDFs\n---\nUse pdftotext.\n")
	writeAt(t, home, ".claude/skills/pdf/scripts/run.sh", "pdftotext \"$1\"\n")
	require.NoError(t, os.Symlink("/etc/passwd", filepath.Join(home, ".claude/skills/pdf/passwd")))
	writeAt(t, home, ".claude/.credentials.json", `{"token":"secret-token-123"}`)
	writeAt(t, home, ".claude.json", `{"mcpServers":{"fs":{"command":"npx","args":["-y","server-fs"],"alwaysAllow":["read"]},"web":{"type":"http","url":"https://mcp.example/mcp"},"odd":{"foo":1}},"oauthAccount":{"x":"y"}}`)

	found, paths := DetectClaude(home)
	assert.True(t, found)
	assert.Len(t, paths, 2)

	plan := PlanImport(home)
	got := map[string]ImportItem{}
	for _, it := range plan {
		got[it.Kind+"/"+it.Name] = it
	}
	assert.Equal(t, ActionCopy, got["agent/reviewer"].Action)
	assert.Equal(t, ActionSkip, got["agent/dup"].Action)
	assert.Contains(t, got["agent/dup"].Reason, "nothing is overwritten")
	assert.Equal(t, ActionSkip, got["agent/broken"].Action)
	assert.Equal(t, ActionCopy, got["command/fix"].Action)
	assert.Equal(t, ActionCopy, got["skill/pdf"].Action)
	assert.Equal(t, ActionCopy, got["mcp/fs"].Action)
	assert.Contains(t, got["mcp/fs"].Reason, "scope context")
	assert.Contains(t, got["mcp/fs"].Reason, "alwaysAllow", "a guard-loosening field is named as left out")
	assert.Equal(t, ActionCopy, got["mcp/web"].Action)
	assert.Equal(t, ActionSkip, got["mcp/odd"].Action)
	assert.Equal(t, ActionSkip, got["credentials/.credentials.json"].Action)
	_, err := os.Stat(filepath.Join(home, ".zidane/agents/reviewer.md"))
	assert.True(t, os.IsNotExist(err), "a preview changes nothing")

	ran := RunImport(home)
	for _, it := range ran {
		assert.Equal(t, it.Action == ActionCopy, it.Done, "%s/%s: %s", it.Kind, it.Name, it.Reason)
	}
	b, err := os.ReadFile(filepath.Join(home, ".zidane/agents/reviewer.md"))
	require.NoError(t, err)
	assert.Contains(t, string(b), "Review.")
	b, _ = os.ReadFile(filepath.Join(home, ".zidane/agents/dup.md"))
	assert.Contains(t, string(b), "Zidane's.")
	_, err = os.Stat(filepath.Join(home, ".zidane/skills/pdf/scripts/run.sh"))
	assert.NoError(t, err)
	_, err = os.Lstat(filepath.Join(home, ".zidane/skills/pdf/passwd"))
	assert.True(t, os.IsNotExist(err), "links are not copied")
	var mcps struct {
		MCPServers map[string]map[string]any `json:"mcpServers"`
	}
	b, err = os.ReadFile(filepath.Join(home, ".zidane/mcps.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &mcps))
	assert.Equal(t, "context", mcps.MCPServers["fs"]["scope"])
	assert.NotContains(t, mcps.MCPServers["fs"], "alwaysAllow")
	assert.Equal(t, "https://mcp.example/mcp", mcps.MCPServers["web"]["url"])
	assert.NotContains(t, mcps.MCPServers, "odd")
	filepath.WalkDir(filepath.Join(home, ".zidane"), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			b, _ := os.ReadFile(p)
			assert.NotContains(t, string(b), "secret-token-123", p)
		}
		return nil
	})

	for _, it := range RunImport(home) {
		assert.False(t, it.Done, "a second run copies nothing: %s/%s", it.Kind, it.Name)
	}
}
