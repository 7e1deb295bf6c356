package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/adapters/postgres"
	"github.com/agent-context/agent-context/adapters/postgres/pgcluster"
	"github.com/agent-context/agent-context/adapters/postgres/pgtest"
	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
	"github.com/agent-context/agent-context/runtime/a2a"
	"github.com/agent-context/agent-context/runtime/memory"
)

// a2aBenchClients is the concurrency of the throughput benchmarks.
const a2aBenchClients = 8

// a2aBench is a benchmark's service: Main in open mode, an HTTP client that keeps
// enough connections, and a pool of its own on the same database for baselines.
type a2aBench struct {
	*msgBenchApp
	main *Main
	dsn  string
}

func startA2ABench(b *testing.B, dsn string) *a2aBench {
	b.Helper()
	// The service's pool and the in-process baseline's are the same size.
	// The benchmarks hold up to 1,000 waiters of one tenant on one replica.
	m := startBenchMain(b, dsn, func(c *Config) { c.MaxConns, c.A2ALive.MaxWaitersPerTenant = a2aBenchClients, 1000 })
	pool, err := postgres.NewPool(context.Background(), dsn, postgres.PoolOptions{MaxConns: a2aBenchClients, ApplicationName: "bench-baseline"})
	require.NoError(b, err)
	b.Cleanup(pool.Close)
	client := &http.Client{Timeout: time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: 2000}}
	return &a2aBench{msgBenchApp: &msgBenchApp{base: "http://" + m.Addr(), client: client, pool: pool}, main: m, dsn: dsn}
}

func subject(name string) []string { return []string{"x-infra-subject", name} }

// runIDs tells one run's record IDs from another's: a benchmark runs several times.
var runIDs atomic.Int64

func mustMarshal(b testing.TB, v any) []byte {
	raw, err := json.Marshal(v)
	require.NoError(b, err)
	return raw
}

// BenchmarkA2AMessages posts a broadcast and reads the reader's unread messages (limit
// 50, marking them read), 8 clients at once, on a warmed-up database: over HTTP;
// through the use cases in-process (the service without HTTP); and the SQL floor, one
// plain insert and one plain 50-row select, the least any implementation sends.
//
//	go test -run '^$' -bench BenchmarkA2AMessages -benchtime 3000x ./cmd/agent-context
func BenchmarkA2AMessages(b *testing.B) {
	app := startA2ABench(b, pgtest.NewDSN(b))
	app.warmUp(b, 1000)
	b.Run("http", func(b *testing.B) {
		run := runIDs.Add(1)
		parallelN(b, a2aBenchClients, "pairs/s", func(c int, i int64) {
			app.post(b, contract.RouteA2AMessagesPost.Path, mustMarshal(b, map[string]any{
				"messageId": fmt.Sprintf("h-%d-%d", run, i), "content": "status update from the planner", "category": "task_update",
			}), nil, subject(fmt.Sprintf("sender-%d", c))...)
			app.post(b, contract.RouteA2AMessagesRead.Path, []byte(`{}`), nil, subject(fmt.Sprintf("reader-%d", c))...)
		})
	})
	b.Run("use-case", func(b *testing.B) {
		a2a, ctx := app.useCases(b), context.Background()
		run := runIDs.Add(1)
		parallelN(b, a2aBenchClients, "pairs/s", func(c int, i int64) {
			_, err := a2a.Messages.PostMessage(ctx, benchAgent(fmt.Sprintf("sender-%d", c)), &contract.PostMessageRequest{
				MessageID: ptrTo(fmt.Sprintf("u-%d-%d", run, i)), Content: ptrTo("status update from the planner"),
				Category: ptrTo("task_update"),
			})
			require.NoError(b, err)
			_, err = a2a.Messages.ReadMessages(ctx, benchAgent(fmt.Sprintf("use-reader-%d", c)), &contract.ReadMessagesRequest{})
			require.NoError(b, err)
		})
	})
	b.Run("sql-floor", func(b *testing.B) {
		ctx := context.Background()
		run := runIDs.Add(1)
		parallelN(b, a2aBenchClients, "pairs/s", func(c int, i int64) {
			now := time.Now().UnixMilli()
			_, err := app.pool.Exec(ctx, `INSERT INTO a2a_messages (tenant_id, project_id, message_id, seq, correlation_id,
				    from_agent, category, priority, privacy, content, created_at_ms, expires_at_ms)
				VALUES ('floor', 'floor', $1, $2, $1, $3, 'task_update', 'normal', 'team', 'status update from the planner',
				    $4::bigint, $4::bigint + 43200000)`,
				fmt.Sprintf("f-%d-%d", run, i), run<<32|i, fmt.Sprintf("sender-%d", c), now)
			require.NoError(b, err)
			rows, err := app.pool.Query(ctx, `SELECT message_id, content FROM a2a_messages
				WHERE tenant_id = 'floor' AND project_id = 'floor' ORDER BY created_at_ms DESC, message_id DESC LIMIT 50`)
			require.NoError(b, err)
			rows.Close()
			require.NoError(b, rows.Err())
		})
	})
}

// warmUp brings the database to a steady state before the clock starts: n messages
// posted and read by the benchmark's readers, n tasks run to completion, then ANALYZE,
// as autovacuum does within a minute of a deployment's first writes (before it, the
// planner has no statistics at all; docs/a2a.md).
func (a *a2aBench) warmUp(b *testing.B, n int) {
	a2a, ctx := a.useCases(b), context.Background()
	for i := range n {
		_, err := a2a.Messages.PostMessage(ctx, benchAgent("warm-sender"), &contract.PostMessageRequest{
			MessageID: ptrTo(fmt.Sprintf("warm-%d", i)), Content: ptrTo("warming up")})
		require.NoError(b, err)
		id := fmt.Sprintf("warm-%d", i)
		_, _, err = a2a.Tasks.CreateTask(ctx, benchAgent("warm-creator"), &contract.CreateTaskRequest{ID: &id, ToAgent: "warm-worker",
			Description: ptrTo("warm up")})
		require.NoError(b, err)
		for _, state := range []string{contract.TaskWorking, contract.TaskCompleted} {
			_, err = a2a.Tasks.UpdateTask(ctx, benchAgent("warm-worker"), &contract.UpdateTaskRequest{TaskID: id, State: state})
			require.NoError(b, err)
		}
	}
	for _, reader := range []string{"reader", "use-reader"} {
		for c := range a2aBenchClients {
			for {
				res, err := a2a.Messages.ReadMessages(ctx, benchAgent(fmt.Sprintf("%s-%d", reader, c)), &contract.ReadMessagesRequest{Limit: ptrTo(500)})
				require.NoError(b, err)
				if len(res.Messages) == 0 {
					break
				}
			}
		}
	}
	_, err := a.pool.Exec(ctx, "ANALYZE")
	require.NoError(b, err)
}

// useCases returns the A2A use cases in-process over a pool of their own on the
// benchmark's database: the service without HTTP.
func (a *a2aBench) useCases(b *testing.B) *a2a.Coordination {
	db, err := postgres.NewDB(context.Background(), a.pool, postgres.DBOptions{})
	require.NoError(b, err)
	return a2a.NewCoordination(a2a.Config{DB: db.A2A(), Cursors: runtime.NewCursorCodec(make([]byte, 32))})
}

// benchAgent is an open-mode caller of the local scope.
func benchAgent(subject string) runtime.Principal {
	return runtime.Principal{Scope: runtime.Scope{TenantID: "local", ProjectID: "local"}, Subject: subject, TrustedHeaders: true,
		Capabilities: map[string]bool{contract.CapA2ASend: true, contract.CapA2ARead: true, contract.CapA2ATasks: true}}
}

// BenchmarkA2ATaskRoundTrip runs one task through created → working → completed: over
// HTTP (three requests), 1 client and 8 at once; through the use cases in-process; and
// the SQL floor, one plain insert and two plain updates of the task row.
//
//	go test -run '^$' -bench BenchmarkA2ATaskRoundTrip -benchtime 1000x ./cmd/agent-context
func BenchmarkA2ATaskRoundTrip(b *testing.B) {
	app := startA2ABench(b, pgtest.NewDSN(b))
	app.warmUp(b, 1000)
	roundTrip := func(b *testing.B, run int64, c int, i int64) {
		id := fmt.Sprintf("t-%d-%d", run, i)
		creator, worker := subject(fmt.Sprintf("creator-%d", c)), subject(fmt.Sprintf("worker-%d", c))
		app.post(b, contract.RouteA2ATasksCreate.Path, mustMarshal(b, map[string]any{
			"id": id, "toAgent": fmt.Sprintf("worker-%d", c), "description": "summarize the incident",
		}), nil, creator...)
		app.post(b, contract.RouteA2ATasksUpdate.Path, mustMarshal(b, map[string]any{"taskId": id, "state": "working"}), nil, worker...)
		app.post(b, contract.RouteA2ATasksUpdate.Path, mustMarshal(b, map[string]any{"taskId": id, "state": "completed"}), nil, worker...)
	}
	for _, clients := range []int{1, a2aBenchClients} {
		b.Run(fmt.Sprintf("http-%d", clients), func(b *testing.B) {
			run := runIDs.Add(1)
			parallelN(b, clients, "round-trips/s", func(c int, i int64) { roundTrip(b, run, c, i) })
		})
	}
	b.Run("use-case-1", func(b *testing.B) {
		a2a, ctx := app.useCases(b), context.Background()
		run := runIDs.Add(1)
		parallelN(b, 1, "round-trips/s", func(c int, i int64) {
			id := fmt.Sprintf("u-%d-%d", run, i)
			creator, worker := benchAgent("use-creator"), benchAgent("use-worker")
			_, _, err := a2a.Tasks.CreateTask(ctx, creator, &contract.CreateTaskRequest{ID: &id, ToAgent: "use-worker",
				Description: ptrTo("summarize the incident")})
			require.NoError(b, err)
			for _, state := range []string{contract.TaskWorking, contract.TaskCompleted} {
				_, err = a2a.Tasks.UpdateTask(ctx, worker, &contract.UpdateTaskRequest{TaskID: id, State: state})
				require.NoError(b, err)
			}
		})
	})
	b.Run("sql-floor-1", func(b *testing.B) {
		ctx := context.Background()
		run := runIDs.Add(1)
		parallelN(b, 1, "round-trips/s", func(c int, i int64) {
			id := fmt.Sprintf("f-%d-%d", run, i)
			for _, sql := range []string{
				`INSERT INTO a2a_tasks (tenant_id, project_id, task_id, list_seq, context_id, from_agent, to_agent, state, description,
				    create_digest, version, message_count, artifact_count, history_count, parts_bytes, created_at_ms, updated_at_ms)
				 VALUES ('floor', 'floor', $1, $3, $1, 'c', 'w', 'created', 'summarize the incident', '', 1, 0, 0, 1, 0, $2, $2)`,
				`UPDATE a2a_tasks SET state = 'working', version = 2, history_count = 2, updated_at_ms = $2
				 WHERE tenant_id = 'floor' AND project_id = 'floor' AND task_id = $1 AND $3::bigint IS NOT NULL`,
				`UPDATE a2a_tasks SET state = 'completed', version = 3, history_count = 3, updated_at_ms = $2, terminal_at_ms = $2
				 WHERE tenant_id = 'floor' AND project_id = 'floor' AND task_id = $1 AND $3::bigint IS NOT NULL`,
			} {
				_, err := app.pool.Exec(ctx, sql, id, time.Now().UnixMilli(), run<<32|i)
				require.NoError(b, err)
			}
		})
	})
}

// parallelN runs op b.N times over clients goroutines (each with its index) and
// reports the rate.
func parallelN(b *testing.B, clients int, unit string, op func(client int, i int64)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	for c := range clients {
		wg.Go(func() {
			for i := next.Add(1); i <= int64(b.N); i = next.Add(1) {
				op(c, i)
			}
		})
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), unit)
}

// BenchmarkA2ALongPollWakeUp measures, per iteration, the time from the commit of an
// event (taken just before COMMIT is sent, so an upper bound) to the waiting poll's
// answer arriving at the client, with the poll on the replica that committed
// (same-instance) and on another one (cross-instance). It reports p50 and p99.
//
//	go test -run '^$' -bench BenchmarkA2ALongPollWakeUp -benchtime 300x ./cmd/agent-context
func BenchmarkA2ALongPollWakeUp(b *testing.B) {
	dsn := pgtest.NewDSN(b)
	committer := startA2ABench(b, dsn)
	other := startA2ABench(b, dsn)
	// The committing unit of work hints through the committer's hub, as in the service.
	db, err := postgres.NewDB(context.Background(), committer.pool, postgres.DBOptions{Hints: committer.main.hub})
	require.NoError(b, err)
	scope := runtime.Scope{TenantID: "local", ProjectID: "local"}
	for _, c := range []struct {
		name   string
		poller *a2aBench
	}{{"same-instance", committer}, {"cross-instance", other}} {
		b.Run(c.name, func(b *testing.B) {
			var start contract.EventPage
			c.poller.post(b, contract.RouteA2AEventsPoll.Path, []byte(`{"limit":1000}`), &start)
			cursor := start.NextCursor
			latencies := make([]time.Duration, 0, b.N)
			for b.Loop() {
				answered := make(chan time.Time, 1)
				go func() {
					var page contract.EventPage
					c.poller.post(b, contract.RouteA2AEventsPoll.Path, mustMarshal(b, map[string]any{"cursor": cursor, "waitMs": 30000}), &page)
					cursor = page.NextCursor
					answered <- time.Now()
				}()
				for c.poller.main.hub.Waiting() == 0 {
					time.Sleep(50 * time.Microsecond)
				}
				var committing time.Time
				require.NoError(b, db.A2A().WithinTx(context.Background(), func(ctx context.Context, tx a2a.Stores) error {
					_, err := tx.Events.AppendEvents(ctx, scope, []runtime.NewEvent{memory.EntryWrittenEvent("bench", "e", "", "created", 1)})
					committing = time.Now()
					return err
				}))
				latencies = append(latencies, (<-answered).Sub(committing))
			}
			reportPercentiles(b, latencies)
		})
	}
}

func reportPercentiles(b *testing.B, d []time.Duration) {
	slices.Sort(d)
	at := func(p float64) float64 { return float64(d[int(p*float64(len(d)-1))].Microseconds()) / 1000 }
	b.ReportMetric(at(0.50), "p50-ms")
	b.ReportMetric(at(0.99), "p99-ms")
}

// BenchmarkA2ALongPollConnections holds 1,000 long polls at once on one replica and
// counts the replica's database connections while they wait (the pool's, River's and
// the event hub's listening and hint connections, never one per poll), then wakes
// them all with one commit and reports how long until the last answer arrived.
//
//	go test -run '^$' -bench BenchmarkA2ALongPollConnections -benchtime 1x ./cmd/agent-context
func BenchmarkA2ALongPollConnections(b *testing.B) {
	const polls = 1000
	app := startA2ABench(b, pgtest.NewDSN(b))
	var start contract.EventPage
	app.post(b, contract.RouteA2AEventsPoll.Path, []byte(`{}`), &start)
	body := mustMarshal(b, map[string]any{"cursor": start.NextCursor, "waitMs": 30000})
	for b.Loop() {
		var wg sync.WaitGroup
		var mu sync.Mutex
		var last time.Time
		for range polls {
			wg.Go(func() {
				var page contract.EventPage
				app.post(b, contract.RouteA2AEventsPoll.Path, body, &page)
				require.Len(b, page.Events, 1)
				now := time.Now()
				mu.Lock()
				if now.After(last) {
					last = now
				}
				mu.Unlock()
			})
		}
		// Admitted; a second more for each to run its first statement and wait.
		require.Eventually(b, func() bool { return a2aWaiters(b, app.main) == polls }, time.Minute, time.Millisecond)
		time.Sleep(time.Second)
		b.ReportMetric(float64(serviceConnections(b, app.pool)), "db-conns")
		b.ReportMetric(float64(app.main.pool.Config().MaxConns), "pool-max")
		committed := time.Now()
		app.post(b, contract.RouteA2AMessagesPost.Path, []byte(`{"content":"wake up, everyone"}`), nil)
		wg.Wait()
		b.ReportMetric(float64(last.Sub(committed).Milliseconds()), "wake-all-ms")
		body = mustMarshal(b, map[string]any{"waitMs": 30000, "cursor": lastCursor(b, app)})
	}
}

// serviceConnections counts the service's sessions on its database.
func serviceConnections(b *testing.B, pool *pgxpool.Pool) int64 {
	var n int64
	require.NoError(b, pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
		WHERE datname = current_database() AND application_name LIKE 'agent-context%'`).Scan(&n))
	return n
}

// lastCursor is the cursor at the head of the log.
func lastCursor(b *testing.B, app *a2aBench) string {
	var page contract.EventPage
	app.post(b, contract.RouteA2AEventsPoll.Path, []byte(`{"limit":1000}`), &page)
	return page.NextCursor
}

// floorSelect is the read of BenchmarkA2ATenants' floor: the floor scope's newest 50
// messages.
const floorSelect = `SELECT message_id, content FROM a2a_messages
	WHERE tenant_id = 'floor' AND project_id = 'floor' ORDER BY created_at_ms DESC, message_id DESC LIMIT 50`

// BenchmarkA2ATenants measures what tenants cost one another, on a cluster of its own
// with fsync and synchronous commit on (the test clusters turn both off) and the
// service in a process of its own, over HTTP on loopback, every rate limit off:
//   - messages-8c-1t: 8 clients in one tenant, each posting a broadcast and reading its
//     unread messages (a pair);
//   - messages-16c-16t: 16 clients, each in a tenant of its own, the same pairs;
//   - windows-4c-4t and windows-16c-16t: 4 and 16 clients, each in a tenant of its
//     own, creating 20-item windows;
//   - floor-8c and floor-16c: the floor in the same run, one committed insert and one
//     indexed 50-row select per pair through a pgx pool of as many connections as
//     clients; and floor-16c-notify-in-tx, the same with a pg_notify committed in the
//     insert's transaction, as every event append did before wake-ups became hints;
//   - floor-http-8c and floor-http-16c: the floor's pairs, each with two requests the
//     service refuses without touching the database: the most a service over HTTP
//     could reach on these cores if it sent nothing but the floor's statements.
//
// Compare each with the floor of its client count. Each tenant is warmed up first (a
// few pairs, then ANALYZE).
//
//	go test -run '^$' -bench BenchmarkA2ATenants -benchtime 3000x -timeout 30m ./cmd/agent-context
func BenchmarkA2ATenants(b *testing.B) {
	const tenants, maxClients = 16, 16
	ctx := context.Background()
	settings := pgtest.ServerSettings()
	settings["fsync"], settings["synchronous_commit"], settings["full_page_writes"] = "on", "on", "on"
	cluster, err := pgcluster.Start(ctx, pgcluster.Options{DataDir: filepath.Join(b.TempDir(), "pg"), Settings: settings})
	require.NoError(b, err)
	b.Cleanup(func() { require.NoError(b, cluster.Stop(context.Background())) })
	dsn := cluster.DSN()
	require.NoError(b, postgres.Migrate(ctx, dsn))
	svc := startServiceProcess(b, dsn, fmt.Sprintf("AGENT_CONTEXT_DB_MAX_CONNS=%d", maxClients), "AGENT_CONTEXT_ALLOW_OPEN=true",
		"AGENT_CONTEXT_RATE_LIMIT_GLOBAL_PER_MIN=0", "AGENT_CONTEXT_RATE_LIMIT_TOOL_PER_MIN=0", "AGENT_CONTEXT_JOB_WORKERS=0")
	client := &http.Client{Timeout: time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: 2 * maxClients}}
	// send posts body to path and expects one of the statuses want.
	send := func(path string, body []byte, want []int, headers ...string) {
		req, err := http.NewRequest(http.MethodPost, svc.base+path, bytes.NewReader(body))
		require.NoError(b, err)
		req.Header.Set("Content-Type", "application/json")
		for i := 0; i+1 < len(headers); i += 2 {
			req.Header.Set(headers[i], headers[i+1])
		}
		resp, err := client.Do(req)
		require.NoError(b, err)
		defer resp.Body.Close()
		data, err := io.ReadAll(resp.Body)
		require.NoError(b, err)
		require.Contains(b, want, resp.StatusCode, "%s", data)
	}
	post := func(path string, body []byte, headers ...string) {
		send(path, body, []int{http.StatusOK, http.StatusCreated}, headers...)
	}
	caller := func(tenant int, subject string) []string {
		return []string{"x-infra-tenant-id", fmt.Sprintf("tenant-%d", tenant), "x-infra-project-id", "bench",
			"x-infra-subject", subject}
	}
	pair := func(run int64, tenant, c int, i int64) {
		post(contract.RouteA2AMessagesPost.Path, mustMarshal(b, map[string]any{
			"messageId": fmt.Sprintf("m-%d-%d", run, i), "content": "status update from the planner", "category": "task_update",
		}), caller(tenant, fmt.Sprintf("sender-%d", c))...)
		post(contract.RouteA2AMessagesRead.Path, []byte(`{}`), caller(tenant, fmt.Sprintf("reader-%d", c))...)
	}
	items := make([]map[string]any, 20)
	for i := range items {
		items[i] = map[string]any{"id": fmt.Sprintf("item-%d", i), "ordinal": i, "kind": "message", "role": "user",
			"content": fmt.Sprintf("what the model saw, part %d", i)}
	}
	window := func(run int64, tenant, c int, i int64) {
		post(contract.RouteWindowsCreate.Path, mustMarshal(b, map[string]any{
			"id": fmt.Sprintf("w-%d-%d", run, i), "conversation": map[string]any{"conversationId": fmt.Sprintf("conv-%d", c)},
			"stage": "original", "purpose": "answer", "tokenCount": 400, "items": items,
		}), caller(tenant, fmt.Sprintf("agent-%d", c))...)
	}
	for tenant := range tenants {
		for i := range 20 {
			pair(-1, tenant, i%maxClients, int64(tenant*100+i))
			window(-1, tenant, i%maxClients, int64(tenant*100+i))
		}
	}
	floorPool := func(clients int) *pgxpool.Pool {
		// The floor's select reads the newest 50 through the time index whatever the
		// statistics say. Its scope grows by a row per pair from the hundred rows the
		// ANALYZE below sees, and the plan chosen for those (a bitmap scan and a sort)
		// reads the whole scope on every select: it put the 8-client floor at 1,552
		// pairs/s instead of 5,129, until autovacuum analyzed the table again.
		pool, err := postgres.NewPool(ctx, dsn+"&enable_bitmapscan=off&enable_sort=off",
			postgres.PoolOptions{MaxConns: int32(clients), ApplicationName: "bench-floor"})
		require.NoError(b, err)
		b.Cleanup(pool.Close)
		for range 100 {
			_, err := pool.Exec(ctx, `INSERT INTO a2a_messages (tenant_id, project_id, message_id, seq, correlation_id,
				    from_agent, category, priority, privacy, content, created_at_ms, expires_at_ms)
				VALUES ('floor', 'floor', $1, $2, $1, 'warm', 'task_update', 'normal', 'team', 'warm', 1, 2)`,
				fmt.Sprintf("warm-%d-%d", clients, runIDs.Add(1)), -runIDs.Add(1))
			require.NoError(b, err)
		}
		return pool
	}
	floors := map[int]*pgxpool.Pool{8: floorPool(8), 16: floorPool(16)}
	admin, err := postgres.NewPool(ctx, dsn, postgres.PoolOptions{MaxConns: 1, ApplicationName: "bench-admin"})
	require.NoError(b, err)
	b.Cleanup(admin.Close)
	_, err = admin.Exec(ctx, "ANALYZE")
	require.NoError(b, err)
	rows, err := floors[8].Query(ctx, `EXPLAIN `+floorSelect)
	require.NoError(b, err)
	plan, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(b, err)
	require.Contains(b, strings.Join(plan, "\n"), "Index Scan Backward using a2a_messages_by_time", "the floor's select is an index read")

	floorPair := func(pool *pgxpool.Pool, run int64, c int, i int64) {
		now := time.Now().UnixMilli()
		_, err := pool.Exec(ctx, `INSERT INTO a2a_messages (tenant_id, project_id, message_id, seq, correlation_id,
			    from_agent, category, priority, privacy, content, created_at_ms, expires_at_ms)
			VALUES ('floor', 'floor', $1, $2, $1, $3, 'task_update', 'normal', 'team', 'status update from the planner',
			    $4::bigint, $4::bigint + 43200000)`,
			fmt.Sprintf("f-%d-%d", run, i), run<<32|i, fmt.Sprintf("sender-%d", c), now)
		require.NoError(b, err)
		rows, err := pool.Query(ctx, floorSelect)
		require.NoError(b, err)
		rows.Close()
		require.NoError(b, rows.Err())
	}
	floor := func(clients int) func(b *testing.B) {
		return func(b *testing.B) {
			pool, run := floors[clients], runIDs.Add(1)
			parallelN(b, clients, "pairs/s", func(c int, i int64) { floorPair(pool, run, c, i) })
		}
	}
	// The floor behind HTTP: the floor's pair and two requests the service answers
	// without the database (a post it refuses as invalid, with its log line and error
	// envelope), on the same cores: what a service that sent only the floor's
	// statements could reach over HTTP here, at most.
	refused := mustMarshal(b, map[string]any{"content": ""})
	refusedPost := func(c int) {
		send(contract.RouteA2AMessagesPost.Path, refused, []int{http.StatusBadRequest}, caller(c, fmt.Sprintf("sender-%d", c))...)
	}
	floorBehindHTTP := func(clients int) func(b *testing.B) {
		return func(b *testing.B) {
			pool, run := floors[clients], runIDs.Add(1)
			parallelN(b, clients, "pairs/s", func(c int, i int64) {
				refusedPost(c)
				floorPair(pool, run, c, i)
				refusedPost(c)
			})
		}
	}
	b.Run("floor-8c", floor(8))
	b.Run("floor-http-8c", floorBehindHTTP(8))
	b.Run("messages-8c-1t", func(b *testing.B) {
		run := runIDs.Add(1)
		parallelN(b, 8, "pairs/s", func(c int, i int64) { pair(run, 0, c, i) })
	})
	b.Run("floor-16c", floor(16))
	b.Run("floor-http-16c", floorBehindHTTP(16))
	b.Run("messages-16c-16t", func(b *testing.B) {
		run := runIDs.Add(1)
		parallelN(b, 16, "pairs/s", func(c int, i int64) { pair(run, c, c, i) })
	})
	for _, clients := range []int{4, 16} {
		b.Run(fmt.Sprintf("windows-%dc-%dt", clients, clients), func(b *testing.B) {
			run := runIDs.Add(1)
			parallelN(b, clients, "windows/s", func(c int, i int64) { window(run, c, c, i) })
		})
	}
	// What a NOTIFY in the writing transaction costs by itself: the floor's insert
	// and a pg_notify committed together, as every append did before the hints.
	b.Run("floor-16c-notify-in-tx", func(b *testing.B) {
		pool, run := floors[16], runIDs.Add(1)
		parallelN(b, 16, "pairs/s", func(c int, i int64) {
			tx, err := pool.Begin(ctx)
			require.NoError(b, err)
			_, err = tx.Exec(ctx, `INSERT INTO a2a_messages (tenant_id, project_id, message_id, seq, correlation_id,
				    from_agent, category, priority, privacy, content, created_at_ms, expires_at_ms)
				VALUES ('floor', 'floor', $1, $2, $1, $3, 'task_update', 'normal', 'team', 'status update from the planner',
				    1, 2)`, fmt.Sprintf("n-%d-%d", run, i), run<<32|i, fmt.Sprintf("sender-%d", c))
			require.NoError(b, err)
			_, err = tx.Exec(ctx, `SELECT pg_notify('bench_floor', $1)`, fmt.Sprintf("tenant-%d", c))
			require.NoError(b, err)
			require.NoError(b, tx.Commit(ctx))
			rows, err := pool.Query(ctx, floorSelect)
			require.NoError(b, err)
			rows.Close()
			require.NoError(b, rows.Err())
		})
	})
}
