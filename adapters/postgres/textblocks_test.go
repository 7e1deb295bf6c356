package postgres

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestBlockRoundTrip(t *testing.T) {
	t.Parallel()
	ps := []posting{
		{ord: 7, tf: 1, length: 12, created: 1_700_000_000_000},
		{ord: 9, tf: 3, length: 400, created: 1_600_000_000_000}, // imported: created before the one above
		{ord: 1 << 40, tf: 70_000, length: 1, created: 1_700_000_000_001},
	}
	data := encodeBlock(ps)
	got, err := decodeBlock([]posting{{ord: 1}}, data)
	require.NoError(t, err)
	require.Equal(t, append([]posting{{ord: 1}}, ps...), got, "appended after what dst held")
	_, err = decodeBlock(nil, data[:len(data)-1])
	require.ErrorIs(t, err, errCorruptBlock, "a block cut short")
}

func TestPackBlocks(t *testing.T) {
	t.Parallel()
	run := func(n int, from int64) []posting {
		out := make([]posting, n)
		for i := range out {
			out[i] = posting{ord: from + int64(i), tf: 1, length: 5}
		}
		return out
	}
	touched := []textBlock{
		{term: "full", block: 3, full: true},
		{term: "room", block: 0, postings: run(textBlockPostings-2, 100)},
		{term: "drop", block: 1, postings: run(3, 10)},
	}
	moved := map[string][]posting{
		"full":  run(2, 50_000),
		"room":  run(5, 50_000),
		"fresh": run(textBlockPostings+1, 1),
	}
	dropped := map[string][]int64{"drop": {10, 11, 12}}
	blocks := map[string][]textBlock{}
	for _, b := range packBlocks(touched, moved, dropped) {
		blocks[b.term] = append(blocks[b.term], b)
	}
	require.Len(t, blocks["full"], 1, "a full block is not rewritten")
	require.Equal(t, int32(4), blocks["full"][0].block, "the moved postings start the block after it")
	require.Len(t, blocks["room"], 2)
	require.Equal(t, int32(0), blocks["room"][0].block)
	require.Len(t, blocks["room"][0].postings, textBlockPostings, "the last block is filled first")
	require.Equal(t, int32(1), blocks["room"][1].block)
	require.Len(t, blocks["room"][1].postings, 3, "the rest in the next")
	require.Len(t, blocks["fresh"], 2)
	require.Equal(t, []int32{0, 1}, []int32{blocks["fresh"][0].block, blocks["fresh"][1].block})
	require.Len(t, blocks["drop"], 1)
	require.Empty(t, blocks["drop"][0].postings, "a block whose every posting was dropped is written empty (deleted)")
}

func TestScoreDocuments(t *testing.T) {
	t.Parallel()
	w := bm25{idf: []float64{2, 1}, avgdl: 4}
	sc := &textScratch{postings: []posting{
		{ord: 2, tf: 1, length: 4, created: 20}, {ord: 5, tf: 2, length: 8, created: 50},
		// A prefix term: ordinal 5 holds two of the terms it stands for.
		{ord: 1, tf: 1, length: 2, created: 10}, {ord: 5, tf: 1, length: 8, created: 50}, {ord: 5, tf: 1, length: 8, created: 50}, {ord: 9, tf: 1, length: 4, created: 90},
	}, terms: []int{2, 6}}
	got := sc.score(w.idf, w.avgdl, false)
	want := []textCandidate{
		{ord: 1, created: 10, score: contribution(1, 1, 2, 4)},
		{ord: 2, created: 20, score: contribution(2, 1, 4, 4)},
		{ord: 5, created: 50, score: contribution(2, 2, 8, 4) + 2*contribution(1, 1, 8, 4)},
		{ord: 9, created: 90, score: contribution(1, 1, 4, 4)},
	}
	require.Equal(t, want, got)
	sc.allowed = []int64{2, 9, 12}
	require.Equal(t, []textCandidate{want[1], want[3]}, sc.score(w.idf, w.avgdl, true), "the allowed documents only")
	sc.postings, sc.terms = sc.postings[2:3], []int{0, 1}
	require.Equal(t, want[:1], sc.score(w.idf, w.avgdl, false), "the buffers are reused, and a term may have no posting")
	require.InDelta(t, 2*2.2/(1+1.2), contribution(2, 1, 4, 4), 1e-12, "a document of the mean length holding the term once")
}

func TestBestCandidates(t *testing.T) {
	t.Parallel()
	cands := []textCandidate{
		{ord: 1, score: 1, created: 5}, {ord: 2, score: 3, created: 1}, {ord: 3, score: 2, created: 7},
		{ord: 4, score: 2, created: 7}, {ord: 5, score: 2, created: 6}, {ord: 6, score: 0.5, created: 9},
	}
	best, rest := bestCandidates(cands, 2)
	ords := func(cs []textCandidate) []int64 {
		var out []int64
		for _, c := range cs {
			out = append(out, c.ord)
		}
		return out
	}
	require.Equal(t, []int64{2, 3, 4}, ords(best), "the best two, and the one ranking alike with the second")
	require.ElementsMatch(t, []int64{1, 5, 6}, ords(rest))
	best, rest = bestCandidates(rest, 5)
	require.Equal(t, []int64{5, 1, 6}, ords(best), "all of them, sorted")
	require.Empty(t, rest)
}

func TestBM25Essential(t *testing.T) {
	t.Parallel()
	w := bm25{bound: []float64{1, 5, 0.5, 0.01, 0.9}}
	many := []float64{10, 10, 1e6, 1e6, 10}
	essential, light := w.essential(make([]bool, 5), many, 10)
	require.Equal(t, []bool{true, true, false, false, true}, essential,
		"the lightest terms while their bounds stay within a quarter of the weightiest's (0.01 + 0.5, not + 0.9)")
	require.InDelta(t, 0.51+2*bm25Quantum, light, 1e-15, "the light bounds, each with the rounding's margin")
	essential, light = w.essential([]bool{false, false, true, false, false}, many, 10)
	require.Equal(t, []bool{true, true, true, false, false}, essential, "a prefix term is never light; the next lightest is")
	require.InDelta(t, 0.91+2*bm25Quantum, light, 1e-15)
	essential, light = w.essential(make([]bool, 5), []float64{10, 1, 1e6, 1e6, 10}, 10)
	require.Equal(t, []bool{true, true, true, false, true}, essential,
		"the budget is set by the weightiest term that can fill the results (a quarter of 1, not of 5, which one entry holds)")
	require.InDelta(t, 0.01+bm25Quantum, light, 1e-15)
	essential, light = bm25{bound: []float64{3}}.essential([]bool{false}, []float64{5}, 10)
	require.Equal(t, []bool{true}, essential, "no term fills the results: none is light")
	require.Zero(t, light)
}

func TestMarginBatch(t *testing.T) {
	t.Parallel()
	cands := []textCandidate{
		{ord: 1, score: 10}, {ord: 2, score: 9}, {ord: 3, score: 8.5}, {ord: 4, score: 7.9}, {ord: 5, score: 3},
	}
	batch, outside := marginBatch(cands, 2, 1)
	var ords []int64
	for _, c := range batch {
		ords = append(ords, c.ord)
	}
	require.Equal(t, []int64{1, 2, 3}, ords, "the best two, and the third within the light bound of the second")
	require.InDelta(t, 9.0, outside, 0, "what no document left out reaches: the second's partial score")
	batch, outside = marginBatch(cands, 3, 6)
	require.Len(t, batch, 5)
	require.True(t, math.IsInf(outside, -1), "nothing left out")
}
