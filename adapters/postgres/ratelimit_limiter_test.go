package postgres_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/adapters/postgres"
	"github.com/agent-context/agent-context/adapters/postgres/pgtest"
	"github.com/agent-context/agent-context/adapters/ratelimit/ratelimittest"
	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
	"github.com/agent-context/agent-context/runtime/ratelimit"
)

func TestRateLimiterContract(t *testing.T) {
	t.Parallel()
	ratelimittest.Run(t, func(t *testing.T, clock runtime.Clock) ratelimit.RateLimiter {
		return postgres.NewRateLimiter(ratePool(t), clock)
	})
}

// ratePool is a pool on a fresh database with room for the concurrent takers.
func ratePool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	pool, err := postgres.NewPool(context.Background(), pgtest.NewDSN(t), postgres.PoolOptions{MaxConns: 16})
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}

// TestShardedBucketKeepsItsBudget: a budget of 2,048 a minute is split into 16 shards
// of 128. A concurrent burst spreads over them and takes at most the budget; with the
// clock standing still, the burst and a drain after it take exactly the budget, so no
// token is lost or made up by the sharding. The wait after that is the time one shard
// takes to refill a token: 16 / 2,048 of a minute.
func TestShardedBucketKeepsItsBudget(t *testing.T) {
	t.Parallel()
	require.Equal(t, 16, ratelimit.RateShards(2048))
	clock := ratelimittest.NewClock()
	pool := ratePool(t)
	l := postgres.NewRateLimiter(pool, clock)
	b := ratelimit.RateBucket{Level: contract.RateLevelGlobal, PerMin: 2048}
	admitted := ratelimittest.Burst(t, l, 16, 160, b)
	require.LessOrEqual(t, admitted, int64(2048))
	require.Equal(t, int64(2048), admitted+ratelimittest.Drain(t, l, b))
	var rows int
	require.NoError(t, pool.QueryRow(context.Background(), "SELECT count(*) FROM rate_limit_buckets").Scan(&rows))
	require.Equal(t, 16, rows)

	taken, waits, err := l.Take(context.Background(), []ratelimit.RateBucket{b})
	require.NoError(t, err)
	require.False(t, taken)
	require.Equal(t, []time.Duration{468_750 * time.Microsecond}, waits)
	clock.Advance(468_750 * time.Microsecond)
	require.Equal(t, int64(16), ratelimittest.Drain(t, l, b), "every shard gained its token")
}

// TestFirstChecksOfABucketRace: checks that race to create a bucket's rows all
// succeed, and together take exactly its budget.
func TestFirstChecksOfABucketRace(t *testing.T) {
	t.Parallel()
	clock := ratelimittest.NewClock()
	l := postgres.NewRateLimiter(ratePool(t), clock)
	for _, perMin := range []int64{40, 4096} {
		b := ratelimit.RateBucket{Level: contract.RateLevelAgent, Tenant: "t", Name: fmt.Sprint("fresh-", perMin), PerMin: perMin}
		admitted := ratelimittest.Burst(t, l, 16, 1, b)
		require.Equal(t, int64(16), admitted, "a fresh bucket of %d has room for all", perMin)
		require.Equal(t, perMin-16, ratelimittest.Drain(t, l, b))
	}
}

// TestBudgetThatChangesItsShards: a bucket created as one row (40 a minute) and then
// checked with a budget of 16 shards (4,096) holds only its first shard's share until
// the first refusal notices the missing shards and creates them, full: that refusal's
// wait is 0, and the whole budget is there after it.
func TestBudgetThatChangesItsShards(t *testing.T) {
	t.Parallel()
	clock := ratelimittest.NewClock()
	l := postgres.NewRateLimiter(ratePool(t), clock)
	b := ratelimit.RateBucket{Level: contract.RateLevelAgent, Tenant: "t", Name: "a", PerMin: 40}
	require.Equal(t, int64(40), ratelimittest.Drain(t, l, b))
	clock.Advance(time.Minute)
	b.PerMin = 4096
	for n := 0; ; n++ {
		taken, waits, err := l.Take(context.Background(), []ratelimit.RateBucket{b})
		require.NoError(t, err)
		if !taken {
			require.Equal(t, 256, n, "shard 0, at its new share")
			require.Equal(t, []time.Duration{0}, waits)
			break
		}
	}
	require.Equal(t, int64(15*256), ratelimittest.Drain(t, l, b), "the other 15 shards, full")
}

// TestSweepDeletesIdleShards: a shard untouched for a minute is full again and is
// deleted; a bucket the sweep left incomplete is completed, full, by the refusal that
// finds it so, whose wait is then 0 ms.
func TestSweepDeletesIdleShards(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := ratelimittest.NewClock()
	pool := ratePool(t)
	l := postgres.NewRateLimiter(pool, clock)
	small := ratelimit.RateBucket{Level: contract.RateLevelAgent, Tenant: "t", Name: "small", PerMin: 3}
	big := ratelimit.RateBucket{Level: contract.RateLevelGlobal, PerMin: 1024}
	require.Equal(t, int64(3), ratelimittest.Drain(t, l, small))
	require.Equal(t, int64(1024), ratelimittest.Drain(t, l, big))
	clock.Advance(59 * time.Second)
	deleted, err := l.SweepRateLimits(ctx, 1000)
	require.NoError(t, err)
	require.Zero(t, deleted, "a minute has not passed")
	clock.Advance(time.Second)
	deleted, err = l.SweepRateLimits(ctx, 5)
	require.NoError(t, err)
	require.Equal(t, int64(5), deleted, "at most the limit")
	deleted, err = l.SweepRateLimits(ctx, 1000)
	require.NoError(t, err)
	require.Equal(t, int64(1+16-5), deleted)
	require.Equal(t, int64(3), ratelimittest.Drain(t, l, small), "a deleted bucket is a full one")

	// Leave the big bucket with shards 0–7 only, all empty.
	require.Equal(t, int64(1024), ratelimittest.Drain(t, l, big))
	_, err = pool.Exec(ctx, "DELETE FROM rate_limit_buckets WHERE level = 'global' AND shard >= 8")
	require.NoError(t, err)
	taken, waits, err := l.Take(ctx, []ratelimit.RateBucket{big})
	require.NoError(t, err)
	require.False(t, taken)
	require.Equal(t, []time.Duration{0}, waits, "the missing shards are full")
	require.Equal(t, int64(512), ratelimittest.Drain(t, l, big), "and are back")
}

// TestDatabaseClock: without a clock of its own the limiter runs on the database's,
// and a refusal's wait is measured on it. The bucket refills from its first take on
// (while full it cannot gain more), a token every 30 s: after two takes the wait is
// 30 s less the time since the first, which began after the time read before it and
// ended before the time read after the refusal.
func TestDatabaseClock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := ratePool(t)
	l := postgres.NewRateLimiter(pool, nil)
	dbNow := func() time.Duration {
		var us int64
		require.NoError(t, pool.QueryRow(ctx, `SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint`).Scan(&us))
		return time.Duration(us) * time.Microsecond
	}
	b := ratelimit.RateBucket{Level: contract.RateLevelTool, Tenant: "t", Name: "POST /x", PerMin: 2}
	before := dbNow()
	require.Equal(t, int64(2), ratelimittest.Drain(t, l, b))
	taken, waits, err := l.Take(ctx, []ratelimit.RateBucket{b})
	require.NoError(t, err)
	require.False(t, taken)
	after := dbNow()
	require.Less(t, waits[0], 30*time.Second)
	require.GreaterOrEqual(t, waits[0], 30*time.Second-(after-before))
}
