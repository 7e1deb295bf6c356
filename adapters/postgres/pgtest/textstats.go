package pgtest

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
)

// RequireTextStatistics fails tb unless the BM25 statistics of the text index are a
// recount of the active entries' documents: per scope their number and total length,
// per term the entries holding it, the shards added up, with no row left for a term
// no active entry holds (a term's shards summing to zero count as a difference). step
// names the write the check follows.
func RequireTextStatistics(tb testing.TB, pool *pgxpool.Pool, step string) {
	tb.Helper()
	for name, pair := range map[string][2]string{
		"scope statistics": {`
			SELECT tenant_id, project_id, sum(docs), sum(length) FROM entry_text_stats
			GROUP BY 1, 2 HAVING sum(docs) <> 0 OR sum(length) <> 0`, `
			SELECT tenant_id, project_id, count(*), sum(search_length) FROM context_entries
			WHERE status = 'active' GROUP BY 1, 2`},
		"term statistics": {`
			SELECT tenant_id, project_id, term, sum(docs) FROM entry_text_terms GROUP BY 1, 2, 3`, `
			SELECT e.tenant_id, e.project_id, substr(l.lexeme, 14), count(*)
			FROM context_entries e CROSS JOIN LATERAL unnest(e.search) AS l(lexeme, positions, weights)
			WHERE e.status = 'active' GROUP BY 1, 2, 3`},
	} {
		var diff, rows int
		if err := pool.QueryRow(context.Background(), `SELECT count(*), (SELECT count(*) FROM (`+pair[1]+`) d) FROM (
			(`+pair[0]+` EXCEPT ALL `+pair[1]+`) UNION ALL (`+pair[1]+` EXCEPT ALL `+pair[0]+`)) d`).Scan(&diff, &rows); err != nil {
			tb.Fatalf("%s after %s: %v", name, step, err)
		}
		if diff != 0 {
			tb.Fatalf("%s after %s: %d rows differ from a recount", name, step, diff)
		}
		if rows == 0 {
			tb.Fatalf("%s after %s: the check compares nothing", name, step)
		}
	}
}
