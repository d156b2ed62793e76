package mcp

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// ToolPrefix starts every MCP tool's and prompt's name as the agent sees it.
const ToolPrefix = "mcp__"

// maxToolName is the longest tool name providers accept.
const maxToolName = 64

// ToolName is the agent's name for an MCP server's tool or prompt (issue 23 item 2):
// mcp__<server>__<tool>, every character outside [A-Za-z0-9_-] replaced by "_"; a name over 64
// characters keeps its first 55, then "_" and the first 8 hex digits of the SHA-256 of the full
// (sanitized) name. Other clients and tests rely on this exact rule.
func ToolName(server, tool string) string {
	full := sanitize(ToolPrefix + server + "__" + tool)
	if len(full) <= maxToolName {
		return full
	}
	sum := sha256.Sum256([]byte(full))
	return full[:55] + "_" + hex.EncodeToString(sum[:])[:8]
}

func sanitize(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	return b.String()
}
