package postgres_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/adapters/postgres"
	"github.com/agent-context/agent-context/adapters/postgres/pgtest"
	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime/a2a"
)

// eventReads counts the statements of log that read the event log: the polls' own and
// the shared reads of their scope.
func (l *statementLog) eventReads() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, sql := range l.sql {
		if strings.Contains(sql, "FROM a2a_events") && !strings.Contains(sql, "INSERT") {
			n++
		}
	}
	return n
}

// 1,000 long polls of one scope wait on one replica; one event commits. The polls
// share the reads of their scope: the wake-up costs one read of the log, not one per
// poll, and so does each second's re-check while nothing commits; each poll still
// gets what its own filter keeps.
func TestWaitingPollsShareOneReadPerWakeUp(t *testing.T) {
	t.Parallel()
	const polls, filtered = 1000, 10
	ctx := context.Background()
	log := &statementLog{}
	pool, err := postgres.NewPool(ctx, pgtest.NewDSN(t), postgres.PoolOptions{MaxConns: 8, Tracer: log})
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	b := setupA2AOn(t, pool, a2aOptions{maxWaiters: polls + filtered})
	start := b.poll(t, b.agent("reader"), contract.PollEventsRequest{})
	pages, registrations := make(chan *contract.EventPage, polls), make(chan *contract.EventPage, filtered)
	for i := range polls + filtered {
		req, out := &contract.PollEventsRequest{Cursor: &start.NextCursor, WaitMs: ptr[int64](30_000)}, pages
		if i >= polls {
			req.Filter, out = &contract.EventFilter{Kinds: []string{contract.EventAgentRegistered}}, registrations
		}
		go func() {
			page, err := b.a2a.Events.PollEvents(ctx, b.agent(fmt.Sprintf("agent-%d", i%10)), req)
			if err != nil {
				t.Errorf("long poll: %v", err)
			}
			out <- page
		}()
	}
	// Every poll ran its first statement and waits.
	require.Eventually(t, func() bool { return log.eventReads() >= polls+filtered }, time.Minute, 10*time.Millisecond)
	time.Sleep(100 * time.Millisecond)
	// While nothing commits the scope is re-checked once a second for a lost hint:
	// once for all its polls.
	before := log.eventReads()
	time.Sleep(2500 * time.Millisecond)
	idle := log.eventReads() - before
	t.Logf("%d waiting polls, 2.5 s without a commit: %d reads of the event log", polls+filtered, idle)
	require.LessOrEqual(t, idle, 3)
	before = log.eventReads()
	b.post(t, b.agent("writer"), contract.PostMessageRequest{MessageID: ptr("wake-up")})
	for range polls {
		page := <-pages
		require.NotNil(t, page)
		require.Len(t, page.Events, 1)
		require.Equal(t, "wake-up", page.Events[0].CorrelationID)
	}
	reads := log.eventReads() - before
	t.Logf("%d waiting polls, one event: %d reads of the event log", polls+filtered, reads)
	// One read per wake-up; one more for each second that passed (the re-check for
	// lost hints), and the commit's own statements never read a2a_events.
	require.LessOrEqual(t, reads, 3)

	// The filtered polls passed over the message and answer with the registration.
	_, err = b.a2a.Agents.RegisterAgent(ctx, b.agent("newcomer"), &contract.RegisterAgentRequest{AgentType: "planner"})
	require.NoError(t, err)
	for range filtered {
		page := <-registrations
		require.NotNil(t, page)
		require.Equal(t, []string{contract.EventAgentRegistered}, eventKinds(page.Events))
	}
}

// 200 streams follow tasks of one scope on one replica (20 tasks, 10 streams each).
// They share their scope's reads with its long polls: a change of a task nobody
// follows wakes every stream and costs one read of the log, not one per stream; a
// change of a followed task reaches each of its streams at the same cost.
func TestWaitingStreamsShareOneReadPerWakeUp(t *testing.T) {
	t.Parallel()
	const tasks, perTask = 20, 10
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	log := &statementLog{}
	pool, err := postgres.NewPool(ctx, pgtest.NewDSN(t), postgres.PoolOptions{MaxConns: 8, Tracer: log})
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	b := setupA2AOn(t, pool, a2aOptions{maxWaiters: tasks * perTask})
	alice, bob := b.agent("alice"), b.agent("bob")
	create := func(description string) string {
		task, _, err := b.a2a.Tasks.CreateTask(ctx, alice, &contract.CreateTaskRequest{ToAgent: "bob", Description: &description})
		require.NoError(t, err)
		return task.ID
	}
	followed := make([]string, tasks)
	for i := range followed {
		followed[i] = create(fmt.Sprintf("followed %d", i))
	}
	quiet := create("nobody follows this one")

	type update struct {
		task string
		u    a2a.StreamUpdate
	}
	updates := make(chan update, tasks*perTask*4)
	for _, id := range followed {
		for range perTask {
			go func() {
				err := b.a2a.Events.FollowTask(ctx, alice, id, time.Hour, func(u *a2a.StreamUpdate) error {
					updates <- update{id, *u}
					return nil
				})
				if err != nil && ctx.Err() == nil {
					t.Errorf("stream of %s: %v", id, err)
				}
			}()
		}
	}
	for range tasks * perTask {
		require.Equal(t, a2a.StreamTask, (<-updates).u.Kind)
	}
	// Every stream read its task, found no event after it and follows the feed.
	time.Sleep(500 * time.Millisecond)

	before := log.eventReads()
	_, err = b.a2a.Tasks.UpdateTask(ctx, bob, &contract.UpdateTaskRequest{TaskID: quiet, State: contract.TaskWorking})
	require.NoError(t, err)
	time.Sleep(500 * time.Millisecond)
	reads := log.eventReads() - before
	t.Logf("%d waiting streams, an event of another task: %d reads of the event log", tasks*perTask, reads)
	require.LessOrEqual(t, reads, 3)
	require.Empty(t, updates, "no stream shows another task's change")

	before = log.eventReads()
	_, err = b.a2a.Tasks.UpdateTask(ctx, bob, &contract.UpdateTaskRequest{TaskID: followed[0], State: contract.TaskWorking})
	require.NoError(t, err)
	for range perTask {
		got := <-updates
		require.Equal(t, followed[0], got.task)
		require.Equal(t, a2a.StreamStatus, got.u.Kind)
		require.Equal(t, contract.TaskWorking, got.u.State)
	}
	reads = log.eventReads() - before
	t.Logf("%d waiting streams, an event of a followed task: %d reads of the event log", tasks*perTask, reads)
	require.LessOrEqual(t, reads, 3)
}
