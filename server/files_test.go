package server

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// bigTree is a tree of 20,000 files in 200 folders, made once and shared by the tests that need
// it (search bounds); TestMain removes it.
var (
	bigTreeOnce sync.Once
	bigTreeDir  string
)

func bigTree(t *testing.T) string {
	bigTreeOnce.Do(func() {
		dir, err := os.MkdirTemp("", "zidane-bigtree-")
		require.NoError(t, err)
		dir, _ = filepath.EvalSymlinks(dir)
		for i := 0; i < 200; i++ {
			sub := filepath.Join(dir, fmt.Sprintf("pkg%03d", i), "src")
			require.NoError(t, os.MkdirAll(sub, 0o755))
			for j := 0; j < 100; j++ {
				require.NoError(t, os.WriteFile(filepath.Join(sub, fmt.Sprintf("f%03d.go", j)), []byte(fmt.Sprintf("package src\n\n// needle %d %d\nfunc F() {}\n", i, j)), 0o644))
			}
		}
		bigTreeDir = dir
	})
	require.NotEmpty(t, bigTreeDir)
	return bigTreeDir
}

func removeSharedTrees() {
	if bigTreeDir != "" {
		_ = os.RemoveAll(bigTreeDir)
	}
}

// filesEnv is a server whose one workspace root is root, with a chat connection.
func filesEnv(t *testing.T, root string, mod func(*Config)) (*testEnv, *testConn) {
	e := newEnv(t, func(c *Config) {
		c.WorkspaceRoots = []string{root}
		if mod != nil {
			mod(c)
		}
	})
	c := e.dial()
	c.hello()
	return e, c
}

func realDir(t *testing.T) string {
	d, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	return d
}

func errMsg(m map[string]any) string {
	e, _ := m["error"].(map[string]any)
	s, _ := e["message"].(string)
	return s
}

func TestFsListAndPicker(t *testing.T) {
	root, outside := realDir(t), realDir(t)
	require.NoError(t, os.MkdirAll(filepath.Join(root, "b", "deep"), 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(root, "a"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, "file.txt"), []byte("x"), 0o644))
	require.NoError(t, os.Symlink(outside, filepath.Join(root, "out")))                 // leads out: not listed
	require.NoError(t, os.Symlink(filepath.Join(root, "b"), filepath.Join(root, "in"))) // inside: listed as a link
	_, c := filesEnv(t, root, nil)

	r := c.result("fs.list", `{}`)
	require.Equal(t, []any{map[string]any{"name": filepath.Base(root), "path": root}}, r["folders"])

	r = c.result("fs.list", fmt.Sprintf(`{"path":%q}`, root))
	require.Equal(t, root, r["path"])
	require.Nil(t, r["parent"], "a root has no parent in the picker")
	require.Equal(t, []any{
		map[string]any{"name": "a", "path": filepath.Join(root, "a")},
		map[string]any{"name": "b", "path": filepath.Join(root, "b")},
		map[string]any{"name": "in", "path": filepath.Join(root, "in"), "link": true},
	}, r["folders"])
	r = c.result("fs.list", fmt.Sprintf(`{"path":%q}`, filepath.Join(root, "b")))
	require.Equal(t, root, r["parent"])

	// Outside the roots: refused alike whether it exists or not.
	m1 := c.call("fs.list", fmt.Sprintf(`{"path":%q}`, outside))
	m2 := c.call("fs.list", fmt.Sprintf(`{"path":%q}`, outside+"-missing"))
	require.Equal(t, -32014, errCode(m1))
	require.Equal(t, -32014, errCode(m2))
	require.Equal(t, strings.ReplaceAll(errMsg(m1), outside, "X"), strings.ReplaceAll(errMsg(m2), outside+"-missing", "X"))
	m := c.call("fs.list", fmt.Sprintf(`{"path":%q}`, filepath.Join(root, "out")))
	require.Equal(t, -32014, errCode(m), "a link out of the roots is not a folder inside them")
}

func TestFsCreateFolder(t *testing.T) {
	root := realDir(t)
	_, off := filesEnv(t, root, nil)
	m := off.call("fs.createFolder", fmt.Sprintf(`{"path":%q}`, filepath.Join(root, "new")))
	require.Equal(t, -32014, errCode(m))
	require.Contains(t, errMsg(m), "--allow-create-folders")
	require.NotContains(t, errMsg(m), "make run")

	// Started by make run, the refusal names the ARGS form too.
	_, viaMake := filesEnv(t, root, func(c *Config) { c.ViaMakeRun = true })
	m = viaMake.call("fs.createFolder", fmt.Sprintf(`{"path":%q}`, filepath.Join(root, "new")))
	require.Contains(t, errMsg(m), `make run ARGS="--allow-create-folders"`)
	// The hint keeps the ARGS make started the server with.
	_, withArgs := filesEnv(t, root, func(c *Config) { c.ViaMakeRun, c.MakeArgs = true, "--sandbox off --sandbox-allow-off" })
	m = withArgs.call("fs.createFolder", fmt.Sprintf(`{"path":%q}`, filepath.Join(root, "new")))
	require.Contains(t, errMsg(m), `make run ARGS="--sandbox off --sandbox-allow-off --allow-create-folders"`)

	_, c := filesEnv(t, root, func(c *Config) { c.AllowCreateFolders = true })
	h := c.call("ipc.hello", helloParams) // a second hello is refused; the flag is in the first
	_ = h
	r := c.result("fs.createFolder", fmt.Sprintf(`{"path":%q}`, filepath.Join(root, "new")))
	require.Equal(t, filepath.Join(root, "new"), r["path"])
	require.DirExists(t, filepath.Join(root, "new"))
	require.Equal(t, -32014, errCode(c.call("fs.createFolder", fmt.Sprintf(`{"path":%q}`, filepath.Join(root, "new")))), "exists")
	outside := realDir(t)
	require.Equal(t, -32014, errCode(c.call("fs.createFolder", fmt.Sprintf(`{"path":%q}`, filepath.Join(outside, "x")))))
	require.NoDirExists(t, filepath.Join(outside, "x"))
	require.Equal(t, -32602, errCode(c.call("fs.createFolder", `{"path":"relative/x"}`)))
}

func TestFsAndFilesSearchBounds(t *testing.T) {
	tree := bigTree(t)
	_, c := filesEnv(t, tree, nil)

	r := c.result("fs.search", `{"query":"PKG01","limit":5}`)
	require.Len(t, r["folders"], 5)
	require.Equal(t, true, r["truncated"])
	r = c.result("fs.search", `{"query":"pkg199"}`)
	require.Equal(t, []any{map[string]any{"name": "pkg199", "path": filepath.Join(tree, "pkg199")}}, r["folders"])
	require.Equal(t, false, r["truncated"])

	// Every file matches: the 20,000-file tree is cut by the match limit, then by the file bound.
	start := time.Now()
	r = c.result("files.search", fmt.Sprintf(`{"cwd":%q,"pattern":"needle \\d+","limit":2000}`, tree))
	require.Less(t, time.Since(start), textSearchTime+2*time.Second*raceSlowdown, "answers within its time bound")
	require.Equal(t, true, r["truncated"])
	if raceSlowdown > 1 && len(r["matches"].([]any)) < 2000 {
		// Under -race the scan is ~10x slower: the time bound, not the match limit, may cut it.
		require.NotEmpty(t, r["matches"])
	} else {
		require.Len(t, r["matches"], 2000)
	}
	first := r["matches"].([]any)[0].(map[string]any)
	require.Equal(t, "pkg000/src/f000.go", first["path"])
	require.Equal(t, json.Number("3"), first["line"])
	require.Equal(t, "// needle 0 0", first["text"])

	r = c.result("files.search", fmt.Sprintf(`{"cwd":%q,"pattern":"NEEDLE 199 99$","ignoreCase":true}`, filepath.Join(tree, "pkg199")))
	require.Equal(t, []any{map[string]any{"path": "src/f099.go", "line": json.Number("3"), "text": "// needle 199 99"}}, r["matches"], "paths are relative to cwd")
	require.Equal(t, false, r["truncated"])
	require.Equal(t, -32602, errCode(c.call("files.search", fmt.Sprintf(`{"cwd":%q,"pattern":"("}`, tree))))
}

func TestFilesSearchGitignore(t *testing.T) {
	root := realDir(t)
	require.NoError(t, os.MkdirAll(filepath.Join(root, "build"), 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(root, ".git"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, ".gitignore"), []byte("build/\n*.log\n"), 0o644))
	for _, f := range []string{"keep.txt", "build/out.txt", "x.log", ".git/config"} {
		require.NoError(t, os.WriteFile(filepath.Join(root, f), []byte("secret word\n"), 0o644))
	}
	require.NoError(t, os.WriteFile(filepath.Join(root, "bin.dat"), []byte("secret word\x00\x01"), 0o644))
	_, c := filesEnv(t, root, nil)
	r := c.result("files.search", fmt.Sprintf(`{"cwd":%q,"pattern":"secret"}`, root))
	require.Equal(t, []any{map[string]any{"path": "keep.txt", "line": json.Number("1"), "text": "secret word"}}, r["matches"])
}

func TestFilesResolvePaths(t *testing.T) {
	root, outside := realDir(t), realDir(t)
	require.NoError(t, os.MkdirAll(filepath.Join(root, "données", "sous dossier"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, "my file.txt"), []byte("x"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(root, "données", "été 😀.md"), []byte("x"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(outside, "secret.txt"), []byte("x"), 0o644))
	require.NoError(t, os.Symlink(filepath.Join(outside, "secret.txt"), filepath.Join(root, "link.txt")))
	_, c := filesEnv(t, root, nil)
	names := []string{"my file.txt", "données/été 😀.md", "données/sous dossier", "missing.txt", "../" + filepath.Base(outside) + "/secret.txt", filepath.Join(outside, "secret.txt"), "link.txt", filepath.Join(root, "my file.txt")}
	b, _ := json.Marshal(map[string]any{"cwd": root, "names": names})
	r := c.result("files.resolvePaths", string(b))
	require.Equal(t, []any{
		map[string]any{"name": "my file.txt", "kind": "file", "path": filepath.Join(root, "my file.txt")},
		map[string]any{"name": "données/été 😀.md", "kind": "file", "path": filepath.Join(root, "données", "été 😀.md")},
		map[string]any{"name": "données/sous dossier", "kind": "folder", "path": filepath.Join(root, "données", "sous dossier")},
		map[string]any{"name": filepath.Join(root, "my file.txt"), "kind": "file", "path": filepath.Join(root, "my file.txt")},
	}, r["paths"])
}

// files.read answers the start of a text file inside the roots (a file viewer's), bounded and cut
// at a character boundary; a binary file answers no text; a file outside the roots (a link leading
// out, a ../ name), a folder or a missing file is refused with a message saying what to pass.
func TestFilesRead(t *testing.T) {
	root, outside := realDir(t), realDir(t)
	require.NoError(t, os.MkdirAll(filepath.Join(root, "src"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, "src", "main.go"), []byte("package main\n\nfunc main() {}\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(root, "été.txt"), []byte(strings.Repeat("é", 10)), 0o644)) // 20 bytes
	require.NoError(t, os.WriteFile(filepath.Join(root, "dot.png"), pngBytes(t), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(outside, "secret.txt"), []byte("secret"), 0o644))
	require.NoError(t, os.Symlink(filepath.Join(outside, "secret.txt"), filepath.Join(root, "link.txt")))
	_, c := filesEnv(t, root, nil)
	read := func(params string) map[string]any { return c.result("files.read", params) }

	r := read(fmt.Sprintf(`{"cwd":%q,"path":"src/main.go"}`, root))
	require.Equal(t, map[string]any{"path": filepath.Join(root, "src", "main.go"), "size": json.Number("29"), "text": "package main\n\nfunc main() {}\n", "truncated": false}, r)
	r = read(fmt.Sprintf(`{"cwd":"","path":%q}`, filepath.Join(root, "src", "main.go")))
	require.Equal(t, "package main\n\nfunc main() {}\n", r["text"], "an absolute path inside the roots, cwd the first root")

	// Bounded: 9 bytes of a 2-byte character cut back to 8, and said to be cut.
	r = read(fmt.Sprintf(`{"cwd":%q,"path":"été.txt","maxBytes":9}`, root))
	require.Equal(t, strings.Repeat("é", 4), r["text"])
	require.Equal(t, true, r["truncated"])
	require.Equal(t, json.Number("20"), r["size"])

	r = read(fmt.Sprintf(`{"cwd":%q,"path":"dot.png"}`, root))
	require.Equal(t, true, r["binary"])
	require.Equal(t, "", r["text"])

	for _, bad := range []string{"link.txt", "../" + filepath.Base(outside) + "/secret.txt", filepath.Join(outside, "secret.txt"), "src", "missing.txt"} {
		m := c.call("files.read", fmt.Sprintf(`{"cwd":%q,"path":%q}`, root, bad))
		require.Equal(t, -32014, errCode(m), bad)
		require.NotContains(t, errMsg(m), "secret\"", bad)
		require.Contains(t, errMsg(m), "files.resolvePaths", bad)
	}
	m := c.call("files.read", fmt.Sprintf(`{"cwd":%q,"path":"src/main.go","maxBytes":2000000}`, root))
	require.Equal(t, -32602, errCode(m), "maxBytes over the bound")
}

// ---------------------------------------------------------------------------------------------
// Media over HTTP

func pngBytes(t *testing.T) []byte {
	img := image.NewRGBA(image.Rect(0, 0, 4, 4))
	img.Set(1, 1, color.RGBA{255, 0, 0, 255})
	var b bytes.Buffer
	require.NoError(t, png.Encode(&b, img))
	return b.Bytes()
}

// mp4Bytes is the start of an MP4 file: an ftyp box, then filler.
func mp4Bytes(n int) []byte {
	b := append([]byte{0, 0, 0, 0x18}, []byte("ftypmp42\x00\x00\x00\x00mp42isom")...)
	for len(b) < n {
		b = append(b, byte(len(b)))
	}
	return b
}

func mediaGet(t *testing.T, hs *httptest.Server, q string, hdr map[string]string) (*http.Response, []byte) {
	req, err := http.NewRequest(http.MethodGet, hs.URL+"/zidane/media?"+q, nil)
	require.NoError(t, err)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, b
}

// randomTicket is a media ticket as clients should make one: 24 crypto-random bytes, base64url.
func randomTicket(t *testing.T) string {
	b := make([]byte, 24)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return base64.RawURLEncoding.EncodeToString(b)
}

func mq(ticket, cwd, p string, extra ...string) string {
	v := "ticket=" + ticket + "&cwd=" + urlq(cwd) + "&path=" + urlq(p)
	for _, e := range extra {
		v += "&" + e
	}
	return v
}

func urlq(s string) string {
	r := strings.NewReplacer("%", "%25", "&", "%26", "+", "%2B", " ", "%20", "?", "%3F", "#", "%23")
	return r.Replace(s)
}

func TestMediaOverHTTP(t *testing.T) {
	root, outside := realDir(t), realDir(t)
	pngb := pngBytes(t)
	mp4 := mp4Bytes(100000)
	require.NoError(t, os.WriteFile(filepath.Join(root, "pic.png"), pngb, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(root, "clip.mp4"), mp4, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(root, "page.html"), []byte("<html><script>alert(1)</script></html>"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(root, "fake.png"), []byte("<!DOCTYPE html><html><script>alert(1)</script></html>"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(root, "draw.svg"), []byte(`<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script><rect width="1" height="1"/></svg>`), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(outside, "secret.png"), pngb, 0o644))
	require.NoError(t, os.Symlink(filepath.Join(outside, "secret.png"), filepath.Join(root, "out.png")))
	big, err := os.Create(filepath.Join(root, "big.mp4")) // 70 MiB, sparse after its header
	require.NoError(t, err)
	_, err = big.Write(mp4Bytes(4096))
	require.NoError(t, err)
	require.NoError(t, big.Truncate(70<<20))
	require.NoError(t, big.Close())

	e, c := filesEnv(t, root, nil)
	ticket := randomTicket(t)
	c.result("files.mediaTicket", fmt.Sprintf(`{"ticket":%q}`, ticket))
	require.Equal(t, -32602, errCode(c.call("files.mediaTicket", `{"ticket":"short"}`)))
	// A ticket of the right length and characters that is evidently not random is refused too
	// (a break-it report: "aaaa…" was a valid ticket), saying how to make one.
	for _, weak := range []string{strings.Repeat("a", 32), strings.Repeat("Ab3_-", 8), "abcdefghijklmnopqrstuvwxyzABCDEF", strings.Repeat("t03-media-ticket-", 3)} {
		m := c.call("files.mediaTicket", fmt.Sprintf(`{"ticket":%q}`, weak))
		require.Equal(t, -32602, errCode(m), weak)
		require.Contains(t, errMsg(m), "the ticket is not random", weak)
		require.Contains(t, errMsg(m), "make it from crypto-random bytes, e.g. 24 random bytes base64url-encoded", weak)
		resp, _ := mediaGet(t, e.hs, mq(weak, root, "pic.png"), nil)
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "a refused ticket lets nothing in: %s", weak)
	}

	resp, b := mediaGet(t, e.hs, mq(ticket, root, "pic.png"), nil)
	require.Equal(t, 200, resp.StatusCode)
	require.Equal(t, "image/png", resp.Header.Get("Content-Type"))
	require.Equal(t, "nosniff", resp.Header.Get("X-Content-Type-Options"))
	require.Contains(t, resp.Header.Get("Content-Security-Policy"), "sandbox")
	require.Equal(t, pngb, b)

	resp, b = mediaGet(t, e.hs, mq(ticket, root, "clip.mp4"), nil)
	require.Equal(t, 200, resp.StatusCode)
	require.Equal(t, "video/mp4", resp.Header.Get("Content-Type"))
	require.Equal(t, mp4, b)

	resp, b = mediaGet(t, e.hs, mq(ticket, root, "clip.mp4"), map[string]string{"Range": "bytes=100-199"})
	require.Equal(t, 206, resp.StatusCode)
	require.Equal(t, mp4[100:200], b)
	require.Equal(t, "bytes 100-199/100000", resp.Header.Get("Content-Range"))
	// Several ranges: the first only, never a multipart answer (webapp.FirstRangeOnly).
	resp, b = mediaGet(t, e.hs, mq(ticket, root, "clip.mp4"), map[string]string{"Range": "bytes=100-199, 0-0,5-9"})
	require.Equal(t, 206, resp.StatusCode)
	require.Equal(t, mp4[100:200], b)
	require.Equal(t, "bytes 100-199/100000", resp.Header.Get("Content-Range"))
	require.NotContains(t, resp.Header.Get("Content-Type"), "multipart")

	resp, _ = mediaGet(t, e.hs, mq(ticket, root, "clip.mp4"), map[string]string{"Range": "bytes=200000-"})
	require.Equal(t, 416, resp.StatusCode)

	// Conditional: an unchanged file answers 304.
	resp, _ = mediaGet(t, e.hs, mq(ticket, root, "pic.png"), map[string]string{"If-Modified-Since": time.Now().Add(time.Hour).UTC().Format(http.TimeFormat)})
	require.Equal(t, 304, resp.StatusCode)

	// 70 MiB: refused whole, cut short by range.
	resp, _ = mediaGet(t, e.hs, mq(ticket, root, "big.mp4"), nil)
	require.Equal(t, 413, resp.StatusCode)
	resp, b = mediaGet(t, e.hs, mq(ticket, root, "big.mp4"), map[string]string{"Range": "bytes=0-"})
	require.Equal(t, 206, resp.StatusCode)
	require.Len(t, b, maxMediaBytes)
	resp, b = mediaGet(t, e.hs, mq(ticket, root, "big.mp4"), map[string]string{"Range": "bytes=0 -"}) // spaces, as net/http accepts them
	require.Equal(t, 206, resp.StatusCode)
	require.Len(t, b, maxMediaBytes)
	require.Equal(t, fmt.Sprintf("bytes 0-%d/%d", maxMediaBytes-1, 70<<20), resp.Header.Get("Content-Range"))

	// Not media, or media in name only: never served as a document that runs scripts.
	for _, p := range []string{"page.html", "fake.png"} {
		resp, _ = mediaGet(t, e.hs, mq(ticket, root, p), nil)
		require.Equal(t, 415, resp.StatusCode, p)
		require.NotContains(t, resp.Header.Get("Content-Type"), "html", p)
	}
	resp, _ = mediaGet(t, e.hs, mq(ticket, root, "draw.svg"), nil)
	require.Equal(t, 200, resp.StatusCode)
	require.Equal(t, "image/svg+xml", resp.Header.Get("Content-Type"))
	require.Contains(t, resp.Header.Get("Content-Security-Policy"), "sandbox", "opened as a document, its script does not run")
	require.NotContains(t, resp.Header.Get("Content-Security-Policy"), "allow-scripts")

	// Outside the roots: 404.
	for _, p := range []string{"../" + filepath.Base(outside) + "/secret.png", filepath.Join(outside, "secret.png"), "out.png", "missing.png"} {
		resp, _ = mediaGet(t, e.hs, mq(ticket, root, p), nil)
		require.Equal(t, 404, resp.StatusCode, p)
	}
	resp, _ = mediaGet(t, e.hs, mq(ticket, outside, "secret.png"), nil)
	require.Equal(t, 404, resp.StatusCode)

	// No ticket, an unknown one, and the ticket of a closed connection: 401.
	resp, _ = mediaGet(t, e.hs, "cwd="+urlq(root)+"&path=pic.png", nil)
	require.Equal(t, 401, resp.StatusCode)
	resp, _ = mediaGet(t, e.hs, mq(strings.Repeat("z", 40), root, "pic.png"), nil)
	require.Equal(t, 401, resp.StatusCode)
	c.ws.CloseNow()
	require.Eventually(t, func() bool {
		resp, _ := mediaGet(t, e.hs, mq(ticket, root, "pic.png"), nil)
		return resp.StatusCode == 401
	}, 5*time.Second, 20*time.Millisecond)
}

func TestMediaGitSides(t *testing.T) {
	root := realDir(t)
	git := func(args ...string) {
		cmd := exec.Command("git", append([]string{"-C", root, "-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
	}
	git("init", "-q")
	oldPNG := pngBytes(t)
	require.NoError(t, os.WriteFile(filepath.Join(root, "pic.png"), oldPNG, 0o644))
	git("add", "pic.png")
	git("commit", "-q", "-m", "pic")
	img := image.NewRGBA(image.Rect(0, 0, 8, 8))
	var nb bytes.Buffer
	require.NoError(t, png.Encode(&nb, img))
	require.NoError(t, os.WriteFile(filepath.Join(root, "pic.png"), nb.Bytes(), 0o644))

	e, c := filesEnv(t, root, nil)
	ticket := randomTicket(t)
	c.result("files.mediaTicket", fmt.Sprintf(`{"ticket":%q}`, ticket))
	resp, b := mediaGet(t, e.hs, mq(ticket, root, "pic.png", "side=old"), nil)
	require.Equal(t, 200, resp.StatusCode)
	require.Equal(t, oldPNG, b)
	require.Equal(t, "image/png", resp.Header.Get("Content-Type"))
	resp, b = mediaGet(t, e.hs, mq(ticket, root, "pic.png", "side=new"), nil)
	require.Equal(t, 200, resp.StatusCode)
	require.Equal(t, nb.Bytes(), b)
	resp, _ = mediaGet(t, e.hs, mq(ticket, root, "pic.png", "side=sideways"), nil)
	require.Equal(t, 404, resp.StatusCode)
}

// ---------------------------------------------------------------------------------------------
// Shared state: drafts, settings, prefs, sidebar

// restart stops the server and starts a new one on the same database (a server restart).
func (e *testEnv) restart(mod func(*Config)) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cfg := e.srv.cfg
	e.srv.Shutdown(ctx)
	e.hs.Close()
	if mod != nil {
		mod(&cfg)
	}
	s, err := New(ctx, cfg, e.st)
	require.NoError(e.t, err)
	hs := httptest.NewServer(s)
	e.srv, e.hs, e.wsURL = s, hs, "ws"+strings.TrimPrefix(hs.URL, "http")
	e.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		s.Shutdown(ctx)
		hs.Close()
	})
}

func TestDraftsAcrossWindowsAndRestart(t *testing.T) {
	e := newEnv(t, nil)
	a, b := e.dial(), e.dial()
	a.hello()
	b.hello()
	sid := a.newSession()
	writes0 := e.srv.drafts.writes.Load()
	text := ""
	for i := 0; i < 200; i++ { // a burst of keystrokes, as notifications
		text += string(rune('a' + i%26))
		a.send(fmt.Sprintf(`{"jsonrpc":"2.0","method":"drafts.set","params":{"sessionId":%q,"text":%q}}`, sid, text))
	}
	// The other window follows to the last keystroke.
	var last string
	for last != text {
		s := b.nextSignal()
		if s.kind != "draft:changed" {
			continue
		}
		p := decodeObj(t, s.raw)["params"].(map[string]any)
		require.Equal(t, sid, p["sessionId"])
		_, hasSeq := p["$seq"]
		require.False(t, hasSeq, "a draft carries no $seq")
		last = p["text"].(string)
	}
	r := b.result("drafts.get", fmt.Sprintf(`{"sessionId":%q}`, sid))
	require.Equal(t, text, r["text"])
	a.result("$/ping", `{}`) // every draft:changed the typing window could get has arrived by now
	for _, f := range a.skipped {
		require.NotEqual(t, "draft:changed", parseSignal(t, f).kind, "the window that typed gets no echo")
	}
	require.Eventually(t, func() bool {
		d, err := e.st.GetDraft(context.Background(), sid)
		return err == nil && d.Text == text
	}, 5*time.Second, 20*time.Millisecond)
	require.LessOrEqual(t, e.srv.drafts.writes.Load()-writes0, int64(5), "a burst is a handful of writes, never one per keystroke")

	// NUL and any Unicode survive Postgres, and a restart.
	odd := "nul\x00 😀 \u2028 end"
	b.result("drafts.set", fmt.Sprintf(`{"sessionId":%q,"text":%s}`, sid, mustJSON(odd)))
	e.restart(nil)
	c := e.dial()
	c.hello()
	r = c.result("drafts.get", fmt.Sprintf(`{"sessionId":%q}`, sid))
	require.Equal(t, odd, r["text"])
	c.result("drafts.clear", fmt.Sprintf(`{"sessionId":%q}`, sid))
	r = c.result("drafts.get", fmt.Sprintf(`{"sessionId":%q}`, sid))
	require.Equal(t, "", r["text"])
	require.Equal(t, -32014, errCode(c.call("drafts.set", `{"sessionId":"7f6b2bc1-27b2-4052-a2b7-de05d2538178","text":"x"}`)))
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestSidebarPrefsSettingsAcrossRestart(t *testing.T) {
	e := newEnv(t, nil)
	a, b := e.dial(), e.dial()
	a.hello()
	b.hello()
	require.Equal(t, map[string]any{}, a.result("prefs.get", `{}`)["prefs"])
	require.Nil(t, a.result("sidebar.getSpace", `{}`)["space"])

	view := `{"filter":"mine","collapsed":[1,2],"session":"7f6b2bc1-27b2-4052-a2b7-de05d2538178","x":{"deep":null}}`
	a.result("sidebar.setView", `{"space":"work","view":`+view+`}`)
	a.result("sidebar.setSpace", `{"space":"work"}`)
	a.result("sidebar.setView", `{"space":"scratch","view":{"a":1}}`)
	a.result("sidebar.setView", `{"space":"scratch","view":null}`) // removes it
	require.Equal(t, -32602, errCode(a.call("sidebar.setSpace", `{"space":"a\u0000b"}`)))
	// "__proto__" would replace the prototype of the object a JavaScript client keeps the map in
	// (break-it): refused wherever a client names a key, saying why.
	for _, call := range [][2]string{
		{"sidebar.setView", `{"space":"__proto__","view":{"pinned":["x"]}}`},
		{"sidebar.setSpace", `{"space":"__proto__"}`},
		{"prefs.set", `{"key":"__proto__","value":{"theme":"dark"}}`},
	} {
		m := a.call(call[0], call[1])
		require.Equal(t, -32602, errCode(m), call[0])
		require.Contains(t, fmt.Sprint(m["error"]), "names the prototype", call[0])
	}
	// Control and invisible formatting characters make names that look alike: refused, naming
	// the character (a bidi override, a zero-width space, a line break).
	for _, call := range [][3]string{
		{"prefs.set", `{"key":"theme\u202e","value":1}`, "U+202E"},
		{"sidebar.setSpace", `{"space":"wo\u200brk"}`, "U+200B"},
		{"sidebar.setView", `{"space":"a\nb","view":{}}`, "U+000A"},
	} {
		m := a.call(call[0], call[1])
		require.Equal(t, -32602, errCode(m), call[0])
		require.Contains(t, fmt.Sprint(m["error"]), call[2], call[0])
	}
	a.result("prefs.set", `{"key":"lastModel","value":"openai/gpt-4o"}`)
	a.result("prefs.set", `{"key":"panneau é 名","value":{"width":320}}`)
	a.result("prefs.set", `{"key":"gone","value":1}`)
	a.result("prefs.set", `{"key":"gone","value":null}`)
	kinds := map[string]int{}
	for i := 0; i < 8; i++ {
		kinds[b.nextSignal().kind]++
	}
	require.Equal(t, map[string]int{"sidebar:changed": 4, "prefs:changed": 4}, kinds)

	// Settings: read with chat, written with admin only, validated.
	require.Equal(t, -32013, errCode(a.call("settings.set", `{"settings":{"theme":"dark"}}`)))
	adm := e.dialAs(e.mint("admin"))
	require.Equal(t, -32602, errCode(adm.call("settings.set", `{"settings":{"locale":"not a tag!"}}`)))
	r := adm.result("settings.set", `{"settings":{"theme":"dark","sendOnEnter":false}}`)
	require.Equal(t, map[string]any{"theme": "dark", "sendOnEnter": false}, r)
	require.Equal(t, "settings:changed", b.nextSignal().kind)

	e.restart(nil)
	c := e.dial()
	c.hello()
	require.Equal(t, map[string]any{"lastModel": "openai/gpt-4o", "panneau é 名": map[string]any{"width": json.Number("320")}}, c.result("prefs.get", `{}`)["prefs"])
	views := c.result("sidebar.getViews", `{}`)["views"].(map[string]any)
	require.NotContains(t, views, "scratch")
	got, _ := json.Marshal(views["work"])
	require.JSONEq(t, view, string(got), "the view record is stored as given")
	require.Equal(t, "work", c.result("sidebar.getSpace", `{}`)["space"])
	require.Equal(t, map[string]any{"theme": "dark", "sendOnEnter": false}, c.result("settings.get", `{}`))
	big := `"` + strings.Repeat("x", maxStateValue) + `"`
	require.Equal(t, -32602, errCode(c.call("prefs.set", `{"key":"big","value":`+big+`}`)))
}

// TestGitDataOutsideTheRoots: a repository inside the roots whose git data lies outside (a .git
// file or link, borrowed object stores) is refused by clone, reads and media alike, with an
// answer that does not name the outside path (adversarial review).
func TestGitDataOutsideTheRoots(t *testing.T) {
	root, outside := realDir(t), realDir(t)
	run := func(dir string, args ...string) {
		cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
	}
	secret := filepath.Join(outside, "repo")
	require.NoError(t, os.MkdirAll(secret, 0o755))
	run(secret, "init", "-q")
	require.NoError(t, os.WriteFile(filepath.Join(secret, "s.png"), pngBytes(t), 0o644))
	run(secret, "add", ".")
	run(secret, "commit", "-q", "-m", "secret")
	// A .git file and a .git link pointing out.
	require.NoError(t, os.MkdirAll(filepath.Join(root, "gitfile"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, "gitfile", ".git"), []byte("gitdir: "+filepath.Join(secret, ".git")+"\n"), 0o644))
	require.NoError(t, os.MkdirAll(filepath.Join(root, "gitlink"), 0o755))
	require.NoError(t, os.Symlink(filepath.Join(secret, ".git"), filepath.Join(root, "gitlink", ".git")))
	require.NoError(t, os.MkdirAll(filepath.Join(root, "gone"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, "gone", ".git"), []byte("gitdir: /nonexistent/x\n"), 0o644))
	// Borrowed objects: alternates naming the outside store.
	alt := filepath.Join(root, "alt")
	require.NoError(t, os.MkdirAll(alt, 0o755))
	run(alt, "init", "-q")
	require.NoError(t, os.WriteFile(filepath.Join(alt, ".git", "objects", "info", "alternates"), []byte(filepath.Join(secret, ".git", "objects")+"\n"), 0o644))
	head, err := exec.Command("git", "-C", secret, "rev-parse", "HEAD").Output()
	require.NoError(t, err)
	run(alt, "update-ref", "refs/heads/master", strings.TrimSpace(string(head)))

	e, c := filesEnv(t, root, func(c *Config) { c.AllowClone = true })
	for _, src := range []string{"gitfile", "gitlink", "alt"} {
		m := c.call("git.clone", fmt.Sprintf(`{"url":%q,"into":%q}`, filepath.Join(root, src), "copy-"+src))
		require.Equal(t, -32014, errCode(m), src)
		require.NotContains(t, errMsg(m), outside, src)
		require.NoDirExists(t, filepath.Join(root, "copy-"+src))
	}
	var msgs []string
	for _, dir := range []string{"gitfile", "gitlink", "alt", "gone"} {
		m := c.call("git.log", fmt.Sprintf(`{"cwd":%q}`, filepath.Join(root, dir)))
		require.Equal(t, -32014, errCode(m), dir)
		require.NotContains(t, errMsg(m), outside, dir)
		msgs = append(msgs, strings.ReplaceAll(errMsg(m), dir, "D"))
	}
	require.Equal(t, msgs[0], msgs[3], "a .git file that leads nowhere answers like one that leads out")
	ticket := randomTicket(t)
	c.result("files.mediaTicket", fmt.Sprintf(`{"ticket":%q}`, ticket))
	resp, _ := mediaGet(t, e.hs, mq(ticket, alt, "s.png", "side=old"), nil)
	require.Equal(t, 404, resp.StatusCode)
}

// TestSharedStateFitsOneAnswer (a break-it report): prefs allowed 500 keys of 64 KiB each, 32 MiB
// in all, so one chat token storing 300 values of 60 KB made prefs.get answer -32012 ("ask for
// less") to every client from then on, across restarts. Now a prefs or sidebar write that would
// take its namespace past 4 MiB in all is refused (HandlerFailed saying to remove some), and the
// get still answers.
func TestSharedStateFitsOneAnswer(t *testing.T) {
	e := newEnv(t, nil)
	a, b := e.dial(), e.dial()
	a.hello()
	b.hello()
	val := mustJSON(strings.Repeat("x", 60000))
	refused := -1
	for i := 0; i < 100; i++ {
		m := a.call("prefs.set", fmt.Sprintf(`{"key":"k%d","value":%s}`, i, val))
		if errCode(m) != 0 {
			require.Equal(t, -32014, errCode(m), "answer: %v", m)
			require.Contains(t, m["error"].(map[string]any)["message"], "remove some first")
			refused = i
			break
		}
	}
	require.Equal(t, 69, refused, "the 70th value of 60 KB passes 4 MiB")
	require.Len(t, b.result("prefs.get", `{}`)["prefs"], 69)
	a.result("prefs.set", `{"key":"k0","value":null}`) // removing one makes room again
	a.result("prefs.set", `{"key":"again","value":`+val+`}`)

	for i := 0; ; i++ {
		m := a.call("sidebar.setView", fmt.Sprintf(`{"space":"s%d","view":{"v":%s}}`, i, val))
		if errCode(m) != 0 {
			require.Equal(t, -32014, errCode(m), "answer: %v", m)
			require.Equal(t, 69, i)
			break
		}
	}
	require.Len(t, b.result("sidebar.getViews", `{}`)["views"], 69)
}

// TestWeakTicketPassesRandomTickets: the weak-ticket checks refuse no ticket made from crypto-random
// bytes, in the SDK's shape (32 bytes base64url), the shortest (24 bytes) and 32 hex digits (a
// UUID's), and say why for the patterns a person or a test types.
func TestWeakTicketPassesRandomTickets(t *testing.T) {
	for i := 0; i < 20000; i++ {
		b := make([]byte, 32)
		_, err := rand.Read(b)
		require.NoError(t, err)
		for _, tk := range []string{base64.RawURLEncoding.EncodeToString(b), base64.RawURLEncoding.EncodeToString(b[:24])} {
			require.Empty(t, weakTicket(tk), tk)
		}
		if i < 1000 { // 32 hex digits: refused with probability ~3.5e-8 each
			require.Empty(t, weakTicket(fmt.Sprintf("%x", b[:16])), "%x", b[:16])
		}
	}
	require.Equal(t, "it has only 1 distinct characters", weakTicket(strings.Repeat("a", 32)))
	require.Equal(t, "it repeats a block of 9 characters", weakTicket(strings.Repeat("0123xyzAB", 4)))
	require.Equal(t, "it runs through consecutive characters", weakTicket("abcdefghijklmnopqrstuvwxyzABCDEF"))
}
