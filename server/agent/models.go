package agent

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/zidane-server/zidane/server/agent/provider"
)

// Models resolves model ids ("provider/model", the client seed's form) to providers. The
// operator configures it (flags, environment, config file); nothing on the wire can add a
// provider or change its address or key.
type Models interface {
	// Resolve returns the provider and the model for id; "" means DefaultID. An unknown provider
	// or model is an error whose text says which ids exist.
	Resolve(ctx context.Context, id string) (provider.Provider, provider.Model, error)
	// DefaultID is the model a session without one uses.
	DefaultID() string
	// List returns every model of every provider, sorted by id.
	List(ctx context.Context) ([]provider.Model, error)
}

// Registry is a Models over a fixed set of providers. A provider's model list (an
// OpenAI-compatible endpoint's /v1/models) is cached for a minute; a model a provider does not
// list is still accepted for it (endpoints that list nothing, or list only some), with the
// configured context window when its id is in Windows.
type Registry struct {
	providers map[string]provider.Provider
	order     []string
	def       string
	// Windows gives context windows (tokens) by model id, for models the providers do not
	// describe; a provider's own value wins when it has one.
	Windows map[string]int

	mu    sync.Mutex
	cache map[string]cachedModels
	now   func() time.Time
}

type cachedModels struct {
	at     time.Time
	models []provider.Model
}

// modelListTTL is how long a provider's model list is reused.
const modelListTTL = time.Minute

// NewRegistry returns a registry of ps (by Name) whose default is defaultID, which must name one
// of them ("name/model"); "" takes the first provider's first model.
func NewRegistry(ctx context.Context, defaultID string, ps ...provider.Provider) (*Registry, error) {
	if len(ps) == 0 {
		return nil, fmt.Errorf("agent: a model registry needs at least one provider")
	}
	r := &Registry{providers: map[string]provider.Provider{}, cache: map[string]cachedModels{}, now: time.Now}
	for _, p := range ps {
		if _, dup := r.providers[p.Name()]; dup {
			return nil, fmt.Errorf("agent: two providers are named %q", p.Name())
		}
		r.providers[p.Name()] = p
		r.order = append(r.order, p.Name())
	}
	if defaultID == "" {
		ms, err := r.models(ctx, ps[0].Name())
		if err != nil || len(ms) == 0 {
			return nil, fmt.Errorf("agent: provider %q lists no model to use as the default; pass one as provider/model", ps[0].Name())
		}
		defaultID = ms[0].ID
	}
	if _, _, err := splitModelID(defaultID); err != nil {
		return nil, err
	}
	if _, ok := r.providers[strings.SplitN(defaultID, "/", 2)[0]]; !ok {
		return nil, fmt.Errorf("the default model %q names no configured provider; the providers are %s", defaultID, strings.Join(r.order, ", "))
	}
	r.def = defaultID
	return r, nil
}

// DefaultID implements Models.
func (r *Registry) DefaultID() string { return r.def }

func splitModelID(id string) (prov, model string, err error) {
	p, m, ok := strings.Cut(id, "/")
	if !ok || p == "" || m == "" {
		return "", "", fmt.Errorf("model %q is not of the form provider/model (e.g. openai/gpt-4.1)", id)
	}
	return p, m, nil
}

// Resolve implements Models.
func (r *Registry) Resolve(ctx context.Context, id string) (provider.Provider, provider.Model, error) {
	if id == "" {
		id = r.def
	}
	pn, mn, err := splitModelID(id)
	if err != nil {
		return nil, provider.Model{}, err
	}
	p, ok := r.providers[pn]
	if !ok {
		return nil, provider.Model{}, fmt.Errorf("model %q: no provider %q is configured; the providers are %s (models.list shows their models)", id, pn, strings.Join(r.order, ", "))
	}
	m := provider.Model{ID: id, Provider: pn, Name: mn, ContextWindow: r.Windows[id]}
	if ms, err := r.models(ctx, pn); err == nil {
		for _, x := range ms {
			if x.ID == id {
				if x.ContextWindow > 0 {
					m.ContextWindow = x.ContextWindow
				}
				break
			}
		}
	}
	return p, m, nil
}

// List implements Models. A provider whose list fails contributes its default model only.
func (r *Registry) List(ctx context.Context) ([]provider.Model, error) {
	var out []provider.Model
	seen := map[string]bool{}
	for _, pn := range r.order {
		ms, err := r.models(ctx, pn)
		if err != nil {
			continue
		}
		for _, m := range ms {
			if !seen[m.ID] {
				seen[m.ID] = true
				if m.ContextWindow == 0 {
					m.ContextWindow = r.Windows[m.ID]
				}
				out = append(out, m)
			}
		}
	}
	if !seen[r.def] {
		_, m, err := r.Resolve(ctx, r.def)
		if err == nil {
			out = append(out, m)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

func (r *Registry) models(ctx context.Context, pn string) ([]provider.Model, error) {
	r.mu.Lock()
	c, ok := r.cache[pn]
	r.mu.Unlock()
	if ok && r.now().Sub(c.at) < modelListTTL {
		return c.models, nil
	}
	ms, err := r.providers[pn].Models(ctx)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	r.cache[pn] = cachedModels{at: r.now(), models: ms}
	r.mu.Unlock()
	return ms, nil
}
