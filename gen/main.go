// Command zidane-gen generates everything that must agree with the protocol schema under schema/:
// Go types, handler interfaces and the dispatch table (protocol/*_gen.go), the Go client's typed
// methods (client/methods_gen.go), the TypeScript bindings (sdk-ts/src/protocol.ts) and the SDK's typed
// examples (sdk-ts/test/examples.gen.ts), the reference
// (docs/protocol.md) and the bundled schema (protocol/bundle_gen.json, served at /protocol.json).
//
// Usage:
//
//	go run ./gen          # write the generated files
//	go run ./gen -check   # exit 1 naming every generated file that differs (drift)
//	go run ./gen -release # snapshot schema/releases/v<protocolVersion>.json (make release-schema)
//	go run ./gen -release -changelog CHANGELOG.md -prev old.json -summary '…' # make release's files
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
)

func main() {
	root := flag.String("root", ".", "repository root")
	check := flag.Bool("check", false, "compare instead of writing; exit 1 on drift or on a breaking change")
	release := flag.Bool("release", false, "snapshot the bundled schema as schema/releases/v<protocolVersion>.json")
	changelog := flag.String("changelog", "", "with -release: also write the release's section of this changelog (the product version from VERSION)")
	prev := flag.String("prev", "", "with -changelog: the previous release's bundled schema (empty for the first release)")
	summary := flag.String("summary", "", "with -changelog: the release's written summary (empty keeps the section's existing one)")
	flag.Parse()
	if *release {
		if err := cutRelease(*root, *changelog, *prev, *summary); err != nil {
			fmt.Fprintln(os.Stderr, "zidane-gen:", err)
			os.Exit(1)
		}
		return
	}
	files, err := Generate(filepath.Join(*root, "schema"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "zidane-gen:", err)
		os.Exit(1)
	}
	if *check {
		drift := Drift(*root, files)
		if v, err := readProductVersion(*root); err == nil {
			if d := checkSDKVersion(*root, v); d != "" {
				drift = append(drift, d)
			}
		}
		if len(drift) > 0 {
			fmt.Fprintln(os.Stderr, "zidane-gen: generated files are out of date with schema/; run `make generate` and commit:")
			for _, d := range drift {
				fmt.Fprintln(os.Stderr, "  "+d)
			}
			os.Exit(1)
		}
		breaks, snap, err := checkBreaking(filepath.Join(*root, "schema"), files["protocol/bundle_gen.json"])
		if err != nil {
			fmt.Fprintln(os.Stderr, "zidane-gen:", err)
			os.Exit(1)
		}
		if len(breaks) > 0 {
			fmt.Fprintf(os.Stderr, "zidane-gen: breaking changes against the released schema %s (each says the way forward):\n", snap)
			for _, b := range breaks {
				fmt.Fprintln(os.Stderr, "  "+b)
			}
			os.Exit(1)
		}
		fmt.Printf("zidane-gen: %d generated files match schema/; no breaking change against the last release\n", len(files))
		return
	}
	for _, name := range sortedKeys(files) {
		path := filepath.Join(*root, name)
		if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, files[name]) {
			continue
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			fmt.Fprintln(os.Stderr, "zidane-gen:", err)
			os.Exit(1)
		}
		if err := os.WriteFile(path, files[name], 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "zidane-gen:", err)
			os.Exit(1)
		}
		fmt.Println("wrote", name)
	}
	for _, stale := range staleFiles(*root, files) {
		if err := os.Remove(filepath.Join(*root, stale)); err == nil {
			fmt.Println("removed", stale)
		}
	}
}

// Generate loads schemaDir and renders every output, keyed by path from the repository root.
func Generate(schemaDir string) (map[string][]byte, error) {
	p, err := Load(schemaDir)
	if err != nil {
		return nil, err
	}
	out, err := GoFiles(p)
	if err != nil {
		return nil, err
	}
	out["sdk-ts/src/protocol.ts"] = TSFile(p)
	ex, err := TSExamplesFile(p, filepath.Join(schemaDir, "examples"))
	if err != nil {
		return nil, err
	}
	out["sdk-ts/test/examples.gen.ts"] = ex
	kit, err := WirekitExampleFiles(p, filepath.Join(schemaDir, "examples"))
	if err != nil {
		return nil, err
	}
	for path, b := range kit {
		out[path] = b
	}
	out["docs/protocol.md"] = MarkdownFile(p)
	version, err := readProductVersion(filepath.Dir(schemaDir))
	if err != nil {
		return nil, err
	}
	if out["protocol/version_gen.go"], err = versionGoFile(p, version); err != nil {
		return nil, err
	}
	return out, nil
}

// generatedDirs are where generated files live; a *_gen.go there that the generator
// no longer produces is stale.
var generatedDirs = []string{"protocol", "client"}

func staleFiles(root string, files map[string][]byte) []string {
	var out []string
	for _, d := range generatedDirs {
		matches, _ := filepath.Glob(filepath.Join(root, d, "*_gen.*"))
		for _, m := range matches {
			rel, _ := filepath.Rel(root, m)
			rel = filepath.ToSlash(rel)
			if _, ok := files[rel]; !ok {
				out = append(out, rel)
			}
		}
	}
	sort.Strings(out)
	return out
}

// Drift lists, one line each, the generated files that are missing, differ or are stale.
func Drift(root string, files map[string][]byte) []string {
	var out []string
	for _, name := range sortedKeys(files) {
		old, err := os.ReadFile(filepath.Join(root, name))
		switch {
		case err != nil:
			out = append(out, name+": missing")
		case !bytes.Equal(old, files[name]):
			out = append(out, name+": differs from what schema/ generates")
		}
	}
	for _, s := range staleFiles(root, files) {
		out = append(out, s+": stale (no longer generated)")
	}
	return out
}
