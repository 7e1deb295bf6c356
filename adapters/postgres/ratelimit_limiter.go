package postgres

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/agent-context/agent-context/runtime"
	"github.com/agent-context/agent-context/runtime/ratelimit"
)

// RateLimiter implements ratelimit.RateLimiter on the rate_limit_buckets table, so that
// every replica draws on the same buckets. Each check is one statement per tenant of its
// buckets (the global buckets are the tenant ""), in one batch: one round trip, one
// transaction; docs/rate-limits.md explains its shape:
//
//   - A bucket is split into ratelimit.RateShards rows (up to 16), each holding its share
//     of the budget, so that concurrent requests spread their row locks.
//   - Per bucket, in the order of the request's buckets (agent, tool, global), the
//     statement locks one shard: an unlocked one, preferring one that holds a token,
//     without waiting (FOR UPDATE SKIP LOCKED); only when every shard is locked does
//     it wait for its home shard (random per request). A statement waits for at most one
//     row per bucket while holding rows of earlier buckets only, so two checks never
//     deadlock.
//   - The tokens are taken (UPDATE of the locked shards) only when every bucket's shard
//     holds one: all or nothing. A tenant's statement takes its own when its buckets
//     hold them; when they do not and the check has several tenants, it ends the
//     transaction with an error (rate_limit_admit), which rolls back what the other
//     tenants' statements took, and the check runs again without taking anything to
//     learn the waits.
//   - A bucket's rows are created, full, by the statement that finds none; it then
//     runs once more, since rows it inserted are not yet visible to it.
type RateLimiter struct {
	db    DBTX
	clock runtime.Clock
}

var _ ratelimit.RateLimiter = (*RateLimiter)(nil)

// NewRateLimiter returns the limiter over db. Its clock is the database's (one clock for
// every replica) unless clock is set, which tests do.
func NewRateLimiter(db DBTX, clock runtime.Clock) *RateLimiter {
	return &RateLimiter{db: db, clock: clock}
}

// rateTakeSQL is the check of one tenant's buckets: every statement on the table names
// the tenant $2, so Citus routes it to the tenant's shard. $1, $3..$6 describe the
// buckets in lock order (level, name, per-minute budget, shards, home shard); $7 is the
// time in µs, or null for the database's clock; $8 false takes nothing (the waits
// only); $9 makes a refusal an error (AC429), for a check of several tenants. Units and
// refill follow ratelimit.TokenBucket.
var rateTakeSQL = `
WITH want AS (
	SELECT w.level, w.name, w.per_min, w.shards, w.home, w.ord,
		w.per_min * ` + unitsPerToken + ` / w.shards AS cap, w.per_min * ` + maxShards + ` / w.shards AS rate
	FROM unnest($1::text[], $3::text[], $4::bigint[], $5::int[], $6::int[]) WITH ORDINALITY
		AS w(level, name, per_min, shards, home, ord)
), clock AS (
	SELECT coalesce($7::bigint, (extract(epoch FROM statement_timestamp()) * 1000000)::bigint) AS now_us
), picked AS (
	SELECT w.ord, w.level, w.name, w.cap, w.rate, w.shards, c.now_us,
		coalesce(a.shard, f.shard) AS shard,
		-- least ignores nulls: no shard, no tokens.
		CASE WHEN coalesce(a.shard, f.shard) IS NOT NULL THEN least(w.cap, coalesce(a.tokens, f.tokens)
			+ least(greatest(c.now_us - coalesce(a.at_us, f.at_us), 0), ` + microsPerMinute + `) * w.rate) END AS avail,
		greatest(c.now_us, coalesce(a.at_us, f.at_us)) AS at_us
	FROM want w CROSS JOIN clock c
	LEFT JOIN LATERAL (
		SELECT b.shard, b.tokens, b.at_us
		FROM rate_limit_buckets b
		WHERE b.tenant_id = $2 AND b.level = w.level AND b.name = w.name AND b.shard < w.shards
		ORDER BY b.tokens + least(greatest(c.now_us - b.at_us, 0), ` + microsPerMinute + `) * w.rate >= ` + unitsPerToken + ` DESC,
			(b.shard - w.home + w.shards) % w.shards
		LIMIT 1
		FOR UPDATE SKIP LOCKED
	) a ON true
	LEFT JOIN LATERAL (
		SELECT b.shard, b.tokens, b.at_us
		FROM rate_limit_buckets b
		WHERE a.shard IS NULL
			AND b.tenant_id = $2 AND b.level = w.level AND b.name = w.name AND b.shard = w.home
		FOR UPDATE
	) f ON true
), decision AS (
	SELECT $8::boolean AND bool_and(coalesce(avail >= ` + unitsPerToken + `, false)) AS ok FROM picked
), others AS (
	-- Only for a refused bucket of several shards: what the shards not locked hold, as
	-- this statement's snapshot saw them, and how many exist (a missing one is full).
	SELECT p.ord, count(b.shard) AS present,
		max(least(p.cap, b.tokens + least(greatest(p.now_us - b.at_us, 0), ` + microsPerMinute + `) * p.rate)) AS avail
	FROM picked p CROSS JOIN decision d
	LEFT JOIN rate_limit_buckets b ON b.tenant_id = $2 AND b.level = p.level AND b.name = p.name
		AND b.shard < p.shards AND b.shard IS DISTINCT FROM p.shard
	WHERE NOT d.ok AND p.shards > 1 AND p.avail < ` + unitsPerToken + `
	GROUP BY p.ord
), created AS (
	-- The missing shards of a bucket this statement found none of, or found incomplete
	-- while refusing (the sweep may have deleted part of it), are created full.
	INSERT INTO rate_limit_buckets (tenant_id, level, name, shard, tokens, at_us)
	SELECT $2, p.level, p.name, s, p.cap, p.now_us
	FROM picked p LEFT JOIN others o ON o.ord = p.ord CROSS JOIN generate_series(0, p.shards - 1) s
	WHERE p.shard IS NULL OR o.present < p.shards - 1
	ORDER BY p.level, p.name, s
	ON CONFLICT DO NOTHING
	RETURNING 1
), taken AS (
	UPDATE rate_limit_buckets b SET tokens = p.avail - ` + unitsPerToken + `, at_us = p.at_us
	FROM picked p CROSS JOIN decision d
	WHERE d.ok AND b.tenant_id = $2 AND b.level = p.level AND b.name = p.name AND b.shard = p.shard
	RETURNING 1
)
SELECT p.shard IS NOT NULL, coalesce(p.avail, 0), o.avail, coalesce(o.present, p.shards - 1), p.shards,
	d.ok, (SELECT count(*) FROM taken), (SELECT count(*) FROM created)
FROM picked p CROSS JOIN decision d LEFT JOIN others o ON o.ord = p.ord
WHERE CASE WHEN d.ok OR NOT $9::boolean THEN true ELSE rate_limit_admit(false) END
ORDER BY p.ord`

// sqlstateRateRefused is rate_limit_admit's error: one tenant's buckets refused a check
// of several tenants.
const sqlstateRateRefused = "AC429"

var (
	unitsPerToken   = fmt.Sprint(ratelimit.RateUnitsPerToken)
	maxShards       = fmt.Sprint(ratelimit.MaxRateShards)
	microsPerMinute = fmt.Sprint(time.Minute.Microseconds())
)

// rateTakeAttempts bounds the runs of one check: the first may only create the rows.
const rateTakeAttempts = 3

// Take implements ratelimit.RateLimiter. Errors: SERVICE_UNAVAILABLE.
func (l *RateLimiter) Take(ctx context.Context, buckets []ratelimit.RateBucket) (bool, []time.Duration, error) {
	n := len(buckets)
	levels, names := make([]string, n), make([]string, n)
	perMin, shards, homes := make([]int64, n), make([]int32, n), make([]int32, n)
	for i, b := range buckets {
		levels[i], names[i], perMin[i] = b.Level, b.Name, b.PerMin
		s := ratelimit.RateShards(b.PerMin)
		shards[i], homes[i] = int32(s), int32(rand.IntN(s))
	}
	check := rateCheck{buckets: buckets, levels: levels, names: names, perMin: perMin, shards: shards, homes: homes}
	if l.clock != nil {
		us := l.clock.Now().UnixMicro()
		check.nowUs = &us
	}
	for range rateTakeAttempts {
		taken, waits, complete, err := l.take(ctx, check, true)
		if errors.Is(err, errRateRefused) {
			// A tenant's buckets refused, and the transaction took nothing: the
			// waits come from a run that takes nothing.
			taken, waits, complete, err = l.take(ctx, check, false)
		}
		if err != nil || complete {
			return taken, waits, err
		}
	}
	return false, nil, fmt.Errorf("rate limit buckets %v: not found after %d attempts", names, rateTakeAttempts)
}

// rateCheck is a check's buckets in lock order, as the statement takes them.
type rateCheck struct {
	buckets       []ratelimit.RateBucket
	levels, names []string
	perMin        []int64
	shards, homes []int32
	nowUs         *int64
}

// errRateRefused is a check of several tenants that one tenant's buckets refused.
var errRateRefused = errors.New("a tenant's buckets refused the check")

// take runs the check once, one statement per run of buckets of one tenant, in one
// batch; take false takes nothing. complete is false when a bucket had no rows (the run
// created them and took nothing).
func (l *RateLimiter) take(ctx context.Context, c rateCheck, take bool) (taken bool, waits []time.Duration, complete bool, err error) {
	var runs [][2]int // [from, to) of the buckets of one tenant
	for i := range c.buckets {
		if i == 0 || c.buckets[i].Tenant != c.buckets[i-1].Tenant {
			runs = append(runs, [2]int{i, i})
		}
		runs[len(runs)-1][1] = i + 1
	}
	guard := take && len(runs) > 1
	b := &pgx.Batch{}
	for _, r := range runs {
		from, to := r[0], r[1]
		b.Queue(rateTakeSQL, c.levels[from:to], c.buckets[from].Tenant, c.names[from:to], c.perMin[from:to],
			c.shards[from:to], c.homes[from:to], c.nowUs, take, guard)
	}
	res := l.db.SendBatch(ctx, b)
	defer func() { _ = res.Close() }() // checked below on success; an earlier error is the one reported
	n := len(c.buckets)
	waits = make([]time.Duration, 0, n)
	complete, taken = true, take
	for _, r := range runs {
		runTaken, runComplete, err := readRateRun(res, c, r[0], r[1], &waits)
		if err != nil {
			var pgErr *pgconn.PgError
			if errors.As(err, &pgErr) && pgErr.Code == sqlstateRateRefused {
				return false, nil, false, errRateRefused
			}
			return false, nil, false, translate(err)
		}
		taken, complete = taken && runTaken, complete && runComplete
	}
	if err := res.Close(); err != nil {
		return false, nil, false, translate(err)
	}
	return taken, waits, complete, nil
}

// rateRow is the statement's answer for one bucket.
type rateRow struct {
	Found            bool
	Avail            int64
	Others           *int64
	Present, Count   int64
	Taken            bool
	Updated, Created int64
}

// readRateRun reads the rows of the statement of buckets [from, to), appending their
// waits.
func readRateRun(res pgx.BatchResults, c rateCheck, from, to int, waits *[]time.Duration) (taken, complete bool, err error) {
	rows, err := res.Query()
	if err != nil {
		return false, false, err
	}
	answered, err := pgx.CollectRows(rows, pgx.RowToStructByPos[rateRow])
	if err != nil {
		return false, false, err
	}
	if len(answered) != to-from {
		return false, false, fmt.Errorf("rate limit check answered %d rows for %d buckets", len(answered), to-from)
	}
	complete, taken = true, answered[0].Taken
	for k, a := range answered {
		i := from + k
		complete = complete && a.Found
		wait := ratelimit.RateWait(a.Avail, c.perMin[i], int(a.Count))
		if a.Others != nil {
			wait = min(wait, ratelimit.RateWait(*a.Others, c.perMin[i], int(a.Count)))
		}
		if a.Present < a.Count-1 {
			wait = 0
		}
		*waits = append(*waits, wait)
	}
	if updated := answered[0].Updated; complete && taken && updated != int64(to-from) {
		return false, false, fmt.Errorf("rate limit check took %d tokens for %d buckets", updated, to-from)
	}
	return taken, complete, nil
}

// SweepRateLimits deletes the bucket shards untouched for a minute, which are full
// again and so the same as absent ones, at most limit of them, skipping any a check
// holds; it returns how many it deleted. Run it periodically (serve does, every
// minute): it keeps the table to the buckets in use. The idle shards are listed first,
// then deleted by a statement per tenant in one batch, each locking its own (Citus
// locks no rows of several tenants in one statement).
func (l *RateLimiter) SweepRateLimits(ctx context.Context, limit int) (int64, error) {
	var nowUs *int64
	if l.clock != nil {
		us := l.clock.Now().UnixMicro()
		nowUs = &us
	}
	idle := `at_us <= coalesce($1::bigint, (extract(epoch FROM statement_timestamp()) * 1000000)::bigint) - ` + microsPerMinute
	rows, err := l.db.Query(ctx, `SELECT tenant_id, level, name, shard FROM rate_limit_buckets WHERE `+idle+` LIMIT $2`,
		nowUs, limit)
	if err != nil {
		return 0, translate(err)
	}
	shards, err := pgx.CollectRows(rows, pgx.RowToStructByPos[bucketShard])
	if err != nil || len(shards) == 0 {
		return 0, translate(err)
	}
	type tenantShards struct {
		levels, names []string
		shards        []int16
	}
	byTenant := map[string]*tenantShards{}
	var tenants []string
	for _, sh := range shards {
		t := byTenant[sh.TenantID]
		if t == nil {
			t = &tenantShards{}
			byTenant[sh.TenantID] = t
			tenants = append(tenants, sh.TenantID)
		}
		t.levels, t.names, t.shards = append(t.levels, sh.Level), append(t.names, sh.Name), append(t.shards, sh.Shard)
	}
	b := &pgx.Batch{}
	for _, tenant := range tenants {
		t := byTenant[tenant]
		b.Queue(`
			DELETE FROM rate_limit_buckets
			WHERE tenant_id = $2 AND (level, name, shard) IN (
				SELECT level, name, shard FROM rate_limit_buckets
				WHERE tenant_id = $2 AND (level, name, shard) IN (SELECT * FROM unnest($3::text[], $4::text[], $5::smallint[]))
				  AND `+idle+`
				FOR UPDATE SKIP LOCKED)`, nowUs, tenant, t.levels, t.names, t.shards)
	}
	res := l.db.SendBatch(ctx, b)
	defer func() { _ = res.Close() }() // checked below on success; an earlier error is the one reported
	var deleted int64
	for range tenants {
		tag, err := res.Exec()
		if err != nil {
			return 0, translate(err)
		}
		deleted += tag.RowsAffected()
	}
	return deleted, translate(res.Close())
}

// bucketShard is the key of one shard row of a bucket.
type bucketShard struct {
	TenantID, Level, Name string
	Shard                 int16
}
