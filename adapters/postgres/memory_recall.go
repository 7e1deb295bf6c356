package postgres

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/pgvector/pgvector-go"

	"github.com/agent-context/agent-context/adapters/postgres/textindex"
	"github.com/agent-context/agent-context/runtime"
	"github.com/agent-context/agent-context/runtime/memory"
)

// RecallStore implements memory.RecallStore: the two halves of recall.
type RecallStore struct {
	db            DBTX
	catalog       *vectorCatalog
	searchTimeout time.Duration
	fewRows       int // fewFilterRows; tests set it to -1 to take the other plans
	scratch       textindex.Pool
	citus         bool // the database is a Citus coordinator (vectorSettingsOnWorkers)
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

// vectorSettingsSQL bounds the vector half's statement, which follows it in the same
// batch: the settings are local to the batch's implicit transaction, which ends with
// it. They are its statement timeout ($1, in ms); pgvector's iterative scan in strict
// order, so that rows the filter rejects do not cut the result short, with a candidate
// list of $2 (hnswEfSearch); and a custom plan for every execution, so the planner
// sees the statement's parameters instead of reusing a generic plan.
const vectorSettingsSQL = `SELECT set_config('statement_timeout', $1, true),
	set_config('plan_cache_mode', 'force_custom_plan', true),
	set_config('hnsw.iterative_scan', 'strict_order', true),
	set_config('hnsw.ef_search', $2, true)`

// vectorSettingsOnWorkers are pgvector's settings of vectorSettingsSQL ($1: ef_search)
// as SET LOCAL commands, for a Citus coordinator: set_config changes only the
// coordinator's session, and the search runs on a worker. Citus forwards SET LOCAL of
// a setting to the workers of the transaction when citus.propagate_set_commands is
// 'local' and the command runs in a transaction block, so on Citus the vector half's
// batch opens one (BEGIN ... COMMIT, still one round trip).
func vectorSettingsOnWorkers(efSearch int) []string {
	return []string{
		`SET LOCAL citus.propagate_set_commands TO 'local'`,
		`SET LOCAL hnsw.iterative_scan TO 'strict_order'`,
		`SET LOCAL hnsw.ef_search TO ` + strconv.Itoa(efSearch),
	}
}

// smallScopeSettingsSQL bounds the exact ranking of a small scope (at most
// fewFilterRows active entries): its statement timeout ($1) alone. Whatever its
// parameters, its plan reads no more than the scope's rows, so the plan the
// statement's preparation keeps serves, without planning every recall anew.
const smallScopeSettingsSQL = `SELECT set_config('statement_timeout', $1, true)`

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

// fewFilterRows is how many rows passing a filter vectorFewFirst still ranks exactly,
// and how many active entries a scope VectorSearch ranks exactly may hold: about what
// an HNSW search at the smallest ef_search (200) reads.
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
	// Each of the nearest is looked up by its key: the LIMIT keeps the lookup a
	// subquery the planner does not merge into a join, which, before the tables'
	// first ANALYZE, it ran as one scan of the scope's entries per result.
	return `WITH ` + nearest + `
		SELECT e.*, nn.distance FROM nn
		CROSS JOIN LATERAL (SELECT ` + entryColumns + ` FROM context_entries e
			WHERE e.tenant_id = $1 AND e.project_id = $2 AND e.entry_id = nn.entry_id
			  AND e.status = 'active' AND ` + recallable(asOf, 8) + `
			LIMIT 1) e
		ORDER BY nn.distance, e.entry_id
		LIMIT $9`
}

// VectorSearch implements memory.RecallStore. A scope of at most fewFilterRows active
// entries (q.ScopeEntries, the caller's count) is ranked vectorExact: left to the
// planner, the graph's statement read a scope of 419 entries whole and ordered it by
// each row's distance as halfvec, every vector detoasted twice and converted, in
// 6–9 ms at one client, where the exact ranking took 3–4 ms (docs/benchmarks.md,
// "Recall latency on LoCoMo conversations"). Otherwise a filter on tags or a
// conversation (which their indexes serve) is searched vectorFewFirst, any other
// vectorIndexed. When the index comes up short (a filter rejects more rows than the
// iterative scan may visit), the exact scan of the rows that pass the filter answers
// instead.
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
	efSearch := hnswEfSearch(q.Limit)
	timeout := strconv.FormatInt(s.searchTimeout.Milliseconds(), 10)
	small := q.ScopeEntries > 0 && q.ScopeEntries <= int64(s.fewRows)
	// On Citus, the settings go to the workers: in a transaction block of the batch's
	// own unless the store runs in a transaction already. A small scope's exact
	// ranking needs none of pgvector's.
	var before, after []string
	if s.citus && !small {
		before = vectorSettingsOnWorkers(efSearch)
		if _, inTx := s.db.(pgx.Tx); !inTx {
			before, after = append([]string{"BEGIN"}, before...), []string{"COMMIT"}
		}
	}
	var hits []memory.RecallHit
	// search runs the settings and the statement in one round trip.
	search := func(plan vectorPlan) error {
		planArgs := args
		if plan == vectorFewFirst {
			planArgs = append(slices.Clone(args), s.fewRows+1)
		}
		b := &pgx.Batch{}
		for _, stmt := range before {
			b.Queue(stmt)
		}
		if small {
			b.Queue(smallScopeSettingsSQL, timeout)
		} else {
			b.Queue(vectorSettingsSQL, timeout, strconv.Itoa(efSearch))
		}
		b.Queue(vectorSQL(t, plan, q.AsOfMs != nil), planArgs...)
		for _, stmt := range after {
			b.Queue(stmt)
		}
		br := s.db.SendBatch(ctx, b)
		defer func() { _ = br.Close() }()
		if err := execResults(br, len(before)+1); err != nil {
			return translate(err)
		}
		rows, err := br.Query()
		if err != nil {
			return s.catalog.translate(t, err)
		}
		if hits, err = collectHits(rows, func(distance float64) float64 { return 1 - distance }); err != nil {
			return s.catalog.translate(t, err)
		}
		return translate(br.Close())
	}
	plan := vectorIndexed
	switch {
	case !t.graphed(), small:
		plan = vectorExact
	case len(q.Tags) > 0 || q.ConversationID != "":
		plan = vectorFewFirst
	}
	if err := search(plan); err != nil {
		return nil, err
	}
	if plan != vectorExact && len(hits) < q.Limit {
		if err := search(vectorExact); err != nil {
			return nil, err
		}
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

// The text half of recall ranks by Okapi BM25 over the scope's recallable entries
// (textindex.Contribution), with N the scope's active entries, df(t) those holding t,
// |e| the entry's terms and avgdl their mean, all read from the statistics the
// triggers of context_entries keep (migration 00018), so a query reads a row per term
// and never counts the scope. tf and |e| come from the postings of the query's terms
// (migration 00029): packed in blocks, and the few written since the last pack one row
// each. The search reads them all in one statement, scores every entry holding a term
// here, and then asks the entries table for the best of them in order, a batch at a
// time, until k pass the filter; a posting whose document is gone (its ordinal no
// entry carries) is skipped there.

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
// rounded to a multiple of textindex.Quantum. textRankSQL computes it with this
// expression for the light terms, from the documents; the postings' scoring with
// textindex.Contribution, its same operations, so that a term of a document weighs the
// same either way.
func bm25Contribution(idf, tf, length string) string {
	return fmt.Sprintf(`(round(%[5]s * %[6]s * %[1]v / (%[6]s + %[2]v * (%[3]v + %[4]v * %[7]s / $12::float8)) * %[8]v) / %[8]v)`,
		textindex.K1+1, textindex.K1, 1-textindex.B, textindex.B, idf, tf, length, 1/textindex.Quantum)
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
	terms := textindex.RecallTerms(q.Text)
	hits := []memory.RecallHit{}
	if len(terms) == 0 {
		return hits, nil
	}
	tag := scopeTag(scope)
	lexemes, prefixes, queries := make([]string, len(terms)), make([]bool, len(terms)), make([]string, len(terms))
	for i, t := range terms {
		lexemes[i], prefixes[i], queries[i] = t.Lexeme, t.Prefix, t.Query(tag)
	}
	tx := boundedQueries{db: s.db, timeout: s.searchTimeout}
	err := func() error {
		var docs, length float64
		var df []float64
		rows, err := tx.Query(ctx, textStatsSQL, scope.TenantID, scope.ProjectID, lexemes, prefixes)
		if err != nil {
			return translate(err)
		}
		if _, err := pgx.CollectExactlyOneRow(rows, func(row pgx.CollectableRow) (struct{}, error) {
			return struct{}{}, row.Scan(&docs, &length, &df)
		}); err != nil {
			return translate(err)
		}
		w := textindex.NewWeights(docs, length, df)
		filter := append([]any{scope.TenantID, scope.ProjectID}, recallFilterArgs(q.RecallFilter)...)
		sc := s.scratch.Get()
		defer s.scratch.Put(sc)
		sc.Allowed = sc.Allowed[:0]
		restricted := false
		if len(q.Tags) > 0 || q.ConversationID != "" {
			rows, err := tx.Query(ctx, passingOrdsSQL(q.AsOfMs != nil), append(slices.Clone(filter), s.fewRows+1)...)
			if err != nil {
				return translate(err)
			}
			sc.Allowed, err = pgx.AppendRows(sc.Allowed, rows, pgx.RowTo[int64])
			if err != nil {
				return translate(err)
			}
			restricted = len(sc.Allowed) <= s.fewRows
			if !restricted {
				sc.Allowed = sc.Allowed[:0]
			}
			slices.Sort(sc.Allowed)
		}
		if restricted && len(sc.Allowed) == 0 {
			return nil
		}
		rank := func(batch []textindex.Candidate, limit int, light textindex.TermSet) ([]memory.RecallHit, error) {
			ords, scores := make([]int64, len(batch)), make([]float64, len(batch))
			for i, c := range batch {
				ords[i], scores[i] = c.Ord, c.Score
			}
			rows, err := tx.Query(ctx, textRankSQL(q.AsOfMs != nil), append(slices.Clone(filter), limit, ords, w.IDF, scores, queries,
				w.AvgDL, w.IDFSum(), light.Lexemes, light.IDF)...)
			if err != nil {
				return nil, translate(err)
			}
			defer rows.Close()
			var found []memory.RecallHit
			for rows.Next() {
				var r entryRow
				var h memory.RecallHit
				if err := rows.Scan(r.dest(&h.Score, &h.Coverage)...); err != nil {
					return nil, translate(err)
				}
				h.Entry = r.entry()
				found = append(found, h)
			}
			return found, translate(rows.Err())
		}
		found, err := textindex.Search(sc, lexemes, prefixes, df, w, q.Limit, restricted, textindex.Lookup[memory.RecallHit]{
			Read:  func(t textindex.TermSet) error { return readPostings(ctx, tx, sc, scope, t.Lexemes, t.Prefixes) },
			Rank:  rank,
			Score: func(h memory.RecallHit) float64 { return h.Score },
		})
		hits = append(hits, found...)
		return err
	}()
	if err != nil {
		return nil, err
	}
	return hits, nil
}

// boundedQueries runs each statement of the text half in a batch of its own, after
// the search timeout's setting: the setting is local to the batch's implicit
// transaction, which ends with it. A statement costs one round trip, where a
// transaction around them all would add its BEGIN, its SET and its COMMIT; the
// statements never shared a snapshot (each of a READ COMMITTED transaction takes
// its own).
type boundedQueries struct {
	db      DBTX
	timeout time.Duration
}

// Query runs sql with args after the setting; the rows close the batch.
func (b boundedQueries) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if b.timeout <= 0 {
		return b.db.Query(ctx, sql, args...)
	}
	batch := &pgx.Batch{}
	batch.Queue(`SELECT set_config('statement_timeout', $1, true)`, strconv.FormatInt(b.timeout.Milliseconds(), 10))
	batch.Queue(sql, args...)
	br := b.db.SendBatch(ctx, batch)
	if _, err := br.Exec(); err != nil {
		_ = br.Close()
		return nil, err
	}
	rows, err := br.Query()
	if err != nil {
		_ = br.Close()
		return nil, err
	}
	return batchRows{Rows: rows, batch: br}, nil
}

// batchRows are the rows of a batch's last statement: closing them closes the batch.
type batchRows struct {
	pgx.Rows
	batch pgx.BatchResults
}

func (r batchRows) Close() {
	r.Rows.Close()
	_ = r.batch.Close()
}

// readPostings reads the postings of the query's terms into sc, each term's sorted by
// ordinal. A block is decoded from the row's own buffer, not copied, when it comes in
// binary (a connection in the simple protocol, which a database URL may ask for, sends
// it as text, decoded by pgx).
func readPostings(ctx context.Context, tx boundedQueries, sc *textindex.Scratch, scope runtime.Scope, lexemes []string, prefixes []bool) error {
	rows, err := tx.Query(ctx, textPostingsSQL, scope.TenantID, scope.ProjectID, lexemes, prefixes)
	if err != nil {
		return translate(err)
	}
	defer rows.Close()
	sc.Reset(len(lexemes))
	var i int64
	var p textindex.Posting
	var text []byte
	dest := []any{&i, nil, &p.Ord, &p.TF, &p.Length, &p.Created}
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
		if data == nil {
			sc.Add(int(i-1), p)
			continue
		}
		// tf is the block's count of postings.
		if err := sc.AddBlock(int(i-1), data, int(p.TF)); err != nil {
			return fmt.Errorf("a block of term %q in %s/%s: %w", lexemes[i-1], scope.TenantID, scope.ProjectID, err)
		}
	}
	if err := rows.Err(); err != nil {
		return translate(err)
	}
	sc.Sorted()
	return nil
}
