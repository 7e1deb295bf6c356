package ratelimit_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
	"github.com/agent-context/agent-context/runtime/ratelimit"
)

// stubLimiter answers every Take with its waits and records the buckets it was asked.
type stubLimiter struct {
	waits   []time.Duration
	err     error
	buckets [][]ratelimit.RateBucket
}

func (s *stubLimiter) Take(_ context.Context, buckets []ratelimit.RateBucket) (bool, []time.Duration, error) {
	s.buckets = append(s.buckets, buckets)
	if s.err != nil {
		return false, nil, s.err
	}
	taken := true
	for _, w := range s.waits {
		taken = taken && w == 0
	}
	return taken, s.waits, nil
}

func TestRateLimitCheck(t *testing.T) {
	t.Parallel()
	p := runtime.Principal{Scope: runtime.Scope{TenantID: "t", ProjectID: "p"}, Subject: "s"}
	check := func(limits ratelimit.RateLimits, waits ...time.Duration) (*stubLimiter, error) {
		l := &stubLimiter{waits: waits}
		return l, ratelimit.NewRateLimit(l, limits).Check(context.Background(), p, "POST /x")
	}

	l, err := check(ratelimit.RateLimits{})
	require.NoError(t, err)
	require.Empty(t, l.buckets, "every level off: no check at all")

	l, err = check(ratelimit.RateLimits{GlobalPerMin: 3, AgentPerMin: 1, ToolPerMin: 2}, 0, 0, 0)
	require.NoError(t, err)
	require.Equal(t, [][]ratelimit.RateBucket{{
		{Level: contract.RateLevelAgent, Tenant: "t", Name: "s", PerMin: 1},
		{Level: contract.RateLevelTool, Tenant: "t", Name: "POST /x", PerMin: 2},
		{Level: contract.RateLevelGlobal, PerMin: 3},
	}}, l.buckets, "agent, tool, global: the stores' lock order; the project is no part of a key")

	l, err = check(ratelimit.RateLimits{GlobalPerMin: 3}, 0)
	require.NoError(t, err)
	require.Equal(t, []ratelimit.RateBucket{{Level: contract.RateLevelGlobal, PerMin: 3}}, l.buckets[0], "only the levels on")

	for name, tc := range map[string]struct {
		waits []time.Duration
		ms    int64
		level string
	}{
		"the longest wait names the level": {[]time.Duration{time.Second, 3 * time.Second, 0}, 3000, contract.RateLevelTool},
		"a tie goes to the first":          {[]time.Duration{0, 2 * time.Second, 2 * time.Second}, 2000, contract.RateLevelTool},
		"rounded up to the millisecond":    {[]time.Duration{time.Microsecond, 0, 0}, 1, contract.RateLevelAgent},
		"and up again":                     {[]time.Duration{0, 0, 1001 * time.Microsecond}, 2, contract.RateLevelGlobal},
	} {
		_, err := check(ratelimit.RateLimits{GlobalPerMin: 3, AgentPerMin: 1, ToolPerMin: 2}, tc.waits...)
		var re *runtime.Error
		require.ErrorAs(t, err, &re, name)
		require.Equal(t, contract.CodeRateLimited, re.Code, name)
		require.Equal(t, map[string]any{"retryAfterMs": tc.ms, "level": tc.level}, re.Details, name)
	}

	failing := &stubLimiter{err: runtime.Errorf(contract.CodeServiceUnavailable, "down")}
	err = ratelimit.NewRateLimit(failing, ratelimit.DefaultRateLimits).Check(context.Background(), p, "POST /x")
	require.Equal(t, contract.CodeServiceUnavailable, runtime.ErrorCode(err), "the limiter's failure refuses the request")
}

func TestRateShards(t *testing.T) {
	t.Parallel()
	for perMin, shards := range map[int64]int{1: 1, 127: 1, 128: 2, 255: 2, 256: 4, 512: 8, 1023: 8, 1024: 16, 6000: 16, ratelimit.MaxRatePerMin: 16} {
		require.Equal(t, shards, ratelimit.RateShards(perMin), perMin)
		// A shard's capacity and refill are whole numbers of units.
		require.Zero(t, perMin*ratelimit.RateUnitsPerToken%int64(shards))
		require.Zero(t, perMin*ratelimit.MaxRateShards%int64(shards))
	}
}
