package postgres

import (
	"context"
	"fmt"
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
// on (kinds, tags, conversation, now); live conversations only.
func recallFilter(alias string, n int) string {
	return fmt.Sprintf(`(cardinality($%[2]d::text[]) = 0 OR %[1]s.kind = ANY($%[2]d::text[]))
		AND %[1]s.tags @> $%[3]d::text[]
		AND ($%[4]d::text IS NULL OR %[1]s.conversation_id = $%[4]d::text)
		AND (%[1]s.expires_at_ms IS NULL OR %[1]s.expires_at_ms > $%[5]d)
		AND `, alias, n, n+1, n+2, n+3) + liveConversation(alias)
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
	return []any{kinds, tags, conversation, f.NowMs}
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
func vectorSQL(t vectorTable, exact bool) string {
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
		WHERE e.status = 'active'
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
			rows, err := tx.Query(ctx, vectorSQL(t, exact), args...)
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

// The text half of recall. A keyword query (one or two words) finds every entry
// containing any of them. A longer one, a question, shares its common words ("the",
// "does") with most entries, and an entry found by those alone, or by one incidental
// word, is noise that, fused with the vector half, pushes the vector half's answers
// down. So its 8 longest words are weighed first, in the caller's scope and
// language-neutrally: a word is common when more than 2 and more than a tenth of the
// scope's newest termSample active entries contain it. Candidates are the entries
// containing at least two of the uncommon words, or one uncommon word with a digit
// (an identifier, a code, a version: OPS-4711, E1043); a question with no such match
// finds nothing by text. Candidates are ranked by every word of the query. The
// weighing reads the sample once (through context_entries_by_created), whatever the
// size of the scope.
const (
	termSample       = 500
	maxWeighedTerms  = 8
	maxKeywordTerms  = 2
	rareTermEntries  = 2
	commonTermFactor = 10
)

// termStatsSQL counts the sample of the scope's newest active entries ($4 at most)
// and, for each term of $3 in order, the sampled entries that contain it.
const termStatsSQL = `
	WITH sample AS MATERIALIZED (
	    SELECT e.search FROM context_entries e
	    WHERE e.tenant_id = $1 AND e.project_id = $2 AND e.status = 'active'
	    ORDER BY e.created_at_ms DESC
	    LIMIT $4
	)
	SELECT (SELECT count(*) FROM sample),
	       ARRAY(SELECT (SELECT count(*) FROM sample s WHERE s.search @@ t.q)
	             FROM unnest($3::text[]::tsquery[]) WITH ORDINALITY AS t(q, ord) ORDER BY t.ord)`

// questionMatch returns the match query of a question's terms: any two of its
// uncommon weighed terms, or any uncommon one with a digit; "" when there is none.
func questionMatch(ctx context.Context, tx DBTX, scope runtime.Scope, terms []string) (string, error) {
	tag := len(quoteLexeme(scopeTag(scope))) - 1 // the opening quote and the tag
	weighed := terms[:min(len(terms), maxWeighedTerms)]
	var sample int64
	var counts []int64
	if err := tx.QueryRow(ctx, termStatsSQL, scope.TenantID, scope.ProjectID, weighed, termSample).
		Scan(&sample, &counts); err != nil {
		return "", translate(err)
	}
	var uncommon, identifiers []string
	for i, n := range counts {
		if n > rareTermEntries && n*commonTermFactor > sample {
			continue
		}
		uncommon = append(uncommon, weighed[i])
		if strings.ContainsAny(weighed[i][tag:], "0123456789") {
			identifiers = append(identifiers, weighed[i])
		}
	}
	var parts []string
	if len(uncommon) >= 2 {
		parts = append(parts, pairsOf(uncommon))
	}
	if len(identifiers) > 0 {
		parts = append(parts, anyTerm(identifiers))
	}
	return strings.Join(parts, " | "), nil
}

// textSQL is the text half: active entries matching the match query ($3) through
// context_entries_search, ranked by ts_rank of the rank query ($9) normalized by
// document length (flag 1), so a short entry about the words outranks a long one
// that mentions them once.
var textSQL = `
	SELECT ` + entryColumns + `, ts_rank(e.search, $9::tsquery, 1)::float8 AS score
	FROM context_entries e
	WHERE e.tenant_id = $1 AND e.project_id = $2 AND e.status = 'active' AND e.search @@ $3::tsquery
	  AND ` + recallFilter("e", 4) + `
	ORDER BY score DESC, e.created_at_ms DESC, e.entry_id
	LIMIT $8`

// TextSearch implements memory.RecallStore.
func (s *RecallStore) TextSearch(ctx context.Context, scope runtime.Scope, q memory.TextRecall) ([]memory.RecallHit, error) {
	terms := recallTerms(scopeTag(scope), q.Text)
	hits := []memory.RecallHit{}
	if len(terms) == 0 {
		return hits, nil
	}
	err := inTx(ctx, s.db, func(tx pgx.Tx) error {
		if err := setLocalTimeout(ctx, tx, s.searchTimeout); err != nil {
			return err
		}
		match := anyTerm(terms)
		if len(terms) > maxKeywordTerms {
			var err error
			if match, err = questionMatch(ctx, tx, scope, terms); err != nil || match == "" {
				return err
			}
		}
		args := append([]any{scope.TenantID, scope.ProjectID, match}, append(recallFilterArgs(q.RecallFilter), q.Limit, anyTerm(terms))...)
		rows, err := tx.Query(ctx, textSQL, args...)
		if err != nil {
			return translate(err)
		}
		hits, err = collectHits(rows, func(rank float64) float64 { return float4Score(float32(rank)) })
		return err
	})
	if err != nil {
		return nil, err
	}
	return hits, nil
}
