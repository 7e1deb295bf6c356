package postgres_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/adapters/postgres"
	"github.com/agent-context/agent-context/adapters/postgres/pgcluster"
	"github.com/agent-context/agent-context/adapters/postgres/pgtest"
	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
	"github.com/agent-context/agent-context/runtime/a2a"
	"github.com/agent-context/agent-context/runtime/conversation"
	"github.com/agent-context/agent-context/runtime/memory"
)

// a2aClock is a clock tests move by hand.
type a2aClock struct{ ms atomic.Int64 }

func (c *a2aClock) Now() time.Time          { return time.UnixMilli(c.ms.Load()) }
func (c *a2aClock) advance(d time.Duration) { c.ms.Add(d.Milliseconds()) }

const a2aStartMs = 1_800_000_000_000

// a2aBundle is the A2A use cases over a real database, with the event hub listening.
type a2aBundle struct {
	pool  *pgxpool.Pool
	db    *postgres.DB
	hub   *postgres.EventHub
	a2a   *a2a.Coordination
	clock *a2aClock
	scope runtime.Scope
}

type a2aOptions struct {
	maxMessages int
	sweepBatch  int
	maxWaiters  int
}

func setupA2A(t testing.TB, opts ...a2aOptions) *a2aBundle {
	t.Helper()
	return setupA2AOn(t, pgtest.NewDB(t), opts...)
}

// setupA2AConns is setupA2A over a pool of its own of maxConns connections.
func setupA2AConns(t testing.TB, maxConns int32) *a2aBundle {
	t.Helper()
	pool, err := postgres.NewPool(context.Background(), pgtest.NewDSN(t), postgres.PoolOptions{MaxConns: maxConns})
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return setupA2AOn(t, pool)
}

func setupA2AOn(t testing.TB, pool *pgxpool.Pool, opts ...a2aOptions) *a2aBundle {
	t.Helper()
	var o a2aOptions
	if len(opts) > 0 {
		o = opts[0]
	}
	hub, err := postgres.NewEventHub(context.Background(), pool, postgres.EventHubOptions{})
	require.NoError(t, err)
	t.Cleanup(hub.Close)
	db := newDB(t, pool, postgres.DBOptions{Hints: hub})
	clock := &a2aClock{}
	clock.ms.Store(a2aStartMs)
	return &a2aBundle{
		pool: pool, db: db, hub: hub, clock: clock, scope: runtime.Scope{TenantID: "tenant-a", ProjectID: "project-a"},
		a2a: a2a.NewCoordination(a2a.Config{
			DB: db.A2A(), Cursors: runtime.NewCursorCodec(make([]byte, 32)), Notifier: hub, Clock: clock,
			MaxMessages: o.maxMessages, SweepBatch: o.sweepBatch, MaxWaitersPerTenant: o.maxWaiters,
		}),
	}
}

// agent is a caller of the bundle's scope holding every A2A capability but a2a:admin.
func (b *a2aBundle) agent(subject string) runtime.Principal {
	return runtime.Principal{Scope: b.scope, Subject: subject, Capabilities: map[string]bool{
		contract.CapA2ASend: true, contract.CapA2ARead: true, contract.CapA2ATasks: true,
	}}
}

func (b *a2aBundle) post(t testing.TB, p runtime.Principal, req contract.PostMessageRequest) contract.MessageAck {
	t.Helper()
	if req.Content == nil {
		req.Content = ptr("hello")
	}
	ack, err := b.a2a.Messages.PostMessage(context.Background(), p, &req)
	require.NoError(t, err)
	return *ack
}

func (b *a2aBundle) read(t testing.TB, p runtime.Principal, req contract.ReadMessagesRequest) []contract.AgentMessage {
	t.Helper()
	res, err := b.a2a.Messages.ReadMessages(context.Background(), p, &req)
	require.NoError(t, err)
	return res.Messages
}

func agentMessageIDs(msgs []contract.AgentMessage) []string {
	ids := make([]string, len(msgs))
	for i, m := range msgs {
		ids[i] = m.ID
	}
	return ids
}

// count returns the value of a single-number query.
func (b *a2aBundle) count(t testing.TB, sql string, args ...any) int64 {
	t.Helper()
	var n int64
	require.NoError(t, b.pool.QueryRow(context.Background(), sql, args...).Scan(&n))
	return n
}

// requireLiveCount asserts that the head's message count is exact.
func (b *a2aBundle) requireLiveCount(t testing.TB, want int64) {
	t.Helper()
	require.Equal(t, want, b.count(t, `SELECT count(*) FROM a2a_messages WHERE tenant_id = $1 AND project_id = $2`,
		b.scope.TenantID, b.scope.ProjectID), "messages stored")
	require.Equal(t, want, b.count(t, `SELECT live_messages FROM a2a_heads WHERE tenant_id = $1 AND project_id = $2`,
		b.scope.TenantID, b.scope.ProjectID), "the head's count")
}

func (b *a2aBundle) poll(t testing.TB, p runtime.Principal, req contract.PollEventsRequest) *contract.EventPage {
	t.Helper()
	page, err := b.a2a.Events.PollEvents(context.Background(), p, &req)
	require.NoError(t, err)
	return page
}

func TestA2AMessagesBoundEvictsTheOldest(t *testing.T) {
	t.Parallel()
	b := setupA2A(t, a2aOptions{maxMessages: 3})
	sender, reader := b.agent("sender"), b.agent("reader")
	for i := range 5 {
		b.post(t, sender, contract.PostMessageRequest{MessageID: ptr(fmt.Sprintf("m%d", i))})
		b.clock.advance(time.Millisecond)
	}
	b.requireLiveCount(t, 3)
	require.Equal(t, []string{"m2", "m3", "m4"}, agentMessageIDs(b.read(t, reader, contract.ReadMessagesRequest{})))
	require.EqualValues(t, 3, b.count(t, `SELECT count(*) FROM a2a_message_reads`))
	// A re-post of an evicted ID is a new message; one of a live ID a duplicate. The
	// message it evicts takes its read mark along.
	require.Equal(t, contract.AckAccepted, b.post(t, sender, contract.PostMessageRequest{MessageID: ptr("m0")}).Status)
	require.Equal(t, contract.AckDuplicate, b.post(t, sender, contract.PostMessageRequest{MessageID: ptr("m4")}).Status)
	b.requireLiveCount(t, 3)
	require.EqualValues(t, 2, b.count(t, `SELECT count(*) FROM a2a_message_reads r JOIN a2a_messages m
		ON m.tenant_id = r.tenant_id AND m.project_id = r.project_id AND m.seq = r.message_seq`))
	require.EqualValues(t, 2, b.count(t, `SELECT count(*) FROM a2a_message_reads`), "no mark outlives its message")
	// Every accepted post announced itself once, numbered in order; the duplicate
	// announced nothing.
	page := b.poll(t, reader, contract.PollEventsRequest{})
	require.Equal(t, []string{"message_posted", "message_posted", "message_posted", "message_posted", "message_posted",
		"message_posted"}, eventKinds(page.Events))
	for i, e := range page.Events {
		require.EqualValues(t, i+1, e.Sequence)
		require.Equal(t, []string{"m0", "m1", "m2", "m3", "m4", "m0"}[i], e.CorrelationID)
	}
}

// TestA2AMessagePlansNeverScanOtherScopes: a connection keeps a statement's generic
// plan for its life, made on the statistics of the moment. Planned while the tables
// held a few rows (as after a deployment, once autovacuum analyzed them), a post's and
// a read's statements must still be key lookups once another scope has grown: a
// sequential scan would read every tenant's messages on every post.
func TestA2AMessagePlansNeverScanOtherScopes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// One connection: every statement below is planned and cached on it.
	b := setupA2AConns(t, 1)
	pool := b.pool
	tables := []string{"a2a_messages", "a2a_message_reads", "a2a_read_watermarks", "a2a_heads"}
	for _, table := range tables {
		// Autovacuum's ANALYZE of the grown table would replan and hide the stale plans.
		_, err := pool.Exec(ctx, "ALTER TABLE "+table+" SET (autovacuum_enabled = false)")
		require.NoError(t, err)
	}
	sender, reader := b.agent("sender"), b.agent("reader")
	pair := func(i int) {
		b.post(t, sender, contract.PostMessageRequest{MessageID: ptr(fmt.Sprintf("m%d", i))})
		b.read(t, reader, contract.ReadMessagesRequest{})
		b.clock.advance(time.Millisecond)
	}
	pair(0)
	_, err := pool.Exec(ctx, "ANALYZE")
	require.NoError(t, err)
	// Past the five custom plans after which Postgres settles on a generic one.
	for i := 1; i <= 10; i++ {
		pair(i)
	}
	const others = 5000
	_, err = pool.Exec(ctx, `INSERT INTO a2a_messages (tenant_id, project_id, message_id, seq, correlation_id, from_agent,
		    category, priority, privacy, content, created_at_ms, expires_at_ms)
		SELECT 'tenant-other', 'project-other', 'o' || g, g, 'o' || g, 'someone', 'task_update', 'normal', 'team', 'elsewhere',
		    $1::bigint, $1::bigint + 3600000
		FROM generate_series(1, $2::int) g`, a2aStartMs, others)
	require.NoError(t, err)
	// Table counters of the one connection, flushed to the statistics on demand.
	read := func() (seqRead int64) {
		_, err := pool.Exec(ctx, "SELECT pg_stat_force_next_flush()")
		require.NoError(t, err)
		require.NoError(t, pool.QueryRow(ctx, `SELECT sum(coalesce(seq_tup_read, 0))::bigint FROM pg_stat_user_tables
			WHERE relname = ANY ($1)`, tables).Scan(&seqRead))
		return seqRead
	}
	before := read()
	for i := 11; i <= 15; i++ {
		pair(i)
	}
	require.Less(t, read()-before, int64(others), "a post or a read scanned the table")
}

// TestA2APostLeavesTheUnitOfWorkAsFound: a post plans its batch without sequential
// scans; inside a unit of work, the statements after it run as they would without it.
func TestA2APostLeavesTheUnitOfWorkAsFound(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.NewDB(t)
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	seqScans := func() (v string) {
		require.NoError(t, tx.QueryRow(ctx, "SHOW enable_seqscan").Scan(&v))
		return v
	}
	require.Equal(t, "on", seqScans())
	scope := runtime.Scope{TenantID: "tenant-a", ProjectID: "project-a"}
	m := contract.AgentMessage{ID: "m1", CorrelationID: "m1", FromAgent: "sender", Category: "task_update", Priority: "normal",
		Privacy: "team", Content: "hello", CreatedAtMs: a2aStartMs, ExpiresAtMs: a2aStartMs + 60_000}
	announce := runtime.EventOf(contract.EventMessagePosted, "sender", "m1", contract.ConsistencyStrong,
		nil, map[string]string{"messageId": "m1"}, a2aStartMs)
	_, created, err := postgres.AgentMessagesOver(tx).PostMessage(ctx, scope, &m, 100, a2aStartMs, announce)
	require.NoError(t, err)
	require.True(t, created)
	require.Equal(t, "on", seqScans())
}

func TestA2AMessagesExpireAndArePurged(t *testing.T) {
	t.Parallel()
	b := setupA2A(t)
	sender, reader := b.agent("sender"), b.agent("reader")
	b.post(t, sender, contract.PostMessageRequest{MessageID: ptr("short"), TTLHours: ptr[int64](1)})
	b.post(t, sender, contract.PostMessageRequest{MessageID: ptr("long"), TTLHours: ptr[int64](3)})
	b.requireLiveCount(t, 2)

	// Past the first TTL: invisible and, once read, gone from the table and the count.
	b.clock.advance(time.Hour)
	require.Equal(t, []string{"long"}, agentMessageIDs(b.read(t, reader, contract.ReadMessagesRequest{MarkRead: ptr(false)})))
	b.requireLiveCount(t, 1)

	// A post purges too, and an expired ID may be posted again as a new message.
	b.clock.advance(2 * time.Hour)
	require.Equal(t, contract.AckAccepted, b.post(t, sender, contract.PostMessageRequest{MessageID: ptr("long")}).Status)
	b.requireLiveCount(t, 1)

	// The sweeper purges without any read or post, in bounded batches.
	for i := range 5 {
		b.post(t, sender, contract.PostMessageRequest{MessageID: ptr(fmt.Sprintf("s%d", i)), TTLHours: ptr[int64](1)})
	}
	b.clock.advance(2 * time.Hour)
	finished, err := b.a2a.Sweeper.SweepA2A(context.Background(), b.clock.Now(), b.clock.Now().Add(time.Minute))
	require.NoError(t, err)
	require.True(t, finished)
	b.requireLiveCount(t, 1)
	require.Equal(t, []string{"long"}, agentMessageIDs(b.read(t, reader, contract.ReadMessagesRequest{})))
}

func TestA2AReadMarksAndNeverDeliversTwice(t *testing.T) {
	t.Parallel()
	b := setupA2A(t)
	sender, reader := b.agent("sender"), b.agent("reader")
	const n = 40
	for i := range n {
		b.post(t, sender, contract.PostMessageRequest{MessageID: ptr(fmt.Sprintf("m%02d", i))})
	}
	// Concurrent marking reads of one agent split the unread messages between them.
	var mu sync.Mutex
	var got []string
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for r := range errs {
		wg.Go(func() {
			for {
				res, err := b.a2a.Messages.ReadMessages(context.Background(), reader, &contract.ReadMessagesRequest{Limit: ptr(3)})
				if err != nil || len(res.Messages) == 0 {
					errs[r] = err
					return
				}
				mu.Lock()
				got = append(got, agentMessageIDs(res.Messages)...)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	slices.Sort(got)
	require.Len(t, got, n, "every message delivered exactly once")
	require.Len(t, slices.Compact(got), n)
	require.Empty(t, b.read(t, reader, contract.ReadMessagesRequest{}))
	require.Len(t, b.read(t, reader, contract.ReadMessagesRequest{IncludeRead: true, Limit: ptr(500)}), n)
	// Another agent's read state is its own.
	require.Len(t, b.read(t, b.agent("other"), contract.ReadMessagesRequest{Limit: ptr(500)}), n)

	// Marks go with their messages; marks whose message vanished underneath a read
	// are swept.
	b.clock.advance(13 * time.Hour)
	require.Empty(t, b.read(t, reader, contract.ReadMessagesRequest{IncludeRead: true}))
	require.Zero(t, b.count(t, `SELECT count(*) FROM a2a_message_reads`))
	b.post(t, sender, contract.PostMessageRequest{MessageID: ptr("m00")})
	require.Len(t, b.read(t, reader, contract.ReadMessagesRequest{}), 1, "a re-posted ID is a new, unread message")
	_, err := b.pool.Exec(context.Background(), `DELETE FROM a2a_messages`)
	require.NoError(t, err)
	require.EqualValues(t, 1, b.count(t, `SELECT count(*) FROM a2a_message_reads`))
	_, err = b.a2a.Sweeper.SweepA2A(context.Background(), b.clock.Now(), b.clock.Now().Add(time.Minute))
	require.NoError(t, err)
	require.Zero(t, b.count(t, `SELECT count(*) FROM a2a_message_reads`))
}

func (b *a2aBundle) createTask(t testing.TB, p runtime.Principal, req contract.CreateTaskRequest) *contract.Task {
	t.Helper()
	if req.Description == nil {
		req.Description = ptr("do the thing")
	}
	task, created, err := b.a2a.Tasks.CreateTask(context.Background(), p, &req)
	require.NoError(t, err)
	require.True(t, created)
	return task
}

func (b *a2aBundle) update(p runtime.Principal, req contract.UpdateTaskRequest) (*contract.Task, error) {
	return b.a2a.Tasks.UpdateTask(context.Background(), p, &req)
}

// Ten participants race to move a working task on: exactly one wins, and every other
// gets a 409, whether it raced blind (INVALID_TRANSITION from the winner's terminal
// state) or with the version it read (CONFLICT).
func TestA2ATaskConcurrentTransitionsOneWins(t *testing.T) {
	t.Parallel()
	b := setupA2A(t)
	creator, worker := b.agent("creator"), b.agent("worker")
	for _, withVersion := range []bool{false, true} {
		task := b.createTask(t, creator, contract.CreateTaskRequest{ToAgent: "worker"})
		working, err := b.update(worker, contract.UpdateTaskRequest{TaskID: task.ID, State: contract.TaskWorking})
		require.NoError(t, err)
		// Blind racers move to terminal states, so no winner's state lets a second one
		// through; racers holding the version may aim anywhere.
		targets := []string{contract.TaskCompleted, contract.TaskFailed}
		if withVersion {
			targets = append(targets, contract.TaskInputRequired)
		}
		var wg sync.WaitGroup
		errs := make([]error, 10)
		start := make(chan struct{})
		for i := range errs {
			wg.Go(func() {
				<-start
				req := contract.UpdateTaskRequest{TaskID: task.ID, State: targets[i%len(targets)]}
				if withVersion {
					req.ExpectedVersion = ptr(working.Version)
				}
				_, errs[i] = b.update([]runtime.Principal{creator, worker}[i%2], req)
			})
		}
		close(start)
		wg.Wait()
		wins := 0
		for _, err := range errs {
			if err == nil {
				wins++
				continue
			}
			code := runtime.ErrorCode(err)
			require.Contains(t, []string{contract.CodeInvalidTransition, contract.CodeConflict}, code, "%v", err)
			require.Equal(t, 409, contract.Codes[code].Status)
		}
		require.Equal(t, 1, wins, "with expectedVersion %v: %v", withVersion, errs)
		stored, err := b.a2a.Tasks.GetTask(context.Background(), creator, &contract.TaskRequest{TaskID: task.ID})
		require.NoError(t, err)
		require.Equal(t, working.Version+1, stored.Version)
		require.Len(t, stored.History, 3, "created, working and the one winner")
	}
}

func TestA2ATaskLifecycle(t *testing.T) {
	t.Parallel()
	b := setupA2A(t)
	ctx := context.Background()
	creator, worker, stranger := b.agent("creator"), b.agent("worker"), b.agent("stranger")
	task := b.createTask(t, creator, contract.CreateTaskRequest{
		ID: ptr("t-1"), ToAgent: "worker", Parts: []contract.Part{{Type: contract.PartText, Text: ptr("please")}},
		Metadata: []byte(`{"k": 1}`),
	})
	require.Equal(t, contract.TaskCreated, task.State)
	require.Equal(t, "t-1", task.ContextID)
	require.EqualValues(t, 1, task.Version)
	require.Len(t, task.Messages, 1)
	require.Equal(t, contract.TaskRoleUser, task.Messages[0].Role)

	// An identical retry returns the stored task; a different one is refused.
	again, created, err := b.a2a.Tasks.CreateTask(ctx, creator, &contract.CreateTaskRequest{
		ID: ptr("t-1"), ToAgent: "worker", Description: ptr("do the thing"),
		Parts: []contract.Part{{Type: contract.PartText, Text: ptr("please")}}, Metadata: []byte(`{ "k" : 1 }`),
	})
	require.NoError(t, err)
	require.False(t, created)
	require.Equal(t, task.Version, again.Version)
	_, _, err = b.a2a.Tasks.CreateTask(ctx, creator, &contract.CreateTaskRequest{ID: ptr("t-1"), ToAgent: "worker", Description: ptr("other")})
	require.Equal(t, contract.CodeIdempotencyConflict, runtime.ErrorCode(err))

	// Non-participants see nothing, on every route.
	_, err = b.a2a.Tasks.GetTask(ctx, stranger, &contract.TaskRequest{TaskID: "t-1"})
	require.Equal(t, contract.CodeNotFound, runtime.ErrorCode(err))
	_, err = b.update(stranger, contract.UpdateTaskRequest{TaskID: "t-1", State: contract.TaskWorking})
	require.Equal(t, contract.CodeNotFound, runtime.ErrorCode(err))
	_, err = b.a2a.Tasks.CancelTask(ctx, stranger, &contract.CancelTaskRequest{TaskID: "t-1"})
	require.Equal(t, contract.CodeNotFound, runtime.ErrorCode(err))
	_, err = b.a2a.Tasks.MessageTask(ctx, stranger, &contract.TaskMessageRequest{TaskID: "t-1", Parts: []contract.Part{{Type: "text", Text: ptr("x")}}})
	require.Equal(t, contract.CodeNotFound, runtime.ErrorCode(err))
	admin := stranger
	admin.Capabilities = map[string]bool{contract.CapA2ATasks: true, contract.CapA2AAdmin: true}
	_, err = b.a2a.Tasks.GetTask(ctx, admin, &contract.TaskRequest{TaskID: "t-1"})
	require.NoError(t, err, "a2a:admin reads any task")

	// The recipient works, asks, gets an answer, delivers an artifact and completes.
	_, err = b.update(worker, contract.UpdateTaskRequest{TaskID: "t-1", State: contract.TaskWorking, Message: ptr("on it")})
	require.NoError(t, err)
	_, err = b.update(worker, contract.UpdateTaskRequest{TaskID: "t-1", State: contract.TaskInputRequired})
	require.NoError(t, err)
	answered, err := b.a2a.Tasks.MessageTask(ctx, creator, &contract.TaskMessageRequest{TaskID: "t-1",
		Parts: []contract.Part{{Type: contract.PartData, Data: []byte(`{"answer": 42}`)}}})
	require.NoError(t, err)
	require.Len(t, answered.Messages, 2)
	require.Equal(t, contract.TaskRoleUser, answered.Messages[1].Role)
	_, err = b.update(worker, contract.UpdateTaskRequest{TaskID: "t-1", State: contract.TaskWorking})
	require.NoError(t, err)
	stale := answered.Version
	_, err = b.update(worker, contract.UpdateTaskRequest{TaskID: "t-1", State: contract.TaskCompleted, ExpectedVersion: &stale})
	require.Equal(t, contract.CodeConflict, runtime.ErrorCode(err), "a stale expectedVersion")
	done, err := b.update(worker, contract.UpdateTaskRequest{TaskID: "t-1", State: contract.TaskCompleted,
		ExpectedVersion: ptr(stale + 1), Artifacts: []contract.TaskArtifactInput{{ArtifactID: ptr("a-1"), Name: ptr("report"),
			Parts: []contract.Part{{Type: contract.PartFile, Name: ptr("r.txt"), MimeType: ptr("text/plain"), Bytes: ptr("aGk=")}}}}})
	require.NoError(t, err)
	require.Equal(t, contract.TaskCompleted, done.State)
	require.EqualValues(t, 6, done.Version)
	require.Len(t, done.Artifacts, 1)
	var moves []string
	for _, h := range done.History {
		moves = append(moves, h.To)
	}
	require.Equal(t, []string{"created", "working", "input-required", "working", "completed"}, moves)
	require.Equal(t, "on it", *done.History[1].Reason)
	require.Equal(t, "worker", done.History[1].Actor)

	// Terminal: no more transitions, messages or cancels.
	_, err = b.update(worker, contract.UpdateTaskRequest{TaskID: "t-1", State: contract.TaskWorking})
	require.Equal(t, contract.CodeInvalidTransition, runtime.ErrorCode(err))
	_, err = b.a2a.Tasks.MessageTask(ctx, worker, &contract.TaskMessageRequest{TaskID: "t-1", Parts: []contract.Part{{Type: "text", Text: ptr("x")}}})
	require.Equal(t, contract.CodeConflict, runtime.ErrorCode(err))
	_, err = b.a2a.Tasks.CancelTask(ctx, creator, &contract.CancelTaskRequest{TaskID: "t-1"})
	require.Equal(t, contract.CodeInvalidTransition, runtime.ErrorCode(err))

	// Only the creator cancels, through either route.
	second := b.createTask(t, creator, contract.CreateTaskRequest{ToAgent: "worker"})
	_, err = b.a2a.Tasks.CancelTask(ctx, worker, &contract.CancelTaskRequest{TaskID: second.ID})
	require.Equal(t, contract.CodeScopeForbidden, runtime.ErrorCode(err))
	_, err = b.update(worker, contract.UpdateTaskRequest{TaskID: second.ID, State: contract.TaskCanceled})
	require.Equal(t, contract.CodeScopeForbidden, runtime.ErrorCode(err))
	canceled, err := b.a2a.Tasks.CancelTask(ctx, creator, &contract.CancelTaskRequest{TaskID: second.ID, Reason: ptr("not needed")})
	require.NoError(t, err)
	require.Equal(t, contract.TaskCanceled, canceled.State)

	// Counts and lists from each side.
	third := b.createTask(t, creator, contract.CreateTaskRequest{ToAgent: "worker"})
	info, err := b.a2a.Tasks.TaskInfo(ctx, worker, &contract.TaskInfoRequest{})
	require.NoError(t, err)
	require.Equal(t, contract.TaskInfo{Total: 3, Active: 1, Completed: 1, Canceled: 1}, *info)
	list, err := b.a2a.Tasks.ListTasks(ctx, worker, &contract.ListTasksRequest{Role: ptr("to"), Limit: ptr(2)})
	require.NoError(t, err)
	require.Equal(t, []string{"t-1", second.ID}, taskIDs(list.Tasks))
	require.EqualValues(t, 1, list.PendingCount)
	require.NotNil(t, list.NextCursor)
	require.Nil(t, list.Tasks[0].Messages, "lists carry headers only")
	list, err = b.a2a.Tasks.ListTasks(ctx, worker, &contract.ListTasksRequest{Role: ptr("to"), Limit: ptr(2), Cursor: list.NextCursor})
	require.NoError(t, err)
	require.Equal(t, []string{third.ID}, taskIDs(list.Tasks))
	require.Nil(t, list.NextCursor)
	list, err = b.a2a.Tasks.ListTasks(ctx, worker, &contract.ListTasksRequest{Role: ptr("from")})
	require.NoError(t, err)
	require.Empty(t, list.Tasks)
	list, err = b.a2a.Tasks.ListTasks(ctx, creator, &contract.ListTasksRequest{States: []string{"canceled", "created"}})
	require.NoError(t, err)
	require.Equal(t, []string{second.ID, third.ID}, taskIDs(list.Tasks))
	require.Zero(t, list.PendingCount, "nothing is addressed to the creator")
	// A cursor is bound to its caller and filter.
	page, err := b.a2a.Tasks.ListTasks(ctx, creator, &contract.ListTasksRequest{Limit: ptr(1)})
	require.NoError(t, err)
	_, err = b.a2a.Tasks.ListTasks(ctx, worker, &contract.ListTasksRequest{Limit: ptr(1), Cursor: page.NextCursor})
	require.Equal(t, contract.CodeInvalidCursor, runtime.ErrorCode(err))
	_, err = b.a2a.Tasks.ListTasks(ctx, creator, &contract.ListTasksRequest{Role: ptr("from"), Limit: ptr(1), Cursor: page.NextCursor})
	require.Equal(t, contract.CodeInvalidCursor, runtime.ErrorCode(err))

	// Terminal tasks are kept for the retention, then swept with all they hold.
	b.clock.advance(a2a.DefaultA2ATaskRetention + time.Minute)
	finished, err := b.a2a.Sweeper.SweepA2A(ctx, b.clock.Now(), b.clock.Now().Add(time.Minute))
	require.NoError(t, err)
	require.True(t, finished)
	_, err = b.a2a.Tasks.GetTask(ctx, creator, &contract.TaskRequest{TaskID: "t-1"})
	require.Equal(t, contract.CodeNotFound, runtime.ErrorCode(err))
	_, err = b.a2a.Tasks.GetTask(ctx, creator, &contract.TaskRequest{TaskID: third.ID})
	require.NoError(t, err, "an open task stays")
	for _, table := range []string{"a2a_task_messages", "a2a_task_artifacts", "a2a_task_history"} {
		require.Zero(t, b.count(t, `SELECT count(*) FROM `+table+` WHERE task_id = ANY ($1)`, []string{"t-1", second.ID}), table)
	}
}

func taskIDs(tasks []contract.Task) []string {
	ids := make([]string, len(tasks))
	for i, t := range tasks {
		ids[i] = t.ID
	}
	return ids
}

func eventKinds(events []contract.Event) []string {
	kinds := make([]string, len(events))
	for i, e := range events {
		kinds[i] = e.Kind
	}
	return kinds
}

// Writers that hold the scope's lock for a while after numbering their events, and a
// poller reading concurrently: the poller sees every sequence exactly once, without a
// gap, because a sequence is taken only after the one before it committed. (With
// numbers from a Postgres SEQUENCE, a poller could read 6 before 5 commits and step
// past 5 forever.)
func TestA2AEventSequencesAreCommitOrder(t *testing.T) {
	t.Parallel()
	b := setupA2A(t)
	ctx := context.Background()
	reader := b.agent("reader")
	const writers, perWriter = 6, 15
	var wg sync.WaitGroup
	errs := make([]error, writers)
	for w := range writers {
		wg.Go(func() {
			for i := range perWriter {
				errs[w] = b.db.A2A().WithinTx(ctx, func(ctx context.Context, tx a2a.Stores) error {
					e := memory.EntryWrittenEvent(fmt.Sprintf("writer-%d", w), fmt.Sprintf("e-%d-%d", w, i), "", "created", 1)
					if _, err := tx.Events.AppendEvents(ctx, b.scope, []runtime.NewEvent{e}); err != nil {
						return err
					}
					time.Sleep(time.Duration(i%3) * time.Millisecond)
					return nil
				})
				if errs[w] != nil {
					return
				}
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	var seen []int64
	var cursor *string
	for finished := false; ; {
		select {
		case <-done:
			finished = true
		default:
		}
		page := b.poll(t, reader, contract.PollEventsRequest{Cursor: cursor, Limit: ptr(7)})
		for _, e := range page.Events {
			seen = append(seen, e.Sequence)
		}
		cursor = &page.NextCursor
		if finished && len(page.Events) == 0 {
			break
		}
	}
	for _, err := range errs {
		require.NoError(t, err)
	}
	require.Len(t, seen, writers*perWriter)
	for i, seq := range seen {
		require.EqualValues(t, i+1, seq, "sequences arrive in order without a gap")
	}
}

func TestA2APollFiltersAdvanceTheCursor(t *testing.T) {
	t.Parallel()
	b := setupA2A(t)
	ctx := context.Background()
	alice, bob, carol := b.agent("alice"), b.agent("bob"), b.agent("carol")
	b.post(t, alice, contract.PostMessageRequest{MessageID: ptr("broadcast")})
	b.post(t, alice, contract.PostMessageRequest{MessageID: ptr("secret"), ToAgent: ptr("bob"), Privacy: ptr("private"),
		Content: ptr("the private words")})
	task := b.createTask(t, alice, contract.CreateTaskRequest{ToAgent: "bob"})
	_, err := b.a2a.Agents.RegisterAgent(ctx, carol, &contract.RegisterAgentRequest{AgentType: "reviewer"})
	require.NoError(t, err)

	all := b.poll(t, bob, contract.PollEventsRequest{})
	require.Equal(t, []string{"message_posted", "message_posted", "task_created", "agent_registered"}, eventKinds(all.Events))
	for _, e := range all.Events {
		require.NotContains(t, string(e.Payload), "private words", "payloads hold IDs, never content")
	}
	require.Equal(t, []string{"alice", "bob"}, all.Events[1].TargetAgents)
	require.Equal(t, "secret", all.Events[1].CorrelationID)
	// A third agent sees neither the private message's event nor the task's.
	third := b.poll(t, carol, contract.PollEventsRequest{})
	require.Equal(t, []string{"message_posted", "agent_registered"}, eventKinds(third.Events))
	require.Equal(t, all.NextCursor, third.NextCursor, "the cursor advanced past the rows carol may not see")

	// A filtered poll returns the matches one by one and then steps past the rest.
	filter := &contract.EventFilter{Kinds: []string{"task_created", "agent_registered"}, MinConsistency: ptr("strong")}
	page := b.poll(t, bob, contract.PollEventsRequest{Filter: filter, Limit: ptr(1)})
	require.Equal(t, []string{"task_created"}, eventKinds(page.Events))
	require.Equal(t, task.ID, page.Events[0].CorrelationID)
	page = b.poll(t, bob, contract.PollEventsRequest{Filter: filter, Limit: ptr(1), Cursor: &page.NextCursor})
	require.Empty(t, page.Events, "agent_registered is eventual, below strong")
	require.Equal(t, all.NextCursor, page.NextCursor)
	again := b.poll(t, bob, contract.PollEventsRequest{Filter: filter, Cursor: &page.NextCursor})
	require.Empty(t, again.Events)
	require.Equal(t, page.NextCursor, again.NextCursor, "at the head the cursor stays put")
	// The cursor is a position: another filter may continue from it.
	b.post(t, alice, contract.PostMessageRequest{MessageID: ptr("later"), TaskID: &task.ID})
	later := b.poll(t, bob, contract.PollEventsRequest{Cursor: &page.NextCursor,
		Filter: &contract.EventFilter{TaskID: &task.ID, Actors: []string{"alice"}}})
	require.Equal(t, []string{"message_posted"}, eventKinds(later.Events))
	_, err = b.a2a.Events.PollEvents(ctx, bob, &contract.PollEventsRequest{Cursor: ptr(page.NextCursor + "x")})
	require.Equal(t, contract.CodeInvalidCursor, runtime.ErrorCode(err))
	other := runtime.Principal{Scope: runtime.Scope{TenantID: "tenant-b", ProjectID: "project-a"}, Subject: "bob"}
	_, err = b.a2a.Events.PollEvents(ctx, other, &contract.PollEventsRequest{Cursor: &page.NextCursor})
	require.Equal(t, contract.CodeInvalidCursor, runtime.ErrorCode(err), "a cursor is bound to its scope")
}

// A poll examines a bounded window of the log per statement: a filter that matches
// nothing in a long log answers with the cursor moved past the window, and a waiting
// poll keeps scanning to the head before it waits.
func TestA2APollScansInBoundedWindows(t *testing.T) {
	t.Parallel()
	b := setupA2A(t)
	ctx := context.Background()
	const n = 12000
	events := make([]runtime.NewEvent, n)
	for i := range events {
		events[i] = memory.EntryWrittenEvent("writer", fmt.Sprintf("e-%d", i), "", "created", 1)
	}
	last, err := b.db.A2A().Stores().Events.AppendEvents(ctx, b.scope, events)
	require.NoError(t, err)
	require.EqualValues(t, n, last)
	reader := b.agent("reader")
	filter := &contract.EventFilter{Kinds: []string{"task_created"}}
	page := b.poll(t, reader, contract.PollEventsRequest{Filter: filter})
	require.Empty(t, page.Events)
	require.NotEqual(t, b.poll(t, reader, contract.PollEventsRequest{Filter: filter, Cursor: &page.NextCursor}).NextCursor,
		page.NextCursor, "the first window did not reach the head, the next one moves on")

	// A long poll scans to the head and then waits for the match.
	b.createTask(t, b.agent("writer"), contract.CreateTaskRequest{ToAgent: "reader"})
	waited := b.poll(t, reader, contract.PollEventsRequest{Filter: filter, WaitMs: ptr[int64](30_000)})
	require.Equal(t, []string{"task_created"}, eventKinds(waited.Events))
	require.EqualValues(t, n+1, waited.Events[0].Sequence)
}

// awaitWaiting blocks until n polls wait on the hub (a hang guard ends the test).
func awaitWaiting(t testing.TB, hub *postgres.EventHub, n int64) {
	t.Helper()
	require.Eventually(t, func() bool { return hub.Waiting() >= n }, time.Minute, time.Millisecond)
}

// longPoll starts a poll waiting up to 30 s and returns where its answer arrives.
func (b *a2aBundle) longPoll(t testing.TB, p runtime.Principal, cursor *string) <-chan *contract.EventPage {
	t.Helper()
	out := make(chan *contract.EventPage, 1)
	go func() {
		page, err := b.a2a.Events.PollEvents(context.Background(), p, &contract.PollEventsRequest{Cursor: cursor, WaitMs: ptr[int64](30_000)})
		if err != nil {
			t.Errorf("long poll: %v", err)
		}
		out <- page
	}()
	return out
}

func TestA2ALongPollWakesOnCommit(t *testing.T) {
	t.Parallel()
	b := setupA2A(t)
	alice, bob := b.agent("alice"), b.agent("bob")
	start := b.poll(t, bob, contract.PollEventsRequest{})
	answer := b.longPoll(t, bob, &start.NextCursor)
	awaitWaiting(t, b.hub, 1)
	// An event bob may not see wakes the poll, which finds nothing and waits again.
	b.post(t, alice, contract.PostMessageRequest{ToAgent: ptr("carol"), Privacy: ptr("private")})
	b.post(t, alice, contract.PostMessageRequest{MessageID: ptr("for-bob"), ToAgent: ptr("bob")})
	page := <-answer
	require.NotNil(t, page)
	require.Len(t, page.Events, 1)
	require.Equal(t, "for-bob", page.Events[0].CorrelationID)

	// An event in a rolled-back unit of work never reaches a poller.
	failure := fmt.Errorf("changed its mind")
	err := b.db.A2A().WithinTx(context.Background(), func(ctx context.Context, tx a2a.Stores) error {
		if _, err := tx.Events.AppendEvents(ctx, b.scope, []runtime.NewEvent{memory.EntryWrittenEvent("alice", "e", "", "created", 1)}); err != nil {
			return err
		}
		return failure
	})
	require.ErrorIs(t, err, failure)
	require.Empty(t, b.poll(t, bob, contract.PollEventsRequest{Cursor: &page.NextCursor}).Events)
}

func TestA2AEventsArePurgedAfterRetention(t *testing.T) {
	t.Parallel()
	b := setupA2A(t)
	ctx := context.Background()
	alice, bob := b.agent("alice"), b.agent("bob")
	b.post(t, alice, contract.PostMessageRequest{MessageID: ptr("old"), TTLHours: ptr[int64](720)})
	b.clock.advance(a2a.DefaultA2AEventRetention - time.Hour)
	b.post(t, alice, contract.PostMessageRequest{MessageID: ptr("new"), TTLHours: ptr[int64](720)})
	b.clock.advance(2 * time.Hour)
	finished, err := b.a2a.Sweeper.SweepA2A(ctx, b.clock.Now(), b.clock.Now().Add(time.Minute))
	require.NoError(t, err)
	require.True(t, finished)
	page := b.poll(t, bob, contract.PollEventsRequest{})
	require.Len(t, page.Events, 1, "a null cursor starts at the oldest retained event")
	require.Equal(t, "new", page.Events[0].CorrelationID)
	require.EqualValues(t, 2, page.Events[0].Sequence, "sequences are never reused")
	// A sweep of the same period skips the scope it finished.
	require.NotZero(t, b.count(t, `SELECT swept_at_ms FROM a2a_heads`))
}

// A window and its window_created event commit together.
func TestA2AWindowCreatedEvent(t *testing.T) {
	t.Parallel()
	b := setupA2A(t)
	windows := conversation.NewWindows(b.db.Conversation(), nil, runtime.SystemClock{})
	p := b.agent("planner")
	_, created, err := windows.CreateWindow(context.Background(), p, windowRequest("w-1", "conv-1", "original", 2, func(i int) string { return "x" }))
	require.NoError(t, err)
	require.True(t, created)
	_, created, err = windows.CreateWindow(context.Background(), p, windowRequest("w-1", "conv-1", "original", 2, func(i int) string { return "x" }))
	require.NoError(t, err)
	require.False(t, created)
	page := b.poll(t, b.agent("other"), contract.PollEventsRequest{})
	require.Equal(t, []string{"window_created"}, eventKinds(page.Events), "the retry announces nothing")
	require.Equal(t, "planner", page.Events[0].Actor)
	require.Equal(t, contract.ConsistencyLocal, page.Events[0].ConsistencyLevel)
	require.Equal(t, int64(1), b.count(t, `SELECT count(*) FROM a2a_events WHERE conversation_id = 'conv-1'`))
}

// A long poll waiting across a Postgres restart is answered by an event committed after
// the restart: the hub reconnects its listening connection and makes every poll look
// again. (The shared test server cannot be restarted, so this test runs its own.)
func TestA2ALongPollSurvivesADatabaseRestart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cluster, err := pgcluster.Start(ctx, pgcluster.Options{DataDir: filepath.Join(t.TempDir(), "pg"), Settings: pgtest.ServerSettings()})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, cluster.Stop(context.Background())) })
	require.NoError(t, postgres.Migrate(ctx, cluster.DSN()))
	pool, err := postgres.NewPool(ctx, cluster.DSN(), postgres.PoolOptions{MaxConns: 4})
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	b := setupA2AOn(t, pool)
	alice, bob := b.agent("alice"), b.agent("bob")
	b.post(t, alice, contract.PostMessageRequest{MessageID: ptr("before")})
	start := b.poll(t, bob, contract.PollEventsRequest{})

	answer := b.longPoll(t, bob, &start.NextCursor)
	awaitWaiting(t, b.hub, 1)
	require.NoError(t, cluster.Restart(ctx))
	require.Eventually(t, func() bool { return b.hub.Connects() >= 2 }, time.Minute, 10*time.Millisecond,
		"the hub reconnects")
	// The first statements after the restart may meet connections the restart closed;
	// the post is idempotent, so it is simply sent again.
	require.Eventually(t, func() bool {
		_, err := b.a2a.Messages.PostMessage(ctx, alice, &contract.PostMessageRequest{MessageID: ptr("after"), Content: ptr("hello")})
		return err == nil
	}, time.Minute, 10*time.Millisecond)
	page := <-answer
	require.NotNil(t, page)
	require.Len(t, page.Events, 1, "the waiting poll was woken by the commit after the restart")
	require.Equal(t, "after", page.Events[0].CorrelationID)
}

// A commit made while the hub cannot listen notifies nobody; once the hub is back,
// every waiting poll looks again and finds it.
func TestA2AEventHubRechecksAfterReconnecting(t *testing.T) {
	t.Parallel()
	b := setupA2A(t)
	ctx := context.Background()
	alice, bob := b.agent("alice"), b.agent("bob")
	start := b.poll(t, bob, contract.PollEventsRequest{})
	answer := b.longPoll(t, bob, &start.NextCursor)
	awaitWaiting(t, b.hub, 1)

	// Connections to the test's database are refused from a session on another one.
	adminConfig := b.pool.Config().ConnConfig.Copy()
	database := adminConfig.Database
	adminConfig.Database = "postgres"
	admin, err := pgx.ConnectConfig(ctx, adminConfig)
	require.NoError(t, err)
	defer admin.Close(ctx)
	allow := func(allowed bool) {
		t.Helper()
		_, err := admin.Exec(ctx, fmt.Sprintf(`ALTER DATABASE %s ALLOW_CONNECTIONS %t`, pgx.Identifier{database}.Sanitize(), allowed))
		require.NoError(t, err)
	}
	allow(false)
	var terminated bool
	require.NoError(t, admin.QueryRow(ctx, `
		SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE datname = $1 AND application_name LIKE '% a2a-listener'`, database).Scan(&terminated))
	require.True(t, terminated)
	// The listener is gone and cannot come back: a commit on another replica hints
	// no one here.
	_, err = b.replica(t, nil).Messages.PostMessage(ctx, alice, &contract.PostMessageRequest{MessageID: ptr("while-deaf"), Content: ptr("hi")})
	require.NoError(t, err)
	allow(true)

	page := <-answer
	require.NotNil(t, page)
	require.Len(t, page.Events, 1, "the poll looked again on its own or after the hub reconnected")
	require.Equal(t, "while-deaf", page.Events[0].CorrelationID)
	require.Eventually(t, func() bool { return b.hub.Connects() >= 2 }, time.Minute, 10*time.Millisecond, "the hub reconnects")
}

// replica is the A2A use cases of another replica on the bundle's database, whose
// units of work hint hints (nil: none, a replica that dies after each commit).
func (b *a2aBundle) replica(t testing.TB, hints postgres.EventHints) *a2a.Coordination {
	t.Helper()
	return a2a.NewCoordination(a2a.Config{DB: newDB(t, b.pool, postgres.DBOptions{Hints: hints}).A2A(),
		Cursors: runtime.NewCursorCodec(make([]byte, 32)), Clock: b.clock})
}

// A long poll whose listening connection is killed (pg_terminate_backend) is still
// answered by a commit on another replica: the hub reconnects at once and wakes
// every poll, and the poll looks again on its own within a second anyway.
func TestA2ALongPollWakesAfterItsListenerIsKilled(t *testing.T) {
	t.Parallel()
	b := setupA2A(t)
	ctx := context.Background()
	other, err := postgres.NewEventHub(ctx, b.pool, postgres.EventHubOptions{})
	require.NoError(t, err)
	t.Cleanup(other.Close)
	alice, bob := b.agent("alice"), b.agent("bob")
	start := b.poll(t, bob, contract.PollEventsRequest{})
	answer := b.longPoll(t, bob, &start.NextCursor)
	awaitWaiting(t, b.hub, 1)
	var terminated bool
	require.NoError(t, b.pool.QueryRow(ctx, `
		SELECT bool_and(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE datname = current_database() AND application_name LIKE '% a2a-listener'`).Scan(&terminated))
	require.True(t, terminated)
	require.Eventually(t, func() bool { return b.hub.Connects() >= 2 }, time.Minute, 10*time.Millisecond, "the hub reconnects")
	_, err = b.replica(t, other).Messages.PostMessage(ctx, alice, &contract.PostMessageRequest{MessageID: ptr("after-kill"), Content: ptr("hi")})
	require.NoError(t, err)
	page := <-answer
	require.NotNil(t, page)
	require.Len(t, page.Events, 1)
	require.Equal(t, "after-kill", page.Events[0].CorrelationID)
}

// A hint lost on purpose (the committing replica sends none, as one that died right
// after its commit) costs a long poll at most its one-second re-check: the poll,
// allowed five seconds, still answers with the event instead of running out empty.
func TestA2ALongPollFindsAnEventWhoseHintWasLost(t *testing.T) {
	t.Parallel()
	b := setupA2A(t)
	ctx := context.Background()
	alice, bob := b.agent("alice"), b.agent("bob")
	start := b.poll(t, bob, contract.PollEventsRequest{})
	answer := make(chan *contract.EventPage, 1)
	go func() {
		page, err := b.a2a.Events.PollEvents(ctx, bob, &contract.PollEventsRequest{Cursor: &start.NextCursor, WaitMs: ptr[int64](5000)})
		if err != nil {
			t.Errorf("long poll: %v", err)
		}
		answer <- page
	}()
	awaitWaiting(t, b.hub, 1)
	_, err := b.replica(t, nil).Messages.PostMessage(ctx, alice, &contract.PostMessageRequest{MessageID: ptr("unhinted"), Content: ptr("hi")})
	require.NoError(t, err)
	page := <-answer
	require.NotNil(t, page)
	require.Len(t, page.Events, 1, "the poll found the event by its own re-check")
	require.Equal(t, "unhinted", page.Events[0].CorrelationID)
}

// The hub's metrics: polls waiting now, connections made, tasks and messages by state.
func TestA2AMetrics(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewDB(t)
	reg := prometheus.NewPedanticRegistry()
	hub, err := postgres.NewEventHub(context.Background(), pool, postgres.EventHubOptions{Registerer: reg, MetricsRefresh: time.Nanosecond})
	require.NoError(t, err)
	t.Cleanup(hub.Close)
	b := setupA2AOn(t, pool)
	b.a2a = a2a.NewCoordination(a2a.Config{DB: newDB(t, pool, postgres.DBOptions{Hints: hub}).A2A(), Cursors: runtime.NewCursorCodec(make([]byte, 32)),
		Notifier: hub, Clock: b.clock})
	alice, bob := b.agent("alice"), b.agent("bob")
	b.post(t, alice, contract.PostMessageRequest{TTLHours: ptr[int64](1)})
	b.post(t, alice, contract.PostMessageRequest{})
	task := b.createTask(t, alice, contract.CreateTaskRequest{ToAgent: "bob"})
	_, err = b.update(bob, contract.UpdateTaskRequest{TaskID: task.ID, State: contract.TaskWorking})
	require.NoError(t, err)
	b.createTask(t, alice, contract.CreateTaskRequest{ToAgent: "bob"})

	start := b.poll(t, bob, contract.PollEventsRequest{})
	answer := b.longPoll(t, bob, &start.NextCursor)
	require.Eventually(t, func() bool { return hub.Waiting() == 1 }, time.Minute, time.Millisecond)
	gauge := func(name string, labels map[string]string) float64 {
		t.Helper()
		families, err := reg.Gather()
		require.NoError(t, err)
		for _, f := range families {
			if f.GetName() != name {
				continue
			}
		metrics:
			for _, m := range f.GetMetric() {
				for _, l := range m.GetLabel() {
					if labels[l.GetName()] != l.GetValue() {
						continue metrics
					}
				}
				if m.GetGauge() != nil {
					return m.GetGauge().GetValue()
				}
				return m.GetCounter().GetValue()
			}
		}
		t.Fatalf("no metric %s %v", name, labels)
		return 0
	}
	require.EqualValues(t, 1, gauge("agent_context_a2a_poll_waiters", nil))
	require.EqualValues(t, 1, gauge("agent_context_a2a_listener_connects_total", nil))
	require.EqualValues(t, 1, gauge("agent_context_a2a_tasks", map[string]string{"state": "working"}))
	require.EqualValues(t, 1, gauge("agent_context_a2a_tasks", map[string]string{"state": "created"}))
	require.EqualValues(t, 0, gauge("agent_context_a2a_tasks", map[string]string{"state": "failed"}))
	require.EqualValues(t, 2, gauge("agent_context_a2a_messages", map[string]string{"state": "live"}))
	b.post(t, alice, contract.PostMessageRequest{ToAgent: ptr("bob")})
	require.NotNil(t, <-answer)
	// The scope's feed stops waiting once its last poll left, on its own goroutine.
	require.Eventually(t, func() bool { return gauge("agent_context_a2a_poll_waiters", nil) == 0 },
		time.Minute, time.Millisecond)
	// The commits' hints went out to the other replicas (the sender is asynchronous).
	require.Eventually(t, func() bool { return gauge("agent_context_a2a_hint_notifications_total", nil) >= 1 },
		time.Minute, time.Millisecond)
}

// An unread read starts at the reader's watermark, which only ever covers messages the
// reader has read (or that expired): a filtered read leaves the others for later.
func TestA2AReadWatermarkNeverSkips(t *testing.T) {
	t.Parallel()
	b := setupA2A(t)
	sender, reader := b.agent("sender"), b.agent("reader")
	watermark := func() int64 {
		return b.count(t, `SELECT coalesce((SELECT seq FROM a2a_read_watermarks WHERE agent_id = 'reader'), -1)`)
	}
	post := func(req contract.PostMessageRequest) {
		b.post(t, sender, req)
		b.clock.advance(time.Millisecond)
	}
	post(contract.PostMessageRequest{MessageID: ptr("q1"), Category: ptr("question")})
	post(contract.PostMessageRequest{MessageID: ptr("n2")})
	post(contract.PostMessageRequest{MessageID: ptr("q3"), Category: ptr("question")})
	post(contract.PostMessageRequest{MessageID: ptr("p4"), ToAgent: ptr("someone-else"), Privacy: ptr("private")})
	require.Equal(t, []string{"q1", "q3"}, agentMessageIDs(b.read(t, reader, contract.ReadMessagesRequest{Category: ptr("question")})))
	require.EqualValues(t, 1, watermark(), "n2 is unread: the watermark stops below it")
	require.Equal(t, []string{"n2"}, agentMessageIDs(b.read(t, reader, contract.ReadMessagesRequest{})))
	require.EqualValues(t, 4, watermark(), "read up to the head, the private message of others included")
	post(contract.PostMessageRequest{MessageID: ptr("n5"), TTLHours: ptr[int64](1)})
	post(contract.PostMessageRequest{MessageID: ptr("n6")})
	b.clock.advance(time.Hour)
	require.Equal(t, []string{"n6"}, agentMessageIDs(b.read(t, reader, contract.ReadMessagesRequest{})))
	require.EqualValues(t, 6, watermark(), "an expired message does not hold the watermark")
	require.Equal(t, []string{"q1", "n2", "q3", "n6"}, agentMessageIDs(b.read(t, reader, contract.ReadMessagesRequest{IncludeRead: true})))
}

// The review's reproduction: identical creates of an existing task, again and again,
// while its recipient moves it between working and input-required. A create used to
// take the scope's head (its event) and then wait on the task row the change held,
// while the change waited on the head for its own event: a deadlock, answered 500.
// Now every create returns the stored task, no call fails, and there is one task.
func TestA2ACreateRetriesDuringUpdatesNeverFail(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupA2AConns(t, 8)
	creator, worker := b.agent("creator"), b.agent("worker")
	req := contract.CreateTaskRequest{ID: ptr("contested"), ToAgent: "worker", Description: ptr("keep at it")}
	b.createTask(t, creator, req)
	_, err := b.update(worker, contract.UpdateTaskRequest{TaskID: "contested", State: contract.TaskWorking})
	require.NoError(t, err)

	const creators, creates, toggles = 6, 25, 60
	var wg sync.WaitGroup
	errs := make(chan error, creators*creates+toggles)
	wg.Go(func() {
		for i := range toggles {
			state := []string{contract.TaskInputRequired, contract.TaskWorking}[i%2]
			if _, err := b.update(worker, contract.UpdateTaskRequest{TaskID: "contested", State: state}); err != nil {
				errs <- fmt.Errorf("toggle %d: %w", i, err)
			}
		}
	})
	for range creators {
		wg.Go(func() {
			for range creates {
				r := req
				task, created, err := b.a2a.Tasks.CreateTask(ctx, creator, &r)
				switch {
				case err != nil:
					errs <- fmt.Errorf("create retry: %w", err)
				case created || task.ID != "contested":
					errs <- fmt.Errorf("a retry created %q", task.ID)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.EqualValues(t, 1, b.count(t, `SELECT count(*) FROM a2a_tasks`))
	require.EqualValues(t, 1, b.count(t, `SELECT count(*) FROM a2a_events WHERE kind = 'task_created'`))
	stored, err := b.a2a.Tasks.GetTask(ctx, creator, &contract.TaskRequest{TaskID: "contested"})
	require.NoError(t, err)
	require.EqualValues(t, 2+toggles, stored.Version, "every toggle went through")
}

// Two units of work that lock two tasks in opposite orders deadlock; Postgres aborts
// one, and its unit of work runs it again, so both succeed. A function that keeps
// colliding runs DefaultTxAttempts times and then answers SERVICE_UNAVAILABLE, which
// is retryable.
func TestA2AUnitOfWorkRetriesDeadlocks(t *testing.T) {
	t.Parallel()
	b := setupA2A(t)
	ctx := context.Background()
	creator := b.agent("creator")
	for _, id := range []string{"first", "second"} {
		b.createTask(t, creator, contract.CreateTaskRequest{ID: ptr(id), ToAgent: "worker"})
	}
	var calls atomic.Int64
	bothLocked := make(chan struct{}, 2)
	lockBoth := func(a, z string) error {
		var attempt int
		return b.db.A2A().WithinTx(ctx, func(ctx context.Context, tx a2a.Stores) error {
			calls.Add(1)
			attempt++
			if _, err := tx.Tasks.LockTask(ctx, b.scope, a); err != nil {
				return err
			}
			if attempt == 1 {
				// Both first attempts hold their first lock before either takes its
				// second: a certain deadlock.
				bothLocked <- struct{}{}
				for len(bothLocked) < 2 {
					time.Sleep(time.Millisecond)
				}
			}
			_, err := tx.Tasks.LockTask(ctx, b.scope, z)
			return err
		})
	}
	var wg sync.WaitGroup
	var errA, errB error
	wg.Go(func() { errA = lockBoth("first", "second") })
	wg.Go(func() { errB = lockBoth("second", "first") })
	wg.Wait()
	require.NoError(t, errA)
	require.NoError(t, errB)
	// The victim runs again at least once; its retry may collide once more with the
	// survivor, which still waits to take the row the victim let go of.
	require.GreaterOrEqual(t, calls.Load(), int64(3), "the victim ran again")

	calls.Store(0)
	err := b.db.A2A().WithinTx(ctx, func(ctx context.Context, tx a2a.Stores) error {
		calls.Add(1)
		return &pgconn.PgError{Code: "40P01", Message: "deadlock detected"}
	})
	require.EqualValues(t, postgres.DefaultTxAttempts, calls.Load())
	require.Equal(t, contract.CodeServiceUnavailable, runtime.ErrorCode(err))
	require.True(t, contract.Codes[contract.CodeServiceUnavailable].Retryable)
}
