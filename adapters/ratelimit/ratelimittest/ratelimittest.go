// Package ratelimittest is the contract suite of ratelimit.RateLimiter: every limiter
// (adapters/ratelimit/local, adapters/postgres) runs it, on a clock the test moves.
package ratelimittest

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
	"github.com/agent-context/agent-context/runtime/ratelimit"
)

// Clock is a runtime.Clock that stands still until the test moves it.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock returns a clock standing at a fixed instant.
func NewClock() *Clock {
	return &Clock{now: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}
}

// Now implements runtime.Clock.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// NewLimiterFunc returns a fresh limiter, with no buckets, reading clock.
type NewLimiterFunc func(t *testing.T, clock runtime.Clock) ratelimit.RateLimiter

// Run runs the contract suite against the limiters newLimiter returns. Budgets stay
// under 128 a minute, where no limiter may split a bucket (ratelimit.RateShards), so
// that every limiter's answers are exact.
func Run(t *testing.T, newLimiter NewLimiterFunc) {
	ctx := context.Background()
	agent := func(tenant, subject string, perMin int64) ratelimit.RateBucket {
		return ratelimit.RateBucket{Level: contract.RateLevelAgent, Tenant: tenant, Name: subject, PerMin: perMin}
	}
	tool := func(tenant, route string, perMin int64) ratelimit.RateBucket {
		return ratelimit.RateBucket{Level: contract.RateLevelTool, Tenant: tenant, Name: route, PerMin: perMin}
	}
	global := func(perMin int64) ratelimit.RateBucket {
		return ratelimit.RateBucket{Level: contract.RateLevelGlobal, PerMin: perMin}
	}
	take := func(t *testing.T, l ratelimit.RateLimiter, buckets ...ratelimit.RateBucket) (bool, []time.Duration) {
		t.Helper()
		taken, waits, err := l.Take(ctx, buckets)
		require.NoError(t, err)
		require.Len(t, waits, len(buckets))
		return taken, waits
	}
	drain := func(t *testing.T, l ratelimit.RateLimiter, buckets ...ratelimit.RateBucket) int {
		t.Helper()
		return int(Drain(t, l, buckets...))
	}

	t.Run("capacity is the per-minute budget and a refusal says when a token is back", func(t *testing.T) {
		t.Parallel()
		clock := NewClock()
		l := newLimiter(t, clock)
		b := agent("t", "a", 5)
		require.Equal(t, 5, drain(t, l, b))
		// 5 a minute: one token every 12 s.
		taken, waits := take(t, l, b)
		require.False(t, taken)
		require.Equal(t, []time.Duration{12 * time.Second}, waits)
		clock.Advance(12*time.Second - time.Microsecond)
		taken, waits = take(t, l, b)
		require.False(t, taken, "a microsecond early is too early")
		require.Equal(t, []time.Duration{time.Microsecond}, waits)
		clock.Advance(time.Microsecond)
		taken, waits = take(t, l, b)
		require.True(t, taken, "the wait it named is enough")
		require.Equal(t, []time.Duration{0}, waits)
		taken, _ = take(t, l, b)
		require.False(t, taken)
	})

	t.Run("the wait of an uneven rate rounds up to the microsecond", func(t *testing.T) {
		t.Parallel()
		clock := NewClock()
		l := newLimiter(t, clock)
		b := agent("t", "a", 7)
		require.Equal(t, 7, drain(t, l, b))
		// 60 s / 7 = 8,571,428.57… µs.
		_, waits := take(t, l, b)
		require.Equal(t, []time.Duration{8_571_429 * time.Microsecond}, waits)
		clock.Advance(8_571_428 * time.Microsecond)
		taken, _ := take(t, l, b)
		require.False(t, taken)
		clock.Advance(time.Microsecond)
		taken, _ = take(t, l, b)
		require.True(t, taken)
	})

	t.Run("refill is continuous and stops at the capacity", func(t *testing.T) {
		t.Parallel()
		clock := NewClock()
		l := newLimiter(t, clock)
		b := agent("t", "a", 60)
		require.Equal(t, 60, drain(t, l, b))
		clock.Advance(10 * time.Second)
		require.Equal(t, 10, drain(t, l, b), "one a second")
		clock.Advance(2500 * time.Millisecond)
		require.Equal(t, 2, drain(t, l, b), "half a token stays")
		clock.Advance(500 * time.Millisecond)
		require.Equal(t, 1, drain(t, l, b), "and counts with the next half")
		clock.Advance(time.Hour)
		require.Equal(t, 60, drain(t, l, b), "an idle bucket holds its capacity, no more")
	})

	t.Run("a request takes a token from every bucket or from none", func(t *testing.T) {
		t.Parallel()
		clock := NewClock()
		l := newLimiter(t, clock)
		a, tl, g := agent("t", "a", 10), tool("t", "POST /x", 3), global(100)
		require.Equal(t, 3, drain(t, l, a, tl, g))
		taken, waits := take(t, l, a, tl, g)
		require.False(t, taken)
		require.Equal(t, []time.Duration{0, 20 * time.Second, 0}, waits, "only the tool bucket is empty")
		// The refused requests took nothing from the agent or global buckets.
		require.Equal(t, 7, drain(t, l, a))
		require.Equal(t, 97, drain(t, l, g))
		// Both agent and tool are empty now: the wait is per bucket.
		clock.Advance(5 * time.Second)
		taken, waits = take(t, l, a, tl, g)
		require.False(t, taken)
		require.Equal(t, []time.Duration{time.Second, 15 * time.Second, 0}, waits)
	})

	t.Run("buckets are keyed by level, tenant and name", func(t *testing.T) {
		t.Parallel()
		l := newLimiter(t, NewClock())
		require.Equal(t, 2, drain(t, l, agent("t1", "a", 2)))
		for _, b := range []ratelimit.RateBucket{
			agent("t2", "a", 2), agent("t1", "b", 2), tool("t1", "a", 2), {Level: contract.RateLevelGlobal, Tenant: "t1", Name: "a", PerMin: 2},
		} {
			require.Equal(t, 2, drain(t, l, b), "%+v", b)
		}
	})

	t.Run("concurrent takes never pass the budget", func(t *testing.T) {
		t.Parallel()
		clock := NewClock()
		l := newLimiter(t, clock)
		a, g := agent("t", "a", 100), global(50)
		admitted := Burst(t, l, 16, 10, a, g)
		// The clock stands still: the global bucket's 50 tokens are all there is, and
		// none may be lost either (what the burst left, a drain finds).
		require.LessOrEqual(t, admitted, int64(50))
		require.Equal(t, int64(50), admitted+int64(drain(t, l, a, g)))
		require.Equal(t, 50, drain(t, l, a), "the agent gave exactly one token per admitted request")
	})

	t.Run("budgets may differ between calls", func(t *testing.T) {
		t.Parallel()
		clock := NewClock()
		l := newLimiter(t, clock)
		require.Equal(t, 10, drain(t, l, agent("t", "a", 10)))
		clock.Advance(time.Minute)
		// A lower budget caps what the bucket holds.
		require.Equal(t, 4, drain(t, l, agent("t", "a", 4)))
	})
}

// Drain takes from buckets until l refuses and returns how many takes succeeded.
func Drain(t *testing.T, l ratelimit.RateLimiter, buckets ...ratelimit.RateBucket) int64 {
	t.Helper()
	for n := int64(0); ; n++ {
		require.Less(t, n, int64(1_000_000), "the bucket never runs dry")
		taken, waits, err := l.Take(context.Background(), buckets)
		require.NoError(t, err)
		require.Len(t, waits, len(buckets))
		if !taken {
			return n
		}
	}
}

// Burst runs workers goroutines that each take attempts times from buckets at once
// and returns how many takes succeeded.
func Burst(t *testing.T, l ratelimit.RateLimiter, workers, attempts int, buckets ...ratelimit.RateBucket) int64 {
	t.Helper()
	var admitted atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for range workers {
		wg.Go(func() {
			for range attempts {
				taken, _, err := l.Take(context.Background(), buckets)
				if err != nil {
					errs <- err
					return
				}
				if taken {
					admitted.Add(1)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	return admitted.Load()
}
