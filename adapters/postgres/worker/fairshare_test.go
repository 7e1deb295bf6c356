package worker

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/adapters/postgres"
	"github.com/agent-context/agent-context/adapters/postgres/pgtest"
	"github.com/agent-context/agent-context/runtime"
	"github.com/agent-context/agent-context/runtime/a2a"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// heldPushes delivers by reporting each job it starts; tenant "a"'s deliveries are
// held until release is closed.
type heldPushes struct {
	started chan a2a.PushJob
	release chan struct{}
}

func (h *heldPushes) DeliverPush(ctx context.Context, job *a2a.PushJob, _ int64, _ time.Time) (bool, time.Time, error) {
	h.started <- *job
	if job.TenantID == "a" {
		select {
		case <-h.release:
		case <-ctx.Done():
		}
	}
	return true, time.Time{}, nil
}

// Two push workers, tenant a's four jobs enqueued before tenant b's one: a holds one
// worker (half), b's job runs on the other while a's first delivery is still held.
// Nothing spins meanwhile: a's jobs beyond its share are moved behind b's at once, so
// one snooze is all it takes; and once nobody else waits, a gets both workers back.
func TestTenantHoldsAtMostHalfOfAClassWhileAnotherWaits(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewDB(t)
	db, err := postgres.NewDB(context.Background(), pool, postgres.DBOptions{})
	require.NoError(t, err)
	ctx := context.Background()
	var enqueue []a2a.PushJob
	for _, task := range []string{"a1", "a2", "a3", "a4"} {
		enqueue = append(enqueue, a2a.PushJob{TenantID: "a", ProjectID: "p", TaskID: task, ConfigID: "c"})
	}
	enqueue = append(enqueue, a2a.PushJob{TenantID: "b", ProjectID: "p", TaskID: "b1", ConfigID: "c"})
	for _, j := range enqueue {
		require.NoError(t, db.Memory().Stores().Jobs.Enqueue(ctx, j))
	}

	h := &heldPushes{started: make(chan a2a.PushJob, 8), release: make(chan struct{})}
	jobs, err := NewJobs(db, &scriptedRunner{finished: true}, JobOptions{Classes: ClassWorkers{Push: 2}, Push: h, PushTimeout: time.Second})
	require.NoError(t, err)
	require.NoError(t, jobs.Start(ctx))
	t.Cleanup(func() {
		close(h.release)
		require.NoError(t, jobs.Stop(context.Background()))
	})

	var a int
	for j := range h.started {
		if j.TenantID == "b" {
			break
		}
		a++
	}
	require.Equal(t, 1, a, "a started one delivery before b's")
	select {
	case j := <-h.started:
		require.Equal(t, "a", j.TenantID, "with b done, a takes the second worker")
	case <-time.After(time.Minute):
		t.Fatal("a never got the second worker back")
	}
	var snoozes int
	require.NoError(t, pool.QueryRow(ctx, `SELECT coalesce(sum((metadata->>'snoozes')::int), 0) FROM river_job`).Scan(&snoozes))
	require.Equal(t, 1, snoozes)
}

// heldOperations runs operations by reporting each one it starts; tenant "a"'s runs
// are held until release is closed.
type heldOperations struct {
	scriptedRunner
	started chan string
	release chan struct{}
}

func (h *heldOperations) RunOperation(ctx context.Context, scope runtime.Scope, id string, _ time.Time) (bool, error) {
	h.started <- id
	if scope.TenantID == "a" {
		select {
		case <-h.release:
		case <-ctx.Done():
		}
	}
	return true, nil
}

// Operations are a reserved class: a tenant alone with two operations on two
// workers runs one, its second waits, and another tenant's operation enqueued then
// starts at once on the worker kept free; it would wait for a's held run otherwise.
func TestOperationsKeepAWorkerForOtherTenants(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewDB(t)
	db, err := postgres.NewDB(context.Background(), pool, postgres.DBOptions{})
	require.NoError(t, err)
	ctx := context.Background()
	enqueue := func(tenant, id string) {
		require.NoError(t, db.Memory().Stores().Jobs.Enqueue(ctx, runtime.OperationJob{TenantID: tenant, ProjectID: "p", OperationID: id}))
	}
	enqueue("a", "a1")
	enqueue("a", "a2")

	h := &heldOperations{started: make(chan string, 8), release: make(chan struct{})}
	jobs, err := NewJobs(db, h, JobOptions{Classes: ClassWorkers{Operations: 2}})
	require.NoError(t, err)
	require.NoError(t, jobs.Start(ctx))
	t.Cleanup(func() {
		close(h.release)
		require.NoError(t, jobs.Stop(context.Background()))
	})

	first := <-h.started
	require.Eventually(t, func() bool {
		var snoozed bool
		require.NoError(t, pool.QueryRow(ctx, `SELECT EXISTS (SELECT FROM river_job WHERE args->>'operationId' <> $1
			AND state <> 'running' AND (metadata->>'snoozes')::int > 0)`, first).Scan(&snoozed))
		return snoozed
	}, time.Minute, 10*time.Millisecond, "a's second operation waits although no other tenant does")
	enqueue("b", "b1")
	select {
	case id := <-h.started:
		require.Equal(t, "b1", id, "b's operation takes the worker a may not hold")
	case <-time.After(time.Minute):
		t.Fatal("b's operation never started")
	}
}
