package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime/memory"
)

// blockingWebhook is a webhook on 127.0.0.1 that holds every request until release is
// closed; it counts the requests in flight and those the sender gave up on.
type blockingWebhook struct {
	release  chan struct{}
	mu       sync.Mutex
	inFlight int
	cutOff   int
}

func newBlockingWebhook(t *testing.T) (*blockingWebhook, string) {
	w := &blockingWebhook{release: make(chan struct{})}
	srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		w.mu.Lock()
		w.inFlight++
		w.mu.Unlock()
		select {
		case <-w.release:
		case <-r.Context().Done():
			w.mu.Lock()
			w.cutOff++
			w.mu.Unlock()
		}
		w.mu.Lock()
		w.inFlight--
		w.mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(w.release) })
	return w, srv.URL
}

func (w *blockingWebhook) counts() (inFlight, cutOff int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.inFlight, w.cutOff
}

// While one tenant's push deliveries hold every push worker on a webhook that does
// not answer, another tenant's conversation deletion (an operation) still runs: it
// finishes before any of the held deliveries has been given up on. With one queue for
// every kind it waited for a delivery's timeout.
func TestOperationRunsBesideHeldPushDeliveries(t *testing.T) {
	t.Parallel()
	app := pushApp(t)
	hook, url := newBlockingWebhook(t)
	alice, bob := headerAgent(app, "alice"), headerAgent(app, "bob")
	workers := app.main.Config.JobClasses.Push
	for i := range 2 * workers {
		var task contract.Task
		alice.ok(t, contract.RouteA2ATasksCreate, map[string]any{"toAgent": "bob", "description": fmt.Sprintf("review %d", i)}, &task)
		rpc(t, alice, `{"jsonrpc": "2.0", "id": 1, "method": "tasks/pushNotificationConfig/set", "params": {"taskId": "`+task.ID+`",
			"pushNotificationConfig": {"id": "slow", "url": "`+url+`/hook"}}}`)
		bob.ok(t, contract.RouteA2ATasksUpdate, map[string]any{"taskId": task.ID, "state": "working"}, nil)
	}
	require.Eventually(t, func() bool { n, _ := hook.counts(); return n == workers }, time.Minute, 10*time.Millisecond,
		"every push worker holds a delivery")

	other := []string{"x-infra-tenant-id", "tenant-other"}
	app.appendOK(t, batchOf(rec("doomed", "m1", "user", "bye")), other...)
	_, op := app.deleteConversation(t, "doomed", other...)
	require.Equal(t, contract.OperationSucceeded, app.waitOperation(t, op.ID, other...).State)
	inFlight, cutOff := hook.counts()
	require.Equal(t, workers, inFlight, "the deliveries are still held")
	require.Zero(t, cutOff, "no delivery had to time out first")
}

// Entries posted one per request share their scope's projection job: while one waits
// to start, posting another enqueues none, and the one job embeds them all.
func TestEntriesPostedOneByOneShareAProjectionJob(t *testing.T) {
	t.Parallel()
	api := startApp(t, func(c *Config) { c.JobWorkers = 0 })
	const n = 30
	for i := range n {
		api.createEntry(t, entryBody(fmt.Sprintf("one-%02d", i), fmt.Sprintf("memory %d posted on its own", i)))
	}
	pool := openPool(t, api.dsn)
	var jobs int
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM river_job WHERE kind = $1`,
		memory.ProjectionJob{}.Kind()).Scan(&jobs))
	require.Equal(t, 1, jobs, "one job for the %d entries", n)

	startAppOn(t, api.dsn, nil)
	require.Zero(t, api.waitProjected(t).PendingEntries)
}

// While one tenant's entries of many scopes wait for a slow embedder, another
// tenant's new entry becomes recallable by meaning before the first tenant's backlog
// is half done: the first tenant holds one of the two projection workers, and the
// other tenant's job runs on the second. In the order they were posted, it would wait
// behind all but the last of the first tenant's scopes.
func TestEntryRecallableBesideAnotherTenantsBacklog(t *testing.T) {
	t.Parallel()
	embeddings := newEmbeddingServer(t, 16)
	embeddings.delay.Store(int64(300 * time.Millisecond))
	api := startApp(t, embeddings.configure, func(c *Config) { c.JobWorkers = 0 })
	const scopes, perScope = 8, memory.DefaultProjectionBatch
	for s := range scopes {
		for i := range perScope {
			api.createEntry(t, entryBody(fmt.Sprintf("a-%d", i), fmt.Sprintf("memory %d of scope %d", i, s)),
				"x-infra-tenant-id", "tenant-a", "x-infra-project-id", fmt.Sprintf("scope-%d", s))
		}
	}
	tenantB := []string{"x-infra-tenant-id", "tenant-b"}
	api.createEntry(t, entryBody("b-1", "the only memory of tenant b"), tenantB...)
	pool := openPool(t, api.dsn)
	waitingOfA := func() int {
		var n int
		require.NoError(t, pool.QueryRow(context.Background(),
			`SELECT count(*) FROM entry_projection_queue WHERE tenant_id = 'tenant-a'`).Scan(&n))
		return n
	}
	require.Equal(t, scopes*perScope, waitingOfA())

	startAppOn(t, api.dsn, nil, embeddings.configure)
	require.Eventually(t, func() bool {
		return slices.Contains(api.recallIDs(t, map[string]any{"query": "the only memory of tenant b", "mode": "vector"}, tenantB...), "b-1")
	}, time.Minute, 20*time.Millisecond, "tenant b's entry becomes recallable by meaning")
	require.Greater(t, waitingOfA(), scopes*perScope/2, "tenant a's backlog is not half done")
}

// A job left in River's default queue, where every job went before the classes (an
// earlier version enqueued it, or it was waiting for a retry at the upgrade), still
// runs.
func TestJobsOfTheDefaultQueueStillRun(t *testing.T) {
	t.Parallel()
	api := startApp(t, func(c *Config) { c.JobWorkers = 0 })
	api.appendOK(t, batchOf(rec("old", "m1", "user", "from before")))
	_, op := api.deleteConversation(t, "old")
	pool := openPool(t, api.dsn)
	tag, err := pool.Exec(context.Background(), `UPDATE river_job SET queue = 'default' WHERE args->>'operationId' = $1`, op.ID)
	require.NoError(t, err)
	require.EqualValues(t, 1, tag.RowsAffected())

	startAppOn(t, api.dsn, nil)
	require.Equal(t, contract.OperationSucceeded, api.waitOperation(t, op.ID).State)
}
