package main

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/contract/client"
)

// scrape reads GET /metrics through the typed client and parses it with the
// Prometheus text parser.
func scrape(t *testing.T, c *client.Client) map[string]*dto.MetricFamily {
	t.Helper()
	body, err := c.Metrics(context.Background())
	require.NoError(t, err)
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	require.NoError(t, err)
	return families
}

// sample finds the metric of family name whose labels include labels, or nil.
func sample(families map[string]*dto.MetricFamily, name string, labels map[string]string) *dto.Metric {
	f := families[name]
	if f == nil {
		return nil
	}
next:
	for _, m := range f.GetMetric() {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		for k, v := range labels {
			if have[k] != v {
				continue next
			}
		}
		return m
	}
	return nil
}

func counterValue(t *testing.T, families map[string]*dto.MetricFamily, name string, labels map[string]string) float64 {
	t.Helper()
	m := sample(families, name, labels)
	require.NotNil(t, m, "%s%v is not exported", name, labels)
	return m.GetCounter().GetValue()
}

// TestMetricsAfterTraffic sends known traffic and reads it back from GET /metrics:
// requests and latency by route template and status, errors by code, an unknown path
// under "unmatched", pool statistics, the job queue and job runs, and the build.
func TestMetricsAfterTraffic(t *testing.T) {
	t.Parallel()
	app := startApp(t, func(c *Config) { c.ServiceToken = "static-secret" })
	c := client.New(client.WithBaseURL(app.base), client.WithBearerToken("static-secret"))
	anon := client.New(client.WithBaseURL(app.base))
	ctx := context.Background()
	conv := contract.ConversationScope{ConversationID: "conv-m"}
	for range 3 {
		_, err := c.RecentMessages(ctx, &contract.RecentMessagesRequest{Scope: conv})
		require.NoError(t, err)
	}
	for range 2 {
		_, err := c.RecentMessages(ctx, &contract.RecentMessagesRequest{Scope: conv, Limit: ptrTo(0)})
		requireCode(t, err, http.StatusBadRequest, contract.CodeValidationFailed)
	}
	_, err := anon.RecentMessages(ctx, &contract.RecentMessagesRequest{Scope: conv})
	requireCode(t, err, http.StatusUnauthorized, contract.CodeTokenMissing)
	for _, path := range []string{"/nope/1", "/nope/2"} {
		app.do(t, http.MethodGet, path, nil).requireError(t, http.StatusNotFound, contract.CodeRouteNotFound)
	}
	del, _, err := c.DeleteConversation(ctx, &contract.DeleteConversationRequest{ConversationID: "conv-m"})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		op, err := c.GetOperation(ctx, &contract.GetOperationRequest{OperationID: del.Operation.ID})
		require.NoError(t, err)
		return op.Operation.State == contract.OperationSucceeded
	}, time.Minute, 20*time.Millisecond)

	families := scrape(t, c)
	recent := contract.RouteMessagesRecent.Path
	requests := func(route, status string) float64 {
		return counterValue(t, families, "agent_context_http_requests_total", map[string]string{"route": route, "status": status})
	}
	require.Equal(t, 3.0, requests(recent, "200"))
	require.Equal(t, 2.0, requests(recent, "400"))
	require.Equal(t, 1.0, requests(recent, "401"))
	require.Equal(t, 2.0, requests("unmatched", "404"), "unknown paths share one label")
	require.Equal(t, 1.0, requests(contract.RouteConversationsDelete.Path, "202"))
	require.Nil(t, sample(families, "agent_context_http_requests_total", map[string]string{"route": "/nope/1"}))

	latency := sample(families, "agent_context_http_request_duration_seconds", map[string]string{"route": recent, "status": "200", "method": "POST"})
	require.NotNil(t, latency)
	require.Equal(t, uint64(3), latency.GetHistogram().GetSampleCount())
	require.Positive(t, latency.GetHistogram().GetSampleSum())

	errorsBy := func(code string) float64 {
		return counterValue(t, families, "agent_context_http_errors_total", map[string]string{"route": recent, "code": code})
	}
	require.Equal(t, 2.0, errorsBy(contract.CodeValidationFailed))
	require.Equal(t, 1.0, errorsBy(contract.CodeTokenMissing))
	require.Equal(t, 2.0, counterValue(t, families, "agent_context_http_errors_total",
		map[string]string{"route": "unmatched", "code": contract.CodeRouteNotFound}))
	require.Equal(t, 1.0, sample(families, "agent_context_http_requests_in_flight", nil).GetGauge().GetValue(), "the scrape itself")

	require.Positive(t, sample(families, "agent_context_db_pool_max_connections", nil).GetGauge().GetValue())
	require.Positive(t, counterValue(t, families, "agent_context_db_pool_acquires_total", nil))
	require.NotNil(t, sample(families, "agent_context_jobs_queued", map[string]string{"queue": "default", "state": "available"}))
	require.NotNil(t, sample(families, "agent_context_jobs_oldest_available_age_seconds", map[string]string{"queue": "default"}))
	require.GreaterOrEqual(t, counterValue(t, families, "agent_context_jobs_runs_total",
		map[string]string{"kind": "agent_context_operation", "outcome": "completed"}), 1.0)
	build := sample(families, "agent_context_build_info", map[string]string{"version": version})
	require.NotNil(t, build)
	require.Equal(t, 1.0, build.GetGauge().GetValue())
	require.NotNil(t, families["go_goroutines"])
	require.True(t, strings.HasPrefix(families["agent_context_http_requests_total"].GetHelp(), "HTTP requests"))
}
