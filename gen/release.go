package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// versionFile is the product version's one source, relative to the repository root: one semver
// line. The generator turns it into protocol.ProductVersion; `make release` writes it.
const versionFile = "VERSION"

// semverRe is a semantic version (semver.org 2.0.0) without a leading v.
var semverRe = regexp.MustCompile(`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$`)

// readProductVersion reads and checks root/VERSION.
func readProductVersion(root string) (string, error) {
	b, err := os.ReadFile(filepath.Join(root, versionFile))
	if err != nil {
		return "", fmt.Errorf("%s: %v (the product version's one source: one semver line such as 0.1.0)", versionFile, err)
	}
	v := strings.TrimSpace(string(b))
	if !semverRe.MatchString(v) {
		return "", fmt.Errorf("%s: %q is not a semantic version (want MAJOR.MINOR.PATCH, e.g. 0.1.0)", versionFile, v)
	}
	return v, nil
}

// versionGoFile renders protocol/version_gen.go: the product version as a constant.
func versionGoFile(p *Protocol, version string) ([]byte, error) {
	f := newFile("protocol", p)
	f.Comment("ProductVersion is the product's semantic version, from the repository's " + versionFile + " file")
	f.Comment("(its one source; `make release` writes it). The server and the CLI report it.")
	f.Const().Id("ProductVersion").Op("=").Lit(version)
	return render(f)
}

// checkSDKVersion says what is wrong when sdk-ts/package.json's version is not the product
// version ("" when it is, or when there is no SDK).
func checkSDKVersion(root, version string) string {
	b, err := os.ReadFile(filepath.Join(root, "sdk-ts", "package.json"))
	if err != nil {
		return ""
	}
	var pkg struct {
		Version string `json:"version"`
	}
	if json.Unmarshal(b, &pkg) != nil || pkg.Version != version {
		return fmt.Sprintf("sdk-ts/package.json: version %q is not %s's %q; `make release` sets both", pkg.Version, versionFile, version)
	}
	return ""
}

// changelogEntry renders the CHANGELOG.md section of a release: the written summary, then what
// the schema's markers say: every method, signal and type whose since is this protocol version and
// that the previous release (prev; nil for the first) lacks, every element marked deprecated, and
// every element marked removedIn.
func changelogEntry(product string, cur, prev map[string]any, summary string) string {
	var b strings.Builder
	v := int(num(cur["protocolVersion"]))
	fmt.Fprintf(&b, "## v%s (protocol v%d, range v%d–v%d)\n\n", product, v, int(num(cur["minProtocolVersion"])), v)
	if s := strings.TrimSpace(summary); s != "" {
		b.WriteString(s + "\n\n")
	}
	var added, deprecated, removed []string
	sections := []struct{ key, label string }{{"methods", "method"}, {"signals", "signal"}, {"$defs", "type"}}
	for _, sec := range sections {
		cm, pm := asMap(cur[sec.key]), asMap(asMap(prev)[sec.key])
		for _, name := range keys(cm) {
			e := asMap(cm[name])
			label := fmt.Sprintf("%s `%s`", sec.label, name)
			if int(num(e["since"])) == v {
				if _, had := pm[name]; !had {
					added = append(added, label)
				}
			}
			if d, ok := e["deprecated"].(string); ok && d != "" {
				deprecated = append(deprecated, label+": "+d)
			}
			if r := int(num(e["removedIn"])); r > 0 {
				removed = append(removed, fmt.Sprintf("%s: removed in v%d (still served to connections that negotiate a lower version)", label, r))
			}
		}
	}
	list := func(title string, xs []string) {
		if len(xs) == 0 {
			return
		}
		fmt.Fprintf(&b, "### %s\n\n", title)
		for _, x := range xs {
			b.WriteString("- " + x + "\n")
		}
		b.WriteString("\n")
	}
	if prev == nil {
		list(fmt.Sprintf("In protocol v%d (first release)", v), added)
	} else {
		list(fmt.Sprintf("New in protocol v%d", v), added)
	}
	list("Deprecated", deprecated)
	list("Removed", removed)
	return b.String()
}

// sectionBounds finds a release's section in a changelog by its heading: [start, end) in bytes.
func sectionBounds(doc, product string) (start, end int, ok bool) {
	head := "## v" + product + " "
	lines := strings.SplitAfter(doc, "\n")
	pos := 0
	start = -1
	for _, ln := range lines {
		switch {
		case start < 0 && strings.HasPrefix(ln, head):
			start = pos
		case start >= 0 && strings.HasPrefix(ln, "## "):
			return start, pos, true
		}
		pos += len(ln)
	}
	if start >= 0 {
		return start, len(doc), true
	}
	return 0, 0, false
}

// changelogHeader opens a new CHANGELOG.md.
const changelogHeader = "# Changelog\n\nOne section per release, newest first, cut by `make release` (scripts/release.sh): the written\nsummary, then what the schema's `since`, `deprecated` and `removedIn` markers say.\n\n"

// writeChangelog puts entry into the changelog doc: in place of the release's own section when it
// is there (a re-cut of an untagged release), else as the newest section.
func writeChangelog(doc, product, entry string) string {
	if doc == "" {
		doc = changelogHeader
	}
	if s, e, ok := sectionBounds(doc, product); ok {
		return doc[:s] + entry + doc[e:]
	}
	if i := strings.Index(doc, "\n## "); i >= 0 {
		return doc[:i+1] + entry + doc[i+1:]
	}
	if !strings.HasSuffix(doc, "\n\n") {
		doc += "\n"
	}
	return doc + entry
}

// existingSummary is the written summary of the release's section in doc ("" when none): the
// text between its heading and its first ### list.
func existingSummary(doc, product string) string {
	s, e, ok := sectionBounds(doc, product)
	if !ok {
		return ""
	}
	body := doc[s:e]
	body = body[strings.Index(body, "\n")+1:]
	if i := strings.Index(body, "### "); i >= 0 {
		body = body[:i]
	}
	return strings.TrimSpace(body)
}

// release cuts the files of a release (scripts/release.sh does the git side): the snapshot
// schema/releases/v<protocolVersion>.json (overwritten on a re-cut) and the release's changelog
// section. prevBundle is the previous release's bundle (nil for the first); summary "" keeps the
// section's existing summary and fails when there is none.
func release(root string, p *Protocol, product string, prevBundle []byte, summary, changelog string) ([]string, error) {
	var cur, prev map[string]any
	if err := json.Unmarshal(p.Bundle, &cur); err != nil {
		return nil, err
	}
	if prevBundle != nil {
		if err := json.Unmarshal(prevBundle, &prev); err != nil {
			return nil, fmt.Errorf("previous release's bundle: %v", err)
		}
	}
	old, err := os.ReadFile(changelog)
	if err != nil && !os.IsNotExist(err) {
		return nil, err
	}
	if strings.TrimSpace(summary) == "" {
		summary = existingSummary(string(old), product)
	}
	if strings.TrimSpace(summary) == "" {
		return nil, fmt.Errorf("release v%s needs a written summary: pass SUMMARY='…' or SUMMARY_FILE=path to make release", product)
	}
	snap := releasePath(filepath.Join(root, "schema"), p.Version)
	if err := os.MkdirAll(filepath.Dir(snap), 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(snap, p.Bundle, 0o644); err != nil {
		return nil, err
	}
	doc := writeChangelog(string(old), product, changelogEntry(product, cur, prev, summary))
	if err := os.WriteFile(changelog, []byte(doc), 0o644); err != nil {
		return nil, err
	}
	return []string{snap, changelog}, nil
}

// cutRelease is -release: the snapshot, and with changelog set the changelog section too.
func cutRelease(root, changelog, prevPath, summary string) error {
	p, err := Load(filepath.Join(root, "schema"))
	if err != nil {
		return err
	}
	if changelog == "" {
		path := releasePath(filepath.Join(root, "schema"), p.Version)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, p.Bundle, 0o644); err != nil {
			return err
		}
		fmt.Println("wrote", path)
		return nil
	}
	product, err := readProductVersion(root)
	if err != nil {
		return err
	}
	var prev []byte
	if prevPath != "" {
		if prev, err = os.ReadFile(prevPath); err != nil {
			return err
		}
	}
	wrote, err := release(root, p, product, prev, summary, changelog)
	for _, w := range wrote {
		fmt.Println("wrote", w)
	}
	return err
}
