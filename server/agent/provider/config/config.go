// Package config builds the server's model providers from operator settings only: the
// environment, flags and an optional JSON config file (default <data-dir>/config.json, or
// --config). Nothing here is writable over the protocol, so a token cannot point a provider at an
// address of its choosing and collect its key (issue 8, "Configuration").
//
// The file (every field optional; unknown fields are errors):
//
//	{
//	  "default": "local/qwen2.5-coder",              // the default model, provider/model
//	  "providers": [
//	    {"name": "local", "kind": "openai", "baseUrl": "http://127.0.0.1:8080/v1",
//	     "models": [{"name": "qwen2.5-coder", "contextWindow": 32768}]},
//	    {"name": "openai", "kind": "openai", "keyEnv": "OPENAI_API_KEY",
//	     "models": [{"name": "gpt-4.1", "contextWindow": 1047576}]},
//	    {"name": "claude", "kind": "anthropic", "keyEnv": "WORK_CLAUDE_KEY", "maxTokens": 16384,
//	     "models": [{"name": "claude-sonnet-4-5", "contextWindow": 200000}]},
//	    {"name": "demo", "kind": "scripted", "script": "demo-script.json"}
//	  ],
//	  "systemPrompt": "…replaces the built-in system prompt…",
//	  "limits": {"maxTurns": 50, "maxWallTime": "30m", "maxOutputTokens": 8192, "maxConcurrentRuns": 8}
//	}
//
// A provider names the environment variable that holds its key ("keyEnv"), never the key: keys
// stay in the environment and never reach the file, logs, errors, clients or the database. Without
// "keyEnv", a provider with no "baseUrl" (the vendor's own API) reads OPENAI_API_KEY or
// ANTHROPIC_API_KEY, and one with a "baseUrl" (a local server) sends no key.
//
// From the environment alone: OPENAI_API_KEY or OPENAI_BASE_URL adds provider "openai";
// ANTHROPIC_API_KEY or ANTHROPIC_BASE_URL adds "anthropic" (a file entry of the same name wins).
// The "scripted" provider is always there, and is the default when no model is chosen.
package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/zidane-server/zidane/protocol"
	"github.com/zidane-server/zidane/server/agent/provider"
	"github.com/zidane-server/zidane/server/agent/provider/anthropic"
	"github.com/zidane-server/zidane/server/agent/provider/openai"
	"github.com/zidane-server/zidane/server/agent/provider/scripted"
)

// FileName is the config file's name in the data dir.
const FileName = "config.json"

// The provider kinds.
const (
	KindOpenAI    = "openai"
	KindAnthropic = "anthropic"
	KindScripted  = "scripted"
)

// File is the config file.
type File struct {
	// Default is the default model, "provider/model".
	Default string `json:"default,omitempty"`
	// Providers are the configured endpoints.
	Providers []ProviderConfig `json:"providers,omitempty"`
	// SystemPrompt replaces the built-in system prompt (AGENTS.md files still follow it).
	SystemPrompt string `json:"systemPrompt,omitempty"`
	// Limits are the per-run limits; zero fields keep the runtime's defaults.
	Limits Limits `json:"limits,omitzero"`
}

// ProviderConfig is one endpoint.
type ProviderConfig struct {
	// Name is the provider part of model ids: letters, digits, '-', '_' and '.'.
	Name string `json:"name"`
	// Kind is "openai" (any Chat Completions endpoint), "anthropic" or "scripted".
	Kind string `json:"kind"`
	// BaseURL is the API root: for openai including /v1, for anthropic without it.
	BaseURL string `json:"baseUrl,omitempty"`
	// KeyEnv names the environment variable holding the key (never the key itself).
	KeyEnv string `json:"keyEnv,omitempty"`
	// Models are the provider's models with their context windows (tokens).
	Models []ModelConfig `json:"models,omitempty"`
	// MaxTokens is anthropic's max_tokens when a run sets none.
	MaxTokens int `json:"maxTokens,omitempty"`
	// Script is a scripted provider's script file (relative to the config file).
	Script string `json:"script,omitempty"`
}

// ModelConfig is a configured model.
type ModelConfig struct {
	Name          string `json:"name"`
	ContextWindow int    `json:"contextWindow,omitempty"`
}

// Limits are the per-run limits of the config file.
type Limits struct {
	MaxTurns          int      `json:"maxTurns,omitempty"`
	MaxWallTime       Duration `json:"maxWallTime,omitempty"`
	MaxOutputTokens   int      `json:"maxOutputTokens,omitempty"`
	MaxConcurrentRuns int      `json:"maxConcurrentRuns,omitempty"`
	// MaxTurnBytes bounds the bytes one model turn may send (agent.Limits.MaxTurnBytes).
	MaxTurnBytes int `json:"maxTurnBytes,omitempty"`
}

// check refuses a negative limit: left out (or 0) means the default, and a negative one is a
// mistake the server would otherwise have silently replaced by it.
func (l Limits) check() error {
	for _, f := range []struct {
		name string
		v    int64
	}{{"maxTurns", int64(l.MaxTurns)}, {"maxWallTime", int64(l.MaxWallTime)}, {"maxOutputTokens", int64(l.MaxOutputTokens)}, {"maxConcurrentRuns", int64(l.MaxConcurrentRuns)}, {"maxTurnBytes", int64(l.MaxTurnBytes)}} {
		if f.v < 0 {
			return fmt.Errorf("limits.%s is negative; give a positive value, or leave it out for the default", f.name)
		}
	}
	return nil
}

// Duration is a time.Duration written as "30m" in JSON.
type Duration = scripted.Duration

// Options are the inputs besides the file.
type Options struct {
	// Path is --config; "" reads <DataDir>/config.json when it exists.
	Path string
	// DataDir is the server's data dir.
	DataDir string
	// Model is --model, the default model; it wins over the file's.
	Model string
	// StepDelay slows the scripted providers (tests and demos).
	StepDelay time.Duration
	// LookupEnv reads the environment; default os.LookupEnv.
	LookupEnv func(string) (string, bool)
	// HTTPClient, when set, is used by every provider (tests).
	HTTPClient *http.Client
}

// Setup is what the server needs from the configuration.
type Setup struct {
	// Providers are the providers, file order, then the environment's, then "scripted".
	Providers []provider.Provider
	// Default is the default model id.
	Default string
	// Windows are the configured context windows by model id.
	Windows map[string]int
	// SystemPrompt is the operator's override ("" for the built-in one).
	SystemPrompt string
	// Limits are the file's per-run limits.
	Limits Limits
	// KeyEnvs are the environment variables that hold provider keys (for scrubbing child
	// environments and for tests).
	KeyEnvs []string
	// Path is the config file read, "" when none.
	Path string
	// Summary describes each provider for the log: name, kind, base URL, key variable and
	// whether it is set; never a key.
	Summary []string
	// Warnings are settings that will not work as they are (e.g. a key variable that is unset).
	Warnings []string
}

// Load reads and checks a config file.
func Load(path string) (*File, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return Parse(b, path)
}

// lineCol is ":LINE:COL" (1-based, columns in bytes) of a JSON syntax or type error in b, or ""
// for an error without an offset.
func lineCol(b []byte, err error) string {
	var off int64
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		off = se.Offset
	case errors.As(err, &te):
		off = te.Offset
	case errors.Is(err, io.ErrUnexpectedEOF):
		off = int64(len(b))
	default:
		return ""
	}
	off = min(max(off, 1), int64(len(b)))
	before := b[:off]
	line := bytes.Count(before, []byte("\n")) + 1
	col := len(before) - (bytes.LastIndexByte(before, '\n') + 1)
	return fmt.Sprintf(":%d:%d", line, col)
}

// Parse reads and checks a config file's content; path names it in errors.
func Parse(b []byte, path string) (*File, error) {
	var probe struct {
		Providers []map[string]json.RawMessage `json:"providers"`
	}
	if json.Unmarshal(b, &probe) == nil {
		for i, p := range probe.Providers {
			for _, k := range []string{"apiKey", "key", "api_key", "token"} {
				if _, ok := p[k]; ok {
					return nil, fmt.Errorf("config %s: providers[%d] has %q: keys do not go in the config file; put the key in an environment variable and name it in \"keyEnv\"", path, i, k)
				}
			}
		}
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var f File
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("config %s%s: %s", path, lineCol(b, err), protocol.DecodeErrorText("the file", err))
	}
	if err := f.Limits.check(); err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	seen := map[string]bool{}
	for i, p := range f.Providers {
		where := fmt.Sprintf("config %s: providers[%d]", path, i)
		if !validName(p.Name) {
			return nil, fmt.Errorf("%s: name %q must be letters, digits, '-', '_' or '.'", where, p.Name)
		}
		if seen[p.Name] {
			return nil, fmt.Errorf("%s: two providers are named %q", where, p.Name)
		}
		seen[p.Name] = true
		switch p.Kind {
		case KindOpenAI, KindAnthropic, KindScripted:
		default:
			return nil, fmt.Errorf("%s (%s): kind %q is not openai, anthropic or scripted", where, p.Name, p.Kind)
		}
		if p.BaseURL != "" {
			if u, err := url.Parse(p.BaseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return nil, fmt.Errorf("%s (%s): baseUrl %q is not an http(s) URL", where, p.Name, p.BaseURL)
			}
		}
		if p.KeyEnv != "" && !validEnv(p.KeyEnv) {
			return nil, fmt.Errorf("%s (%s): keyEnv %q is not an environment variable name (it names the variable that holds the key, not the key)", where, p.Name, p.KeyEnv)
		}
		for j, m := range p.Models {
			if m.Name == "" || m.ContextWindow < 0 {
				return nil, fmt.Errorf("%s (%s): models[%d] needs a name and a context window ≥ 0", where, p.Name, j)
			}
		}
	}
	if f.Default != "" {
		if _, _, ok := splitID(f.Default); !ok {
			return nil, fmt.Errorf("config %s: default %q is not of the form provider/model", path, f.Default)
		}
	}
	return &f, nil
}

// Build reads the file (if any) and the environment and returns the providers.
func Build(opts Options) (*Setup, error) {
	lookup := opts.LookupEnv
	if lookup == nil {
		lookup = os.LookupEnv
	}
	env := func(k string) string { v, _ := lookup(k); return strings.TrimSpace(v) }
	s := &Setup{Windows: map[string]int{}}
	f := &File{}
	path := opts.Path
	if path == "" && opts.DataDir != "" {
		if p := filepath.Join(opts.DataDir, FileName); exists(p) {
			path = p
		}
	}
	if path != "" {
		var err error
		if f, err = Load(path); err != nil {
			return nil, err
		}
		s.Path = path
	}
	s.SystemPrompt, s.Limits = f.SystemPrompt, f.Limits

	pcs := append([]ProviderConfig(nil), f.Providers...)
	has := func(name string) bool {
		for _, p := range pcs {
			if p.Name == name {
				return true
			}
		}
		return false
	}
	if !has("openai") && (env("OPENAI_API_KEY") != "" || env("OPENAI_BASE_URL") != "") {
		pcs = append(pcs, ProviderConfig{Name: "openai", Kind: KindOpenAI, BaseURL: env("OPENAI_BASE_URL"), KeyEnv: openai.DefaultKeyEnv})
	}
	if !has("anthropic") && (env("ANTHROPIC_API_KEY") != "" || env("ANTHROPIC_BASE_URL") != "") {
		pcs = append(pcs, ProviderConfig{Name: "anthropic", Kind: KindAnthropic, BaseURL: env("ANTHROPIC_BASE_URL"), KeyEnv: anthropic.DefaultKeyEnv})
	}
	if !has("scripted") {
		pcs = append(pcs, ProviderConfig{Name: "scripted", Kind: KindScripted})
	}

	for _, pc := range pcs {
		keyEnv := pc.KeyEnv
		if keyEnv == "" && pc.BaseURL == "" {
			switch pc.Kind {
			case KindOpenAI:
				keyEnv = openai.DefaultKeyEnv
			case KindAnthropic:
				keyEnv = anthropic.DefaultKeyEnv
			}
		}
		key := provider.NewSecret("")
		if keyEnv != "" {
			key = provider.NewSecret(env(keyEnv))
			s.KeyEnvs = appendOnce(s.KeyEnvs, keyEnv)
			// An unset key is always said as a warning; a local server (Ollama, llama.cpp, vLLM
			// on this host) usually needs none, so there it says the requests go without one.
			switch {
			case !key.IsSet() && loopbackURL(pc.BaseURL):
				s.Warnings = append(s.Warnings, fmt.Sprintf("provider %q: %s is not set; its requests to %s go without a key (fine for a local server that needs none)", pc.Name, keyEnv, pc.BaseURL))
			case !key.IsSet():
				s.Warnings = append(s.Warnings, fmt.Sprintf("provider %q: %s is not set; its requests will fail until it is", pc.Name, keyEnv))
			}
		}
		var models []provider.Model
		for _, m := range pc.Models {
			models = append(models, provider.Model{Name: m.Name, ContextWindow: m.ContextWindow})
			if m.ContextWindow > 0 {
				s.Windows[pc.Name+"/"+m.Name] = m.ContextWindow
			}
		}
		var p provider.Provider
		switch pc.Kind {
		case KindOpenAI:
			p = openai.New(openai.Config{Name: pc.Name, BaseURL: pc.BaseURL, APIKey: key, KeyEnv: keyEnv, Models: models, HTTPClient: opts.HTTPClient})
		case KindAnthropic:
			p = anthropic.New(anthropic.Config{Name: pc.Name, BaseURL: pc.BaseURL, APIKey: key, KeyEnv: keyEnv, Models: models, MaxTokens: pc.MaxTokens, HTTPClient: opts.HTTPClient})
		case KindScripted:
			so := scripted.Options{Name: pc.Name, StepDelay: opts.StepDelay}
			if len(pc.Models) > 0 {
				so.ContextWindow = pc.Models[0].ContextWindow
			}
			if pc.Script != "" {
				sp := pc.Script
				if !filepath.IsAbs(sp) && path != "" {
					sp = filepath.Join(filepath.Dir(path), sp)
				}
				sc, err := scripted.Load(sp)
				if err != nil {
					return nil, fmt.Errorf("config: provider %q: %w", pc.Name, err)
				}
				so.Script = sc
			}
			p = scripted.New(so)
		}
		s.Providers = append(s.Providers, p)
		base := pc.BaseURL
		if base == "" {
			base = map[string]string{KindOpenAI: openai.DefaultBaseURL, KindAnthropic: anthropic.DefaultBaseURL, KindScripted: "(offline)"}[pc.Kind]
		}
		line := fmt.Sprintf("%s: %s at %s", pc.Name, pc.Kind, base)
		if keyEnv != "" {
			line += fmt.Sprintf(", key from %s (%s)", keyEnv, map[bool]string{true: "set", false: "not set"}[key.IsSet()])
		}
		s.Summary = append(s.Summary, line)
	}

	s.Default = firstNonEmpty(opts.Model, f.Default)
	if s.Default == "" {
		for _, pc := range pcs { // the first configured model of the first real provider
			if pc.Kind != KindScripted && len(pc.Models) > 0 {
				s.Default = pc.Name + "/" + pc.Models[0].Name
				break
			}
		}
	}
	if s.Default == "" {
		s.Default = "scripted/" + scripted.ModelName
		for _, pc := range pcs {
			if pc.Kind != KindScripted {
				s.Warnings = append(s.Warnings, fmt.Sprintf("provider %q is configured but no default model is chosen: the default stays scripted; pass --model %s/<model>", pc.Name, pc.Name))
				break
			}
		}
	}
	pn, _, ok := splitID(s.Default)
	if !ok {
		return nil, fmt.Errorf("the default model %q is not of the form provider/model (e.g. openai/gpt-4.1)", s.Default)
	}
	if !has(pn) {
		names := make([]string, len(pcs))
		for i, pc := range pcs {
			names[i] = pc.Name
		}
		hint := fmt.Sprintf("; add a provider named %q to the config file (docs/providers.md)", pn)
		switch pn {
		case "openai":
			hint = "; set " + openai.DefaultKeyEnv + " (or OPENAI_BASE_URL for a local OpenAI-compatible server) in the server's environment, or add the provider to the config file (docs/providers.md)"
		case "anthropic":
			hint = "; set " + anthropic.DefaultKeyEnv + " in the server's environment, or add the provider to the config file (docs/providers.md)"
		}
		return nil, fmt.Errorf("the default model %q names no configured provider; the providers are %s%s", s.Default, strings.Join(names, ", "), hint)
	}
	return s, nil
}

// ErrNoProvider is returned by Find for an unknown provider name.
var ErrNoProvider = errors.New("no such provider")

// Find returns the provider named name.
func (s *Setup) Find(name string) (provider.Provider, error) {
	for _, p := range s.Providers {
		if p.Name() == name {
			return p, nil
		}
	}
	return nil, fmt.Errorf("%w: %q", ErrNoProvider, name)
}

func splitID(id string) (string, string, bool) {
	p, m, ok := strings.Cut(id, "/")
	return p, m, ok && p != "" && m != ""
}

func validName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, r := range s {
		if !(r == '-' || r == '_' || r == '.' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return false
		}
	}
	return true
}

func validEnv(s string) bool {
	for i, r := range s {
		if !(r == '_' || r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || i > 0 && r >= '0' && r <= '9') {
			return false
		}
	}
	return s != ""
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func appendOnce(xs []string, x string) []string {
	if slices.Contains(xs, x) {
		return xs
	}
	return append(xs, x)
}

func firstNonEmpty(xs ...string) string {
	for _, x := range xs {
		if x != "" {
			return x
		}
	}
	return ""
}

// loopbackURL reports whether raw is a URL whose host is a loopback name or address.
func loopbackURL(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return false
	}
	h := u.Hostname()
	if h == "localhost" || strings.HasSuffix(h, ".localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}
