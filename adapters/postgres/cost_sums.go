package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/agent-context/agent-context/runtime"
)

// The cost report's running sums (docs/costs.md, "Running sums"; migrations 00012,
// 00013, 00016) are kept by the statements that write model_invocations, in their
// transaction, not by triggers (Citus distributes no table with triggers): a save
// adds its invocation, the deletion of a conversation takes off the invocations each
// of its steps deleted. No statement updates an invocation: they are immutable, and
// the sums count them as saved.
//
// cost_models numbers the models of a scope 1, 2, 3, … in the order they first
// appear; cost_usage sums the invocations by agent, tool and hour per model, each in
// 16 shards (a digest of the invocation ID, cost_usage_shard, so that the deletion of
// an invocation finds its shard again); cost_usage_conversations sums them by
// conversation and model. Every statement writes its rows in key order, so that two
// writers touching the same rows lock them in the same order and cannot deadlock. The
// rows to lock are read by their primary key from the invocations' keys (LATERAL
// subqueries): the scope is a constant here, and a join would be free to walk every
// sum of the scope.

// costChange is the invocations a statement inserted or deleted in a scope, as the
// sums take them.
type costChange struct {
	ids, conversations, agents, models []string
	tools                              []*string
	started, input, output, cached     []int64
}

func (c *costChange) add(id, conversation, agent string, tool *string, model string, started, input, output, cached int64) {
	c.ids, c.conversations, c.agents = append(c.ids, id), append(c.conversations, conversation), append(c.agents, agent)
	c.tools, c.models, c.started = append(c.tools, tool), append(c.models, model), append(c.started, started)
	c.input, c.output, c.cached = append(c.input, input), append(c.output, output), append(c.cached, cached)
}

func (c *costChange) args(scope runtime.Scope) []any {
	return []any{scope.TenantID, scope.ProjectID, c.ids, c.conversations, c.agents, c.tools, c.models, c.started,
		c.input, c.output, c.cached}
}

// costDeltaRows are the invocations of a costChange (args) as rows d.
const costDeltaRows = `unnest($3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::bigint[], $9::bigint[],
	$10::bigint[], $11::bigint[]) AS d(invocation_id, conversation_id, agent_id, tool_name, model, started_at_ms,
	input_tokens, output_tokens, cached_tokens)`

// costGroups are an invocation d's agent, tool and hour sums, as rows g.
const costGroups = `(VALUES ('agent', d.agent_id), ('tool', coalesce(d.tool_name, '')),
	('hour', cost_usage_hour(d.started_at_ms))) g(grouping, key)`

const (
	// costNewModelLockSQL takes the scope's lock of model numbers when one of the
	// models ($3) has none yet, so that two first uses cannot take one number: the
	// service writes in READ COMMITTED, where the numbering statement, run once the
	// lock is granted, sees the numbers of the transactions that held it before.
	costNewModelLockSQL = `
		SELECT pg_advisory_xact_lock(1129270348, hashtext($1 || '/' || $2))
		WHERE EXISTS (SELECT 1 FROM unnest($3::text[]) AS d(model)
		              WHERE NOT EXISTS (SELECT 1 FROM cost_models m
		                                WHERE m.tenant_id = $1 AND m.project_id = $2 AND m.model = d.model))`
	// costNumberModelsSQL numbers the models new to the scope after its last number.
	costNumberModelsSQL = `
		INSERT INTO cost_models (tenant_id, project_id, model, model_no)
		SELECT $1, $2, n.model,
		    coalesce((SELECT max(m.model_no) FROM cost_models m WHERE m.tenant_id = $1 AND m.project_id = $2), 0)
		        + row_number() OVER (ORDER BY n.model)
		FROM (SELECT DISTINCT model FROM unnest($3::text[]) AS d(model)) n
		WHERE NOT EXISTS (SELECT 1 FROM cost_models m WHERE m.tenant_id = $1 AND m.project_id = $2 AND m.model = n.model)`
	// costAddConversationsSQL adds the invocations to their conversation sums.
	costAddConversationsSQL = `
		INSERT INTO cost_usage_conversations AS u
		    (tenant_id, project_id, conversation_id, model_no, calls, input_tokens, output_tokens, cached_tokens)
		SELECT $1, $2, d.conversation_id, m.model_no, count(*), sum(d.input_tokens), sum(d.output_tokens),
		    sum(d.cached_tokens)
		FROM ` + costDeltaRows + `
		JOIN cost_models m ON m.tenant_id = $1 AND m.project_id = $2 AND m.model = d.model
		GROUP BY 3, 4
		ORDER BY 3, 4
		ON CONFLICT (tenant_id, project_id, conversation_id, model_no) DO UPDATE
		SET calls = u.calls + excluded.calls, input_tokens = u.input_tokens + excluded.input_tokens,
		    output_tokens = u.output_tokens + excluded.output_tokens, cached_tokens = u.cached_tokens + excluded.cached_tokens`
	// costAddGroupsSQL adds them to their agent, tool and hour sums.
	costAddGroupsSQL = `
		INSERT INTO cost_usage AS u
		    (tenant_id, project_id, grouping, key, model_no, shard, calls, input_tokens, output_tokens, cached_tokens)
		SELECT $1, $2, g.grouping, g.key, m.model_no, cost_usage_shard(d.invocation_id), count(*),
		    sum(d.input_tokens), sum(d.output_tokens), sum(d.cached_tokens)
		FROM ` + costDeltaRows + `
		JOIN cost_models m ON m.tenant_id = $1 AND m.project_id = $2 AND m.model = d.model
		CROSS JOIN LATERAL ` + costGroups + `
		GROUP BY 3, 4, 5, 6
		ORDER BY 3, 4, 5, 6
		ON CONFLICT (tenant_id, project_id, grouping, key, model_no, shard) DO UPDATE
		SET calls = u.calls + excluded.calls, input_tokens = u.input_tokens + excluded.input_tokens,
		    output_tokens = u.output_tokens + excluded.output_tokens, cached_tokens = u.cached_tokens + excluded.cached_tokens`

	// costLockConversationsSQL locks the conversation sums of deleted invocations in
	// key order, before they are subtracted.
	costLockConversationsSQL = `
		SELECT 1 FROM (SELECT DISTINCT d.conversation_id, m.model_no FROM ` + costDeltaRows + `
		               JOIN cost_models m ON m.tenant_id = $1 AND m.project_id = $2 AND m.model = d.model
		               ORDER BY 1, 2) k
		CROSS JOIN LATERAL (SELECT 1 FROM cost_usage_conversations u
		                    WHERE u.tenant_id = $1 AND u.project_id = $2 AND u.conversation_id = k.conversation_id
		                      AND u.model_no = k.model_no
		                    FOR UPDATE) u`
	// costSubtractConversationsSQL subtracts them, and returns how many sums it
	// changed and how many it should have (a sum not found would mean the sums had
	// drifted from the invocations).
	costSubtractConversationsSQL = `
		WITH k AS (
		    SELECT d.conversation_id, m.model_no, count(*) AS calls, sum(d.input_tokens) AS input,
		        sum(d.output_tokens) AS output, sum(d.cached_tokens) AS cached
		    FROM ` + costDeltaRows + `
		    LEFT JOIN cost_models m ON m.tenant_id = $1 AND m.project_id = $2 AND m.model = d.model
		    GROUP BY d.conversation_id, d.model, m.model_no
		), changed AS (
		    UPDATE cost_usage_conversations u
		    SET calls = u.calls - k.calls, input_tokens = u.input_tokens - k.input,
		        output_tokens = u.output_tokens - k.output, cached_tokens = u.cached_tokens - k.cached
		    FROM k
		    WHERE u.tenant_id = $1 AND u.project_id = $2 AND u.conversation_id = k.conversation_id
		      AND u.model_no = k.model_no
		    RETURNING 1
		)
		SELECT (SELECT count(*) FROM changed), (SELECT count(*) FROM k)`
	// costDropConversationsSQL removes the sums of the conversations $3 whose last
	// invocation went.
	costDropConversationsSQL = `
		DELETE FROM cost_usage_conversations u
		WHERE u.tenant_id = $1 AND u.project_id = $2 AND u.conversation_id = ANY($3::text[]) AND u.calls = 0`
	// costLockGroupsSQL locks the agent, tool and hour sums of deleted invocations in
	// key order.
	costLockGroupsSQL = `
		SELECT 1 FROM (SELECT DISTINCT g.grouping, g.key, m.model_no, cost_usage_shard(d.invocation_id) AS shard
		               FROM ` + costDeltaRows + `
		               JOIN cost_models m ON m.tenant_id = $1 AND m.project_id = $2 AND m.model = d.model
		               CROSS JOIN LATERAL ` + costGroups + `
		               ORDER BY 1, 2, 3, 4) k
		CROSS JOIN LATERAL (SELECT 1 FROM cost_usage u
		                    WHERE u.tenant_id = $1 AND u.project_id = $2 AND u.grouping = k.grouping AND u.key = k.key
		                      AND u.model_no = k.model_no AND u.shard = k.shard
		                    FOR UPDATE) u`
	// costSubtractGroupsSQL subtracts them, counting as costSubtractConversationsSQL.
	costSubtractGroupsSQL = `
		WITH k AS (
		    SELECT g.grouping, g.key, m.model_no, cost_usage_shard(d.invocation_id) AS shard, count(*) AS calls,
		        sum(d.input_tokens) AS input, sum(d.output_tokens) AS output, sum(d.cached_tokens) AS cached
		    FROM ` + costDeltaRows + `
		    LEFT JOIN cost_models m ON m.tenant_id = $1 AND m.project_id = $2 AND m.model = d.model
		    CROSS JOIN LATERAL ` + costGroups + `
		    GROUP BY g.grouping, g.key, d.model, m.model_no, cost_usage_shard(d.invocation_id)
		), changed AS (
		    UPDATE cost_usage u
		    SET calls = u.calls - k.calls, input_tokens = u.input_tokens - k.input,
		        output_tokens = u.output_tokens - k.output, cached_tokens = u.cached_tokens - k.cached
		    FROM k
		    WHERE u.tenant_id = $1 AND u.project_id = $2 AND u.grouping = k.grouping AND u.key = k.key
		      AND u.model_no = k.model_no AND u.shard = k.shard
		    RETURNING 1
		)
		SELECT (SELECT count(*) FROM changed), (SELECT count(*) FROM k)`
	// costDropGroupsSQL removes the agent, tool and hour sums whose last invocation went.
	costDropGroupsSQL = `
		DELETE FROM cost_usage u
		USING (SELECT DISTINCT g.grouping, g.key FROM ` + costDeltaRows + ` CROSS JOIN LATERAL ` + costGroups + `) k
		WHERE u.tenant_id = $1 AND u.project_id = $2 AND u.grouping = k.grouping AND u.key = k.key AND u.calls = 0`
)

// addTo adds the invocations a statement inserted to the sums, in one round trip.
func (c *costChange) addTo(ctx context.Context, tx pgx.Tx, scope runtime.Scope) error {
	if len(c.ids) == 0 {
		return nil
	}
	b := &pgx.Batch{}
	b.Queue(costNewModelLockSQL, scope.TenantID, scope.ProjectID, c.models)
	b.Queue(costNumberModelsSQL, scope.TenantID, scope.ProjectID, c.models)
	b.Queue(costAddConversationsSQL, c.args(scope)...)
	b.Queue(costAddGroupsSQL, c.args(scope)...)
	return translate(tx.SendBatch(ctx, b).Close())
}

// takeFrom takes the invocations a statement deleted off the sums, in one round trip:
// it locks the rows in key order first, subtracts, and removes the rows whose last
// invocation went. A sum it does not find would mean the sums had drifted from the
// invocations: it fails the transaction instead.
func (c *costChange) takeFrom(ctx context.Context, tx pgx.Tx, scope runtime.Scope) (err error) {
	if len(c.ids) == 0 {
		return nil
	}
	args := c.args(scope)
	b := &pgx.Batch{}
	b.Queue(costLockConversationsSQL, args...)
	b.Queue(costSubtractConversationsSQL, args...)
	b.Queue(costDropConversationsSQL, scope.TenantID, scope.ProjectID, c.conversations)
	b.Queue(costLockGroupsSQL, args...)
	b.Queue(costSubtractGroupsSQL, args...)
	b.Queue(costDropGroupsSQL, args...)
	br := tx.SendBatch(ctx, b)
	defer func() {
		if cerr := br.Close(); err == nil {
			err = translate(cerr)
		}
	}()
	for _, what := range []string{"conversation", "agent, tool and hour"} {
		if _, err := br.Exec(); err != nil {
			return translate(err)
		}
		var changed, wanted int64
		if err := br.QueryRow().Scan(&changed, &wanted); err != nil {
			return translate(err)
		}
		if changed != wanted {
			return fmt.Errorf("cost sums: %d of %d %s sums found", changed, wanted, what)
		}
		if _, err := br.Exec(); err != nil {
			return translate(err)
		}
	}
	return nil
}
