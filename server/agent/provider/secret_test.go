package provider

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestSecretNeverPrints(t *testing.T) {
	const key = "sk-secret-0123456789"
	cfg := struct {
		Name   string
		APIKey Secret
	}{"x", NewSecret(key)}
	var logs bytes.Buffer
	slog.New(slog.NewJSONHandler(&logs, nil)).Info("cfg", "cfg", cfg, "key", cfg.APIKey)
	js, _ := json.Marshal(cfg)
	for _, s := range []string{fmt.Sprintf("%v %+v %#v %s %q %x", cfg, cfg, cfg, cfg.APIKey, cfg.APIKey, cfg.APIKey), string(js), logs.String()} {
		assert.NotContains(t, s, "0123456789")
		assert.Contains(t, s, "[redacted]")
	}
	assert.Equal(t, key, cfg.APIKey.Reveal())
	assert.True(t, cfg.APIKey.IsSet())
	assert.False(t, NewSecret("").IsSet())
	assert.Equal(t, "", NewSecret("").String())
}

func TestRedact(t *testing.T) {
	assert.Equal(t, "Incorrect API key provided: [redacted]. See docs.", Redact("Incorrect API key provided: sk-proj-abc***xyz. See docs.", ""))
	assert.Equal(t, "token [redacted] refused", Redact("token abcdef123456 refused", "abcdef123456"))
	assert.Equal(t, "nothing secret here", Redact("nothing secret here", ""))
}
