package postgres_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/agent-context/agent-context/adapters/postgres"
	"github.com/agent-context/agent-context/adapters/postgres/pgtest"
	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
	"github.com/agent-context/agent-context/runtime/conversation"
)

type messageBundle struct {
	pool  *pgxpool.Pool
	store conversation.MessageStore
	scope runtime.Scope
}

func setupMessages(t *testing.T, opts ...postgres.DBOptions) *messageBundle {
	t.Helper()
	pool := pgtest.NewDB(t)
	return &messageBundle{
		pool:  pool,
		store: newDB(t, pool, opts...).Messages(),
		scope: runtime.Scope{TenantID: "tenant-a", ProjectID: "project-a"},
	}
}

func newMessage(conversation, id, role, content string) contract.ConversationRecord {
	return contract.ConversationRecord{Scope: contract.ConversationScope{ConversationID: conversation}, ID: id, Role: role, Content: content}
}

// all lists a whole conversation in ascending order.
func (b *messageBundle) all(t *testing.T, scope runtime.Scope, conversationID string) []contract.ConversationRecord {
	t.Helper()
	msgs, more, err := b.store.ListMessages(context.Background(), scope, conversation.MessageQuery{
		ConversationID: conversationID, Limit: 100_000, MaxBytes: 1 << 40,
	})
	require.NoError(t, err)
	require.False(t, more)
	return msgs
}

func messageIDs(msgs []contract.ConversationRecord) []string {
	out := []string{}
	for _, m := range msgs {
		out = append(out, m.ID)
	}
	return out
}

func messageSequences(msgs []contract.ConversationRecord) []int64 {
	out := []int64{}
	for _, m := range msgs {
		out = append(out, m.Sequence)
	}
	return out
}

func requireMessageError(t *testing.T, err error, code string, details map[string]any) {
	t.Helper()
	var re *runtime.Error
	require.ErrorAs(t, err, &re)
	require.Equal(t, code, re.Code, "%v", err)
	for k, v := range details {
		require.Equal(t, v, re.Details[k], "details.%s of %v", k, err)
	}
}

func TestAppendStoresRecordsWithSequenceAndTime(t *testing.T) {
	t.Parallel()
	b := setupMessages(t)
	ctx := context.Background()
	meta := newMessage("c1", "m2", contract.RoleAssistant, "hi there")
	meta.Metadata = []byte(`{"b":1,"a":[true,null]}`)
	dated := newMessage("c2", "n1", contract.RoleTool, "")
	dated.CreatedAtMs = 5
	res, err := b.store.AppendMessages(ctx, b.scope, []contract.ConversationRecord{
		newMessage("c1", "m1", contract.RoleUser, "hello"), meta, dated,
		newMessage("c1", "m3", contract.RoleSystem, "it's a \\ back'slash"),
	}, conversation.PlanAppend, 1234)
	require.NoError(t, err)
	require.Equal(t, conversation.AppendResult{Appended: 4}, res)

	got := b.all(t, b.scope, "c1")
	require.Equal(t, []contract.ConversationRecord{
		{Scope: contract.ConversationScope{ConversationID: "c1"}, ID: "m1", Role: "user", Content: "hello", Sequence: 1, CreatedAtMs: 1234},
		{Scope: contract.ConversationScope{ConversationID: "c1"}, ID: "m2", Role: "assistant", Content: "hi there", Sequence: 2, CreatedAtMs: 1234, Metadata: []byte(`{"b":1,"a":[true,null]}`)},
		{Scope: contract.ConversationScope{ConversationID: "c1"}, ID: "m3", Role: "system", Content: "it's a \\ back'slash", Sequence: 3, CreatedAtMs: 1234},
	}, got)
	require.Equal(t, []contract.ConversationRecord{{Scope: contract.ConversationScope{ConversationID: "c2"}, ID: "n1", Role: "tool", Sequence: 1, CreatedAtMs: 5}}, b.all(t, b.scope, "c2"))

	var last int64
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT last_sequence FROM conversations WHERE conversation_id = 'c1'`).Scan(&last))
	require.Equal(t, int64(3), last)
}

func TestAppendRetryIsSkipped(t *testing.T) {
	t.Parallel()
	b := setupMessages(t)
	ctx := context.Background()
	batch := []contract.ConversationRecord{newMessage("c", "m1", "user", "one"), newMessage("c", "m2", "user", "two")}
	batch[1].Metadata = []byte(`{"k":1.0}`)
	_, err := b.store.AppendMessages(ctx, b.scope, batch, conversation.PlanAppend, 1)
	require.NoError(t, err)

	// The retry spells metadata differently and carries the server-filled fields the
	// first answer showed; it is still the same content.
	retry := b.all(t, b.scope, "c")
	retry[1].Metadata = []byte(`{"k":1}`)
	res, err := b.store.AppendMessages(ctx, b.scope, append(retry, newMessage("c", "m3", "user", "three")), conversation.PlanAppend, 2)
	require.NoError(t, err)
	require.Equal(t, conversation.AppendResult{Appended: 1, SkippedIDs: []string{"m1", "m2"}}, res)
	require.Equal(t, []int64{1, 2, 3}, messageSequences(b.all(t, b.scope, "c")))

	res, err = b.store.AppendMessages(ctx, b.scope, batch, conversation.PlanAppend, 3)
	require.NoError(t, err)
	require.Equal(t, conversation.AppendResult{Appended: 0, SkippedIDs: []string{"m1", "m2"}}, res)

	// Skipped records do not move the head: the next record follows directly, also
	// after a batch that repeats a new record within itself.
	res, err = b.store.AppendMessages(ctx, b.scope, []contract.ConversationRecord{
		newMessage("c", "m4", "user", "four"), newMessage("c", "m4", "user", "four"), newMessage("c", "m1", "user", "one"),
	}, conversation.PlanAppend, 4)
	require.NoError(t, err)
	require.Equal(t, conversation.AppendResult{Appended: 1, SkippedIDs: []string{"m4", "m1"}}, res)
	require.Equal(t, int64(4), b.lastSequence(t, b.scope, "c"))
	_, err = b.store.AppendMessages(ctx, b.scope, []contract.ConversationRecord{newMessage("c", "m5", "user", "five")}, conversation.PlanAppend, 5)
	require.NoError(t, err)
	require.Equal(t, []int64{1, 2, 3, 4, 5}, messageSequences(b.all(t, b.scope, "c")))
	require.Equal(t, int64(5), b.lastSequence(t, b.scope, "c"))

	// A skipped record beside one that gives its own sequence where the head would
	// have gone anyway: the last sequence is right as claimed, the count is not.
	given := newMessage("c", "m7", "user", "seven")
	given.Sequence = 7
	res, err = b.store.AppendMessages(ctx, b.scope, []contract.ConversationRecord{newMessage("c", "m5", "user", "five"), given}, conversation.PlanAppend, 6)
	require.NoError(t, err)
	require.Equal(t, conversation.AppendResult{Appended: 1, SkippedIDs: []string{"m5"}}, res)
	require.Equal(t, int64(7), b.lastSequence(t, b.scope, "c"))
	requireCountsExact(t, b.pool)
}

// lastSequence reads a conversation's head.
func (b *messageBundle) lastSequence(t *testing.T, scope runtime.Scope, conversation string) int64 {
	t.Helper()
	var last int64
	require.NoError(t, b.pool.QueryRow(context.Background(), `
		SELECT last_sequence FROM conversations WHERE tenant_id = $1 AND project_id = $2 AND conversation_id = $3`,
		scope.TenantID, scope.ProjectID, conversation).Scan(&last))
	return last
}

func TestAppendConflictWritesNothing(t *testing.T) {
	t.Parallel()
	b := setupMessages(t)
	ctx := context.Background()
	_, err := b.store.AppendMessages(ctx, b.scope, []contract.ConversationRecord{newMessage("c", "m1", "user", "one")}, conversation.PlanAppend, 1)
	require.NoError(t, err)

	_, err = b.store.AppendMessages(ctx, b.scope, []contract.ConversationRecord{
		newMessage("c", "m2", "user", "two"), newMessage("fresh", "f1", "user", "x"),
		newMessage("c", "m1", "user", "ONE"),
	}, conversation.PlanAppend, 2)
	requireMessageError(t, err, contract.CodeIdempotencyConflict, map[string]any{"ids": []string{"m1"}})

	// A conflict within the batch does not hide one with a stored record.
	_, err = b.store.AppendMessages(ctx, b.scope, []contract.ConversationRecord{
		newMessage("c", "m7", "user", "seven"), newMessage("c", "m1", "tool", "one"), newMessage("c", "m7", "user", "SEVEN"),
	}, conversation.PlanAppend, 2)
	requireMessageError(t, err, contract.CodeIdempotencyConflict, map[string]any{"ids": []string{"m7", "m1"}})

	given := newMessage("c", "m3", "user", "three")
	given.Sequence = 1
	_, err = b.store.AppendMessages(ctx, b.scope, []contract.ConversationRecord{newMessage("c", "m2", "user", "two"), given}, conversation.PlanAppend, 3)
	requireMessageError(t, err, contract.CodeConflict, map[string]any{"reason": "sequence_conflict", "ids": []string{"m3"}})

	require.Equal(t, []string{"m1"}, messageIDs(b.all(t, b.scope, "c")))
	require.Empty(t, b.all(t, b.scope, "fresh"))
	var last int64
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT last_sequence FROM conversations WHERE conversation_id = 'c'`).Scan(&last))
	require.Equal(t, int64(1), last)
	requireCountsExact(t, b.pool)
}

func TestAppendClientSequences(t *testing.T) {
	t.Parallel()
	b := setupMessages(t)
	ctx := context.Background()
	at := func(id string, seq int64) contract.ConversationRecord {
		m := newMessage("c", id, "user", id)
		m.Sequence = seq
		return m
	}
	_, err := b.store.AppendMessages(ctx, b.scope, []contract.ConversationRecord{at("a", 10), at("b", 0), at("c", 20)}, conversation.PlanAppend, 1)
	require.NoError(t, err)
	_, err = b.store.AppendMessages(ctx, b.scope, []contract.ConversationRecord{at("d", 0)}, conversation.PlanAppend, 1)
	require.NoError(t, err)
	for _, bad := range [][]contract.ConversationRecord{{at("e", 21)}, {at("e", 5)}, {at("e", 30), at("f", 29)}} {
		_, err = b.store.AppendMessages(ctx, b.scope, bad, conversation.PlanAppend, 1)
		requireMessageError(t, err, contract.CodeConflict, map[string]any{"reason": "sequence_conflict"})
	}
	// The gaps stay: a later append continues after the highest sequence.
	_, err = b.store.AppendMessages(ctx, b.scope, []contract.ConversationRecord{at("g", 0)}, conversation.PlanAppend, 1)
	require.NoError(t, err)
	require.Equal(t, []int64{10, 11, 20, 21, 22}, messageSequences(b.all(t, b.scope, "c")))
	require.Equal(t, int64(22), b.lastSequence(t, b.scope, "c"))
	requireCountsExact(t, b.pool)
}

// Appenders whose batches span the same conversations in opposite orders, several of
// them new, neither deadlock nor lose a record: every head is claimed in ID order.
func TestConcurrentMultiConversationAppends(t *testing.T) {
	t.Parallel()
	b := setupMessages(t)
	const writers, batches = 6, 40
	conversations := []string{"a", "b", "c", "d"}
	var wg sync.WaitGroup
	errs := make(chan error, writers*batches)
	for w := range writers {
		wg.Go(func() {
			for i := range batches {
				var batch []contract.ConversationRecord
				for j := range conversations {
					c := conversations[j]
					if w%2 == 1 {
						c = conversations[len(conversations)-1-j]
					}
					batch = append(batch, newMessage(c, fmt.Sprintf("w%d-b%d", w, i), "user", "x"))
				}
				if _, err := b.store.AppendMessages(context.Background(), b.scope, batch, conversation.PlanAppend, 1); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	for _, c := range conversations {
		got := b.all(t, b.scope, c)
		require.Len(t, got, writers*batches)
		for i, m := range got {
			require.Equal(t, int64(i+1), m.Sequence)
		}
		require.Equal(t, int64(writers*batches), b.lastSequence(t, b.scope, c))
	}
	requireCountsExact(t, b.pool)
}

// Concurrent appenders of one conversation get sequences 1..N exactly: the head row's
// lock serializes them, so no sequence repeats, no gap opens, no unique violation
// escapes.
func TestConcurrentAppendersGetContiguousSequences(t *testing.T) {
	t.Parallel()
	b := setupMessages(t)
	const writers, batches, perBatch = 8, 200, 3
	var wg sync.WaitGroup
	errs := make(chan error, writers*batches)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range batches {
				batch := make([]contract.ConversationRecord, perBatch)
				for j := range batch {
					batch[j] = newMessage("shared", fmt.Sprintf("w%d-b%d-m%d", w, i, j), "user", "x")
				}
				if _, err := b.store.AppendMessages(context.Background(), b.scope, batch, conversation.PlanAppend, 1); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	got := b.all(t, b.scope, "shared")
	require.Len(t, got, writers*batches*perBatch)
	for i, m := range got {
		require.Equal(t, int64(i+1), m.Sequence)
	}
	// Each batch is contiguous: the lock is held from the first record to the last.
	for i := 0; i < len(got); i += perBatch {
		prefix := got[i].ID[:strings.LastIndex(got[i].ID, "-")]
		for j := range perBatch {
			require.Equal(t, fmt.Sprintf("%s-m%d", prefix, j), got[i+j].ID)
		}
	}
	requireCountsExact(t, b.pool)
}

func TestListMessages(t *testing.T) {
	t.Parallel()
	b := setupMessages(t)
	ctx := context.Background()
	var batch []contract.ConversationRecord
	roles := []string{"user", "assistant", "tool"}
	for i := range 9 {
		batch = append(batch, newMessage("c", fmt.Sprintf("m%d", i+1), roles[i%3], strings.Repeat("x", 10)))
	}
	_, err := b.store.AppendMessages(ctx, b.scope, batch, conversation.PlanAppend, 1)
	require.NoError(t, err)
	list := func(q conversation.MessageQuery) ([]int64, bool) {
		t.Helper()
		q.ConversationID = "c"
		if q.MaxBytes == 0 {
			q.MaxBytes = 1 << 30
		}
		msgs, more, err := b.store.ListMessages(ctx, b.scope, q)
		require.NoError(t, err)
		return messageSequences(msgs), more
	}
	seqs, more := list(conversation.MessageQuery{Limit: 4})
	require.Equal(t, []int64{1, 2, 3, 4}, seqs)
	require.True(t, more)
	seqs, more = list(conversation.MessageQuery{Limit: 5, After: 4})
	require.Equal(t, []int64{5, 6, 7, 8, 9}, seqs)
	require.False(t, more, "an exactly full last page has no successor")
	seqs, more = list(conversation.MessageQuery{Limit: 3, Descending: true})
	require.Equal(t, []int64{9, 8, 7}, seqs)
	require.True(t, more)
	seqs, more = list(conversation.MessageQuery{Limit: 3, Descending: true, After: 3})
	require.Equal(t, []int64{2, 1}, seqs)
	require.False(t, more)
	seqs, _ = list(conversation.MessageQuery{Limit: 10, Roles: []string{"assistant", "tool"}})
	require.Equal(t, []int64{2, 3, 5, 6, 8, 9}, seqs)
	// The byte budget stops a page early (with a successor), but never before one row.
	seqs, more = list(conversation.MessageQuery{Limit: 10, MaxBytes: 25})
	require.Equal(t, []int64{1, 2}, seqs)
	require.True(t, more)
	seqs, more = list(conversation.MessageQuery{Limit: 10, MaxBytes: 1})
	require.Equal(t, []int64{1}, seqs)
	require.True(t, more)
	seqs, more = list(conversation.MessageQuery{Limit: 10, After: 9})
	require.Equal(t, []int64{}, seqs)
	require.False(t, more)
}

// Paging while appenders write returns every message exactly once and in order.
func TestPagesAreStableUnderConcurrentAppends(t *testing.T) {
	t.Parallel()
	b := setupMessages(t)
	ctx := context.Background()
	appendN := func(prefix string, n int) error {
		batch := make([]contract.ConversationRecord, n)
		for i := range batch {
			batch[i] = newMessage("c", fmt.Sprintf("%s-%d", prefix, i), "user", "x")
		}
		_, err := b.store.AppendMessages(ctx, b.scope, batch, conversation.PlanAppend, 1)
		return err
	}
	require.NoError(t, appendN("seed", 50))
	done := make(chan struct{})
	var writeErr error
	go func() {
		defer close(done)
		for i := range 40 {
			if writeErr = appendN(fmt.Sprintf("live%d", i), 5); writeErr != nil {
				return
			}
		}
	}()
	var seen []int64
	var after int64
	for {
		msgs, more, err := b.store.ListMessages(ctx, b.scope, conversation.MessageQuery{
			ConversationID: "c", After: after, Limit: 7, MaxBytes: 1 << 30,
		})
		require.NoError(t, err)
		seen = append(seen, messageSequences(msgs)...)
		if len(msgs) > 0 {
			after = msgs[len(msgs)-1].Sequence
		}
		if !more {
			select {
			case <-done:
			default:
				continue // the writer is still going: keep following the tail
			}
			// One more read after the writer finished picks up its last batch.
			msgs, _, err = b.store.ListMessages(ctx, b.scope, conversation.MessageQuery{
				ConversationID: "c", After: after, Limit: 1000, MaxBytes: 1 << 30,
			})
			require.NoError(t, err)
			seen = append(seen, messageSequences(msgs)...)
			break
		}
	}
	require.NoError(t, writeErr)
	require.Len(t, seen, 250)
	for i, s := range seen {
		require.Equal(t, int64(i+1), s)
	}
}

func tombstoneConversation(t *testing.T, pool *pgxpool.Pool, scope runtime.Scope, conversation string) {
	t.Helper()
	_, err := pool.Exec(context.Background(), `
		INSERT INTO conversations (tenant_id, project_id, conversation_id, created_at_ms, deleted_at_ms)
		VALUES ($1, $2, $3, 1, 2)
		ON CONFLICT (tenant_id, project_id, conversation_id) DO UPDATE SET deleted_at_ms = 2`,
		scope.TenantID, scope.ProjectID, conversation)
	require.NoError(t, err)
}

// A deleted conversation reads as one that never existed from the moment of its
// tombstone, whether or not its rows are gone yet, and refuses appends.
func TestDeletedConversationIsInvisible(t *testing.T) {
	t.Parallel()
	b := setupMessages(t)
	ctx := context.Background()
	_, err := b.store.AppendMessages(ctx, b.scope, []contract.ConversationRecord{
		newMessage("gone", "m1", "user", "secret launch plan"), newMessage("kept", "k1", "user", "public launch plan"),
	}, conversation.PlanAppend, 1)
	require.NoError(t, err)
	tombstoneConversation(t, b.pool, b.scope, "gone")

	require.Empty(t, b.all(t, b.scope, "gone"))
	msgs, more, err := b.store.ListMessages(ctx, b.scope, conversation.MessageQuery{ConversationID: "gone", Descending: true, Limit: 50, MaxBytes: 1 << 20})
	require.NoError(t, err)
	require.Empty(t, msgs)
	require.False(t, more)
	hits, err := b.store.SearchMessages(ctx, b.scope, conversation.SearchQuery{Text: "launch plan", Limit: 10, MaxBytes: 1 << 20})
	require.NoError(t, err)
	require.Len(t, hits, 1)
	require.Equal(t, "k1", hits[0].Message.ID)
	hits, err = b.store.SearchMessages(ctx, b.scope, conversation.SearchQuery{Text: "secret", ConversationID: "gone", Limit: 10, MaxBytes: 1 << 20})
	require.NoError(t, err)
	require.Empty(t, hits)

	_, err = b.store.AppendMessages(ctx, b.scope, []contract.ConversationRecord{newMessage("kept", "k2", "user", "x"), newMessage("gone", "m2", "user", "x")}, conversation.PlanAppend, 1)
	requireMessageError(t, err, contract.CodeConflict, map[string]any{"reason": "conversation_deleted"})
	require.Equal(t, []string{"k1"}, messageIDs(b.all(t, b.scope, "kept")))

	// A tombstone without any data refuses appends as well.
	tombstoneConversation(t, b.pool, b.scope, "never")
	_, err = b.store.AppendMessages(ctx, b.scope, []contract.ConversationRecord{newMessage("never", "m1", "user", "x")}, conversation.PlanAppend, 1)
	requireMessageError(t, err, contract.CodeConflict, map[string]any{"reason": "conversation_deleted"})
}

// Two tenants (and two projects) using the same conversation and message IDs never see
// each other's records.
func TestScopesAreIsolated(t *testing.T) {
	t.Parallel()
	b := setupMessages(t)
	ctx := context.Background()
	scopes := []runtime.Scope{{TenantID: "t1", ProjectID: "p"}, {TenantID: "t2", ProjectID: "p"}, {TenantID: "t1", ProjectID: "p2"}}
	for i, s := range scopes {
		batch := []contract.ConversationRecord{newMessage("c", "m1", "user", fmt.Sprintf("zebra payload %d", i))}
		if i == 0 {
			batch = append(batch, newMessage("c", "m2", "user", "only first"))
		}
		res, err := b.store.AppendMessages(ctx, s, batch, conversation.PlanAppend, 1)
		require.NoError(t, err)
		require.Equal(t, len(batch), res.Appended, "the same IDs in another scope are new records")
	}
	for i, s := range scopes {
		got := b.all(t, s, "c")
		require.Equal(t, fmt.Sprintf("zebra payload %d", i), got[0].Content)
		require.Equal(t, int64(1), got[0].Sequence)
		hits, err := b.store.SearchMessages(ctx, s, conversation.SearchQuery{Text: "zebra", Limit: 10, MaxBytes: 1 << 20})
		require.NoError(t, err)
		require.Len(t, hits, 1)
		require.Equal(t, fmt.Sprintf("zebra payload %d", i), hits[0].Message.Content)
		hits, err = b.store.SearchMessages(ctx, s, conversation.SearchQuery{Text: "only", Limit: 10, MaxBytes: 1 << 20})
		require.NoError(t, err)
		require.Len(t, hits, map[bool]int{true: 1, false: 0}[i == 0])
	}
	tombstoneConversation(t, b.pool, scopes[1], "c")
	require.Len(t, b.all(t, scopes[0], "c"), 2, "a tombstone in another tenant changes nothing here")
	_, err := b.store.AppendMessages(ctx, scopes[0], []contract.ConversationRecord{newMessage("c", "m3", "user", "x")}, conversation.PlanAppend, 1)
	require.NoError(t, err)
}

func (b *messageBundle) search(t *testing.T, q conversation.SearchQuery) []string {
	t.Helper()
	if q.Limit == 0 {
		q.Limit = 20
	}
	if q.MaxBytes == 0 {
		q.MaxBytes = 1 << 30
	}
	hits, err := b.store.SearchMessages(context.Background(), b.scope, q)
	require.NoError(t, err)
	out := []string{}
	for i, h := range hits {
		require.Positive(t, h.Score)
		if i > 0 {
			require.LessOrEqual(t, h.Score, hits[i-1].Score)
		}
		out = append(out, h.Message.ID)
	}
	return out
}

func TestSearch(t *testing.T) {
	t.Parallel()
	b := setupMessages(t)
	ctx := context.Background()
	_, err := b.store.AppendMessages(ctx, b.scope, []contract.ConversationRecord{
		newMessage("c1", "deploy-policy", "user", "Our deployment policy: deploy on Tuesdays."),
		newMessage("c1", "deploy-only", "assistant", "The deployment finished without a policy check, long after the meeting about lunch and weather and other topics."),
		newMessage("c1", "policy-only", "user", "The POLICY document is here."),
		newMessage("c2", "deploy-policy-2", "tool", "deployment policy deployment policy"),
		newMessage("c2", "ja", "user", "東京タワーに行きました。とても高い！"),
		newMessage("c2", "zh", "assistant", "我们明天讨论部署策略和发布计划"),
		newMessage("c2", "ko", "user", "학교에서 공부했습니다"),
		newMessage("c2", "th", "user", "ภาษาไทยไม่มีช่องว่าง"),
		newMessage("c2", "apart", "user", "東京 and 京都 are different cities"),
		newMessage("c3", "mixed", "user", "Release v2.1 of café-Ünïcode ÆON, see https://example.com/x?y=1"),
		newMessage("c3", "quotes", "user", `it's a back\slash and a 'quoted' word: a & !b | c:*`),
	}, conversation.PlanAppend, 1)
	require.NoError(t, err)

	// Every word must match; the message about both words ranks first.
	require.Equal(t, []string{"deploy-policy-2", "deploy-policy", "deploy-only"},
		b.search(t, conversation.SearchQuery{Text: "Deployment policy"})[:3])
	require.ElementsMatch(t, []string{"deploy-policy", "deploy-only", "deploy-policy-2"},
		b.search(t, conversation.SearchQuery{Text: "policy deployment"}))
	require.ElementsMatch(t, []string{"deploy-policy", "policy-only", "deploy-policy-2", "deploy-only"},
		b.search(t, conversation.SearchQuery{Text: "policy"}))
	require.Empty(t, b.search(t, conversation.SearchQuery{Text: "deployment policy unicorn"}))

	// Scope and roles narrow the search.
	require.Equal(t, []string{"deploy-policy-2"}, b.search(t, conversation.SearchQuery{Text: "deployment", ConversationID: "c2"}))
	require.Equal(t, []string{"deploy-only"}, b.search(t, conversation.SearchQuery{Text: "deployment", Roles: []string{"assistant"}}))
	require.Len(t, b.search(t, conversation.SearchQuery{Text: "deployment", Limit: 2}), 2)

	// CJK and other unsegmented scripts: any substring of two or more characters.
	for query, want := range map[string]string{
		"東京タワー": "ja", "京タ": "ja", "タワ": "ja", "行きました": "ja", "高い": "ja", "とても": "ja",
		"部署策略": "zh", "讨论": "zh", "发布计划": "zh", "明天": "zh",
		"학교": "ko", "공부": "ko", "교에서": "ko", "했습니다": "ko",
		"ไทย": "th", "ช่องว่าง": "th",
		"タワー 高い": "ja", "ワ": "ja",
	} {
		require.Equal(t, []string{want}, b.search(t, conversation.SearchQuery{Text: query}), query)
	}
	// Bigrams that occur apart are no hit: 東京都 is not in "東京 and 京都".
	require.Empty(t, b.search(t, conversation.SearchQuery{Text: "東京都"}))
	require.ElementsMatch(t, []string{"ja", "apart"}, b.search(t, conversation.SearchQuery{Text: "東京"}))
	require.ElementsMatch(t, []string{"zh"}, b.search(t, conversation.SearchQuery{Text: "策"}))

	// Case, diacritics as written, punctuation-separated words.
	require.Equal(t, []string{"mixed"}, b.search(t, conversation.SearchQuery{Text: "CAFÉ ünïcode æon"}))
	require.Equal(t, []string{"mixed"}, b.search(t, conversation.SearchQuery{Text: "v2 example.com"}))
	require.Empty(t, b.search(t, conversation.SearchQuery{Text: "cafe"}))

	// Operator-laden and SQL-looking queries are words, never syntax.
	require.Equal(t, []string{"quotes"}, b.search(t, conversation.SearchQuery{Text: "a & !b | c:*"}))
	require.Equal(t, []string{"quotes"}, b.search(t, conversation.SearchQuery{Text: `'quoted' back\slash it's`}))
	for _, q := range []string{
		"'; DROP TABLE messages; --", "<->", "a <-> b", "!!!", "(((", "'", `\`, "''", `\'`, "a:*", "a:AB", "*:*",
		"& | ! ( ) < > -", "%", "_", "\u0000", "\ufffd", "🙂", "a\u0301", strings.Repeat("ab ", 1300),
		strings.Repeat("x", 4000), strings.Repeat("漢", 1300),
	} {
		b.search(t, conversation.SearchQuery{Text: q})
	}
}

func TestSearchByteBudget(t *testing.T) {
	t.Parallel()
	b := setupMessages(t)
	var batch []contract.ConversationRecord
	for i := range 5 {
		batch = append(batch, newMessage("c", fmt.Sprintf("m%d", i), "user", "needle "+strings.Repeat("hay ", 10*(i+1))))
	}
	_, err := b.store.AppendMessages(context.Background(), b.scope, batch, conversation.PlanAppend, 1)
	require.NoError(t, err)
	require.Len(t, b.search(t, conversation.SearchQuery{Text: "needle"}), 5)
	require.Len(t, b.search(t, conversation.SearchQuery{Text: "needle", MaxBytes: 140}), 2)
	require.Len(t, b.search(t, conversation.SearchQuery{Text: "needle", MaxBytes: 1}), 1)
}

// The largest contents index without hitting Postgres's tsvector limits, whatever
// they hold, and stay searchable.
func TestLargeContentsAreIndexed(t *testing.T) {
	t.Parallel()
	b := setupMessages(t)
	rng := rand.New(rand.NewPCG(1, 2))
	var han strings.Builder
	for han.Len() < contract.MaxMessageContentBytes-3 {
		han.WriteRune(rune(0x4E00 + rng.IntN(20000)))
	}
	var words strings.Builder
	for words.Len() < contract.MaxMessageContentBytes-20 {
		fmt.Fprintf(&words, "w%x ", rng.Uint64())
	}
	batch := []contract.ConversationRecord{
		newMessage("c", "han", "user", han.String()),
		newMessage("c", "words", "user", words.String()),
		newMessage("c", "one-word", "user", strings.Repeat("é", contract.MaxMessageContentBytes/2)),
		newMessage("c", "quotes", "user", strings.Repeat(`'\`, contract.MaxMessageContentBytes/2)),
		// Past the content whose documents are built ahead: built as the COPY streams.
		newMessage("c", "late", "user", "zebracorn "+strings.Repeat("x", 1000)),
	}
	_, err := b.store.AppendMessages(context.Background(), b.scope, batch, conversation.PlanAppend, 1)
	require.NoError(t, err)
	first := []rune(han.String())[:3]
	require.Contains(t, b.search(t, conversation.SearchQuery{Text: string(first)}), "han")
	require.Contains(t, b.search(t, conversation.SearchQuery{Text: strings.Fields(words.String())[0]}), "words")
	require.Equal(t, []string{"one-word"}, b.search(t, conversation.SearchQuery{Text: strings.Repeat("É", 300)}))
	require.Equal(t, []string{"late"}, b.search(t, conversation.SearchQuery{Text: "zebracorn"}))
}

// A search that outlives its statement timeout is SERVICE_UNAVAILABLE with reason
// statement_timeout. Another transaction holding the table's exclusive lock makes the
// search wait until the timeout fires.
func TestSearchStatementTimeout(t *testing.T) {
	t.Parallel()
	b := setupMessages(t, postgres.DBOptions{SearchTimeout: 50 * time.Millisecond})
	ctx := context.Background()
	tx, err := b.pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, "LOCK TABLE messages IN ACCESS EXCLUSIVE MODE")
	require.NoError(t, err)
	_, err = b.store.SearchMessages(ctx, b.scope, conversation.SearchQuery{Text: "anything", Limit: 10, MaxBytes: 1 << 20})
	requireMessageError(t, err, contract.CodeServiceUnavailable, map[string]any{"reason": "statement_timeout"})
}
