package kubeletapi

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"sync"
	"time"
)

// Kubelet's defaults for the webhook caches.
const (
	// DefaultTokenCacheTTL is --authentication-token-webhook-cache-ttl.
	DefaultTokenCacheTTL = 2 * time.Minute
	// DefaultAuthorizedCacheTTL is --authorization-webhook-cache-authorized-ttl.
	DefaultAuthorizedCacheTTL = 5 * time.Minute
	// DefaultUnauthorizedCacheTTL is --authorization-webhook-cache-unauthorized-ttl.
	DefaultUnauthorizedCacheTTL = 30 * time.Second
)

// cacheSize bounds each cache; when it is full the expired entries go,
// then, if none had expired, one arbitrary entry.
const cacheSize = 4096

// ttlCache maps a key to a value until a deadline; now is the clock.
type ttlCache[V any] struct {
	mu      sync.Mutex
	now     func() time.Time
	entries map[[32]byte]ttlEntry[V]
}

type ttlEntry[V any] struct {
	v       V
	expires time.Time
}

func newTTLCache[V any](now func() time.Time) *ttlCache[V] {
	if now == nil {
		now = time.Now
	}
	return &ttlCache[V]{now: now, entries: map[[32]byte]ttlEntry[V]{}}
}

func (c *ttlCache[V]) get(k [32]byte) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[k]
	if !ok || !c.now().Before(e.expires) {
		var zero V
		return zero, false
	}
	return e.v, true
}

func (c *ttlCache[V]) put(k [32]byte, v V, ttl time.Duration) {
	if ttl <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if len(c.entries) >= cacheSize {
		for k, e := range c.entries {
			if !now.Before(e.expires) {
				delete(c.entries, k)
			}
		}
		for k := range c.entries {
			if len(c.entries) < cacheSize {
				break
			}
			delete(c.entries, k)
		}
	}
	c.entries[k] = ttlEntry[V]{v: v, expires: now.Add(ttl)}
}

// CachedTokens caches a TokenReviewer's answers, valid and invalid alike,
// for TTL (kubelet's --authentication-token-webhook-cache-ttl, 2m): a token
// reviewed less than TTL ago is not reviewed again. Errors are not cached.
// TTL <= 0 caches nothing. Tokens are kept only as their SHA-256.
type CachedTokens struct {
	next  TokenReviewer
	ttl   time.Duration
	cache *ttlCache[tokenAnswer]
}

type tokenAnswer struct {
	u  User
	ok bool
}

// NewCachedTokens caches next's answers for ttl by the clock now (nil:
// time.Now).
func NewCachedTokens(next TokenReviewer, ttl time.Duration, now func() time.Time) *CachedTokens {
	return &CachedTokens{next: next, ttl: ttl, cache: newTTLCache[tokenAnswer](now)}
}

// ReviewToken implements TokenReviewer.
func (c *CachedTokens) ReviewToken(ctx context.Context, token string) (User, bool, error) {
	k := sha256.Sum256([]byte(token))
	if a, ok := c.cache.get(k); ok {
		return a.u, a.ok, nil
	}
	u, ok, err := c.next.ReviewToken(ctx, token)
	if err != nil {
		return u, ok, err
	}
	c.cache.put(k, tokenAnswer{u: u, ok: ok}, c.ttl)
	return u, ok, nil
}

// CachedAuthorizer caches an Authorizer's decisions as kubelet's webhook
// authorizer does: an allowed request for AuthorizedTTL
// (--authorization-webhook-cache-authorized-ttl, 5m), a refused one for
// UnauthorizedTTL (--authorization-webhook-cache-unauthorized-ttl, 30s).
// The key is the whole decision input but the path: the user (name, UID,
// groups, extra), verb, node and subresource. Errors are not cached; a TTL
// <= 0 caches nothing of that kind.
type CachedAuthorizer struct {
	next                           Authorizer
	authorizedTTL, unauthorizedTTL time.Duration
	cache                          *ttlCache[authzAnswer]
}

type authzAnswer struct {
	allowed bool
	reason  string
}

// NewCachedAuthorizer caches next's decisions by the clock now (nil:
// time.Now).
func NewCachedAuthorizer(next Authorizer, authorizedTTL, unauthorizedTTL time.Duration, now func() time.Time) *CachedAuthorizer {
	return &CachedAuthorizer{next: next, authorizedTTL: authorizedTTL, unauthorizedTTL: unauthorizedTTL, cache: newTTLCache[authzAnswer](now)}
}

// Authorize implements Authorizer.
func (c *CachedAuthorizer) Authorize(ctx context.Context, a Attributes) (bool, string, error) {
	key := a
	key.Path = "" // the decision is on nodes/<subresource>, not the path
	b, err := json.Marshal(key)
	if err != nil {
		return c.next.Authorize(ctx, a)
	}
	k := sha256.Sum256(b)
	if d, ok := c.cache.get(k); ok {
		return d.allowed, d.reason, nil
	}
	allowed, reason, err := c.next.Authorize(ctx, a)
	if err != nil {
		return allowed, reason, err
	}
	ttl := c.unauthorizedTTL
	if allowed {
		ttl = c.authorizedTTL
	}
	c.cache.put(k, authzAnswer{allowed: allowed, reason: reason}, ttl)
	return allowed, reason, nil
}
