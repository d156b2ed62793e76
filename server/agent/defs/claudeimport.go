package defs

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/zidane-server/zidane/protocol"
	"github.com/zidane-server/zidane/server/agent/mcp"
)

// Import of a Claude Code setup (issue 27 item 5): the server user's ~/.claude/ agents, commands
// and skills and the MCP servers of ~/.claude.json, copied into ~/.zidane/. Credentials
// (~/.claude/.credentials.json) are never copied; imported stdio MCP servers get scope context
// (they then run in the session's sandbox); nothing is overwritten.

// Import kinds and actions (claudeImport's ImportItem).
const (
	ImportAgent   = "agent"
	ImportCommand = "command"
	ImportSkill   = "skill"
	ImportMCP     = "mcp"
	ImportSecret  = "credentials"

	ActionCopy = "copy"
	ActionSkip = "skip"
)

// ImportItem is one piece of a Claude Code setup and what the import does with it.
type ImportItem struct {
	Kind, Name string
	// From is the source path; To where it is copied ("" when skipped).
	From, To string
	Action   string
	// Reason says why it is skipped, or what the copy changes.
	Reason string
	// Done is set by RunImport when the copy was made.
	Done bool
	// mcp is the entry to add to mcps.json (ImportMCP).
	mcp json.RawMessage
}

// maxImportFileBytes bounds one copied file of a skill.
const maxImportFileBytes = 1 << 20

// DetectClaude reports whether home holds a Claude Code setup (~/.claude/ or ~/.claude.json).
func DetectClaude(home string) (found bool, paths []string) {
	for _, p := range []string{filepath.Join(home, ".claude"), filepath.Join(home, ".claude.json")} {
		if _, err := os.Lstat(p); err == nil {
			paths = append(paths, p)
		}
	}
	return len(paths) > 0, paths
}

// PlanImport lists every piece of home's Claude Code setup and what an import would do.
func PlanImport(home string) []ImportItem {
	var out []ImportItem
	src := os.DirFS(home)
	zd := filepath.Join(home, ".zidane")
	exists := func(p string) bool { _, err := os.Lstat(p); return err == nil }
	for _, kind := range []struct{ kind, dir string }{{ImportAgent, "agents"}, {ImportCommand, "commands"}} {
		names, _, err := mdFiles(src, ".claude/"+kind.dir)
		if err != nil {
			out = append(out, ImportItem{Kind: kind.kind, From: filepath.Join(home, ".claude", kind.dir), Action: ActionSkip, Reason: "not read: " + err.Error()})
			continue
		}
		for _, n := range names {
			it := ImportItem{Kind: kind.kind, Name: strings.TrimSuffix(n, ".md"), From: filepath.Join(home, ".claude", kind.dir, n), To: filepath.Join(zd, kind.dir, n), Action: ActionCopy}
			data, err := readBounded(src, ".claude/"+kind.dir+"/"+n)
			if err == nil {
				s := Source{Origin: OriginUser, FS: src, Dir: home}
				if kind.kind == ImportAgent {
					_, err = parseAgent(s, ".claude/agents/"+n, data)
				} else {
					_, err = parseCommand(s, ".claude/commands/"+n, data)
				}
			}
			switch {
			case err != nil:
				it.Action, it.To, it.Reason = ActionSkip, "", "does not parse: "+err.Error()
			case exists(it.To):
				it.Action, it.Reason = ActionSkip, "a file of that name is already in ~/.zidane/"+kind.dir+"; nothing is overwritten"
			}
			out = append(out, it)
		}
	}
	if ents, err := fs.ReadDir(src, ".claude/skills"); err == nil {
		for _, e := range ents {
			if !e.IsDir() {
				continue
			}
			it := ImportItem{Kind: ImportSkill, Name: e.Name(), From: filepath.Join(home, ".claude", "skills", e.Name()), To: filepath.Join(zd, "skills", e.Name()), Action: ActionCopy}
			if _, _, err := parseSkill(Source{Origin: OriginUser, FS: src, Dir: home}, ".claude/skills/"+e.Name()); err != nil {
				it.Action, it.To, it.Reason = ActionSkip, "", "SKILL.md: "+err.Error()
			} else if exists(it.To) {
				it.Action, it.Reason = ActionSkip, "a skill of that name is already in ~/.zidane/skills; nothing is overwritten"
			}
			out = append(out, it)
		}
	}
	out = append(out, planMCP(home)...)
	if p := filepath.Join(home, ".claude", ".credentials.json"); exists(p) {
		out = append(out, ImportItem{Kind: ImportSecret, Name: ".credentials.json", From: p, Action: ActionSkip, Reason: "credentials are never copied: sign in again through the server (auth.oauth.begin) or store a key with auth.configure"})
	}
	return out
}

// planMCP lists the MCP servers of ~/.claude.json.
func planMCP(home string) []ImportItem {
	from := filepath.Join(home, ".claude.json")
	b, err := os.ReadFile(from)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return []ImportItem{{Kind: ImportMCP, From: from, Action: ActionSkip, Reason: "not read: " + err.Error()}}
	}
	var doc struct {
		MCPServers map[string]map[string]json.RawMessage `json:"mcpServers"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return []ImportItem{{Kind: ImportMCP, From: from, Action: ActionSkip, Reason: protocol.DecodeErrorText("the file", err)}}
	}
	to := filepath.Join(home, ".zidane", "mcps.json")
	have := map[string]bool{}
	if b, err := os.ReadFile(to); err == nil {
		var cur struct {
			MCPServers map[string]json.RawMessage `json:"mcpServers"`
		}
		if json.Unmarshal(b, &cur) == nil {
			for k := range cur.MCPServers {
				have[k] = true
			}
		}
	}
	names := make([]string, 0, len(doc.MCPServers))
	for n := range doc.MCPServers {
		names = append(names, n)
	}
	sort.Strings(names)
	var out []ImportItem
	for _, n := range names {
		e := doc.MCPServers[n]
		it := ImportItem{Kind: ImportMCP, Name: n, From: from, To: to, Action: ActionCopy}
		if have[n] {
			it.Action, it.Reason = ActionSkip, "a server of that name is already in ~/.zidane/mcps.json; nothing is overwritten"
			out = append(out, it)
			continue
		}
		entry := map[string]json.RawMessage{}
		var dropped []string
		for k, v := range e {
			if mcp.IsKnownField(k) && k != "scope" { // scope is set below, never taken from the import
				entry[k] = v
			} else {
				dropped = append(dropped, k)
			}
		}
		if _, ok := entry["command"]; ok {
			entry["scope"] = json.RawMessage(`"context"`) // it runs in the session's sandbox
			it.Reason = "a stdio server: imported with scope context (it runs inside the session's sandbox)"
		} else if _, ok := entry["url"]; !ok {
			it.Action, it.To, it.Reason = ActionSkip, "", "neither a command nor a url"
			out = append(out, it)
			continue
		}
		if len(dropped) > 0 {
			sort.Strings(dropped)
			it.Reason = strings.TrimPrefix(it.Reason+"; ", "; ") + "fields left out: " + strings.Join(dropped, ", ")
		}
		it.mcp, _ = protocol.Marshal(entry)
		out = append(out, it)
	}
	return out
}

// RunImport carries out PlanImport's copies (planned again now, so nothing is overwritten that
// appeared since a preview) and returns the items with Done set on each copy made. A copy that
// fails is skipped with its error; the others go on.
func RunImport(home string) []ImportItem {
	items := PlanImport(home)
	var mcps []*ImportItem
	for i := range items {
		it := &items[i]
		if it.Action != ActionCopy {
			continue
		}
		var err error
		switch it.Kind {
		case ImportAgent, ImportCommand:
			err = copyFile(it.From, it.To, MaxFileBytes)
		case ImportSkill:
			err = copySkill(it.From, it.To)
		case ImportMCP:
			mcps = append(mcps, it)
			continue
		}
		if err != nil {
			it.Action, it.Reason = ActionSkip, "copy failed: "+err.Error()
			continue
		}
		it.Done = true
	}
	if len(mcps) > 0 {
		err := addMCPs(filepath.Join(home, ".zidane", "mcps.json"), mcps)
		for _, it := range mcps {
			if err != nil {
				it.Action, it.Reason = ActionSkip, "mcps.json not written: "+err.Error()
			} else {
				it.Done = true
			}
		}
	}
	return items
}

// copyFile copies a regular file (never a link) to a new file to (0600; an existing one is
// refused), at most max bytes.
func copyFile(from, to string, max int64) error {
	fi, err := os.Lstat(from)
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", from)
	}
	if fi.Size() > max {
		return fmt.Errorf("%s is over %d KiB", from, max>>10)
	}
	data, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		os.Remove(to)
		return err
	}
	return f.Close()
}

// copySkill copies a skill folder's regular files (links and special files left out), at most
// MaxSkillFiles of maxImportFileBytes each.
func copySkill(from, to string) error {
	if _, err := os.Lstat(to); err == nil {
		return fmt.Errorf("%s exists", to)
	}
	n := 0
	return filepath.WalkDir(from, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || !d.Type().IsRegular() {
			return nil
		}
		if n++; n > MaxSkillFiles {
			return fmt.Errorf("more than %d files", MaxSkillFiles)
		}
		rel, err := filepath.Rel(from, p)
		if err != nil {
			return err
		}
		return copyFile(p, filepath.Join(to, rel), maxImportFileBytes)
	})
}

// addMCPs adds the items' entries to the mcps.json at path (created when missing), keeping what
// is there.
func addMCPs(path string, items []*ImportItem) error {
	doc := map[string]json.RawMessage{}
	servers := map[string]json.RawMessage{}
	if b, err := os.ReadFile(path); err == nil {
		if err := json.Unmarshal(b, &doc); err != nil {
			return fmt.Errorf("%s: %s; fix it first", path, protocol.DecodeErrorText("the file", err))
		}
		if raw, ok := doc["mcpServers"]; ok {
			if err := json.Unmarshal(raw, &servers); err != nil {
				return fmt.Errorf("%s: mcpServers is not an object", path)
			}
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	for _, it := range items {
		servers[it.Name] = it.mcp
	}
	raw, err := protocol.Marshal(servers)
	if err != nil {
		return err
	}
	doc["mcpServers"] = raw
	flat, err := protocol.Marshal(doc)
	if err != nil {
		return err
	}
	var out bytes.Buffer
	if err := json.Indent(&out, flat, "", "  "); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	tmp := path + ".import.tmp"
	if err := os.WriteFile(tmp, append(out.Bytes(), '\n'), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
