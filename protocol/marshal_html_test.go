package protocol

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestUnescapeHTML(t *testing.T) {
	for in, want := range map[string]string{
		`{"query":"mine \u003cb\u003e\u0026amp;\u003C/b\u003E"}`: `{"query":"mine <b>&amp;</b>"}`,
		`{"a":"\\u003c"}`:          `{"a":"\\u003c"}`,
		`{"a":"\\\u003c"}`:         `{"a":"\\<"}`,
		`{"a":"\"\u0026\""}`:       `{"a":"\"&\""}`,
		`{"\u003ck":[1,"\u2028"]}`: `{"<k":[1,"\u2028"]}`,
		`{"a":"é\u00e9"}`:          `{"a":"é\u00e9"}`,
		`[]`:                       `[]`,
	} {
		got := UnescapeHTML([]byte(in))
		assert.Equal(t, want, string(got), in)
		var a, b any
		require.NoError(t, json.Unmarshal([]byte(in), &a))
		require.NoError(t, json.Unmarshal(got, &b), "still valid JSON")
		assert.Equal(t, a, b, "the same value")
	}
	plain := []byte(`{"q":"x"}`)
	assert.Same(t, &plain[0], &UnescapeHTML(plain)[0], "nothing to do: no copy")
}

// TestNoHTMLEscapingEncoder: no Go code that writes the wire, the store, a file or stdout calls
// encoding/json's HTML-escaping encoders (json.Marshal, json.MarshalIndent, a json.NewEncoder
// without SetEscapeHTML(false) on one of the next lines): protocol.Marshal is the one encoding
// (field case B36). The sandbox's launcher spec is exempt: it passes between the server and its
// own child process and is never shown or stored.
func TestNoHTMLEscapingEncoder(t *testing.T) {
	bad := regexp.MustCompile(`\bjson\.(Marshal|MarshalIndent)\(`)
	enc := regexp.MustCompile(`\bjson\.NewEncoder\(`)
	var found []string
	for _, top := range []string{"protocol", "client", "server", "cmd", "gen"} {
		err := filepath.WalkDir(filepath.Join("..", top), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && (d.Name() == "node_modules" || path == filepath.Join("..", "server", "workspace", "sandbox")) {
				return filepath.SkipDir
			}
			if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") || path == filepath.Join("..", "protocol", "marshal.go") {
				return nil
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			lines := strings.Split(string(b), "\n")
			for i, l := range lines {
				code, _, _ := strings.Cut(l, "//")
				if bad.MatchString(code) {
					found = append(found, fmt.Sprintf("%s:%d: %s", path, i+1, strings.TrimSpace(l)))
				}
				if enc.MatchString(code) && !strings.Contains(strings.Join(lines[i+1:min(i+3, len(lines))], "\n"), "SetEscapeHTML(false)") {
					found = append(found, fmt.Sprintf("%s:%d: %s (no SetEscapeHTML(false) after it)", path, i+1, strings.TrimSpace(l)))
				}
			}
			return nil
		})
		require.NoError(t, err)
	}
	assert.Empty(t, found, "use protocol.Marshal (or an encoder with SetEscapeHTML(false)): `<`, `>` and `&` go on the wire as themselves")
}
