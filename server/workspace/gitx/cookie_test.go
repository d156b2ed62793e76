package gitx

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// pkt is one pkt-line of git's wire protocol.
func pkt(s string) string { return fmt.Sprintf("%04x%s", len(s)+4, s) }

// TestFieldCase_T01_SyncWritesNoCookieJar: the server's fetch over https writes no file a
// repository's config names: http.cookieFile with http.saveCookies (curl's cookie jar, written
// as the server's user wherever it points: ~/.bashrc gets a line whose $(…) runs at the next
// login) is switched off, in its plain and its URL-specific (http.<url>.*) forms.
func TestFieldCase_T01_SyncWritesNoCookieJar(t *testing.T) {
	adv := pkt("# service=git-upload-pack\n") + "0000" +
		pkt("0000000000000000000000000000000000000000 capabilities^{}\x00agent=x\n") + "0000"
	ts := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.SetCookie(w, &http.Cookie{Name: "zz", Value: "$(id)", Path: "/"})
		w.Header().Set("Content-Type", "application/x-git-upload-pack-advertisement")
		fmt.Fprint(w, adv)
	}))
	t.Cleanup(ts.Close)
	url := ts.URL + "/x.git"
	for _, prefix := range []string{"http.", "http." + url + "."} {
		dir := newRepo(t)
		jar := filepath.Join(t.TempDir(), "bashrc")
		require.NoError(t, os.WriteFile(jar, []byte("echo original\n"), 0o644))
		gitT(t, dir, "remote", "add", "origin", url)
		gitT(t, dir, "config", "branch.main.remote", "origin")
		gitT(t, dir, "config", "branch.main.merge", "refs/heads/main")
		gitT(t, dir, "update-ref", "refs/remotes/origin/main", "HEAD")
		gitT(t, dir, "config", "http.sslVerify", "false")
		gitT(t, dir, "config", prefix+"cookieFile", jar)
		gitT(t, dir, "config", prefix+"saveCookies", "true")
		var r Runner
		_, err := r.Sync(ctx(t), dir, func(string) error { return nil })
		require.NoError(t, err, prefix)
		assert.Equal(t, "echo original\n", readFile(jar), "%s: the repository's cookie jar was written", prefix)
	}
}
