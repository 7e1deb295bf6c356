package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/agent-context/agent-context/adapters/telemetry"
	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/contract/client"
)

// jsonLogLines parses the JSON log lines written to b.
func jsonLogLines(b *syncBuffer) []map[string]any {
	var out []map[string]any
	for _, line := range strings.Split(b.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil {
			out = append(out, m)
		}
	}
	return out
}

// TestMCPObservability: a tool call is logged, counted and traced under its tool's
// name (route mcp:<tool>), with the code of a tool error, and its statements are
// children of its span.
func TestMCPObservability(t *testing.T) {
	t.Parallel()
	recorder := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(recorder))
	t.Cleanup(func() { require.NoError(t, tp.Shutdown(context.Background())) })
	logs := &syncBuffer{}
	app := startMain(t, func(m *Main) {
		m.tracing = telemetry.NewWithProvider(tp)
		m.Log = slog.New(slog.NewJSONHandler(logs, nil))
	})
	s := mcpConnect(t, app)
	mcpOK(t, s, contract.ToolMemoryRemember, map[string]any{"id": "e-o", "content": "observed"}, nil)
	mcpRefused(t, s, contract.ToolMemoryGet, map[string]any{"entry_id": "e-none"}, contract.CodeNotFound)

	families := scrape(t, client.New(client.WithBaseURL(app.base)))
	require.EqualValues(t, 1, counterValue(t, families, "agent_context_http_requests_total",
		map[string]string{"method": "POST", "route": "mcp:memory_remember", "status": "200"}))
	require.EqualValues(t, 1, counterValue(t, families, "agent_context_http_errors_total",
		map[string]string{"route": "mcp:memory_get", "code": contract.CodeNotFound}))
	require.NotNil(t, sample(families, "agent_context_http_requests_total", map[string]string{"route": contract.PathMCP}),
		"initialize and the other methods count under the route")

	require.Eventually(t, func() bool {
		for _, line := range jsonLogLines(logs) {
			if line["msg"] == "request" && line["route"] == "mcp:memory_get" && line["code"] == contract.CodeNotFound {
				return true
			}
		}
		return false
	}, 10*time.Second, 10*time.Millisecond, "the tool call's request line names the tool and the code")

	var server sdktrace.ReadOnlySpan
	require.Eventually(t, func() bool {
		for _, sp := range recorder.Ended() {
			if sp.SpanKind() == trace.SpanKindServer && sp.Name() == "POST mcp:memory_remember" {
				server = sp
				return true
			}
		}
		return false
	}, 10*time.Second, 10*time.Millisecond)
	require.Equal(t, "mcp:memory_remember", attrs(server)["http.route"].AsString())
	children := 0
	for _, sp := range recorder.Ended() {
		if sp.Parent().SpanID() == server.SpanContext().SpanID() {
			children++
		}
	}
	require.NotZero(t, children, "the use case's statements are children of the tool call's span")
	require.Eventually(t, func() bool {
		for _, sp := range recorder.Ended() {
			if sp.Name() == "POST mcp:memory_get" {
				return attrs(sp)["agent_context.error_code"].AsString() == contract.CodeNotFound
			}
		}
		return false
	}, 10*time.Second, 10*time.Millisecond)
}
