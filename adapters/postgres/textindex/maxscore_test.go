package textindex

import (
	"cmp"
	"math"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestScoreDocuments(t *testing.T) {
	t.Parallel()
	w := Weights{IDF: []float64{2, 1}, AvgDL: 4}
	sc := &Scratch{postings: []Posting{
		{Ord: 2, TF: 1, Length: 4, Created: 20}, {Ord: 5, TF: 2, Length: 8, Created: 50},
		// A prefix term: ordinal 5 holds two of the terms it stands for.
		{Ord: 1, TF: 1, Length: 2, Created: 10}, {Ord: 5, TF: 1, Length: 8, Created: 50}, {Ord: 5, TF: 1, Length: 8, Created: 50}, {Ord: 9, TF: 1, Length: 4, Created: 90},
	}, terms: []int{2, 6}}
	got := sc.Score(w.IDF, w.AvgDL, false)
	want := []Candidate{
		{Ord: 1, Created: 10, Score: Contribution(1, 1, 2, 4)},
		{Ord: 2, Created: 20, Score: Contribution(2, 1, 4, 4)},
		{Ord: 5, Created: 50, Score: Contribution(2, 2, 8, 4) + 2*Contribution(1, 1, 8, 4)},
		{Ord: 9, Created: 90, Score: Contribution(1, 1, 4, 4)},
	}
	require.Equal(t, want, got)
	sc.Allowed = []int64{2, 9, 12}
	require.Equal(t, []Candidate{want[1], want[3]}, sc.Score(w.IDF, w.AvgDL, true), "the allowed documents only")
	sc.postings, sc.terms = sc.postings[2:3], []int{0, 1}
	require.Equal(t, want[:1], sc.Score(w.IDF, w.AvgDL, false), "the buffers are reused, and a term may have no posting")
	require.InDelta(t, 2*2.2/(1+1.2), Contribution(2, 1, 4, 4), 1e-12, "a document of the mean length holding the term once")
}

func TestBestCandidates(t *testing.T) {
	t.Parallel()
	cands := []Candidate{
		{Ord: 1, Score: 1, Created: 5}, {Ord: 2, Score: 3, Created: 1}, {Ord: 3, Score: 2, Created: 7},
		{Ord: 4, Score: 2, Created: 7}, {Ord: 5, Score: 2, Created: 6}, {Ord: 6, Score: 0.5, Created: 9},
	}
	best, rest := bestCandidates(cands, 2)
	ords := func(cs []Candidate) []int64 {
		var out []int64
		for _, c := range cs {
			out = append(out, c.Ord)
		}
		return out
	}
	require.Equal(t, []int64{2, 3, 4}, ords(best), "the best two, and the one ranking alike with the second")
	require.ElementsMatch(t, []int64{1, 5, 6}, ords(rest))
	best, rest = bestCandidates(rest, 5)
	require.Equal(t, []int64{5, 1, 6}, ords(best), "all of them, sorted")
	require.Empty(t, rest)
}

func TestMarginBatch(t *testing.T) {
	t.Parallel()
	cands := []Candidate{
		{Ord: 1, Score: 10}, {Ord: 2, Score: 9}, {Ord: 3, Score: 8.5}, {Ord: 4, Score: 7.9}, {Ord: 5, Score: 3},
	}
	batch, outside := marginBatch(cands, 2, 1)
	var ords []int64
	for _, c := range batch {
		ords = append(ords, c.Ord)
	}
	require.Equal(t, []int64{1, 2, 3}, ords, "the best two, and the third within the light bound of the second")
	require.InDelta(t, 9.0, outside, 0, "what no document left out reaches: the second's partial score")
	batch, outside = marginBatch(cands, 3, 6)
	require.Len(t, batch, 5)
	require.True(t, math.IsInf(outside, -1), "nothing left out")
}

// searchDoc is a hand-made document: its ordinal, creation time, length and its terms'
// tf.
type searchDoc struct {
	ord, created int64
	length       int32
	tf           map[string]int32
}

// searchCorpus is a scope of documents held here, which a Lookup reads as the
// adapter reads the database: postings by term, ranked by the documents' full scores.
type searchCorpus struct {
	docs  []searchDoc
	reads [][]string // the terms of each read
}

func (c *searchCorpus) df(terms []string) []float64 {
	df := make([]float64, len(terms))
	for i, term := range terms {
		for _, d := range c.docs {
			if d.tf[term] > 0 {
				df[i]++
			}
		}
	}
	return df
}

func (c *searchCorpus) weights(terms []string) Weights {
	length := 0.0
	for _, d := range c.docs {
		length += float64(d.length)
	}
	return NewWeights(float64(len(c.docs)), length, c.df(terms))
}

// fullScore is d's BM25 score for terms of idf.
func (c *searchCorpus) fullScore(d searchDoc, terms []string, idf []float64, avgdl float64) float64 {
	score := 0.0
	for i, term := range terms {
		if tf := d.tf[term]; tf > 0 {
			score += Contribution(idf[i], tf, d.length, avgdl)
		}
	}
	return score
}

func (c *searchCorpus) lookup(sc *Scratch, w Weights) Lookup[Candidate] {
	byOrd := map[int64]searchDoc{}
	for _, d := range c.docs {
		byOrd[d.ord] = d
	}
	return Lookup[Candidate]{
		Read: func(terms TermSet) error {
			c.reads = append(c.reads, terms.Lexemes)
			sc.Reset(len(terms.Lexemes))
			for i, term := range terms.Lexemes {
				var block []Posting
				for j := len(c.docs) - 1; j >= 0; j-- { // out of order: Sorted sorts them
					if d := c.docs[j]; d.tf[term] > 0 {
						block = append(block, Posting{Ord: d.ord, TF: d.tf[term], Length: d.length, Created: d.created})
					}
				}
				if len(block) > 1 {
					// The first posting as a pending one, the rest packed in a block.
					slices.SortFunc(block[1:], ByOrd)
					sc.Add(i, block[0])
					if err := sc.AddBlock(i, EncodeBlock(block[1:]), len(block)-1); err != nil {
						return err
					}
				} else {
					for _, p := range block {
						sc.Add(i, p)
					}
				}
			}
			sc.Sorted()
			return nil
		},
		Rank: func(batch []Candidate, limit int, light TermSet) ([]Candidate, error) {
			var out []Candidate
			for _, cand := range batch {
				cand.Score += c.fullScore(byOrd[cand.Ord], light.Lexemes, light.IDF, w.AvgDL)
				out = append(out, cand)
			}
			slices.SortFunc(out, ranked)
			return out[:min(limit, len(out))], nil
		},
		Score: func(c Candidate) float64 { return c.Score },
	}
}

// ranked orders documents as the entries table ranks them: by score, then the newer,
// then by ordinal (the table's entry ID).
func ranked(a, b Candidate) int {
	if before(a, b) {
		return -1
	}
	if before(b, a) {
		return 1
	}
	return cmp.Compare(a.Ord, b.Ord)
}

// exact ranks every document by its full score.
func (c *searchCorpus) exact(terms []string, w Weights, k int) []Candidate {
	var out []Candidate
	for _, d := range c.docs {
		if s := c.fullScore(d, terms, w.IDF, w.AvgDL); s > 0 {
			out = append(out, Candidate{Ord: d.ord, Created: d.created, Score: s})
		}
	}
	slices.SortFunc(out, ranked)
	return out[:min(k, len(out))]
}

// newSearchCorpus makes n documents: "common" in nine of ten, "rare" in one of ten,
// "scarce" in one only.
func newSearchCorpus(n int) *searchCorpus {
	c := &searchCorpus{}
	for i := range n {
		d := searchDoc{ord: int64(i + 1), created: int64(1000 + i%7), length: int32(5 + i%13), tf: map[string]int32{}}
		if i%10 != 0 {
			d.tf["common"] = int32(1 + i%3)
		}
		if i%10 == 3 {
			d.tf["rare"] = int32(1 + i%4)
		}
		if i == 42 {
			d.tf["scarce"] = 1
		}
		c.docs = append(c.docs, d)
	}
	return c
}

// search runs Search for k documents over the corpus, with the document frequencies
// df (nil: the corpus's own), and returns them with the query's weights.
func (c *searchCorpus) search(t *testing.T, sc *Scratch, terms []string, prefixes []bool, df []float64, k int, restricted bool) ([]Candidate, Weights) {
	t.Helper()
	w := c.weights(terms)
	if df == nil {
		df = c.df(terms)
	}
	got, err := Search(sc, terms, prefixes, df, w, k, restricted, c.lookup(sc, w))
	require.NoError(t, err)
	return got, w
}

func TestSearchMaxScoreLeavesLightTermsUnread(t *testing.T) {
	t.Parallel()
	c := newSearchCorpus(200)
	terms := []string{"rare", "common"}
	got, w := c.search(t, new(Scratch), terms, make([]bool, 2), nil, 5, false)
	require.Equal(t, c.exact(terms, w, 5), got, "the exact BM25 top 5")
	require.Equal(t, [][]string{{"rare"}}, c.reads, "the light term's postings are never read")
}

func TestSearchFallsBackToEveryTerm(t *testing.T) {
	t.Parallel()
	c := newSearchCorpus(200)
	// Fewer documents hold the essential term than are asked for: MaxScore cannot tell
	// its answer is the best.
	terms := []string{"scarce", "common"}
	got, w := c.search(t, new(Scratch), terms, make([]bool, 2), []float64{1e6, 1e6}, 10, false)
	require.Equal(t, c.exact(terms, w, 10), got, "the exact BM25 top 10")
	require.Equal(t, terms, c.reads[len(c.reads)-1], "every term's postings read last")
}

func TestSearchPrefixAndRestricted(t *testing.T) {
	t.Parallel()
	c := newSearchCorpus(100)
	terms := []string{"common", "rare"}
	sc := new(Scratch)
	got, w := c.search(t, sc, terms, []bool{true, true}, nil, 3, false)
	require.Equal(t, c.exact(terms, w, 3), got)
	require.Equal(t, [][]string{terms}, c.reads, "prefix terms are never light: one read of every term")

	sc.Allowed = []int64{2, 4, 14, 50}
	got, _ = c.search(t, sc, terms, make([]bool, 2), nil, 10, true)
	var ords []int64
	for _, h := range got {
		ords = append(ords, h.Ord)
	}
	require.ElementsMatch(t, []int64{2, 4, 14, 50}, ords, "the allowed documents only")

	got, _ = c.search(t, sc, []string{"absent"}, []bool{false}, nil, 10, false)
	require.NotNil(t, got, "no document: an empty result")
	require.Empty(t, got)
}
