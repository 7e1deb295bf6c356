package jwtauth

import (
	"crypto/sha256"
	"sync"
	"time"
)

// tokenCache remembers tokens already verified, until their expiry, so that a caller
// presenting the same token again skips the signature check. It holds at most max
// entries, keyed by the token's SHA-256 (so its memory does not grow with token size).
// An entry answers only while the key set it was verified with is still in force.
type tokenCache struct {
	mu      sync.RWMutex
	max     int
	entries map[[sha256.Size]byte]cacheEntry
}

type cacheEntry struct {
	claims   Claims
	deadline time.Time // exp plus the allowed skew
	gen      uint64
}

func newTokenCache(max int) *tokenCache {
	return &tokenCache{max: max, entries: make(map[[sha256.Size]byte]cacheEntry, min(max, 1024))}
}

func cacheKey(token string) [sha256.Size]byte {
	h := sha256.New()
	_, _ = h.Write([]byte(token))
	var k [sha256.Size]byte
	h.Sum(k[:0])
	return k
}

func (c *tokenCache) get(key [sha256.Size]byte, now time.Time, gen uint64) (Claims, bool) {
	c.mu.RLock()
	e, ok := c.entries[key]
	c.mu.RUnlock()
	if !ok || e.gen != gen || !now.Before(e.deadline) {
		return Claims{}, false
	}
	return e.claims, true
}

func (c *tokenCache) put(key [sha256.Size]byte, e cacheEntry, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.entries[key]; !ok && len(c.entries) >= c.max {
		c.evictLocked(now, e.gen)
	}
	c.entries[key] = e
}

// evictLocked drops expired entries and entries of replaced key sets; if that frees
// too little, it drops arbitrary entries (map order) down to 7/8 of the bound, so the
// sweep runs once per max/8 insertions, not on each.
func (c *tokenCache) evictLocked(now time.Time, gen uint64) {
	for k, e := range c.entries {
		if e.gen != gen || !now.Before(e.deadline) {
			delete(c.entries, k)
		}
	}
	target := c.max - c.max/8 - 1
	for k := range c.entries {
		if len(c.entries) <= target {
			break
		}
		delete(c.entries, k)
	}
}

func (c *tokenCache) len() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.entries)
}
