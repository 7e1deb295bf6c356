package postgres_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/adapters/postgres"
	"github.com/agent-context/agent-context/adapters/postgres/pgtest"
	"github.com/agent-context/agent-context/runtime"
	"github.com/agent-context/agent-context/runtime/a2a"
	"github.com/agent-context/agent-context/runtime/memory"
)

// A scope gets a projection job only while none of its own waits to start: repeats in
// one call and enqueues after the first add none, another scope gets its own, and once
// the scope's job runs (it may have claimed its last batch already) the next enqueue
// adds one. Every job goes to its class's queue.
func TestProjectionJobsOneWaitingPerScope(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewDB(t)
	jobs := newDB(t, pool).Memory().Stores().Jobs
	ctx := context.Background()
	a, b := memory.ProjectionJob{TenantID: "t", ProjectID: "a"}, memory.ProjectionJob{TenantID: "t", ProjectID: "b"}
	queued := func() map[string]int {
		t.Helper()
		rows, err := pool.Query(ctx, `SELECT queue || ' ' || coalesce(args->>'projectId', '') FROM river_job`)
		require.NoError(t, err)
		n := map[string]int{}
		for rows.Next() {
			var k string
			require.NoError(t, rows.Scan(&k))
			n[k]++
		}
		require.NoError(t, rows.Err())
		return n
	}
	require.NoError(t, jobs.Enqueue(ctx, a, a, runtime.OperationJob{TenantID: "t", ProjectID: "a", OperationID: "op"}))
	require.NoError(t, jobs.Enqueue(ctx, a))
	require.NoError(t, jobs.Enqueue(ctx, b, a2a.PushJob{TenantID: "t", ProjectID: "b", TaskID: "task", ConfigID: "c"}, b))
	require.Equal(t, map[string]int{postgres.QueueProjection + " a": 1, postgres.QueueProjection + " b": 1,
		postgres.QueueOperations + " a": 1, postgres.QueuePush + " b": 1}, queued())

	_, err := pool.Exec(ctx, `UPDATE river_job SET state = 'running', attempted_at = now() WHERE kind = $1 AND args->>'projectId' = 'a'`, a.Kind())
	require.NoError(t, err)
	require.NoError(t, jobs.Enqueue(ctx, a, b))
	require.Equal(t, 2, queued()[postgres.QueueProjection+" a"], "a running job does not stand for the next")
	require.Equal(t, 1, queued()[postgres.QueueProjection+" b"])
}
