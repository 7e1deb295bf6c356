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
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/pgvector/pgvector-go"

	"github.com/agent-context/agent-context/runtime"
	"github.com/agent-context/agent-context/runtime/memory"
)

// RecallStore implements memory.RecallStore: the two halves of recall.
type RecallStore struct {
	db            DBTX
	catalog       *vectorCatalog
	searchTimeout time.Duration
	fewRows       int // fewFilterRows; tests set it to -1 to take the other plans
	scratch       scratchPool
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

// vectorPlan is how the vector half finds the nearest entries.
type vectorPlan int

const (
	// vectorIndexed merges two searches: the HNSW index's nearest among the rows in
	// its graph (ordered by their halfvec distance, which the graph indexes, and
	// returned with their own), with the filter applied inside the scan, and the
	// nearest among the rows not yet folded into it, by the distance of each (found
	// by the partial index of those rows, a bounded number per scope). Not exact.
	vectorIndexed vectorPlan = iota
	// vectorExact ranks every row that passes the filter by its distance, wherever it
	// is (the materialized CTE keeps the index out of the ordering).
	vectorExact
	// vectorFewFirst reads up to fewFilterRows+1 rows that pass the filter (through
	// the index of the filter's tags or conversation) and ranks them exactly when
	// there are no more than fewFilterRows; only otherwise does it search as
	// vectorIndexed. Left to the planner, a filter that 1% of 100,000 rows pass was
	// read through the tags' index and ranked in 3–10 ms after one ANALYZE, and walked
	// through the graph by the iterative scan in 44–77 ms after another: its estimates
	// of the two plans were close (docs/benchmarks.md, "A filter few entries pass").
	vectorFewFirst
)

// fewFilterRows is how many rows passing a filter vectorFewFirst still ranks exactly:
// about what an HNSW search at the smallest ef_search (200) reads.
const fewFilterRows = 2000

// vectorSQL is the vector half over table t by plan; for vectorFewFirst, $10 is one
// more than the rows it still ranks exactly.
func vectorSQL(t vectorTable, plan vectorPlan, asOf bool) string {
	distance := fmt.Sprintf("v.embedding <=> $3::vector::%s", t.column())
	graphDistance := fmt.Sprintf("%s <=> $3::vector::halfvec(%d)", t.graphKey("v."), t.Model.Dimensions)
	where := `v.tenant_id = $1 AND v.project_id = $2 AND v.generation = $4 AND ` + recallFilter("v", 5)
	if asOf {
		// The vector rows do not carry their entry's times: as of an instant, the entry
		// is probed inside the search, so entries created since cannot take the places
		// of the limit and leave it short.
		where += ` AND EXISTS (SELECT FROM context_entries e
			WHERE e.tenant_id = v.tenant_id AND e.project_id = v.project_id AND e.entry_id = v.entry_id
			  AND ` + recallable(true, 8) + `)`
	}
	searched := func(gate string) string {
		return fmt.Sprintf(`
		(SELECT v.entry_id, %[1]s AS distance FROM %[2]s v
		 WHERE v.indexed AND %[3]s%[4]s
		 ORDER BY %[5]s
		 LIMIT $9)
		UNION ALL
		(SELECT v.entry_id, %[1]s AS distance FROM %[2]s v
		 WHERE NOT v.indexed AND %[3]s%[4]s
		 ORDER BY %[1]s
		 LIMIT $9)`, distance, t.ident(), where, gate, graphDistance)
	}
	var nearest string
	switch plan {
	case vectorIndexed:
		nearest = `nn AS (` + searched("") + `)`
	case vectorExact:
		nearest = fmt.Sprintf(`scanned AS MATERIALIZED (
			SELECT v.entry_id, %[1]s AS distance FROM %[2]s v WHERE %[3]s
		), nn AS (
			SELECT entry_id, distance FROM scanned ORDER BY distance LIMIT $9)`, distance, t.ident(), where)
	case vectorFewFirst:
		// The condition on few is evaluated once: the branch it rules out never runs.
		nearest = fmt.Sprintf(`scanned AS MATERIALIZED (
			SELECT v.entry_id, %[1]s AS distance FROM %[2]s v WHERE %[3]s LIMIT $10
		), few AS MATERIALIZED (
			SELECT count(*) < $10 AS few FROM scanned
		), nn AS (
			(SELECT entry_id, distance FROM scanned WHERE (SELECT few FROM few) ORDER BY distance LIMIT $9)
			UNION ALL`, distance, t.ident(), where) + searched(` AND NOT (SELECT few FROM few)`) + `)`
	}
	return `WITH ` + nearest + `
		SELECT ` + entryColumns + `, nn.distance FROM nn
		JOIN context_entries e ON e.tenant_id = $1 AND e.project_id = $2 AND e.entry_id = nn.entry_id
		WHERE e.status = 'active' AND ` + recallable(asOf, 8) + `
		ORDER BY nn.distance, e.entry_id
		LIMIT $9`
}

// VectorSearch implements memory.RecallStore. A filter on tags or a conversation
// (which their indexes serve) is searched vectorFewFirst, any other vectorIndexed. When
// the index comes up short (a filter rejects more rows than the iterative scan may
// visit), the exact scan of the rows that pass the filter answers instead.
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
		search := func(plan vectorPlan) (err error) {
			planArgs := args
			if plan == vectorFewFirst {
				planArgs = append(slices.Clone(args), s.fewRows+1)
			}
			rows, err := tx.Query(ctx, vectorSQL(t, plan, q.AsOfMs != nil), planArgs...)
			if err != nil {
				return s.catalog.translate(t, err)
			}
			hits, err = collectHits(rows, func(distance float64) float64 { return 1 - distance })
			return err
		}
		plan := vectorIndexed
		switch {
		case !t.graphed():
			plan = vectorExact
		case len(q.Tags) > 0 || q.ConversationID != "":
			plan = vectorFewFirst
		}
		if err := search(plan); err != nil || plan == vectorExact || len(hits) == q.Limit {
			return err
		}
		return search(vectorExact)
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
// and |e| come from the postings of the query's terms (migration 00029): packed in
// blocks, and the few written since the last pack one row each. The search reads them
// all in one statement, scores every entry holding a term here, and then asks the
// entries table for the best of them in order, a batch at a time, until k pass the
// filter; a posting whose document is gone (its ordinal no entry carries) is skipped
// there.
const (
	bm25K1 = 1.2
	bm25B  = 0.75
	// lightShare bounds MaxScore's light terms: together their bounds are at most this
	// share of the bound of the weightiest term that can fill the results.
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

// bm25Contribution is a posting's contribution to its entry's score: the term's idf,
// the posting's tf and its document's length, with the scope's mean length in $12,
// rounded to a multiple of bm25Quantum. textRankSQL computes it with this expression
// for the light terms, from the documents; the postings' scoring with contribution,
// its same operations, so that a term of a document weighs the same either way.
func bm25Contribution(idf, tf, length string) string {
	return fmt.Sprintf(`(round(%[5]s * %[6]s * %[1]v / (%[6]s + %[2]v * (%[3]v + %[4]v * %[7]s / $12::float8)) * %[8]v) / %[8]v)`,
		bm25K1+1, bm25K1, 1-bm25B, bm25B, idf, tf, length, 1/bm25Quantum)
}

// bm25Quantum is the grid contributions are rounded to, 2^-40. An entry's score is a
// sum of contributions added up in an order that depends on the path (the postings'
// merge term by term, then the light terms' sum); floating-point addition is not
// associative, and equal scores summed in two orders came out a unit in the last place
// apart, which ranked them by that instead of by creation and ID. Multiples of 2^-40 add exactly in a
// float8, in any order, while the sum stays below 2^13; a contribution is below
// idf·(k1+1) < 48 (idf ≤ ln(2N + 2), N < 10^9), so a score of up to 170 contributions
// (32 terms, or a prefix term's many) is an exact sum. A contribution moves by at most
// half a quantum (4.5e-13).
const bm25Quantum = 1.0 / (1 << 40)

// contribution is bm25Contribution computed here for a posting of tf in a document of
// length: the same operations in the same order (a conversion after each product keeps
// them from being fused), rounded half to even as Postgres rounds a float8.
func contribution(idf float64, tf, length int32, avgdl float64) float64 {
	t := float64(tf)
	num := float64(float64(idf*t) * (bm25K1 + 1))
	den := t + float64(bm25K1*(1-bm25B+float64(float64(bm25B*float64(length))/avgdl)))
	return math.RoundToEven(float64(num/den)*(1/bm25Quantum)) / (1 / bm25Quantum)
}

// textPassing is the condition that the entry e of the scope ($1, $2) passes the text
// half's filter ($3 to $6) and was recallable at $6.
func textPassing(asOf bool) string {
	return `e.tenant_id = $1 AND e.project_id = $2 AND ` + recallable(asOf, 6) + ` AND ` + recallFilter("e", 3)
}

// termRows selects, for the query term q, the rows of table t (alias x) of its term,
// or for a prefix term of every term it starts.
func termRows(table, columns string) string {
	return `SELECT ` + columns + ` FROM ` + table + ` x
	        WHERE NOT q.prefix AND x.tenant_id = $1 AND x.project_id = $2 AND x.term = q.term COLLATE "C"
	        UNION ALL
	        SELECT ` + columns + ` FROM ` + table + ` x
	        WHERE q.prefix AND x.tenant_id = $1 AND x.project_id = $2
	          AND x.term >= q.term COLLATE "C" AND x.term < (q.term || U&'\+10FFFF') COLLATE "C"
	          AND starts_with(x.term, q.term)`
}

// textPostingsSQL reads the postings of the query's terms $3 (prefix flags $4) in the
// scope, by the term's position in $3 (from 1): its blocks, each with how many
// postings it holds, in the order of their numbers, then its pending postings by
// ordinal, one row each.
var textPostingsSQL = `
	WITH q AS (SELECT * FROM unnest($3::text[], $4::bool[]) WITH ORDINALITY AS q(term, prefix, i))
	SELECT x.i, x.data, x.ord, x.tf, x.length, x.created_at_ms FROM (
	    SELECT q.i, 0 AS pending, b.block::bigint AS key, b.data, 0::bigint AS ord, b.postings AS tf, 0 AS length, 0::bigint AS created_at_ms
	    FROM q CROSS JOIN LATERAL (` + termRows("entry_text_blocks", "x.block, x.postings, x.data") + `) b
	    UNION ALL
	    SELECT q.i, 1, p.ord, NULL, p.ord, p.tf, p.length, p.created_at_ms
	    FROM q CROSS JOIN LATERAL (` + termRows("entry_text_postings", "x.ord, x.tf, x.length, x.created_at_ms") + `) p
	) x
	ORDER BY x.i, x.pending, x.key`

// textRankSQL returns, of the documents $8 with their scores $10 (a batch of the
// best, partial when light terms $14 with idf $15 are left out of them), the entries
// that pass the filter $3 to $6 at $6, best first, up to $7: each scored in full, the
// light terms' contributions computed from its own document (tf its lexeme's
// positions, its length, the mean length $12), with its coverage (the query's idf $9, its terms' own queries
// $11, the idf's sum $13).
func textRankSQL(asOf bool) string {
	return `
	SELECT ` + entryColumns + `, e.score, ` + textCoverage(11, 13) + ` AS coverage
	FROM (
	    SELECT c.score + coalesce((
	        SELECT sum(` + bm25Contribution("q.idf", "coalesce(cardinality(l.positions), 0)", "e.search_length") + `)
	        FROM unnest(e.search) AS l(lexeme, positions, weights)
	        JOIN unnest($14::text[], $15::float8[]) AS q(term, idf) ON substr(l.lexeme, 14) = q.term), 0) AS score, e.*
	    FROM unnest($8::bigint[], $10::float8[]) AS c(ord, score)
	    CROSS JOIN LATERAL (SELECT e.* FROM context_entries e WHERE e.text_ord = c.ord AND ` + textPassing(asOf) + `) e
	) e
	ORDER BY e.score DESC, e.created_at_ms DESC, e.entry_id
	LIMIT $7`
}

// textCoverage is a result's coverage: the share of the query's idf (summed in
// $sum) its terms hold, each term's presence tested by its own tsquery ($queries) on
// the result's document.
func textCoverage(queries, sum int) string {
	return fmt.Sprintf(`(SELECT coalesce(sum(q.idf), 0) FROM unnest($9::float8[], $%[1]d::text[]) AS q(idf, query)
	    WHERE e.search @@ q.query::tsquery)::float8 / $%[2]d::float8`, queries, sum)
}

// passingOrdsSQL selects the document numbers of up to $7 of the scope's entries that
// pass the filter $3 to $6 at $6.
func passingOrdsSQL(asOf bool) string {
	return `SELECT e.text_ord FROM context_entries e WHERE ` + textPassing(asOf) + ` LIMIT $7`
}

// TextSearch implements memory.RecallStore. The postings of the query's terms are
// scored here and the best entries looked up (textRankSQL): first by MaxScore, which
// leaves the light terms' postings unread, then, when it cannot tell its answer is the
// best, over every term's postings, in batches until the limit is met or none is left.
// Under a filter on tags or a conversation that few entries pass (fewRows at most,
// read first through their indexes), only those entries' postings are scored.
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
		run := func(sql string, args ...any) error {
			rows, err := tx.Query(ctx, sql, args...)
			if err != nil {
				return translate(err)
			}
			defer rows.Close()
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
		filter := append([]any{scope.TenantID, scope.ProjectID}, recallFilterArgs(q.RecallFilter)...)
		sc := s.scratch.get()
		defer s.scratch.put(sc)
		sc.allowed = sc.allowed[:0]
		restricted := false
		if len(q.Tags) > 0 || q.ConversationID != "" {
			rows, err := tx.Query(ctx, passingOrdsSQL(q.AsOfMs != nil), append(slices.Clone(filter), s.fewRows+1)...)
			if err != nil {
				return translate(err)
			}
			sc.allowed, err = pgx.AppendRows(sc.allowed, rows, pgx.RowTo[int64])
			if err != nil {
				return translate(err)
			}
			restricted = len(sc.allowed) <= s.fewRows
			if !restricted {
				sc.allowed = sc.allowed[:0]
			}
			slices.Sort(sc.allowed)
		}
		if restricted && len(sc.allowed) == 0 {
			return nil
		}
		rank := func(batch []textCandidate, limit int, light termSet) error {
			ords, scores := make([]int64, len(batch)), make([]float64, len(batch))
			for i, c := range batch {
				ords[i], scores[i] = c.ord, c.score
			}
			return run(textRankSQL(q.AsOfMs != nil), append(slices.Clone(filter), limit, ords, w.idf, scores, queries, w.avgdl,
				w.idfSum(), light.lexemes, light.idf)...)
		}
		all := termSet{lexemes: lexemes, prefixes: prefixes, idf: w.idf}
		if essential, light, bound := all.split(w.essential(prefixes, df, q.Limit)); bound > 0 {
			if err := sc.read(ctx, tx, scope, essential.lexemes, essential.prefixes); err != nil {
				return err
			}
			cands := sc.score(essential.idf, w.avgdl, restricted)
			for n := textBatch(q.Limit); ; n *= 4 {
				batch, outside := marginBatch(cands, n, bound)
				if len(batch) > maxScoreBatch {
					break
				}
				hits = hits[:0]
				if err := rank(batch, q.Limit, light); err != nil {
					return err
				}
				if len(hits) == q.Limit && hits[q.Limit-1].Score >= outside && hits[q.Limit-1].Score > bound {
					return nil
				}
				if len(batch) == len(cands) {
					break
				}
			}
			hits = hits[:0]
		}
		if err := sc.read(ctx, tx, scope, lexemes, prefixes); err != nil {
			return err
		}
		cands := sc.score(w.idf, w.avgdl, restricted)
		for batch := textBatch(q.Limit); len(cands) > 0 && len(hits) < q.Limit; batch *= 4 {
			var best []textCandidate
			best, cands = bestCandidates(cands, batch)
			if err := rank(best, q.Limit-len(hits), termSet{}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return hits, nil
}

// textBatch is how many of the best documents the first lookup of a text search for
// k results asks for; each further one asks for four times as many.
func textBatch(k int) int { return 2*k + 16 }

// maxScoreBatch bounds the documents one lookup of MaxScore takes: beyond it, every
// term's postings are read.
const maxScoreBatch = 4096

// termSet is some of a query's terms, with their prefix flags and idf.
type termSet struct {
	lexemes  []string
	prefixes []bool
	idf      []float64
}

// split returns the essential terms and the light ones (essential[i] false), with the
// light ones' bounds.
func (t termSet) split(essential []bool, bound float64) (ess, light termSet, _ float64) {
	for i, e := range essential {
		part := &light
		if e {
			part = &ess
		}
		part.lexemes, part.prefixes, part.idf = append(part.lexemes, t.lexemes[i]), append(part.prefixes, t.prefixes[i]),
			append(part.idf, t.idf[i])
	}
	return ess, light, bound
}

// marginBatch reorders cands in place and returns the batch MaxScore looks up: the best
// n by partial score (bestCandidates), with every other candidate whose partial score
// is within bound of the n-th's; and outside, a bound no candidate left out reaches
// (−∞ when none is left out): the n-th's partial score.
func marginBatch(cands []textCandidate, n int, bound float64) (batch []textCandidate, outside float64) {
	best, rest := bestCandidates(cands, n)
	if len(rest) == 0 {
		return best, math.Inf(-1)
	}
	nth := best[len(best)-1].score
	k := 0
	for i, c := range rest {
		if c.score >= nth-bound {
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

// textScratch holds a text search's postings and scores. Searches reuse them
// (scratchPool): a question of common words reads a posting for nearly every entry of
// the scope, and allocating and growing its buffers anew cost more than decoding and
// scoring them (17 ms against 2 ms for 130,000 postings).
type textScratch struct {
	postings  []posting // every term's, one term after the other
	terms     []int     // where each term's postings end in postings
	allowed   []int64   // the documents a filter few entries pass leaves, sorted
	acc, next []textCandidate
}

// read reads the postings of the query's terms, each term's sorted by ordinal. A
// block is decoded from the row's own buffer, not copied, when it comes in binary (a
// connection in the simple protocol, which a database URL may ask for, sends it as
// text, decoded by pgx).
func (sc *textScratch) read(ctx context.Context, tx pgx.Tx, scope runtime.Scope, lexemes []string, prefixes []bool) error {
	rows, err := tx.Query(ctx, textPostingsSQL, scope.TenantID, scope.ProjectID, lexemes, prefixes)
	if err != nil {
		return translate(err)
	}
	defer rows.Close()
	sc.postings, sc.terms = sc.postings[:0], append(sc.terms[:0], make([]int, len(lexemes))...)
	var i int64
	var p posting
	var text []byte
	dest := []any{&i, nil, &p.ord, &p.tf, &p.length, &p.created}
	asText := false
	for first := true; rows.Next(); first = false {
		if first && rows.FieldDescriptions()[1].Format == pgtype.TextFormatCode {
			asText, dest[1] = true, &text
		}
		if err := rows.Scan(dest...); err != nil {
			return translate(err)
		}
		data := rows.RawValues()[1]
		if asText && data != nil {
			data = text
		}
		if data != nil {
			// tf is the block's count of postings.
			had := len(sc.postings)
			sc.postings = slices.Grow(sc.postings, int(p.tf))
			if sc.postings, err = decodeBlock(sc.postings, data); err == nil && len(sc.postings)-had != int(p.tf) {
				err = errCorruptBlock
			}
			if err != nil {
				return fmt.Errorf("a block of term %q in %s/%s: %w", lexemes[i-1], scope.TenantID, scope.ProjectID, err)
			}
		} else {
			sc.postings = append(sc.postings, p)
		}
		sc.terms[i-1] = len(sc.postings)
	}
	if err := rows.Err(); err != nil {
		return translate(err)
	}
	start := 0
	for t, end := range sc.terms {
		end = max(end, start) // a term without postings
		sc.terms[t] = end
		if ps := sc.postings[start:end]; !slices.IsSortedFunc(ps, byOrd) {
			slices.SortFunc(ps, byOrd)
		}
		start = end
	}
	return nil
}

// scratchPool keeps up to scratchKept textScratch between searches, each at most
// scratchPostings postings and candidates large (a larger one is left to the garbage
// collector, so one question over a huge scope does not pin its memory): at most
// about 80 MB kept. A sync.Pool gives its buffers up at every garbage collection, and
// the search after it pays for growing them again.
type scratchPool chan *textScratch

const (
	scratchKept     = 4
	scratchPostings = 1 << 18
)

func (p scratchPool) get() *textScratch {
	select {
	case sc := <-p:
		return sc
	default:
		return new(textScratch)
	}
}

func (p scratchPool) put(sc *textScratch) {
	if cap(sc.postings) > scratchPostings || cap(sc.acc) > scratchPostings || cap(sc.next) > scratchPostings {
		return
	}
	select {
	case p <- sc:
	default:
	}
}

// textCandidate is a document holding a term of the query, with its score.
type textCandidate struct {
	ord, created int64
	score        float64
}

// score sums the contributions of each document's postings, term by term: a merge of
// the term's postings (sorted by ordinal) into the documents so far; when restricted,
// of the allowed documents' only. A document holding two terms a prefix term stands
// for counts both.
func (sc *textScratch) score(idf []float64, avgdl float64, restricted bool) []textCandidate {
	acc, next := sc.acc[:0], sc.next[:0]
	start := 0
	for t, end := range sc.terms {
		ps := sc.postings[start:end]
		start = end
		next = slices.Grow(next[:0], len(acc)+len(ps))
		i, a := 0, 0
		for _, p := range ps {
			if restricted {
				for a < len(sc.allowed) && sc.allowed[a] < p.ord {
					a++
				}
				if a == len(sc.allowed) {
					break
				}
				if sc.allowed[a] != p.ord {
					continue
				}
			}
			for i < len(acc) && acc[i].ord < p.ord {
				next = append(next, acc[i])
				i++
			}
			c := contribution(idf[t], p.tf, p.length, avgdl)
			switch {
			case i < len(acc) && acc[i].ord == p.ord:
				acc[i].score += c
			case len(next) > 0 && next[len(next)-1].ord == p.ord:
				next[len(next)-1].score += c
			default:
				next = append(next, textCandidate{ord: p.ord, created: p.created, score: c})
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
func before(a, b textCandidate) bool {
	return a.score > b.score || a.score == b.score && a.created > b.created
}

// bestCandidates reorders cands in place: first the best n, sorted, with every other
// candidate that ranks alike with the n-th (the entries table orders those by ID);
// then the rest, which it returns apart.
func bestCandidates(cands []textCandidate, n int) (best, rest []textCandidate) {
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
	slices.SortFunc(best, func(a, b textCandidate) int {
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

// essential splits the terms for MaxScore: the light ones are the least weighty, as
// many as keep their bounds (idf·(k1+1), the most a term adds to a score) summed
// within lightShare of the bound of the weightiest term that at least k entries hold
// (about what the k-th entry may score: a rarer term cannot fill the results); prefix
// terms are never light. It returns which terms are essential and the light ones'
// bounds summed, each with a quantum's margin (a rounded contribution may exceed its
// bound by half of one); 0 when none is light.
func (w bm25) essential(prefixes []bool, df []float64, k int) ([]bool, float64) {
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
		sum += w.bound[i] + bm25Quantum
		essential[i] = false
	}
	return essential, sum
}
