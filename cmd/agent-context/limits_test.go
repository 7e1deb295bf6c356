package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/adapters/postgres/pgtest"
	"github.com/agent-context/agent-context/adapters/ratelimit/ratelimittest"
	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime/ratelimit"
)

// limitedRead is a cheap authenticated request (open mode) of agent subject.
func (a *testApp) limitedRead(t *testing.T, subject string) *testResponse {
	t.Helper()
	return a.post(t, contract.RouteMessagesRecent.Path, map[string]any{"scope": map[string]any{"conversationId": "c"}},
		"x-infra-subject", subject)
}

// requireRateLimited asserts a well-formed refusal and returns its retryAfterMs.
func requireRateLimited(t *testing.T, r *testResponse, level string) int64 {
	t.Helper()
	e := r.requireError(t, http.StatusTooManyRequests, contract.CodeRateLimited)
	require.Equal(t, level, e.Details["level"])
	ms, ok := e.Details["retryAfterMs"].(float64)
	require.True(t, ok, "retryAfterMs: %v", e.Details)
	require.Positive(t, ms)
	require.Equal(t, strconv.FormatInt((int64(ms)+999)/1000, 10), r.Header.Get("Retry-After"))
	return int64(ms)
}

// dbClock reads the database's clock, the one the postgres limiter runs on.
func dbClock(t *testing.T, pool *pgxpool.Pool) time.Time {
	t.Helper()
	var now time.Time
	require.NoError(t, pool.QueryRow(context.Background(), "SELECT clock_timestamp()").Scan(&now))
	return now
}

// burstOf sends n concurrent requests of one agent, spread over apps, and returns how
// many passed; every other answer must be a well-formed agent-level refusal.
func burstOf(t *testing.T, apps []*testApp, n int, subject string) int {
	t.Helper()
	statuses := make([]*testResponse, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { statuses[i] = apps[i%len(apps)].limitedRead(t, subject) })
	}
	wg.Wait()
	for _, app := range apps {
		// A burst dials connections that may never carry a request; the server's
		// drain would wait seconds for them.
		app.client.CloseIdleConnections()
	}
	admitted := 0
	for _, r := range statuses {
		if r.Status == http.StatusOK {
			admitted++
			continue
		}
		requireRateLimited(t, r, contract.RateLevelAgent)
	}
	return admitted
}

// refillDuring is how many tokens a bucket of perMin gains in d.
func refillDuring(perMin int64, d time.Duration) int {
	return int(int64(d/time.Millisecond) * perMin / time.Minute.Milliseconds())
}

// TestRateLimitsSharedByReplicas: two replicas on one database with the postgres
// backend together admit the agent's budget of a burst, once: no more than the budget
// plus what refilled during the burst (timed on the database's clock) plus one, and no
// less than the budget, since a bucket under 128 a minute is one row that no check
// skips. Another agent still has its own budget.
func TestRateLimitsSharedByReplicas(t *testing.T) {
	t.Parallel()
	const budget = 30
	dsn := pgtest.NewDSN(t)
	limits := func(c *Config) {
		c.RateLimits, c.RateLimitBackend = ratelimit.RateLimits{AgentPerMin: budget}, RateLimitPostgres
	}
	apps := []*testApp{startAppOn(t, dsn, nil, limits), startAppOn(t, dsn, nil, limits)}
	pool := openPool(t, dsn)
	start := dbClock(t, pool)
	admitted := burstOf(t, apps, 4*budget, "burst")
	elapsed := dbClock(t, pool).Sub(start)
	require.GreaterOrEqual(t, admitted, budget)
	require.LessOrEqual(t, admitted, budget+refillDuring(budget, elapsed)+1, "burst took %s", elapsed)
	apps[1].limitedRead(t, "other").requireOK(t, http.StatusOK, nil)
}

// TestRateLimitsPerReplicaInMemory: with the memory backend every replica limits on
// its own, so each admits the whole budget of the same agent.
func TestRateLimitsPerReplicaInMemory(t *testing.T) {
	t.Parallel()
	const budget = 30
	dsn := pgtest.NewDSN(t)
	limits := func(c *Config) { c.RateLimits = ratelimit.RateLimits{AgentPerMin: budget} }
	apps := []*testApp{startAppOn(t, dsn, nil, limits), startAppOn(t, dsn, nil, limits)}
	for _, app := range apps {
		start := time.Now()
		admitted := burstOf(t, []*testApp{app}, 3*budget, "burst")
		require.GreaterOrEqual(t, admitted, budget)
		require.LessOrEqual(t, admitted, budget+refillDuring(budget, time.Since(start))+1)
	}
}

// TestRetryAfterOnTheMemoryClock: over HTTP, on a clock the test moves, a retry one
// millisecond before retryAfterMs is refused (with 1 ms left) and one at it passes.
func TestRetryAfterOnTheMemoryClock(t *testing.T) {
	t.Parallel()
	clock := ratelimittest.NewClock()
	app := startAppOn(t, pgtest.NewDSN(t), func(m *Main) { m.rateClock = clock },
		func(c *Config) { c.RateLimits = ratelimit.RateLimits{AgentPerMin: 6, GlobalPerMin: 1000} })
	for range 6 {
		app.limitedRead(t, "a").requireOK(t, http.StatusOK, nil)
	}
	retry := requireRateLimited(t, app.limitedRead(t, "a"), contract.RateLevelAgent)
	require.Equal(t, int64(10_000), retry)
	clock.Advance(time.Duration(retry-1) * time.Millisecond)
	require.Equal(t, int64(1), requireRateLimited(t, app.limitedRead(t, "a"), contract.RateLevelAgent))
	clock.Advance(time.Millisecond)
	app.limitedRead(t, "a").requireOK(t, http.StatusOK, nil)
	requireRateLimited(t, app.limitedRead(t, "a"), contract.RateLevelAgent)
}

// TestRetryAfterOnTheDatabaseClock: with the postgres backend, a retry as soon as
// the refusal arrives is refused, and one once retryAfterMs has passed on the
// database's clock passes. The early retry proves something only when it provably
// ran before the wait was over (it did unless the machine stalled for the whole
// wait), so the round repeats until it does.
func TestRetryAfterOnTheDatabaseClock(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewDSN(t)
	app := startAppOn(t, dsn, nil, func(c *Config) {
		c.RateLimits, c.RateLimitBackend = ratelimit.RateLimits{AgentPerMin: 100}, RateLimitPostgres
	})
	pool := openPool(t, dsn)
	proven := false
	for round := 0; round < 5 && !proven; round++ {
		subject := fmt.Sprint("agent-", round)
		var before time.Time
		var refused *testResponse
		for range 200 {
			before = dbClock(t, pool)
			if r := app.limitedRead(t, subject); r.Status != http.StatusOK {
				refused = r
				break
			}
		}
		require.NotNil(t, refused, "a budget of 100 runs dry")
		wait := time.Duration(requireRateLimited(t, refused, contract.RateLevelAgent)) * time.Millisecond
		require.LessOrEqual(t, wait, 600*time.Millisecond, "one token every 600 ms")
		early := app.limitedRead(t, subject)
		afterEarly := dbClock(t, pool)
		if afterEarly.Sub(before) < wait {
			requireRateLimited(t, early, contract.RateLevelAgent)
			proven = true
		}
		if early.Status == http.StatusOK {
			// A stalled early retry found the token and took it; the next one
			// comes a whole period after it.
			wait = 600 * time.Millisecond
		}
		// The refusal ran before afterEarly: from then, the wait it named is enough.
		for dbClock(t, pool).Sub(afterEarly) < wait {
			time.Sleep(wait / 10)
		}
		app.limitedRead(t, subject).requireOK(t, http.StatusOK, nil)
	}
	require.True(t, proven, "no early retry ran provably before the wait was over")
}

// TestRateLimitsCountAuthenticatedRequests: a request takes its tokens right after
// authentication, so one its token's capabilities then forbid counts too.
func TestRateLimitsCountAuthenticatedRequests(t *testing.T) {
	t.Parallel()
	app, minter := startSecuredApp(t, func(c *Config) { c.RateLimits = ratelimit.RateLimits{AgentPerMin: 2} })
	forbidden, allowed := minter.bearer(contract.CapContextRead), minter.bearer(contract.CapMessagesRead)
	body := map[string]any{"scope": map[string]any{"conversationId": "c"}}
	for range 2 {
		app.post(t, contract.RouteMessagesRecent.Path, body, "Authorization", forbidden).
			requireError(t, http.StatusForbidden, contract.CodeTokenForbidden)
	}
	requireRateLimited(t, app.post(t, contract.RouteMessagesRecent.Path, body, "Authorization", allowed), contract.RateLevelAgent)
	metrics := app.do(t, http.MethodGet, contract.PathMetrics, nil)
	require.Equal(t, http.StatusOK, metrics.Status)
	require.Contains(t, string(metrics.Body), `agent_context_ratelimit_refusals_total{level="agent"} 1`)
	require.Contains(t, string(metrics.Body), `agent_context_ratelimit_refusals_total{level="global"} 0`)
	// A request that fails authentication takes nothing (and is refused for that).
	app.post(t, contract.RouteMessagesRecent.Path, body, "Authorization", "Bearer nope").
		requireError(t, http.StatusUnauthorized, contract.CodeTokenInvalid)
	app.do(t, http.MethodGet, "/health", nil).requireOK(t, http.StatusOK, nil)
}

func TestRateLimitConfig(t *testing.T) {
	t.Parallel()
	load := func(env map[string]string) (Config, error) {
		return LoadConfig(func(k string) string { return env[k] })
	}
	cfg, err := load(nil)
	require.NoError(t, err)
	require.Equal(t, ratelimit.RateLimits{AgentPerMin: 6000}, cfg.RateLimits, "the contract's defaults")
	require.Equal(t, RateLimitMemory, cfg.RateLimitBackend)

	cfg, err = load(map[string]string{
		"LEAN_CTX_RATE_LIMIT_GLOBAL_PER_MIN": "3600", "LCTX_RATE_LIMIT_GLOBAL_PER_MIN": "1",
		"LCTX_RATE_LIMIT_AGENT_PER_MIN":         "1800",
		"AGENT_CONTEXT_RATE_LIMIT_TOOL_PER_MIN": "0", "LEAN_CTX_RATE_LIMIT_TOOL_PER_MIN": "1800",
		"AGENT_CONTEXT_RATE_LIMIT_BACKEND": "postgres",
	})
	require.NoError(t, err)
	require.Equal(t, ratelimit.RateLimits{GlobalPerMin: 3600, AgentPerMin: 1800}, cfg.RateLimits,
		"the seed's names are aliases; the contract's name comes first, then LEAN_CTX_, then LCTX_")
	require.Equal(t, RateLimitPostgres, cfg.RateLimitBackend)

	for name, value := range map[string]string{
		"AGENT_CONTEXT_RATE_LIMIT_AGENT_PER_MIN":  "-1",
		"LEAN_CTX_RATE_LIMIT_GLOBAL_PER_MIN":      "-5",
		"LCTX_RATE_LIMIT_TOOL_PER_MIN":            "ten",
		"AGENT_CONTEXT_RATE_LIMIT_GLOBAL_PER_MIN": "1000000001",
		"AGENT_CONTEXT_RATE_LIMIT_BACKEND":        "redis",
	} {
		_, err := load(map[string]string{name: value})
		require.ErrorContains(t, err, name, value)
		require.NotContains(t, err.Error(), "\n")
	}
}

// TestBadPricingFileStopsTheStart: a pricing file that is unreadable or breaks the
// format stops serve before it listens, with one line naming the variable and what is
// wrong.
func TestBadPricingFileStopsTheStart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for name, tc := range map[string]struct{ content, want string }{
		"not JSON":             {`models: {}`, "invalid character"},
		"YAML is not accepted": {"models:\n  gpt: {inputPerMTok: 1}\n", "invalid character"},
		"unknown member":       {`{"models": {}, "currency": "EUR"}`, "currency"},
		"misspelt price":       {`{"models": {"m": {"inputPerMtok": 1, "outputPerMTok": 1}}}`, "inputPerMtok"},
		"missing price":        {`{"models": {"m": {"inputPerMTok": 1}}}`, "models.m.outputPerMTok is required"},
		"negative price":       {`{"models": {"m": {"inputPerMTok": -1, "outputPerMTok": 1}}}`, "must not be negative"},
		"price as a string":    {`{"models": {"m": {"inputPerMTok": "1", "outputPerMTok": 1}}}`, "plain non-negative decimal"},
		"exponent":             {`{"models": {"m": {"inputPerMTok": 1e-3, "outputPerMTok": 1}}}`, "plain non-negative decimal"},
		"too many decimals":    {`{"models": {"m": {"inputPerMTok": 0.0000000000001, "outputPerMTok": 1}}}`, "12 after it"},
		"alias of nothing":     {`{"models": {}, "aliases": {"a": "m"}}`, `"m" is not in models`},
		"alias of itself":      {`{"models": {"m": {"inputPerMTok": 1, "outputPerMTok": 1}}, "aliases": {"m": "m"}}`, "model of its own"},
		"bad model name":       {`{"models": {"a b": {"inputPerMTok": 1, "outputPerMTok": 1}}}`, "not a model name"},
		"duplicate model":      {`{"models": {"m": {"inputPerMTok": 1, "outputPerMTok": 1}, "m": {"inputPerMTok": 2, "outputPerMTok": 2}}}`, "duplicate"},
		"bad fallback":         {`{"fallback": {"outputPerMTok": 1}}`, "fallback.inputPerMTok is required"},
		"missing file":         {"", "no such file"},
	} {
		path := filepath.Join(dir, strings.ReplaceAll(name, " ", "-")+".json")
		if tc.content != "" {
			require.NoError(t, os.WriteFile(path, []byte(tc.content), 0o600))
		}
		m := NewMain(Config{Bind: "127.0.0.1:0", PricingFile: path, DatabaseURL: "postgres://unused", LogLevel: 8})
		err := m.Run(context.Background())
		require.Error(t, err, name)
		require.Contains(t, err.Error(), "AGENT_CONTEXT_PRICING_FILE", name)
		require.Contains(t, err.Error(), tc.want, name)
		require.NotContains(t, err.Error(), "\n", name)
		require.NoError(t, m.Close())
	}
}

// decodeCosts reads a cost report keeping its numbers as they were written.
func decodeCosts(t *testing.T, r *testResponse) contract.CostsResponse {
	t.Helper()
	require.Equal(t, http.StatusOK, r.Status, "body: %s", r.Body)
	var report contract.CostsResponse
	require.NoError(t, json.Unmarshal(r.Body, &report), "body: %s", r.Body)
	return report
}
