package postgres_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/adapters/postgres"
	"github.com/agent-context/agent-context/adapters/postgres/pgtest"
	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
	"github.com/agent-context/agent-context/runtime/a2a"
	"github.com/agent-context/agent-context/runtime/conversation"
	"github.com/agent-context/agent-context/runtime/memory"
)

// statementLog records the SQL of every statement and batched statement a pool sends,
// but those of the event hub's hint sender: that session writes nothing, and notifying
// is its one purpose.
type statementLog struct {
	mu  sync.Mutex
	sql []string
}

func (l *statementLog) add(sql string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sql = append(l.sql, sql)
}

func (l *statementLog) TraceQueryStart(ctx context.Context, conn *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	if !strings.HasSuffix(conn.Config().RuntimeParams["application_name"], "a2a-hints") {
		l.add(data.SQL)
	}
	return ctx
}

func (l *statementLog) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (l *statementLog) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}

func (l *statementLog) TraceBatchQuery(_ context.Context, _ *pgx.Conn, data pgx.TraceBatchQueryData) {
	l.add(data.SQL)
}

func (l *statementLog) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

var notifySQL = regexp.MustCompile(`(?i)\bpg_notify\b|\bnotify\s`)

// No statement a writing transaction sends notifies: every write that appends events
// (messages, tasks, envelopes' kin, agents, windows, entries with their jobs) runs on a traced pool, and none
// of its statements names NOTIFY or pg_notify; the one statement of the adapter that
// does is the hub's, on its own connection, and writes nothing. Yet a waiting poll is
// woken by those writes (the hints after commit).
func TestNoWritingTransactionNotifies(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	log := &statementLog{}
	pool, err := postgres.NewPool(ctx, pgtest.NewDSN(t), postgres.PoolOptions{MaxConns: 4, Tracer: log})
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	b := setupA2AOn(t, pool)
	alice, bob := b.agent("alice"), b.agent("bob")
	start := b.poll(t, bob, contract.PollEventsRequest{})
	answer := b.longPoll(t, bob, &start.NextCursor)
	awaitWaiting(t, b.hub, 1)

	b.post(t, alice, contract.PostMessageRequest{MessageID: ptr("m-1"), ToAgent: ptr("bob")})
	_, err = b.a2a.Agents.RegisterAgent(ctx, alice, &contract.RegisterAgentRequest{AgentType: "planner"})
	require.NoError(t, err)
	task := b.createTask(t, alice, contract.CreateTaskRequest{ID: ptr("t-1"), ToAgent: "bob"})
	_, err = b.update(bob, contract.UpdateTaskRequest{TaskID: task.ID, State: contract.TaskWorking})
	require.NoError(t, err)
	_, err = b.a2a.Tasks.CancelTask(ctx, alice, &contract.CancelTaskRequest{TaskID: task.ID})
	require.NoError(t, err)
	windows := conversation.NewWindows(b.db.Conversation(), nil, runtime.SystemClock{})
	_, _, err = windows.CreateWindow(ctx, alice, windowRequest("w-1", "conv-1", "original", 2, func(int) string { return "x" }))
	require.NoError(t, err)
	// An entry enqueues its projection job in its transaction: River sends no
	// notification for it (quietDriver).
	entries := memory.NewEntries(b.db.Memory(), nil, runtime.SystemClock{}, memory.EmbeddingModel{ID: "hash-64", Dimensions: 64})
	_, _, err = entries.Create(ctx, alice, &contract.CreateEntryRequest{ID: ptr("e-1"), Kind: "fact", Content: "x"})
	require.NoError(t, err)
	page := <-answer
	require.NotNil(t, page)
	require.Equal(t, "m-1", page.Events[0].CorrelationID, "the commit's hint woke the poll")

	log.mu.Lock()
	defer log.mu.Unlock()
	require.NotEmpty(t, log.sql)
	for _, sql := range log.sql {
		require.NotRegexp(t, notifySQL, sql)
	}
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	var notifying []string
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		require.NoError(t, err)
		if notifySQL.Match(src) && strings.Contains(string(src), "pg_notify(") {
			notifying = append(notifying, f)
		}
	}
	require.Equal(t, []string{"listen.go"}, notifying, "only the hub's hint sender notifies")
}

// Thirty-two writers append to eight scopes at once, each event in a transaction of
// its own that lingers a little after numbering; one transaction of the first scope
// numbers its event and then holds its commit back while every other scope's writers
// finish (they never wait on it) and a poller reads past everything committed. Per
// scope, a poller running all along sees every event exactly once, in sequence order,
// without a gap: the late committer is never skipped.
func TestEventPollersSeeEveryEventOnceUnderConcurrentWriters(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const scopes, writers, perWriter = 8, 32, 12
	// A connection for every writer, poller and the late committer: the writers queued
	// behind the held transaction must not starve the others of connections.
	pool, err := postgres.NewPool(ctx, pgtest.NewDSN(t), postgres.PoolOptions{MaxConns: writers + scopes + 2})
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	b := setupA2AOn(t, pool)
	scopeOf := func(i int) runtime.Scope {
		return runtime.Scope{TenantID: fmt.Sprintf("tenant-%d", i), ProjectID: "p"}
	}
	reader := func(i int) runtime.Principal {
		return runtime.Principal{Scope: scopeOf(i), Subject: "reader", Capabilities: map[string]bool{contract.CapA2ARead: true}}
	}
	appendOne := func(ctx context.Context, tx a2a.Stores, scope runtime.Scope, id string) error {
		_, err := tx.Events.AppendEvents(ctx, scope, []runtime.NewEvent{memory.EntryWrittenEvent("writer", id, "", "created", 1)})
		return err
	}

	// The late committer: numbered first in scope 0, committed last.
	numbered, release, lateDone := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		lateDone <- b.db.A2A().WithinTx(ctx, func(ctx context.Context, tx a2a.Stores) error {
			if err := appendOne(ctx, tx, scopeOf(0), "late"); err != nil {
				return err
			}
			close(numbered)
			<-release
			return nil
		})
	}()
	<-numbered

	var wg sync.WaitGroup
	errs := make(chan error, writers)
	written := make([][]string, scopes)
	var writtenMu sync.Mutex
	others := make(chan struct{})
	var otherWriters sync.WaitGroup
	for w := range writers {
		scope := w % scopes
		wg.Add(1)
		if scope != 0 {
			otherWriters.Add(1)
		}
		go func() {
			defer wg.Done()
			if scope != 0 {
				defer otherWriters.Done()
			}
			for i := range perWriter {
				id := fmt.Sprintf("e-%d-%d", w, i)
				err := b.db.A2A().WithinTx(ctx, func(ctx context.Context, tx a2a.Stores) error {
					if err := appendOne(ctx, tx, scopeOf(scope), id); err != nil {
						return err
					}
					time.Sleep(time.Duration(rand.IntN(500)) * time.Microsecond)
					return nil
				})
				if err != nil {
					errs <- err
					return
				}
				writtenMu.Lock()
				written[scope] = append(written[scope], id)
				writtenMu.Unlock()
			}
		}()
	}
	go func() { otherWriters.Wait(); close(others) }()

	// Pollers, one per scope, from before the first commit to after the last.
	done := make(chan struct{})
	seen := make([][]contract.Event, scopes)
	var pollers sync.WaitGroup
	for s := range scopes {
		pollers.Go(func() {
			var cursor *string
			for finished := false; ; {
				select {
				case <-done:
					finished = true
				default:
				}
				page, err := b.a2a.Events.PollEvents(ctx, reader(s), &contract.PollEventsRequest{Cursor: cursor, Limit: ptr(7)})
				if err != nil {
					t.Errorf("poll scope %d: %v", s, err)
					return
				}
				seen[s] = append(seen[s], page.Events...)
				cursor = &page.NextCursor
				if finished && len(page.Events) == 0 {
					return
				}
			}
		})
	}

	// Every other scope's writers finish while scope 0's head is held.
	select {
	case <-others:
	case err := <-errs:
		require.NoError(t, err)
	case <-time.After(time.Minute):
		t.Fatal("the other scopes' writers waited on scope 0's open transaction")
	}
	// A poller of scope 0 sees nothing yet: nothing numbered after the late
	// committer can have committed.
	held := b.poll(t, reader(0), contract.PollEventsRequest{})
	require.Empty(t, held.Events)
	close(release)
	require.NoError(t, <-lateDone)
	wg.Wait()
	close(done)
	pollers.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}

	for s := range scopes {
		ids := make([]string, len(seen[s]))
		for i, e := range seen[s] {
			require.EqualValues(t, i+1, e.Sequence, "scope %d: in order, none skipped, none twice", s)
			ids[i] = e.CorrelationID // an entry without a conversation correlates by its ID
		}
		want := written[s]
		if s == 0 {
			want = append([]string{"late"}, want...)
		}
		require.ElementsMatch(t, want, ids, "scope %d: every event exactly once", s)
		if s == 0 {
			require.Equal(t, "late", ids[0], "the late committer keeps its place")
		}
	}
}
