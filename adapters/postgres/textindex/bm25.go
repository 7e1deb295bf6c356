package textindex

import (
	"cmp"
	"math"
	"slices"
)

// A query ranks by Okapi BM25 over the scope's recallable entries:
//
//	score(e) = Σ over the query's terms t in e of idf(t) · tf·(k1+1) / (tf + k1·(1 − b + b·|e|/avgdl))
//	idf(t)   = ln(1 + (N − df(t) + 0.5) / (df(t) + 0.5))
//
// with N the scope's active entries, df(t) those holding t, |e| the entry's terms and
// avgdl their mean.
const (
	// K1 is BM25's saturation of tf.
	K1 = 1.2
	// B is BM25's normalization by the document's length.
	B = 0.75
	// lightShare bounds MaxScore's light terms: together their bounds are at most this
	// share of the bound of the weightiest term that can fill the results.
	lightShare = 0.25
)

// Quantum is the grid contributions are rounded to, 2^-40. An entry's score is a
// sum of contributions added up in an order that depends on the path (the postings'
// merge term by term, then the light terms' sum); floating-point addition is not
// associative, and equal scores summed in two orders came out a unit in the last place
// apart, which ranked them by that instead of by creation and ID. Multiples of 2^-40 add exactly in a
// float8, in any order, while the sum stays below 2^13; a contribution is below
// idf·(k1+1) < 48 (idf ≤ ln(2N + 2), N < 10^9), so a score of up to 170 contributions
// (32 terms, or a prefix term's many) is an exact sum. A contribution moves by at most
// half a quantum (4.5e-13).
const Quantum = 1.0 / (1 << 40)

// Contribution is a posting's contribution to its document's score, for a posting of tf
// in a document of length: the operations of the adapter's SQL expression of it in the
// same order (a conversion after each product keeps them from being fused), rounded
// half to even as Postgres rounds a float8, so that a term of a document weighs the
// same either way.
func Contribution(idf float64, tf, length int32, avgdl float64) float64 {
	t := float64(tf)
	num := float64(float64(idf*t) * (K1 + 1))
	den := t + float64(K1*(1-B+float64(float64(B*float64(length))/avgdl)))
	return math.RoundToEven(float64(num/den)*(1/Quantum)) / (1 / Quantum)
}

// Weights holds the weights of a query's terms in a scope.
type Weights struct {
	IDF   []float64
	bound []float64 // the most a term adds to an entry's score: idf·(k1+1)
	// AvgDL is the scope's mean document length.
	AvgDL float64
}

// NewWeights weighs terms by their document frequencies df among docs entries of
// total length length. An empty scope weighs every term alike.
func NewWeights(docs, length float64, df []float64) Weights {
	w := Weights{IDF: make([]float64, len(df)), bound: make([]float64, len(df)), AvgDL: 1}
	if docs > 0 && length > 0 {
		w.AvgDL = length / docs
	}
	for i, n := range df {
		n = min(max(n, 0), docs)
		w.IDF[i] = math.Log(1 + (docs-n+0.5)/(n+0.5))
		w.bound[i] = w.IDF[i] * (K1 + 1)
	}
	return w
}

// IDFSum is the query's idf summed over its terms (at least a trace, never 0).
func (w Weights) IDFSum() float64 {
	sum := 0.0
	for _, x := range w.IDF {
		sum += x
	}
	return max(sum, 1e-9)
}

// essential splits the terms for MaxScore: the light ones are the least weighty, as
// many as keep their bounds (idf·(k1+1), the most a term adds to a score) summed
// within lightShare of the bound of the weightiest term that at least k entries hold
// (about what the k-th entry may score: a rarer term cannot fill the results); prefix
// terms are never light. It returns which terms are essential and the light ones'
// bounds summed, each with a quantum's margin (a rounded contribution may exceed its
// bound by half of one); 0 when none is light.
func (w Weights) essential(prefixes []bool, df []float64, k int) ([]bool, float64) {
	essential := make([]bool, len(w.bound))
	order := make([]int, len(w.bound))
	budget := 0.0
	for i := range essential {
		essential[i], order[i] = true, i
		if df[i] >= float64(k) {
			budget = max(budget, lightShare*w.bound[i])
		}
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(w.bound[a], w.bound[b]) })
	sum, used := 0.0, 0.0
	for _, i := range order {
		if prefixes[i] {
			continue
		}
		if used+w.bound[i] > budget {
			break
		}
		used += w.bound[i]
		sum += w.bound[i] + Quantum
		essential[i] = false
	}
	return essential, sum
}
