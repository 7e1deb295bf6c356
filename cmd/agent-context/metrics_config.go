package main

import (
	"fmt"
	"time"

	"github.com/agent-context/agent-context/adapters/postgres/pgmetrics"
)

// loadMetricsConfig reads AGENT_CONTEXT_METRICS_REFRESH: how often, at most, the
// gauges that count rows in the database (A2A tasks and messages, the projection's
// backlog) run their statements, whatever the scrape rate of /metrics.
func loadMetricsConfig(getenv func(string) string, cfg *Config) []string {
	cfg.MetricsRefresh = pgmetrics.DefaultRefresh
	v := getenv("AGENT_CONTEXT_METRICS_REFRESH")
	if v == "" {
		return nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < time.Second {
		return []string{fmt.Sprintf("AGENT_CONTEXT_METRICS_REFRESH must be a duration of at least 1s, got %q", v)}
	}
	cfg.MetricsRefresh = d
	return nil
}
