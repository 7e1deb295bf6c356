package pgmetrics

import (
	"sync"
	"time"
)

// DefaultRefresh is how often, at most, a collector that counts rows in the
// database runs its statement, however often /metrics is scraped (the endpoint needs
// no credential, so anyone who reaches it sets the scrape rate).
const DefaultRefresh = 15 * time.Second

// scrapeCache keeps what a collector's statement last read and reads again only when
// that is older than its interval. A scrape in between answers from the cache; a
// scrape that finds it stale reads while the others wait for that one read rather
// than issuing their own. A failed read is kept for the interval as well, so a
// struggling database is not asked again at the scrape rate.
type scrapeCache[T any] struct {
	interval time.Duration
	read     func() (T, error)

	mu     sync.Mutex
	value  T
	err    error
	readAt time.Time
}

func newScrapeCache[T any](interval time.Duration, read func() (T, error)) *scrapeCache[T] {
	if interval <= 0 {
		interval = DefaultRefresh
	}
	return &scrapeCache[T]{interval: interval, read: read}
}

// get returns the last read, reading again first when it is older than the interval.
func (c *scrapeCache[T]) get() (T, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.readAt.IsZero() || time.Since(c.readAt) >= c.interval {
		c.value, c.err = c.read()
		c.readAt = time.Now()
	}
	return c.value, c.err
}
