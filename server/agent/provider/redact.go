package provider

import (
	"regexp"
	"strings"
)

// keyShape matches API-key-like tokens (sk-…, sk-ant-…, key-…), masked or not, as servers echo
// them in authentication errors ("Incorrect API key provided: sk-abc***xyz").
var keyShape = regexp.MustCompile(`\b(sk|key|pk|rk)-[A-Za-z0-9_\-\*]{6,}`)

// Redact removes every secret from a text that may reach logs, errors or clients: each given
// secret wherever it occurs, and anything shaped like an API key.
func Redact(s string, secrets ...string) string {
	for _, k := range secrets {
		if len(k) >= 4 {
			s = strings.ReplaceAll(s, k, "[redacted]")
		}
	}
	return keyShape.ReplaceAllString(s, "[redacted]")
}
