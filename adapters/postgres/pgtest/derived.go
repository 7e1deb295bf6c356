package pgtest

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
)

// RecountText rebuilds the text index of every scope from context_entries, for a
// test that loaded or changed entries in SQL past the store (which keeps the index
// as it writes): the BM25 statistics recounted (in shard 0), every entry's postings
// pending again under its ordinal, no block and nothing dropped.
func RecountText(tb testing.TB, pool *pgxpool.Pool) {
	tb.Helper()
	recount(tb, pool, "the text index", `
		DELETE FROM entry_text_stats;
		DELETE FROM entry_text_terms;
		DELETE FROM entry_text_postings;
		DELETE FROM entry_text_dropped;
		DELETE FROM entry_text_blocks;
		INSERT INTO entry_text_stats (tenant_id, project_id, shard, docs, length)
		SELECT tenant_id, project_id, 0, count(*), sum(search_length)
		FROM context_entries WHERE status = 'active' GROUP BY 1, 2;
		INSERT INTO entry_text_terms (tenant_id, project_id, term, shard, docs)
		SELECT e.tenant_id, e.project_id, substr(l.lexeme, 14), 0, count(*)
		FROM context_entries e CROSS JOIN LATERAL unnest(e.search) AS l(lexeme, positions, weights)
		WHERE e.status = 'active' GROUP BY 1, 2, 3;
		INSERT INTO entry_text_postings (tenant_id, project_id, term, ord, tf, length, created_at_ms)
		SELECT e.tenant_id, e.project_id, substr(l.lexeme, 14), e.text_ord, coalesce(cardinality(l.positions), 0),
		       e.search_length, e.created_at_ms
		FROM context_entries e CROSS JOIN LATERAL unnest(e.search) AS l(lexeme, positions, weights)`)
}

// RecountCosts rebuilds the cost report's running sums from model_invocations, for a
// test that loaded invocations in SQL past the store (which keeps the sums as it
// saves): the models new to a scope numbered after its last, the sums recounted.
func RecountCosts(tb testing.TB, pool *pgxpool.Pool) {
	tb.Helper()
	recount(tb, pool, "the cost sums", `
		INSERT INTO cost_models (tenant_id, project_id, model, model_no)
		SELECT n.tenant_id, n.project_id, n.model,
		    coalesce((SELECT max(m.model_no) FROM cost_models m
		              WHERE m.tenant_id = n.tenant_id AND m.project_id = n.project_id), 0)
		        + row_number() OVER (PARTITION BY n.tenant_id, n.project_id ORDER BY n.model)
		FROM (SELECT DISTINCT tenant_id, project_id, model FROM model_invocations) n
		WHERE NOT EXISTS (SELECT 1 FROM cost_models m
		                  WHERE m.tenant_id = n.tenant_id AND m.project_id = n.project_id AND m.model = n.model);
		DELETE FROM cost_usage;
		DELETE FROM cost_usage_conversations;
		INSERT INTO cost_usage_conversations
		    (tenant_id, project_id, conversation_id, model_no, calls, input_tokens, output_tokens, cached_tokens)
		SELECT i.tenant_id, i.project_id, i.conversation_id, m.model_no, count(*),
		    sum(i.input_tokens), sum(i.output_tokens), sum(i.cached_tokens)
		FROM model_invocations i
		JOIN cost_models m ON m.tenant_id = i.tenant_id AND m.project_id = i.project_id AND m.model = i.model
		GROUP BY 1, 2, 3, 4;
		INSERT INTO cost_usage
		    (tenant_id, project_id, grouping, key, model_no, shard, calls, input_tokens, output_tokens, cached_tokens)
		SELECT i.tenant_id, i.project_id, g.grouping, g.key, m.model_no, cost_usage_shard(i.invocation_id), count(*),
		    sum(i.input_tokens), sum(i.output_tokens), sum(i.cached_tokens)
		FROM model_invocations i
		JOIN cost_models m ON m.tenant_id = i.tenant_id AND m.project_id = i.project_id AND m.model = i.model
		CROSS JOIN LATERAL (VALUES ('agent', i.agent_id), ('tool', coalesce(i.tool_name, '')),
		    ('hour', cost_usage_hour(i.started_at_ms))) g(grouping, key)
		GROUP BY 1, 2, 3, 4, 5, 6`)
}

// recount runs the statements in one transaction, failing tb on an error.
func recount(tb testing.TB, pool *pgxpool.Pool, what, statements string) {
	tb.Helper()
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	if err != nil {
		tb.Fatalf("recount %s: %v", what, err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, statements); err != nil {
		tb.Fatalf("recount %s: %v", what, err)
	}
	if err := tx.Commit(ctx); err != nil {
		tb.Fatalf("recount %s: %v", what, err)
	}
}
