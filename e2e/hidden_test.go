package e2e

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zidane-server/zidane/protocol"
	"github.com/zidane-server/zidane/server/store/storetest"
)

// toolCall is one scripted tool call.
type toolCall struct {
	Name string         `json:"name"`
	Args map[string]any `json:"arguments"`
}

// scriptedTools writes a config (outside every root) whose default model plays one turn making
// calls, then "Done.", and returns the flags that use it.
func scriptedTools(t *testing.T, calls ...toolCall) []string {
	t.Helper()
	dir := t.TempDir()
	var steps []map[string]any
	for _, c := range calls {
		steps = append(steps, map[string]any{"tool": c})
	}
	script, err := json.Marshal(map[string]any{"turns": []any{map[string]any{"steps": steps},
		map[string]any{"steps": []any{map[string]any{"text": "Done."}}}}})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "script.json"), script, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{"providers":[{"name":"demo","kind":"scripted","script":"script.json"}]}`), 0o644))
	return []string{"--config", filepath.Join(dir, "config.json"), "--model", "demo/scripted"}
}

// toolResult is one tool-result event of a run.
type toolResult struct {
	Tool    string `json:"tool"`
	Text    string `json:"text"`
	IsError bool   `json:"isError"`
}

// runTools runs one prompt in a new session at cwd and returns its tool results in call order;
// no approval may be asked on the way.
func runTools(t *testing.T, c *wsConn, cwd string) []toolResult {
	t.Helper()
	var sess struct{ ID string }
	c.result("sessions.create", map[string]any{"cwd": cwd}, &sess)
	sigs := c.collectRun(sendPrompt(t, c, sess.ID, "Look around."))
	var out []toolResult
	for _, s := range sigs {
		assert.NotEqual(t, "approval:request", s.Kind, "nothing hidden is one approval away")
		if s.Kind == "event" && s.eventKind() == "tool-result" {
			var r toolResult
			require.NoError(t, json.Unmarshal(s.Event, &r))
			out = append(out, r)
		}
	}
	require.True(t, *lastEnd(t, sigs).OK, "%s", lastEnd(t, sigs).Raw)
	return out
}

// startRefused runs `zidane-server start` with args and returns its output; it must exit with an
// error at once (a server that starts is stopped by the timeout, and the message check fails).
func startRefused(t *testing.T, extraEnv []string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, serverBin, append([]string{"start", "--listen", freeAddr(t), "--database-url", storetest.URL(t)}, args...)...)
	cmd.Env = env(false, extraEnv...)
	out, err := cmd.CombinedOutput()
	require.Error(t, err, "%s", out)
	return string(out)
}

func filesSearch(t *testing.T, c *wsConn, cwd, pattern string) []protocol.TextMatch {
	t.Helper()
	var res protocol.FilesSearchResult
	c.result("files.search", map[string]any{"cwd": cwd, "pattern": pattern}, &res)
	return res.Matches
}

// TestFieldCase_T03_HiddenPathsHiddenFromEveryWayIn: the paths the sandbox hides are hidden from
// the agent's tools and the clients' files methods too (case T03): a --sandbox-hide file in a
// root reads "does not exist" and is left out of grep, list_dir and files.search with no
// approval asked; a data dir inside a root is refused at start with a message naming both and
// the flag; a home root starts only with --allow-home-root, and then its data dir (daemon.json
// and the local token) and ~/.ssh are hidden, reads and writes alike.
func TestFieldCase_T03_HiddenPathsHiddenFromEveryWayIn(t *testing.T) {
	// Step 1: --sandbox-hide $WS/hidden.txt.
	ws, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	writeFile(t, ws, "hidden.txt", "HIDDEN-IN-ROOT\n")
	writeFile(t, ws, "visible.txt", "VISIBLE-HIDDEN-WORD\n")
	flags := scriptedTools(t,
		toolCall{"read_file", map[string]any{"path": "hidden.txt"}},
		toolCall{"grep", map[string]any{"pattern": "HIDDEN"}},
		toolCall{"list_dir", map[string]any{"path": "."}},
		toolCall{"glob", map[string]any{"pattern": "**/*.txt"}})
	s := startServer(t, serverOpts{dbURL: storetest.URL(t), root: ws, extra: append(flags, "--sandbox-hide", filepath.Join(ws, "hidden.txt"))})
	assert.Contains(t, s.stdout.String(), "hidden inside the workspace roots: "+filepath.Join(ws, "hidden.txt"), "the start says what is hidden")
	c := dial(t, s, s.mintToken("t03", "chat"))
	c.hello()
	rs := runTools(t, c, ws)
	require.Len(t, rs, 4)
	assert.True(t, rs[0].IsError)
	assert.Equal(t, `"hidden.txt" does not exist; pass an existing path inside the workspace roots (`+ws+`).`, rs[0].Text)
	assert.Equal(t, "visible.txt:1:VISIBLE-HIDDEN-WORD\n", rs[1].Text, "grep leaves the hidden file out")
	assert.Equal(t, "visible.txt\n", rs[2].Text, "list_dir leaves it out")
	assert.Equal(t, "visible.txt\n", rs[3].Text, "glob leaves it out")
	assert.Equal(t, []protocol.TextMatch{{Path: "visible.txt", Line: 1, Text: "VISIBLE-HIDDEN-WORD"}}, filesSearch(t, c, ws, "HIDDEN"))
	var rp protocol.FilesResolvePathsResult
	c.result("files.resolvePaths", map[string]any{"cwd": ws, "names": []string{"hidden.txt", "visible.txt"}}, &rp)
	require.Len(t, rp.Paths, 1)
	assert.Equal(t, "visible.txt", rp.Paths[0].Name)
	s.stop()

	// Step 2: --data-dir $WS/.zidane is refused at start, naming both and the flag.
	out := startRefused(t, nil, "--data-dir", filepath.Join(ws, ".zidane"), "--workspace-root", ws)
	assert.Contains(t, out, "workspace root "+ws+" holds the data dir "+filepath.Join(ws, ".zidane"))
	assert.Contains(t, out, "pass --data-dir DIR with a folder outside the workspace roots")
	assert.NoDirExists(t, filepath.Join(ws, ".zidane", "postgres"), "refused before anything is made there")

	// Step 3: the user's home as the root (the default of `cd ~ && zidane-server start`).
	home, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	data := filepath.Join(home, ".local", "share", "zidane-server")
	writeFile(t, home, ".ssh/id_rsa", "-----BEGIN OPENSSH PRIVATE KEY-----\nSSH-KEY-BODY\n")
	writeFile(t, home, "notes.txt", "my notes\n")
	out = startRefused(t, []string{"HOME=" + home}, "--data-dir", data, "--workspace-root", home)
	assert.Contains(t, out, "workspace root "+home+" is the home directory of the server's user")
	assert.Contains(t, out, "--allow-home-root")
	flags = scriptedTools(t,
		toolCall{"read_file", map[string]any{"path": ".local/share/zidane-server/daemon.json"}},
		toolCall{"read_file", map[string]any{"path": ".ssh/id_rsa"}},
		toolCall{"list_dir", map[string]any{"path": ".local/share"}},
		toolCall{"grep", map[string]any{"pattern": "zds_|SSH-KEY"}},
		toolCall{"write_file", map[string]any{"path": ".ssh/authorized_keys", "content": "ssh-ed25519 AAAA attacker\n"}})
	h := startServer(t, serverOpts{dbURL: storetest.URL(t), root: home, dataDir: data, env: []string{"HOME=" + home},
		extra: append(flags, "--allow-home-root")})
	daemon, err := os.ReadFile(filepath.Join(data, "daemon.json"))
	require.NoError(t, err)
	require.Contains(t, string(daemon), "zds_", "the data dir holds the live local token")
	assert.Contains(t, h.stdout.String(), "hidden inside the workspace roots: ")
	assert.Contains(t, h.stdout.String(), data)
	assert.Contains(t, h.stdout.String(), filepath.Join(home, ".ssh"))
	hc := dial(t, h, h.mintToken("t03-home", "chat"))
	hc.hello()
	rs = runTools(t, hc, home)
	require.Len(t, rs, 5)
	assert.Equal(t, `".local/share/zidane-server/daemon.json" does not exist; pass an existing path inside the workspace roots (`+home+`).`, rs[0].Text)
	assert.Equal(t, `".ssh/id_rsa" does not exist; pass an existing path inside the workspace roots (`+home+`).`, rs[1].Text)
	assert.Equal(t, ".local/share is empty.", rs[2].Text, "the data dir is not listed")
	assert.Equal(t, "No matches for zds_|SSH-KEY.", rs[3].Text)
	assert.True(t, rs[4].IsError)
	assert.Equal(t, `".ssh/authorized_keys" is outside the workspace roots (`+home+`); use a path inside them.`, rs[4].Text)
	assert.NoFileExists(t, filepath.Join(home, ".ssh", "authorized_keys"))
	assert.Empty(t, filesSearch(t, hc, home, "zds_"))
	var ls protocol.FsListResult
	hc.result("fs.list", map[string]any{"path": home}, &ls)
	for _, f := range ls.Folders {
		assert.NotEqual(t, ".ssh", f.Name, "fs.list leaves ~/.ssh out")
	}
	e := hc.callErr("fs.list", map[string]any{"path": data})
	assert.Contains(t, e.Message, "does not exist")
	for _, m := range []string{"git.status", "files.search"} {
		e := hc.callErr(m, map[string]any{"cwd": filepath.Join(home, ".ssh"), "pattern": "x"})
		assert.Contains(t, e.Message, "does not exist", m)
	}
}

// TestFieldCase_T03_HiddenThroughLinksGitAndMedia: a second variant of the kind: a link in the
// root to a hidden file reads "does not exist" and is not listed; git.diff of a hidden tracked
// file shows no content (and git.status, git.commit and git.log do not name it); fs.createFolder
// of a hidden path is refused as outside the roots; the media endpoint answers 404 for a hidden
// image, directly or through a link, and for either side of its change.
func TestFieldCase_T03_HiddenThroughLinksGitAndMedia(t *testing.T) {
	ws, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	repo := filepath.Join(ws, "proj")
	makeRepo(t, repo)
	png := "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + strings.Repeat("\x00", 16)
	writeFile(t, repo, "creds.txt", "API_KEY=SECRET-ONE\n")
	writeFile(t, repo, "secret.png", png)
	repoGit(t, repo, "add", ".")
	repoGit(t, repo, "commit", "-q", "-m", "add creds")
	writeFile(t, repo, "creds.txt", "API_KEY=SECRET-TWO\n")
	writeFile(t, repo, "a.txt", "changed\n")
	require.NoError(t, os.Symlink("creds.txt", filepath.Join(repo, "alias.txt")))
	require.NoError(t, os.Symlink("secret.png", filepath.Join(repo, "alias.png")))
	flags := scriptedTools(t,
		toolCall{"read_file", map[string]any{"path": "alias.txt"}},
		toolCall{"list_dir", map[string]any{"path": "."}},
		toolCall{"edit_file", map[string]any{"path": "creds.txt", "old": "SECRET", "new": "X"}})
	s := startServer(t, serverOpts{dbURL: storetest.URL(t), root: ws, extra: append(flags,
		"--sandbox-hide", filepath.Join(repo, "creds.txt"), "--sandbox-hide", filepath.Join(repo, "secret.png"),
		"--sandbox-hide", filepath.Join(ws, "vault"), "--allow-create-folders")})
	c := dial(t, s, s.mintToken("t03-git", "chat"))
	c.hello()
	rs := runTools(t, c, repo)
	require.Len(t, rs, 3)
	assert.Equal(t, `"alias.txt" does not exist; pass an existing path inside the workspace roots (`+ws+`).`, rs[0].Text)
	assert.NotContains(t, rs[1].Text, "alias.txt", "a link to a hidden path is not listed")
	assert.NotContains(t, rs[1].Text, "creds.txt")
	assert.Contains(t, rs[1].Text, "a.txt\n")
	assert.Equal(t, `"creds.txt" is outside the workspace roots (`+ws+`); use a path inside them.`, rs[2].Text)

	var d protocol.GitDiff
	c.result("git.diff", map[string]any{"cwd": repo}, &d)
	assert.NotContains(t, d.Patch, "SECRET")
	assert.NotContains(t, d.Patch, "creds.txt")
	assert.Contains(t, d.Patch, "+changed\n", "the rest of the diff is there")
	for _, f := range d.Files {
		assert.NotEqual(t, "creds.txt", f.Path)
	}
	c.result("git.diff", map[string]any{"cwd": repo, "path": "creds.txt"}, &d)
	assert.Empty(t, d.Patch, "git.diff of the hidden tracked file shows no content")
	assert.Empty(t, d.Files)
	var st protocol.GitStatus
	c.result("git.status", map[string]any{"cwd": repo}, &st)
	for _, ch := range st.Unstaged {
		assert.NotEqual(t, "creds.txt", ch.Path)
	}
	var log protocol.GitLogResult
	c.result("git.log", map[string]any{"cwd": repo, "path": "creds.txt"}, &log)
	assert.Empty(t, log.Commits, "git.log of a hidden path lists no commits")
	e := c.callErr("fs.createFolder", map[string]any{"path": filepath.Join(ws, "vault")})
	assert.Equal(t, `"`+filepath.Join(ws, "vault")+`" is outside the workspace roots (`+ws+`); use a path inside them.`, e.Message)
	assert.NoDirExists(t, filepath.Join(ws, "vault"))
	var cm protocol.GitCommit
	c.result("git.commit", map[string]any{"cwd": repo, "rev": "HEAD"}, &cm)
	for _, f := range cm.Files {
		assert.NotContains(t, []string{"creds.txt", "secret.png"}, f.Path, "git.commit does not name a hidden file")
	}

	b := make([]byte, 24) // a media ticket as clients make one: crypto-random bytes, base64url
	_, err = rand.Read(b)
	require.NoError(t, err)
	ticket := base64.RawURLEncoding.EncodeToString(b)
	c.result("files.mediaTicket", map[string]any{"ticket": ticket}, nil)
	get := func(name, side string) int {
		q := url.Values{"ticket": {ticket}, "cwd": {repo}, "path": {name}}
		if side != "" {
			q.Set("side", side)
		}
		resp, err := http.Get("http://" + s.addr + "/zidane/media?" + q.Encode())
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	writeFile(t, repo, "open.png", png)
	assert.Equal(t, http.StatusOK, get("open.png", ""), "a visible image is served")
	for _, c := range []struct{ name, side string }{{"secret.png", ""}, {"alias.png", ""}, {"secret.png", "old"}, {"secret.png", "new"}} {
		assert.Equal(t, http.StatusNotFound, get(c.name, c.side), "%s side=%s", c.name, c.side)
	}
}
