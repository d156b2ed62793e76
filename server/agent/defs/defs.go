// Package defs reads what a project and the server user configure for the agent (issue 27):
// agent definitions (`.zidane/agents/<name>.md`), skills (folders holding a `SKILL.md`, the open
// Agent Skills format) and commands (`.zidane/commands/<name>.md`). Each is Markdown with a YAML
// front matter, in the formats users already have from Claude Code.
//
// Files are read through an fs.FS per source: the project's is the workspace's confined view of
// the project root (links never leave the roots, the hidden set stays hidden), the server user's
// is their home. A file that does not parse is listed with its error, never skipped; nothing in a
// project file loosens a guard (see Agent.Narrow).
//
// It imports nothing of the transport.
package defs

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"gopkg.in/yaml.v3"

	"github.com/zidane-server/zidane/server/workspace/linkwalk"
)

// Origin says where a definition comes from; it decides what the definition may loosen.
type Origin string

// The origins, in the order a name is looked up (a project definition wins over the user's).
const (
	// OriginBuiltin is a definition of the server (the agents build and plan).
	OriginBuiltin Origin = "builtin"
	// OriginUser is a file of the server user (~/.zidane/, ~/.claude/): the operator's own.
	OriginUser Origin = "user"
	// OriginProject is a file in the project (written by the agent, or by whoever wrote a cloned
	// repository): it may narrow, never loosen.
	OriginProject Origin = "project"
)

// Source is one folder definitions are read from: FS rooted at the folder that holds
// `.zidane/` (and `.claude/`), that is the project root or the server user's home.
type Source struct {
	Origin Origin
	// FS reads the folder. For a project it must be confined to the workspace roots.
	FS fs.FS
	// Dir is the folder's absolute path, for the paths definitions are listed with.
	Dir string
}

// Bounds on what is read, so a planted tree costs little.
const (
	// MaxFileBytes bounds one definition file; a longer one is listed with an error.
	MaxFileBytes = 64 << 10
	// MaxEntries bounds the definitions of one kind read from one folder; the rest are listed
	// as one error.
	MaxEntries = 200
	// MaxSkillFiles bounds the files a skill lists.
	MaxSkillFiles = 200
)

// namePattern is what a definition's name may be: it names a tool call argument, a command after
// `/` and a file, so letters, digits, `-`, `_`, `.` and `:` (a command's namespace), 1–64.
var namePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$`)

// CheckName returns an error saying what a name may be, nil when name is one.
func CheckName(name string) error {
	if !namePattern.MatchString(name) {
		return fmt.Errorf("name %q: use 1 to 64 letters, digits, '-', '_', '.' or ':', starting with a letter or digit", name)
	}
	return nil
}

// frontMatter splits a Markdown file into its YAML front matter (between a first line `---` and
// the next `---`) and its body. A file without one is all body.
func frontMatter(data []byte) (meta map[string]any, body string, err error) {
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	s := strings.ReplaceAll(string(data), "\r\n", "\n")
	if !strings.HasPrefix(s, "---\n") {
		return map[string]any{}, s, nil
	}
	rest := s[4:]
	end := strings.Index(rest, "\n---")
	if end < 0 {
		return nil, "", errors.New("the front matter that starts on line 1 has no closing '---' line")
	}
	yml, after := rest[:end+1], rest[end+4:]
	if i := strings.IndexByte(after, '\n'); i >= 0 {
		if strings.TrimSpace(after[:i]) != "" {
			return nil, "", errors.New("the front matter's closing '---' must be alone on its line")
		}
		after = after[i+1:]
	} else if strings.TrimSpace(after) != "" {
		return nil, "", errors.New("the front matter's closing '---' must be alone on its line")
	} else {
		after = ""
	}
	meta = map[string]any{}
	if err := yaml.Unmarshal([]byte(yml), &meta); err != nil {
		return nil, "", fmt.Errorf("front matter: %v", err)
	}
	if meta == nil {
		meta = map[string]any{}
	}
	return meta, after, nil
}

// str reads a string field (first of keys present); a non-string value is an error.
func str(meta map[string]any, keys ...string) (string, error) {
	for _, k := range keys {
		v, ok := meta[k]
		if !ok || v == nil {
			continue
		}
		switch x := v.(type) {
		case string:
			return strings.TrimSpace(x), nil
		case int, float64, bool:
			return fmt.Sprint(x), nil
		default:
			return "", fmt.Errorf("%s must be a string", k)
		}
	}
	return "", nil
}

// list reads a list field: a YAML list, or one string split at commas (Claude Code's tools) or,
// when it has none, at white space (the Agent Skills format's allowed-tools). present is false
// when no key is there.
func list(meta map[string]any, keys ...string) (out []string, present bool, err error) {
	for _, k := range keys {
		v, ok := meta[k]
		if !ok {
			continue
		}
		switch x := v.(type) {
		case nil:
			return nil, true, nil
		case string:
			sep := func(r rune) bool { return r == ',' }
			if !strings.Contains(x, ",") {
				sep = func(r rune) bool { return r == ' ' || r == '\t' || r == '\n' }
			}
			for _, f := range strings.FieldsFunc(x, sep) {
				if f = strings.TrimSpace(f); f != "" {
					out = append(out, f)
				}
			}
			return out, true, nil
		case []any:
			for _, e := range x {
				s, ok := e.(string)
				if !ok {
					return nil, true, fmt.Errorf("%s must be a list of strings", k)
				}
				if s = strings.TrimSpace(s); s != "" {
					out = append(out, s)
				}
			}
			return out, true, nil
		default:
			return nil, true, fmt.Errorf("%s must be a list of strings or a comma-separated string", k)
		}
	}
	return nil, false, nil
}

// readBounded reads name from fsys, refusing special files and files over MaxFileBytes.
func readBounded(fsys fs.FS, name string) ([]byte, error) {
	fi, err := fs.Stat(fsys, name)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path.Base(name))
	}
	if fi.Size() > MaxFileBytes {
		return nil, fmt.Errorf("%s is %d bytes; definition files are read up to %d KiB", path.Base(name), fi.Size(), MaxFileBytes>>10)
	}
	data, err := fs.ReadFile(fsys, name)
	if err != nil {
		return nil, err
	}
	if len(data) > MaxFileBytes {
		return nil, fmt.Errorf("%s grew past %d KiB while read", path.Base(name), MaxFileBytes>>10)
	}
	if !utf8.Valid(data) || bytes.IndexByte(data, 0) >= 0 {
		return nil, fmt.Errorf("%s is not UTF-8 text (or holds NUL bytes); definition files are Markdown", path.Base(name))
	}
	return data, nil
}

// MaxLabel bounds a definition's description and argument hint, in characters (the Agent Skills
// format's 1024 for a description): they are listed to every client and put in system prompts.
const MaxLabel = 1024

// label reads a short text field: at most MaxLabel characters, with control and format
// characters refused (it is shown on one line), else an error naming the field.
func label(meta map[string]any, keys ...string) (string, error) {
	v, err := str(meta, keys...)
	if err != nil || v == "" {
		return v, err
	}
	if n := utf8.RuneCountInString(v); n > MaxLabel {
		return "", fmt.Errorf("%s is %d characters; at most %d", keys[0], n, MaxLabel)
	}
	for _, r := range v {
		if unicode.IsControl(r) && r != '\n' && r != '\t' || unicode.Is(unicode.Cf, r) {
			return "", fmt.Errorf("%s holds a control or format character (%U); write plain text", keys[0], r)
		}
	}
	return v, nil
}

// mdFiles lists the `.md` files directly in dir of fsys, sorted, at most MaxEntries (more is
// reported by extra > 0). A missing folder is no files and no error.
func mdFiles(fsys fs.FS, dir string) (names []string, extra int, err error) {
	ents, err := fs.ReadDir(fsys, dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	for _, e := range ents {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".md") {
			continue
		}
		names = append(names, e.Name())
	}
	sort.Strings(names)
	if len(names) > MaxEntries {
		extra = len(names) - MaxEntries
		names = names[:MaxEntries]
	}
	return names, extra, nil
}

// outsideError is the problem of a link in a project's definition folders that leads out of the
// project: it is listed, never followed (issue 27: a cloned repository's link to ../../elsewhere or
// /home/… must not become a definition, nor vanish silently).
type outsideError struct{ target string }

func (e *outsideError) Error() string {
	return fmt.Sprintf("a link to %q, which points outside the project; ignored (copy the definition into the project, or put it in the server user's ~/.zidane/ for every project)", e.target)
}

// inside resolves rel, a path of a project source's FS, through its links one component at a time
// without following any that leads out of the project: it returns the path inside the project
// that rel names (rel itself when no link is on the way; a missing path is returned as it is, for
// the read to report), or an *outsideError for the first link that leaves it. Links are read, not
// followed, so nothing outside is ever opened to find out. The server user's sources are theirs
// and returned as they are.
func (src Source) inside(rel string) (string, error) {
	if src.Origin != OriginProject {
		return rel, nil
	}
	if _, ok := src.FS.(fs.ReadLinkFS); !ok {
		return rel, nil // an FS without links
	}
	via := rel // the last link's target, for the message
	lw := linkwalk.Walker[struct{}]{
		Lstat: func(_ struct{}, cur string) (bool, error) {
			fi, err := fs.Lstat(src.FS, cur)
			return err == nil && fi.Mode()&fs.ModeSymlink != 0, nil // a missing path is read as it is
		},
		Readlink: func(_ struct{}, cur string) (string, error) {
			target, err := fs.ReadLink(src.FS, cur)
			if err == nil {
				via = target
			}
			return target, err
		},
		Absolute: func(target string) (struct{}, string, error) {
			r, err := filepath.Rel(src.Dir, filepath.Clean(target))
			if src.Dir == "" || err != nil || r == ".." || strings.HasPrefix(r, "../") {
				return struct{}{}, "", &outsideError{target: target}
			}
			return struct{}{}, filepath.ToSlash(r), nil
		},
	}
	_, to, err := lw.Walk(struct{}{}, rel)
	switch {
	case errors.Is(err, linkwalk.ErrEscapes):
		return "", &outsideError{target: via}
	case errors.Is(err, linkwalk.ErrTooManyLinks):
		return "", fmt.Errorf("more than %d links on the way to %s; ignored", linkwalk.MaxLinks, rel)
	}
	return to, err
}

// readDef reads the definition file rel of src (readBounded) once inside has resolved its links:
// a link that leads out of the project is an *outsideError, never read.
func (src Source) readDef(rel string) ([]byte, error) {
	to, err := src.inside(rel)
	if err != nil {
		return nil, err
	}
	return readBounded(src.FS, to)
}

// Problem is a definition file that could not be used whole: its path and what is wrong.
type Problem struct {
	Path    string
	Message string
}
