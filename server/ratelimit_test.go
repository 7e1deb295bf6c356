package server

import (
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/adapters/ratelimit/local"
	"github.com/agent-context/agent-context/adapters/ratelimit/ratelimittest"
	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/gate"
	"github.com/agent-context/agent-context/runtime/ratelimit"
)

// rateBundle is a server in static-token mode whose limits run on a clock the test
// moves, with its refusal counter in a registry of its own.
func rateBundle(t *testing.T, limits ratelimit.RateLimits) (*testBundle, *ratelimittest.Clock) {
	t.Helper()
	clock := ratelimittest.NewClock()
	reg := prometheus.NewRegistry()
	b := setup(t, Config{Gate: gate.New(gate.Config{Auth: gate.Auth{StaticToken: "secret"}, RateLimiter: gate.NewRateLimiter(gate.RateLimiting{
		Limits:     ratelimit.NewRateLimit(local.NewLimiter(clock), limits),
		Registerer: reg,
	})})})
	b.registry = reg
	return b, clock
}

func (b *testBundle) echo(t *testing.T, subject string) response {
	t.Helper()
	return b.do(t, http.MethodPost, testRoutePath, "application/json", `{"name":"x"}`,
		"Authorization", "Bearer secret", "x-infra-subject", subject)
}

func (b *testBundle) refusals(level string) float64 {
	families, _ := b.registry.Gather()
	for _, f := range families {
		if f.GetName() != gate.MetricsNamespace+"_ratelimit_refusals_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "level" && l.GetValue() == level {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// TestRateLimitRefusal: the budget's requests pass, the next is 429 RATE_LIMITED with
// the wait in details.retryAfterMs and in Retry-After (whole seconds, rounded up), the
// level in details.level and in the refusal counter; a retry after the wait passes.
func TestRateLimitRefusal(t *testing.T) {
	t.Parallel()
	b, clock := rateBundle(t, ratelimit.RateLimits{AgentPerMin: 60, GlobalPerMin: 2})
	for range 2 {
		require.Equal(t, http.StatusOK, b.echo(t, "a").status)
	}
	r := b.echo(t, "a")
	e := requireEnvelope(t, r, http.StatusTooManyRequests, contract.CodeRateLimited)
	require.Equal(t, map[string]any{"retryAfterMs": float64(30000), "level": "global"}, e.Details)
	require.Equal(t, "30", r.header.Get("Retry-After"))
	require.Equal(t, float64(1), b.refusals(contract.RateLevelGlobal))
	require.Zero(t, b.refusals(contract.RateLevelAgent))

	clock.Advance(29_500 * time.Millisecond)
	r = b.echo(t, "a")
	e = requireEnvelope(t, r, http.StatusTooManyRequests, contract.CodeRateLimited)
	require.Equal(t, float64(500), e.Details["retryAfterMs"])
	require.Equal(t, "1", r.header.Get("Retry-After"), "rounded up to a whole second")
	clock.Advance(500 * time.Millisecond)
	require.Equal(t, http.StatusOK, b.echo(t, "a").status)
	require.Equal(t, float64(2), b.refusals(contract.RateLevelGlobal))
}

// TestRateLimitLevels: the agent level is per subject, the tool level per route, and
// public routes and callers that fail authentication take no token.
func TestRateLimitLevels(t *testing.T) {
	t.Parallel()
	b, _ := rateBundle(t, ratelimit.RateLimits{AgentPerMin: 1, ToolPerMin: 3})
	require.Equal(t, http.StatusOK, b.echo(t, "a").status)
	e := requireEnvelope(t, b.echo(t, "a"), http.StatusTooManyRequests, contract.CodeRateLimited)
	require.Equal(t, contract.RateLevelAgent, e.Details["level"])
	require.Equal(t, float64(60000), e.Details["retryAfterMs"])
	for range 3 {
		requireEnvelope(t, b.do(t, http.MethodPost, testRoutePath, "application/json", `{}`,
			"Authorization", "Bearer wrong"), http.StatusUnauthorized, contract.CodeTokenInvalid)
		require.Equal(t, http.StatusOK, b.do(t, http.MethodGet, "/health", "", "").status)
	}
	require.Equal(t, http.StatusOK, b.echo(t, "b").status)
	require.Equal(t, http.StatusOK, b.echo(t, "c").status)
	e = requireEnvelope(t, b.echo(t, "d"), http.StatusTooManyRequests, contract.CodeRateLimited)
	require.Equal(t, contract.RateLevelTool, e.Details["level"], "three calls of the route in the tenant")
	require.Equal(t, float64(20000), e.Details["retryAfterMs"])
	// Another route of the tenant has its own tool bucket.
	r := b.do(t, http.MethodPost, contract.RouteWindowsGet.Path, "application/json", `{}`,
		"Authorization", "Bearer secret", "x-infra-subject", "e")
	requireEnvelope(t, r, http.StatusBadRequest, contract.CodeValidationFailed)
	require.Equal(t, float64(1), b.refusals(contract.RateLevelAgent))
	require.Equal(t, float64(1), b.refusals(contract.RateLevelTool))
}
