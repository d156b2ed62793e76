package server

import (
	"crypto/sha256"
	"sync"
	"time"

	"github.com/zidane-server/zidane/server/store"
)

// maxCachedTokens bounds the token cache; maxRefusedTokens bounds its refusals.
const (
	maxCachedTokens  = 1024
	maxRefusedTokens = 4096
)

// tokenCache keeps the tokens authenticate verified in the store, so that a client that
// connects again (a reconnect: connect, hello, sessions.resume) is not held up by a Postgres
// round trip per connection; that round trip was most of what the resume figure spent beyond
// writing the answer (docs/benchmarks.md).
//
// What it trusts, and for how long (docs/security.md, "Tokens"):
//   - An entry is keyed by the SHA-256 of the presented token; the plaintext is not kept. Only a
//     token the store verified enters, so an unknown or mistyped token cannot fill the cache.
//   - Refusals are kept apart (at most maxRefusedTokens, each for ttl): a client retrying a
//     revoked or mistyped token in a loop asks the store once per ttl, not once per try. That is
//     safe because no token becomes valid after it was refused: every token is minted by the
//     server (256 random bits, store.CreateToken), so its plaintext cannot be presented before
//     it exists, and a revoked or expired token stays so. A database error is never kept.
//   - At most maxCachedTokens entries, each for at most ttl (Config.TokenRecheck, 30 s by
//     default: no longer than an open connection's token goes unchecked). After that the next
//     connect verifies in the store again, which also records last_used_at (LookupToken writes
//     it at most once a minute, so it stays within ttl of what it was without the cache).
//   - Revocation: tokens.revoke in this process drops the token before it answers, so this
//     process refuses it at once; a revocation elsewhere (the operator's `token revoke`) drops
//     it when its notice arrives, the moment the token's open connections are closed; the
//     periodic re-check covers the cached tokens as it covers the open connections (a lost
//     notice, field case B32). A lookup that was under way while a token was dropped is not
//     cached (gen), so it cannot bring a revoked token back.
type tokenCache struct {
	mu      sync.Mutex
	m       map[[sha256.Size]byte]cachedToken
	refused map[[sha256.Size]byte]time.Time // until when the store's refusal stands
	gen     uint64                          // counts drops
}

// wasRefused reports whether the store refused the token with key within its ttl before now.
func (c *tokenCache) wasRefused(key [sha256.Size]byte, now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	until, ok := c.refused[key]
	if ok && !now.Before(until) {
		delete(c.refused, key)
		return false
	}
	return ok
}

// refuse keeps the store's refusal of the token with key for ttl; a full set sheds its expired
// entries, then arbitrary ones (a flood of random tokens only costs lookups, as without it).
func (c *tokenCache) refuse(key [sha256.Size]byte, now time.Time, ttl time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.refused == nil {
		c.refused = map[[sha256.Size]byte]time.Time{}
	}
	if _, ok := c.refused[key]; !ok {
		makeRoom(c.refused, maxRefusedTokens, func(until time.Time) bool { return !now.Before(until) })
	}
	c.refused[key] = now.Add(ttl)
}

type cachedToken struct {
	tok   store.Token
	until time.Time
}

func tokenKey(plaintext string) [sha256.Size]byte { return sha256.Sum256([]byte(plaintext)) }

// get returns the cached token for key when it has not expired at now.
func (c *tokenCache) get(key [sha256.Size]byte, now time.Time) (store.Token, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[key]
	if !ok {
		return store.Token{}, false
	}
	if !now.Before(e.until) || !e.tok.Live(now) {
		delete(c.m, key)
		return store.Token{}, false
	}
	return e.tok, true
}

// begin is called before a store lookup; put takes what it returns.
func (c *tokenCache) begin() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gen
}

// put caches a token the store verified in a lookup that began at gen, unless a token was
// dropped since. A full cache sheds its expired entries, then an arbitrary one.
func (c *tokenCache) put(key [sha256.Size]byte, tok store.Token, gen uint64, now time.Time, ttl time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if gen != c.gen {
		return
	}
	if c.m == nil {
		c.m = map[[sha256.Size]byte]cachedToken{}
	}
	if _, ok := c.m[key]; !ok {
		makeRoom(c.m, maxCachedTokens, func(e cachedToken) bool { return !now.Before(e.until) })
	}
	c.m[key] = cachedToken{tok: tok, until: now.Add(ttl)}
}

// makeRoom leaves room for one more entry in m, which holds at most max: when full it drops the
// expired entries, then arbitrary ones.
func makeRoom[V any](m map[[sha256.Size]byte]V, max int, expired func(V) bool) {
	if len(m) < max {
		return
	}
	for k, v := range m {
		if expired(v) {
			delete(m, k)
		}
	}
	for k := range m {
		if len(m) < max {
			break
		}
		delete(m, k)
	}
}

// drop forgets the token with id tokenID (revoked), and makes lookups under way uncacheable.
func (c *tokenCache) drop(tokenID string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	for k, e := range c.m {
		if e.tok.ID == tokenID {
			delete(c.m, k)
		}
	}
}

// ids returns the ids of the cached tokens, for the periodic re-check.
func (c *tokenCache) ids() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]string, 0, len(c.m))
	for _, e := range c.m {
		out = append(out, e.tok.ID)
	}
	return out
}
