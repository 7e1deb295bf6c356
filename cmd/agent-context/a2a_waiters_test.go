package main

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/contract"
)

// a2aWaiters is the replica's agent_context_a2a_waiters: the streams and long polls
// admitted and not yet answered.
func a2aWaiters(t testing.TB, m *Main) int {
	t.Helper()
	gathered, err := m.registry.Gather()
	require.NoError(t, err)
	for _, f := range gathered {
		if f.GetName() == "agent_context_a2a_waiters" {
			return int(f.GetMetric()[0].GetGauge().GetValue())
		}
	}
	t.Fatal("no agent_context_a2a_waiters")
	return 0
}

// A tenant's waiters (long polls, streams) are bounded per replica: past the bound
// every door refuses a new one as its rate limits refuse, a poll that does not wait is
// no waiter, and a waiter that returns frees its place.
func TestA2AWaitersPerTenantAreBounded(t *testing.T) {
	t.Parallel()
	app := startApp(t, func(c *Config) { c.A2ALive.MaxWaitersPerTenant = 2 })
	alice, bob := headerAgent(app, "alice"), headerAgent(app, "bob")
	waitFor := func(kind string) map[string]any {
		return map[string]any{"waitMs": 30_000, "filter": map[string]any{"kinds": []string{kind}}}
	}
	full := func() bool { return a2aWaiters(t, app.main) == 2 }
	registered := alice.pollInBackground(t, waitFor(contract.EventAgentRegistered))
	posted := bob.pollInBackground(t, waitFor(contract.EventMessagePosted))
	require.Eventually(t, full, time.Minute, 10*time.Millisecond)

	r := alice.post(t, contract.RouteA2AEventsPoll, waitFor(contract.EventMessagePosted))
	refusal := r.requireError(t, http.StatusTooManyRequests, contract.CodeRateLimited)
	require.Equal(t, "1", r.Header.Get("Retry-After"))
	require.Equal(t, "waiters", refusal.Details["level"])
	require.EqualValues(t, 1000, refusal.Details["retryAfterMs"])
	require.EqualValues(t, 2, refusal.Details["limit"])

	r = alice.post(t, contract.RouteA2AJSONRPC, `{"jsonrpc": "2.0", "id": 1, "method": "SubscribeToTask", "params": {"id": "t1"}}`)
	require.Equal(t, "waiters", r.requireError(t, http.StatusTooManyRequests, contract.CodeRateLimited).Details["level"])
	require.Equal(t, "1", r.Header.Get("Retry-After"))

	s := mcpConnect(t, app, "x-infra-subject", "alice")
	refusal = mcpRefused(t, s, contract.ToolCtxAgent, map[string]any{"action": "poll_events", "wait_ms": 30_000}, contract.CodeRateLimited)
	require.Equal(t, "waiters", refusal.Details["level"])
	mcpOK(t, s, contract.ToolCtxAgent, map[string]any{"action": "poll_events"}, nil)
	alice.poll(t, map[string]any{"waitMs": 0})

	// The poll for messages returns; its place goes to the next waiter.
	alice.ok(t, contract.RouteA2AMessagesPost, map[string]any{"content": "wake up"}, nil)
	require.NotEmpty(t, (<-posted).Events)
	require.False(t, full())
	again := bob.pollInBackground(t, waitFor(contract.EventAgentRegistered))
	require.Eventually(t, full, time.Minute, 10*time.Millisecond)
	alice.post(t, contract.RouteA2AEventsPoll, waitFor(contract.EventMessagePosted)).
		requireError(t, http.StatusTooManyRequests, contract.CodeRateLimited)

	alice.ok(t, contract.RouteA2AAgentsRegister, map[string]any{"agentType": "planner"}, nil)
	require.NotEmpty(t, (<-registered).Events)
	require.NotEmpty(t, (<-again).Events)

	// A client that leaves frees its place too.
	ctx, cancel := context.WithCancel(context.Background())
	left := make(chan error, 1)
	go func() {
		_, err := app.send(ctx, http.MethodPost, contract.RouteA2AEventsPoll.Path, waitFor(contract.EventWindowCreated),
			"x-infra-subject", "alice")
		left <- err
	}()
	stay := bob.pollInBackground(t, map[string]any{"waitMs": 5000, "filter": map[string]any{"kinds": []string{contract.EventWindowCreated}}})
	require.Eventually(t, full, time.Minute, 10*time.Millisecond)
	cancel()
	require.Error(t, <-left)
	require.Eventually(t, func() bool { return !full() }, time.Minute, 10*time.Millisecond)
	require.Empty(t, (<-stay).Events)
}
