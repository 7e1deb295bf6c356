package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
	"github.com/agent-context/agent-context/runtime/cost"
)

// CostStore implements cost.CostStore.
//
// A report over every invocation of a scope reads the running sums the triggers of
// migration 00012 keep (cost_usage by agent and tool, cost_usage_conversations by
// conversation); a report over a part of the time sums that part's invocations. Both
// leave out the invocations of deleted conversations, which wait for their deletion
// job, by subtracting their sums (few, found through their index). Costs are exact
// numeric arithmetic on sums per (group, model) — cost is linear in the token counts,
// so pricing a sum is pricing its invocations — and only groups that can be among the
// topN are priced that way: docs/costs.md, "Ranking without pricing every group".
type CostStore struct {
	db DBTX
}

var _ cost.CostStore = (*CostStore)(nil)

// costGrouping is how one grouping reads its sums: keyed by its invocation column
// (raw, over model_invocations m; a missing tool is the empty string, which no tool
// name is) and, for the whole time, from which running sums.
type costGrouping struct {
	raw string
	// rollup is the cost_usage grouping whose rows it sums, with key the column that
	// names its groups (u the cost_usage row, d its model); "" reads the conversation
	// sums instead.
	rollup, key string
}

var costGroupings = map[string]costGrouping{
	contract.CostsByAgent:        {raw: "m.agent_id", rollup: "agent", key: "u.key"},
	contract.CostsByTool:         {raw: "coalesce(m.tool_name, '')", rollup: "tool", key: "u.key"},
	contract.CostsByModel:        {raw: "m.model", rollup: "agent", key: "d.model"},
	contract.CostsByConversation: {raw: "m.conversation_id"},
}

// The parameters of every report statement: $1 tenant, $2 project; by model number
// (the scope's cost_models, 1-based, see costPrices) $3–$5 the input, output and
// cached input prices per million tokens as exact decimals, $6 the match rank (index
// of pricingRanks) and $7–$9 the same three prices as float8; $10 topN; $11 how many
// groups the ranking looks at (costRankCTEs); for a range, $12 fromMs and $13 toMs and,
// by conversation, $14 and $15 the whole hours in it (costRangeHours) and $16 the
// names of the models (costPrices).
//
// costCommonCTEs are the price table by model number and the scope's deleted
// conversations; costExpr a sum's cost per million tokens (k the sum, m its model).
const (
	costCommonCTEs = `models AS (
	SELECT p.model_no::int AS model_no, p.input_price::numeric AS input_price, p.output_price::numeric AS output_price,
		p.cached_price::numeric AS cached_price, p.rank
	-- $7–$9 are read by position where a statement ranks; named here, every statement
	-- has their types.
	FROM unnest($3::text[], $4::text[], $5::text[], $6::int[], $7::float8[], $8::float8[], $9::float8[]) WITH ORDINALITY
		AS p(input_price, output_price, cached_price, rank, input_f, output_f, cached_f, model_no)
), deleted AS (
	SELECT c.conversation_id FROM conversations c
	WHERE c.tenant_id = $1 AND c.project_id = $2 AND c.deleted_at_ms IS NOT NULL
)`
	costExpr = `(k.input - k.cached) * m.input_price + k.cached * m.cached_price + k.output * m.output_price`
)

// costSumsFrom sums invocations (model_invocations m, filtered by where) by key and
// model, with the columns every sum of a report has.
func costSumsFrom(key, from, where string) string {
	return `SELECT ` + key + ` AS key, m.model, count(*) AS calls, sum(m.input_tokens) AS input,
		sum(m.output_tokens) AS output, sum(m.cached_tokens) AS cached
	FROM ` + from + ` WHERE ` + where + ` GROUP BY 1, 2`
}

// costDeletedFrom is the join that finds the invocations of deleted conversations.
const costDeletedFrom = `deleted d JOIN model_invocations m ON m.tenant_id = $1 AND m.project_id = $2
		AND m.conversation_id = d.conversation_id`

// costRankCTEs pick the candidates of the topN from approx (key, approx: a group's
// cost in float8, computed without a numeric operation per group) and totals (calls):
// docs/costs.md, "Ranking without pricing every group". Every approx is within a
// relative g of its cost, so a group among the topN has approx ≥ threshold, the
// topN-th largest approx × (1−g)/(1+g). The ranking looks at the first $11 groups by
// approx (ties by key, the group without a key last) only, streaming, and says whether
// they were enough (complete): the $11-th is below the threshold, or there are fewer,
// or the topN-th approx is 0 (then every group of positive cost is among the first,
// and those of cost 0, whose approx is 0, come in key order).
const costRankCTEs = `top AS (
	SELECT key, approx FROM approx ORDER BY approx DESC, nullif(key, '') COLLATE "C" NULLS LAST LIMIT $11
), cut AS (
	SELECT c.threshold, c.nth IS NULL OR c.nth = 0 OR (SELECT count(*) FROM top) < $11
		OR (SELECT min(approx) FROM top) < c.threshold AS complete
	FROM (
		SELECT n.nth, coalesce(n.nth, 0) * greatest(1 - m.g, 0) / (1 + m.g) AS threshold
		FROM (SELECT (SELECT approx FROM top ORDER BY approx DESC OFFSET $10 - 1 LIMIT 1) AS nth) n
		CROSS JOIN (SELECT (5 * coalesce(t.calls, 0)::float8 + 8) * float8 '1e-15' AS g FROM totals t) m
	) c
), candidates AS (
	SELECT t.key FROM top t CROSS JOIN cut WHERE t.approx >= cut.threshold
)`

// costGroupColumns are the columns of a priced group (k a (group, model) sum, m its
// model): its sums, cost per million tokens and weakest match.
const costGroupColumns = `sum(k.calls) AS calls, sum(k.input) AS input, sum(k.output) AS output,
		sum(k.cached) AS cached, sum(` + costExpr + `) AS cost_per_mtok, min(m.rank) AS match_rank`

// costTotalsCTE is the totals of a report from the sums by model of every invocation
// it covers (byModel: model_no, calls, input, output, cached) less those of the
// deleted conversations among them (the invocations m of costDeletedFrom that match
// deletedWhere).
func costTotalsCTE(byModel, deletedWhere string) string {
	return `by_model AS (` + byModel + `), gone_models AS (
	SELECT c.model_no, sum(g.calls) AS calls, sum(g.input) AS input, sum(g.output) AS output, sum(g.cached) AS cached
	FROM (` + costSumsFrom("''", costDeletedFrom, deletedWhere) + `) g
	JOIN cost_models c ON c.tenant_id = $1 AND c.project_id = $2 AND c.model = g.model
	GROUP BY 1
), totals AS (
	SELECT sum(k.calls) AS calls, sum(k.input) AS input, sum(k.output) AS output, sum(k.cached) AS cached,
		sum(` + costExpr + `) AS cost_per_mtok
	FROM (SELECT r.model_no, r.calls - coalesce(g.calls, 0) AS calls, r.input - coalesce(g.input, 0) AS input,
			r.output - coalesce(g.output, 0) AS output, r.cached - coalesce(g.cached, 0) AS cached
		FROM by_model r LEFT JOIN gone_models g ON g.model_no = r.model_no) k
	JOIN models m ON m.model_no = k.model_no
)`
}

// costInRange is the condition on an invocation m of a report over a range.
const costInRange = `m.started_at_ms >= $12 AND m.started_at_ms < $13`

// costAgentSumsByModel is the running sums of the whole time by model: the agent sums
// (every invocation has one agent) added up.
const costAgentSumsByModel = `
	SELECT u.model_no, sum(u.calls) AS calls, sum(u.input_tokens) AS input, sum(u.output_tokens) AS output,
		sum(u.cached_tokens) AS cached
	FROM cost_usage u WHERE u.tenant_id = $1 AND u.project_id = $2 AND u.grouping = 'agent'
	GROUP BY 1`

// costRollupTotalsCTE is the totals of the whole time: the running sums by model less
// those of the deleted conversations.
var costRollupTotalsCTE = costTotalsCTE(costAgentSumsByModel, "true")

// costReportSelect answers the topN of the priced candidates (chosen) with the totals
// and whether the ranking was complete (a report with no invocation has no row).
const costReportSelect = `
SELECT nullif(g.key, ''), g.calls::bigint, g.input::bigint, g.output::bigint, g.cached::bigint,
	trim_scale(round(g.input / g.calls, 2))::text, trim_scale(round(g.output / g.calls, 2))::text,
	trim_scale(g.cost_per_mtok * 0.000001)::text, g.match_rank,
	t.calls::bigint, t.input::bigint, t.output::bigint, t.cached::bigint, trim_scale(t.cost_per_mtok * 0.000001)::text,
	c.complete
FROM (SELECT * FROM chosen ORDER BY cost_per_mtok DESC, nullif(key, '') COLLATE "C" NULLS LAST LIMIT $10) g
CROSS JOIN totals t CROSS JOIN cut c
ORDER BY g.cost_per_mtok DESC, nullif(g.key, '') COLLATE "C" NULLS LAST`

// costConversationsSQL is the report by conversation over the whole time: it ranks the
// conversation sums by their float8 copies, read in the key's order from its index and
// summed as they come, then prices the candidates' sums exactly.
var costConversationsSQL = `WITH ` + costCommonCTEs + `, approx AS (
	SELECT * FROM (
		SELECT u.conversation_id AS key, sum(u.uncached_f * $7[u.model_no] + u.cached_f * $9[u.model_no]
			+ u.output_f * $8[u.model_no]) AS approx
		FROM cost_usage_conversations u
		WHERE u.tenant_id = $1 AND u.project_id = $2
		GROUP BY 1
	) a
	WHERE NOT EXISTS (SELECT 1 FROM deleted d WHERE d.conversation_id = a.key)
), ` + costRollupTotalsCTE + `, ` + costRankCTEs + `, chosen AS (
	SELECT c.key, g.* FROM candidates c CROSS JOIN LATERAL (
		SELECT ` + costGroupColumns + `
		FROM (SELECT u.model_no, u.calls, u.input_tokens AS input, u.output_tokens AS output, u.cached_tokens AS cached
			FROM cost_usage_conversations u
			WHERE u.tenant_id = $1 AND u.project_id = $2 AND u.conversation_id = c.key) k
		JOIN models m ON m.model_no = k.model_no
	) g
)` + costReportSelect

// costRollupSQL is the report by agent, tool or model over the whole time (%[1]s the
// grouping's cost_usage rows, %[2]s their key, %[3]s the deleted conversations' sums
// by the grouping's key): few groups, each priced exactly (and ranked by that price).
var costRollupSQL = `WITH ` + costCommonCTEs + `, usage AS (
	SELECT %[2]s AS key, u.model_no, sum(u.calls) AS calls, sum(u.input_tokens) AS input,
		sum(u.output_tokens) AS output, sum(u.cached_tokens) AS cached
	FROM cost_usage u JOIN cost_models d ON d.tenant_id = u.tenant_id AND d.project_id = u.project_id
		AND d.model_no = u.model_no
	WHERE u.tenant_id = $1 AND u.project_id = $2 AND u.grouping = '%[1]s'
	GROUP BY 1, 2
), gone AS (
	SELECT g.key, c.model_no, g.calls, g.input, g.output, g.cached
	FROM (%[3]s) g JOIN cost_models c ON c.tenant_id = $1 AND c.project_id = $2 AND c.model = g.model
), groups AS (
	SELECT k.key, ` + costGroupColumns + `
	FROM (SELECT u.key, u.model_no, u.calls - coalesce(g.calls, 0) AS calls, u.input - coalesce(g.input, 0) AS input,
			u.output - coalesce(g.output, 0) AS output, u.cached - coalesce(g.cached, 0) AS cached
		FROM usage u LEFT JOIN gone g ON g.key = u.key AND g.model_no = u.model_no
		WHERE u.calls > coalesce(g.calls, 0)) k
	JOIN models m ON m.model_no = k.model_no
	GROUP BY k.key
), approx AS (
	SELECT key, cost_per_mtok::float8 AS approx FROM groups
), ` + costRollupTotalsCTE + `, ` + costRankCTEs + `, chosen AS (
	SELECT g.* FROM groups g JOIN candidates c ON c.key = g.key
)` + costReportSelect

// costRangeSQL is the report over a range (%[1]s the key of an invocation, %[2]s the
// deleted conversations' sums in the range): the range's invocations summed by
// (group, model) in integers and, for the ranking, in float8, less those of the
// deleted conversations (numeric operations only where there are some); then ranked
// and priced as above.
var costRangeSQL = `WITH ` + costCommonCTEs + `, usage AS (
	SELECT %[1]s AS key, m.model, count(*) AS calls, sum(m.input_tokens) AS input, sum(m.output_tokens) AS output,
		sum(m.cached_tokens) AS cached, sum((m.input_tokens - m.cached_tokens)::float8) AS uncached_f,
		sum(m.cached_tokens::float8) AS cached_f, sum(m.output_tokens::float8) AS output_f
	FROM model_invocations m
	WHERE m.tenant_id = $1 AND m.project_id = $2 AND ` + costInRange + `
	GROUP BY 1, 2
), gone AS (%[2]s), kept AS MATERIALIZED (
	SELECT u.key, c.model_no, u.calls,
		u.input, u.output, u.cached, u.uncached_f, u.cached_f, u.output_f
	FROM usage u JOIN cost_models c ON c.tenant_id = $1 AND c.project_id = $2 AND c.model = u.model
	WHERE NOT EXISTS (SELECT 1 FROM gone g WHERE g.key = u.key AND g.model = u.model)
	UNION ALL
	SELECT u.key, c.model_no, u.calls - g.calls,
		u.input - g.input, u.output - g.output, u.cached - g.cached, (u.input - g.input - u.cached + g.cached)::float8,
		(u.cached - g.cached)::float8, (u.output - g.output)::float8
	FROM usage u JOIN gone g ON g.key = u.key AND g.model = u.model
	JOIN cost_models c ON c.tenant_id = $1 AND c.project_id = $2 AND c.model = u.model
	WHERE u.calls > g.calls
), approx AS (
	SELECT k.key, sum(k.uncached_f * $7[k.model_no] + k.cached_f * $9[k.model_no]
		+ k.output_f * $8[k.model_no]) AS approx
	FROM kept k GROUP BY 1
), totals AS (
	SELECT sum(k.calls) AS calls, sum(k.input) AS input, sum(k.output) AS output, sum(k.cached) AS cached,
		sum(` + costExpr + `) AS cost_per_mtok
	FROM (SELECT model_no, sum(calls) AS calls, sum(input) AS input, sum(output) AS output, sum(cached) AS cached
		FROM kept GROUP BY 1) k
	JOIN models m ON m.model_no = k.model_no
), ` + costRankCTEs + `, chosen AS (
	SELECT k.key, ` + costGroupColumns + `
	FROM candidates c JOIN kept k ON k.key = c.key JOIN models m ON m.model_no = k.model_no
	GROUP BY k.key
)` + costReportSelect

// costRangeConversationsSQL is the report by conversation over a range of a scope of
// models models. Summing the range's invocations by (conversation, model) would hold
// some 400,000 sums per million invocations, more than work_mem; instead each
// invocation is priced in float8 as it is read and summed by conversation only, the
// deleted conversations skipped: by hash in time order, or, for a large range, as they
// come in conversation order from the conversation index (costRangePlan). Its model's
// prices are found by a CASE over the scope's model names ($16, in the order of their
// numbers), which costs a fraction of a join per invocation, or with more than
// costCaseModels models by its number from cost_models. The totals are the hour sums of
// the range's whole hours and the invocations of its partial hours (costRangeByModel);
// the candidates' sums are read again through their index, and priced exactly.
func costRangeConversationsSQL(models int) string {
	price := func(no string) string {
		return `(m.input_tokens - m.cached_tokens)::float8 * $7[` + no + `] + m.cached_tokens::float8 * $9[` + no +
			`] + m.output_tokens::float8 * $8[` + no + `]`
	}
	cost, from := price("c.model_no"),
		`model_invocations m JOIN cost_models c ON c.tenant_id = $1 AND c.project_id = $2 AND c.model = m.model`
	if pricedByName(models) {
		var b strings.Builder
		b.WriteString("CASE m.model")
		for no := 1; no <= models; no++ {
			fmt.Fprintf(&b, "\n\t\t\tWHEN ($16::text[])[%d] THEN %s", no, price(strconv.Itoa(no)))
		}
		b.WriteString(" END")
		cost, from = b.String(), "model_invocations m"
	}
	return `WITH ` + costCommonCTEs + `, approx AS (
	SELECT * FROM (
		SELECT m.conversation_id AS key, sum(` + cost + `) AS approx
		FROM ` + from + `
		WHERE m.tenant_id = $1 AND m.project_id = $2 AND ` + costInRange + `
		GROUP BY 1
	) a
	WHERE NOT EXISTS (SELECT 1 FROM deleted d WHERE d.conversation_id = a.key)
), ` + costTotalsCTE(costRangeByModel, costInRange) + `, ` + costRankCTEs + `, ` + costRangeChosenCTE + costReportSelect
}

// costCaseModels is the most models a range by conversation finds by a CASE over
// their names: each invocation compares its model's name with half of them on average.
const costCaseModels = 16

// pricedByName says whether a range by conversation over a scope of models models
// finds their prices by name (a scope without invocations has none to name).
func pricedByName(models int) bool {
	return models > 0 && models <= costCaseModels
}

// costRangeByModel is the sums by model of the invocations of a range: the hour sums
// (cost_usage, grouping 'hour', migration 00016) of its whole hours, $14 the start of
// the first and $15 the end of the last (none when $14 ≥ $15), and the invocations of
// its partial hours, [$12, least($14, $13)) and [greatest($15, least($14, $13)), $13):
// the whole range when it lies within one hour.
const costRangeByModel = `
	SELECT s.model_no, sum(s.calls) AS calls, sum(s.input) AS input, sum(s.output) AS output, sum(s.cached) AS cached
	FROM (
		SELECT u.model_no, u.calls, u.input_tokens AS input, u.output_tokens AS output, u.cached_tokens AS cached
		FROM cost_usage u
		WHERE u.tenant_id = $1 AND u.project_id = $2 AND u.grouping = 'hour'
			AND u.key >= cost_usage_hour($14) AND u.key < cost_usage_hour($15)
		UNION ALL
		SELECT c.model_no, 1, m.input_tokens, m.output_tokens, m.cached_tokens
		FROM (SELECT model, input_tokens, output_tokens, cached_tokens FROM model_invocations
				WHERE tenant_id = $1 AND project_id = $2 AND started_at_ms >= $12 AND started_at_ms < least($14, $13)
			UNION ALL
			SELECT model, input_tokens, output_tokens, cached_tokens FROM model_invocations
				WHERE tenant_id = $1 AND project_id = $2 AND started_at_ms >= greatest($15, least($14, $13))
					AND started_at_ms < $13) m
		JOIN cost_models c ON c.tenant_id = $1 AND c.project_id = $2 AND c.model = m.model
	) s
	GROUP BY 1`

// costHourMs is the width of the hour sums' hours.
const costHourMs = 3_600_000

// costRangeHours are the start of the first whole hour of [from, to) and the end of
// the last ($14 and $15 of costRangeByModel).
func costRangeHours(from, to int64) (first, end int64) {
	return from + (costHourMs-from%costHourMs)%costHourMs, to - to%costHourMs
}

// costRangeChosenCTE prices the candidates of a report by conversation over a range:
// each candidate's invocations in the range, read again through its index.
const costRangeChosenCTE = `chosen AS (
	SELECT c.key, g.* FROM candidates c CROSS JOIN LATERAL (
		SELECT ` + costGroupColumns + `
		FROM (SELECT d.model_no, count(*) AS calls, sum(m.input_tokens) AS input, sum(m.output_tokens) AS output,
				sum(m.cached_tokens) AS cached
			FROM model_invocations m JOIN cost_models d ON d.tenant_id = $1 AND d.project_id = $2 AND d.model = m.model
			WHERE m.tenant_id = $1 AND m.project_id = $2 AND m.conversation_id = c.key AND ` + costInRange + `
			GROUP BY 1) k
		JOIN models m ON m.model_no = k.model_no
	) g
)`

// costComplementConversationsSQL is the report by conversation over a range that holds
// most of the scope's invocations: the conversation sums of the whole time less those
// of the invocations outside the range (outside: before it and after it, two ranges of
// model_invocations_by_time, the deleted conversations' left out), ranked in float8
// from the sums' float8 copies in their index. A difference of two float8 token counts
// is exact here, because CostReport takes this path only when the scope's token sums
// are below 2^53, where every sum is an exact float8. The totals are the running sums
// by model less the outside's; the candidates are priced from their invocations in the
// range, as above.
var costComplementConversationsSQL = `WITH ` + costCommonCTEs + `, outside AS MATERIALIZED (
	SELECT m.conversation_id AS key, c.model_no, count(*) AS calls, sum(m.input_tokens) AS input,
		sum(m.output_tokens) AS output, sum(m.cached_tokens) AS cached,
		sum((m.input_tokens - m.cached_tokens)::float8) AS uncached_f, sum(m.cached_tokens::float8) AS cached_f,
		sum(m.output_tokens::float8) AS output_f
	FROM (SELECT conversation_id, model, input_tokens, output_tokens, cached_tokens FROM model_invocations
			WHERE tenant_id = $1 AND project_id = $2 AND started_at_ms < $12
		UNION ALL
		SELECT conversation_id, model, input_tokens, output_tokens, cached_tokens FROM model_invocations
			WHERE tenant_id = $1 AND project_id = $2 AND started_at_ms >= $13) m
	JOIN cost_models c ON c.tenant_id = $1 AND c.project_id = $2 AND c.model = m.model
	WHERE NOT EXISTS (SELECT 1 FROM deleted d WHERE d.conversation_id = m.conversation_id)
	GROUP BY 1, 2
), approx AS (
	SELECT * FROM (
		SELECT u.conversation_id AS key, sum((u.uncached_f - coalesce(o.uncached_f, 0)) * $7[u.model_no]
			+ (u.cached_f - coalesce(o.cached_f, 0)) * $9[u.model_no]
			+ (u.output_f - coalesce(o.output_f, 0)) * $8[u.model_no]) AS approx,
			sum(u.calls - coalesce(o.calls, 0)) AS calls
		FROM cost_usage_conversations u LEFT JOIN outside o ON o.key = u.conversation_id AND o.model_no = u.model_no
		WHERE u.tenant_id = $1 AND u.project_id = $2
		GROUP BY 1
	) a
	WHERE a.calls > 0 AND NOT EXISTS (SELECT 1 FROM deleted d WHERE d.conversation_id = a.key)
), ` + costTotalsCTE(`
	SELECT r.model_no, r.calls - coalesce(o.calls, 0) AS calls, r.input - coalesce(o.input, 0) AS input,
		r.output - coalesce(o.output, 0) AS output, r.cached - coalesce(o.cached, 0) AS cached
	FROM (`+costAgentSumsByModel+`) r
	LEFT JOIN (SELECT model_no, sum(calls) AS calls, sum(input) AS input, sum(output) AS output, sum(cached) AS cached
		FROM outside GROUP BY 1) o ON o.model_no = r.model_no`, "true") + `, ` + costRankCTEs + `, ` + costRangeChosenCTE + costReportSelect

// The match ranks of a report, weakest first: a group reports its weakest.
var pricingRanks = []string{contract.PricingNone, contract.PricingFallback, contract.PricingAlias, contract.PricingExact}

// costWorkMem is the memory the report's aggregation may use before it spills to
// disk, per process: enough for a few hundred thousand (group, model) sums.
const costWorkMem = "32MB"

// costPrices are a scope's models and their prices in the order of their numbers, the
// arrays $3–$9 of the report statements (and $16 of costRangeConversationsSQL).
type costPrices struct {
	models                []string
	input, output, cached []string
	ranks                 []int32
	inputF, outputF       []float64
	cachedF               []float64
}

// priceModels reads the scope's model numbers and prices each model by pricing.
func priceModels(ctx context.Context, tx pgx.Tx, scope runtime.Scope, pricing cost.Pricing) (costPrices, error) {
	rows, err := tx.Query(ctx, `SELECT model_no, model FROM cost_models
		WHERE tenant_id = $1 AND project_id = $2 ORDER BY model_no`, scope.TenantID, scope.ProjectID)
	if err != nil {
		return costPrices{}, translate(err)
	}
	type numbered struct {
		No    int
		Model string
	}
	models, err := pgx.CollectRows(rows, pgx.RowToStructByPos[numbered])
	if err != nil {
		return costPrices{}, translate(err)
	}
	var p costPrices
	for i, m := range models {
		if m.No != i+1 {
			return costPrices{}, fmt.Errorf("cost report: model %q is number %d, not %d", m.Model, m.No, i+1)
		}
		price, match := pricing.PriceOf(m.Model)
		p.models = append(p.models, m.Model)
		p.input, p.output, p.cached = append(p.input, string(price.Input)), append(p.output, string(price.Output)),
			append(p.cached, string(price.CachedInput))
		p.ranks = append(p.ranks, int32(slices.Index(pricingRanks, match)))
		for _, f := range []struct {
			d   contract.Decimal
			dst *[]float64
		}{{price.Input, &p.inputF}, {price.Output, &p.outputF}, {price.CachedInput, &p.cachedF}} {
			v, err := strconv.ParseFloat(string(f.d), 64)
			if err != nil || math.IsInf(v, 0) {
				return costPrices{}, fmt.Errorf("cost report: price %q of %q: %v", f.d, m.Model, err)
			}
			*f.dst = append(*f.dst, v)
		}
	}
	return p, nil
}

// The planner settings of the report statements. costStreamed: the sums are summed in
// the order their index yields them, with no hash table of 100,000 groups, about a
// third faster than the hash aggregate the planner prefers. costOrdered: a range's
// invocations are summed by conversation in the order of the conversation index, with
// neither a hash table nor a sort, and shared with parallel workers (each reading its
// part of the index, so that each conversation's partial sum is mostly one worker's;
// the planner does not foresee that the Gather Merge then passes few rows).
var (
	costHashed   = []setting{{"enable_hashagg", "on"}}
	costStreamed = []setting{{"enable_hashagg", "off"}}
	costOrdered  = []setting{{"enable_hashagg", "off"}, {"enable_sort", "off"}, {"parallel_tuple_cost", "0.01"}}
)

// costStatement is the statement for q, its extra arguments and its settings; a range
// by conversation has none yet: costRangePlan picks it in the report's transaction.
func costStatement(q cost.CostQuery) (statement string, extra []any, settings []setting, err error) {
	g, ok := costGroupings[q.GroupBy]
	if !ok {
		return "", nil, nil, fmt.Errorf("cost report: unknown grouping %q", q.GroupBy)
	}
	if q.FromMs > 0 || q.ToMs != math.MaxInt64 {
		if g.rollup == "" {
			return "", nil, nil, nil
		}
		return fmt.Sprintf(costRangeSQL, g.raw, costSumsFrom(g.raw, costDeletedFrom, costInRange)),
			[]any{q.FromMs, q.ToMs}, costHashed, nil
	}
	if g.rollup == "" {
		return costConversationsSQL, nil, costStreamed, nil
	}
	return fmt.Sprintf(costRollupSQL, g.rollup, g.key, costSumsFrom(g.raw, costDeletedFrom, "true")), nil, costHashed, nil
}

// costRankSlack is how many groups past the topN the ranking looks at first; a report
// whose ranking that many did not settle (many groups within a hair of the cut) runs
// again looking at costRankGrowth times more.
const (
	costRankSlack  = 64
	costRankGrowth = 16
)

// CostReport implements cost.CostStore: the scope's model numbers and the report
// read one snapshot (a model first used in between would otherwise have no price), in
// a transaction that gives the aggregation costWorkMem and plans the statement for its
// arguments.
func (s *CostStore) CostReport(ctx context.Context, scope runtime.Scope, q cost.CostQuery) (contract.CostsResponse, error) {
	statement, extra, settings, err := costStatement(q)
	if err != nil {
		return contract.CostsResponse{}, err
	}
	var report contract.CostsResponse
	err = inSnapshot(ctx, s.db, func(tx pgx.Tx) error {
		// A generic plan of the prepared statement ran several times slower after its
		// fifth use.
		if err := setLocal(ctx, tx, setting{"work_mem", costWorkMem}, customPlans); err != nil {
			return err
		}
		p, err := priceModels(ctx, tx, scope, q.Pricing)
		if err != nil {
			return err
		}
		if statement == "" {
			if statement, extra, settings, err = costRangePlan(ctx, tx, scope, q, p); err != nil {
				return err
			}
		}
		if err := setLocal(ctx, tx, settings...); err != nil {
			return err
		}
		for look := int64(q.TopN + costRankSlack); ; look *= costRankGrowth {
			args := append([]any{scope.TenantID, scope.ProjectID, p.input, p.output, p.cached, p.ranks,
				p.inputF, p.outputF, p.cachedF, q.TopN, look}, extra...)
			var complete bool
			report, complete, err = readCostReport(ctx, tx, statement, args)
			if err != nil || complete {
				return err
			}
		}
	})
	if err != nil {
		return contract.CostsResponse{}, err
	}
	return report, nil
}

// The shares of a scope's invocations from which a range by conversation is read in
// conversation order, and from the running sums less the invocations outside it
// (docs/costs.md, "Ranges by conversation", where they were measured).
const (
	costOrderedShare    = 0.2
	costComplementShare = 0.99
)

// costRangePlan is how a report by conversation over q's range reads it (statement,
// extra arguments, settings), chosen by the share of the scope's invocations the
// planner estimates the range holds, from the statistics of started_at_ms (a planning
// of two statements, no read of the invocations): the invocations in it by hash in
// time order, or in conversation order, or the running sums less the invocations
// outside it. The last only while every token sum of the scope is below 2^53, so that
// the difference of two float8 sums is exact.
func costRangePlan(ctx context.Context, tx pgx.Tx, scope runtime.Scope, q cost.CostQuery, p costPrices) (string, []any, []setting, error) {
	const invocations = `EXPLAIN (FORMAT JSON) SELECT 1 FROM model_invocations m WHERE m.tenant_id = $1 AND m.project_id = $2`
	inside, err := estimatedRows(ctx, tx, invocations+` AND m.started_at_ms >= $3 AND m.started_at_ms < $4`,
		scope.TenantID, scope.ProjectID, q.FromMs, q.ToMs)
	if err != nil {
		return "", nil, nil, err
	}
	all, err := estimatedRows(ctx, tx, invocations, scope.TenantID, scope.ProjectID)
	if err != nil {
		return "", nil, nil, err
	}
	if inside > costComplementShare*all {
		var exact bool
		if err := tx.QueryRow(ctx, `SELECT coalesce(sum(input_tokens) < 2 ^ 53::numeric AND sum(output_tokens) < 2 ^ 53::numeric, true)
			FROM cost_usage WHERE tenant_id = $1 AND project_id = $2 AND grouping = 'agent'`,
			scope.TenantID, scope.ProjectID).Scan(&exact); err != nil {
			return "", nil, nil, translate(err)
		}
		if exact {
			return costComplementConversationsSQL, []any{q.FromMs, q.ToMs}, costStreamed, nil
		}
	}
	first, end := costRangeHours(q.FromMs, q.ToMs)
	extra := []any{q.FromMs, q.ToMs, first, end}
	if pricedByName(len(p.models)) {
		extra = append(extra, p.models)
	}
	settings := costHashed
	if inside >= costOrderedShare*all {
		settings = costOrdered
	}
	return costRangeConversationsSQL(len(p.models)), extra, settings, nil
}

// estimatedRows is the planner's estimate of the rows of explain, an EXPLAIN (FORMAT JSON).
func estimatedRows(ctx context.Context, tx pgx.Tx, explain string, args ...any) (float64, error) {
	var text string
	if err := tx.QueryRow(ctx, explain, args...).Scan(&text); err != nil {
		return 0, translate(err)
	}
	var plans []struct {
		Plan struct {
			Rows float64 `json:"Plan Rows"`
		}
	}
	if err := json.Unmarshal([]byte(text), &plans); err != nil || len(plans) != 1 {
		return 0, fmt.Errorf("cost report: plan %q: %v", text, err)
	}
	return plans[0].Plan.Rows, nil
}

// readCostReport runs a report statement and says whether its ranking was complete.
func readCostReport(ctx context.Context, tx pgx.Tx, statement string, args []any) (contract.CostsResponse, bool, error) {
	report := contract.CostsResponse{Totals: contract.CostTotals{CostUSD: "0"}, Groups: []contract.CostGroup{}}
	rows, err := tx.Query(ctx, statement, args...)
	if err != nil {
		return report, false, translate(err)
	}
	defer rows.Close()
	complete := true
	for rows.Next() {
		var g contract.CostGroup
		var rank int
		t := &report.Totals
		if err := rows.Scan(&g.Key, &g.Calls, &g.InputTokens, &g.OutputTokens, &g.CachedTokens,
			&g.AvgInputTokens, &g.AvgOutputTokens, &g.CostUSD, &rank,
			&t.Calls, &t.InputTokens, &t.OutputTokens, &t.CachedTokens, &t.CostUSD, &complete); err != nil {
			return report, false, translate(err)
		}
		g.PricingMatch = pricingRanks[rank]
		report.Groups = append(report.Groups, g)
	}
	return report, complete, translate(rows.Err())
}
