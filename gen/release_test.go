package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMain lets the test binary stand in for the generator (ZIDANE_GEN_AS_MAIN=1), so
// TestReleaseScript runs scripts/release.sh without compiling the generator again.
func TestMain(m *testing.M) {
	if os.Getenv("ZIDANE_GEN_AS_MAIN") == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// schemaWithout is the real schema with one method deleted from its group file.
func schemaWithout(t *testing.T, group, method string) []byte {
	t.Helper()
	files, err := readSchemaFiles("../schema")
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(files[group], &m))
	require.Contains(t, obj(m, "methods"), method)
	delete(obj(m, "methods"), method)
	files[group], err = json.Marshal(m)
	require.NoError(t, err)
	p, err := LoadFiles(files, "../schema/meta")
	require.NoError(t, err)
	return p.Bundle
}

// TestGateRefusesRemovingReleasedMethod: the real release snapshot covers everything shipped,
// so removing queue.remove fails the gate, naming it and the way forward (issue 29).
func TestGateRefusesRemovingReleasedMethod(t *testing.T) {
	snap, v, ok := latestRelease("../schema")
	require.True(t, ok)
	old, err := os.ReadFile(snap)
	require.NoError(t, err)
	breaks, err := Breaking(old, schemaWithout(t, "queue.json", "queue.remove"))
	require.NoError(t, err)
	require.Len(t, breaks, 1, "%v", breaks)
	assert.Contains(t, breaks[0], "method queue.remove was removed")
	assert.Contains(t, breaks[0], "raise protocolVersion to 17")
	assert.Contains(t, breaks[0], "minProtocolVersion ≤ 16")
	assert.Contains(t, breaks[0], "removedIn: 17")
	assert.Equal(t, 16, v)
}

// TestGateKeepsPreviousInRange: raising protocolVersion allows a break only while
// minProtocolVersion keeps the released version in the range; even then a released method stays,
// marked removedIn, and only after a release deprecated it.
func TestGateKeepsPreviousInRange(t *testing.T) {
	released := func(fn func(m map[string]any)) []byte {
		p, err := LoadFiles(edit(t, "things.json", fn), metaDir)
		require.NoError(t, err)
		return p.Bundle
	}
	check := func(old []byte, version, minVersion int, fn func(m map[string]any)) string {
		files := edit(t, "things.json", fn)
		var pm map[string]any
		require.NoError(t, json.Unmarshal(files["protocol.json"], &pm))
		pm["protocolVersion"], pm["minProtocolVersion"] = version, minVersion
		files["protocol.json"], _ = json.Marshal(pm)
		p, err := LoadFiles(files, metaDir)
		require.NoError(t, err)
		out, err := Breaking(old, p.Bundle)
		require.NoError(t, err)
		return strings.Join(out, "\n")
	}
	v16 := released(func(map[string]any) {})
	narrow := func(m map[string]any) {
		obj(m, "methods", "things.put", "params", "properties", "ratio")["type"] = "string"
	}
	assert.Empty(t, check(v16, 17, 16, narrow))
	out := check(v16, 17, 17, narrow)
	assert.Contains(t, out, "drops the released v16 from the range")
	assert.Contains(t, out, "keep minProtocolVersion ≤ 16")

	out = check(v16, 17, 16, func(m map[string]any) { delete(obj(m, "methods"), "things.clear") })
	assert.Contains(t, out, "method things.clear was removed: released in v16, it stays in the schema marked removedIn: 17")
	remove := func(m map[string]any) {
		obj(m, "methods", "things.clear")["deprecated"] = "Use things.put."
		obj(m, "methods", "things.clear")["removedIn"] = 17
	}
	require.NotNil(t, obj(map[string]any{"m": mustJSON(t, v16)}, "m", "methods", "things.clear")["deprecated"], "the fixture's release deprecates things.clear")
	assert.Empty(t, check(v16, 17, 16, remove), "deprecated in the release, removed in the next version")
	undeprecated := released(func(m map[string]any) { delete(obj(m, "methods", "things.clear"), "deprecated") })
	assert.Contains(t, check(undeprecated, 17, 16, remove), "method things.clear is marked removedIn but release v16 did not deprecate it")
}

func mustJSON(t *testing.T, b []byte) map[string]any {
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m))
	return m
}

// TestChangelogEntry: the section lists what the markers say and is replaced in place on a re-cut.
func TestChangelogEntry(t *testing.T) {
	cur := map[string]any{"protocolVersion": 17.0, "minProtocolVersion": 16.0,
		"methods": map[string]any{
			"a.old":  map[string]any{"since": 16.0, "deprecated": "Use a.new."},
			"a.new":  map[string]any{"since": 17.0},
			"a.gone": map[string]any{"since": 16.0, "removedIn": 17.0},
		},
		"signals": map[string]any{"a:changed": map[string]any{"since": 17.0}},
	}
	prev := map[string]any{"methods": map[string]any{"a.old": map[string]any{}, "a.gone": map[string]any{}}}
	e := changelogEntry("0.2.0", cur, prev, "Adds a.new.")
	assert.Contains(t, e, "## v0.2.0 (protocol v17, range v16–v17)\n\nAdds a.new.\n")
	assert.Contains(t, e, "### New in protocol v17\n\n- method `a.new`\n- signal `a:changed`\n")
	assert.Contains(t, e, "### Deprecated\n\n- method `a.old`: Use a.new.\n")
	assert.Contains(t, e, "- method `a.gone`: removed in v17")
	doc := writeChangelog("", "0.1.0", "## v0.1.0 (protocol v16, range v16–v16)\n\nFirst.\n\n")
	doc = writeChangelog(doc, "0.2.0", e)
	assert.Less(t, strings.Index(doc, "## v0.2.0"), strings.Index(doc, "## v0.1.0"), "newest first")
	again := writeChangelog(doc, "0.2.0", changelogEntry("0.2.0", cur, prev, "Adds a.new, again."))
	assert.Equal(t, 1, strings.Count(again, "## v0.2.0"))
	assert.Contains(t, again, "Adds a.new, again.")
	assert.Equal(t, "Adds a.new, again.", existingSummary(again, "0.2.0"))
	assert.Equal(t, "First.", existingSummary(again, "0.1.0"))
}

// TestReleaseScript runs scripts/release.sh (make release) in a scratch clone: it writes the
// snapshot, the changelog and the tag; re-cutting a tagged version and a dirty tree are refused;
// afterwards removing queue.remove fails the gate naming it.
func TestReleaseScript(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	dir := filepath.Join(t.TempDir(), "repo")
	run := func(wantOK bool, env []string, name string, args ...string) string {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		if wantOK {
			require.NoError(t, err, "%s %v: %s", name, args, out)
		} else {
			require.Error(t, err, "%s %v: %s", name, args, out)
		}
		return string(out)
	}
	self, err := os.Executable()
	require.NoError(t, err)
	gen := []string{"GEN=" + self, "ZIDANE_GEN_AS_MAIN=1", "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t"}
	// The scratch clone holds what a release reads and writes: the schema, the generated files,
	// the version's sources and the script.
	require.NoError(t, os.MkdirAll(dir, 0o755))
	cp := exec.Command("cp", "-r", "--parents", "schema", "protocol", "client", "docs/protocol.md", "scripts/release.sh",
		"VERSION", "sdk-ts/package.json", "sdk-ts/package-lock.json", "sdk-ts/src/protocol.ts", "sdk-ts/test/examples.gen.ts", "e2e/wirekit/scenarios/examples", dir)
	cp.Dir = ".."
	cpOut, err := cp.CombinedOutput()
	require.NoError(t, err, "%s", cpOut)
	run(true, nil, "git", "init", "-q")
	run(true, gen, "git", "add", "-A")
	run(true, gen, "git", "commit", "-q", "-m", "scratch")

	out := run(true, append(gen, "VERSION=0.1.0", "SUMMARY=First release."), "scripts/release.sh")
	assert.Contains(t, out, "tagged v0.1.0 (protocol v16)")
	assert.Contains(t, run(true, nil, "git", "tag"), "v0.1.0")
	assert.Empty(t, run(true, nil, "git", "status", "--porcelain"), "the release commits everything it writes")
	snap, err := os.ReadFile(filepath.Join(dir, "schema/releases/v16.json"))
	require.NoError(t, err)
	bundle, err := os.ReadFile(filepath.Join(dir, "protocol/bundle_gen.json"))
	require.NoError(t, err)
	assert.Equal(t, string(bundle), string(snap), "the snapshot is the whole bundled schema")
	log, err := os.ReadFile(filepath.Join(dir, "CHANGELOG.md"))
	require.NoError(t, err)
	assert.Contains(t, string(log), "## v0.1.0 (protocol v16, range v16–v16)\n\nFirst release.\n")
	assert.Contains(t, string(log), "- method `queue.remove`\n")

	assert.Contains(t, run(false, gen, "scripts/release.sh"), "tag v0.1.0 exists")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "stray.txt"), []byte("x"), 0o644))
	assert.Contains(t, run(false, append(gen, "VERSION=0.1.1"), "scripts/release.sh"), "uncommitted changes")
	require.NoError(t, os.Remove(filepath.Join(dir, "stray.txt")))

	var q map[string]any
	qf := filepath.Join(dir, "schema/queue.json")
	raw, err := os.ReadFile(qf)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(raw, &q))
	delete(obj(q, "methods"), "queue.remove")
	raw, err = json.Marshal(q)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(qf, raw, 0o644))
	run(true, gen, self, "-root", ".")
	out = run(false, gen, self, "-root", ".", "-check")
	assert.Contains(t, out, "method queue.remove was removed")
	assert.Contains(t, out, "raise protocolVersion to 17")
}
