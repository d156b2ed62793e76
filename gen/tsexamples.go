package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// TSExamplesFile renders sdk-ts/test/examples.gen.ts from schema/examples/*.json, so that tsc checks
// every example wire message against the generated TypeScript types with `satisfies`, and the SDK's
// tests read nothing outside sdk-ts/ at run time. The type comes from the file name:
//
//	<method>.request[-x].json -> Request<"<method>">
//	<method>.result[-x].json  -> SuccessResponse<"<method>">
//	signal.<x>.json           -> SignalNotification, narrowed to the example's params.kind
//	error.<kebab-name>.json   -> ErrorResponse with error: RpcError<typeof ErrorCode.<KebabName>>
//
// An unknown method, signal kind or error name fails the type-check, as does any missing, extra or
// mistyped field. Each message keeps its members in the file's order.
func TSExamplesFile(p *Protocol, examplesDir string) ([]byte, error) {
	entries, err := os.ReadDir(examplesDir)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		if !e.IsDir() && strings.HasSuffix(e.Name(), ".json") {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	if len(names) == 0 {
		return nil, fmt.Errorf("%s holds no .json file", examplesDir)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "// %s\n// Schema hash: %s\n", headerLine, p.Hash)
	b.WriteString("import type { ErrorCode, ErrorResponse, Request, RpcError, SignalNotification, SuccessResponse } from '../src/index.js'\n")
	var list []string
	for _, name := range names {
		raw, err := os.ReadFile(filepath.Join(examplesDir, name))
		if err != nil {
			return nil, err
		}
		var indented bytes.Buffer
		if err := json.Indent(&indented, bytes.TrimSpace(raw), "", "  "); err != nil {
			return nil, fmt.Errorf("schema/examples/%s: %w", name, err)
		}
		base := strings.TrimSuffix(name, ".json")
		typ, err := exampleType(base, raw)
		if err != nil {
			return nil, err
		}
		id := exampleIdent(base)
		fmt.Fprintf(&b, "\n/** schema/examples/%s */\nexport const %s = %s satisfies %s\n", name, id, indented.String(), typ)
		list = append(list, fmt.Sprintf("  [%q, %s],", name, id))
	}
	fmt.Fprintf(&b, "\n/** Every example: its file name under schema/examples/ and its message. */\nexport const examples: ReadonlyArray<readonly [file: string, message: unknown]> = [\n%s\n]\n", strings.Join(list, "\n"))
	return []byte(b.String()), nil
}

var (
	reErrorExample   = regexp.MustCompile(`^error\.([a-z]+(?:-[a-z]+)*)$`)
	reRequestExample = regexp.MustCompile(`^(.+)\.request(?:-[a-z0-9-]+)?$`)
	reResultExample  = regexp.MustCompile(`^(.+)\.result(?:-[a-z0-9-]+)?$`)
	reIdentSep       = regexp.MustCompile(`[^A-Za-z0-9]+(.)`)
)

func exampleType(base string, raw []byte) (string, error) {
	if strings.HasPrefix(base, "signal.") {
		var m struct {
			Params struct {
				Kind string `json:"kind"`
			} `json:"params"`
		}
		if err := json.Unmarshal(raw, &m); err != nil {
			return "", fmt.Errorf("schema/examples/%s.json: %w", base, err)
		}
		return fmt.Sprintf("SignalNotification & { params: { kind: %q } }", m.Params.Kind), nil
	}
	if m := reErrorExample.FindStringSubmatch(base); m != nil {
		var pascal strings.Builder
		for _, w := range strings.Split(m[1], "-") {
			pascal.WriteString(strings.ToUpper(w[:1]) + w[1:])
		}
		return fmt.Sprintf("ErrorResponse & { error: RpcError<typeof ErrorCode.%s> }", pascal.String()), nil
	}
	if m := reRequestExample.FindStringSubmatch(base); m != nil {
		return fmt.Sprintf("Request<%q>", m[1]), nil
	}
	if m := reResultExample.FindStringSubmatch(base); m != nil {
		return fmt.Sprintf("SuccessResponse<%q>", m[1]), nil
	}
	return "", fmt.Errorf("schema/examples/%s.json: cannot tell its type from its name", base)
}

func exampleIdent(base string) string {
	return reIdentSep.ReplaceAllStringFunc(base, func(s string) string {
		return strings.ToUpper(s[len(s)-1:])
	})
}
