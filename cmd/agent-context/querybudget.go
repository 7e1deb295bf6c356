package main

import (
	"fmt"
	"strconv"
	"time"
)

// loadQueryBudgetConfig reads what the query embedding of one recall may cost:
// AGENT_CONTEXT_EMBEDDING_QUERY_TIMEOUT (retries included), the circuit breaker's
// AGENT_CONTEXT_EMBEDDING_CIRCUIT_FAILURES and _CIRCUIT_OPEN, and the query vectors
// kept, AGENT_CONTEXT_EMBEDDING_QUERY_CACHE (0: none). Unset values keep the
// defaults of memory.QueryBudget; it returns one message per bad value.
func loadQueryBudgetConfig(getenv func(string) string, cfg *Config) []string {
	var errs []string
	positive := func(name string, dst *time.Duration) {
		v := getenv(name)
		if v == "" {
			return
		}
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			errs = append(errs, fmt.Sprintf("%s must be a positive duration such as 2s, got %q", name, v))
			return
		}
		*dst = d
	}
	positive("AGENT_CONTEXT_EMBEDDING_QUERY_TIMEOUT", &cfg.EmbeddingQuery.Timeout)
	positive("AGENT_CONTEXT_EMBEDDING_CIRCUIT_OPEN", &cfg.EmbeddingQuery.CircuitOpen)
	if v := getenv("AGENT_CONTEXT_EMBEDDING_CIRCUIT_FAILURES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			errs = append(errs, fmt.Sprintf("AGENT_CONTEXT_EMBEDDING_CIRCUIT_FAILURES must be an integer 1–1000, got %q", v))
		} else {
			cfg.EmbeddingQuery.CircuitFailures = n
		}
	}
	if v := getenv("AGENT_CONTEXT_EMBEDDING_QUERY_CACHE"); v != "" {
		n, err := strconv.Atoi(v)
		switch {
		case err != nil || n < 0 || n > 1_000_000:
			errs = append(errs, fmt.Sprintf("AGENT_CONTEXT_EMBEDDING_QUERY_CACHE must be an integer 0–1000000, got %q", v))
		case n == 0:
			cfg.EmbeddingQuery.CacheEntries = -1
		default:
			cfg.EmbeddingQuery.CacheEntries = n
		}
	}
	return errs
}
