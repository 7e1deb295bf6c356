package main

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/adapters/embedding/local/localtest"
)

// qualitySet is testdata/recall-quality.json: the labelled set of
// docs/recall-quality.md.
type qualitySet struct {
	Memories []struct {
		ID, Kind, Content string
	} `json:"memories"`
	Queries []struct {
		Query, Answer, Category string
	} `json:"queries"`
}

// quality is the top-1, top-3 and mean reciprocal rank (within the top 10) of a set
// of queries.
type quality struct {
	n                 int
	top1, top3, rrSum float64
}

func (q *quality) add(rank int) {
	q.n++
	if rank == 1 {
		q.top1++
	}
	if rank >= 1 && rank <= 3 {
		q.top3++
	}
	if rank >= 1 {
		q.rrSum += 1 / float64(rank)
	}
}

func (q quality) Top1() float64 { return q.top1 / float64(q.n) }
func (q quality) Top3() float64 { return q.top3 / float64(q.n) }
func (q quality) MRR() float64  { return q.rrSum / float64(q.n) }

// TestRecallQuality loads the labelled set into the real service with each embedder,
// asks every query, and reports top-1, top-3 and MRR by configuration and category
// (the table of docs/recall-quality.md: run with -v to print it). The local embedder
// must beat the hash embedder clearly on paraphrases, and hybrid recall must add the
// exact words of jargon and CJK without losing overall.
func TestRecallQuality(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("testdata/recall-quality.json")
	require.NoError(t, err)
	var set qualitySet
	require.NoError(t, json.Unmarshal(raw, &set))
	require.GreaterOrEqual(t, len(set.Memories), 40)
	require.GreaterOrEqual(t, len(set.Queries), 40)
	modelDir := localtest.ModelDir(t)

	type config struct{ name, embedder, mode string }
	configs := []config{
		{"hash (vector)", EmbedderHash, "vector"},
		{"local (vector)", EmbedderLocal, "vector"},
		{"hybrid with local", EmbedderLocal, "hybrid"},
		{"text only", EmbedderHash, "text"},
	}
	apps := map[string]*testApp{}
	for _, name := range []string{EmbedderHash, EmbedderLocal} {
		app := startApp(t, func(c *Config) { c.Embedder, c.ModelDir = name, modelDir })
		for _, m := range set.Memories {
			app.createEntry(t, map[string]any{"id": m.ID, "kind": m.Kind, "content": m.Content})
		}
		app.waitProjected(t)
		apps[name] = app
	}
	results := map[string]map[string]*quality{} // config → category ("all" too) → quality
	var misses []string
	for _, c := range configs {
		results[c.name] = map[string]*quality{}
		for _, q := range set.Queries {
			ids := apps[c.embedder].recallIDs(t, map[string]any{"query": q.Query, "mode": c.mode, "topK": 10})
			rank := slices.Index(ids, q.Answer) + 1
			for _, cat := range []string{"all", q.Category} {
				if results[c.name][cat] == nil {
					results[c.name][cat] = &quality{}
				}
				results[c.name][cat].add(rank)
			}
			if c.name == "hybrid with local" && rank != 1 {
				misses = append(misses, fmt.Sprintf("%s %q → rank %d", q.Category, q.Query, rank))
			}
		}
	}
	var table strings.Builder
	fmt.Fprintf(&table, "\n| configuration | category | queries | top-1 | top-3 | MRR |\n| --- | --- | ---: | ---: | ---: | ---: |\n")
	for _, c := range configs {
		for _, cat := range []string{"all", "paraphrase", "jargon", "foreign", "cjk"} {
			r := results[c.name][cat]
			fmt.Fprintf(&table, "| %s | %s | %d | %.2f | %.2f | %.3f |\n", c.name, cat, r.n, r.Top1(), r.Top3(), r.MRR())
		}
	}
	t.Log(table.String())
	t.Logf("hybrid with local, not first:\n%s", strings.Join(misses, "\n"))

	hash, loc, hybrid := results["hash (vector)"], results["local (vector)"], results["hybrid with local"]
	require.Greater(t, loc["paraphrase"].MRR(), hash["paraphrase"].MRR()+0.2, "local beats hash clearly on paraphrases")
	require.Greater(t, loc["paraphrase"].Top1(), hash["paraphrase"].Top1()+0.2)
	require.Greater(t, hybrid["jargon"].MRR(), loc["jargon"].MRR(), "the text half adds the exact words of jargon")
	require.Greater(t, hybrid["cjk"].MRR(), loc["cjk"].MRR(), "and the bigrams of scripts the model cannot read")
	require.GreaterOrEqual(t, hybrid["all"].MRR(), loc["all"].MRR(), "hybrid is the better default")
	require.GreaterOrEqual(t, hybrid["all"].Top3(), loc["all"].Top3())
}
