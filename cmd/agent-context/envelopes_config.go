package main

import (
	"fmt"
	"strconv"
)

// loadEnvelopeConfig reads AGENT_CONTEXT_A2A_MAX_ENVELOPES: how many handoff_bundle
// and context_package payloads a scope keeps (default 10,000; 1 GiB of them at most
// either way), the oldest dropped first.
func loadEnvelopeConfig(getenv func(string) string, cfg *Config) []string {
	v := getenv("AGENT_CONTEXT_A2A_MAX_ENVELOPES")
	if v == "" {
		return nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return []string{fmt.Sprintf("AGENT_CONTEXT_A2A_MAX_ENVELOPES must be a positive integer, got %q", v)}
	}
	cfg.A2AMaxEnvelopes = n
	return nil
}
