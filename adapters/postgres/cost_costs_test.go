package postgres_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/adapters/postgres"
	"github.com/agent-context/agent-context/adapters/postgres/pgtest"
	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
	"github.com/agent-context/agent-context/runtime/conversation"
)

// requireCostSums asserts that the running sums of the cost report are exactly the
// sums of the invocations stored (by agent, tool, hour and conversation, per model, the
// shards of a row added up), that no row is left at zero, and that every scope's
// models are numbered 1, 2, …, each model of its invocations once.
func requireCostSums(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	ctx := context.Background()
	for name, pair := range map[string][2]string{
		"agent and tool sums": {`
			SELECT u.tenant_id, u.project_id, u.grouping, u.key, c.model, sum(u.calls), sum(u.input_tokens),
				sum(u.output_tokens), sum(u.cached_tokens)
			FROM cost_usage u JOIN cost_models c USING (tenant_id, project_id, model_no)
			GROUP BY 1, 2, 3, 4, 5`, `
			SELECT i.tenant_id, i.project_id, g.grouping, g.key, i.model, count(*), sum(i.input_tokens),
				sum(i.output_tokens), sum(i.cached_tokens)
			FROM model_invocations i
			CROSS JOIN LATERAL (VALUES ('agent', i.agent_id), ('tool', coalesce(i.tool_name, '')),
				('hour', lpad((i.started_at_ms / 3600000 * 3600000)::text, 19, '0'))) g(grouping, key)
			GROUP BY 1, 2, 3, 4, 5`},
		"conversation sums": {`
			SELECT u.tenant_id, u.project_id, u.conversation_id, c.model, u.calls, u.input_tokens, u.output_tokens,
				u.cached_tokens, u.uncached_f, u.cached_f, u.output_f
			FROM cost_usage_conversations u JOIN cost_models c USING (tenant_id, project_id, model_no)`, `
			SELECT tenant_id, project_id, conversation_id, model, count(*), sum(input_tokens), sum(output_tokens),
				sum(cached_tokens), sum(input_tokens - cached_tokens)::float8, sum(cached_tokens)::float8,
				sum(output_tokens)::float8
			FROM model_invocations GROUP BY 1, 2, 3, 4`},
		"model numbers": {`
			SELECT tenant_id, project_id, model_no FROM cost_models`, `
			SELECT tenant_id, project_id, generate_series(1, count(*)::int) FROM cost_models GROUP BY 1, 2`},
	} {
		var diff int
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM (
			(`+pair[0]+` EXCEPT ALL `+pair[1]+`) UNION ALL (`+pair[1]+` EXCEPT ALL `+pair[0]+`)) d`).Scan(&diff))
		require.Zero(t, diff, name)
	}
	var zeros, unnumbered int
	require.NoError(t, pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM cost_usage WHERE calls = 0)
		+ (SELECT count(*) FROM cost_usage_conversations WHERE calls = 0),
		(SELECT count(*) FROM model_invocations i WHERE NOT EXISTS (SELECT 1 FROM cost_models c
			WHERE c.tenant_id = i.tenant_id AND c.project_id = i.project_id AND c.model = i.model))`).Scan(&zeros, &unnumbered))
	require.Zero(t, zeros, "rows of sums left at zero")
	require.Zero(t, unnumbered, "invocations of a model without a number")
}

// invocationColumns are the columns copyCostInvocations fills.
var invocationColumns = []string{"tenant_id", "project_id", "invocation_id", "conversation_id", "request_window_id",
	"agent_id", "tool_name", "provider", "model", "state", "input_tokens", "output_tokens", "cached_tokens",
	"started_at_ms", "completed_at_ms", "latency_ms", "created_at_ms"}

// copyCostInvocations loads n invocations of scope with COPY, spread over three
// conversations, agents, tools (and none) and models.
func copyCostInvocations(t *testing.T, pool *pgxpool.Pool, scope runtime.Scope, prefix string, n int) {
	t.Helper()
	rows := make([][]any, n)
	for i := range rows {
		var tool *string
		if i%3 > 0 {
			tool = windowPtr(fmt.Sprint("tool-", i%3))
		}
		input := int64(1000 + i*37)
		rows[i] = []any{scope.TenantID, scope.ProjectID, fmt.Sprint(prefix, i), fmt.Sprint("conv-", i%3), "w", fmt.Sprint("agent-", i%4),
			tool, "p", fmt.Sprint("model-", i%5), "succeeded", input, int64(i * 11), input / 3, int64(i), int64(i), int64(0), int64(0)}
	}
	copied, err := pool.CopyFrom(context.Background(), pgx.Identifier{"model_invocations"}, invocationColumns, pgx.CopyFromRows(rows))
	require.NoError(t, err)
	require.Equal(t, int64(n), copied)
}

// loadCostInvocations loads invocations as copyCostInvocations does, and adds them to
// the cost sums.
func loadCostInvocations(t *testing.T, pool *pgxpool.Pool, scope runtime.Scope, prefix string, n int) {
	t.Helper()
	copyCostInvocations(t, pool, scope, prefix, n)
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprint(prefix, i)
	}
	require.NoError(t, postgres.CountInvocations(context.Background(), pool, scope, ids))
}

// The running sums follow every write of model_invocations, in the writing statement's
// transaction: saves through the use case (a retry counted once), a load with COPY
// counted after it, and the deletion job's bounded steps.
func TestCostSumsFollowEveryWrite(t *testing.T) {
	t.Parallel()
	b := setupOperations(t, 3)
	ctx := context.Background()
	windows := conversation.NewWindows(newDB(t, b.pool).Conversation(), nil, runtime.SystemClock{})
	other := runtime.Scope{TenantID: "tenant-b", ProjectID: "project-a"}
	for _, scope := range []runtime.Scope{b.scope, other} {
		p := runtime.Principal{Scope: scope, Subject: "planner"}
		for c := range 2 {
			conversation := fmt.Sprint("c", c)
			_, _, err := windows.CreateWindow(ctx, p, windowRequest("w"+conversation, conversation, contract.StageOriginal, 0, nil))
			require.NoError(t, err)
			for i := range 5 {
				req := invocationRequest(fmt.Sprintf("i%d-%d", c, i), conversation, "w"+conversation)
				req.Model = []string{"gpt-4.1-mini", "gpt-4.1", "new-model"}[i%3]
				if i%2 == 0 {
					req.ToolName = windowPtr("search")
				}
				req.InputTokens, req.CachedTokens, req.OutputTokens = int64(100*i+c), int64(10*i), int64(i)
				_, err := windows.SaveInvocation(ctx, p, req)
				require.NoError(t, err)
				// A retry of a stored invocation counts it once.
				_, err = windows.SaveInvocation(ctx, p, req)
				require.NoError(t, err)
			}
		}
	}
	requireCostSums(t, b.pool)
	loadCostInvocations(t, b.pool, b.scope, "copied-", 40)
	requireCostSums(t, b.pool)

	res, _, err := b.ops.DeleteConversation(ctx, b.scope, &contract.DeleteConversationRequest{ConversationID: "conv-1"})
	require.NoError(t, err)
	for {
		op := b.stepOnce(t, res.Operation.ID)
		requireCostSums(t, b.pool)
		if op.State == contract.OperationSucceeded {
			break
		}
	}
	var left int
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM cost_usage_conversations
		WHERE tenant_id = $1 AND project_id = $2 AND conversation_id = 'conv-1'`, b.scope.TenantID, b.scope.ProjectID).Scan(&left))
	require.Zero(t, left, "a deleted conversation leaves no sums")

}

// Saves that run at once, each the first use of its model in the scope (and some of
// one shared new model, and of one agent's shards), number the models 1, 2, … without
// a gap or a duplicate and fail none.
func TestCostModelsFirstUsedAtOnce(t *testing.T) {
	t.Parallel()
	b := setupWindows(t)
	ctx := context.Background()
	_, _, err := b.windows.CreateWindow(ctx, b.p, windowRequest("w", "c", contract.StageOriginal, 0, nil))
	require.NoError(t, err)
	const workers, each = 8, 6
	var wg sync.WaitGroup
	errs := make(chan error, workers*each)
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				req := invocationRequest(fmt.Sprint("i", w, "-", i), "c", "w")
				req.Model = fmt.Sprint("model-", w, "-", i)
				if i%2 == 1 {
					req.Model = fmt.Sprint("shared-", i)
				}
				_, err := b.windows.SaveInvocation(ctx, b.p, req)
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	requireCostSums(t, b.pool)
	var models int
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM cost_models`).Scan(&models))
	require.Equal(t, workers*each/2+each/2, models)
}

// Migration 00012 sums the invocations a database already holds by agent, tool and
// conversation, and 00016 by hour.
func TestMigrationSumsStoredInvocations(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn, provider := migratedDownTo(t, 11)
	pool, err := pgxpool.New(ctx, dsn)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	copyCostInvocations(t, pool, runtime.Scope{TenantID: "t", ProjectID: "p"}, "a-", 30)
	copyCostInvocations(t, pool, runtime.Scope{TenantID: "u", ProjectID: "p"}, "b-", 7)

	_, err = provider.Up(ctx)
	require.NoError(t, err)
	requireCostSums(t, pool)
	loadCostInvocations(t, pool, runtime.Scope{TenantID: "t", ProjectID: "p"}, "c-", 5)
	requireCostSums(t, pool)
}

// BenchmarkInvocationSave measures a save with what the running sums add to it: the
// use case saving new invocations one after another (50 agents, 10 tools and none, 5
// models, 100 conversations), the sums kept by the save's own statements.
//
//	go test -run '^$' -bench BenchmarkInvocationSave -benchtime 3000x ./adapters/postgres
func BenchmarkInvocationSave(b *testing.B) {
	ctx := context.Background()
	pool := pgtest.NewDB(b)
	windows := conversation.NewWindows(newDB(b, pool).Conversation(), nil, runtime.SystemClock{})
	p := windowPrincipal("tenant-a", "project-a", "agent")
	for c := range 100 {
		conversation := fmt.Sprint("c", c)
		_, _, err := windows.CreateWindow(ctx, p, windowRequest("w"+conversation, conversation, contract.StageOriginal, 0, nil))
		require.NoError(b, err)
	}
	i := 0
	for b.Loop() {
		conversation := fmt.Sprint("c", i%100)
		req := invocationRequest(fmt.Sprint("i", i), conversation, "w"+conversation)
		req.AgentID, req.Model = windowPtr(fmt.Sprint("agent-", i%50)), fmt.Sprint("model-", i%5)
		if i%11 > 0 {
			req.ToolName = windowPtr(fmt.Sprint("tool-", i%11))
		}
		_, err := windows.SaveInvocation(ctx, p, req)
		require.NoError(b, err)
		i++
	}
}
