package postgres

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/pgvector/pgvector-go"

	"github.com/agent-context/agent-context/runtime"
	"github.com/agent-context/agent-context/runtime/memory"
)

// RecallStore implements memory.RecallStore: the two halves of recall.
type RecallStore struct {
	db            DBTX
	catalog       *vectorCatalog
	searchTimeout time.Duration
}

var _ memory.RecallStore = (*RecallStore)(nil)

// recallFilter is the filter of recall on the row alias, with its parameters from $n
// on (kinds, tags, conversation, time): live conversations only, and not expired at
// the time (now, or the instant of a recall as of it).
func recallFilter(alias string, n int) string {
	return fmt.Sprintf(`(cardinality($%[2]d::text[]) = 0 OR %[1]s.kind = ANY($%[2]d::text[]))
		AND %[1]s.tags @> $%[3]d::text[]
		AND ($%[4]d::text IS NULL OR %[1]s.conversation_id = $%[4]d::text)
		AND (%[1]s.expires_at_ms IS NULL OR %[1]s.expires_at_ms > $%[5]d)
		AND `, alias, n, n+1, n+2, n+3) + liveConversation(alias)
}

// recallable is the condition that the entry alias e was recallable at the time $n:
// active now, or, for a recall as of an instant, created by then and not yet
// superseded, merged or expired by a transition at it. (An expiry by POST
// /entries/expire sets expires_at_ms to its time, so recallFilter's expiry check holds
// for both.)
func recallable(asOf bool, n int) string {
	if !asOf {
		return `e.status = 'active'`
	}
	return fmt.Sprintf(`e.created_at_ms <= $%[1]d AND (e.ended_at_ms IS NULL OR e.ended_at_ms > $%[1]d)`, n)
}

func recallFilterArgs(f memory.RecallFilter) []any {
	var conversation *string
	if f.ConversationID != "" {
		conversation = &f.ConversationID
	}
	kinds, tags := f.Kinds, f.Tags
	if kinds == nil {
		kinds = []string{}
	}
	if tags == nil {
		tags = []string{}
	}
	return []any{kinds, tags, conversation, f.AtMs()}
}

// hnswEfSearch is the HNSW candidate list of a search for limit results: never below
// limit (pgvector returns at most ef_search rows per pass), and large enough that the
// nearest are found (docs/benchmarks.md measures recall@10 against an exact scan).
func hnswEfSearch(limit int) int { return min(max(2*limit, 200), 1000) }

// recallSettings bound a recall's transaction: its statement timeout, and for the
// vector half pgvector's iterative scan in strict order, so that rows the filter
// rejects do not cut the result short, and a custom plan for every execution, so the
// planner sees the scope's size (an exact scan of a small scope, the index for a
// large one) instead of reusing a generic plan.
func (s *RecallStore) recallSettings(ctx context.Context, tx DBTX, limit int) error {
	_, err := tx.Exec(ctx, `SELECT set_config('statement_timeout', $1, true),
		set_config('plan_cache_mode', 'force_custom_plan', true),
		set_config('hnsw.iterative_scan', 'strict_order', true),
		set_config('hnsw.ef_search', $2, true)`,
		strconv.FormatInt(s.searchTimeout.Milliseconds(), 10), strconv.Itoa(hnswEfSearch(limit)))
	return translate(err)
}

// vectorSQL is the vector half over table t: the nearest entries of the generation
// that pass the filter, found by the HNSW index with the filter applied inside the
// scan, or, exact, by computing the distance of every row that passes the filter (the
// materialized CTE keeps the index out of the ordering).
func vectorSQL(t vectorTable, exact, asOf bool) string {
	distance := fmt.Sprintf("v.embedding <=> $3::vector::%s", t.column())
	where := `v.tenant_id = $1 AND v.project_id = $2 AND v.generation = $4 AND ` + recallFilter("v", 5)
	nearest := fmt.Sprintf(`nn AS (
		SELECT v.entry_id, %[1]s AS distance FROM %[2]s v
		WHERE %[3]s
		ORDER BY %[1]s
		LIMIT $9)`, distance, t.ident(), where)
	if exact {
		nearest = fmt.Sprintf(`scanned AS MATERIALIZED (
			SELECT v.entry_id, %[1]s AS distance FROM %[2]s v WHERE %[3]s
		), nn AS (
			SELECT entry_id, distance FROM scanned ORDER BY distance LIMIT $9)`, distance, t.ident(), where)
	}
	return `WITH ` + nearest + `
		SELECT ` + entryColumns + `, nn.distance FROM nn
		JOIN context_entries e ON e.tenant_id = $1 AND e.project_id = $2 AND e.entry_id = nn.entry_id
		WHERE e.status = 'active' AND ` + recallable(asOf, 8) + `
		ORDER BY nn.distance, e.entry_id`
}

// VectorSearch implements memory.RecallStore. When the index comes up short (a
// filter rejects more rows than the iterative scan may visit), the exact scan of the
// rows that pass the filter answers instead.
func (s *RecallStore) VectorSearch(ctx context.Context, scope runtime.Scope, q memory.VectorRecall) ([]memory.RecallHit, error) {
	t, err := s.catalog.lookup(ctx, s.db, q.Generation.Model.ID)
	if err != nil {
		return nil, err
	}
	if err := sameDimensions(t, q.Generation.Model); err != nil {
		return nil, err
	}
	args := append([]any{scope.TenantID, scope.ProjectID, pgvector.NewVector(q.Vector), q.Generation.Number},
		append(recallFilterArgs(q.RecallFilter), q.Limit)...)
	var hits []memory.RecallHit
	err = inTx(ctx, s.db, func(tx pgx.Tx) error {
		if err := s.recallSettings(ctx, tx, q.Limit); err != nil {
			return err
		}
		search := func(exact bool) (err error) {
			rows, err := tx.Query(ctx, vectorSQL(t, exact, q.AsOfMs != nil), args...)
			if err != nil {
				return s.catalog.translate(t, err)
			}
			hits, err = collectHits(rows, func(distance float64) float64 { return 1 - distance })
			return err
		}
		indexed := t.cosineOps() != ""
		if err := search(!indexed); err != nil || !indexed || len(hits) == q.Limit {
			return err
		}
		return search(true)
	})
	if err != nil {
		return nil, err
	}
	return hits, nil
}

// collectHits reads entry rows followed by a score column.
func collectHits(rows pgx.Rows, score func(float64) float64) ([]memory.RecallHit, error) {
	defer rows.Close()
	hits := []memory.RecallHit{}
	for rows.Next() {
		var r entryRow
		var raw float64
		if err := rows.Scan(r.dest(&raw)...); err != nil {
			return nil, translate(err)
		}
		hits = append(hits, memory.RecallHit{Entry: r.entry(), Score: score(raw)})
	}
	return hits, translate(rows.Err())
}

// The text half of recall ranks by Okapi BM25 over the scope's recallable entries:
//
//	score(e) = Σ over the query's terms t in e of idf(t) · tf·(k1+1) / (tf + k1·(1 − b + b·|e|/avgdl))
//	idf(t)   = ln(1 + (N − df(t) + 0.5) / (df(t) + 0.5))
//
// with N the scope's active entries, df(t) those holding t, |e| the entry's terms and
// avgdl their mean, all read from the statistics the triggers of context_entries keep
// (migration 00018), so a query reads a row per term and never counts the scope.
//
// An entry holding any term matches, but reading every posting of every term would
// make a question cost what its commonest word holds. A term's contribution is below
// its bound idf(t)·(k1+1), so an entry whose terms' bounds sum to at most the k-th best
// score found so far cannot enter the top k. The search runs twice: first over the
// entries holding two of the four most weighty terms (found by intersecting their
// posting lists through context_entries_search), which gives a threshold; then over the
// entries holding any set of terms whose bounds sum above it — its minimal sets, each a
// conjunction in one tsquery. A common word's bound is near zero, so it joins no set on
// its own, and the second pass reads the rare terms' postings only. Without a threshold
// (fewer than k entries in the first pass) every term's postings are read.
const (
	bm25K1 = 1.2
	bm25B  = 0.75
	// thresholdTerms are the weightiest terms the first pass pairs.
	thresholdTerms = 4
	// maxClauses bounds the conjunctions of the second pass's tsquery; beyond them it
	// matches any term (the exact answer, at the cost of every posting).
	maxClauses = 64
)

// textStatsSQL reads the scope's statistics: its active entries, their total length,
// and the entries holding each term of $3 ($4: whether it is a prefix), in order.
const textStatsSQL = `
	SELECT coalesce(sum(s.docs), 0)::float8, coalesce(sum(s.length), 0)::float8,
	       ARRAY(SELECT CASE WHEN q.prefix
	                    THEN (SELECT coalesce(sum(t.docs), 0) FROM entry_text_terms t
	                          WHERE t.tenant_id = $1 AND t.project_id = $2 AND starts_with(t.term, q.term))
	                    ELSE (SELECT coalesce(sum(t.docs), 0) FROM entry_text_terms t
	                          WHERE t.tenant_id = $1 AND t.project_id = $2 AND t.term = q.term) END::float8
	             FROM unnest($3::text[], $4::bool[]) WITH ORDINALITY AS q(term, prefix, ord) ORDER BY q.ord)
	FROM entry_text_stats s WHERE s.tenant_id = $1 AND s.project_id = $2`

// textSQL scores the entries matching $3 (a tsquery) that pass the filter, by BM25
// over the query's lexemes $9 (with the scope's tag), their idf $10 and prefix flags
// $11, with the scope's mean length $12; best first, then newest, then by ID. Each
// entry's coverage is the share of the query's idf ($13: their sum) its terms hold,
// each term's presence tested by its own tsquery ($14), a search inside the document
// rather than a pass over it (scoring unnests each document once, not once per term).
// Without prefix terms (exact), scoring unnests only the document's lexemes that are
// query terms: they are marked by weight A (every other position first set to D) and
// the rest filtered out, in C, so the pass builds no arrays for the other lexemes.
func textSQL(asOf, exact bool) string {
	document := "e.search"
	if exact {
		document = "ts_filter(setweight(setweight(e.search, 'D'), 'A', $9::text[]), '{a}')"
	}
	return `
	SELECT ` + entryColumns + `, (
	    SELECT coalesce(sum(q.idf * cardinality(u.positions) * ` + fmt.Sprint(bm25K1+1) + ` /
	        (cardinality(u.positions) + ` + fmt.Sprint(bm25K1) + ` * (` + fmt.Sprint(1-bm25B) + ` + ` + fmt.Sprint(bm25B) + ` * e.search_length / $12::float8))), 0)
	    FROM unnest(` + document + `) AS u(lexeme, positions, weights)
	    JOIN unnest($9::text[], $10::float8[], $11::bool[]) AS q(lexeme, idf, prefix)
	      ON CASE WHEN q.prefix THEN starts_with(u.lexeme, q.lexeme) ELSE u.lexeme = q.lexeme END
	)::float8 AS score, (
	    SELECT coalesce(sum(q.idf), 0) FROM unnest($10::float8[], $14::text[]) AS q(idf, query)
	    WHERE e.search @@ q.query::tsquery
	)::float8 / $13::float8 AS coverage
	FROM context_entries e
	WHERE e.tenant_id = $1 AND e.project_id = $2 AND ` + recallable(asOf, 7) + ` AND e.search @@ $3::tsquery
	  AND ` + recallFilter("e", 4) + `
	ORDER BY score DESC, e.created_at_ms DESC, e.entry_id
	LIMIT $8`
}

// TextSearch implements memory.RecallStore.
func (s *RecallStore) TextSearch(ctx context.Context, scope runtime.Scope, q memory.TextRecall) ([]memory.RecallHit, error) {
	terms := recallTerms(q.Text)
	hits := []memory.RecallHit{}
	if len(terms) == 0 {
		return hits, nil
	}
	tag := scopeTag(scope)
	lexemes, prefixes := make([]string, len(terms)), make([]bool, len(terms))
	for i, t := range terms {
		lexemes[i], prefixes[i] = t.lexeme, t.prefix
	}
	err := inTx(ctx, s.db, func(tx pgx.Tx) error {
		if err := setLocalTimeout(ctx, tx, s.searchTimeout); err != nil {
			return err
		}
		var docs, length float64
		var df []float64
		if err := tx.QueryRow(ctx, textStatsSQL, scope.TenantID, scope.ProjectID, lexemes, prefixes).Scan(&docs, &length, &df); err != nil {
			return translate(err)
		}
		w := bm25Weights(docs, length, df)
		tagged, queries := make([]string, len(terms)), make([]string, len(terms))
		for i, t := range terms {
			tagged[i], queries[i] = tag+t.lexeme, t.query(tag)
		}
		search := func(match string) error {
			args := append([]any{scope.TenantID, scope.ProjectID, match},
				append(recallFilterArgs(q.RecallFilter), q.Limit, tagged, w.idf, prefixes, w.avgdl, w.idfSum(), queries)...)
			rows, err := tx.Query(ctx, textSQL(q.AsOfMs != nil, !slices.Contains(prefixes, true)), args...)
			if err != nil {
				return translate(err)
			}
			defer rows.Close()
			hits = []memory.RecallHit{}
			for rows.Next() {
				var r entryRow
				var h memory.RecallHit
				if err := rows.Scan(r.dest(&h.Score, &h.Coverage)...); err != nil {
					return translate(err)
				}
				h.Entry = r.entry()
				hits = append(hits, h)
			}
			return translate(rows.Err())
		}
		order := w.byBound()
		threshold := 0.0
		var top []int
		if len(terms) > 1 {
			top = order[:min(len(order), thresholdTerms)]
			var pairs []string
			for i := range top {
				for j := i + 1; j < len(top); j++ {
					pairs = append(pairs, terms[top[i]].query(tag)+" & "+terms[top[j]].query(tag))
				}
			}
			if err := search(strings.Join(pairs, " | ")); err != nil {
				return err
			}
			if len(hits) == q.Limit {
				threshold = hits[len(hits)-1].Score
			}
		}
		sets, ok := w.passing(order, threshold, maxClauses)
		if ok && threshold > 0 && !slices.ContainsFunc(sets, func(set []int) bool { return !holdsPair(set, top) }) {
			// Every set that can pass holds two of the first pass's terms: the
			// second pass's entries are among the first's, already ranked.
			return nil
		}
		var clauses []string
		for _, set := range sets {
			var and []string
			for _, i := range set {
				and = append(and, terms[i].query(tag))
			}
			clauses = append(clauses, strings.Join(and, " & "))
		}
		if !ok {
			for _, t := range terms {
				clauses = append(clauses, t.query(tag))
			}
		}
		return search(strings.Join(clauses, " | "))
	})
	if err != nil {
		return nil, err
	}
	return hits, nil
}

// holdsPair reports whether set holds at least two of terms.
func holdsPair(set, terms []int) bool {
	n := 0
	for _, i := range set {
		if slices.Contains(terms, i) {
			n++
		}
	}
	return n >= 2
}

// bm25 holds the weights of a query's terms in a scope.
type bm25 struct {
	idf   []float64
	bound []float64 // the most a term adds to an entry's score: idf·(k1+1)
	avgdl float64
}

// bm25Weights weighs terms by their document frequencies df among docs entries of
// total length length. An empty scope weighs every term alike.
func bm25Weights(docs, length float64, df []float64) bm25 {
	w := bm25{idf: make([]float64, len(df)), bound: make([]float64, len(df)), avgdl: 1}
	if docs > 0 && length > 0 {
		w.avgdl = length / docs
	}
	for i, n := range df {
		n = min(max(n, 0), docs)
		w.idf[i] = math.Log(1 + (docs-n+0.5)/(n+0.5))
		w.bound[i] = w.idf[i] * (bm25K1 + 1)
	}
	return w
}

// idfSum is the query's idf summed over its terms (at least a trace, never 0).
func (w bm25) idfSum() float64 {
	sum := 0.0
	for _, x := range w.idf {
		sum += x
	}
	return max(sum, 1e-9)
}

// byBound returns the terms' indexes, the weightiest first.
func (w bm25) byBound() []int {
	order := make([]int, len(w.bound))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(w.bound[b], w.bound[a]) })
	return order
}

// passing returns the minimal sets of terms (indexes, in order's order) whose bounds
// sum above threshold: an entry scoring above it holds at least one of them. It
// reports false when they would be more than maxSets.
func (w bm25) passing(order []int, threshold float64, maxSets int) ([][]int, bool) {
	rest := make([]float64, len(order)+1) // rest[i]: the bounds of order[i:] summed
	for i := len(order) - 1; i >= 0; i-- {
		rest[i] = rest[i+1] + w.bound[order[i]]
	}
	var sets [][]int
	var set []int
	overflow := false
	var walk func(from int, sum float64)
	walk = func(from int, sum float64) {
		for i := from; i < len(order) && !overflow; i++ {
			if sum+rest[i] <= threshold {
				return
			}
			next := sum + w.bound[order[i]]
			set = append(set, order[i])
			if next > threshold {
				if len(sets) == maxSets {
					overflow = true
				} else {
					sets = append(sets, slices.Clone(set))
				}
			} else {
				walk(i+1, next)
			}
			set = set[:len(set)-1]
		}
	}
	walk(0, 0)
	return sets, !overflow
}
