package config

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/zidane-server/zidane/server/agent/provider"
	"github.com/zidane-server/zidane/server/agent/provider/anthropic"
	"github.com/zidane-server/zidane/server/agent/provider/openai"
)

// Models is the registry a Stored wraps (agent.Models, declared here so this package need not
// import the agent runtime).
type Models interface {
	Resolve(ctx context.Context, id string) (provider.Provider, provider.Model, error)
	DefaultID() string
	List(ctx context.Context) ([]provider.Model, error)
}

// StoredCredential is a provider's key and base URL from the server's credential store
// (auth.configure, issue 23 §6); Version changes whenever they do (the row's update time).
type StoredCredential struct {
	APIKey  provider.Secret
	BaseURL string
	Version time.Time
}

// StoredLookup reads the stored credential of a provider; ok is false when there is none.
type StoredLookup func(ctx context.Context, name string) (c StoredCredential, ok bool, err error)

// KnownProviders are the providers an admin can set up from a client (auth.configure,
// onboarding.providers) by name and kind: their stored key and base URL win over the
// environment, from the next request on, without a restart.
var KnownProviders = map[string]string{"openai": KindOpenAI, "anthropic": KindAnthropic}

// Stored is a Models whose known providers (KnownProviders) use the credential store: a model
// id naming one with a stored credential resolves to a provider built from it (rebuilt when the
// credential changes); every other id goes to the base registry.
type Stored struct {
	Base   Models
	Lookup StoredLookup
	// HTTPClient is passed to the providers built (tests); nil for the default.
	HTTPClient *http.Client

	mu    sync.Mutex
	built map[string]storedBuilt
}

type storedBuilt struct {
	version time.Time
	p       provider.Provider
}

// provider returns the provider built from name's stored credential, nil when none is stored.
func (s *Stored) provider(ctx context.Context, name string) (provider.Provider, error) {
	kind, known := KnownProviders[name]
	if !known {
		return nil, nil
	}
	c, ok, err := s.Lookup(ctx, name)
	if err != nil || !ok {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if b, ok := s.built[name]; ok && b.version.Equal(c.Version) {
		return b.p, nil
	}
	var p provider.Provider
	switch kind {
	case KindOpenAI:
		p = openai.New(openai.Config{Name: name, BaseURL: c.BaseURL, APIKey: c.APIKey, KeyEnv: "auth.configure", HTTPClient: s.HTTPClient})
	case KindAnthropic:
		p = anthropic.New(anthropic.Config{Name: name, BaseURL: c.BaseURL, APIKey: c.APIKey, KeyEnv: "auth.configure", HTTPClient: s.HTTPClient})
	}
	if s.built == nil {
		s.built = map[string]storedBuilt{}
	}
	s.built[name] = storedBuilt{version: c.Version, p: p}
	return p, nil
}

// Resolve implements Models.
func (s *Stored) Resolve(ctx context.Context, id string) (provider.Provider, provider.Model, error) {
	if id == "" {
		id = s.Base.DefaultID()
	}
	pn, mn, ok := splitID(id)
	if ok {
		p, err := s.provider(ctx, pn)
		if err != nil {
			return nil, provider.Model{}, fmt.Errorf("model %q: the stored credential of provider %q: %w", id, pn, err)
		}
		if p != nil {
			if _, bm, err := s.Base.Resolve(ctx, id); err == nil {
				return p, bm, nil // keep the configured context window
			}
			return p, provider.Model{ID: id, Provider: pn, Name: mn}, nil
		}
	}
	return s.Base.Resolve(ctx, id)
}

// DefaultID implements Models.
func (s *Stored) DefaultID() string { return s.Base.DefaultID() }

// List implements Models: the base's models, and those of each stored provider (listed with a
// short timeout; one that does not answer contributes nothing).
func (s *Stored) List(ctx context.Context) ([]provider.Model, error) {
	out, err := s.Base.List(ctx)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, m := range out {
		seen[m.ID] = true
	}
	for _, name := range []string{"anthropic", "openai"} {
		p, err := s.provider(ctx, name)
		if err != nil || p == nil {
			continue
		}
		lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		ms, err := p.Models(lctx)
		cancel()
		if err != nil {
			continue
		}
		for _, m := range ms {
			if !seen[m.ID] && strings.HasPrefix(m.ID, name+"/") {
				seen[m.ID] = true
				out = append(out, m)
			}
		}
	}
	return out, nil
}
