package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/adapters/embedding/local/localtest"
	"github.com/agent-context/agent-context/adapters/postgres"
	"github.com/agent-context/agent-context/adapters/postgres/worker"
	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/contract/client"
)

// The noisy neighbour's loads (BenchmarkNoisyNeighbour).
const (
	// neighbourHookDelay is how long tenant A's webhook takes to answer: just inside
	// the 10 s a delivery may take.
	neighbourHookDelay = 9 * time.Second
	// neighbourTasks and neighbourConfigs are A's tasks and each one's push configs.
	neighbourTasks   = 8
	neighbourConfigs = 10
	// neighbourExports is how many exports of its large conversation A starts at once,
	// and neighbourExportMB how large that conversation is.
	neighbourExports  = 4
	neighbourExportMB = 256
	// neighbourEntries is how many entries A posts one per request, from
	// neighbourClients clients.
	neighbourEntries = 1_500
	neighbourClients = 8
	// neighbourRounds is how many times B deletes and remembers under each load.
	neighbourRounds = 5
	// neighbourPoll is how often B looks whether its work is done.
	neighbourPoll = 10 * time.Millisecond
)

// neighbourTenant is the header that names a tenant of the benchmark.
const neighbourTenant = "x-infra-tenant-id"

// BenchmarkNoisyNeighbour measures, from outside, what tenant A's load does to tenant
// B's work on one replica with the default job workers and the local embedder. Under
// each of A's loads, and with A idle (the baseline, in the same run), B five times
// deletes a conversation of 50 messages (from the POST until the operation has
// succeeded) and posts one entry (from the POST until POST /recall in vector mode finds
// it: recallable by meaning). A's loads, one after the other:
//   - exports: A starts 4 exports of a 256 MiB conversation at once (operations);
//   - entries: A's 8 clients post 1,500 entries, each its own request (projection);
//     B's rounds run while they post, after A has posted 300;
//   - push: A's 8 tasks hold 10 push configs each to a webhook on 127.0.0.1 that
//     answers after 9 s, and A changes every task every second, so deliveries pile up
//     behind the push workers (push); B's rounds begin once every push worker is
//     held and 80 deliveries wait.
//
// It reports, per load, the worst and the median of B's two times, and logs A's state
// when B's rounds began (deliveries held, exports running, entries waiting).
//
//	AGENT_CONTEXT_MODEL_DIR=… go run ./adapters/postgres/pgtest/pgtestrun -- \
//	  go test -run '^$' -bench BenchmarkNoisyNeighbour -benchtime 1x -timeout 30m ./cmd/agent-context
func BenchmarkNoisyNeighbour(b *testing.B) {
	modelDir := localtest.ModelDir(b)
	hook := newSlowWebhook(b, neighbourHookDelay)
	app := startMsgBenchApp(b, func(c *Config) {
		c.Embedder, c.ModelDir = EmbedderLocal, modelDir
		c.A2ALive.PushAllowHosts = []string{"127.0.0.1"}
		// Time for the held deliveries' runs to be cancelled at the end (soft stop).
		c.DrainTimeout = time.Minute
	})
	loadBigConversation(b, app.pool, neighbourExportMB<<20/(64<<10), 64<<10)
	tenantA := neighbourClient(app, "local")
	tenantB := neighbourClient(app, "tenant-b")
	n := &neighbours{app: app, a: tenantA, b: tenantB, hook: hook}
	for round := range b.N {
		n.round = round
		b.Run("A idle", func(b *testing.B) { n.measure(b, "idle") })
		b.Run("A exports", func(b *testing.B) { n.underExports(b) })
		b.Run("A posts entries", func(b *testing.B) { n.underEntries(b) })
		b.Run("A floods push", func(b *testing.B) { n.underPush(b) })
	}
}

// neighbours holds the two tenants of BenchmarkNoisyNeighbour.
type neighbours struct {
	app   *msgBenchApp
	a, b  *client.Client
	hook  *slowWebhook
	round int
	// seq numbers B's conversations and entries across loads.
	seq atomic.Int64
}

func neighbourClient(app *msgBenchApp, tenant string) *client.Client {
	return client.New(client.WithBaseURL(app.base), client.WithHTTPClient(app.client), client.WithHeader(neighbourTenant, tenant))
}

// measure runs B's rounds and reports the worst and median of each time.
func (n *neighbours) measure(b *testing.B, load string) {
	b.Helper()
	var deletions, recallable []time.Duration
	for range neighbourRounds {
		deletions = append(deletions, n.deleteB(b))
		recallable = append(recallable, n.rememberB(b))
	}
	report := func(d []time.Duration, name string) {
		slices.Sort(d)
		b.ReportMetric(float64(d[len(d)/2].Milliseconds()), name+"-p50-ms")
		b.ReportMetric(float64(d[len(d)-1].Milliseconds()), name+"-max-ms")
	}
	b.Logf("%s: B's deletions %v, B's entries recallable by meaning after %v", load, deletions, recallable)
	report(deletions, "delete")
	report(recallable, "recallable")
}

// deleteB appends a conversation of 50 messages for B, deletes it and returns how long
// the deletion took from its POST until its operation succeeded.
func (n *neighbours) deleteB(b *testing.B) time.Duration {
	b.Helper()
	ctx := context.Background()
	conversation := fmt.Sprintf("b-%d-%d", n.round, n.seq.Add(1))
	records := make([]contract.ConversationRecord, 50)
	for i := range records {
		records[i] = contract.ConversationRecord{ID: fmt.Sprintf("m%02d", i), Scope: contract.ConversationScope{ConversationID: conversation},
			Role: contract.RoleUser, Content: fmt.Sprintf("message %d of %s about the release plan", i, conversation)}
	}
	_, err := n.b.AppendMessages(ctx, &contract.AppendMessagesRequest{Messages: records})
	require.NoError(b, err)
	start := time.Now()
	res, _, err := n.b.DeleteConversation(ctx, &contract.DeleteConversationRequest{ConversationID: conversation})
	require.NoError(b, err)
	for {
		op, err := n.b.GetOperation(ctx, &contract.GetOperationRequest{OperationID: res.Operation.ID})
		require.NoError(b, err)
		require.NotEqual(b, contract.OperationFailed, op.Operation.State)
		if op.Operation.State == contract.OperationSucceeded {
			return time.Since(start)
		}
		require.Less(b, time.Since(start), backlogPatience, "B's deletion is still %s", op.Operation.State)
		time.Sleep(neighbourPoll)
	}
}

// rememberB posts one entry for B and returns how long it took from its POST until a
// recall by meaning (vector mode) finds it.
func (n *neighbours) rememberB(b *testing.B) time.Duration {
	b.Helper()
	ctx := context.Background()
	id := fmt.Sprintf("b-entry-%d-%d", n.round, n.seq.Add(1))
	content := fmt.Sprintf("Tenant B's deployment %d moved to the Frankfurt region on a Tuesday", n.seq.Load())
	topK := 3
	start := time.Now()
	_, _, err := n.b.CreateEntry(ctx, &contract.CreateEntryRequest{ID: &id, Kind: "fact", Content: content})
	require.NoError(b, err)
	for {
		res, err := n.b.Recall(ctx, &contract.RecallRequest{Query: content, TopK: &topK, Mode: contract.RecallVector})
		require.NoError(b, err)
		if slices.ContainsFunc(res.Results, func(r contract.RecallResult) bool { return r.Entry.ID == id }) {
			return time.Since(start)
		}
		require.Less(b, time.Since(start), backlogPatience, "B's entry is still not recallable by meaning")
		time.Sleep(neighbourPoll)
	}
}

// underExports measures B while A's exports of its large conversation run.
func (n *neighbours) underExports(b *testing.B) {
	ctx := context.Background()
	ids := make([]string, neighbourExports)
	for i := range ids {
		res, err := n.a.Export(ctx, &contract.ExportRequest{ConversationID: ptrTo("big")})
		require.NoError(b, err)
		ids[i] = res.Operation.ID
	}
	running := func() int {
		count := 0
		for _, id := range ids {
			op, err := n.a.GetOperation(ctx, &contract.GetOperationRequest{OperationID: id})
			require.NoError(b, err)
			if op.Operation.State == contract.OperationRunning {
				count++
			}
		}
		return count
	}
	for running() == 0 {
		time.Sleep(neighbourPoll)
	}
	b.Logf("A's exports running when B began: %d of %d", running(), neighbourExports)
	n.measure(b, "A exports")
	b.Logf("A's exports still running when B ended: %d", running())
	for _, id := range ids {
		_, err := awaitOperation(ctx, n.a, id)
		require.NoError(b, err)
	}
}

// underEntries measures B while A's clients post their entries one per request.
func (n *neighbours) underEntries(b *testing.B) {
	ctx := context.Background()
	texts := backlogTexts(neighbourEntries)
	var posted atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, neighbourClients)
	for c := range neighbourClients {
		wg.Go(func() {
			for i := c; i < len(texts); i += neighbourClients {
				id := fmt.Sprintf("a-entry-%d-%05d", n.round, i)
				if _, _, err := n.a.CreateEntry(ctx, &contract.CreateEntryRequest{ID: &id, Kind: "fact", Content: texts[i]}); err != nil {
					errs <- err
					return
				}
				posted.Add(1)
			}
		})
	}
	for posted.Load() < neighbourEntries/5 {
		time.Sleep(neighbourPoll)
	}
	st, err := n.a.MaintenanceStatus(ctx)
	require.NoError(b, err)
	b.Logf("A had posted %d entries when B began, %d waiting for their vectors", posted.Load(), st.VectorProjection.PendingEntries)
	n.measure(b, "A posts entries")
	st, err = n.a.MaintenanceStatus(ctx)
	require.NoError(b, err)
	b.Logf("A had posted %d entries when B ended, %d waiting for their vectors", posted.Load(), st.VectorProjection.PendingEntries)
	wg.Wait()
	close(errs)
	require.NoError(b, <-errs)
	// The next load starts once A's projection jobs are done, the fold of its vectors
	// into the graph included.
	for {
		var jobs int
		require.NoError(b, n.app.pool.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE queue = $1
			AND state IN ('available', 'running', 'scheduled', 'retryable') AND args->>'tenantId' = 'local'`,
			postgres.QueueProjection).Scan(&jobs))
		if jobs == 0 {
			return
		}
		time.Sleep(neighbourPoll)
	}
}

// underPush measures B while A's push deliveries wait on the slow webhook. A keeps
// changing its tasks until B is done; the deliveries left are abandoned with the
// service at the end of the benchmark.
func (n *neighbours) underPush(b *testing.B) {
	alice := append(subject("alice"), neighbourTenant, "local")
	bob := append(subject("bob"), neighbourTenant, "local")
	tasks := make([]string, neighbourTasks)
	for i := range tasks {
		var task contract.Task
		n.app.post(b, contract.RouteA2ATasksCreate.Path, fmt.Appendf(nil, `{"toAgent": "bob", "description": "flood %d-%d"}`, n.round, i), &task, alice...)
		tasks[i] = task.ID
		for c := range neighbourConfigs {
			n.app.post(b, contract.PathA2AJSONRPC, fmt.Appendf(nil, `{"jsonrpc": "2.0", "id": 1, "method": "tasks/pushNotificationConfig/set",
				"params": {"taskId": %q, "pushNotificationConfig": {"id": "slow-%d", "url": %q}}}`, task.ID, c, n.hook.url+"/hook"), nil, alice...)
		}
		n.app.post(b, contract.RouteA2ATasksUpdate.Path, fmt.Appendf(nil, `{"taskId": %q, "state": "working"}`, task.ID), nil, bob...)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			for _, id := range tasks {
				n.app.post(b, contract.RouteA2ATasksMessage.Path, fmt.Appendf(nil, `{"taskId": %q, "parts": [{"type": "text", "text": "progress %d"}]}`, id, i), nil, bob...)
			}
		}
	})
	waiting := func() int {
		var count int
		require.NoError(b, n.app.pool.QueryRow(context.Background(), `SELECT count(*) FROM river_job
			WHERE queue = $1 AND state IN ('available', 'scheduled', 'retryable')`, postgres.QueuePush).Scan(&count))
		return count
	}
	for n.hook.held.Load() < int64(worker.DefaultClassWorkers.Push) || waiting() < neighbourTasks*neighbourConfigs {
		time.Sleep(neighbourPoll)
	}
	b.Logf("A's deliveries held by the webhook when B began: %d, waiting for a worker: %d", n.hook.held.Load(), waiting())
	n.measure(b, "A floods push")
	b.Logf("A's deliveries held when B ended: %d, waiting: %d, answered so far: %d", n.hook.held.Load(), waiting(), n.hook.answered.Load())
	close(stop)
	wg.Wait()
}

// slowWebhook answers every request after delay (or when the sender gives up), and
// counts the requests it holds and those it answered.
type slowWebhook struct {
	url            string
	held, answered atomic.Int64
}

func newSlowWebhook(b *testing.B, delay time.Duration) *slowWebhook {
	w := &slowWebhook{}
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		w.held.Add(1)
		defer w.held.Add(-1)
		select {
		case <-time.After(delay):
			w.answered.Add(1)
			rw.WriteHeader(http.StatusNoContent)
		case <-r.Context().Done():
		}
	}))
	b.Cleanup(srv.Close)
	w.url = strings.TrimSuffix(srv.URL, "/")
	return w
}
