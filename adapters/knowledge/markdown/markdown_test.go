package markdown_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/adapters/knowledge"
	"github.com/agent-context/agent-context/adapters/knowledge/markdown"
	"github.com/agent-context/agent-context/contract"
	rtknowledge "github.com/agent-context/agent-context/runtime/knowledge"
)

func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		path := filepath.Join(dir, filepath.FromSlash(name))
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(body), 0o644))
	}
	return dir
}

var docs = map[string]string{
	"ops/deploy.md": "# Deploy policy\n\nDeploy on weekdays. Deploy with a second reviewer.\n\n" +
		"## Rollback\n\nRoll back a deploy within 10 minutes.\n\n```\n# not a heading inside a fence\n```\n",
	"people/onboarding.md": "# Onboarding\n\nA buddy for every newcomer; deploy rights after one week.\n",
	"notes.txt":            "deploy deploy deploy (not Markdown)",
	".hidden/secret.md":    "# Secret deploy\n",
	"untitled.md":          "no heading at all, about policy",
}

// serve starts the provider and a facade client for it.
func serve(t *testing.T, dir string) (*httptest.Server, *knowledge.Client) {
	t.Helper()
	p, err := markdown.Load(dir)
	require.NoError(t, err)
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	client, err := knowledge.New(knowledge.Config{Providers: []knowledge.ProviderConfig{{
		Name: "docs", BaseURL: srv.URL, Timeout: 5 * time.Second, MaxHits: 100,
		DefaultRequirement: contract.RequirementOptional, CircuitFailures: 5, CircuitOpen: time.Minute,
	}}}, knowledge.Options{})
	require.NoError(t, err)
	t.Cleanup(client.Close)
	return srv, client
}

func TestQueryScoresSections(t *testing.T) {
	t.Parallel()
	_, client := serve(t, writeFiles(t, docs))
	hits, err := client.Query(context.Background(), "docs", rtknowledge.Credentials{},
		rtknowledge.Query{Text: "Deploy POLICY", TopK: 10})
	require.NoError(t, err)
	type row struct {
		ref, segment string
		score        float64
	}
	var got []row
	for _, h := range hits {
		got = append(got, row{h.ResourceRef, *h.SegmentRef, *h.Score})
	}
	require.Equal(t, []row{
		{"ops/deploy.md", "s0", 1},          // both words
		{"ops/deploy.md", "s1", 0.5},        // one word once; the fenced "# not a heading" stays in s1
		{"people/onboarding.md", "s0", 0.5}, // ties go by path
		{"untitled.md", "s0", 0.5},
	}, got, "hidden folders and non-Markdown files are not served")
	require.Equal(t, "Deploy policy", *hits[0].Title)
	require.Equal(t, "untitled", *hitFor(t, hits, "untitled.md").Title, "no heading: the file name")
	require.Contains(t, hitFor(t, hits, "ops/deploy.md").Excerpt, "second reviewer")
	require.True(t, strings.HasPrefix(*hits[0].URI, "file://"))

	hits, err = client.Query(context.Background(), "docs", rtknowledge.Credentials{},
		rtknowledge.Query{Text: "deploy", TopK: 1})
	require.NoError(t, err)
	require.Len(t, hits, 1)

	scope := "people"
	hits, err = client.Query(context.Background(), "docs", rtknowledge.Credentials{},
		rtknowledge.Query{Text: "deploy", TopK: 10, ScopeRef: &scope})
	require.NoError(t, err)
	require.Len(t, hits, 1)
	require.Equal(t, "people/onboarding.md", hits[0].ResourceRef)

	// A word also finds the words it begins.
	hits, err = client.Query(context.Background(), "docs", rtknowledge.Credentials{},
		rtknowledge.Query{Text: "week", TopK: 10})
	require.NoError(t, err)
	require.Len(t, hits, 2, "weekdays and week")
	require.Equal(t, "ops/deploy.md", hits[0].ResourceRef)
	require.Equal(t, "people/onboarding.md", hits[1].ResourceRef)

	hits, err = client.Query(context.Background(), "docs", rtknowledge.Credentials{},
		rtknowledge.Query{Text: "zebra", TopK: 10})
	require.NoError(t, err)
	require.Empty(t, hits)
}

func hitFor(t *testing.T, hits []contract.KnowledgeHit, ref string) contract.KnowledgeHit {
	t.Helper()
	for _, h := range hits {
		if h.ResourceRef == ref {
			return h
		}
	}
	t.Fatalf("no hit for %s", ref)
	return contract.KnowledgeHit{}
}

// A section over 64 KiB is cut by the provider itself.
func TestLongSectionIsCut(t *testing.T) {
	t.Parallel()
	_, client := serve(t, writeFiles(t, map[string]string{"big.md": "# Big\n\n" + strings.Repeat("needle ", 20000)}))
	hits, err := client.Query(context.Background(), "docs", rtknowledge.Credentials{},
		rtknowledge.Query{Text: "needle", TopK: 1})
	require.NoError(t, err)
	require.True(t, hits[0].Truncated)
	require.Len(t, hits[0].Excerpt, contract.MaxKnowledgeExcerptBytes)
}

func TestResolveAndCapabilities(t *testing.T) {
	t.Parallel()
	srv, client := serve(t, writeFiles(t, docs))
	resources, err := client.Resolve(context.Background(), "docs", rtknowledge.Credentials{},
		[]string{"people/onboarding.md", "nope.md"})
	require.NoError(t, err)
	require.Len(t, resources, 1)
	require.Equal(t, "Onboarding", *resources[0].Title)
	require.JSONEq(t, fmt.Sprintf(`{"bytes": %d, "sections": 1}`, len(docs["people/onboarding.md"])), string(resources[0].Metadata))
	require.NotEmpty(t, *resources[0].RevisionRef)

	resp, err := http.Get(srv.URL + knowledge.PathCapabilities)
	require.NoError(t, err)
	defer resp.Body.Close()
	var caps knowledge.ProviderCapabilities
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&caps))
	require.Equal(t, knowledge.ProviderCapabilities{QueryModes: []string{"keyword"}, ResourceResolution: true, MaxHits: 100}, caps)
}

func TestProtocolErrors(t *testing.T) {
	t.Parallel()
	srv, _ := serve(t, writeFiles(t, docs))
	for _, c := range []struct {
		method, path, body string
		status             int
	}{
		{http.MethodGet, "/nope", "", http.StatusNotFound},
		{http.MethodGet, knowledge.PathQuery, "", http.StatusMethodNotAllowed},
		{http.MethodPost, knowledge.PathQuery, `{"query": "x", "topK": 0}`, http.StatusBadRequest},
		{http.MethodPost, knowledge.PathQuery, `{"query": `, http.StatusBadRequest},
		{http.MethodPost, knowledge.PathResolve, strings.Repeat(" ", markdown.MaxRequestBytes+1), http.StatusRequestEntityTooLarge},
	} {
		req, err := http.NewRequest(c.method, srv.URL+c.path, strings.NewReader(c.body))
		require.NoError(t, err)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, c.status, resp.StatusCode, "%s %s: %s", c.method, c.path, body)
		require.Contains(t, string(body), `"error"`)
	}
}

func TestLoadRefusesOversizedFiles(t *testing.T) {
	t.Parallel()
	dir := writeFiles(t, map[string]string{"huge.md": strings.Repeat("x", markdown.MaxFileBytes+1)})
	_, err := markdown.Load(dir)
	require.ErrorContains(t, err, "huge.md is larger than")
	_, err = markdown.Load(filepath.Join(dir, "missing"))
	require.Error(t, err)
}
