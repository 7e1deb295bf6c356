package textindex

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestBM25Essential(t *testing.T) {
	t.Parallel()
	w := Weights{bound: []float64{1, 5, 0.5, 0.01, 0.9}}
	many := []float64{10, 10, 1e6, 1e6, 10}
	essential, light := w.essential(make([]bool, 5), many, 10)
	require.Equal(t, []bool{true, true, false, false, true}, essential,
		"the lightest terms while their bounds stay within a quarter of the weightiest's (0.01 + 0.5, not + 0.9)")
	require.InDelta(t, 0.51+2*Quantum, light, 1e-15, "the light bounds, each with the rounding's margin")
	essential, light = w.essential([]bool{false, false, true, false, false}, many, 10)
	require.Equal(t, []bool{true, true, true, false, false}, essential, "a prefix term is never light; the next lightest is")
	require.InDelta(t, 0.91+2*Quantum, light, 1e-15)
	essential, light = w.essential(make([]bool, 5), []float64{10, 1, 1e6, 1e6, 10}, 10)
	require.Equal(t, []bool{true, true, true, false, true}, essential,
		"the budget is set by the weightiest term that can fill the results (a quarter of 1, not of 5, which one entry holds)")
	require.InDelta(t, 0.01+Quantum, light, 1e-15)
	essential, light = Weights{bound: []float64{3}}.essential([]bool{false}, []float64{5}, 10)
	require.Equal(t, []bool{true}, essential, "no term fills the results: none is light")
	require.Zero(t, light)
}

func TestNewWeights(t *testing.T) {
	t.Parallel()
	w := NewWeights(100, 500, []float64{1, 50, 100, 200, -3})
	require.InDelta(t, 5.0, w.AvgDL, 0)
	require.InDelta(t, math.Log(1+99.5/1.5), w.IDF[0], 1e-12, "a rare term weighs most")
	require.InDelta(t, math.Log(2), w.IDF[1], 1e-12, "a term half the scope holds")
	require.InDelta(t, math.Log(1+0.5/100.5), w.IDF[2], 1e-12, "a term every entry holds weighs a trace")
	require.Equal(t, w.IDF[2], w.IDF[3], "a frequency beyond the scope counts as the scope")
	require.Equal(t, NewWeights(100, 500, []float64{0}).IDF[0], w.IDF[4], "a negative frequency counts as none")
	require.InDelta(t, w.IDF[0]*(K1+1), w.bound[0], 1e-12)
	empty := NewWeights(0, 0, []float64{0, 0})
	require.InDelta(t, 1.0, empty.AvgDL, 0, "an empty scope")
	require.Equal(t, empty.IDF[0], empty.IDF[1], "weighs every term alike")
	require.InDelta(t, 1e-9, Weights{}.IDFSum(), 0, "never 0")
	require.InDelta(t, w.IDF[0]+w.IDF[1]+w.IDF[2]+w.IDF[3]+w.IDF[4], w.IDFSum(), 1e-12)
}

func TestContribution(t *testing.T) {
	t.Parallel()
	exact := func(idf float64, tf, length int32, avgdl float64) float64 {
		return idf * float64(tf) * (K1 + 1) / (float64(tf) + K1*(1-B+B*float64(length)/avgdl))
	}
	for _, c := range []struct {
		idf        float64
		tf, length int32
		avgdl      float64
	}{{2.5, 1, 10, 10}, {0.3, 7, 3, 12.5}, {9.1, 300, 2000, 40}, {1e-3, 1, 1, 1}} {
		got := Contribution(c.idf, c.tf, c.length, c.avgdl)
		require.InDelta(t, exact(c.idf, c.tf, c.length, c.avgdl), got, Quantum/2, "within half a quantum of the exact value")
		require.Zero(t, math.Mod(got, Quantum), "a multiple of the quantum")
	}
	require.Less(t, Contribution(2, 1, 20, 10), Contribution(2, 1, 5, 10), "a longer document weighs a term less")
	require.Less(t, Contribution(2, 100, 10, 10), 2*(K1+1), "tf saturates below the bound")
}
