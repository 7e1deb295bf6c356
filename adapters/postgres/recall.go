package postgres

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
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
// that pass the filter. Not exact, they are the merge of two searches: the HNSW
// index's nearest among the rows in its graph, with the filter applied inside the
// scan, and the nearest among the rows not yet folded into it, by the distance of
// each (found by the partial index of those rows, a bounded number per scope). Exact,
// the distance of every row that passes the filter, wherever it is (the materialized
// CTE keeps the index out of the ordering).
func vectorSQL(t vectorTable, exact, asOf bool) string {
	distance := fmt.Sprintf("v.embedding <=> $3::vector::%s", t.column())
	where := `v.tenant_id = $1 AND v.project_id = $2 AND v.generation = $4 AND ` + recallFilter("v", 5)
	nearest := fmt.Sprintf(`nn AS (
		(SELECT v.entry_id, %[1]s AS distance FROM %[2]s v
		 WHERE v.indexed AND %[3]s
		 ORDER BY %[1]s
		 LIMIT $9)
		UNION ALL
		(SELECT v.entry_id, %[1]s AS distance FROM %[2]s v
		 WHERE NOT v.indexed AND %[3]s
		 ORDER BY %[1]s
		 LIMIT $9))`, distance, t.ident(), where)
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
		ORDER BY nn.distance, e.entry_id
		LIMIT $9`
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
// (migration 00018), so a query reads a row per term and never counts the scope. tf
// and |e| are read from the postings (migration 00023): a row per term of each entry,
// read by term, so scoring sums the query terms' postings and reads no document.
//
// An entry holding any term matches, but reading every posting of every term would
// make a question cost what its commonest word holds. A term's contribution is below
// its bound idf(t)·(k1+1), so the search splits the terms (MaxScore): the weighty ones
// (essential) have their postings read in full, which gives each entry holding one of
// them a partial score; the light ones (a word most entries hold) are looked up only
// for the entries whose partial score comes within the light terms' summed bounds of
// the k-th best partial score among the entries that pass the filter. Any entry that
// can rank is among those, unless the k-th partial score is not above the light
// bounds (an entry holding light terms only could rank): then the search runs again
// with every term essential. One statement either way.
const (
	bm25K1 = 1.2
	bm25B  = 0.75
	// lightShare bounds the light terms: together their bounds are at most this share
	// of the weightiest term's bound.
	lightShare = 0.25
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

// bm25Term is a posting's contribution to its entry's score, with the term's idf in
// q.idf, the posting in p and the scope's mean length in $12.
var bm25Term = fmt.Sprintf(`q.idf * p.tf * %[1]v / (p.tf + %[2]v * (%[3]v + %[4]v * p.length / $12::float8))`,
	bm25K1+1, bm25K1, 1-bm25B, bm25B)

// textSQL is the text half over the postings of the query's terms $8 (without the
// scope's tag), with their idf $9, prefix flags $10 and whether each is essential $11
// (a prefix term always is); $13 is the light terms' bounds summed, $7 the limit, $3
// to $6 the filter. part holds the essential terms' partial scores; top the best k of
// them among the entries that pass the filter, looked up best first until k pass;
// scored adds the light terms, looked up by term and entry, to the entries within $13
// of the k-th. Each result row carries that k-th partial score (null when fewer than k
// entries passed), which tells the caller whether the answer is exact. Each result's
// coverage is the share of the query's idf ($15: their sum) its terms hold, each
// term's presence tested by its own tsquery ($14) on the result's document. The
// entries are looked up through LATERAL subqueries that Postgres cannot flatten
// (LIMIT, OFFSET 0), so each is an index probe per candidate that can rank, never a
// join of every candidate with the scope.
func textSQL(asOf bool) string {
	passes := func(id string) string {
		return `SELECT e.* FROM context_entries e
		    WHERE e.tenant_id = $1 AND e.project_id = $2 AND e.entry_id = ` + id + `
		      AND ` + recallable(asOf, 6) + ` AND ` + recallFilter("e", 3)
	}
	return `
	WITH q AS (
	    SELECT * FROM unnest($8::text[], $9::float8[], $10::bool[], $11::bool[]) AS q(term, idf, prefix, essential)
	), part AS MATERIALIZED (
	    SELECT p.entry_id, sum(` + bm25Term + `) AS s
	    FROM q CROSS JOIN LATERAL (
	        SELECT p.entry_id, p.tf, p.length FROM entry_text_postings p
	        WHERE NOT q.prefix AND p.tenant_id = $1 AND p.project_id = $2 AND p.term = q.term COLLATE "C"
	        UNION ALL
	        SELECT p.entry_id, p.tf, p.length FROM entry_text_postings p
	        WHERE q.prefix AND p.tenant_id = $1 AND p.project_id = $2
	          AND p.term >= q.term COLLATE "C" AND p.term < (q.term || U&'\+10FFFF') COLLATE "C"
	          AND starts_with(p.term, q.term)
	    ) p
	    WHERE q.essential
	    GROUP BY p.entry_id
	), top AS (
	    SELECT ranked.s FROM (SELECT * FROM part ORDER BY part.s DESC) ranked
	    CROSS JOIN LATERAL (` + passes("ranked.entry_id") + ` LIMIT 1) e
	    LIMIT $7
	), cut AS (
	    SELECT CASE WHEN count(*) = $7 THEN min(top.s) END AS kth FROM top
	), scored AS MATERIALIZED (
	    SELECT part.entry_id, cut.kth, part.s + coalesce((
	        SELECT sum(` + bm25Term + `) FROM q
	        JOIN entry_text_postings p ON p.tenant_id = $1 AND p.project_id = $2
	          AND p.term = q.term COLLATE "C" AND p.entry_id = part.entry_id
	        WHERE NOT q.essential), 0) AS score
	    FROM part CROSS JOIN cut
	    WHERE cut.kth IS NULL OR part.s >= cut.kth - $13::float8
	)
	SELECT ` + entryColumns + `, scored.score::float8, (
	    SELECT coalesce(sum(q.idf), 0) FROM unnest($9::float8[], $14::text[]) AS q(idf, query)
	    WHERE e.search @@ q.query::tsquery
	)::float8 / $15::float8 AS coverage, scored.kth::float8
	FROM scored CROSS JOIN LATERAL (` + passes("scored.entry_id") + ` OFFSET 0) e
	WHERE scored.kth IS NULL OR scored.score >= scored.kth
	ORDER BY scored.score DESC, e.created_at_ms DESC, e.entry_id
	LIMIT $7`
}

// TextSearch implements memory.RecallStore.
func (s *RecallStore) TextSearch(ctx context.Context, scope runtime.Scope, q memory.TextRecall) ([]memory.RecallHit, error) {
	terms := recallTerms(q.Text)
	hits := []memory.RecallHit{}
	if len(terms) == 0 {
		return hits, nil
	}
	tag := scopeTag(scope)
	lexemes, prefixes, queries := make([]string, len(terms)), make([]bool, len(terms)), make([]string, len(terms))
	for i, t := range terms {
		lexemes[i], prefixes[i], queries[i] = t.lexeme, t.prefix, t.query(tag)
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
		search := func(essential []bool, light float64) (exact bool, err error) {
			args := append([]any{scope.TenantID, scope.ProjectID}, recallFilterArgs(q.RecallFilter)...)
			args = append(args, q.Limit, lexemes, w.idf, prefixes, essential, w.avgdl, light, queries, w.idfSum())
			rows, err := tx.Query(ctx, textSQL(q.AsOfMs != nil), args...)
			if err != nil {
				return false, translate(err)
			}
			defer rows.Close()
			hits = []memory.RecallHit{}
			var kth *float64
			for rows.Next() {
				var r entryRow
				var h memory.RecallHit
				if err := rows.Scan(r.dest(&h.Score, &h.Coverage, &kth)...); err != nil {
					return false, translate(err)
				}
				h.Entry = r.entry()
				hits = append(hits, h)
			}
			if err := rows.Err(); err != nil {
				return false, translate(err)
			}
			return light == 0 || kth != nil && *kth > light, nil
		}
		essential, light := w.essential(prefixes)
		exact, err := search(essential, light)
		if err != nil || exact {
			return err
		}
		for i := range essential {
			essential[i] = true
		}
		_, err = search(essential, 0)
		return err
	})
	if err != nil {
		return nil, err
	}
	return hits, nil
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

// essential splits the terms: the light ones are the least weighty, as many as keep
// their bounds summed at most lightShare of the weightiest term's, prefix terms never
// among them (a prefix is not looked up by entry). It returns which terms are
// essential and the light terms' bounds summed.
func (w bm25) essential(prefixes []bool) ([]bool, float64) {
	essential := make([]bool, len(w.bound))
	for i := range essential {
		essential[i] = true
	}
	order := w.byBound()
	if len(order) == 0 {
		return essential, 0
	}
	budget, light := lightShare*w.bound[order[0]], 0.0
	for _, i := range slices.Backward(order[1:]) {
		if prefixes[i] || light+w.bound[i] > budget {
			break
		}
		light += w.bound[i]
		essential[i] = false
	}
	return essential, light
}
