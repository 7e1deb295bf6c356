package main

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// The benchmark's analysis: words lowercased, stop words out, Snowball english stems.
func TestLoCoMoBM25Terms(t *testing.T) {
	t.Parallel()
	require.Equal(t, []string{"runner", "run", "quick", "café"}, bm25Terms("The Runners were running, quickly! To the CAFÉ"))
	require.Empty(t, bm25Terms("it was, and is: the"))
}

// Okapi BM25 by hand over three documents of lengths 2, 3 and 1 (avgdl 2):
// "apple" is in two of them, idf ln(1 + 1.5/2.5) = ln 1.6; "kiwi" and "plum" in one
// each, idf ln(1 + 2.5/1.5) = ln(8/3).
func TestLoCoMoPlainBM25(t *testing.T) {
	t.Parallel()
	x := newPlainBM25([]string{"d1", "d2", "d3"}, []string{"Apple, apple.", "the apple and a pear, a plum", "Kiwi"})
	require.InDelta(t, 2.0, x.avgdl, 1e-12)

	// d1: tf 2, |d| 2: 2·2.2 / (2 + 1.2·(0.25 + 0.75·2/2)) = 4.4/3.2.
	s, ok := x.score(x.queryTerms("apples?"), 0)
	require.True(t, ok)
	require.InDelta(t, math.Log(1.6)*4.4/3.2, s, 1e-12)
	// d2: tf 1, |d| 3: 2.2 / (1 + 1.2·(0.25 + 0.75·3/2)) = 2.2/2.65.
	s, ok = x.score(x.queryTerms("apple apple"), 1)
	require.True(t, ok)
	require.InDelta(t, math.Log(1.6)*2.2/2.65, s, 1e-12, "a query term counts once")
	_, ok = x.score(x.queryTerms("apple"), 2)
	require.False(t, ok)
	require.Equal(t, []string{"d1", "d2"}, x.search("apple", 10))

	// d3: 2.2 / (1 + 1.2·(0.25 + 0.75/2)) = 2.2/1.75 for kiwi; d2: 2.2/2.65 for plum.
	s, _ = x.score(x.queryTerms("kiwi plum"), 2)
	require.InDelta(t, math.Log(8.0/3)*2.2/1.75, s, 1e-12)
	require.Equal(t, []string{"d3", "d2"}, x.search("kiwi or plum?", 10))
	require.Equal(t, []string{"d3"}, x.search("kiwi plum", 1))
	require.Empty(t, x.search("the banana", 10))

	// Equal scores: the later document first.
	tied := newPlainBM25([]string{"x", "y", "z"}, []string{"pear", "pear", "kiwi"})
	require.Equal(t, []string{"y", "x"}, tied.search("pear", 10))
}

// hit@k and recall@k by hand: a question with two evidence turns, one found second
// and one sixth, and a question whose one turn is not found.
func TestLoCoMoScores(t *testing.T) {
	t.Parallel()
	s := newRetrievalScores()
	ks := []int{1, 2, 6}
	s.add([]string{"x", "a", "y", "z", "w", "b"}, []string{"a", "b"}, ks)
	s.add([]string{"x"}, []string{"c"}, ks)
	for k, want := range map[int][2]float64{1: {0, 0}, 2: {0.5, 0.25}, 6: {0.5, 0.5}} {
		require.InDelta(t, want[0], s.HitAt(k), 1e-12, "hit@%d", k)
		require.InDelta(t, want[1], s.RecallAt(k), 1e-12, "recall@%d", k)
	}
	s.add([]string{"c", "b"}, []string{"c"}, ks)
	require.InDelta(t, 2.0/3, s.HitAt(2), 1e-12)
	require.InDelta(t, (0.5+0+1)/3, s.RecallAt(2), 1e-12)
	require.Zero(t, newRetrievalScores().RecallAt(10), "no question: 0, not NaN")
}

// A conversation's sessions in number order (not the file's), its turns with the
// caption appended, and its questions' evidence split, checked against the turns and
// deduplicated; the same in the nested form and in an array of conversations.
func TestLoCoMoParse(t *testing.T) {
	t.Parallel()
	flat := `{"speaker_a": "Ann", "speaker_b": "Bo",
		"session_10": [{"speaker": "Bo", "dia_id": "D10:1", "text": "Later."}],
		"session_2": [{"speaker": "Ann", "dia_id": "D2:1", "text": "Look!", "blip_caption": "a photo of a red kite"}],
		"session_2_date_time": "1:00 pm on 2 May, 2023",
		"session_1": [{"speaker": "Ann", "dia_id": "D1:1", "text": "Hi Bo."}, {"speaker": "Bo", "dia_id": "D1:2", "text": "Hi Ann."}],
		"qa": [
			{"question": "What did Ann show?", "answer": "a kite", "evidence": ["D2:1; D1:2", "D2:1"], "category": 1},
			{"question": "Who left?", "evidence": ["D9:9"], "category": 5},
			{"question": "Nothing to find", "answer": "x", "evidence": [], "category": 2},
			{"question": "Later?", "answer": 2023, "evidence": ["D10:1"], "category": 2}]}`
	convs, err := parseLoCoMo([]byte(flat))
	require.NoError(t, err)
	require.Len(t, convs, 1)
	c := convs[0]
	var ids, contents []string
	for _, turn := range c.Turns {
		ids, contents = append(ids, turn.DiaID), append(contents, turn.Content())
	}
	require.Equal(t, []string{"D1:1", "D1:2", "D2:1", "D10:1"}, ids)
	require.Equal(t, "Ann: Look! [photo: a photo of a red kite]", contents[2])
	require.Equal(t, "Bo: Hi Ann.", contents[1])
	require.Equal(t, []locomoQuestion{
		{Question: "What did Ann show?", Category: 1, Evidence: []string{"D2:1", "D1:2"}},
		{Question: "Later?", Category: 2, Evidence: []string{"D10:1"}},
	}, c.Questions)
	require.Equal(t, 1, c.Unmatched, "D9:9")

	nested := `[{"sample_id": "s", "conversation": {"speaker_a": "Ann", "speaker_b": "Bo",
		"session_1": [{"speaker": "Ann", "dia_id": "D1:1", "text": "Hi Bo."}]},
		"qa": [{"question": "Hi?", "answer": "yes", "evidence": ["D1:1"], "category": 1}]}, ` + flat + `]`
	convs, err = parseLoCoMo([]byte(nested))
	require.NoError(t, err)
	require.Len(t, convs, 2)
	require.Len(t, convs[0].Turns, 1)
	require.Equal(t, []string{"D1:1"}, convs[0].Questions[0].Evidence)
	require.Equal(t, c, convs[1])

	_, err = parseLoCoMo([]byte(`{"session_1": [{"speaker": "Ann", "dia_id": "D1:1", "text": "a"}, {"speaker": "Bo", "dia_id": "D1:1", "text": "b"}]}`))
	require.ErrorContains(t, err, "repeated")
}
