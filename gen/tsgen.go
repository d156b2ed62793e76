package main

import (
	"fmt"
	"strings"
)

// TSFile renders sdk-ts/src/protocol.ts: type-only bindings with no imports.
func TSFile(p *Protocol) []byte {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("// %s\n// Schema hash: %s\n\n", headerLine, p.Hash)
	w("/* eslint-disable */\n\n")
	w("/** The newest protocol version this build speaks. */\nexport const PROTOCOL_VERSION = %d as const\n\n", p.Version)
	w("/** The oldest protocol version this build speaks. */\nexport const MIN_PROTOCOL_VERSION = %d as const\n\n", p.MinVersion)
	w("/** SHA-256 of the schema files these bindings were generated from. */\nexport const SCHEMA_HASH = %q as const\n\n", p.Hash)

	w("/** A token's scope, or the scope a method needs. */\nexport type Scope =")
	for _, s := range p.Scopes {
		w(" | %q", s.Name)
	}
	w("\n\n")

	for _, name := range sortedKeys(p.Types) {
		t := p.Types[name]
		switch t.K {
		case kObject:
			tsDoc(&b, "", t.Description, t.Since, t.Deprecated, t.Experimental)
			w("export interface %s {\n", t.Name)
			if len(t.Props) == 0 {
				w("  [key: string]: never\n") // an empty interface would accept any non-null value
			}
			for _, pr := range t.Props {
				d := pr.T.Description
				tsDoc(&b, "  ", d, pr.T.Since, pr.T.Deprecated, pr.T.Experimental)
				typ := tsType(p, pr.T)
				if pr.T.Const != "" {
					typ = fmt.Sprintf("%q", pr.T.Const)
				}
				if pr.T.Nullable {
					typ += " | null"
				}
				opt := ""
				if !pr.Required {
					opt = "?"
				}
				w("  %s%s: %s\n", tsKey(pr.Name), opt, typ)
			}
			w("}\n\n")
		case kEnum:
			tsDoc(&b, "", t.Description+" Open: an unknown value may arrive; known values are listed.", t.Since, t.Deprecated, t.Experimental)
			var vals []string
			for _, ev := range t.Enum {
				vals = append(vals, fmt.Sprintf("%q", ev.Value))
			}
			w("export type %s = %s | (string & {})\n\n", t.Name, strings.Join(vals, " | "))
			var sinces []string
			for _, ev := range t.Enum {
				sinces = append(sinces, fmt.Sprintf("%s since %d", ev.Value, ev.Since))
			}
			w("/** The values of %s this build knows (%s). */\nexport const %sValues = [%s] as const\n\n", t.Name, strings.Join(sinces, ", "), t.Name, strings.Join(vals, ", "))
		case kUnion:
			tsDoc(&b, "", t.Description+" Discriminated on kind; readers ignore kinds they do not know.", t.Since, t.Deprecated, t.Experimental)
			w("export type %s =\n", t.Name)
			for _, v := range t.Variants {
				w("  | %s\n", v)
			}
			if len(t.Variants) == 0 {
				w("  never\n")
			}
			w("\n")
		}
	}

	// Methods.
	w("/** Every method: its params and result types. */\nexport interface MethodMap {\n")
	for _, m := range p.Methods {
		tsDoc(&b, "  ", fmt.Sprintf("%s Scope: %s.", methodDoc(m), m.Scope), m.Since, m.Deprecated, m.Experimental)
		w("  %q: { params: %s; result: %s }\n", m.Name, refOrName(m.Params), refOrName(m.Result))
	}
	w("}\n\n")
	w("/** A method's wire name. */\nexport type Method = keyof MethodMap\n\n")
	w("/** The scope each method needs. */\nexport type MethodScopes = {\n")
	for _, m := range p.Methods {
		w("  %q: %q\n", m.Name, m.Scope)
	}
	w("}\n\n")

	// Signals.
	w("/** Every signal kind and its type. */\nexport interface SignalMap {\n")
	for _, s := range p.Signals {
		w("  %q: %s\n", s.Kind, s.Type.Name)
	}
	w("}\n\n")
	w("/** A signal's kind. */\nexport type SignalKind = keyof SignalMap\n\n")
	w("/** Every signal kind this build knows, at run time: a reader skips a signal whose kind is not here. */\nexport const SIGNAL_KINDS: readonly SignalKind[] = [")
	for i, s := range p.Signals {
		if i > 0 {
			w(", ")
		}
		w("%q", s.Kind)
	}
	w("]\n\n")
	kinds := func(doc string, keep func(*Signal) bool) {
		w("%s =", doc)
		n := 0
		for _, s := range p.Signals {
			if keep(s) {
				w(" | %q", s.Kind)
				n++
			}
		}
		if n == 0 {
			w(" never")
		}
		w("\n\n")
	}
	kinds("/** The kinds of session signals: they carry sessionId. */\nexport type SessionSignalKind", func(s *Signal) bool { return s.Session })
	kinds("/** The kinds of sequenced signals (session signals delivered to all, not ephemeral): they carry $seq on the wire and enter the replay log. */\nexport type SequencedSignalKind", (*Signal).Sequenced)
	w("/** A signal as it arrives in ipc.signal params: sequenced signals carry $seq, their number in the session (from 1, without gaps, within one server process). */\n")
	w("export type WireSignal = Signal & { $seq?: number }\n\n")

	// JSON-RPC envelopes.
	w("/** A JSON-RPC request id. */\nexport type RequestId = string | number | null\n\n")
	w("/** A JSON-RPC 2.0 request for method M. */\nexport interface Request<M extends Method = Method> {\n  jsonrpc: \"2.0\"\n  id: RequestId\n  method: M\n  params: MethodMap[M][\"params\"]\n}\n\n")
	w("/** A JSON-RPC 2.0 notification (no id: never answered). */\nexport interface Notification<M extends Method = Method> {\n  jsonrpc: \"2.0\"\n  method: M\n  params: MethodMap[M][\"params\"]\n}\n\n")
	w("/** A JSON-RPC 2.0 error object. */\nexport interface RpcError<C extends number = number> {\n  code: C\n  message: string\n  data?: C extends keyof ErrorDataMap ? ErrorDataMap[C] : unknown\n}\n\n")
	w("/** A successful answer to method M. */\nexport interface SuccessResponse<M extends Method = Method> {\n  jsonrpc: \"2.0\"\n  id: RequestId\n  result: MethodMap[M][\"result\"]\n}\n\n")
	w("/** A failed answer; id is null when the request's id could not be read. */\nexport interface ErrorResponse {\n  jsonrpc: \"2.0\"\n  id: RequestId\n  error: RpcError\n}\n\n")
	w("/** The answer to a request for method M. */\nexport type Response<M extends Method = Method> = SuccessResponse<M> | ErrorResponse\n\n")
	w("/** The ipc.signal notification the server pushes. */\nexport interface SignalNotification {\n  jsonrpc: \"2.0\"\n  method: \"ipc.signal\"\n  params: WireSignal\n}\n\n")

	// Errors.
	w("/** The error codes of the errors registry. */\nexport const ErrorCode = {\n")
	for _, e := range p.Errors {
		tsDoc(&b, "  ", e.Description, e.Since, e.Deprecated, false)
		w("  %s: %d,\n", e.Name, e.Code)
	}
	w("} as const\n\n")
	w("/** An error code of the registry; other codes may arrive from newer servers. */\nexport type ErrorCode = (typeof ErrorCode)[keyof typeof ErrorCode]\n\n")
	w("/** The data member each error code carries. */\nexport interface ErrorDataMap {\n")
	for _, e := range p.Errors {
		if e.Data != nil {
			w("  [ErrorCode.%s]: %s\n", e.Name, e.Data.Name)
		}
	}
	w("}\n")
	if p.HTTP != nil {
		tsSSE(&b, p)
	}
	return []byte(b.String())
}

func refOrName(t *Type) string {
	if t.K == kRef {
		return t.Ref
	}
	return t.Name
}

func tsKey(k string) string {
	for i, r := range k {
		if !(r == '_' || r == '$' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || i > 0 && r >= '0' && r <= '9') {
			return fmt.Sprintf("%q", k)
		}
	}
	return k
}

func tsType(p *Protocol, t *Type) string {
	switch t.K {
	case kString:
		return "string"
	case kInt, kNumber:
		return "number"
	case kBool:
		return "boolean"
	case kArray:
		it := tsType(p, t.Items)
		if strings.Contains(it, " ") {
			return "Array<" + it + ">"
		}
		return it + "[]"
	case kMap:
		return "{ [key: string]: " + tsType(p, t.Items) + " }"
	case kAny:
		return "unknown"
	case kRef:
		return t.Ref
	default:
		return t.Name
	}
}

func tsDoc(b *strings.Builder, indent, desc string, since int, deprecated string, experimental bool) {
	var lines []string
	if d := strings.TrimSpace(desc); d != "" {
		lines = append(lines, wrap(strings.ReplaceAll(d, "*/", "* /"))...)
	}
	if since > 0 {
		lines = append(lines, fmt.Sprintf("@since %d", since))
	}
	if experimental {
		lines = append(lines, "@experimental")
	}
	if deprecated != "" {
		lines = append(lines, "@deprecated "+deprecated)
	}
	if len(lines) == 0 {
		return
	}
	b.WriteString(indent + "/**\n")
	for _, l := range lines {
		b.WriteString(indent + " * " + l + "\n")
	}
	b.WriteString(indent + " */\n")
}
