package local_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/adapters/ratelimit/local"
	"github.com/agent-context/agent-context/adapters/ratelimit/ratelimittest"
	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
	"github.com/agent-context/agent-context/runtime/ratelimit"
)

func TestLimiterContract(t *testing.T) {
	t.Parallel()
	ratelimittest.Run(t, func(_ *testing.T, clock runtime.Clock) ratelimit.RateLimiter {
		return local.NewLimiter(clock)
	})
}

// TestIdleBucketsAreSwept: a bucket untouched for a minute is full again and leaves
// the map, so that the map holds only the buckets in recent use.
func TestIdleBucketsAreSwept(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := ratelimittest.NewClock()
	l := local.NewLimiter(clock)
	bucket := func(i int) []ratelimit.RateBucket {
		return []ratelimit.RateBucket{{Level: contract.RateLevelAgent, Tenant: "t", Name: fmt.Sprint("agent-", i), PerMin: 1}}
	}
	for i := range 5000 {
		taken, _, err := l.Take(ctx, bucket(i))
		require.NoError(t, err)
		require.True(t, taken)
	}
	require.Equal(t, 5000, l.Len())
	clock.Advance(time.Minute)
	for i := range 5000 {
		taken, _, err := l.Take(ctx, bucket(0))
		require.NoError(t, err)
		require.Equal(t, i == 0, taken, "one a minute")
	}
	require.LessOrEqual(t, l.Len(), 1, "every idle bucket is gone")
	taken, _, err := l.Take(ctx, bucket(1))
	require.NoError(t, err)
	require.True(t, taken, "a swept bucket is a full one")
}
