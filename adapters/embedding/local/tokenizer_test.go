package local

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// testVocab has the six reserved entries, then pieces chosen to exercise the
// reference tokenizer's rules. Every expectation below was checked against the
// reference implementation (@energetic-ai/embeddings 0.2.0) run on this vocabulary.
const testVocab = `[["\ufffd",0],["<s>",0],["</s>",0],["x1",0],["x2",0],["x3",0],
 ["▁",-2],["▁ab",-3],["a",-4],["b",-4],["▁a",-2.5],["c",null],["dd",-1],["▁fi",-1],
 ["▁g",-9],["▁g",-1]]`

func mustTokenizer(t *testing.T) *tokenizer {
	t.Helper()
	tok, err := newTokenizer([]byte(testVocab))
	require.NoError(t, err)
	return tok
}

func TestTokenizerRules(t *testing.T) {
	t.Parallel()
	tok := mustTokenizer(t)
	lat := new(lattice)
	for _, tc := range []struct {
		name string
		text string
		want []int32
	}{
		{"best segmentation", "ab", []int32{7}},              // ▁ab (-3) beats ▁a+b (-6.5)
		{"spaces become separators", "ab a", []int32{7, 10}}, // ▁ab ▁a
		{"null score counts as zero", "c", []int32{6, 11}},   // ▁ then c (0)
		{"a repeated piece keeps its last entry", "g", []int32{15}},
		{"NFKC first", "ﬁ", []int32{13}}, // the ligature becomes f+i
		// "d" alone is no piece, so position 2 of ▁dd is never reached and keeps the
		// score 0, which makes the unknown "d" after it beat "dd".
		{"an unreached position scores 0", "dd", []int32{6, 0}},
		{"unknown runs collapse", "zzz", []int32{6, 0}},
		{"unknowns apart stay apart", "zaz", []int32{6, 0, 8, 0}},
		{"tabs are not spaces", "a\ta", []int32{10, 0, 8}},
		{"astral characters are one unknown", "🚀", []int32{6, 0}},
		{"empty text", "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, tok.encode(tc.text, lat))
		})
	}
}

// TestTokenizerTies: of equal scores the later candidate wins, and a best score of
// exactly 0 counts as none yet — both as in the reference's Viterbi loop.
func TestTokenizerTies(t *testing.T) {
	t.Parallel()
	tok, err := newTokenizer([]byte(`[["\ufffd",0],["<s>",0],["</s>",0],["x1",0],["x2",0],["x3",0],
		["▁",0],["q",0],["▁q",0]]`))
	require.NoError(t, err)
	// At position 2 (after "▁q"), "▁q" (start 0) and "q" (start 1) tie at 0; the
	// later start wins, so the text is ▁ + q.
	require.Equal(t, []int32{6, 7}, tok.encode("q", new(lattice)))
}

func TestTokenizerClipsAt128(t *testing.T) {
	t.Parallel()
	tok := mustTokenizer(t)
	ids := tok.encode(strings.Repeat("a ", 200), new(lattice))
	require.Len(t, ids, maxTokens)
}

func TestTokenizerRejectsBadVocab(t *testing.T) {
	t.Parallel()
	for _, vocab := range []string{`{}`, `[["a",0]]`, `[["a",0],["b",0],["c",0],["d",0],["e",0],["f",0],["g","x"]]`,
		`[["a",0],["b",0],["c",0],["d",0],["e",0],["f",0],[1,0]]`, `[["a",0],["b",0],["c",0],["d",0],["e",0],["f",0],["g"]]`} {
		_, err := newTokenizer([]byte(vocab))
		require.Error(t, err, vocab)
	}
}

// TestKernelMatchesGo: the assembly kernels (where they run) compute the portable
// kernel's sums, for products of whole blocks and of every shorter tail.
func TestKernelMatchesGo(t *testing.T) {
	t.Parallel()
	if !hasFMA {
		t.Skip("no AVX2/FMA here: only the portable kernel runs, and the golden test covers it")
	}
	rng := rand.New(rand.NewPCG(1, 2))
	const k, n = 37, 32
	for _, rows := range []int{1, 2, 3, 4, 5, 6, 12, 13, 15, 17} {
		a := make([]float32, rows*k)
		w := make([]float32, k*n)
		bias := make([]float32, n)
		for i := range a {
			a[i] = rng.Float32()*2 - 1
		}
		for i := range w {
			w[i] = rng.Float32()*2 - 1
		}
		for i := range bias {
			bias[i] = rng.Float32()
		}
		m := packMatrix(w, k, n)
		got := make([]float32, rows*n)
		gemm(got, a, rows, m, bias)
		for r := 0; r < rows; r++ {
			for c := 0; c < n; c++ {
				var want float64
				for kk := 0; kk < k; kk++ {
					want += float64(a[r*k+kk]) * float64(w[kk*n+c])
				}
				want += float64(bias[c])
				require.InDelta(t, want, got[r*n+c], 1e-4, "%d rows", rows)
			}
		}
		want := make([]float32, rows*n)
		for r := 0; r < rows; r++ {
			for p := 0; p < n/panelWidth; p++ {
				kernelGo(1, a[r*k:], k, m.packed[p*k*panelWidth:(p+1)*k*panelWidth], k, want[r*n+p*panelWidth:], n)
			}
		}
		for i := range want {
			require.InDelta(t, want[i]+bias[i%n], got[i], 1e-5, "%d rows", rows)
		}
	}
}
