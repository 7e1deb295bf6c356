package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/agent-context/agent-context/adapters/knowledge/knowledgetest"
	"github.com/agent-context/agent-context/adapters/telemetry"
	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/contract/client"
)

func attrs(s sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
	out := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes() {
		out[kv.Key] = kv.Value
	}
	return out
}

// TestTracingServerAndSQLSpans: with a tracer provider (an in-memory recorder here),
// one request is one server span, named by its route template, carrying the status and
// the request ID, continuing the caller's W3C traceparent; the statements it ran are
// its child spans, with their SQL text and never their parameters.
func TestTracingServerAndSQLSpans(t *testing.T) {
	t.Parallel()
	recorder := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(recorder))
	t.Cleanup(func() { require.NoError(t, tp.Shutdown(context.Background())) })
	app := startMain(t, func(m *Main) { m.tracing = telemetry.NewWithProvider(tp) })

	const traceID, parentID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	c := client.New(client.WithBaseURL(app.base), client.WithHeader("traceparent", "00-"+traceID+"-"+parentID+"-01"))
	ctx := client.WithRequestID(context.Background(), "req-traced")
	_, err := c.AppendMessages(ctx, &contract.AppendMessagesRequest{Messages: []contract.ConversationRecord{
		{ID: "m-1", Scope: contract.ConversationScope{ConversationID: "conv-t"}, Role: contract.RoleUser, Content: "secret-content"}}})
	require.NoError(t, err)

	route := contract.RouteMessagesBatch
	var server sdktrace.ReadOnlySpan
	require.Eventually(t, func() bool {
		for _, s := range recorder.Ended() {
			if s.SpanKind() == trace.SpanKindServer && attrs(s)["agent_context.request_id"].AsString() == "req-traced" {
				server = s
				return true
			}
		}
		return false
	}, 10*time.Second, 10*time.Millisecond, "the server span ends when the answer is written")
	require.Equal(t, "POST "+route.Path, server.Name())
	a := attrs(server)
	require.Equal(t, route.Path, a["http.route"].AsString())
	require.EqualValues(t, http.StatusOK, a["http.response.status_code"].AsInt64())
	require.Equal(t, traceID, server.SpanContext().TraceID().String(), "the caller's trace continues")
	require.Equal(t, parentID, server.Parent().SpanID().String())
	require.True(t, server.Parent().IsRemote())

	var sql []sdktrace.ReadOnlySpan
	for _, s := range recorder.Ended() {
		if s.Parent().SpanID() == server.SpanContext().SpanID() {
			sql = append(sql, s)
		}
	}
	require.NotEmpty(t, sql, "the statements of the request are children of its span")
	var statements []string
	for _, s := range sql {
		a := attrs(s)
		require.Equal(t, "postgresql", a["db.system.name"].AsString(), s.Name())
		require.Equal(t, server.SpanContext().TraceID(), s.SpanContext().TraceID())
		statements = append(statements, a["db.query.text"].AsString())
		for _, kv := range s.Attributes() {
			require.NotContains(t, kv.Value.Emit(), "secret-content", "a span never holds message content")
		}
	}
	require.True(t, slices.ContainsFunc(statements, func(q string) bool { return q != "" }), "SQL text is recorded: %v", statements)

	// An error answer is marked on the span; a 4xx is the client's, not an error.
	_, err = c.RecentMessages(client.WithRequestID(context.Background(), "req-bad"), &contract.RecentMessagesRequest{})
	requireCode(t, err, http.StatusBadRequest, contract.CodeValidationFailed)
	require.Eventually(t, func() bool {
		for _, s := range recorder.Ended() {
			if attrs(s)["agent_context.request_id"].AsString() == "req-bad" {
				return attrs(s)["agent_context.error_code"].AsString() == contract.CodeValidationFailed && s.Status().Code == 0
			}
		}
		return false
	}, 10*time.Second, 10*time.Millisecond)
}

// TestTracingKnowledgeCalls: a call to a knowledge provider is a client span under the
// request's server span, and the provider receives that span as its traceparent.
func TestTracingKnowledgeCalls(t *testing.T) {
	t.Parallel()
	recorder := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(recorder))
	t.Cleanup(func() { require.NoError(t, tp.Shutdown(context.Background())) })
	provider := knowledgetest.NewProvider(t, knowledgetest.Hits(1, "an excerpt"))
	app := startMain(t, func(m *Main) { m.tracing = telemetry.NewWithProvider(tp) },
		withProviders(t, map[string]any{"default": "docs", "providers": []any{providerEntry("docs", provider.URL)}}))
	c := client.New(client.WithBaseURL(app.base))
	_, err := c.QueryKnowledge(client.WithRequestID(context.Background(), "req-k"), &contract.KnowledgeQueryRequest{Query: "deploy"})
	require.NoError(t, err)

	var server, outbound sdktrace.ReadOnlySpan
	require.Eventually(t, func() bool {
		for _, s := range recorder.Ended() {
			if attrs(s)["agent_context.request_id"].AsString() == "req-k" {
				server = s
			}
		}
		return server != nil
	}, 10*time.Second, 10*time.Millisecond)
	for _, s := range recorder.Ended() {
		if s.SpanKind() == trace.SpanKindClient && s.Parent().SpanID() == server.SpanContext().SpanID() {
			outbound = s
		}
	}
	require.NotNil(t, outbound, "the provider call is a client span of the request")
	want := "00-" + server.SpanContext().TraceID().String() + "-" + outbound.SpanContext().SpanID().String() + "-01"
	require.Equal(t, want, provider.Last(t).Header.Get("traceparent"))
}

// TestTracingOffByDefault: without OTEL_* configuration there is no tracer: no
// middleware span and no pgx tracer on the pool.
func TestTracingOffByDefault(t *testing.T) {
	t.Parallel()
	app := startApp(t)
	require.Nil(t, app.main.tracing)
	require.Nil(t, app.main.pool.Config().ConnConfig.Tracer)
}

// otlpReceiver is an OTLP/HTTP trace receiver on loopback: it keeps the span names and
// service names of what it receives.
type otlpReceiver struct {
	mu       sync.Mutex
	spans    []string
	services []string
}

func (r *otlpReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	var msg collectortrace.ExportTraceServiceRequest
	if err != nil || req.URL.Path != "/v1/traces" || proto.Unmarshal(body, &msg) != nil {
		http.Error(w, "bad export", http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	for _, rs := range msg.GetResourceSpans() {
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.GetKey() == "service.name" {
				r.services = append(r.services, kv.GetValue().GetStringValue())
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				r.spans = append(r.spans, s.GetName())
			}
		}
	}
	r.mu.Unlock()
	out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

// TestTracingFromEnvironment: OTEL_EXPORTER_OTLP_ENDPOINT alone switches tracing on;
// the spans reach the OTLP endpoint (flushed at shutdown) under service agent-context.
func TestTracingFromEnvironment(t *testing.T) {
	t.Parallel()
	receiver := &otlpReceiver{}
	collector := httptest.NewServer(receiver)
	t.Cleanup(collector.Close)
	tracing, err := telemetry.ConfigFromEnv(func(k string) string {
		return map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": collector.URL}[k]
	})
	require.NoError(t, err)
	require.Equal(t, telemetry.ExporterOTLP, tracing.Exporter)

	dsnApp := startApp(t) // a database for the traced Main below
	cfg := dsnApp.main.Config
	cfg.Tracing = tracing
	m := NewMain(cfg)
	require.NoError(t, m.Run(context.Background()))
	require.NotNil(t, m.tracing)
	c := client.New(client.WithBaseURL("http://" + m.Addr()))
	_, err = c.RecentMessages(context.Background(), &contract.RecentMessagesRequest{Scope: contract.ConversationScope{ConversationID: "c"}})
	require.NoError(t, err)
	require.NoError(t, m.Close())

	receiver.mu.Lock()
	defer receiver.mu.Unlock()
	require.Contains(t, receiver.spans, "POST "+contract.RouteMessagesRecent.Path)
	require.Contains(t, receiver.services, "agent-context")
}
