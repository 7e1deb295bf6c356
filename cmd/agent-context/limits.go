package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/agent-context/agent-context/adapters/postgres"
	"github.com/agent-context/agent-context/adapters/ratelimit/local"
	"github.com/agent-context/agent-context/runtime/cost"
	"github.com/agent-context/agent-context/runtime/ratelimit"
)

// loadPricing reads and checks the pricing file; no file means no prices (every
// model costs 0). A bad file stops the start with one line naming it.
func loadPricing(path string) (cost.Pricing, error) {
	if path == "" {
		return cost.Pricing{}, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return cost.Pricing{}, fmt.Errorf("AGENT_CONTEXT_PRICING_FILE: %w", err)
	}
	pricing, err := cost.ParsePricing(data)
	if err != nil {
		return cost.Pricing{}, fmt.Errorf("AGENT_CONTEXT_PRICING_FILE %s: %v", path, err)
	}
	return pricing, nil
}

// rateSweepInterval is how often serve deletes the postgres limiter's idle buckets;
// rateSweepBatch bounds one statement of it.
const (
	rateSweepInterval = time.Minute
	rateSweepBatch    = 10_000
)

// startRateLimits builds the configured rate limiting (nil when every level is off).
// The postgres limiter gets a pool of its own and a goroutine that sweeps its idle
// buckets until Close. The pool's sessions commit without waiting for the disk, so
// that a bucket's row lock lasts the statement only (a crash may lose the last
// moments of takes: buckets a little fuller, never a record lost), and run the check
// on its generic plan: planning it each time costs ten times its execution. Not on
// Citus, which plans a distributed statement for its arguments and refuses a generic
// plan of the check ("could not create distributed plan").
func (m *Main) startRateLimits(ctx context.Context, dsn string) (*ratelimit.RateLimit, error) {
	cfg := m.Config
	if cfg.RateLimits.Off() {
		return nil, nil
	}
	if cfg.RateLimitBackend == RateLimitMemory {
		return ratelimit.NewRateLimit(local.NewLimiter(m.rateClock), cfg.RateLimits), nil
	}
	settings := map[string]string{"synchronous_commit": "off", "plan_cache_mode": "force_generic_plan"}
	citus, err := postgres.OnCitus(ctx, m.pool)
	if err != nil {
		return nil, fmt.Errorf("rate limits: %w", err)
	}
	if citus {
		delete(settings, "plan_cache_mode")
	}
	m.ratePool, err = postgres.NewPool(ctx, dsn, postgres.PoolOptions{
		// Every request checks once: as many connections as the main pool has.
		MaxConns:         cfg.MaxConns,
		StatementTimeout: cfg.StatementTimeout,
		ApplicationName:  "agent-context-ratelimit",
		Settings:         settings,
	})
	if err != nil {
		return nil, fmt.Errorf("rate limits: %w", err)
	}
	limiter := postgres.NewRateLimiter(m.ratePool, nil)
	stop, done := make(chan struct{}), make(chan struct{})
	m.stopSweep = func() { close(stop); <-done }
	go func() {
		defer close(done)
		ticker := time.NewTicker(rateSweepInterval)
		defer ticker.Stop()
		for {
			select {
			case <-stop:
				return
			case <-ticker.C:
				m.sweepRateLimits(limiter, stop)
			}
		}
	}()
	return ratelimit.NewRateLimit(limiter, cfg.RateLimits), nil
}

// sweepRateLimits deletes the idle buckets in batches until none is left.
func (m *Main) sweepRateLimits(limiter *postgres.RateLimiter, stop <-chan struct{}) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	for {
		n, err := limiter.SweepRateLimits(ctx, rateSweepBatch)
		if err != nil {
			if ctx.Err() == nil {
				m.Log.Warn("sweeping idle rate-limit buckets failed", slog.Any("error", err))
			}
			return
		}
		if n < rateSweepBatch {
			return
		}
	}
}
