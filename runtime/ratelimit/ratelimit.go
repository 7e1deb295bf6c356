package ratelimit

import (
	"context"
	"time"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
)

// RateLimits are the per-minute budgets of the three levels (docs/rate-limits.md); 0 turns a
// level off. Each is a token bucket whose capacity is the per-minute budget, refilled
// continuously.
type RateLimits struct {
	GlobalPerMin int64
	AgentPerMin  int64
	ToolPerMin   int64
}

// DefaultRateLimits are the contract's defaults: only the agent level is on, so that a
// service behind a gateway does not throttle its own benchmarks.
var DefaultRateLimits = RateLimits{AgentPerMin: 6000}

// MaxRatePerMin bounds a level's budget, so that the fixed-point arithmetic of a bucket
// (RateUnitsPerToken) never overflows.
const MaxRatePerMin = 1_000_000_000

// Off reports whether every level is off.
func (l RateLimits) Off() bool { return l.GlobalPerMin == 0 && l.AgentPerMin == 0 && l.ToolPerMin == 0 }

// RateBucket names one token bucket a request needs a token from: its level, its key
// within the level (the tenant and the subject or route; both empty at the global
// level) and its per-minute budget.
type RateBucket struct {
	Level  string
	Tenant string
	Name   string
	PerMin int64
}

// RateLimiter holds the token buckets.
type RateLimiter interface {
	// Take takes one token from every bucket, or from none when any of them has none,
	// atomically with every other Take on the same buckets. It returns whether the
	// tokens were taken and, per bucket in order, how long until it holds a token (0:
	// it holds one now). Errors: SERVICE_UNAVAILABLE.
	Take(ctx context.Context, buckets []RateBucket) (taken bool, waits []time.Duration, err error)
}

// The fixed-point arithmetic of token buckets, shared by every RateLimiter so that they
// agree to the microsecond. A bucket's level is counted in units, a token being
// RateUnitsPerToken of them: 60,000,000 µs a minute × 16, so that a bucket of any
// per-minute budget, whole or split into 2, 4, 8 or 16 shards, gains a whole number of
// units every microsecond.
const (
	RateUnitsPerToken = microsPerMinute * MaxRateShards
	// MaxRateShards is the most shards a store may split one bucket into.
	MaxRateShards   = 16
	microsPerMinute = 60_000_000
	// minShardTokens is the least capacity of a shard: the tokens a sharded bucket
	// cannot use because each shard holds less than one are under 1/64 of it.
	minShardTokens = 64
)

// RateShards returns how many shards a store that splits buckets to spread their row
// locks uses for a bucket of perMin: the largest power of two up to MaxRateShards that
// leaves every shard at least 64 tokens.
func RateShards(perMin int64) int {
	shards := 1
	for shards < MaxRateShards && perMin/int64(shards*2) >= minShardTokens {
		shards *= 2
	}
	return shards
}

// TokenBucket is the state of a bucket, or of one of its shards: Units at AtUs
// (microseconds since the Unix epoch).
type TokenBucket struct {
	Units int64
	AtUs  int64
}

// RateCapacity is the capacity in units of one of shards shards of a bucket of perMin.
func RateCapacity(perMin int64, shards int) int64 {
	return perMin * RateUnitsPerToken / int64(shards)
}

// Available returns the units the bucket (one of shards shards of a bucket of perMin)
// holds at nowUs: it refills at perMin/shards tokens a minute up to its capacity, and
// never loses units when the clock seems to go back.
func (b TokenBucket) Available(perMin int64, shards int, nowUs int64) int64 {
	elapsed := min(max(nowUs-b.AtUs, 0), microsPerMinute)
	return min(RateCapacity(perMin, shards), b.Units+elapsed*perMin*MaxRateShards/int64(shards))
}

// RateWait returns how long a shard (one of shards of a bucket of perMin) holding
// available units takes to hold a token: 0 when it holds one, else rounded up to the
// microsecond.
func RateWait(available, perMin int64, shards int) time.Duration {
	if available >= RateUnitsPerToken {
		return 0
	}
	perMicro := perMin * MaxRateShards / int64(shards)
	return time.Duration((RateUnitsPerToken-available+perMicro-1)/perMicro) * time.Microsecond
}

// RateLimit is the rate limiting of every authenticated request (docs/rate-limits.md).
type RateLimit struct {
	limiter RateLimiter
	limits  RateLimits
}

// NewRateLimit returns the rate limiting of limits over limiter.
func NewRateLimit(limiter RateLimiter, limits RateLimits) *RateLimit {
	return &RateLimit{limiter: limiter, limits: limits}
}

// Check takes the tokens a request of p on route needs: one from the agent bucket
// (tenant + subject), the tool bucket (tenant + route) and the global bucket, each
// when its level is on, or none of them. A refusal is RATE_LIMITED with
// details.retryAfterMs (until every bucket holds a token, rounded up to the
// millisecond) and details.level (the bucket that waits longest; on a tie the first
// of agent, tool, global).
func (r *RateLimit) Check(ctx context.Context, p runtime.Principal, route string) error {
	buckets := make([]RateBucket, 0, 3)
	// Agent and tool before global: a store that locks the buckets in this order makes
	// a request that waits for its agent's bucket hold nothing every tenant needs.
	for _, b := range []RateBucket{
		{Level: contract.RateLevelAgent, Tenant: p.TenantID, Name: p.Subject, PerMin: r.limits.AgentPerMin},
		{Level: contract.RateLevelTool, Tenant: p.TenantID, Name: route, PerMin: r.limits.ToolPerMin},
		{Level: contract.RateLevelGlobal, PerMin: r.limits.GlobalPerMin},
	} {
		if b.PerMin > 0 {
			buckets = append(buckets, b)
		}
	}
	if len(buckets) == 0 {
		return nil
	}
	taken, waits, err := r.limiter.Take(ctx, buckets)
	if err != nil || taken {
		return err
	}
	longest := 0
	for i, w := range waits {
		if w > waits[longest] {
			longest = i
		}
	}
	retryAfterMs := max((waits[longest]+time.Millisecond-1)/time.Millisecond, 1)
	return runtime.Errorf(contract.CodeRateLimited, "the %s rate limit is exhausted; retry after %d ms",
		buckets[longest].Level, int64(retryAfterMs)).
		With("retryAfterMs", int64(retryAfterMs)).With("level", buckets[longest].Level)
}
