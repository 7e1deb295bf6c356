package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/agent-context/agent-context/a2arpc"
)

// A2ALiveConfig configures the live half of the Google A2A endpoint: streams and push
// notifications.
type A2ALiveConfig struct {
	// StreamMax is how long a stream lives at most (AGENT_CONTEXT_A2A_STREAM_MAX,
	// default 30 min).
	StreamMax time.Duration
	// StreamKeepAlive is how long a stream stays silent at most (15 s; no variable:
	// tests shorten it).
	StreamKeepAlive time.Duration
	// PushAllowHosts are the webhook hosts that may be reached over plain http and at
	// loopback, private, link-local, multicast or other special-purpose addresses
	// (AGENT_CONTEXT_A2A_PUSH_ALLOW_HOSTS, comma-separated host names or IPs).
	PushAllowHosts []string
}

// loadA2ALiveConfig reads AGENT_CONTEXT_A2A_STREAM_MAX and
// AGENT_CONTEXT_A2A_PUSH_ALLOW_HOSTS into cfg and returns one message per bad value.
func loadA2ALiveConfig(getenv func(string) string, cfg *Config) []string {
	var errs []string
	cfg.A2ALive.StreamMax, cfg.A2ALive.StreamKeepAlive = a2arpc.DefaultStreamMax, a2arpc.DefaultStreamKeepAlive
	if v := getenv("AGENT_CONTEXT_A2A_STREAM_MAX"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			errs = append(errs, fmt.Sprintf("AGENT_CONTEXT_A2A_STREAM_MAX must be a positive Go duration such as 30m, got %q", v))
		} else {
			cfg.A2ALive.StreamMax = d
		}
	}
	for _, host := range strings.Split(getenv("AGENT_CONTEXT_A2A_PUSH_ALLOW_HOSTS"), ",") {
		host = strings.ToLower(strings.TrimSpace(host))
		switch {
		case host == "":
		case strings.ContainsAny(host, "/@ "):
			errs = append(errs, fmt.Sprintf("AGENT_CONTEXT_A2A_PUSH_ALLOW_HOSTS holds host names or IP addresses, got %q", host))
		default:
			cfg.A2ALive.PushAllowHosts = append(cfg.A2ALive.PushAllowHosts, strings.Trim(host, "[]"))
		}
	}
	return errs
}
