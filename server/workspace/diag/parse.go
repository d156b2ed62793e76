package diag

import (
	"encoding/json"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// relFile returns the file a tool named, relative to the folder dir and slash-separated: tools
// print paths relative to their working folder (go vet sometimes with ./) or absolute.
func relFile(dir, f string) string {
	f = strings.TrimSpace(f)
	if f == "" {
		return ""
	}
	if filepath.IsAbs(f) {
		if r, err := filepath.Rel(dir, f); err == nil {
			f = r
		}
	}
	return filepath.ToSlash(filepath.Clean(f))
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

// lines splits output into lines without their line ends.
func lines(b []byte) []string {
	return strings.Split(strings.ReplaceAll(string(b), "\r\n", "\n"), "\n")
}

// goVetLine is one go vet finding: "[vet: ]file:line[:col]: message".
var goVetLine = regexp.MustCompile(`^(vet: )?([^\s:][^:]*):(\d+)(?::(\d+))?: (.+)$`)

// parseGoVet reads go vet's output (stderr, some versions stdout): a "vet: " line is a type or
// build error (Error), any other position line an analyzer's finding (Warning), except the go
// command's own package errors (a missing module or package: Error). Indented lines continue the
// message above; "# package" headers are skipped.
func parseGoVet(dir string, stdout, stderr []byte) []Diagnostic {
	var out []Diagnostic
	for _, l := range append(lines(stderr), lines(stdout)...) {
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		if (l[0] == '\t' || l[0] == ' ') && len(out) > 0 {
			out[len(out)-1].Message += "\n" + strings.TrimSpace(l)
			continue
		}
		m := goVetLine.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		sev := Warning
		if m[1] != "" || strings.Contains(m[5], "no required module provides package") ||
			strings.Contains(m[5], "is not in std") || strings.Contains(m[5], "cannot find package") {
			sev = Error
		}
		out = append(out, Diagnostic{File: relFile(dir, m[2]), Line: atoi(m[3]), Column: atoi(m[4]), Severity: sev, Message: m[5]})
	}
	return out
}

// tscLine is "file(line,col): error TS2322: message"; tscGlobal the same without a file.
var (
	tscLine   = regexp.MustCompile(`^(.+)\((\d+),(\d+)\): (error|warning|message|suggestion) (TS\d+): (.*)$`)
	tscGlobal = regexp.MustCompile(`^(error|warning|message|suggestion) (TS\d+): (.*)$`)
)

func tscSeverity(s string) Severity {
	switch s {
	case "error":
		return Error
	case "warning":
		return Warning
	}
	return Info
}

// parseTsc reads tsc --pretty false output (stdout): one line per diagnostic, indented lines
// continuing the one above; the code (TS2322) starts the message.
func parseTsc(dir string, stdout, stderr []byte) []Diagnostic {
	var out []Diagnostic
	for _, l := range append(lines(stdout), lines(stderr)...) {
		if strings.TrimSpace(l) == "" {
			continue
		}
		if (l[0] == ' ' || l[0] == '\t') && len(out) > 0 {
			out[len(out)-1].Message += "\n" + strings.TrimSpace(l)
			continue
		}
		if m := tscLine.FindStringSubmatch(l); m != nil {
			out = append(out, Diagnostic{File: relFile(dir, m[1]), Line: atoi(m[2]), Column: atoi(m[3]),
				Severity: tscSeverity(m[4]), Message: m[5] + ": " + m[6]})
		} else if m := tscGlobal.FindStringSubmatch(l); m != nil {
			out = append(out, Diagnostic{Severity: tscSeverity(m[1]), Message: m[2] + ": " + m[3]})
		}
	}
	return out
}

// eslintFile is one file of eslint -f json's answer.
type eslintFile struct {
	FilePath string `json:"filePath"`
	Messages []struct {
		RuleID   *string `json:"ruleId"`
		Severity int     `json:"severity"` // 1 warning, 2 error
		Message  string  `json:"message"`
		Line     int     `json:"line"`
		Column   int     `json:"column"`
	} `json:"messages"`
}

// parseESLint reads eslint -f json's answer (stdout: an array of files with their messages); the
// rule's name ends the message. Output that is not that JSON gives no diagnostics.
func parseESLint(dir string, stdout, _ []byte) []Diagnostic {
	var files []eslintFile
	if err := json.Unmarshal(stdout, &files); err != nil {
		return nil
	}
	var out []Diagnostic
	for _, f := range files {
		for _, m := range f.Messages {
			sev := Warning
			if m.Severity >= 2 {
				sev = Error
			}
			msg := m.Message
			if m.RuleID != nil && *m.RuleID != "" {
				msg += " (" + *m.RuleID + ")"
			}
			out = append(out, Diagnostic{File: relFile(dir, f.FilePath), Line: max(m.Line, 0), Column: max(m.Column, 0), Severity: sev, Message: msg})
		}
	}
	return out
}
