package postgres

import (
	"context"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
)

// CostStore implements runtime.CostStore.
type CostStore struct {
	db DBTX
}

var _ runtime.CostStore = (*CostStore)(nil)

// costGroupColumns is the column of model_invocations each grouping groups by.
var costGroupColumns = map[string]string{
	contract.CostsByAgent:        "m.agent_id",
	contract.CostsByTool:         "coalesce(m.tool_name, '')",
	contract.CostsByModel:        "m.model",
	contract.CostsByConversation: "m.conversation_id",
}

// costReportSQL sums the invocations of the range by the grouping's column (%[1]s)
// and model in integers first, without a join: the one pass over every row is as
// cheap as an aggregation can be. The invocations of deleted conversations, few and
// found through their index, are summed the same way and subtracted. Only then are the
// (group, model) sums priced, in numeric, which is exact: a price per million tokens
// times the token sums, the group's cost that sum times 0.000001. A model without an
// entry pays the fallback price ($10–$12; 0 without one) with match rank $13. The
// totals are window sums over every group, taken before the topN cut. A missing tool
// is the empty string while summing (no tool name is empty), null in the answer.
const costReportSQL = `
WITH usage AS (
	SELECT %[1]s AS key, m.model, count(*) AS calls, sum(m.input_tokens) AS input,
		sum(m.output_tokens) AS output, sum(m.cached_tokens) AS cached
	FROM model_invocations m
	WHERE m.tenant_id = $1 AND m.project_id = $2 AND m.started_at_ms >= $3 AND m.started_at_ms < $4
	GROUP BY 1, 2
), deleted AS (
	SELECT %[1]s AS key, m.model, count(*) AS calls, sum(m.input_tokens) AS input,
		sum(m.output_tokens) AS output, sum(m.cached_tokens) AS cached
	FROM conversations c JOIN model_invocations m ON m.tenant_id = c.tenant_id AND m.project_id = c.project_id
		AND m.conversation_id = c.conversation_id
	WHERE c.tenant_id = $1 AND c.project_id = $2 AND c.deleted_at_ms IS NOT NULL
		AND m.started_at_ms >= $3 AND m.started_at_ms < $4
	GROUP BY 1, 2
), kept AS (
	SELECT u.key, u.model, u.calls - coalesce(d.calls, 0) AS calls, u.input - coalesce(d.input, 0) AS input,
		u.output - coalesce(d.output, 0) AS output, u.cached - coalesce(d.cached, 0) AS cached
	FROM usage u LEFT JOIN deleted d ON d.key = u.key AND d.model = u.model
	WHERE u.calls > coalesce(d.calls, 0)
), prices AS (
	SELECT * FROM unnest($5::text[], $6::int[], $7::text[]::numeric[], $8::text[]::numeric[], $9::text[]::numeric[])
		AS p(model, rank, input_price, output_price, cached_price)
), fallback AS (
	SELECT coalesce($10::text::numeric, 0) AS input_price, coalesce($11::text::numeric, 0) AS output_price,
		coalesce($12::text::numeric, 0) AS cached_price, $13::int AS rank
), groups AS (
	SELECT k.key, sum(k.calls) AS calls, sum(k.input) AS input, sum(k.output) AS output, sum(k.cached) AS cached,
		sum((k.input - k.cached) * coalesce(p.input_price, f.input_price)
			+ k.cached * coalesce(p.cached_price, f.cached_price)
			+ k.output * coalesce(p.output_price, f.output_price)) AS cost_per_mtok,
		min(coalesce(p.rank, f.rank)) AS match_rank
	FROM kept k CROSS JOIN fallback f LEFT JOIN prices p ON p.model = k.model
	GROUP BY k.key
)
SELECT nullif(key, ''), calls::bigint, input::bigint, output::bigint, cached::bigint,
	trim_scale(round(input / calls, 2))::text, trim_scale(round(output / calls, 2))::text,
	trim_scale(cost_per_mtok * 0.000001)::text, match_rank,
	(sum(calls) OVER ())::bigint, (sum(input) OVER ())::bigint, (sum(output) OVER ())::bigint,
	(sum(cached) OVER ())::bigint, trim_scale(sum(cost_per_mtok) OVER () * 0.000001)::text
FROM groups
ORDER BY cost_per_mtok DESC, key COLLATE "C" ASC NULLS LAST
LIMIT $14`

// The match ranks of costReportSQL, weakest first: a group reports its weakest.
var pricingRanks = []string{contract.PricingNone, contract.PricingFallback, contract.PricingAlias, contract.PricingExact}

// costWorkMem is the memory the report's aggregation may use before it spills to
// disk, per process: enough for a few hundred thousand (group, model) sums.
const costWorkMem = "32MB"

// CostReport implements runtime.CostStore: one statement, in a transaction that gives
// its aggregation costWorkMem and plans it for its parameters.
func (s *CostStore) CostReport(ctx context.Context, scope runtime.Scope, q runtime.CostQuery) (contract.CostsResponse, error) {
	column, ok := costGroupColumns[q.GroupBy]
	if !ok {
		return contract.CostsResponse{}, fmt.Errorf("cost report: unknown grouping %q", q.GroupBy)
	}
	n := len(q.Pricing.Entries)
	models, ranks := make([]string, n), make([]int32, n)
	input, output, cached := make([]string, n), make([]string, n), make([]string, n)
	for i, e := range q.Pricing.Entries {
		models[i], ranks[i] = e.Model, int32(slices.Index(pricingRanks, e.Match))
		input[i], output[i], cached[i] = string(e.Input), string(e.Output), string(e.CachedInput)
	}
	var fallbackInput, fallbackOutput, fallbackCached *string
	fallbackRank := slices.Index(pricingRanks, contract.PricingNone)
	if f := q.Pricing.Fallback; f != nil {
		in, out, c := string(f.Input), string(f.Output), string(f.CachedInput)
		fallbackInput, fallbackOutput, fallbackCached = &in, &out, &c
		fallbackRank = slices.Index(pricingRanks, contract.PricingFallback)
	}
	report := contract.CostsResponse{Totals: contract.CostTotals{CostUSD: "0"}, Groups: []contract.CostGroup{}}
	err := inTx(ctx, s.db, func(tx pgx.Tx) error {
		// A plan for the range and prices at hand: a generic plan of the prepared
		// statement ran several times slower after its fifth use.
		if _, err := tx.Exec(ctx, `SELECT set_config('work_mem', $1, true),
			set_config('plan_cache_mode', 'force_custom_plan', true)`, costWorkMem); err != nil {
			return translate(err)
		}
		rows, err := tx.Query(ctx, fmt.Sprintf(costReportSQL, column),
			scope.TenantID, scope.ProjectID, q.FromMs, q.ToMs, models, ranks, input, output, cached,
			fallbackInput, fallbackOutput, fallbackCached, fallbackRank, q.TopN)
		if err != nil {
			return translate(err)
		}
		defer rows.Close()
		for rows.Next() {
			var g contract.CostGroup
			var rank int
			t := &report.Totals
			if err := rows.Scan(&g.Key, &g.Calls, &g.InputTokens, &g.OutputTokens, &g.CachedTokens,
				&g.AvgInputTokens, &g.AvgOutputTokens, &g.CostUSD, &rank,
				&t.Calls, &t.InputTokens, &t.OutputTokens, &t.CachedTokens, &t.CostUSD); err != nil {
				return translate(err)
			}
			g.PricingMatch = pricingRanks[rank]
			report.Groups = append(report.Groups, g)
		}
		return translate(rows.Err())
	})
	if err != nil {
		return contract.CostsResponse{}, err
	}
	return report, nil
}
