package main

import (
	"fmt"
	"strings"
)

// MarkdownFile renders docs/protocol.md, the protocol reference.
func MarkdownFile(p *Protocol) []byte {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("<!-- %s -->\n<!-- Schema hash: %s -->\n\n", headerLine, p.Hash)
	w("# %s reference\n\n%s\n\n", p.Title, p.Description)
	w("Protocol version **%d** (this server speaks versions %d to %d). The machine-readable schema is served at `GET /protocol.json`; the TypeScript bindings are `sdk-ts/src/protocol.ts`.\n\n", p.Version, p.MinVersion, p.Version)
	w("## Versions and compatibility\n\n")
	w("- Each side speaks a range of versions, from its `minProtocolVersion` to its `protocolVersion`. A server accepts a client whose range overlaps its own; the connection speaks the highest version both share (`negotiatedProtocolVersion` in the `ipc.hello` result). A client that sends no `minProtocolVersion` speaks its `protocolVersion` only.\n")
	w("- Ranges that do not overlap get `VersionMismatch` (%d) with the server's hello fields in `data.daemon` and the side to upgrade in the message.\n", codeOf(p, "VersionMismatch"))
	w("- New methods, fields, signal kinds, event kinds and enum values arrive without a version bump, each with the `since` version it arrived in. Receivers ignore unknown fields and kinds; a client treats `MethodNotFound` as \"not offered\". Only breaking changes to the method map or the signal union bump the version, and a release keeps the previous version in its range.\n")
	w("- Before `ipc.hello` the server answers only the methods of scope `none`; others get `HandshakeRequired` (%d). A request without `id` is a notification: no answer, errors dropped.\n\n", codeOf(p, "HandshakeRequired"))

	w("## Scopes\n\n| scope | includes | meaning |\n|---|---|---|\n")
	for _, s := range p.Scopes {
		w("| `%s` | %s | %s |\n", s.Name, codeList(s.Includes), s.Description)
	}
	w("\n## Methods\n\n")
	for _, g := range p.Groups {
		if len(g.Methods) == 0 {
			continue
		}
		w("### %s\n\n%s\n\n", g.Name, g.Description)
		w("| method | scope | since | summary |\n|---|---|---|---|\n")
		for _, m := range g.Methods {
			w("| [`%s`](#%s) | `%s` | %d | %s |\n", m.Name, anchor(m.Name), m.Scope, m.Since, m.Summary)
		}
		w("\n")
		for _, m := range g.Methods {
			w("#### %s\n\n", m.Name)
			if m.Deprecated != "" {
				w("> **Deprecated:** %s\n\n", m.Deprecated)
			}
			if m.Experimental {
				w("> **Experimental:** may change without a version bump.\n\n")
			}
			w("%s", m.Summary)
			if m.Description != "" {
				w(" %s", m.Description)
			}
			w("\n\nScope `%s` · since %d", m.Scope, m.Since)
			if m.Audited {
				w(" · audited (every call is in `audit.list`, with %s)", auditedParams(m.AuditParams))
			}
			if m.Resource != "" {
				w(" · takes a per-connection `%s` (bounded: docs/security.md \"Limits\")", m.Resource)
			}
			w("\n\n")
			w("**Params** (`%s`)\n\n", refOrName(m.Params))
			fieldTable(&b, p, m.Params)
			w("**Result** (`%s`)\n\n", refOrName(m.Result))
			fieldTable(&b, p, m.Result)
			if len(m.Errors) > 0 {
				var es []string
				for _, e := range m.Errors {
					es = append(es, fmt.Sprintf("`%s` (%d)", e.Name, e.Code))
				}
				w("**Errors:** %s\n\n", strings.Join(es, ", "))
			}
		}
	}
	w("## Signals\n\nThe server pushes `ipc.signal` notifications whose params are the signal, `kind` first. Each signal reaches only connections whose token scope is, or includes, one of its **scopes**, and of those the ones its **delivery** names: `all` (every one), `origin` (only the connection that started the work), `others` (every one but the connection that caused it), `watchers` (only connections that watch the signal's subject). A **sequenced** signal (a session signal delivered to `all`, not ephemeral) also carries `$seq`, its number in that session (from 1, without gaps, within one server process; `signalEpoch` in the hello result names the process), and enters the replay log of `sessions.resume`; the others carry no `$seq`.\n\n")
	w("| kind | session | scopes | delivery | $seq | since | summary |\n|---|---|---|---|---|---|---|\n")
	for _, s := range p.Signals {
		seq := yesNo(s.Sequenced())
		if s.Ephemeral {
			seq += " (ephemeral)"
		}
		w("| [`%s`](#%s) | %s | %s | %s | %s | %d | %s |\n", s.Kind, anchor("signal "+s.Kind), yesNo(s.Session), strings.Join(s.Scopes, ", "), s.Delivery, seq, s.Since, s.Summary)
	}
	w("\n")
	for _, s := range p.Signals {
		w("### signal %s\n\n%s", s.Kind, s.Summary)
		if s.Description != "" {
			w(" %s", s.Description)
		}
		w("\n\n")
		fieldTable(&b, p, s.Type)
	}
	if p.HTTP != nil {
		mdSSE(&b, p)
	}
	w("## Types\n\n")
	for _, name := range sortedKeys(p.Types) {
		t := p.Types[name]
		if t.IsSignal || strings.HasSuffix(name, "Params") || strings.HasSuffix(name, "Result") {
			continue
		}
		w("### %s\n\n", name)
		if t.Description != "" {
			w("%s\n\n", t.Description)
		}
		switch t.K {
		case kObject:
			if t.Kind != "" {
				w("Kind `%s`.\n\n", t.Kind)
			}
			fieldTable(&b, p, t)
		case kEnum:
			var vs []string
			for _, e := range t.Enum {
				v := "`" + e.Value + "`"
				if e.Since != t.Since {
					v += fmt.Sprintf(" (since %d)", e.Since)
				}
				vs = append(vs, v)
			}
			w("One of %s. Open: readers accept values they do not know.\n\n", strings.Join(vs, ", "))
		case kUnion:
			w("| kind | type |\n|---|---|\n")
			for _, v := range t.Variants {
				w("| `%s` | [%s](#%s) |\n", p.Types[v].Kind, v, strings.ToLower(v))
			}
			w("\n")
		}
	}
	w("## Errors\n\nErrors are JSON-RPC error objects. The `id` is the request's, or null when it could not be read.\n\n")
	w("| code | name | message | since | meaning |\n|---|---|---|---|---|\n")
	for _, e := range p.Errors {
		data := ""
		if e.Data != nil {
			data = fmt.Sprintf(" `data`: [%s](#%s).", e.Data.Name, strings.ToLower(e.Data.Name))
		}
		w("| %d | `%s` | %s | %d | %s%s |\n", e.Code, e.Name, e.Message, e.Since, e.Description, data)
	}
	w("\n")
	return []byte(b.String())
}

func codeOf(p *Protocol, name string) int {
	for _, e := range p.Errors {
		if e.Name == name {
			return e.Code
		}
	}
	return 0
}

func codeList(xs []string) string {
	if len(xs) == 0 {
		return "—"
	}
	var out []string
	for _, x := range xs {
		out = append(out, "`"+x+"`")
	}
	return strings.Join(out, ", ")
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func anchor(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteRune('-')
		}
	}
	return b.String()
}

func mdType(p *Protocol, t *Type) string {
	s := ""
	switch t.K {
	case kRef:
		s = fmt.Sprintf("[%s](#%s)", t.Ref, strings.ToLower(t.Ref))
	case kArray:
		s = mdType(p, t.Items) + "[]"
	case kMap:
		s = "map of " + mdType(p, t.Items)
	case kObject, kEnum, kUnion:
		s = fmt.Sprintf("[%s](#%s)", t.Name, strings.ToLower(t.Name))
	case kAny:
		s = "any JSON"
	case kInt:
		s = "integer (" + t.Format + ")"
	case kNumber:
		s = "number"
	case kBool:
		s = "boolean"
	default:
		s = "string"
		if t.Const != "" {
			s = fmt.Sprintf("`%q`", t.Const)
		} else if t.Format != "" {
			s += " (" + t.Format + ")"
		}
	}
	if t.Nullable {
		s += " \\| null"
	}
	return s
}

func fieldTable(b *strings.Builder, p *Protocol, t *Type) {
	tt := t
	for i := 0; tt != nil && tt.K == kRef && i < 10; i++ {
		tt = p.Types[tt.Ref]
	}
	if tt == nil || tt.K != kObject {
		fmt.Fprintf(b, "%s.\n\n", mdType(p, t))
		return
	}
	if t.K == kRef {
		fmt.Fprintf(b, "See [%s](#%s).\n\n", t.Ref, strings.ToLower(t.Ref))
		return
	}
	if len(tt.Props) == 0 {
		b.WriteString("No members: send `{}`.\n\n")
		return
	}
	b.WriteString("| name | type | required | since | description |\n|---|---|---|---|---|\n")
	for _, pr := range tt.Props {
		d := strings.ReplaceAll(pr.T.Description, "|", "\\|")
		if pr.T.Deprecated != "" {
			d += " **Deprecated:** " + pr.T.Deprecated
		}
		since := ""
		if pr.T.Since > 0 {
			since = fmt.Sprint(pr.T.Since)
		}
		fmt.Fprintf(b, "| `%s` | %s | %s | %s | %s |\n", pr.Name, mdType(p, pr.T), yesNo(pr.Required), since, d)
	}
	b.WriteString("\n")
}

// auditedParams names the params an audit entry records, for the reference.
func auditedParams(ps []string) string {
	if len(ps) == 0 {
		return "no params"
	}
	q := make([]string, len(ps))
	for i, p := range ps {
		q[i] = "`" + p + "`"
	}
	return strings.Join(q, ", ")
}
