package gate

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
	"github.com/agent-context/agent-context/runtime/ratelimit"
)

// MetricsNamespace prefixes every metric of the service (docs/observability.md).
const MetricsNamespace = "agent_context"

// RateLimiting configures the rate limiting of authenticated requests
// (docs/rate-limits.md).
type RateLimiting struct {
	// Limits checks every authenticated request; nil admits every one.
	Limits *ratelimit.RateLimit
	// Registerer receives the counter of refusals by level; nil counts nothing.
	Registerer prometheus.Registerer
}

// RateLimiter is the gate's side of rate limiting: the check and its refusal counter.
// One serves every door of a process (the API, MCP, JSON-RPC and the console), so that
// a subject's budget is one budget whichever door it comes through. A nil
// *RateLimiter admits every request.
type RateLimiter struct {
	limits  *ratelimit.RateLimit
	refused *prometheus.CounterVec
}

// NewRateLimiter returns the rate limiter of cfg, registering its refusal counter.
func NewRateLimiter(cfg RateLimiting) *RateLimiter {
	r := &RateLimiter{limits: cfg.Limits}
	if cfg.Registerer != nil {
		r.refused = prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: MetricsNamespace, Subsystem: "ratelimit", Name: "refusals_total",
			Help: "Requests refused with RATE_LIMITED, by the level that refused them (global, agent, tool).",
		}, []string{"level"})
		cfg.Registerer.MustRegister(r.refused)
		// Every level shows from the start, at 0, so that a rate() over it is defined.
		for _, level := range []string{contract.RateLevelGlobal, contract.RateLevelAgent, contract.RateLevelTool} {
			r.refused.WithLabelValues(level)
		}
	}
	return r
}

// take takes the tokens a request of p on the tool named name needs, or refuses it
// with RATE_LIMITED.
func (r *RateLimiter) take(ctx context.Context, name string, p runtime.Principal) error {
	if r == nil || r.limits == nil {
		return nil
	}
	err := r.limits.Check(ctx, p, name)
	if re, ok := err.(*runtime.Error); ok && re.Code == contract.CodeRateLimited && r.refused != nil {
		if level, ok := re.Details["level"].(string); ok {
			r.refused.WithLabelValues(level).Inc()
		}
	}
	return err
}
