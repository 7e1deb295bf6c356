package knowledge_test

// Fuzz targets for every request validator, called through the use cases' public
// entry points with bodies decoded as the server decodes them. Each asserts what the
// contract promises of any input: a refusal is a *runtime.Error with a 4xx code of
// the contract's table naming the offending field, nothing reaches the store then,
// and whatever is runtimetest.Accepted reaches the store within every limit. Seed corpora are in
// testdata/fuzz/<target>/.

import (
	"context"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
	"github.com/agent-context/agent-context/runtime/knowledge"
	"github.com/agent-context/agent-context/runtime/runtimetest"
)

// stubKnowledge is one configured provider, "docs", the default, required unless a
// query says otherwise; it records what it is asked and finds nothing.
type stubKnowledge struct {
	calls   int
	queried knowledge.Query
	refs    []string
}

var stubDocs = knowledge.ProviderInfo{Name: "docs", DefaultRequirement: contract.RequirementRequired,
	ResourceResolution: true, MaxHits: contract.MaxKnowledgeTopK, Status: contract.ProviderUp}

func (s *stubKnowledge) Providers() []knowledge.ProviderInfo {
	return []knowledge.ProviderInfo{stubDocs}
}

func (s *stubKnowledge) Default() string { return stubDocs.Name }

func (s *stubKnowledge) Provider(name string) (knowledge.ProviderInfo, bool) {
	return stubDocs, name == stubDocs.Name
}

func (s *stubKnowledge) Query(_ context.Context, _ string, _ knowledge.Credentials, q knowledge.Query) ([]contract.KnowledgeHit, error) {
	s.calls++
	s.queried = q
	return nil, nil
}

func (s *stubKnowledge) Resolve(_ context.Context, _ string, _ knowledge.Credentials, refs []string) ([]contract.KnowledgeResource, error) {
	s.calls++
	s.refs = refs
	return nil, nil
}

// requireRef asserts an runtimetest.Accepted provider reference: 1 to 2,048 characters.
func requireRef(t *testing.T, ref string) {
	t.Helper()
	require.NotEmpty(t, ref)
	require.LessOrEqual(t, utf8.RuneCountInString(ref), contract.MaxEvidenceRefChars)
}

// FuzzKnowledgeQuery: an runtimetest.Accepted query reaches the provider (unless disabled) with
// the text as sent, non-blank and within 16 KiB, topK within 1..100 (default 10), a
// valid scopeRef and filters that are absent or one compact JSON object.
func FuzzKnowledgeQuery(f *testing.F) {
	runtimetest.FuzzBody(f, func(t *testing.T, req *contract.KnowledgeQueryRequest) {
		providers := &stubKnowledge{}
		res, err := knowledge.New(providers).Query(context.Background(), runtime.Principal{}, req)
		if !runtimetest.Accepted(t, err, providers.calls) {
			return
		}
		require.NotNil(t, res.Hits)
		if req.Requirement == contract.RequirementDisabled {
			require.Zero(t, providers.calls, "a disabled query calls no provider")
			return
		}
		require.Equal(t, 1, providers.calls)
		q := providers.queried
		require.Equal(t, req.Query, q.Text)
		require.NotEmpty(t, strings.TrimSpace(q.Text))
		require.LessOrEqual(t, len(q.Text), contract.MaxKnowledgeQueryBytes)
		runtimetest.RequireLimit(t, q.TopK, req.TopK, contract.DefaultKnowledgeTopK, contract.MaxKnowledgeTopK)
		if q.ScopeRef != nil {
			requireRef(t, *q.ScopeRef)
		}
		runtimetest.RequireStoredJSON(t, q.Filters, contract.MaxMetadataBytes)
		if q.Filters != nil {
			require.Equal(t, jsontext.KindBeginObject, jsontext.Value(q.Filters).Kind())
		}
	})
}

// FuzzResolveResources: an runtimetest.Accepted request asks the provider for 1..100 distinct
// valid refs in request order, and answers every one of them, resolved or missing.
func FuzzResolveResources(f *testing.F) {
	runtimetest.FuzzBody(f, func(t *testing.T, req *contract.ResolveResourcesRequest) {
		providers := &stubKnowledge{}
		res, err := knowledge.New(providers).Resolve(context.Background(), runtime.Principal{}, req)
		if !runtimetest.Accepted(t, err, providers.calls) {
			return
		}
		require.GreaterOrEqual(t, len(providers.refs), 1)
		require.LessOrEqual(t, len(req.ResourceRefs), contract.MaxResourceRefs)
		seen := map[string]bool{}
		var first []string
		for _, ref := range req.ResourceRefs {
			requireRef(t, ref)
			if !seen[ref] {
				seen[ref] = true
				first = append(first, ref)
			}
		}
		require.Equal(t, first, providers.refs, "each ref once, in request order")
		require.Equal(t, first, res.Missing, "the stub resolves none: all are missing")
		require.Empty(t, res.Resources)
	})
}
