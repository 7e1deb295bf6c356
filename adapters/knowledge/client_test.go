package knowledge_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/adapters/knowledge"
	"github.com/agent-context/agent-context/adapters/knowledge/knowledgetest"
	"github.com/agent-context/agent-context/contract"
	rtknowledge "github.com/agent-context/agent-context/runtime/knowledge"
)

func provider(name, baseURL string) knowledge.ProviderConfig {
	return knowledge.ProviderConfig{Name: name, BaseURL: baseURL, Timeout: 2 * time.Second, MaxHits: 100,
		DefaultRequirement: contract.RequirementOptional, CircuitFailures: 100, CircuitOpen: time.Minute,
		ForwardUserAuthorization: true}
}

func newClient(t *testing.T, reg prometheus.Registerer, providers ...knowledge.ProviderConfig) *knowledge.Client {
	t.Helper()
	c, err := knowledge.New(knowledge.Config{Providers: providers}, knowledge.Options{Registerer: reg})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c
}

func query(c *knowledge.Client, name string, topK int) ([]contract.KnowledgeHit, error) {
	return c.Query(context.Background(), name, rtknowledge.Credentials{RuntimeToken: "rt", UserAuthorization: "Bearer u"},
		rtknowledge.Query{Text: "deploy policy", TopK: topK})
}

func reasonOf(t *testing.T, err error) string {
	t.Helper()
	var failed *rtknowledge.ProviderError
	require.ErrorAs(t, err, &failed)
	return failed.Reason
}

// Every way a provider can fail maps to its degradation reason.
func TestQueryFailures(t *testing.T) {
	t.Parallel()
	longExcerpt := strings.Repeat("x", 1<<20)
	for _, c := range []struct {
		name   string
		answer http.HandlerFunc
		want   string
	}{
		{"500", knowledgetest.JSON(500, `{"error":"boom"}`), contract.ReasonProviderError},
		{"404", knowledgetest.JSON(404, `{}`), contract.ReasonProviderError},
		{"401", knowledgetest.JSON(401, `{}`), contract.ReasonProviderError},
		{"redirect is not followed", func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "http://127.0.0.1:1/elsewhere", http.StatusTemporaryRedirect)
		}, contract.ReasonProviderError},
		{"invalid JSON", knowledgetest.JSON(200, `{"hits": [`), contract.ReasonProviderInvalidResponse},
		{"not JSON", knowledgetest.JSON(200, `<html>hello</html>`), contract.ReasonProviderInvalidResponse},
		{"hits missing", knowledgetest.JSON(200, `{"results": []}`), contract.ReasonProviderInvalidResponse},
		{"hits null", knowledgetest.JSON(200, `{"hits": null}`), contract.ReasonProviderInvalidResponse},
		{"hits not a list", knowledgetest.JSON(200, `{"hits": {"resourceRef": "a"}}`), contract.ReasonProviderInvalidResponse},
		{"hit without resourceRef", knowledgetest.JSON(200, `{"hits": [{"excerpt": "x"}]}`), contract.ReasonProviderInvalidResponse},
		{"ref too long", knowledgetest.JSON(200, `{"hits": [{"resourceRef": "`+strings.Repeat("r", 2049)+`"}]}`), contract.ReasonProviderInvalidResponse},
		{"score not a number", knowledgetest.JSON(200, `{"hits": [{"resourceRef": "a", "score": "high"}]}`), contract.ReasonProviderInvalidResponse},
		{"duplicate member", knowledgetest.JSON(200, `{"hits": [], "hits": []}`), contract.ReasonProviderInvalidResponse},
		{"metadata over 64 KiB", knowledgetest.JSON(200, `{"hits": [{"resourceRef": "a", "metadata": "`+strings.Repeat("m", 64<<10)+`"}]}`),
			contract.ReasonProviderInvalidResponse},
		{"oversized body", knowledgetest.Hits(1, longExcerpt), contract.ReasonProviderInvalidResponse},
		{"oversized declared body", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Length", fmt.Sprint(10<<20))
			_, _ = io.WriteString(w, `{"hits": []}`)
		}, contract.ReasonProviderInvalidResponse},
	} {
		s := knowledgetest.NewProvider(t, c.answer)
		client := newClient(t, nil, provider("p", s.URL))
		_, err := query(client, "p", 1)
		require.Equal(t, c.want, reasonOf(t, err), c.name)
		require.EqualValues(t, 1, s.Calls(), c.name)
	}

	client := newClient(t, nil, provider("refused", knowledgetest.RefusedURL(t)))
	_, err := query(client, "refused", 1)
	require.Equal(t, contract.ReasonProviderUnavailable, reasonOf(t, err))

	slow := knowledgetest.NewProvider(t, knowledgetest.Hang)
	cfg := provider("slow", slow.URL)
	cfg.Timeout = 50 * time.Millisecond
	client = newClient(t, nil, cfg)
	_, err = query(client, "slow", 1)
	require.Equal(t, contract.ReasonProviderTimeout, reasonOf(t, err))

	// A body that stalls after the headers is a timeout too.
	stalled := knowledgetest.NewProvider(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(200)
		_, _ = io.WriteString(w, `{"hits": [`)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})
	cfg = provider("stalled", stalled.URL)
	cfg.Timeout = 50 * time.Millisecond
	client = newClient(t, nil, cfg)
	_, err = query(client, "stalled", 1)
	require.Equal(t, contract.ReasonProviderTimeout, reasonOf(t, err))

	_, err = query(client, "ghost", 1)
	require.Equal(t, contract.ReasonProviderNotConfigured, reasonOf(t, err))
}

// The bounds on what a provider returns: topK sent and kept, excerpts cut.
func TestQueryBounds(t *testing.T) {
	t.Parallel()
	s := knowledgetest.NewProvider(t, knowledgetest.Hits(7, "short"))
	cfg := provider("p", s.URL)
	cfg.MaxHits = 5
	client := newClient(t, nil, cfg)

	hits, err := query(client, "p", 3)
	require.NoError(t, err)
	require.Len(t, hits, 3, "at most topK hits are kept")
	require.Equal(t, []string{"doc-0", "doc-1", "doc-2"}, []string{hits[0].ResourceRef, hits[1].ResourceRef, hits[2].ResourceRef})
	require.EqualValues(t, 3, s.Requests()[0].Body["topK"])

	hits, err = query(client, "p", 50)
	require.NoError(t, err)
	require.Len(t, hits, 5, "the configured maxHits caps topK")
	require.EqualValues(t, 5, s.Requests()[1].Body["topK"])
	require.Equal(t, map[string]any{}, s.Requests()[1].Body["filters"], "filters is always an object")
	require.Contains(t, s.Requests()[1].Body, "scopeRef")

	// A 100 KiB excerpt of two-byte characters is cut at 64 KiB on a character boundary.
	long := strings.Repeat("é", 50<<10)
	s.Set(knowledgetest.Hits(1, long))
	hits, err = query(client, "p", 1)
	require.NoError(t, err)
	require.True(t, hits[0].Truncated)
	require.Len(t, hits[0].Excerpt, contract.MaxKnowledgeExcerptBytes)
	require.True(t, utf8.ValidString(hits[0].Excerpt))
	require.True(t, strings.HasPrefix(long, hits[0].Excerpt))

	odd := "a" + long // now 64 KiB falls inside a character
	s.Set(knowledgetest.Hits(1, odd))
	hits, err = query(client, "p", 1)
	require.NoError(t, err)
	require.True(t, hits[0].Truncated)
	require.Len(t, hits[0].Excerpt, contract.MaxKnowledgeExcerptBytes-1)
	require.True(t, utf8.ValidString(hits[0].Excerpt))

	exact := strings.Repeat("x", contract.MaxKnowledgeExcerptBytes)
	s.Set(knowledgetest.Hits(1, exact))
	hits, err = query(client, "p", 1)
	require.NoError(t, err)
	require.False(t, hits[0].Truncated)
	require.Equal(t, exact, hits[0].Excerpt)

	// Every field passes through; a provider's own truncated flag is kept.
	s.Set(knowledgetest.JSON(200, `{"hits": [{"resourceRef": "doc-9", "revisionRef": "r3", "segmentRef": "s12", "title": "Deploy policy",
		"excerpt": "...", "truncated": true, "score": 0.82, "uri": "https://wiki/doc-9", "metadata": {"b": [1, 2], "a": null},
		"futureField": "ignored"}]}`))
	hits, err = query(client, "p", 1)
	require.NoError(t, err)
	got, err := json.Marshal(hits)
	require.NoError(t, err)
	require.JSONEq(t, `[{"resourceRef": "doc-9", "revisionRef": "r3", "segmentRef": "s12", "title": "Deploy policy",
		"excerpt": "...", "truncated": true, "score": 0.82, "uri": "https://wiki/doc-9", "metadata": {"b": [1, 2], "a": null}}]`, string(got))
}

// The circuit opens after the configured consecutive failures; while open the provider
// is not called at all; after the open period one trial call closes it again, or
// reopens it.
func TestCircuitBreaker(t *testing.T) {
	t.Parallel()
	s := knowledgetest.NewProvider(t, knowledgetest.JSON(500, `{}`))
	cfg := provider("flaky", s.URL)
	cfg.CircuitFailures, cfg.CircuitOpen = 3, 400*time.Millisecond
	reg := prometheus.NewPedanticRegistry()
	client := newClient(t, reg, cfg)
	circuit := func() float64 { return gaugeValue(t, reg, knowledge.MetricCircuitState, "flaky") }

	for range 3 {
		_, err := query(client, "flaky", 1)
		require.Equal(t, contract.ReasonProviderError, reasonOf(t, err))
	}
	require.Equal(t, 2.0, circuit(), "open")
	for range 5 {
		_, err := query(client, "flaky", 1)
		require.Equal(t, contract.ReasonCircuitOpen, reasonOf(t, err))
	}
	require.EqualValues(t, 3, s.Calls(), "an open circuit calls nothing")
	info, _ := client.Provider("flaky")
	require.Equal(t, contract.ProviderDown, info.Status)

	// Still failing when the circuit half-opens: the one trial reopens it.
	require.Eventually(t, func() bool { return circuit() == 1 }, 5*time.Second, 5*time.Millisecond, "half-open")
	_, err := query(client, "flaky", 1)
	require.Equal(t, contract.ReasonProviderError, reasonOf(t, err))
	require.EqualValues(t, 4, s.Calls())
	require.Equal(t, 2.0, circuit(), "reopened")

	// Recovered: the next trial closes it.
	s.Set(knowledgetest.Hits(1, "ok"))
	require.Eventually(t, func() bool { return circuit() == 1 }, 5*time.Second, 5*time.Millisecond, "half-open")
	hits, err := query(client, "flaky", 1)
	require.NoError(t, err)
	require.Len(t, hits, 1)
	require.Equal(t, 0.0, circuit(), "closed")
	require.EqualValues(t, 5, s.Calls())
	info, _ = client.Provider("flaky")
	require.Equal(t, contract.ProviderUp, info.Status)

	require.EqualValues(t, 4, histogramCount(t, reg, "flaky", knowledge.OperationQuery, contract.ReasonProviderError))
	require.EqualValues(t, 5, histogramCount(t, reg, "flaky", knowledge.OperationQuery, contract.ReasonCircuitOpen))
	require.EqualValues(t, 1, histogramCount(t, reg, "flaky", knowledge.OperationQuery, knowledge.OutcomeOK))
}

// A refusal of one caller's credential or request does not open the circuit for
// everyone, nor does a caller that goes away.
func TestCircuitIgnoresCallerProblems(t *testing.T) {
	t.Parallel()
	s := knowledgetest.NewProvider(t, knowledgetest.JSON(401, `{}`))
	cfg := provider("p", s.URL)
	cfg.CircuitFailures = 2
	reg := prometheus.NewPedanticRegistry()
	client := newClient(t, reg, cfg)
	for range 5 {
		_, err := query(client, "p", 1)
		require.Equal(t, contract.ReasonProviderError, reasonOf(t, err))
	}
	require.EqualValues(t, 5, s.Calls())
	require.Equal(t, 0.0, gaugeValue(t, reg, knowledge.MetricCircuitState, "p"))
	info, _ := client.Provider("p")
	require.Equal(t, contract.ProviderUp, info.Status, "the provider answered")

	s.Set(knowledgetest.Hang)
	for range 3 {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		_, err := client.Query(ctx, "p", rtknowledge.Credentials{}, rtknowledge.Query{Text: "q", TopK: 1})
		cancel()
		var failed *rtknowledge.ProviderError
		require.False(t, errors.As(err, &failed), "the caller's own deadline is not the provider's failure: %v", err)
		require.ErrorIs(t, err, context.DeadlineExceeded)
	}
	require.Equal(t, 0.0, gaugeValue(t, reg, knowledge.MetricCircuitState, "p"))
	require.EqualValues(t, 3, histogramCount(t, reg, "p", knowledge.OperationQuery, knowledge.OutcomeCanceled))

	// 404 means a wrong baseUrl, not a wrong caller: it counts.
	s.Set(knowledgetest.JSON(404, `{}`))
	for range 2 {
		_, err := query(client, "p", 1)
		require.Equal(t, contract.ReasonProviderError, reasonOf(t, err))
	}
	require.Equal(t, 2.0, gaugeValue(t, reg, knowledge.MetricCircuitState, "p"))
}

// Probes fill in capabilities and status without credentials; a provider's own
// maxHits lowers the configured one.
func TestProbes(t *testing.T) {
	t.Parallel()
	up := knowledgetest.NewProvider(t, knowledgetest.Hits(1, "x"))
	broken := knowledgetest.NewProbedProvider(t, knowledgetest.JSON(500, `{}`), knowledgetest.JSON(500, `{}`))
	reg := prometheus.NewPedanticRegistry()
	client, err := knowledge.New(knowledge.Config{ProbeInterval: time.Hour, Providers: []knowledge.ProviderConfig{
		provider("up", up.URL), provider("broken", broken.URL), provider("refused", knowledgetest.RefusedURL(t)),
	}}, knowledge.Options{Registerer: reg})
	require.NoError(t, err)
	for _, p := range client.Providers() {
		require.Equal(t, contract.ProviderUnknown, p.Status, p.Name)
		require.Empty(t, p.QueryModes)
		require.Equal(t, 100, p.MaxHits)
	}
	client.Start()
	t.Cleanup(client.Close)
	require.Eventually(t, func() bool {
		return histogramCount(t, reg, "up", knowledge.OperationCapabilities, knowledge.OutcomeOK) == 1 &&
			histogramCount(t, reg, "broken", knowledge.OperationCapabilities, contract.ReasonProviderError) == 1 &&
			histogramCount(t, reg, "refused", knowledge.OperationCapabilities, contract.ReasonProviderUnavailable) == 1
	}, 10*time.Second, 5*time.Millisecond)
	infos := client.Providers()
	require.Equal(t, rtknowledge.ProviderInfo{Name: "up", DefaultRequirement: "optional",
		QueryModes: []string{"semantic", "keyword"}, ResourceResolution: true, MaxHits: 50, Status: contract.ProviderUp}, infos[0])
	require.Equal(t, contract.ProviderDown, infos[1].Status)
	require.Equal(t, contract.ProviderDown, infos[2].Status)

	probe := up.Probes()[0]
	require.Equal(t, knowledge.PathCapabilities, probe.Path)
	require.Empty(t, probe.Header.Values("Authorization"), "a probe carries no credential")
	require.Empty(t, probe.Header.Values(knowledge.HeaderUserAuthorization))

	// The reported maxHits caps what a query asks for.
	_, err = query(client, "up", 100)
	require.NoError(t, err)
	require.EqualValues(t, 50, up.Requests()[0].Body["topK"])
}

// A provider gets the runtime token, the user credential only when configured to, and
// nothing else.
func TestRequestHeaders(t *testing.T) {
	t.Parallel()
	s := knowledgetest.NewProvider(t, knowledgetest.Hits(1, "x"))
	forward := provider("forward", s.URL)
	keep := provider("keep", s.URL)
	keep.ForwardUserAuthorization = false
	client := newClient(t, nil, forward, keep)
	creds := rtknowledge.Credentials{RuntimeToken: "runtime.jwt.token", UserAuthorization: "Bearer user-token"}
	for _, name := range []string{"forward", "keep"} {
		_, err := client.Query(context.Background(), name, creds, rtknowledge.Query{Text: "q", TopK: 1})
		require.NoError(t, err)
	}
	_, err := client.Query(context.Background(), "forward", rtknowledge.Credentials{}, rtknowledge.Query{Text: "q", TopK: 1})
	require.NoError(t, err)
	_, err = client.Resolve(context.Background(), "forward", creds, []string{"doc-1"})
	require.Equal(t, contract.ReasonProviderInvalidResponse, reasonOf(t, err), "a hits body is no resolve answer")

	reqs := s.Requests()
	require.Len(t, reqs, 4)
	require.Equal(t, http.Header{
		"Accept": {"application/json"}, "Accept-Encoding": {"gzip"}, "Authorization": {"Bearer runtime.jwt.token"},
		"Content-Length": reqs[0].Header["Content-Length"], "Content-Type": {"application/json"},
		"User-Agent": {"agent-context"}, "X-Infra-User-Authorization": {"Bearer user-token"},
	}, reqs[0].Header)
	require.Empty(t, reqs[1].Header.Values(knowledge.HeaderUserAuthorization), "keep does not forward the user credential")
	require.Equal(t, "Bearer runtime.jwt.token", reqs[1].Header.Get("Authorization"))
	require.Empty(t, reqs[2].Header.Values("Authorization"), "no runtime token, no Authorization")
	require.Empty(t, reqs[2].Header.Values(knowledge.HeaderUserAuthorization))
	require.Equal(t, knowledge.PathResolve, reqs[3].Path)
	require.Equal(t, []any{"doc-1"}, reqs[3].Body["resourceRefs"])
}

func TestResolve(t *testing.T) {
	t.Parallel()
	s := knowledgetest.NewProvider(t, knowledgetest.JSON(200, `{"resources": [
		{"resourceRef": "doc-2", "revisionRef": "r1", "title": "Two", "uri": null, "metadata": {"k": 1}},
		{"resourceRef": "doc-1"}], "missing": ["doc-3"]}`))
	client := newClient(t, nil, provider("p", s.URL))
	resources, err := client.Resolve(context.Background(), "p", rtknowledge.Credentials{}, []string{"doc-1", "doc-2", "doc-3"})
	require.NoError(t, err)
	got, err := json.Marshal(resources)
	require.NoError(t, err)
	require.JSONEq(t, `[{"resourceRef": "doc-2", "revisionRef": "r1", "title": "Two", "uri": null, "metadata": {"k": 1}},
		{"resourceRef": "doc-1", "revisionRef": null, "title": null, "uri": null, "metadata": null}]`, string(got))

	for body, want := range map[string]string{
		`{"resources": null}`:                                      "resources is missing",
		`{"missing": []}`:                                          "resources is missing",
		`{"resources": [{"title": "no ref"}]}`:                     "resourceRef is missing",
		`{"resources": [], "missing": "doc-1"}`:                    "missing",
		`{"resources": [{"resourceRef": "a", "revisionRef": ""}]}`: "revisionRef is missing or empty",
	} {
		s.Set(knowledgetest.JSON(200, body))
		_, err := client.Resolve(context.Background(), "p", rtknowledge.Credentials{}, []string{"doc-1"})
		require.Equal(t, contract.ReasonProviderInvalidResponse, reasonOf(t, err), body)
		require.ErrorContains(t, err, want, body)
	}
}

// Metrics register with the Registerer given, and only once per registry.
func TestMetricsRegistration(t *testing.T) {
	t.Parallel()
	s := knowledgetest.NewProvider(t, knowledgetest.Hits(1, "x"))
	reg := prometheus.NewPedanticRegistry()
	client := newClient(t, reg, provider("a", s.URL), provider("b", knowledgetest.RefusedURL(t)))
	_, err := query(client, "a", 1)
	require.NoError(t, err)
	_, err = query(client, "b", 1)
	require.Error(t, err)
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP agent_context_knowledge_provider_circuit_state Circuit breaker state per knowledge provider: 0 closed, 1 half-open, 2 open.
# TYPE agent_context_knowledge_provider_circuit_state gauge
agent_context_knowledge_provider_circuit_state{provider="a"} 0
agent_context_knowledge_provider_circuit_state{provider="b"} 0
`), knowledge.MetricCircuitState))
	require.EqualValues(t, 1, histogramCount(t, reg, "a", knowledge.OperationQuery, knowledge.OutcomeOK))
	require.EqualValues(t, 1, histogramCount(t, reg, "b", knowledge.OperationQuery, contract.ReasonProviderUnavailable))
	// a answered, never probed: its capabilities were read right after.
	require.EqualValues(t, 1, histogramCount(t, reg, "a", knowledge.OperationCapabilities, knowledge.OutcomeOK))
	require.Equal(t, 3, testutil.CollectAndCount(reg, knowledge.MetricCallDuration))

	_, err = knowledge.New(knowledge.Config{}, knowledge.Options{Registerer: reg})
	require.Error(t, err, "a second client cannot register the same metrics")
	quiet, err := knowledge.New(knowledge.Config{Providers: []knowledge.ProviderConfig{provider("a", s.URL)}}, knowledge.Options{})
	require.NoError(t, err, "nil registers nothing")
	quiet.Close()
}

func gather(t *testing.T, reg prometheus.Gatherer, name string) []*dto.Metric {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() == name {
			return f.GetMetric()
		}
	}
	return nil
}

func labels(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, l := range m.GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

func gaugeValue(t *testing.T, reg prometheus.Gatherer, name, provider string) float64 {
	t.Helper()
	for _, m := range gather(t, reg, name) {
		if labels(m)["provider"] == provider {
			return m.GetGauge().GetValue()
		}
	}
	t.Fatalf("no %s for %s", name, provider)
	return 0
}

// histogramCount is the number of calls observed for provider, operation and outcome.
func histogramCount(t *testing.T, reg prometheus.Gatherer, provider, operation, outcome string) uint64 {
	t.Helper()
	want := map[string]string{"provider": provider, "operation": operation, "outcome": outcome}
	for _, m := range gather(t, reg, knowledge.MetricCallDuration) {
		if fmt.Sprint(labels(m)) == fmt.Sprint(want) {
			return m.GetHistogram().GetSampleCount()
		}
	}
	return 0
}
