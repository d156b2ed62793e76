package provider

import (
	"context"
	"sync"
	"time"
)

// ModelList is a provider's model list: the configured models (their context windows win) and
// what the API lists, fetched at most once per TTL. Safe for concurrent use.
type ModelList struct {
	// Provider is the provider's name, the prefix of every ID.
	Provider string
	// Configured are the operator's models; only Name and ContextWindow are read.
	Configured []Model
	// TTL is how long a listing is reused; default one minute.
	TTL time.Duration

	mu     sync.Mutex
	listed []Model
	at     time.Time
}

// Get returns the configured models, then the listed ones not configured. list is called when
// the cache is empty or older than TTL; when it fails, the configured models come back with its
// error.
func (l *ModelList) Get(ctx context.Context, list func(context.Context) ([]Model, error)) ([]Model, error) {
	ttl := l.TTL
	if ttl == 0 {
		ttl = time.Minute
	}
	l.mu.Lock()
	if l.listed != nil && time.Since(l.at) < ttl {
		defer l.mu.Unlock()
		return l.merge(l.listed), nil
	}
	l.mu.Unlock()
	listed, err := list(ctx)
	if err != nil {
		return l.merge(nil), err
	}
	if listed == nil {
		listed = []Model{}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.listed, l.at = listed, time.Now()
	return l.merge(listed), nil
}

func (l *ModelList) merge(listed []Model) []Model {
	out := make([]Model, 0, len(l.Configured)+len(listed))
	seen := map[string]bool{}
	for _, m := range l.Configured {
		out = append(out, Model{ID: l.Provider + "/" + m.Name, Provider: l.Provider, Name: m.Name, ContextWindow: m.ContextWindow})
		seen[m.Name] = true
	}
	for _, m := range listed {
		if !seen[m.Name] {
			out = append(out, Model{ID: l.Provider + "/" + m.Name, Provider: l.Provider, Name: m.Name, ContextWindow: m.ContextWindow})
		}
	}
	return out
}
