package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/agent-context/agent-context/a2arpc"
	"github.com/agent-context/agent-context/runtime"
)

// A2ALiveConfig configures the live half of the Google A2A endpoint: streams and push
// notifications.
type A2ALiveConfig struct {
	// StreamMax is how long a stream lives at most (AGENT_CONTEXT_A2A_STREAM_MAX,
	// default 30 min).
	StreamMax time.Duration
	// StreamKeepAlive is how long a stream stays silent at most
	// (AGENT_CONTEXT_A2A_STREAM_KEEPALIVE, default 15 s).
	StreamKeepAlive time.Duration
	// MaxWaitersPerTenant bounds a tenant's open streams and long polls on this
	// replica (AGENT_CONTEXT_MAX_WAITERS_PER_TENANT, default
	// runtime.DefaultMaxWaitersPerTenant).
	MaxWaitersPerTenant int
	// PushAllowHosts are the webhook hosts that may be reached over plain http and at
	// loopback, private, link-local, multicast or other special-purpose addresses
	// (AGENT_CONTEXT_A2A_PUSH_ALLOW_HOSTS, comma-separated host names or IPs).
	PushAllowHosts []string
}

// loadA2ALiveConfig reads AGENT_CONTEXT_A2A_STREAM_MAX,
// AGENT_CONTEXT_A2A_STREAM_KEEPALIVE, AGENT_CONTEXT_MAX_WAITERS_PER_TENANT and
// AGENT_CONTEXT_A2A_PUSH_ALLOW_HOSTS into cfg and returns one message per bad value.
func loadA2ALiveConfig(getenv func(string) string, cfg *Config) []string {
	var errs []string
	cfg.A2ALive.StreamMax, cfg.A2ALive.StreamKeepAlive = a2arpc.DefaultStreamMax, a2arpc.DefaultStreamKeepAlive
	cfg.A2ALive.MaxWaitersPerTenant = runtime.DefaultMaxWaitersPerTenant
	for _, d := range []struct {
		name, example string
		into          *time.Duration
	}{
		{"AGENT_CONTEXT_A2A_STREAM_MAX", "30m", &cfg.A2ALive.StreamMax},
		{"AGENT_CONTEXT_A2A_STREAM_KEEPALIVE", "15s", &cfg.A2ALive.StreamKeepAlive},
	} {
		if v := getenv(d.name); v != "" {
			parsed, err := time.ParseDuration(v)
			if err != nil || parsed <= 0 {
				errs = append(errs, fmt.Sprintf("%s must be a positive Go duration such as %s, got %q", d.name, d.example, v))
			} else {
				*d.into = parsed
			}
		}
	}
	if v := getenv("AGENT_CONTEXT_MAX_WAITERS_PER_TENANT"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			errs = append(errs, fmt.Sprintf("AGENT_CONTEXT_MAX_WAITERS_PER_TENANT must be a positive integer, got %q", v))
		} else {
			cfg.A2ALive.MaxWaitersPerTenant = n
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
