package runtime

import (
	"sync"
	"time"

	"github.com/agent-context/agent-context/contract"
)

// DefaultMaxWaitersPerTenant bounds a tenant's waiters on one replica when no bound
// is configured (AGENT_CONTEXT_MAX_WAITERS_PER_TENANT).
const DefaultMaxWaitersPerTenant = 256

// WaitersRetryAfter is the wait a refused waiter is told: a waiter frees its place
// when its wait ends, which no one can predict, and most long polls and streams of a
// busy tenant end or come back within a second or so.
const WaitersRetryAfter = time.Second

// Waiters counts the requests of each tenant that wait on this replica: open streams
// and long polls. A waiter holds no database connection, but it holds a goroutine, a
// subscription and its share of every wake-up of its scope, so one tenant opening
// waiters without end would slow every other tenant's. The count is per replica: it
// needs no round trip, and a tenant's waiters spread over replicas are bounded by the
// bound times the replicas.
type Waiters struct {
	max   int
	mu    sync.Mutex
	n     map[string]int
	total int
}

// NewWaiters bounds each tenant to max waiters (DefaultMaxWaitersPerTenant when max
// is not positive).
func NewWaiters(max int) *Waiters {
	if max <= 0 {
		max = DefaultMaxWaitersPerTenant
	}
	return &Waiters{max: max, n: map[string]int{}}
}

// Admit counts one more waiter of tenant and returns the release that uncounts it
// (once, however often it is called), or, when the tenant has max waiters already,
// RATE_LIMITED with details level "waiters", retryAfterMs and limit, as a rate
// limit refuses.
func (w *Waiters) Admit(tenant string) (release func(), err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.n[tenant] >= w.max {
		return nil, Errorf(contract.CodeRateLimited,
			"the tenant has %d streams and long polls waiting on this replica, the most it may; retry after %d ms",
			w.max, WaitersRetryAfter.Milliseconds()).
			With("level", "waiters").With("retryAfterMs", WaitersRetryAfter.Milliseconds()).With("limit", int64(w.max))
	}
	w.n[tenant]++
	w.total++
	var once sync.Once
	return func() {
		once.Do(func() {
			w.mu.Lock()
			defer w.mu.Unlock()
			w.total--
			if w.n[tenant]--; w.n[tenant] == 0 {
				delete(w.n, tenant)
			}
		})
	}, nil
}

// Count is the number of waiters of every tenant on this replica now.
func (w *Waiters) Count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.total
}
