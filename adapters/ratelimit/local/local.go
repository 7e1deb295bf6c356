// Package local is the per-replica rate limiter: token buckets in a map behind one
// mutex. Each replica limits on its own, so N replicas together admit N times the
// budget; the postgres limiter (adapters/postgres) shares the buckets instead.
package local

import (
	"context"
	"sync"
	"time"

	"github.com/agent-context/agent-context/runtime"
	"github.com/agent-context/agent-context/runtime/ratelimit"
)

// Limiter implements ratelimit.RateLimiter in memory.
type Limiter struct {
	clock runtime.Clock

	mu      sync.Mutex
	buckets map[key]ratelimit.TokenBucket
	// takes counts the calls since the last sweep. The map is swept of the buckets
	// that are full again once the count reaches both sweepEvery and the map's size,
	// which keeps it to the buckets used in about the last minute at a cost per take
	// that does not grow with the map.
	takes int
}

var _ ratelimit.RateLimiter = (*Limiter)(nil)

type key struct {
	level, tenant, name string
}

// sweepEvery is the fewest takes between two sweeps of the idle buckets.
const sweepEvery = 4096

// idleAfter is how long an untouched bucket takes to be full again (a whole budget
// refills in a minute), which makes it the same as an absent one.
const idleAfter = time.Minute

// NewLimiter returns an empty limiter reading clock (the system clock when nil).
func NewLimiter(clock runtime.Clock) *Limiter {
	if clock == nil {
		clock = runtime.SystemClock{}
	}
	return &Limiter{clock: clock, buckets: map[key]ratelimit.TokenBucket{}}
}

// Take implements ratelimit.RateLimiter. It never fails.
func (l *Limiter) Take(_ context.Context, buckets []ratelimit.RateBucket) (bool, []time.Duration, error) {
	nowUs := l.clock.Now().UnixMicro()
	waits := make([]time.Duration, len(buckets))
	available := make([]int64, len(buckets))
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sweep(nowUs)
	taken := true
	for i, b := range buckets {
		state, ok := l.buckets[key{b.Level, b.Tenant, b.Name}]
		if !ok {
			state = ratelimit.TokenBucket{Units: ratelimit.RateCapacity(b.PerMin, 1), AtUs: nowUs}
		}
		available[i] = state.Available(b.PerMin, 1, nowUs)
		waits[i] = ratelimit.RateWait(available[i], b.PerMin, 1)
		taken = taken && waits[i] == 0
	}
	if !taken {
		return false, waits, nil
	}
	for i, b := range buckets {
		l.buckets[key{b.Level, b.Tenant, b.Name}] = ratelimit.TokenBucket{
			Units: available[i] - ratelimit.RateUnitsPerToken, AtUs: nowUs}
	}
	return true, waits, nil
}

// sweep drops the buckets untouched for idleAfter, when it is time to.
func (l *Limiter) sweep(nowUs int64) {
	if l.takes++; l.takes < max(sweepEvery, len(l.buckets)) {
		return
	}
	l.takes = 0
	for k, b := range l.buckets {
		if nowUs-b.AtUs >= idleAfter.Microseconds() {
			delete(l.buckets, k)
		}
	}
}

// Len returns how many buckets the limiter holds.
func (l *Limiter) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.buckets)
}
