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
