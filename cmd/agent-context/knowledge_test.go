package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/adapters/knowledge/knowledgetest"
	"github.com/agent-context/agent-context/contract"
)

var (
	pathKnowledgeCapabilities = contract.RouteKnowledgeCapabilities.Path
	pathKnowledgeQuery        = contract.RouteKnowledgeQuery.Path
	pathKnowledgeResolve      = contract.RouteKnowledgeResolve.Path
)

// withProviders writes file as the providers file and loads it the way serve does,
// through AGENT_CONTEXT_KNOWLEDGE_PROVIDERS_FILE.
func withProviders(t testing.TB, file map[string]any) func(*Config) {
	t.Helper()
	data, err := json.Marshal(file)
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "providers.json")
	require.NoError(t, os.WriteFile(path, data, 0o600))
	loaded, err := LoadConfig(func(k string) string {
		return map[string]string{"AGENT_CONTEXT_KNOWLEDGE_PROVIDERS_FILE": path}[k]
	})
	require.NoError(t, err)
	return func(c *Config) {
		c.KnowledgeProvidersFile, c.Knowledge = loaded.KnowledgeProvidersFile, loaded.Knowledge
	}
}

// providerEntry is one provider of a providers file; extra overrides its fields.
func providerEntry(name, baseURL string, extra ...any) map[string]any {
	e := map[string]any{"name": name, "baseUrl": baseURL, "timeoutMs": 2000, "circuitFailures": 1000,
		"forwardUserAuthorization": true}
	for i := 0; i+1 < len(extra); i += 2 {
		e[extra[i].(string)] = extra[i+1]
	}
	return e
}

// knowledgeAnswer is a decoded /query answer with degradationReason as a plain string.
type knowledgeAnswer struct {
	Provider          *string                 `json:"provider"`
	Hits              []contract.KnowledgeHit `json:"hits"`
	Degraded          bool                    `json:"degraded"`
	DegradationReason *string                 `json:"degradationReason"`
}

func (a *testApp) knowledgeQuery(t *testing.T, body map[string]any, headers ...string) knowledgeAnswer {
	t.Helper()
	var out knowledgeAnswer
	a.post(t, pathKnowledgeQuery, body, headers...).requireOK(t, http.StatusOK, &out)
	require.NotNil(t, out.Hits, "hits is a list, never null")
	return out
}

func reason(s *string) string {
	if s == nil {
		return "<null>"
	}
	return *s
}

// TestKnowledgeFailureTable runs every way a provider fails through the real Main,
// for each requirement, and checks the exact answer of docs/knowledge.md's failure table.
func TestKnowledgeFailureTable(t *testing.T) {
	t.Parallel()
	huge := strings.Repeat("x", 1<<20)
	cases := []struct {
		name   string
		answer http.HandlerFunc // nil: nothing listens
		status int              // of a required query
		code   string
		reason string
	}{
		{"refused", nil, 503, contract.CodeKnowledgeUnavailable, contract.ReasonProviderUnavailable},
		{"timeout", knowledgetest.Hang, 503, contract.CodeKnowledgeUnavailable, contract.ReasonProviderTimeout},
		{"status-500", knowledgetest.JSON(500, `{"error":"boom"}`), 502, contract.CodeKnowledgeUpstreamError, contract.ReasonProviderError},
		{"status-404", knowledgetest.JSON(404, `not here`), 502, contract.CodeKnowledgeUpstreamError, contract.ReasonProviderError},
		{"invalid-json", knowledgetest.JSON(200, `{"hits": [{"resourceRef": `), 502, contract.CodeKnowledgeUpstreamError, contract.ReasonProviderInvalidResponse},
		{"wrong-shape", knowledgetest.JSON(200, `{"results": [{"id": 1}]}`), 502, contract.CodeKnowledgeUpstreamError, contract.ReasonProviderInvalidResponse},
		{"oversized", knowledgetest.Hits(1, huge), 502, contract.CodeKnowledgeUpstreamError, contract.ReasonProviderInvalidResponse},
	}
	providers := map[string]*knowledgetest.Provider{}
	var entries []any
	for _, c := range cases {
		url := knowledgetest.RefusedURL(t)
		if c.answer != nil {
			providers[c.name] = knowledgetest.NewProvider(t, c.answer)
			url = providers[c.name].URL
		}
		timeout := 2000
		if c.name == "timeout" {
			timeout = 100
		}
		entries = append(entries, providerEntry(c.name, url, "timeoutMs", timeout))
	}
	tooMany := knowledgetest.NewProvider(t, knowledgetest.Hits(7, "fine"))
	long := knowledgetest.NewProvider(t, knowledgetest.Hits(1, strings.Repeat("é", 40<<10)))
	entries = append(entries, providerEntry("too-many", tooMany.URL), providerEntry("long-excerpt", long.URL))
	// Several providers and no default: a query naming none has no provider.
	app := startApp(t, withProviders(t, map[string]any{"providers": entries}))

	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			calls := func() int64 {
				if p := providers[c.name]; p != nil {
					return p.Calls()
				}
				return 0
			}
			before := calls()
			e := app.post(t, pathKnowledgeQuery, map[string]any{"query": "deploy policy", "requirement": "required",
				"provider": c.name, "topK": 2}).requireError(t, c.status, c.code)
			require.Equal(t, map[string]any{"provider": c.name, "reason": c.reason}, e.Details)
			require.True(t, e.Retryable)
			require.Equal(t, contract.CategoryUpstream, e.Category)

			got := app.knowledgeQuery(t, map[string]any{"query": "deploy policy", "requirement": "optional", "provider": c.name, "topK": 2})
			require.Equal(t, knowledgeAnswer{Provider: &c.name, Hits: []contract.KnowledgeHit{}, Degraded: true,
				DegradationReason: &c.reason}, got)
			// optional is the default requirement.
			got = app.knowledgeQuery(t, map[string]any{"query": "deploy policy", "provider": c.name, "topK": 2})
			require.True(t, got.Degraded)
			require.Equal(t, c.reason, reason(got.DegradationReason))
			if c.answer != nil {
				require.Equal(t, before+3, calls(), "each query called the provider once")
			}

			got = app.knowledgeQuery(t, map[string]any{"query": "deploy policy", "requirement": "disabled", "provider": c.name})
			require.Equal(t, knowledgeAnswer{Provider: &c.name, Hits: []contract.KnowledgeHit{}, Degraded: false,
				DegradationReason: ptrTo(contract.ReasonDisabled)}, got)
			if c.answer != nil {
				require.Equal(t, before+3, calls(), "disabled calls no provider")
			}

			// resolve-resources is always required.
			e = app.post(t, pathKnowledgeResolve, map[string]any{"provider": c.name, "resourceRefs": []string{"doc-1"}}).
				requireError(t, c.status, c.code)
			require.Equal(t, map[string]any{"provider": c.name, "reason": c.reason}, e.Details)
		})
	}

	t.Run("not configured", func(t *testing.T) {
		e := app.post(t, pathKnowledgeQuery, map[string]any{"query": "q", "requirement": "required"}).
			requireError(t, 503, contract.CodeKnowledgeUnavailable)
		require.Equal(t, map[string]any{"reason": contract.ReasonProviderNotConfigured}, e.Details)
		got := app.knowledgeQuery(t, map[string]any{"query": "q", "requirement": "optional"})
		require.Equal(t, knowledgeAnswer{Hits: []contract.KnowledgeHit{}, Degraded: true,
			DegradationReason: ptrTo(contract.ReasonProviderNotConfigured)}, got)
		got = app.knowledgeQuery(t, map[string]any{"query": "q", "requirement": "disabled"})
		require.Equal(t, knowledgeAnswer{Hits: []contract.KnowledgeHit{}, DegradationReason: ptrTo(contract.ReasonDisabled)}, got)
		e = app.post(t, pathKnowledgeResolve, map[string]any{"resourceRefs": []string{"doc-1"}}).
			requireError(t, 503, contract.CodeKnowledgeUnavailable)
		require.Equal(t, contract.ReasonProviderNotConfigured, e.Details["reason"])
	})

	t.Run("too many hits", func(t *testing.T) {
		for _, requirement := range []string{"required", "optional"} {
			got := app.knowledgeQuery(t, map[string]any{"query": "q", "requirement": requirement, "provider": "too-many", "topK": 3})
			require.False(t, got.Degraded)
			require.Nil(t, got.DegradationReason)
			var refs []string
			for _, h := range got.Hits {
				refs = append(refs, h.ResourceRef)
			}
			require.Equal(t, []string{"doc-0", "doc-1", "doc-2"}, refs, "the first topK hits, in the provider's order")
		}
		before := tooMany.Calls()
		got := app.knowledgeQuery(t, map[string]any{"query": "q", "requirement": "disabled", "provider": "too-many"})
		require.Empty(t, got.Hits)
		require.Equal(t, before, tooMany.Calls())
	})

	t.Run("over-long excerpt", func(t *testing.T) {
		for _, requirement := range []string{"required", "optional"} {
			got := app.knowledgeQuery(t, map[string]any{"query": "q", "requirement": requirement, "provider": "long-excerpt"})
			require.False(t, got.Degraded)
			require.Len(t, got.Hits, 1)
			h := got.Hits[0]
			require.True(t, h.Truncated)
			require.Len(t, h.Excerpt, contract.MaxKnowledgeExcerptBytes)
			require.True(t, utf8.ValidString(h.Excerpt))
		}
		before := long.Calls()
		got := app.knowledgeQuery(t, map[string]any{"query": "q", "requirement": "disabled", "provider": "long-excerpt"})
		require.Empty(t, got.Hits)
		require.Equal(t, before, long.Calls())
	})
}

// TestKnowledgeCircuitEndToEnd: after circuitFailures failures the circuit opens and
// the provider is not called at all; after circuitOpenMs the next call is a trial
// that closes it again once the provider has recovered.
func TestKnowledgeCircuitEndToEnd(t *testing.T) {
	t.Parallel()
	p := knowledgetest.NewProvider(t, knowledgetest.JSON(500, `{}`))
	app := startApp(t, withProviders(t, map[string]any{"default": "flaky", "providers": []any{
		providerEntry("flaky", p.URL, "circuitFailures", 3, "circuitOpenMs", 1000),
	}}))
	required := map[string]any{"query": "q", "requirement": "required"}
	for range 3 {
		e := app.post(t, pathKnowledgeQuery, required).requireError(t, 502, contract.CodeKnowledgeUpstreamError)
		require.Equal(t, contract.ReasonProviderError, e.Details["reason"])
	}
	e := app.post(t, pathKnowledgeQuery, required).requireError(t, 503, contract.CodeKnowledgeUnavailable)
	require.Equal(t, map[string]any{"provider": "flaky", "reason": contract.ReasonCircuitOpen}, e.Details)
	got := app.knowledgeQuery(t, map[string]any{"query": "q"})
	require.Equal(t, contract.ReasonCircuitOpen, reason(got.DegradationReason))
	require.True(t, got.Degraded)
	got = app.knowledgeQuery(t, map[string]any{"query": "q", "requirement": "disabled"})
	require.Equal(t, knowledgeAnswer{Provider: ptrTo("flaky"), Hits: []contract.KnowledgeHit{},
		DegradationReason: ptrTo(contract.ReasonDisabled)}, got)
	e = app.post(t, pathKnowledgeResolve, map[string]any{"resourceRefs": []string{"a"}}).requireError(t, 503, contract.CodeKnowledgeUnavailable)
	require.Equal(t, contract.ReasonCircuitOpen, e.Details["reason"])
	require.EqualValues(t, 3, p.Calls(), "an open circuit calls nothing")
	require.Equal(t, contract.ProviderDown, knowledgeStatus(t, app, "flaky"))

	p.Set(knowledgetest.Hits(2, "back"))
	var recovered knowledgeAnswer
	require.Eventually(t, func() bool {
		r := app.post(t, pathKnowledgeQuery, required)
		return r.Status == http.StatusOK && json.Unmarshal(r.Body, &recovered) == nil
	}, 10*time.Second, 10*time.Millisecond)
	require.Len(t, recovered.Hits, 2)
	require.EqualValues(t, 4, p.Calls(), "while open nothing was called; one trial closed the circuit")
	require.Equal(t, contract.ProviderUp, knowledgeStatus(t, app, "flaky"))
	app.knowledgeQuery(t, required)
	require.EqualValues(t, 5, p.Calls(), "closed again")
}

func knowledgeCapabilities(t *testing.T, app *testApp, headers ...string) contract.KnowledgeCapabilities {
	t.Helper()
	var caps contract.KnowledgeCapabilities
	app.do(t, http.MethodGet, pathKnowledgeCapabilities, nil, headers...).requireOK(t, http.StatusOK, &caps)
	return caps
}

func knowledgeStatus(t *testing.T, app *testApp, provider string) string {
	t.Helper()
	for _, p := range knowledgeCapabilities(t, app).Providers {
		if p.Provider == provider {
			return p.Status
		}
	}
	t.Fatalf("no provider %s", provider)
	return ""
}

func TestKnowledgeCapabilitiesEndToEnd(t *testing.T) {
	t.Parallel()
	up := knowledgetest.NewProvider(t, knowledgetest.Hits(1, "x"))
	app := startApp(t, withProviders(t, map[string]any{"default": "wiki", "providers": []any{
		providerEntry("wiki", up.URL, "maxHits", 80), providerEntry("dead", knowledgetest.RefusedURL(t)),
	}}))
	require.Eventually(t, func() bool {
		caps := knowledgeCapabilities(t, app)
		return caps.Providers[0].Status == contract.ProviderUp && caps.Providers[1].Status == contract.ProviderDown
	}, 10*time.Second, 10*time.Millisecond, "the probe at start")
	require.Equal(t, contract.KnowledgeCapabilities{Default: ptrTo("wiki"), Providers: []contract.KnowledgeProviderInfo{
		{Provider: "wiki", QueryModes: []string{"semantic", "keyword"}, ResourceResolution: true, MaxHits: 50, Status: "up"},
		{Provider: "dead", QueryModes: []string{}, ResourceResolution: false, MaxHits: 100, Status: "down"},
	}}, knowledgeCapabilities(t, app))
	r := app.do(t, http.MethodHead, pathKnowledgeCapabilities, nil)
	require.Equal(t, http.StatusOK, r.Status)
	require.Empty(t, r.Body)
	app.post(t, pathKnowledgeCapabilities, map[string]any{}).requireError(t, http.StatusMethodNotAllowed, contract.CodeMethodNotAllowed)

	// The default provider answers queries that name none; topK goes to it capped by
	// what it reported.
	got := app.knowledgeQuery(t, map[string]any{"query": "q", "topK": 100})
	require.Equal(t, "wiki", *got.Provider)
	require.Len(t, got.Hits, 1)

	// Without probes every provider is unknown until it is called.
	quiet := startApp(t, withProviders(t, map[string]any{"probeIntervalMs": 0, "providers": []any{
		providerEntry("wiki", up.URL), providerEntry("dead", knowledgetest.RefusedURL(t)),
	}}))
	caps := knowledgeCapabilities(t, quiet)
	require.Nil(t, caps.Default)
	for _, p := range caps.Providers {
		require.Equal(t, contract.ProviderUnknown, p.Status)
	}
	quiet.knowledgeQuery(t, map[string]any{"query": "q", "provider": "wiki"})
	quiet.knowledgeQuery(t, map[string]any{"query": "q", "provider": "dead"})
	require.Equal(t, contract.ProviderUp, knowledgeStatus(t, quiet, "wiki"))
	require.Equal(t, contract.ProviderDown, knowledgeStatus(t, quiet, "dead"))

	// No providers file: nothing configured, and the facade says so.
	none := startApp(t)
	require.Equal(t, contract.KnowledgeCapabilities{Providers: []contract.KnowledgeProviderInfo{}}, knowledgeCapabilities(t, none))
	got = none.knowledgeQuery(t, map[string]any{"query": "q"})
	require.Equal(t, contract.ReasonProviderNotConfigured, reason(got.DegradationReason))
	e := none.post(t, pathKnowledgeQuery, map[string]any{"query": "q", "provider": "wiki"}).requireError(t, 400, contract.CodeValidationFailed)
	require.Equal(t, "provider", e.Details["field"])
}

// TestKnowledgeNoImplicitDefault: a providers file without default has no default
// provider, even with a single provider: a query naming none is provider_not_configured
// (degraded, or 503 when required) and the provider is not called.
func TestKnowledgeNoImplicitDefault(t *testing.T) {
	t.Parallel()
	p := knowledgetest.NewProvider(t, knowledgetest.Hits(1, "x"))
	app := startApp(t, withProviders(t, map[string]any{"providers": []any{providerEntry("wiki", p.URL)}}))
	require.Nil(t, knowledgeCapabilities(t, app).Default)
	got := app.knowledgeQuery(t, map[string]any{"query": "q"})
	require.True(t, got.Degraded)
	require.Nil(t, got.Provider)
	require.Equal(t, contract.ReasonProviderNotConfigured, reason(got.DegradationReason))
	e := app.post(t, pathKnowledgeQuery, map[string]any{"query": "q", "requirement": "required"}).
		requireError(t, http.StatusServiceUnavailable, contract.CodeKnowledgeUnavailable)
	require.Equal(t, contract.ReasonProviderNotConfigured, e.Details["reason"])
	require.Zero(t, p.Calls())
	require.Len(t, app.knowledgeQuery(t, map[string]any{"query": "q", "provider": "wiki"}).Hits, 1)
}

// TestKnowledgeProviderComesUp: a provider down when the service started (its probe
// failed) and up later shows its real capabilities as soon as it shows up, without
// waiting for the next probe: the call that finds it up reads them at once.
func TestKnowledgeProviderComesUp(t *testing.T) {
	t.Parallel()
	var down atomic.Bool
	down.Store(true)
	unless := func(h http.HandlerFunc) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if down.Load() {
				http.Error(w, "starting", http.StatusServiceUnavailable)
				return
			}
			h(w, r)
		}
	}
	p := knowledgetest.NewProbedProvider(t, unless(knowledgetest.Hits(1, "x")),
		unless(knowledgetest.JSON(http.StatusOK, knowledgetest.Capabilities)))
	app := startApp(t, withProviders(t, map[string]any{"default": "late", "probeIntervalMs": 3_600_000,
		"providers": []any{providerEntry("late", p.URL)}}))
	require.Eventually(t, func() bool { return knowledgeStatus(t, app, "late") == contract.ProviderDown },
		testWait, testPoll, "the probe at start")

	down.Store(false)
	require.Len(t, app.knowledgeQuery(t, map[string]any{"query": "q"}).Hits, 1)
	require.Equal(t, []contract.KnowledgeProviderInfo{
		{Provider: "late", QueryModes: []string{"semantic", "keyword"}, ResourceResolution: true, MaxHits: 50, Status: "up"},
	}, knowledgeCapabilities(t, app).Providers)
	require.Len(t, p.Probes(), 2, "the probe at start and the read when it came up")
}

// A provider's configured defaultRequirement applies to queries that name none.
func TestKnowledgeDefaultRequirement(t *testing.T) {
	t.Parallel()
	p := knowledgetest.NewProvider(t, knowledgetest.JSON(500, `{}`))
	app := startApp(t, withProviders(t, map[string]any{"providers": []any{
		providerEntry("strict", p.URL, "defaultRequirement", "required"),
		providerEntry("off", p.URL, "defaultRequirement", "disabled"),
	}}))
	app.post(t, pathKnowledgeQuery, map[string]any{"query": "q", "provider": "strict"}).requireError(t, 502, contract.CodeKnowledgeUpstreamError)
	got := app.knowledgeQuery(t, map[string]any{"query": "q", "provider": "strict", "requirement": "optional"})
	require.True(t, got.Degraded)
	got = app.knowledgeQuery(t, map[string]any{"query": "q", "provider": "off"})
	require.Equal(t, contract.ReasonDisabled, reason(got.DegradationReason))
	require.EqualValues(t, 2, p.Calls())
	app.post(t, pathKnowledgeQuery, map[string]any{"query": "q", "provider": "off", "requirement": "required"}).
		requireError(t, 502, contract.CodeKnowledgeUpstreamError)
}

func TestKnowledgeResolveEndToEnd(t *testing.T) {
	t.Parallel()
	p := knowledgetest.NewProvider(t, knowledgetest.JSON(200, `{"resources": [
		{"resourceRef": "doc-3", "title": "Three", "uri": "https://wiki/doc-3", "metadata": {"pages": 3}},
		{"resourceRef": "doc-1", "revisionRef": "r7", "title": "One"},
		{"resourceRef": "doc-1", "revisionRef": "r8", "title": "One again"},
		{"resourceRef": "not-asked", "title": "Extra"}], "missing": ["doc-2"]}`))
	app := startApp(t, withProviders(t, map[string]any{"default": "wiki", "providers": []any{providerEntry("wiki", p.URL)}}))
	var out contract.ResolveResourcesResponse
	app.post(t, pathKnowledgeResolve, map[string]any{"provider": nil, "resourceRefs": []string{"doc-1", "doc-2", "doc-3", "doc-1"}}).
		requireOK(t, http.StatusOK, &out)
	got, err := json.Marshal(out)
	require.NoError(t, err)
	require.JSONEq(t, `{"provider": "wiki", "resources": [
		{"resourceRef": "doc-1", "revisionRef": "r7", "title": "One", "uri": null, "metadata": null},
		{"resourceRef": "doc-3", "revisionRef": null, "title": "Three", "uri": "https://wiki/doc-3", "metadata": {"pages": 3}}],
		"missing": ["doc-2"]}`, string(got))
}

// TestKnowledgeBadInput: every invalid request is refused with the envelope naming the
// field, and no provider is called.
func TestKnowledgeBadInput(t *testing.T) {
	t.Parallel()
	p := knowledgetest.NewProvider(t, knowledgetest.ByPath(knowledgetest.Hits(1, "x"), knowledgetest.JSON(200, `{"resources": [], "missing": []}`)))
	app := startApp(t, withProviders(t, map[string]any{"default": "wiki", "providers": []any{providerEntry("wiki", p.URL)}}))
	longRef := strings.Repeat("r", contract.MaxEvidenceRefChars+1)
	refs := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("doc-%d", i)
		}
		return out
	}
	for _, c := range []struct {
		path   string
		body   any
		status int
		field  string
		limit  any
	}{
		{pathKnowledgeQuery, map[string]any{"query": strings.Repeat("q", contract.MaxKnowledgeQueryBytes+1)}, 413, "query", 16384.0},
		{pathKnowledgeQuery, map[string]any{"query": ""}, 400, "query", nil},
		{pathKnowledgeQuery, map[string]any{"query": " \n\t"}, 400, "query", nil},
		{pathKnowledgeQuery, map[string]any{}, 400, "query", nil},
		{pathKnowledgeQuery, map[string]any{"query": "q", "topK": 0}, 400, "topK", 100.0},
		{pathKnowledgeQuery, map[string]any{"query": "q", "topK": 101}, 400, "topK", 100.0},
		{pathKnowledgeQuery, map[string]any{"query": "q", "topK": -1}, 400, "topK", 100.0},
		{pathKnowledgeQuery, `{"query": "q", "topK": 2.5}`, 400, "topK", 100.0},
		{pathKnowledgeQuery, `{"query": "q", "topK": 1e100}`, 400, "topK", 100.0},
		{pathKnowledgeQuery, map[string]any{"query": "q", "topK": "5"}, 400, "topK", 100.0},
		{pathKnowledgeQuery, map[string]any{"query": "q", "provider": "ghost"}, 400, "provider", nil},
		{pathKnowledgeQuery, map[string]any{"query": "q", "provider": ""}, 400, "provider", nil},
		{pathKnowledgeQuery, map[string]any{"query": "q", "requirement": "sometimes"}, 400, "requirement", nil},
		{pathKnowledgeQuery, map[string]any{"query": "q", "requirement": "Required"}, 400, "requirement", nil},
		{pathKnowledgeQuery, map[string]any{"query": "q", "scopeRef": ""}, 400, "scopeRef", nil},
		{pathKnowledgeQuery, map[string]any{"query": "q", "scopeRef": longRef}, 400, "scopeRef", 2048.0},
		{pathKnowledgeQuery, map[string]any{"query": "q", "filters": []any{}}, 400, "filters", nil},
		{pathKnowledgeQuery, map[string]any{"query": "q", "filters": "x"}, 400, "filters", nil},
		{pathKnowledgeQuery, map[string]any{"query": "q", "filters": map[string]any{"k": strings.Repeat("f", 64<<10)}}, 413, "filters", 65536.0},
		{pathKnowledgeQuery, `{"query": "q", "filters": {"a": 1, "a": 2}}`, 400, "filters.a", nil},
		{pathKnowledgeQuery, map[string]any{"query": "q", "tenantId": "other"}, 400, "tenantId", nil},
		{pathKnowledgeQuery, map[string]any{"Query": "q"}, 400, "Query", nil},
		{pathKnowledgeResolve, map[string]any{"resourceRefs": []string{}}, 400, "resourceRefs", nil},
		{pathKnowledgeResolve, map[string]any{"resourceRefs": nil}, 400, "resourceRefs", nil},
		{pathKnowledgeResolve, map[string]any{}, 400, "resourceRefs", nil},
		{pathKnowledgeResolve, map[string]any{"resourceRefs": refs(101)}, 400, "resourceRefs", 100.0},
		{pathKnowledgeResolve, map[string]any{"resourceRefs": []string{"ok", ""}}, 400, "resourceRefs[1]", nil},
		{pathKnowledgeResolve, map[string]any{"resourceRefs": []string{longRef}}, 400, "resourceRefs[0]", 2048.0},
		{pathKnowledgeResolve, map[string]any{"resourceRefs": []any{1}}, 400, "resourceRefs[0]", nil},
		{pathKnowledgeResolve, map[string]any{"resourceRefs": []string{"a"}, "provider": "ghost"}, 400, "provider", nil},
		{pathKnowledgeResolve, map[string]any{"resourceRefs": []string{"a"}, "requirement": "optional"}, 400, "requirement", nil},
	} {
		code := contract.CodeValidationFailed
		if c.status == 413 {
			code = contract.CodePayloadTooLarge
		}
		e := app.post(t, c.path, c.body).requireError(t, c.status, code)
		require.Equal(t, c.field, e.Details["field"], "%s %v", c.path, c.body)
		require.Equal(t, c.limit, e.Details["limit"], "%s %v", c.path, c.body)
	}
	require.Zero(t, p.Calls(), "no invalid request reaches the provider")
	app.post(t, pathKnowledgeQuery, "query=q").requireError(t, http.StatusBadRequest, contract.CodeValidationFailed)

	// The bounds themselves are accepted, and forwarded as the protocol says.
	query, scopeRef := strings.Repeat("q", contract.MaxKnowledgeQueryBytes), strings.Repeat("s", contract.MaxEvidenceRefChars)
	app.knowledgeQuery(t, map[string]any{"query": query, "topK": 100, "scopeRef": scopeRef,
		"filters": map[string]any{"space": "ops", "tags": []any{"a"}}})
	require.Equal(t, knowledgetest.Request{Path: "/query", Header: p.Last(t).Header, Body: map[string]any{
		"query": query, "scopeRef": scopeRef, "topK": 50.0, "filters": map[string]any{"space": "ops", "tags": []any{"a"}},
	}}, p.Last(t), "topK capped by the provider's reported maxHits")
	app.knowledgeQuery(t, map[string]any{"query": "q", "topK": 1, "filters": nil, "scopeRef": nil, "provider": nil, "requirement": "required"})
	require.Equal(t, map[string]any{"query": "q", "scopeRef": nil, "topK": 1.0, "filters": map[string]any{}}, p.Last(t).Body)
	var out contract.ResolveResourcesResponse
	app.post(t, pathKnowledgeResolve, map[string]any{"resourceRefs": refs(100)}).requireOK(t, http.StatusOK, &out)
	require.Equal(t, refs(100), out.Missing)
	require.Empty(t, out.Resources)
	require.Equal(t, map[string]any{"resourceRefs": toAny(refs(100))}, p.Last(t).Body)
	require.EqualValues(t, 3, p.Calls())
}

func toAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// junkHeaders are what a caller, or a proxy on its way, may send besides its
// credentials; none of it may reach a provider.
var junkHeaders = []string{
	"Cookie", "session=junk-cookie",
	"X-Forwarded-For", "10.9.8.7, junk-forwarded",
	"X-Real-Ip", "junk-real-ip",
	"X-Request-Id", "junk-request-id",
	"Referer", "junk-referer",
	"Origin", "junk-origin",
	"Accept-Language", "junk-language",
	"Traceparent", "junk-traceparent",
	"Proxy-Authorization", "Basic junk-proxy",
	"X-Custom-Secret", "junk-secret",
	"x-infra-anything", "junk-infra",
}

// requireOnlyCredentials checks that a provider request carried exactly the protocol's
// headers: authorization and userAuthorization as given ("" for absent), nothing of
// the caller beyond them.
func requireOnlyCredentials(t *testing.T, header http.Header, authorization, userAuthorization string) {
	t.Helper()
	names := []string{"Accept", "Accept-Encoding", "Content-Length", "Content-Type", "User-Agent"}
	if authorization != "" {
		names = append(names, "Authorization")
	}
	if userAuthorization != "" {
		names = append(names, "X-Infra-User-Authorization")
	}
	slices.Sort(names)
	got := slices.Sorted(func(yield func(string) bool) {
		for name := range header {
			if !yield(name) {
				return
			}
		}
	})
	require.Equal(t, names, got, "the provider saw other headers than the protocol's")
	require.Equal(t, authorization, header.Get("Authorization"))
	require.Equal(t, userAuthorization, header.Get("X-Infra-User-Authorization"))
	for name, values := range header {
		for _, v := range values {
			require.NotContains(t, v, "junk", "%s leaked", name)
		}
	}
}

// TestKnowledgeCredentialForwarding: in runtime-token mode a provider gets the caller's
// runtime token and, only when the token is bound to it, the user credential; with the
// static token or in open mode it gets no Authorization (never the service token) and
// the user credential as it came. Nothing else of the caller leaks, on query and
// resolve alike.
func TestKnowledgeCredentialForwarding(t *testing.T) {
	t.Parallel()
	// Each mode has a provider of its own: the subtests run in parallel.
	newProvider := func(t *testing.T) (*knowledgetest.Provider, func(*Config)) {
		p := knowledgetest.NewProvider(t, knowledgetest.ByPath(knowledgetest.Hits(1, "x"), knowledgetest.JSON(200, `{"resources": []}`)))
		return p, withProviders(t, map[string]any{"default": "forward", "providers": []any{
			providerEntry("forward", p.URL),
			providerEntry("keep", p.URL, "forwardUserAuthorization", false),
		}})
	}
	const userToken = "user-secret"
	userAuth := "Bearer " + userToken
	ask := func(t *testing.T, app *testApp, provider string, headers ...string) {
		t.Helper()
		headers = append(slices.Clone(headers), junkHeaders...)
		app.knowledgeQuery(t, map[string]any{"query": "q", "requirement": "required", "provider": provider}, headers...)
	}
	resolve := func(t *testing.T, app *testApp, headers ...string) {
		t.Helper()
		headers = append(slices.Clone(headers), junkHeaders...)
		app.post(t, pathKnowledgeResolve, map[string]any{"resourceRefs": []string{"a"}}, headers...).requireOK(t, http.StatusOK, nil)
	}

	t.Run("runtime token", func(t *testing.T) {
		t.Parallel()
		p, providers := newProvider(t)
		app, minter := startSecuredApp(t, providers, func(c *Config) { c.ServiceToken = "static-secret" })
		scope := []string{"x-infra-tenant-id", "acme", "x-infra-project-id", "alpha", "x-infra-subject", "agent-acme"}
		bound := "Bearer " + strings.TrimSpace(mustToken(t, minter.getenv, "mint", "--sub", "agent-acme", "--tenant", "acme",
			"--project", "alpha", "--cap", contract.CapKnowledgeQuery, "--user-token", userToken))
		unbound := minter.bearer(contract.CapKnowledgeQuery)

		ask(t, app, "forward", append([]string{"Authorization", bound, "x-infra-user-authorization", userAuth}, scope...)...)
		requireOnlyCredentials(t, p.Last(t).Header, bound, userAuth)
		resolve(t, app, "Authorization", bound, "x-infra-user-authorization", userAuth)
		requireOnlyCredentials(t, p.Last(t).Header, bound, userAuth)
		ask(t, app, "keep", "Authorization", bound, "x-infra-user-authorization", userAuth)
		requireOnlyCredentials(t, p.Last(t).Header, bound, "")
		ask(t, app, "forward", "Authorization", unbound)
		requireOnlyCredentials(t, p.Last(t).Header, unbound, "")

		calls := p.Calls()
		// An unbound user credential is refused, never forwarded; so is a wrong one.
		app.post(t, pathKnowledgeQuery, map[string]any{"query": "q"}, "Authorization", unbound, "x-infra-user-authorization", userAuth).
			requireError(t, http.StatusUnauthorized, contract.CodeTokenBindingMismatch)
		app.post(t, pathKnowledgeQuery, map[string]any{"query": "q"}, "Authorization", bound, "x-infra-user-authorization", "Bearer other").
			requireError(t, http.StatusUnauthorized, contract.CodeTokenBindingMismatch)
		app.post(t, pathKnowledgeQuery, map[string]any{"query": "q"}, "Authorization", bound).
			requireError(t, http.StatusUnauthorized, contract.CodeTokenBindingMismatch)
		require.Equal(t, calls, p.Calls())

		// The static token next to runtime tokens is still never forwarded.
		ask(t, app, "forward", "Authorization", "Bearer static-secret", "x-infra-user-authorization", userAuth)
		requireOnlyCredentials(t, p.Last(t).Header, "", userAuth)
	})

	t.Run("static token", func(t *testing.T) {
		t.Parallel()
		p, providers := newProvider(t)
		app := startApp(t, providers, func(c *Config) { c.ServiceToken = "static-secret" })
		scope := []string{"x-infra-tenant-id", "junk-tenant", "x-infra-project-id", "junk-project", "x-infra-subject", "junk-subject"}
		ask(t, app, "forward", append([]string{"Authorization", "Bearer static-secret", "x-infra-user-authorization", userAuth}, scope...)...)
		requireOnlyCredentials(t, p.Last(t).Header, "", userAuth)
		ask(t, app, "forward", "Authorization", "Bearer static-secret", "x-infra-user-authorization", "Token as-it-came")
		requireOnlyCredentials(t, p.Last(t).Header, "", "Token as-it-came")
		ask(t, app, "keep", "Authorization", "Bearer static-secret", "x-infra-user-authorization", userAuth)
		requireOnlyCredentials(t, p.Last(t).Header, "", "")
		resolve(t, app, "Authorization", "Bearer static-secret")
		requireOnlyCredentials(t, p.Last(t).Header, "", "")
	})

	t.Run("open mode", func(t *testing.T) {
		t.Parallel()
		p, providers := newProvider(t)
		app := startApp(t, providers)
		ask(t, app, "forward", "x-infra-user-authorization", userAuth, "Authorization", "Bearer junk-caller-token")
		requireOnlyCredentials(t, p.Last(t).Header, "", userAuth)
		ask(t, app, "forward")
		requireOnlyCredentials(t, p.Last(t).Header, "", "")
	})
}

// Each knowledge route demands its capability of a runtime token.
func TestKnowledgeCapabilityChecks(t *testing.T) {
	t.Parallel()
	p := knowledgetest.NewProvider(t, knowledgetest.ByPath(knowledgetest.Hits(1, "x"), knowledgetest.JSON(200, `{"resources": []}`)))
	app, minter := startSecuredApp(t, withProviders(t, map[string]any{"default": "wiki", "providers": []any{providerEntry("wiki", p.URL)}}))
	for _, c := range []struct {
		route contract.Route
		body  any
		other string
	}{
		{contract.RouteKnowledgeCapabilities, nil, contract.CapKnowledgeQuery},
		{contract.RouteKnowledgeQuery, map[string]any{"query": "q"}, contract.CapKnowledgeRead},
		{contract.RouteKnowledgeResolve, map[string]any{"resourceRefs": []string{"a"}}, contract.CapKnowledgeRead},
	} {
		required := c.route.Capabilities[0]
		e := app.do(t, c.route.Method, c.route.Path, c.body, "Authorization", minter.bearer(c.other)).
			requireError(t, http.StatusForbidden, contract.CodeTokenForbidden)
		require.Equal(t, required, e.Details["requiredCapability"])
		app.do(t, c.route.Method, c.route.Path, c.body).requireError(t, http.StatusUnauthorized, contract.CodeTokenMissing)
		app.do(t, c.route.Method, c.route.Path, c.body, "Authorization", minter.bearer(required)).requireOK(t, http.StatusOK, nil)
	}
	require.EqualValues(t, 2, p.Calls(), "refused calls reach no provider")
}

// TestKnowledgeServeExample runs the reference provider command on a folder of
// Markdown and queries it through the facade, as the README shows.
func TestKnowledgeServeExample(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "ops"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "ops", "deploy.md"),
		[]byte("# Deploy policy\n\nDeploy on weekdays, with a second reviewer.\n\n## Rollback\n\nRoll back within 10 minutes.\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "lunch.md"), []byte("# Lunch\n\nNoodles on Fridays.\n"), 0o644))

	ctx, cancel := context.WithCancel(context.Background())
	out, w := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"knowledge", "serve-example", "--bind", "127.0.0.1:0", dir}, func(string) string { return "" }, w)
		_ = w.Close()
	}()
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err)
	go func() { _, _ = io.Copy(io.Discard, out) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	require.Contains(t, line, "serving 2 Markdown documents from "+dir+" on http://127.0.0.1:")
	baseURL := strings.TrimSpace(line[strings.LastIndex(line, " ")+1:])

	app := startApp(t, withProviders(t, map[string]any{"default": "docs", "providers": []any{providerEntry("docs", baseURL)}}))
	got := app.knowledgeQuery(t, map[string]any{"query": "deploy policy", "requirement": "required", "topK": 5})
	require.Equal(t, "docs", *got.Provider)
	require.False(t, got.Degraded)
	require.Len(t, got.Hits, 1)
	h := got.Hits[0]
	require.Equal(t, "ops/deploy.md", h.ResourceRef)
	require.Equal(t, "s0", *h.SegmentRef)
	require.Equal(t, "Deploy policy", *h.Title)
	require.Equal(t, 1.0, *h.Score)
	require.Contains(t, h.Excerpt, "second reviewer")

	var resolved contract.ResolveResourcesResponse
	app.post(t, pathKnowledgeResolve, map[string]any{"resourceRefs": []string{"ops/deploy.md", "ops/missing.md"}}).
		requireOK(t, http.StatusOK, &resolved)
	require.Len(t, resolved.Resources, 1)
	require.Equal(t, *h.RevisionRef, *resolved.Resources[0].RevisionRef)
	require.Equal(t, []string{"ops/missing.md"}, resolved.Missing)
	require.Eventually(t, func() bool { return knowledgeStatus(t, app, "docs") == contract.ProviderUp }, 10*time.Second, 10*time.Millisecond)
	require.Equal(t, []string{"keyword"}, knowledgeCapabilities(t, app).Providers[0].QueryModes)

	// The hit goes into a window as knowledgeEvidence unchanged.
	app.createWindow(t, winBody("w-evidence", "c-1", "assembled", []map[string]any{{
		"id": "i-0", "ordinal": 0, "kind": "knowledge_evidence", "content": h.Excerpt,
		"knowledgeEvidence": map[string]any{"provider": "docs", "resourceRef": h.ResourceRef, "revisionRef": h.RevisionRef,
			"segmentRef": h.SegmentRef, "excerpt": h.Excerpt, "score": h.Score, "retrievedAtMs": time.Now().UnixMilli()},
	}}))

	var usage usageError
	for _, args := range [][]string{{"knowledge"}, {"knowledge", "serve"}, {"knowledge", "serve-example"},
		{"knowledge", "serve-example", "a", "b"}, {"knowledge", "serve-example", "--port", "1", dir}} {
		require.ErrorAs(t, run(context.Background(), args, func(string) string { return "" }, io.Discard), &usage, "%v", args)
	}
	require.ErrorContains(t, run(context.Background(), []string{"knowledge", "serve-example", filepath.Join(dir, "nope")},
		func(string) string { return "" }, io.Discard), "nope")
}

// A providers file with mistakes stops the start, one line per mistake, naming the
// variable.
func TestKnowledgeProvidersFileErrors(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "providers.yaml")
	require.NoError(t, os.WriteFile(path, []byte(`
providers:
  - name: wiki
    baseUrl: http://127.0.0.1:7001
    defaultRequirement: sometimes
  - name: wiki
    baseUrl: not a url
    timeoutMs: 0
`), 0o600))
	_, err := LoadConfig(func(k string) string {
		return map[string]string{"AGENT_CONTEXT_KNOWLEDGE_PROVIDERS_FILE": path, "AGENT_CONTEXT_LOG_FORMAT": "xml"}[k]
	})
	require.Error(t, err)
	lines := strings.Split(err.Error(), "\n")
	require.Equal(t, "configuration: 5 problems:", lines[0])
	prefix := "  AGENT_CONTEXT_KNOWLEDGE_PROVIDERS_FILE " + path + ": "
	require.Equal(t, []string{
		`  AGENT_CONTEXT_LOG_FORMAT must be json or text, got "xml"`,
		prefix + `providers[0].defaultRequirement must be one of required, optional, disabled, got "sometimes"`,
		prefix + `providers[1].name "wiki" is already the name of providers[0]`,
		prefix + `providers[1].baseUrl must be an absolute http or https URL, got "not a url"`,
		prefix + "providers[1].timeoutMs must be between 1 and 60000, got 0",
	}, lines[1:])

	_, err = LoadConfig(func(k string) string {
		return map[string]string{"AGENT_CONTEXT_KNOWLEDGE_PROVIDERS_FILE": filepath.Join(t.TempDir(), "absent.json")}[k]
	})
	require.ErrorContains(t, err, "configuration: AGENT_CONTEXT_KNOWLEDGE_PROVIDERS_FILE")
	require.ErrorContains(t, err, "no such file")
}

// BenchmarkKnowledgeOverhead measures what the facade adds to a provider call on
// loopback: each iteration sends the same query once straight to the provider and
// once through the real Main (routing, auth, strict decoding, validation, the circuit
// breaker, the bounded client, re-encoding), and reports the p50 and p99 of both and
// their difference. The provider answers 10 hits of ~1 KiB from memory.
//
//	go test -run '^$' -bench BenchmarkKnowledgeOverhead -benchtime 5000x ./cmd/agent-context
func BenchmarkKnowledgeOverhead(b *testing.B) {
	hits := make([]map[string]any, 10)
	for i := range hits {
		hits[i] = map[string]any{"resourceRef": fmt.Sprintf("doc-%d", i), "revisionRef": "r1", "segmentRef": "s1",
			"title": "Deploy policy", "excerpt": strings.Repeat("deploy policy text ", 54), "score": 0.9, "uri": nil, "metadata": nil}
	}
	answer, err := json.Marshal(map[string]any{"hits": hits})
	require.NoError(b, err)
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if r.URL.Path == "/capabilities" {
			knowledgetest.JSON(http.StatusOK, knowledgetest.Capabilities)(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(answer)
	}))
	b.Cleanup(provider.Close)
	app := startApp(b, withProviders(b, map[string]any{"providers": []any{providerEntry("wiki", provider.URL)}}))
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	b.Cleanup(client.CloseIdleConnections)
	direct := []byte(`{"query":"workspace deployment policy","scopeRef":"space-1","topK":10,"filters":{}}`)
	facade := []byte(`{"query":"workspace deployment policy","requirement":"required","scopeRef":"space-1","topK":10,"filters":{}}`)
	post := func(url string, body []byte) time.Duration {
		start := time.Now()
		resp, err := client.Post(url, "application/json", strings.NewReader(string(body)))
		if err != nil {
			b.Fatal(err)
		}
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		took := time.Since(start)
		if err != nil || resp.StatusCode != http.StatusOK {
			b.Fatalf("%s: %d %v", url, resp.StatusCode, err)
		}
		return took
	}
	for range 50 { // warm both connections and the facade's pool
		post(provider.URL+"/query", direct)
		post(app.base+pathKnowledgeQuery, facade)
	}
	directTimes := make([]time.Duration, 0, b.N)
	facadeTimes := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for b.Loop() {
		directTimes = append(directTimes, post(provider.URL+"/query", direct))
		facadeTimes = append(facadeTimes, post(app.base+pathKnowledgeQuery, facade))
	}
	b.StopTimer()
	quantile := func(d []time.Duration, q float64) float64 {
		s := slices.Clone(d)
		slices.Sort(s)
		return float64(s[int(q*float64(len(s)-1))].Microseconds())
	}
	for _, q := range []struct {
		name string
		q    float64
	}{{"p50", 0.5}, {"p99", 0.99}} {
		d, f := quantile(directTimes, q.q), quantile(facadeTimes, q.q)
		b.ReportMetric(d, q.name+"-direct-µs")
		b.ReportMetric(f, q.name+"-facade-µs")
		b.ReportMetric(f-d, q.name+"-overhead-µs")
	}
}
