package postgres_test

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/adapters/postgres"
	"github.com/agent-context/agent-context/adapters/postgres/pgtest"
	"github.com/agent-context/agent-context/runtime"
	"github.com/agent-context/agent-context/runtime/memory"
)

// TestTextSearchIsExactBM25: over 2,000 entries of the benchmark's corpus (every one
// holding "note" and "service", the light terms the search looks up only for the
// entries that can rank), the text half returns the top k of an Okapi BM25 computed
// here from the documents: the same scores, in order, with and without a filter, for
// questions with rare terms, a single term, and common terms only, and for a k larger
// than the entries holding the essential terms (the search again with every term
// essential).
func TestTextSearchIsExactBM25(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewDB(t)
	db := newDB(t, pool)
	scope := runtime.Scope{TenantID: "t", ProjectID: "p"}
	texts := corpus(2000, 5)
	entries := hashSeed(t, "e", texts, func(i int) []string {
		if i%10 == 3 {
			return []string{"rare"}
		}
		return []string{}
	})
	seedProjection(t, pool, db, scope, hashModel, entries)
	// Another scope's entries hold the same words and never count.
	seedProjection(t, pool, db, runtime.Scope{TenantID: "u", ProjectID: "p"}, hashModel, hashSeed(t, "u", corpus(300, 6), func(int) []string { return []string{} }))

	type doc struct {
		id     string
		rare   bool
		tf     map[string]int
		length float64
	}
	docs := make([]doc, len(entries))
	total := 0.0
	for i, e := range entries {
		v, n := postgres.EntryDocument(scope, e.Content)
		d := doc{id: e.ID, rare: len(e.Tags) > 0, tf: map[string]int{}, length: float64(n)}
		for _, l := range v.Lexemes {
			d.tf[l.Word[13:]] = len(l.Positions)
		}
		docs[i] = d
		total += float64(n)
	}
	avgdl := total / float64(len(docs))
	exact := func(text string, rare bool, k int) []float64 {
		terms := postgres.RecallTermLexemes(text)
		var scores []float64
		for _, d := range docs {
			if rare && !d.rare {
				continue
			}
			score, matched := 0.0, false
			for _, term := range terms {
				tf := float64(d.tf[term])
				if tf == 0 {
					continue
				}
				df := 0.0
				for _, o := range docs {
					if o.tf[term] > 0 {
						df++
					}
				}
				idf := math.Log(1 + (float64(len(docs))-df+0.5)/(df+0.5))
				score += idf * tf * 2.2 / (tf + 1.2*(0.25+0.75*d.length/avgdl))
				matched = true
			}
			if matched {
				scores = append(scores, score)
			}
		}
		slices.SortFunc(scores, func(a, b float64) int { return cmp.Compare(b, a) })
		return scores[:min(k, len(scores))]
	}
	for _, c := range []struct {
		text string
		rare bool
		k    int
	}{
		{"why does the billing service retries nightly after midnight", false, 10},
		{"why does the billing service retries nightly after midnight", true, 10},
		{"the ledger service caches globally on holidays note 17", false, 10},
		{"scheduler", false, 10},
		{"scheduler", true, 5},
		{"note service", false, 10},
		{"note service", true, 10},
		{"crawler leaks remotely in Lima", false, 200},
		{"scheduler note", false, 200}, // fewer than k hold the essential term: every posting
	} {
		name := fmt.Sprintf("%q rare=%v k=%d", c.text, c.rare, c.k)
		filter := memory.RecallFilter{NowMs: time.Now().UnixMilli()}
		if c.rare {
			filter.Tags = []string{"rare"}
		}
		hits, err := db.Recall().TextSearch(context.Background(), scope, memory.TextRecall{RecallFilter: filter, Text: c.text, Limit: c.k})
		require.NoError(t, err, name)
		want := exact(c.text, c.rare, c.k)
		require.Len(t, hits, len(want), name)
		for i, h := range hits {
			require.InDelta(t, want[i], h.Score, 1e-9, "%s: rank %d (%s)", name, i+1, h.Entry.ID)
			if c.rare {
				require.Equal(t, []string{"rare"}, h.Entry.Tags, name)
			}
		}
	}
}
