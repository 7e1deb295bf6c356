package textindex

import (
	"math"
	"slices"
)

// Lookup is what Search asks of the store that holds the postings and the documents.
type Lookup[H any] struct {
	// Read reads the postings of terms into the scratch (Reset, Add or AddBlock, and
	// Sorted).
	Read func(terms TermSet) error
	// Rank looks up the documents of batch, scored partially when the light terms are
	// left out of them, and returns up to limit of them as hits, best first, each scored
	// in full.
	Rank func(batch []Candidate, limit int, light TermSet) ([]H, error)
	// Score is a hit's score in full.
	Score func(hit H) float64
}

// Search evaluates a query of terms lexemes (prefixes: which are prefixes), which df
// documents each hold and w weighs, for its best k documents, and returns them as Rank
// found them, best first: first by MaxScore, which leaves the light terms' postings
// unread, then, when it cannot tell its answer is the best, over every term's postings,
// in batches until k are found or none is left. When restricted, only the postings of
// sc.Allowed are scored.
func Search[H any](sc *Scratch, lexemes []string, prefixes []bool, df []float64, w Weights, k int, restricted bool, l Lookup[H]) ([]H, error) {
	hits := []H{}
	terms := TermSet{Lexemes: lexemes, Prefixes: prefixes, IDF: w.IDF}
	if essential, light, bound := terms.split(w.essential(terms.Prefixes, df, k)); bound > 0 {
		if err := l.Read(essential); err != nil {
			return nil, err
		}
		cands := sc.Score(essential.IDF, w.AvgDL, restricted)
		for n := batchSize(k); ; n *= 4 {
			batch, outside := marginBatch(cands, n, bound)
			if len(batch) > maxScoreBatch {
				break
			}
			found, err := l.Rank(batch, k, light)
			if err != nil {
				return nil, err
			}
			if len(found) == k && l.Score(found[k-1]) >= outside && l.Score(found[k-1]) > bound {
				return found, nil
			}
			if len(batch) == len(cands) {
				break
			}
		}
	}
	if err := l.Read(terms); err != nil {
		return nil, err
	}
	cands := sc.Score(w.IDF, w.AvgDL, restricted)
	for batch := batchSize(k); len(cands) > 0 && len(hits) < k; batch *= 4 {
		var best []Candidate
		best, cands = bestCandidates(cands, batch)
		found, err := l.Rank(best, k-len(hits), TermSet{})
		if err != nil {
			return nil, err
		}
		hits = append(hits, found...)
	}
	return hits, nil
}

// batchSize is how many of the best documents the first lookup of a search for
// k results asks for; each further one asks for four times as many.
func batchSize(k int) int { return 2*k + 16 }

// maxScoreBatch bounds the documents one lookup of MaxScore takes: beyond it, every
// term's postings are read.
const maxScoreBatch = 4096

// TermSet is some of a query's terms, with their prefix flags and idf.
type TermSet struct {
	Lexemes  []string
	Prefixes []bool
	IDF      []float64
}

// split returns the essential terms and the light ones (essential[i] false), with the
// light ones' bounds.
func (t TermSet) split(essential []bool, bound float64) (ess, light TermSet, _ float64) {
	for i, e := range essential {
		part := &light
		if e {
			part = &ess
		}
		part.Lexemes, part.Prefixes, part.IDF = append(part.Lexemes, t.Lexemes[i]), append(part.Prefixes, t.Prefixes[i]),
			append(part.IDF, t.IDF[i])
	}
	return ess, light, bound
}

// marginBatch reorders cands in place and returns the batch MaxScore looks up: the best
// n by partial score (bestCandidates), with every other candidate whose partial score
// is within bound of the n-th's; and outside, a bound no candidate left out reaches
// (−∞ when none is left out): the n-th's partial score.
func marginBatch(cands []Candidate, n int, bound float64) (batch []Candidate, outside float64) {
	best, rest := bestCandidates(cands, n)
	if len(rest) == 0 {
		return best, math.Inf(-1)
	}
	nth := best[len(best)-1].Score
	k := 0
	for i, c := range rest {
		if c.Score >= nth-bound {
			rest[k], rest[i] = rest[i], rest[k]
			k++
		}
	}
	batch = cands[:len(best)+k]
	if len(batch) == len(cands) {
		return batch, math.Inf(-1)
	}
	return batch, nth
}

// Scratch holds a search's postings and scores. Searches reuse them (Pool): a
// question of common words reads a posting for nearly every entry of the scope, and
// allocating and growing its buffers anew cost more than decoding and scoring them
// (17 ms against 2 ms for 130,000 postings).
type Scratch struct {
	postings []Posting // every term's, one term after the other
	terms    []int     // where each term's postings end in postings
	// Allowed holds the documents a filter few entries pass leaves, sorted.
	Allowed   []int64
	acc, next []Candidate
}

// Reset empties the postings for a read of terms terms.
func (sc *Scratch) Reset(terms int) {
	sc.postings, sc.terms = sc.postings[:0], append(sc.terms[:0], make([]int, terms)...)
}

// Add appends a posting of the term numbered term (from 0); a term's postings are read
// after the earlier terms'.
func (sc *Scratch) Add(term int, p Posting) {
	sc.postings = append(sc.postings, p)
	sc.terms[term] = len(sc.postings)
}

// AddBlock appends the postings of a block of count postings of the term numbered
// term, decoded from data, which it does not keep.
func (sc *Scratch) AddBlock(term int, data []byte, count int) error {
	had := len(sc.postings)
	sc.postings = slices.Grow(sc.postings, count)
	var err error
	if sc.postings, err = DecodeBlock(sc.postings, data); err == nil && len(sc.postings)-had != count {
		err = ErrCorruptBlock
	}
	sc.terms[term] = len(sc.postings)
	return err
}

// Sorted ends a read: each term's postings sorted by ordinal.
func (sc *Scratch) Sorted() {
	start := 0
	for t, end := range sc.terms {
		end = max(end, start) // a term without postings
		sc.terms[t] = end
		if ps := sc.postings[start:end]; !slices.IsSortedFunc(ps, ByOrd) {
			slices.SortFunc(ps, ByOrd)
		}
		start = end
	}
}

// Pool keeps up to scratchKept Scratch between searches, each at most
// scratchPostings postings and candidates large (a larger one is left to the garbage
// collector, so one question over a huge scope does not pin its memory): at most
// about 80 MB kept. A sync.Pool gives its buffers up at every garbage collection, and
// the search after it pays for growing them again.
type Pool chan *Scratch

const (
	scratchKept     = 4
	scratchPostings = 1 << 18
)

// NewPool returns an empty pool.
func NewPool() Pool { return make(Pool, scratchKept) }

// Get returns a kept Scratch, or a new one.
func (p Pool) Get() *Scratch {
	select {
	case sc := <-p:
		return sc
	default:
		return new(Scratch)
	}
}

// Put keeps sc for a later search unless the pool is full or sc is too large.
func (p Pool) Put(sc *Scratch) {
	if cap(sc.postings) > scratchPostings || cap(sc.acc) > scratchPostings || cap(sc.next) > scratchPostings {
		return
	}
	select {
	case p <- sc:
	default:
	}
}

// Candidate is a document holding a term of the query, with its score.
type Candidate struct {
	Ord, Created int64
	Score        float64
}

// Score sums the contributions of each document's postings, term by term: a merge of
// the term's postings (sorted by ordinal) into the documents so far; when restricted,
// of the allowed documents' only. A document holding two terms a prefix term stands
// for counts both.
func (sc *Scratch) Score(idf []float64, avgdl float64, restricted bool) []Candidate {
	acc, next := sc.acc[:0], sc.next[:0]
	start := 0
	for t, end := range sc.terms {
		ps := sc.postings[start:end]
		start = end
		next = slices.Grow(next[:0], len(acc)+len(ps))
		i, a := 0, 0
		for _, p := range ps {
			if restricted {
				for a < len(sc.Allowed) && sc.Allowed[a] < p.Ord {
					a++
				}
				if a == len(sc.Allowed) {
					break
				}
				if sc.Allowed[a] != p.Ord {
					continue
				}
			}
			for i < len(acc) && acc[i].Ord < p.Ord {
				next = append(next, acc[i])
				i++
			}
			c := Contribution(idf[t], p.TF, p.Length, avgdl)
			switch {
			case i < len(acc) && acc[i].Ord == p.Ord:
				acc[i].Score += c
			case len(next) > 0 && next[len(next)-1].Ord == p.Ord:
				next[len(next)-1].Score += c
			default:
				next = append(next, Candidate{Ord: p.Ord, Created: p.Created, Score: c})
			}
		}
		next = append(next, acc[i:]...)
		acc, next = next, acc
	}
	sc.acc, sc.next = acc, next
	return acc
}

// before orders candidates as recall ranks them, as far as they tell: the higher score
// first, then the newer.
func before(a, b Candidate) bool {
	return a.Score > b.Score || a.Score == b.Score && a.Created > b.Created
}

// bestCandidates reorders cands in place: first the best n, sorted, with every other
// candidate that ranks alike with the n-th (the entries table orders those by ID);
// then the rest, which it returns apart.
func bestCandidates(cands []Candidate, n int) (best, rest []Candidate) {
	if len(cands) > n {
		// A heap of the best n, its root the worst of them.
		h := slices.Clone(cands[:n])
		down := func(i int) {
			for {
				l, m := 2*i+1, i
				if l < n && before(h[m], h[l]) {
					m = l
				}
				if r := l + 1; r < n && before(h[m], h[r]) {
					m = r
				}
				if m == i {
					return
				}
				h[i], h[m] = h[m], h[i]
				i = m
			}
		}
		for i := n/2 - 1; i >= 0; i-- {
			down(i)
		}
		for _, c := range cands[n:] {
			if before(c, h[0]) {
				h[0] = c
				down(0)
			}
		}
		k := 0
		for i, c := range cands {
			if !before(h[0], c) {
				cands[k], cands[i] = cands[i], cands[k]
				k++
			}
		}
		best, rest = cands[:k], cands[k:]
	} else {
		best = cands
	}
	slices.SortFunc(best, func(a, b Candidate) int {
		switch {
		case before(a, b):
			return -1
		case before(b, a):
			return 1
		}
		return 0
	})
	return best, rest
}
