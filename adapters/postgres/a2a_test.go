package postgres_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/adapters/postgres"
	"github.com/agent-context/agent-context/adapters/postgres/pgtest"
	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
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
	a2a   *runtime.A2A
	clock *a2aClock
	scope runtime.Scope
}

type a2aOptions struct {
	maxMessages int
	sweepBatch  int
}

func setupA2A(t testing.TB, opts ...a2aOptions) *a2aBundle {
	t.Helper()
	return setupA2AOn(t, pgtest.NewDB(t), opts...)
}

func setupA2AOn(t testing.TB, pool *pgxpool.Pool, opts ...a2aOptions) *a2aBundle {
	t.Helper()
	var o a2aOptions
	if len(opts) > 0 {
		o = opts[0]
	}
	db := newDB(t, pool)
	hub, err := postgres.NewEventHub(context.Background(), pool, postgres.EventHubOptions{})
	require.NoError(t, err)
	t.Cleanup(hub.Close)
	clock := &a2aClock{}
	clock.ms.Store(a2aStartMs)
	return &a2aBundle{
		pool: pool, db: db, hub: hub, clock: clock, scope: runtime.Scope{TenantID: "tenant-a", ProjectID: "project-a"},
		a2a: runtime.NewA2A(runtime.A2AConfig{
			DB: db, Cursors: runtime.NewCursorCodec(make([]byte, 32)), Notifier: hub, Clock: clock,
			MaxMessages: o.maxMessages, SweepBatch: o.sweepBatch,
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
	ack, err := b.a2a.PostMessage(context.Background(), p, &req)
	require.NoError(t, err)
	return *ack
}

func (b *a2aBundle) read(t testing.TB, p runtime.Principal, req contract.ReadMessagesRequest) []contract.AgentMessage {
	t.Helper()
	res, err := b.a2a.ReadMessages(context.Background(), p, &req)
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
	page, err := b.a2a.PollEvents(context.Background(), p, &req)
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
	// A re-post of an evicted ID is a new message; one of a live ID a duplicate.
	require.Equal(t, contract.AckAccepted, b.post(t, sender, contract.PostMessageRequest{MessageID: ptr("m0")}).Status)
	require.Equal(t, contract.AckDuplicate, b.post(t, sender, contract.PostMessageRequest{MessageID: ptr("m4")}).Status)
	b.requireLiveCount(t, 3)
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
	finished, err := b.a2a.SweepA2A(context.Background(), b.clock.Now(), b.clock.Now().Add(time.Minute))
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
	for range 8 {
		wg.Go(func() {
			for {
				msgs := b.read(t, reader, contract.ReadMessagesRequest{Limit: ptr(3)})
				if len(msgs) == 0 {
					return
				}
				mu.Lock()
				got = append(got, agentMessageIDs(msgs)...)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	slices.Sort(got)
	require.Len(t, got, n, "every message delivered exactly once")
	require.Len(t, slices.Compact(got), n)
	require.Empty(t, b.read(t, reader, contract.ReadMessagesRequest{}))
	require.Len(t, b.read(t, reader, contract.ReadMessagesRequest{IncludeRead: true, Limit: ptr(500)}), n)
	// Another agent's read state is its own.
	require.Len(t, b.read(t, b.agent("other"), contract.ReadMessagesRequest{Limit: ptr(500)}), n)
}
