package config_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zidane-server/zidane/server/agent/provider"
	"github.com/zidane-server/zidane/server/agent/provider/anthropic"
	"github.com/zidane-server/zidane/server/agent/provider/anthropic/anthropictest"
	"github.com/zidane-server/zidane/server/agent/provider/config"
	"github.com/zidane-server/zidane/server/agent/provider/openai"
	"github.com/zidane-server/zidane/server/agent/provider/openai/openaitest"
	"github.com/zidane-server/zidane/server/agent/provider/providertest"
)

func envOf(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func names(ps []provider.Provider) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.Name())
	}
	return out
}

func TestNothingConfiguredIsScripted(t *testing.T) {
	s, err := config.Build(config.Options{DataDir: t.TempDir(), LookupEnv: envOf(nil)})
	require.NoError(t, err)
	assert.Equal(t, []string{"scripted"}, names(s.Providers))
	assert.Equal(t, "scripted/scripted", s.Default)
	assert.Empty(t, s.Warnings)
	assert.Empty(t, s.Path)
}

func TestEnvironmentAddsOpenAIAndAnthropic(t *testing.T) {
	oa := openaitest.New(t)
	oa.Enqueue(openaitest.Reply("from openai", 3, 2))
	an := anthropictest.New(t)
	an.Enqueue(anthropictest.Reply("from anthropic", 3, 2))
	env := envOf(map[string]string{
		"OPENAI_API_KEY": "sk-env-openai-123456", "OPENAI_BASE_URL": oa.BaseURL(),
		"ANTHROPIC_API_KEY": "sk-ant-env-123456", "ANTHROPIC_BASE_URL": an.URL(),
	})
	s, err := config.Build(config.Options{LookupEnv: env})
	require.NoError(t, err)
	assert.Equal(t, []string{"openai", "anthropic", "scripted"}, names(s.Providers))
	assert.Equal(t, "scripted/scripted", s.Default, "no model chosen: the default stays scripted")
	require.NotEmpty(t, s.Warnings)
	assert.Contains(t, s.Warnings[0], "--model openai/<model>")
	assert.Equal(t, []string{"OPENAI_API_KEY", "ANTHROPIC_API_KEY"}, s.KeyEnvs)

	s, err = config.Build(config.Options{LookupEnv: env, Model: "openai/gpt-x"})
	require.NoError(t, err)
	assert.Equal(t, "openai/gpt-x", s.Default)
	p, err := s.Find("openai")
	require.NoError(t, err)
	o := providertest.Run(p, providertest.Hi("gpt-x"))
	require.NoError(t, o.Err)
	assert.Equal(t, "from openai", o.Text)
	assert.Equal(t, "Bearer sk-env-openai-123456", oa.StreamRequests()[0].Header.Get("Authorization"))
	p, err = s.Find("anthropic")
	require.NoError(t, err)
	o = providertest.Run(p, providertest.Hi("claude-x"))
	require.NoError(t, o.Err)
	assert.Equal(t, "from anthropic", o.Text)

	_, err = config.Build(config.Options{LookupEnv: env, Model: "nope/m"})
	assert.ErrorContains(t, err, "the providers are openai, anthropic, scripted")
	_, err = config.Build(config.Options{LookupEnv: env, Model: "gpt-x"})
	assert.ErrorContains(t, err, "provider/model")
}

func TestConfigFileWithSeveralProviders(t *testing.T) {
	local := openaitest.New(t)
	local.Enqueue(openaitest.Reply("local answer", 1, 1))
	hosted := openaitest.New(t)
	hosted.Enqueue(openaitest.Reply("hosted answer", 1, 1))
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "demo.json"), []byte(`{"turns":[{"steps":[{"text":"scripted by file"}]}]}`), 0o600))
	file := fmt.Sprintf(`{
	  "default": "local/qwen",
	  "providers": [
	    {"name": "local", "kind": "openai", "baseUrl": %q, "models": [{"name": "qwen", "contextWindow": 32768}]},
	    {"name": "hosted", "kind": "openai", "baseUrl": %q, "keyEnv": "MY_LLM_KEY", "models": [{"name": "big", "contextWindow": 128000}]},
	    {"name": "claude", "kind": "anthropic", "keyEnv": "WORK_CLAUDE_KEY", "maxTokens": 16384},
	    {"name": "demo", "kind": "scripted", "script": "demo.json"}
	  ],
	  "systemPrompt": "You are the operator's agent.",
	  "limits": {"maxTurns": 10, "maxWallTime": "5m", "maxOutputTokens": 2048, "maxConcurrentRuns": 2}
	}`, local.BaseURL(), hosted.BaseURL())
	require.NoError(t, os.WriteFile(filepath.Join(dir, config.FileName), []byte(file), 0o600))
	env := envOf(map[string]string{"MY_LLM_KEY": "sk-fake-R26b-000000", "OPENAI_API_KEY": "sk-env-openai-999999"})
	s, err := config.Build(config.Options{DataDir: dir, LookupEnv: env})
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(dir, config.FileName), s.Path, "<data-dir>/config.json is read by default")
	assert.Equal(t, []string{"local", "hosted", "claude", "demo", "openai", "scripted"}, names(s.Providers))
	assert.Equal(t, "local/qwen", s.Default)
	assert.Equal(t, map[string]int{"local/qwen": 32768, "hosted/big": 128000}, s.Windows)
	assert.Equal(t, "You are the operator's agent.", s.SystemPrompt)
	assert.Equal(t, 10, s.Limits.MaxTurns)
	assert.Equal(t, "5m0s", fmt.Sprint(s.Limits.MaxWallTime))
	assert.Contains(t, s.Warnings, `provider "claude": WORK_CLAUDE_KEY is not set; its requests will fail until it is`)

	p, _ := s.Find("local")
	o := providertest.Run(p, providertest.Hi("qwen"))
	require.NoError(t, o.Err)
	assert.Equal(t, "local answer", o.Text)
	assert.Empty(t, local.StreamRequests()[0].Header.Get("Authorization"), "a local endpoint gets no key, not even OPENAI_API_KEY")
	p, _ = s.Find("hosted")
	require.NoError(t, providertest.Run(p, providertest.Hi("big")).Err)
	assert.Equal(t, "Bearer sk-fake-R26b-000000", hosted.StreamRequests()[0].Header.Get("Authorization"))
	p, _ = s.Find("demo")
	assert.Equal(t, "scripted by file", providertest.Run(p, nil).Text)
	ms, err := s.Providers[0].Models(context.Background())
	require.NoError(t, err)
	assert.Equal(t, provider.Model{ID: "local/qwen", Provider: "local", Name: "qwen", ContextWindow: 32768}, ms[0])

	// --config and --model win.
	other := filepath.Join(t.TempDir(), "other.json")
	require.NoError(t, os.WriteFile(other, []byte(`{"default":"scripted/scripted"}`), 0o600))
	s, err = config.Build(config.Options{DataDir: dir, Path: other, LookupEnv: env, Model: "scripted/scripted"})
	require.NoError(t, err)
	assert.Equal(t, other, s.Path)
	assert.Equal(t, []string{"openai", "scripted"}, names(s.Providers))
}

func TestKeysNeverReachLogsErrorsOrOutput(t *testing.T) {
	f := openaitest.New(t)
	const key = "sk-fake-R26-secret-value"
	f.Enqueue(openaitest.Error(401, "invalid_request_error", "Incorrect API key provided: "+key))
	env := envOf(map[string]string{"OPENAI_API_KEY": key, "OPENAI_BASE_URL": f.BaseURL(), "MY_LLM_KEY": key + "b"})
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, config.FileName), []byte(`{"providers":[{"name":"mine","kind":"anthropic","baseUrl":"http://127.0.0.1:1","keyEnv":"MY_LLM_KEY"}]}`), 0o600))
	s, err := config.Build(config.Options{DataDir: dir, LookupEnv: env, Model: "openai/m"})
	require.NoError(t, err)

	var logs bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&logs, nil))
	log.Info("providers", "summary", s.Summary, "setup", s, "providers", s.Providers)
	p, _ := s.Find("openai")
	o := providertest.Run(provider.WithRetry(p, provider.DefaultRetry), providertest.Hi("m"))
	require.Error(t, o.Err)
	log.Error("run failed", "err", o.Err)
	p2, _ := s.Find("mine")
	o2 := providertest.Run(p2, providertest.Hi("m"))
	require.Error(t, o2.Err)
	js, _ := json.Marshal(s)
	for _, text := range []string{logs.String(), o.Err.Error(), o2.Err.Error(), string(js),
		fmt.Sprintf("%v %+v %#v", s, s, s), fmt.Sprintf("%v %+v %#v", s.Providers, s.Providers, s.Providers),
		fmt.Sprintf("%+v %#v", *s.Providers[0].(*anthropic.Provider), *s.Providers[1].(*openai.Provider))} {
		assert.NotContains(t, text, "R26")
	}
	assert.Contains(t, o.Err.Error(), "set OPENAI_API_KEY")
	assert.Contains(t, fmt.Sprint(s.Summary), "key from MY_LLM_KEY (set)")
}

func TestConfigFileErrors(t *testing.T) {
	for name, tc := range map[string]struct{ file, want string }{
		"key in file":    {`{"providers":[{"name":"x","kind":"openai","apiKey":"sk-1"}]}`, `keys do not go in the config file`},
		"unknown field":  {`{"providers":[{"name":"x","kind":"openai","base":"u"}]}`, `unknown field "base"`},
		"bad kind":       {`{"providers":[{"name":"x","kind":"gemini"}]}`, `kind "gemini" is not openai, anthropic or scripted`},
		"bad url":        {`{"providers":[{"name":"x","kind":"openai","baseUrl":"file:///etc"}]}`, `is not an http(s) URL`},
		"key as env":     {`{"providers":[{"name":"x","kind":"openai","keyEnv":"sk-abc-123"}]}`, `not an environment variable name`},
		"bad name":       {`{"providers":[{"name":"a/b","kind":"openai"}]}`, `must be letters, digits`},
		"duplicate":      {`{"providers":[{"name":"a","kind":"openai"},{"name":"a","kind":"scripted"}]}`, `two providers are named "a"`},
		"bad default":    {`{"default":"gpt"}`, `not of the form provider/model`},
		"openai unset":   {`{"default":"openai/gpt-4o"}`, `set OPENAI_API_KEY (or OPENAI_BASE_URL`},
		"unknown name":   {`{"default":"mine/m1"}`, `add a provider named "mine" to the config file (docs/providers.md)`},
		"not json":       {`{`, `config`},
		"negative turns": {`{"limits":{"maxTurns":-1}}`, `limits.maxTurns is negative`},
		"negative time":  {`{"limits":{"maxWallTime":"-5m"}}`, `limits.maxWallTime is negative`},
	} {
		t.Run(name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "c.json")
			require.NoError(t, os.WriteFile(p, []byte(tc.file), 0o600))
			_, err := config.Build(config.Options{Path: p, LookupEnv: envOf(nil)})
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.NotContains(t, err.Error(), "sk-1")
		})
	}
	_, err := config.Build(config.Options{Path: filepath.Join(t.TempDir(), "missing.json"), LookupEnv: envOf(nil)})
	assert.Error(t, err, "an explicit --config must exist")
}

// A local OpenAI-compatible server (Ollama, llama.cpp) usually needs no key: OPENAI_BASE_URL on a
// loopback host without OPENAI_API_KEY works, and the start still warns that the key variable is
// unset (saying requests go without one); a remote one without the key gets the warning that
// its requests will fail.
func TestLocalBaseURLNeedsNoKeyWarning(t *testing.T) {
	f := openaitest.New(t)
	f.Enqueue(openaitest.Reply("local", 1, 1))
	s, err := config.Build(config.Options{LookupEnv: envOf(map[string]string{"OPENAI_BASE_URL": f.BaseURL()}), Model: "openai/llama"})
	require.NoError(t, err)
	assert.Equal(t, []string{fmt.Sprintf(`provider "openai": OPENAI_API_KEY is not set; its requests to %s go without a key (fine for a local server that needs none)`, f.BaseURL())}, s.Warnings)
	p, err := s.Find("openai")
	require.NoError(t, err)
	require.NoError(t, providertest.Run(p, providertest.Hi("llama")).Err)
	assert.Empty(t, f.StreamRequests()[0].Header.Get("Authorization"))

	s, err = config.Build(config.Options{LookupEnv: envOf(map[string]string{"OPENAI_BASE_URL": "https://llm.example.com/v1"}), Model: "openai/big"})
	require.NoError(t, err)
	assert.Contains(t, s.Warnings, `provider "openai": OPENAI_API_KEY is not set; its requests will fail until it is`)
}

// A config file that is not valid JSON is refused naming the line and column of the error, as an
// editor shows them.
func TestConfigSyntaxErrorNamesLineAndColumn(t *testing.T) {
	for _, c := range []struct{ body, at string }{
		{"{\n  \"default\": \"scripted/scripted\",\n  \"providers\": [,]\n}\n", "config.json:3:17: "},
		{"{\n  \"default\": 5\n}\n", "config.json:2:14: "},
		{"{\n  \"default\": \"x\"", "config.json:2:16: "},
	} {
		_, err := config.Parse([]byte(c.body), "config.json")
		require.Error(t, err, c.body)
		assert.Contains(t, err.Error(), c.at, c.body)
	}
}
