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
	fewRows       int // fewFilterRows; tests lower it to take the other plans
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
	// its graph, with the filter applied inside the scan, and the nearest among the
	// rows not yet folded into it, by the distance of each (found by the partial index
	// of those rows, a bounded number per scope). Not exact.
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
		 ORDER BY %[1]s
		 LIMIT $9)
		UNION ALL
		(SELECT v.entry_id, %[1]s AS distance FROM %[2]s v
		 WHERE NOT v.indexed AND %[3]s%[4]s
		 ORDER BY %[1]s
		 LIMIT $9)`, distance, t.ident(), where, gate)
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
		case t.cosineOps() == "":
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
// bounds (an entry holding light terms only could rank): then a second statement reads
// the postings by impact (impactSQL), and only when that finds fewer than k entries
// passing the filter among its first candidates does the search run again with every
// term essential.
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

// bm25Contribution is a posting's contribution to its entry's score: the term's idf,
// the posting's tf and its document's length, with the scope's mean length in $12,
// rounded to a multiple of bm25Quantum. Every statement of the text half computes it
// with this one expression, so that the same posting always weighs the same.
func bm25Contribution(idf, tf, length string) string {
	return fmt.Sprintf(`(round(%[5]s * %[6]s * %[1]v / (%[6]s + %[2]v * (%[3]v + %[4]v * %[7]s / $12::float8)) * %[8]v) / %[8]v)`,
		bm25K1+1, bm25K1, 1-bm25B, bm25B, idf, tf, length, 1/bm25Quantum)
}

// bm25Quantum is the grid contributions are rounded to, 2^-40. An entry's score is a
// sum of contributions that each statement adds up in its own order (a read's terms,
// then lookups of the others); floating-point addition is not associative, and equal
// scores summed in two orders came out a unit in the last place apart, which ranked
// them by that instead of by creation and ID. Multiples of 2^-40 add exactly in a
// float8, in any order, while the sum stays below 2^13; a contribution is below
// idf·(k1+1) < 48 (idf ≤ ln(2N + 2), N < 10^9), so a score of up to 170 contributions
// (32 terms, or a prefix term's many) is an exact sum. A contribution moves by at most
// half a quantum (4.5e-13).
const bm25Quantum = 1.0 / (1 << 40)

// bm25Term is a posting's contribution with the term in q and the posting in p.
var bm25Term = bm25Contribution("q.idf", "p.tf", "p.length")

// A statement that sums every posting of its terms reads each contribution from a
// table made once per term (contributionTable), for the tf and lengths most postings
// have: evaluating the contribution was nearly half of summing 40,000 postings, a
// table lookup costs a ninth of that (docs/benchmarks.md, "The contributions from a
// table").
// A posting outside the table is computed as bm25Term. The table holds the same
// expression's values, so a contribution is the same either way.
const (
	tableTfs     = 3
	tableLengths = 128
)

// contributionTable selects the query terms q with c, the contributions of a posting
// of tf t and length l at index (t-1)·tableLengths + l. The statement must
// materialize it: a subquery Postgres flattens would build the array again for every
// posting.
var contributionTable = `SELECT q.*, ARRAY(
	        SELECT ` + bm25Contribution("q.idf", "t.x", "l.x") + `
	        FROM generate_series(1, ` + strconv.Itoa(tableTfs) + `) AS t(x), generate_series(1, ` + strconv.Itoa(tableLengths) + `) AS l(x)
	        ORDER BY t.x, l.x) AS c`

// tabledContribution is a posting's contribution with the term in q (selected by
// contributionTable) and the posting in p.
var tabledContribution = `CASE WHEN p.tf <= ` + strconv.Itoa(tableTfs) + ` AND p.length BETWEEN 1 AND ` + strconv.Itoa(tableLengths) + `
	    THEN q.c[(p.tf - 1) * ` + strconv.Itoa(tableLengths) + ` + p.length] ELSE ` + bm25Term + ` END`

// queryTermPostings reads the postings of the query term q: the term's own, or, for a
// prefix term, those of every term it starts.
const queryTermPostings = `
	        SELECT p.entry_id, p.tf, p.length FROM entry_text_postings p
	        WHERE NOT q.prefix AND p.tenant_id = $1 AND p.project_id = $2 AND p.term = q.term COLLATE "C"
	        UNION ALL
	        SELECT p.entry_id, p.tf, p.length FROM entry_text_postings p
	        WHERE q.prefix AND p.tenant_id = $1 AND p.project_id = $2
	          AND p.term >= q.term COLLATE "C" AND p.term < (q.term || U&'\+10FFFF') COLLATE "C"
	          AND starts_with(p.term, q.term)
	    `

// textPassing is the condition that the entry e of the scope ($1, $2) passes the text
// half's filter ($3 to $6) and was recallable at $6.
func textPassing(asOf bool) string {
	return `e.tenant_id = $1 AND e.project_id = $2 AND ` + recallable(asOf, 6) + ` AND ` + recallFilter("e", 3)
}

// textPasses selects the entry whose ID is the expression id when it passes
// (textPassing).
func textPasses(asOf bool, id string) string {
	return `SELECT e.* FROM context_entries e WHERE e.entry_id = ` + id + ` AND ` + textPassing(asOf)
}

// textSQL is the text half over the postings of the query's terms $8 (without the
// scope's tag), with their idf $9, prefix flags $10 and whether each is essential $11
// (a prefix term always is); $13 is the light terms' bounds summed, $7 the limit, $3
// to $6 the filter. part holds the essential terms' partial scores; top the best k of
// them among the entries that pass the filter, looked up best first until k pass, with
// their rows; scored adds the light terms, looked up by term and entry, to the entries
// within $13 of the k-th that can still pass the filter. The filter is checked once per
// entry: the entries of top keep the rows top read, those scoring above the k-th
// partial score that top does not hold were refused by it (so neither their light
// terms nor their rows are looked up: under a selective filter they are most of the
// entries near the k-th), and only the others are looked up. Each result row carries
// that k-th partial score (null when fewer than k entries passed: then top looked at
// every entry, and holds the answer), which tells the caller whether it is exact. Each result's
// coverage is the share of the query's idf ($15: their sum) its terms hold, each
// term's presence tested by its own tsquery ($14) on the result's document. The
// entries are looked up through LATERAL subqueries that Postgres cannot flatten
// (LIMIT, OFFSET 0), so each is an index probe per candidate that can rank, never a
// join of every candidate with the scope.
func textSQL(asOf bool) string {
	passes := func(id string) string { return textPasses(asOf, id) }
	return `
	WITH q AS (
	    SELECT * FROM unnest($8::text[], $9::float8[], $10::bool[], $11::bool[]) AS q(term, idf, prefix, essential)
	), tabled AS MATERIALIZED (
	    ` + contributionTable + ` FROM q WHERE q.essential
	), part AS MATERIALIZED (
	    SELECT p.entry_id, sum(` + tabledContribution + `) AS s
	    FROM tabled q CROSS JOIN LATERAL (` + queryTermPostings + `) p
	    GROUP BY p.entry_id
	), head AS MATERIALIZED (
	    SELECT ranked.s, e.* FROM (SELECT * FROM part ORDER BY part.s DESC LIMIT ` + fmt.Sprint(textHead) + ` * $7::int) ranked
	    CROSS JOIN LATERAL (` + passes("ranked.entry_id") + ` LIMIT 1) e
	    LIMIT $7
	), top AS MATERIALIZED (
	    SELECT * FROM head WHERE (SELECT count(*) FROM head) = $7
	    UNION ALL
	    (SELECT ranked.s, e.* FROM (SELECT * FROM part ORDER BY part.s DESC) ranked
	     CROSS JOIN LATERAL (` + passes("ranked.entry_id") + ` LIMIT 1) e
	     WHERE (SELECT count(*) FROM head) < $7
	     LIMIT $7)
	), cut AS (
	    SELECT CASE WHEN count(*) = $7 THEN min(top.s) END AS kth FROM top
	), scored AS MATERIALIZED (
	    SELECT part.entry_id, part.s AS partial, cut.kth, top.entry_id IS NOT NULL AS kept, part.s + coalesce((
	        SELECT sum(` + bm25Term + `) FROM q
	        JOIN entry_text_postings p ON p.tenant_id = $1 AND p.project_id = $2
	          AND p.term = q.term COLLATE "C" AND p.entry_id = part.entry_id
	        WHERE NOT q.essential), 0) AS score
	    FROM part CROSS JOIN cut LEFT JOIN top ON top.entry_id = part.entry_id
	    WHERE (cut.kth IS NULL OR part.s >= cut.kth - $13::float8)
	      AND (top.entry_id IS NOT NULL OR cut.kth IS NOT NULL AND part.s <= cut.kth)
	)
	SELECT ` + entryColumns + `, e.score::float8, ` + textCoverage(14, 15) + ` AS coverage, e.kth::float8
	FROM (
	    SELECT scored.score, scored.kth, t.* FROM scored JOIN top t ON t.entry_id = scored.entry_id
	    UNION ALL
	    SELECT scored.score, scored.kth, NULL::float8, x.* FROM scored CROSS JOIN LATERAL (` + passes("scored.entry_id") + ` OFFSET 0) x
	    WHERE NOT scored.kept
	) e
	WHERE e.kth IS NULL OR e.score >= e.kth
	ORDER BY e.score DESC, e.created_at_ms DESC, e.entry_id
	LIMIT $7`
}

// textHead is how many partial scores per result the best-first walk of textSQL
// takes from a bounded sort first (a top-N heap); only when fewer than k of them pass
// the filter does it sort them all and walk again.
const textHead = 4

// impactTfs is how many tf values the impact reads take one by one (1 to impactTfs);
// the postings of a higher tf are read as one range, filtered by their contribution.
const impactTfs = 7

// impactBand is the widest band of lengths (see impactSQL) read length by length; a
// wider one is read as one range.
const impactBand = 64

// wholeTermPostings bounds the terms the impact statement reads in full: the rarest
// terms, as many as hold at most this many entries together (and every prefix term).
const wholeTermPostings = 1000

// impactLength is, for the term's idf, a tf and a contribution tau (SQL expressions),
// the greatest document length at which a posting of that tf contributes at least tau:
// solving the contribution for the length. A tau of 0 or less bounds nothing; a null
// tau bounds every length out.
func impactLength(idf, tf, tau string) string {
	return fmt.Sprintf(`(CASE WHEN %[3]s <= 0 THEN 2147483647 ELSE greatest(-1, least(2147483647,
		floor($12::float8 / %[4]v * (%[1]s * %[2]s * %[5]v / (%[3]s) - %[2]s - %[6]v))))::bigint END)`,
		idf, tf, tau, bm25K1*bm25B, bm25K1+1, bm25K1*(1-bm25B))
}

// textCoverage is a result's coverage: the share of the query's idf (summed in
// $sum) its terms hold, each term's presence tested by its own tsquery ($queries) on
// the result's document.
func textCoverage(queries, sum int) string {
	return fmt.Sprintf(`(SELECT coalesce(sum(q.idf), 0) FROM unnest($9::float8[], $%[1]d::text[]) AS q(idf, query)
	    WHERE e.search @@ q.query::tsquery)::float8 / $%[2]d::float8`, queries, sum)
}

// impactSQL is the text half read by impact, for the questions MaxScore cannot cut
// (fewer than k entries hold a weighty term, or the k-th partial score is within the
// light terms' bounds): the terms $8 with their idf $9, prefix flags $10, whether each
// is read in full $11 (the rarest and the prefix terms), their entries $15, the mean
// length $12, the limit $7 and the filter $3 to $6.
//
//   - whole: the full-read terms' partial scores.
//   - t: every other term with the most one of its postings contributes (maxc), from
//     the shortest posting of each tf (the index entry_text_postings_by_impact).
//   - seed, seeded, top: a lower bound θ of the k-th score. The candidates are the k
//     best of whole and each term's k postings of highest contribution, scored in full
//     (the other terms looked up by term and entry); the filter is checked best first
//     until k pass; θ is the k-th score, and created_k and id_k the creation time and
//     ID of the last in rank of the k among those scoring θ (ties rank newest first,
//     then by ID). θ is null when fewer than k pass.
//   - split: θ shared among the terms (θ_t, summing to at most θ). An entry that can
//     rank scores at least θ, so one of its terms contributes at least θ_t. The terms
//     that weigh least (words most entries hold, beside a weighty term) are given
//     their whole maxc, so nothing of them is read, as long as their sum stays within
//     θ/8; the rest of θ is shared among the others in proportion to their maxc, so
//     that each is cut at the same share of what it can add (measured better than
//     giving whole maxcs while the sum stays within θ: docs/benchmarks.md).
//   - reads: each term's postings contributing more than θ_t (strict), which are, for
//     each tf, a range of lengths; and, for the first term only (the one held by the
//     fewest entries), the band of postings contributing about θ_t (weak) that would
//     rank at or before the last of the k in a tie: created after created_k, or at it
//     with an ID up to id_k. An entry none of whose postings is strict scores at most θ
//     (up to rounding) and holds every term in its band, so if it ties the k-th it is
//     in the first term's band, where the newest come first. (Entries created in the
//     same millisecond, as an import or a bulk load leaves them, tie on creation too:
//     without the ID bound every one of them in the band would be read and scored.)
//   - scored: every entry read (and every entry of whole) whose score can still reach
//     θ (what it was read with, plus, for each term it was not read for, the least of
//     θ_t and what the term's largest tf, tfmax, contributes at the entry's own length:
//     every posting carries its document's length, and a term adds less to a longer
//     document), scored in full by term-and-entry lookups; not the entries of top, nor
//     the candidates scoring above θ that top checked and the filter refused, so no
//     entry is checked against the filter twice.
//
// The result is top with the scored entries that pass the filter, best first; each row
// carries θ (null: the caller asks again with every term read in full). Comparisons
// with θ allow a relative 1e-9: the sums are exact (bm25Quantum), the margin covers
// the bounds, which are solved from the unrounded contribution.
func impactSQL(asOf bool) string {
	passes := func(id string) string { return textPasses(asOf, id) }
	term := func(alias string) string {
		return `p.tenant_id = $1 AND p.project_id = $2 AND p.term = ` + alias + `.term COLLATE "C"`
	}
	// The lengths at which a posting contributes at least strict once rounded. A
	// rounded contribution is a multiple of bm25Quantum, so it is at least strict when
	// it is at least strict rounded up to the next multiple, that is when the
	// contribution before rounding is at least that less half a quantum (an exact half
	// may round either way; the bound admits it, and the reads' filter decides). Solved
	// for strict less a whole quantum instead, the bound admitted every posting that
	// contributes the multiple just below strict: for a word every entry holds, in
	// documents of one length, every posting of the word.
	strictLength := impactLength("sp.idf", "tfs.x", fmt.Sprintf("((ceil(sp.strict * %[1]v) / %[1]v - %[2]v) * (1 - 1e-14))",
		1/bm25Quantum, bm25Quantum/2))
	return `
	WITH q AS (
	    SELECT * FROM unnest($8::text[], $9::float8[], $10::bool[], $11::bool[], $15::float8[])
	        WITH ORDINALITY AS q(term, idf, prefix, whole, df, ord)
	), tfs AS (
	    SELECT x FROM generate_series(1, ` + strconv.Itoa(impactTfs) + `) AS x
	), whole AS MATERIALIZED (
	    SELECT p.entry_id, sum(` + bm25Term + `) AS s, max(p.length) AS length
	    FROM q CROSS JOIN LATERAL (` + queryTermPostings + `) p
	    WHERE q.whole
	    GROUP BY p.entry_id
	), t AS MATERIALIZED (
	    SELECT q.ord, q.term, q.idf, q.df, coalesce(m.maxc, 0) AS maxc, coalesce((
	        SELECT p.tf FROM entry_text_postings p WHERE ` + term("q") + ` ORDER BY p.tf DESC LIMIT 1), 0) AS tfmax
	    FROM q CROSS JOIN LATERAL (
	        SELECT max(c.c) AS maxc FROM (
	            SELECT ` + bm25Contribution("q.idf", "tfs.x", "p.length") + ` AS c
	            FROM tfs CROSS JOIN LATERAL (
	                SELECT p.length FROM entry_text_postings p
	                WHERE ` + term("q") + ` AND p.tf = tfs.x ORDER BY p.length LIMIT 1) p
	            UNION ALL
	            SELECT ` + bm25Contribution("q.idf", "p.tf", "0") + ` FROM (
	                SELECT p.tf FROM entry_text_postings p
	                WHERE ` + term("q") + ` AND p.tf > ` + strconv.Itoa(impactTfs) + ` ORDER BY p.tf DESC LIMIT 1) p
	        ) c
	    ) m
	    WHERE NOT q.whole
	), seed AS (
	    SELECT s.entry_id FROM (SELECT whole.entry_id FROM whole ORDER BY whole.s DESC LIMIT $7) s
	    UNION
	    SELECT s.entry_id FROM t CROSS JOIN LATERAL (
	        SELECT p.entry_id FROM tfs CROSS JOIN LATERAL (
	            SELECT p.entry_id, p.length, p.created_at_ms FROM entry_text_postings p
	            WHERE ` + term("t") + ` AND p.tf = tfs.x
	            ORDER BY p.length, p.created_at_ms DESC LIMIT $7) p
	        ORDER BY ` + bm25Contribution("t.idf", "tfs.x", "p.length") + ` DESC, p.created_at_ms DESC LIMIT $7
	    ) s
	), seeded AS (
	    SELECT seed.entry_id, coalesce(whole.s, 0) + coalesce((
	        SELECT sum(` + bm25Contribution("t.idf", "p.tf", "p.length") + `) FROM t
	        JOIN entry_text_postings p ON ` + term("t") + ` AND p.entry_id = seed.entry_id), 0) AS score
	    FROM seed LEFT JOIN whole ON whole.entry_id = seed.entry_id
	), top AS MATERIALIZED (
	    SELECT ranked.score, e.* FROM (SELECT * FROM seeded ORDER BY seeded.score DESC) ranked
	    CROSS JOIN LATERAL (` + passes("ranked.entry_id") + ` LIMIT 1) e
	    LIMIT $7
	), cut AS (
	    SELECT c.theta, k.created_at_ms AS created_k, k.entry_id AS id_k
	    FROM (SELECT CASE WHEN count(*) = $7 THEN min(top.score) END AS theta FROM top) c
	    LEFT JOIN LATERAL (
	        SELECT top.created_at_ms, top.entry_id FROM top WHERE top.score <= c.theta * (1 + 1e-9)
	        ORDER BY top.created_at_ms, top.entry_id DESC LIMIT 1) k ON true
	), sat AS (
	    SELECT o.*, o.cum <= cut.theta / 8 AS saturated, cut.theta, cut.created_k, cut.id_k
	    FROM (SELECT t.*, sum(t.maxc) OVER (ORDER BY t.maxc, t.ord ROWS UNBOUNDED PRECEDING) AS cum FROM t) o
	    CROSS JOIN cut
	), split AS MATERIALIZED (
	    SELECT s.ord, s.term, s.idf, s.tfmax, s.theta, s.created_k, s.id_k, s.share + 1e-12 * s.theta AS strict, s.share - 1e-9 * s.theta AS weak,
	           s.ord = (SELECT t.ord FROM t ORDER BY t.df, t.ord LIMIT 1) AS first
	    FROM (
	        SELECT sat.*, CASE WHEN sat.saturated THEN sat.maxc
	            ELSE greatest(0, sat.theta - coalesce((SELECT max(x.cum) FROM sat x WHERE x.saturated), 0))
	                 * sat.maxc / nullif((SELECT sum(x.maxc) FROM sat x WHERE NOT x.saturated), 0) END AS share
	        FROM sat
	    ) s
	), reads AS (
	    SELECT r.entry_id, sp.ord, r.c, r.length
	    FROM split sp CROSS JOIN LATERAL (
	        SELECT p.entry_id, p.created_at_ms, ` + bm25Contribution("sp.idf", "tfs.x", "p.length") + ` AS c, p.length
	        FROM tfs CROSS JOIN LATERAL (
	            SELECT p.entry_id, p.length, p.created_at_ms FROM entry_text_postings p
	            WHERE ` + term("sp") + ` AND p.tf = tfs.x
	              AND p.length <= ` + strictLength + ` OFFSET 0) p
	        UNION ALL
	        SELECT p.entry_id, p.created_at_ms, ` + bm25Contribution("sp.idf", "tfs.x", "p.length") + `, p.length
	        FROM tfs CROSS JOIN LATERAL (
	            SELECT ` + strictLength + ` AS lo,
	                   ` + impactLength("sp.idf", "tfs.x", "sp.weak") + ` AS hi) b
	        CROSS JOIN LATERAL generate_series(b.lo + 1, b.hi) AS l(len)
	        CROSS JOIN LATERAL (
	            SELECT p.entry_id, p.length, p.created_at_ms FROM entry_text_postings p
	            WHERE ` + term("sp") + ` AND p.tf = tfs.x AND p.length = l.len AND p.created_at_ms >= sp.created_k OFFSET 0) p
	        WHERE sp.first AND b.hi - b.lo <= ` + strconv.Itoa(impactBand) + `
	        UNION ALL
	        SELECT p.entry_id, p.created_at_ms, ` + bm25Contribution("sp.idf", "tfs.x", "p.length") + `, p.length
	        FROM tfs CROSS JOIN LATERAL (
	            SELECT ` + strictLength + ` AS lo,
	                   ` + impactLength("sp.idf", "tfs.x", "sp.weak") + ` AS hi) b
	        CROSS JOIN LATERAL (
	            SELECT p.entry_id, p.length, p.created_at_ms FROM entry_text_postings p
	            WHERE ` + term("sp") + ` AND p.tf = tfs.x AND p.length > b.lo AND p.length <= b.hi
	              AND p.created_at_ms >= sp.created_k OFFSET 0) p
	        WHERE sp.first AND b.hi - b.lo > ` + strconv.Itoa(impactBand) + `
	        UNION ALL
	        SELECT p.entry_id, p.created_at_ms, ` + bm25Contribution("sp.idf", "p.tf", "p.length") + `, p.length
	        FROM entry_text_postings p
	        WHERE ` + term("sp") + ` AND p.tf > ` + strconv.Itoa(impactTfs) + `
	    ) r
	    WHERE r.c >= sp.strict OR sp.first AND r.c >= sp.weak
	      AND (r.created_at_ms > sp.created_k OR r.created_at_ms = sp.created_k AND r.entry_id <= sp.id_k)
	), found AS (
	    SELECT reads.entry_id, sum(reads.c) AS known, array_agg(reads.ord) AS seen, max(reads.length) AS length
	    FROM reads GROUP BY reads.entry_id
	), cand AS (
	    SELECT coalesce(found.entry_id, whole.entry_id) AS entry_id,
	           coalesce(found.known, 0) + coalesce(whole.s, 0) AS known, coalesce(found.seen, '{}') AS seen,
	           coalesce(found.length, whole.length) AS length
	    FROM found FULL JOIN whole ON whole.entry_id = found.entry_id
	), scored AS MATERIALIZED (
	    SELECT cand.entry_id, cand.known + coalesce((
	        SELECT sum(` + bm25Contribution("sp.idf", "p.tf", "p.length") + `) FROM split sp
	        JOIN entry_text_postings p ON ` + term("sp") + ` AND p.entry_id = cand.entry_id
	        WHERE NOT sp.ord = ANY(cand.seen)), 0) AS score
	    FROM cand CROSS JOIN cut
	    WHERE NOT EXISTS (SELECT 1 FROM top WHERE top.entry_id = cand.entry_id)
	      AND NOT EXISTS (SELECT 1 FROM seeded WHERE seeded.entry_id = cand.entry_id AND seeded.score > cut.theta)
	      AND cand.known + coalesce((
	          SELECT sum(least(sp.strict, ` + bm25Contribution("sp.idf", "sp.tfmax", "cand.length") + `))
	          FROM split sp WHERE NOT sp.ord = ANY(cand.seen)), 0) >= cut.theta * (1 - 1e-9)
	)
	SELECT ` + entryColumns + `, e.score::float8, ` + textCoverage(13, 14) + ` AS coverage, cut.theta::float8
	FROM (
	    SELECT * FROM top
	    UNION ALL
	    SELECT scored.score, x.* FROM scored CROSS JOIN cut CROSS JOIN LATERAL (` + passes("scored.entry_id") + ` OFFSET 0) x
	    WHERE scored.score >= cut.theta * (1 - 1e-9)
	) e CROSS JOIN cut
	ORDER BY e.score DESC, e.created_at_ms DESC, e.entry_id
	LIMIT $7`
}

// fewPassingSQL counts the scope's entries that pass the filter $3 to $6 at $6, up to
// $7.
func fewPassingSQL(asOf bool) string {
	return `SELECT count(*) FROM (
	    SELECT 1 FROM context_entries e
	    WHERE ` + textPassing(asOf) + `
	    LIMIT $7) x`
}

// textFewSQL is the text half over the entries that pass the filter $3 to $6, when
// there are few (at most $11 − 1): each is scored from its own document, its lexemes
// matched to the query's terms $8 (idf $9, prefix flags $10) as the postings are
// (without the scope's tag, tf the lexeme's positions, the document's length), with the
// same contribution expression, so the scores are those of the other statements. All
// their lexemes are joined to the terms at once (a hash join on the term, a scan of
// the prefix terms): a score subquery per entry, tried first, ran twice per entry
// (for the sort and for the filter on its value) and cost four times as much. The
// mean length is $12, the coverage's queries and idf sum $13 and $14, the limit $7;
// the last column is null (the answer is exact).
func textFewSQL(asOf bool) string {
	contribution := bm25Contribution("q.idf", "l.tf", "l.search_length")
	return `
	WITH q AS (
	    SELECT * FROM unnest($8::text[], $9::float8[], $10::bool[]) AS q(term, idf, prefix)
	), passing AS MATERIALIZED (
	    SELECT e.* FROM context_entries e
	    WHERE ` + textPassing(asOf) + `
	    LIMIT $11
	), lexemes AS MATERIALIZED (
	    SELECT e.entry_id, e.search_length, substr(l.lexeme, 14) AS term, coalesce(cardinality(l.positions), 0) AS tf
	    FROM passing e CROSS JOIN LATERAL unnest(e.search) AS l(lexeme, positions, weights)
	), scored AS (
	    SELECT x.entry_id, sum(x.c) AS score FROM (
	        SELECT l.entry_id, ` + contribution + ` AS c FROM lexemes l JOIN q ON l.term = q.term AND NOT q.prefix
	        UNION ALL
	        SELECT l.entry_id, ` + contribution + ` FROM lexemes l JOIN q ON q.prefix AND starts_with(l.term, q.term)
	    ) x
	    GROUP BY x.entry_id
	)
	SELECT ` + entryColumns + `, s.score::float8, ` + textCoverage(13, 14) + ` AS coverage, NULL::float8
	FROM scored s JOIN passing e ON e.entry_id = s.entry_id
	ORDER BY s.score DESC, e.created_at_ms DESC, e.entry_id
	LIMIT $7`
}

// TextSearch implements memory.RecallStore. Under a filter on tags or a conversation
// that few entries pass (fewRows at most, counted first), textFewSQL answers;
// otherwise MaxScore (textSQL), then, when it cannot cut, the impact reads
// (impactSQL), then MaxScore with every term essential.
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
		run := func(sql string, args ...any) (cut *float64, err error) {
			rows, err := tx.Query(ctx, sql, args...)
			if err != nil {
				return nil, translate(err)
			}
			defer rows.Close()
			hits = []memory.RecallHit{}
			for rows.Next() {
				var r entryRow
				var h memory.RecallHit
				if err := rows.Scan(r.dest(&h.Score, &h.Coverage, &cut)...); err != nil {
					return nil, translate(err)
				}
				h.Entry = r.entry()
				hits = append(hits, h)
			}
			return cut, translate(rows.Err())
		}
		filter := append([]any{scope.TenantID, scope.ProjectID}, recallFilterArgs(q.RecallFilter)...)
		if len(q.Tags) > 0 || q.ConversationID != "" {
			var passing int
			if err := tx.QueryRow(ctx, fewPassingSQL(q.AsOfMs != nil), append(slices.Clone(filter), s.fewRows+1)...).Scan(&passing); err != nil {
				return translate(err)
			}
			if passing <= s.fewRows {
				_, err := run(textFewSQL(q.AsOfMs != nil), append(slices.Clone(filter), q.Limit, lexemes, w.idf, prefixes,
					s.fewRows+1, w.avgdl, queries, w.idfSum())...)
				return err
			}
		}
		maxScore := func(essential []bool, light float64) (exact bool, err error) {
			args := append(slices.Clone(filter), q.Limit, lexemes, w.idf, prefixes, essential, w.avgdl, light, queries, w.idfSum())
			kth, err := run(textSQL(q.AsOfMs != nil), args...)
			return light == 0 || kth != nil && *kth > light, err
		}
		essential, light := w.essential(prefixes, df, q.Limit)
		exact, err := maxScore(essential, light)
		if err != nil || exact {
			return err
		}
		args := append(slices.Clone(filter), q.Limit, lexemes, w.idf, prefixes, wholeTerms(df, prefixes), w.avgdl, queries, w.idfSum(), df)
		theta, err := run(impactSQL(q.AsOfMs != nil), args...)
		if err != nil || theta != nil && *theta > 0 {
			return err
		}
		for i := range essential {
			essential[i] = true
		}
		_, err = maxScore(essential, 0)
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

// wholeTerms picks the terms the impact statement reads in full: every prefix term, and
// the rarest others, as many as hold at most wholeTermPostings entries together.
func wholeTerms(df []float64, prefixes []bool) []bool {
	whole := slices.Clone(prefixes)
	order := make([]int, len(df))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(df[a], df[b]) })
	held := 0.0
	for _, i := range order {
		if prefixes[i] {
			continue
		}
		if held+df[i] > wholeTermPostings {
			break
		}
		held += df[i]
		whole[i] = true
	}
	return whole
}

// essential splits the terms: the light ones are the least weighty, as many as keep
// their bounds summed at most lightShare of the weightiest term's, prefix terms never
// among them (a prefix is not looked up by entry). df holds each term's entries and k
// is the limit.
//
// A term rarer than k (an entry's number, say) cannot fill the results, so it sets a
// budget far above what the k-th entry scores, and the question's other words would
// then be looked up for nearly every entry the essential ones hold. So a light term
// is made essential again, the weightiest first, when its bound is above lightShare of
// the weightiest term that k entries hold (the k-th entry may score about that) and it
// holds fewer entries than readsPerLookup times the essential terms together (reading
// it costs less than looking it up for each of theirs). It returns which terms are
// essential and the light terms' bounds summed.
func (w bm25) essential(prefixes []bool, df []float64, k int) ([]bool, float64) {
	essential := make([]bool, len(w.bound))
	for i := range essential {
		essential[i] = true
	}
	order := w.byBound()
	if len(order) == 0 {
		return essential, 0
	}
	budget, used := lightShare*w.bound[order[0]], 0.0
	var light []int
	for _, i := range slices.Backward(order[1:]) {
		if prefixes[i] || used+w.bound[i] > budget {
			break
		}
		used += w.bound[i]
		light = append(light, i)
		essential[i] = false
	}
	read, common := 0.0, 0.0
	for i, e := range essential {
		if e {
			read += df[i]
		}
		if df[i] >= float64(k) {
			common = max(common, lightShare*w.bound[i])
		}
	}
	sum := 0.0
	for _, i := range slices.Backward(light) {
		if w.bound[i] > common && df[i] < readsPerLookup*read {
			essential[i] = true
			read += df[i]
			continue
		}
		// A rounded contribution may exceed its bound by half a quantum.
		sum += w.bound[i] + bm25Quantum
	}
	return essential, sum
}

// readsPerLookup is how many postings read in order and summed cost about as much as
// one lookup by term and entry (measured on 100,000 entries: 1.6 µs and 7.5 µs).
const readsPerLookup = 4
